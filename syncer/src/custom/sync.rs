//! The sync of one resolved custom resource, both directions on one runner: to-host mirrors
//! tenant objects into the host namespace (status comes back), from-host keeps read-only
//! copies of host objects in the virtual cluster ([`super::object`] decides every field).

use std::sync::Arc;

use anyhow::Context as _;
use futures::stream;
use kube::{
    Api, Client, Resource, ResourceExt,
    api::{DeleteParams, DynamicObject},
    runtime::{
        reflector::{ObjectRef, reflector, store::Writer},
        watcher,
    },
};
use serde_json::{Value, json};
use vnest_crds::{
    meta::{LABEL_FROM_HOST, LABEL_SYNCER_MANAGED_BY},
    translate::managed_by_selector,
};

use super::{gateway, key::Direction, object, resolve::Resolved};
use crate::{
    cache,
    cache::Cache,
    engine::{
        self, Ctx, Key, Queue, Referrals, is_not_found,
        runner::{self, Loop, Side},
        virtual_key,
    },
};

/// Workers per custom resource.
const WORKERS: usize = 4;

struct Runner {
    ctx: Arc<Ctx>,
    res: Arc<Resolved>,
    virt: Cache<DynamicObject>,
    host: Cache<DynamicObject>,
    queue: Queue,
}

/// An API of the resource on `client`, in `namespace` when it is namespaced.
pub fn api(res: &Resolved, client: &Client, namespace: Option<&str>) -> Api<DynamicObject> {
    match namespace.filter(|_| res.namespaced) {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &res.resource),
        None => Api::all_with(client.clone(), &res.resource),
    }
}

fn object_ref(res: &Resolved, name: &str, namespace: &str) -> ObjectRef<DynamicObject> {
    let r = ObjectRef::new_with(name, res.resource.clone());
    if res.namespaced {
        r.within(namespace)
    } else {
        r
    }
}

/// Runs the sync of `res` until its watches end.
pub async fn run(ctx: Arc<Ctx>, res: Arc<Resolved>) {
    let virt_cache = cache::store_of(res.resource.clone());
    run_sharing(ctx, res, virt_cache, Vec::new()).await;
}

/// As [`run`], filling the virtual cache through its writer (another sync reads it) and
/// handing every virtual object that changes to `referrals` (another sync follows what it
/// names).
pub async fn run_sharing(
    ctx: Arc<Ctx>,
    res: Arc<Resolved>,
    (virt, virt_writer): (Cache<DynamicObject>, Writer<DynamicObject>),
    referrals: Vec<Referrals<DynamicObject>>,
) {
    let kind = res.name();
    let (host, host_writer) = cache::store_of(res.resource.clone());
    let (virt_config, host_api, host_config) = match res.direction {
        Direction::ToHost => (
            watcher::Config::default(),
            api(&res, &ctx.host, Some(&ctx.target.host_namespace)),
            watcher::Config::default().labels(&managed_by_selector(&ctx.target.vc)),
        ),
        // Host objects of any vnest's mirrors are not the host's own.
        Direction::FromHost => (
            watcher::Config::default().labels(LABEL_FROM_HOST),
            api(&res, &ctx.host, None),
            watcher::Config::default().labels(&format!("!{LABEL_SYNCER_MANAGED_BY}")),
        ),
    };
    let events = stream::select(
        runner::side(
            Side::Virtual,
            reflector(
                virt_writer,
                cache::watch(api(&res, &ctx.virt, None), virt_config),
            ),
        ),
        runner::side(
            Side::Host,
            reflector(host_writer, cache::watch(host_api, host_config)),
        ),
    );
    let runner = Arc::new(Runner {
        ctx: ctx.clone(),
        res: res.clone(),
        virt: virt.clone(),
        host: host.clone(),
        queue: res.queue.clone(),
    });
    let touched = {
        let runner = runner.clone();
        move |side: Side, o: &DynamicObject, deleted: bool| {
            let is_virt = side == Side::Virtual;
            if let Some(key) = runner.key_of(is_virt, o) {
                if is_virt {
                    referrals.iter().for_each(|r| r.touched(o, deleted));
                }
                runner.queue.push(key);
            }
        }
    };
    let every_key = {
        let runner = runner.clone();
        move || runner.push_every_key()
    };
    let sync = Loop {
        kind,
        virt,
        host,
        queue: res.queue.clone(),
        workers: WORKERS,
    };
    sync.run(&ctx, events, touched, every_key, |key| {
        let runner = runner.clone();
        async move { runner.reconcile(&key).await }
    })
    .await;
}

