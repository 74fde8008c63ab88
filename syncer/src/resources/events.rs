//! Events (`fromHost.events`): host events about synced host pods are copied onto their
//! virtual pods, one virtual event per host event, updated as the host's count grows. The
//! host side is only read, and events the syncer wrote itself are never copied.

use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, Mutex},
};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::{
    Api, ResourceExt,
    runtime::{reflector::ObjectRef, watcher},
};
use vnest_crds::meta::{ANNOTATION_OBJECT_NAME, ANNOTATION_OBJECT_NAMESPACE};

use crate::{
    cache,
    cache::Cache,
    engine::{self, Ctx, Queue},
    translate::event::{VirtualObject, is_own, virtual_event},
};

/// Events are copied by a few workers: each is one write to the virtual API server.
const WORKERS: usize = 4;

/// The host events to copy. No cache holds every host event (a pod has several, and they
/// stay an hour): an event waits here only until it is copied, and of a copied one only
/// its resourceVersion is kept, so an unchanged event (a relist) is not written again.
#[derive(Default)]
struct Backlog {
    /// Host event name → its latest version not yet copied.
    pending: HashMap<String, Arc<Event>>,
    /// Host event name → the resourceVersion last copied; dropped when the host event goes.
    copied: HashMap<String, String>,
    /// Names seen since a relist began, to forget the events deleted while disconnected.
    relisted: Option<HashSet<String>>,
}

impl Backlog {
    /// Takes in one change of the host event watch; returns the name to copy, if any.
    fn observe(&mut self, change: watcher::Event<Event>) -> Option<String> {
        match change {
            watcher::Event::Init => {
                self.relisted = Some(HashSet::new());
                None
            }
            watcher::Event::InitDone => {
                if let Some(seen) = self.relisted.take() {
                    self.copied.retain(|name, _| seen.contains(name));
                    self.pending.retain(|name, _| seen.contains(name));
                }
                None
            }
            watcher::Event::Delete(event) => {
                let name = event.name_any();
                self.pending.remove(&name);
                self.copied.remove(&name);
                None
            }
            watcher::Event::Apply(event) | watcher::Event::InitApply(event) => {
                let name = event.name_any();
                if let Some(seen) = self.relisted.as_mut() {
                    seen.insert(name.clone());
                }
                let version = event.resource_version().unwrap_or_default();
                if is_own(&event) || self.copied.get(&name) == Some(&version) {
                    return None;
                }
                self.pending.insert(name.clone(), Arc::new(event));
                Some(name)
            }
        }
    }

    /// The version of host event `name` waiting to be copied.
    fn next(&self, name: &str) -> Option<Arc<Event>> {
        self.pending.get(name).cloned()
    }

    /// Host event `name` is done at `version` (copied, or nothing to copy it to): it leaves
    /// the backlog unless a newer version came in meanwhile.
    fn done(&mut self, name: &str, version: String) {
        if self
            .pending
            .get(name)
            .is_some_and(|e| e.resource_version().as_ref() == Some(&version))
        {
            self.pending.remove(name);
        }
        self.copied.insert(name.to_string(), version);
    }
}

struct Copier {
    ctx: Arc<Ctx>,
    backlog: Mutex<Backlog>,
    host_pods: Cache<Pod>,
    virt_pods: Cache<Pod>,
}

impl Copier {
    fn backlog(&self) -> std::sync::MutexGuard<'_, Backlog> {
        self.backlog.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The synced host pod `name` (from the cache, else live: the event may be quicker).
    async fn host_pod(&self, name: &str) -> anyhow::Result<Option<Arc<Pod>>> {
        let host_ns = &self.ctx.target.host_namespace;
        if let Some(p) = self.host_pods.get(&ObjectRef::new(name).within(host_ns)) {
            return Ok(Some(p));
        }
        let api: Api<Pod> = Api::namespaced(self.ctx.host.clone(), host_ns);
        Ok(api.get_opt(name).await?.map(Arc::new))
    }

    async fn reconcile(&self, name: &str) -> anyhow::Result<()> {
        let Some(event) = self.backlog().next(name) else {
            return Ok(());
        };
        let version = event.resource_version().unwrap_or_default();
        self.copy(name, &event).await?;
        self.backlog().done(name, version);
        Ok(())
    }

    /// Copies host event `name` onto the virtual pod its host pod stands for, if any.
    async fn copy(&self, name: &str, event: &Event) -> anyhow::Result<()> {
        let host_ns = &self.ctx.target.host_namespace;
        let Some(host_object) = event.involved_object.name.clone() else {
            return Ok(());
        };
        // Only pods the syncer made: their annotations name the virtual pod.
        let Some(host_pod) = self.host_pod(&host_object).await? else {
            return Ok(());
        };
        let a = host_pod.annotations();
        let (Some(vns), Some(vname)) = (
            a.get(ANNOTATION_OBJECT_NAMESPACE),
            a.get(ANNOTATION_OBJECT_NAME),
        ) else {
            return Ok(());
        };
        if !self.ctx.namespace_synced(vns) {
            return Ok(());
        }
        let Some(virt) = self.virt_pods.get(&ObjectRef::new(vname).within(vns)) else {
            return Ok(());
        };
        let target = VirtualObject {
            kind: "Pod".into(),
            api_version: "v1".into(),
            namespace: vns.clone(),
            name: vname.clone(),
            uid: virt.uid().unwrap_or_default(),
        };
        let copy = virtual_event(event, host_ns, &host_object, &target);
        let api: Api<Event> = Api::namespaced(self.ctx.virt.clone(), vns);
        engine::apply(&api, &copy.name_any(), &copy)
            .await
            .map_err(|e| {
                anyhow::anyhow!(
                    "failed to copy host event {name} to virtual pod {vns}/{vname}: {e}"
                )
            })?;
        Ok(())
    }
}

