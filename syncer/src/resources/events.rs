//! Events (`fromHost.events`): host events about synced host pods are copied onto their
//! virtual pods, one virtual event per host event, updated as the host's count grows. The
//! host side is only read, and events the syncer wrote itself are never copied.

use std::{collections::HashMap, sync::Arc, sync::Mutex};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::{
    Api, ResourceExt,
    runtime::{
        WatchStreamExt,
        reflector::{self, ObjectRef},
        watcher,
    },
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

struct Copier {
    ctx: Arc<Ctx>,
    events: Cache<Event>,
    host_pods: Cache<Pod>,
    virt_pods: Cache<Pod>,
    /// Host event name → the resourceVersion last copied, so an unchanged event (a resync,
    /// a restart's first list) is not written again. Dropped when the host event goes.
    copied: Mutex<HashMap<String, String>>,
}

impl Copier {
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
        let host_ns = &self.ctx.target.host_namespace;
        let lock = || self.copied.lock().unwrap_or_else(|e| e.into_inner());
        let Some(event) = self.events.get(&ObjectRef::new(name).within(host_ns)) else {
            lock().remove(name);
            return Ok(());
        };
        let version = event.resource_version().unwrap_or_default();
        if is_own(&event) || lock().get(name) == Some(&version) {
            return Ok(());
        }
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
        let copy = virtual_event(&event, host_ns, &host_object, &target);
        let api: Api<Event> = Api::namespaced(self.ctx.virt.clone(), vns);
        engine::apply(&api, &copy.name_any(), &copy)
            .await
            .map_err(|e| {
                anyhow::anyhow!(
                    "failed to copy host event {name} to virtual pod {vns}/{vname}: {e}"
                )
            })?;
        lock().insert(name.to_string(), version);
        Ok(())
    }
}

/// Copies host pod events until the watch ends; `host_pods` and `virt_pods` are the pod
/// engine's caches.
pub async fn run(ctx: Arc<Ctx>, host_pods: Cache<Pod>, virt_pods: Cache<Pod>) {
    let queue = Queue::default();
    let (events, writer) = crate::cache::store();
    let api: Api<Event> = Api::namespaced(ctx.host.clone(), &ctx.target.host_namespace);
    let config = watcher::Config::default().fields("involvedObject.kind=Pod");
    let watch = reflector::reflector(writer, cache::watch(api, config))
        .touched_objects()
        .for_each({
            let queue = queue.clone();
            move |e| {
                match e {
                    Ok(e) => queue.push((String::new(), e.name_any())),
                    Err(e) => tracing::warn!(error = %e, "host event watch failed; retrying"),
                }
                futures::future::ready(())
            }
        });
    let copier = Arc::new(Copier {
        ctx,
        events,
        host_pods,
        virt_pods,
        copied: Mutex::default(),
    });
    let work = futures::future::join_all((0..WORKERS).map(|_| {
        let (copier, queue) = (copier.clone(), queue.clone());
        async move {
            let ready = futures::join!(
                copier.events.wait_until_ready(),
                copier.host_pods.wait_until_ready(),
                copier.virt_pods.wait_until_ready()
            );
            if ready.0.is_err() || ready.1.is_err() || ready.2.is_err() {
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