impl Runner {
    /// Queues the key of every object in both caches.
    fn push_every_key(&self) {
        for (is_virt, store) in [(true, &self.virt), (false, &self.host)] {
            for o in store.state() {
                if let Some(key) = self.key_of(is_virt, &o) {
                    self.queue.push(key);
                }
            }
        }
    }

    /// The (virtual namespace, name) an event is about, if it is one this syncer syncs.
    fn key_of(&self, is_virt: bool, obj: &DynamicObject) -> Option<Key> {
        let key = match (self.res.direction, is_virt) {
            (Direction::ToHost, false) => virtual_key(obj)?,
            (Direction::FromHost, false)
                if obj.namespace().as_deref() == Some(&self.ctx.target.host_namespace) =>
            {
                return None;
            }
            _ => (obj.namespace().unwrap_or_default(), obj.name_any()),
        };
        (!self.res.namespaced || self.ctx.namespace_synced(&key.0)).then_some(key)
    }

    async fn reconcile(&self, key: &Key) -> anyhow::Result<()> {
        match self.res.direction {
            Direction::ToHost => self.mirror_to_host(key).await,
            Direction::FromHost => self.copy_from_host(key).await,
        }
    }

    fn count_write(&self) {
        self.ctx.metrics.count_host_write(&self.res.name());
    }

    async fn mirror_to_host(&self, (namespace, name): &Key) -> anyhow::Result<()> {
        let res = &self.res;
        let writing = (res.name(), namespace.clone(), name.clone());
        if self
            .ctx
            .writing_through
            .lock()
            .expect("not poisoned")
            .contains(&writing)
        {
            // The proxy writes it through; its host write brings the key back here.
            return Ok(());
        }
        let host_name = object::host_name(&self.ctx.target, res.namespaced, name, namespace);
        let host_ns = &self.ctx.target.host_namespace;
        let virt = self.virt.get(&object_ref(res, name, namespace));
        let host = self.host.get(&object_ref(res, &host_name, host_ns));
        let host_api = api(res, &self.ctx.host, Some(host_ns));
        let key = (namespace.clone(), name.clone());
        // A mirror another virtual object owns (a name conflict) is never written or deleted.
        let conflict = host.as_deref().and_then(|h| engine::name_conflict(&key, h));
        let live = virt.filter(|v| v.metadata.deletion_timestamp.is_none());
        let Some(virt) = live else {
            if host.is_some() && conflict.is_none() {
                self.delete_mirror(&host_api, &host_name).await?;
            }
            return Ok(());
        };
        if let Some(owner) = conflict {
            let note = engine::conflict_note(&res.name(), &key, &owner, &host_name);
            tracing::info!(resource = %res.name(), namespace, name, note, "refused");
            self.ctx
                .warn_on(virt.object_ref(&res.resource), "NameConflict", note)
                .await;
            return Ok(());
        }
        let mut desired = object::to_host(&self.ctx.target, &res.resource, res.namespaced, &virt)?;
        if let Some(kind) = res.gateway
            && let Err(refusal) =
                gateway::host_spec(&self.ctx, res, kind, &virt, &mut desired).await?
        {
            tracing::info!(resource = %res.name(), namespace, name, %refusal, "refused");
            let reference = virt.object_ref(&res.resource);
            self.ctx
                .warn_on(reference, refusal.category(), refusal.to_string())
                .await;
            if host.is_some() {
                self.delete_mirror(&host_api, &host_name).await?;
            }
            return Ok(());
        }
        // The cache may trail a mirror just written (by the proxy's write-through): a read
        // is cheaper than a write.
        let host = match host {
            Some(h) => Some(h),
            None => host_api.get_opt(&host_name).await?.map(Arc::new),
        };
        if !host
            .as_ref()
            .is_some_and(|h| object::mirror_current(h, &desired))
        {
            self.count_write();
            engine::apply(&host_api, &host_name, &desired)
                .await
                .with_context(|| format!("failed to apply host {} {host_name}", res.name()))?;
            tracing::info!(resource = %res.name(), host = %host_name, "applied host mirror");
        }
        let status = host
            .as_deref()
            .and_then(object::status)
            .map(|s| match res.gateway {
                Some(kind) => gateway::virtual_status(&self.ctx, kind, &virt, s),
                None => s.clone(),
            });
        match status {
            Some(status) if res.virtual_status && object::status(&virt) != Some(&status) => {
                self.write_virtual_status(&virt, &status).await
            }
            _ => Ok(()),
        }
    }