/// Copies host pod events until the watch ends; `host_pods` and `virt_pods` are the pod
/// engine's caches.
pub async fn run(ctx: Arc<Ctx>, host_pods: Cache<Pod>, virt_pods: Cache<Pod>) {
    let queue = Queue::default();
    let api: Api<Event> = Api::namespaced(ctx.host.clone(), &ctx.target.host_namespace);
    let config = watcher::Config::default().fields("involvedObject.kind=Pod");
    let copier = Arc::new(Copier {
        ctx,
        backlog: Mutex::default(),
        host_pods,
        virt_pods,
    });
    let watch = cache::watch(api, config).for_each({
        let (copier, queue) = (copier.clone(), queue.clone());
        move |change| {
            match change {
                Ok(change) => {
                    if let Some(name) = copier.backlog().observe(change) {
                        queue.push((String::new(), name));
                    }
                }
                Err(e) => tracing::warn!(error = %e, "host event watch failed; retrying"),
            }
            futures::future::ready(())
        }
    });
    let work = futures::future::join_all((0..WORKERS).map(|_| {
        let (copier, queue) = (copier.clone(), queue.clone());
        async move {
            let ready = futures::join!(
                copier.host_pods.wait_until_ready(),
                copier.virt_pods.wait_until_ready()
            );
            if ready.0.is_err() || ready.1.is_err() {
                return;
            }
            engine::work(&copier.ctx, &queue, "Event", |key| {
                let copier = &copier;
                async move { copier.reconcile(&key.1).await }
            })
            .await;
        }
    }));
    futures::join!(watch, work);
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn event(name: &str, version: &str, component: &str) -> Event {
        serde_json::from_value(json!({
            "metadata": { "name": name, "namespace": "host-ns", "resourceVersion": version },
            "involvedObject": { "kind": "Pod", "name": "web-0-x-shop-x-vc" },
            "source": { "component": component },
        }))
        .unwrap()
    }

    fn apply(name: &str, version: &str) -> watcher::Event<Event> {
        watcher::Event::Apply(event(name, version, "default-scheduler"))
    }

    /// An event is held until it is copied; then only its version is, and the same version
    /// seen again (a relist) is not copied twice; a new version is.
    #[test]
    fn a_copied_event_leaves_the_backlog_and_is_copied_again_only_when_it_changes() {
        let mut backlog = Backlog::default();
        assert_eq!(backlog.observe(apply("e1", "1")).as_deref(), Some("e1"));
        assert_eq!(
            backlog.next("e1").unwrap().resource_version().as_deref(),
            Some("1")
        );
        backlog.done("e1", "1".into());
        assert!(backlog.next("e1").is_none() && backlog.pending.is_empty());
        assert_eq!(backlog.observe(apply("e1", "1")), None);
        assert_eq!(backlog.observe(apply("e1", "2")).as_deref(), Some("e1"));
    }

    /// A newer version arriving while an older one is copied stays to be copied next.
    #[test]
    fn a_version_that_arrives_during_a_copy_stays() {
        let mut backlog = Backlog::default();
        backlog.observe(apply("e1", "1"));
        let copying = backlog.next("e1").unwrap();
        backlog.observe(apply("e1", "2"));
        backlog.done("e1", copying.resource_version().unwrap());
        assert_eq!(
            backlog.next("e1").unwrap().resource_version().as_deref(),
            Some("2")
        );
    }

    /// The syncer's own events are never copied.
    #[test]
    fn the_syncers_own_events_are_not_copied() {
        let mut backlog = Backlog::default();
        let own = watcher::Event::Apply(event("e1", "1", crate::translate::event::REPORTER));
        assert_eq!(backlog.observe(own), None);
        assert!(backlog.pending.is_empty());
    }

    /// A deleted event, or one gone from a relist (deleted while the watch was down), is
    /// forgotten; the others the relist shows again are not copied again.
    #[test]
    fn deleted_events_are_forgotten_including_those_a_relist_no_longer_shows() {
        let mut backlog = Backlog::default();
        for name in ["e1", "e2", "e3"] {
            backlog.observe(apply(name, "1"));
            backlog.done(name, "1".into());
        }
        backlog.observe(watcher::Event::Delete(event("e1", "1", "x")));
        assert!(!backlog.copied.contains_key("e1"));
        backlog.observe(watcher::Event::Init);
        let again = backlog.observe(watcher::Event::InitApply(event("e2", "1", "x")));
        backlog.observe(watcher::Event::InitDone);
        assert_eq!(again, None);
        assert_eq!(backlog.copied.keys().collect::<Vec<_>>(), ["e2"]);
    }
}