    /// Deletes host mirror `host_name` (gone already is fine).
    async fn delete_mirror(
        &self,
        host_api: &Api<DynamicObject>,
        host_name: &str,
    ) -> anyhow::Result<()> {
        let res = &self.res;
        self.count_write();
        match host_api.delete(host_name, &DeleteParams::default()).await {
            Err(e) if !is_not_found(&e) => {
                Err(e).with_context(|| format!("failed to delete host {} {host_name}", res.name()))
            }
            _ => {
                tracing::info!(resource = %res.name(), host = %host_name, "deleted host mirror");
                Ok(())
            }
        }
    }

    async fn copy_from_host(&self, (namespace, name): &Key) -> anyhow::Result<()> {
        let res = &self.res;
        let host = self.host.get(&object_ref(res, name, namespace));
        let copy = self.virt.get(&object_ref(res, name, namespace));
        let virt_api = api(res, &self.ctx.virt, Some(namespace));
        let Some(host) = host else {
            if copy.is_some() {
                match virt_api.delete(name, &DeleteParams::default()).await {
                    Err(e) if !is_not_found(&e) => {
                        return Err(e).with_context(|| {
                            format!("failed to delete the copy of {} {name}", res.name())
                        });
                    }
                    _ => {
                        tracing::info!(resource = %res.name(), %namespace, %name, "deleted copy of a removed host object")
                    }
                }
            }
            return Ok(());
        };
        // Not in the cache of copies: absent, or the tenant's own object of that name.
        if copy.is_none()
            && let Some(own) = virt_api.get_opt(name).await?
            && !own.labels().contains_key(LABEL_FROM_HOST)
        {
            tracing::debug!(resource = %res.name(), %namespace, %name, "the tenant has its own object of that name; not copied");
            return Ok(());
        }
        let desired = object::from_host(&res.resource, &host, copy.as_deref());
        if !copy
            .as_ref()
            .is_some_and(|c| object::copy_current(c, &desired))
        {
            let applied = engine::apply(&virt_api, name, &desired).await;
            match applied {
                // The tenant has no namespace of that name: nothing to show it in.
                Err(e) if is_not_found(&e) && res.namespaced => {
                    tracing::debug!(resource = %res.name(), %namespace, %name, "no such virtual namespace; not copied");
                    return Ok(());
                }
                other => other.with_context(|| {
                    format!("failed to apply the copy of {} {name}", res.name())
                })?,
            };
            tracing::info!(resource = %res.name(), %namespace, %name, "applied copy of host object");
        }
        match object::status(&host) {
            Some(status)
                if res.virtual_status
                    && copy.as_deref().and_then(object::status) != Some(status) =>
            {
                let copy = virt_api.get(name).await?;
                self.write_virtual_status(&copy, status).await
            }
            _ => Ok(()),
        }
    }

    async fn write_virtual_status(
        &self,
        virt: &DynamicObject,
        status: &Value,
    ) -> anyhow::Result<()> {
        let api = api(&self.res, &self.ctx.virt, virt.namespace().as_deref());
        let body = json!({
            "apiVersion": self.res.resource.api_version,
            "kind": self.res.resource.kind,
            "status": status,
        });
        engine::apply_status(&api, &virt.name_any(), &body)
            .await
            .with_context(|| {
                format!(
                    "failed to write the status of virtual {} {}",
                    self.res.name(),
                    virt.name_any()
                )
            })?;
        Ok(())
    }
}
