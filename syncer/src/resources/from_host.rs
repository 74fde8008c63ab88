//! The fromHost direction for cluster-scoped kinds: watch the host objects, keep a virtual
//! copy of each one that should be shown, and remove copies whose host object went. The
//! tenant cannot change a copy for long: any edit is reverted on the next event. Only
//! virtual objects carrying [`LABEL_FROM_HOST`] are ever written or deleted, so a tenant's
//! own object of the same name is left alone.

use std::{marker::PhantomData, sync::Arc};

use futures::stream;
use k8s_openapi::ClusterResourceScope;
use kube::{
    Api, Resource, ResourceExt,
    api::{DeleteParams, Patch, PatchParams},
    runtime::{
        reflector::{ObjectRef, reflector},
        watcher,
    },
};
use serde_json::json;
use vnest_crds::containment::covers;

use crate::{
    cache,
    cache::Cache,
    engine::{
        self, Ctx, Key, Object, Queue, is_not_found,
        runner::{self, Loop, Side},
    },
    translate::from_host::{LABEL_FROM_HOST, is_from_host, virtual_copy},
};

/// Workers per kind: few objects, and each reconcile is one or two virtual writes.
const WORKERS: usize = 2;

/// A cluster-scoped kind shown from the host: what its virtual copy is.
pub trait Mirror: Send + Sync + 'static {
    type K: Resource<DynamicType = (), Scope = ClusterResourceScope> + Object;
    /// The kind, for logs and metrics.
    const KIND: &'static str;

    /// The virtual copy host object `host` should have (given the current copy), or `None`
    /// when the virtual cluster should not show it.
    fn desired(&self, ctx: &Ctx, host: &Self::K, virt: Option<&Self::K>) -> Option<Self::K>;

    /// Whether a virtual copy is this syncer's to delete (test beds share one virtual API
    /// server between syncers of different virtual namespaces).
    fn owns(&self, _ctx: &Ctx, _virt: &Self::K) -> bool {
        true
    }
}

/// Classes and drivers: every host object, copied whole.
pub struct Copies<K>(PhantomData<fn() -> K>);

impl<K> Default for Copies<K> {
    fn default() -> Self {
        Copies(PhantomData)
    }
}

macro_rules! copies {
    ($($k:ty => $kind:literal),* $(,)?) => {$(
        impl Mirror for Copies<$k> {
            type K = $k;
            const KIND: &'static str = $kind;
            fn desired(&self, _ctx: &Ctx, host: &$k, _virt: Option<&$k>) -> Option<$k> {
                virtual_copy(host)
                    .inspect_err(|e| tracing::warn!(kind = $kind, error = %e, "failed to copy"))
                    .ok()
            }
        }
    )*};
}

copies! {
    k8s_openapi::api::storage::v1::StorageClass => "StorageClass",
    k8s_openapi::api::networking::v1::IngressClass => "IngressClass",
    k8s_openapi::api::scheduling::v1::PriorityClass => "PriorityClass",
    k8s_openapi::api::storage::v1::CSIDriver => "CSIDriver",
    k8s_openapi::api::storage::v1::CSINode => "CSINode",
}

fn name_key<K: Resource>(obj: &K) -> Key {
    (String::new(), obj.name_any())
}

struct Runner<M: Mirror> {
    mirror: M,
    ctx: Arc<Ctx>,
    host: Cache<M::K>,
    virt: Cache<M::K>,
}

/// Queues the name of every host object and every virtual copy.
fn push_every_key<K: Resource<DynamicType = ()> + Clone>(
    host: &Cache<K>,
    virt: &Cache<K>,
    queue: &Queue,
) {
    for o in host.state().iter().chain(virt.state().iter()) {
        queue.push(name_key(o.as_ref()));
    }
}

/// Runs the fromHost sync of `mirror` until its watches end; `queue` may also be fed by
/// other engines (a virtual claim's binding queues its volume).
pub async fn run<M: Mirror>(mirror: M, ctx: Arc<Ctx>, queue: Queue) {
    let (host, host_writer) = crate::cache::store();
    let (virt, virt_writer) = crate::cache::store();
    let host_events = cache::watch(
        Api::<M::K>::all(ctx.host.clone()),
        watcher::Config::default(),
    );
    let virt_events = cache::watch(
        Api::<M::K>::all(ctx.virt.clone()),
        watcher::Config::default().labels(LABEL_FROM_HOST),
    );
    let events = stream::select(
        runner::side(Side::Host, reflector(host_writer, host_events)),
        runner::side(Side::Virtual, reflector(virt_writer, virt_events)),
    );
    let touched = {
        let queue = queue.clone();
        move |_: Side, o: &M::K, _deleted: bool| queue.push(name_key(o))
    };
    let every_key = {
        let (host, virt, queue) = (host.clone(), virt.clone(), queue.clone());
        move || push_every_key(&host, &virt, &queue)
    };
    let runner = Arc::new(Runner {
        mirror,
        ctx: ctx.clone(),
        host: host.clone(),
        virt: virt.clone(),
    });
    let sync = Loop {
        kind: M::KIND.to_string(),
        virt,
        host,
        queue,
        workers: WORKERS,
    };
    sync.run(&ctx, events, touched, every_key, |key| {
        let runner = runner.clone();
        async move { runner.reconcile(&key.1).await }
    })
    .await;
}

impl<M: Mirror> Runner<M> {
    fn api(&self) -> Api<M::K> {
        Api::all(self.ctx.virt.clone())
    }

    async fn reconcile(&self, name: &str) -> anyhow::Result<()> {
        let host = self.host.get(&ObjectRef::new(name));
        let virt = self.virt.get(&ObjectRef::new(name));
        let desired = host
            .as_deref()
            .and_then(|h| self.mirror.desired(&self.ctx, h, virt.as_deref()));
        match (desired, virt) {
            (None, Some(v)) if self.mirror.owns(&self.ctx, &v) => self.delete(&v).await,
            (None, _) => Ok(()),
            (Some(d), v) => self.apply(name, v.as_deref(), &d).await,
        }
    }

    async fn apply(&self, name: &str, virt: Option<&M::K>, desired: &M::K) -> anyhow::Result<()> {
        let mut body = serde_json::to_value(desired)?;
        let status = body.as_object_mut().and_then(|o| o.remove("status"));
        let current = virt.map(serde_json::to_value).transpose()?;
        let spec_covered = current.as_ref().is_some_and(|c| covers(c, &body));
        // Not in our cache: absent, or the tenant's own object of that name.
        if virt.is_none()
            && let Some(other) = self.api().get_opt(name).await?
            && !is_from_host(&other)
        {
            tracing::debug!(
                kind = M::KIND,
                name,
                "a virtual object of this name is not ours; left alone"
            );
            return Ok(());
        }
        if !spec_covered {
            engine::apply(&self.api(), name, &body)
                .await
                .map_err(|e| anyhow::anyhow!("failed to apply virtual {} {name}: {e}", M::KIND))?;
            tracing::info!(kind = M::KIND, name, "virtual copy up to date");
        }
        let Some(status) = status.filter(|s| !s.is_null()) else {
            return Ok(());
        };
        let current_status = current.as_ref().and_then(|c| c.get("status")).cloned();
        if covers(&current_status.unwrap_or_default(), &status) {
            return Ok(());
        }
        self.api()
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "status": status })),
            )
            .await
            .map_err(|e| {
                anyhow::anyhow!("failed to update virtual {} {name} status: {e}", M::KIND)
            })?;
        Ok(())
    }

    /// Deletes our copy; its protection finalizers guard the host object, which is gone.
    async fn delete(&self, virt: &M::K) -> anyhow::Result<()> {
        let name = virt.name_any();
        if !virt.finalizers().is_empty() {
            let clear = Patch::Merge(json!({ "metadata": { "finalizers": null } }));
            match self
                .api()
                .patch_metadata(&name, &PatchParams::default(), &clear)
                .await
            {
                Ok(_) => {}
                Err(e) if is_not_found(&e) => return Ok(()),
                Err(e) => anyhow::bail!("failed to release virtual {} {name}: {e}", M::KIND),
            }
        }
        match self.api().delete(&name, &DeleteParams::default()).await {
            Ok(_) => {
                tracing::info!(kind = M::KIND, name, "deleted virtual copy");
                Ok(())
            }
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(anyhow::anyhow!(
                "failed to delete virtual {} {name}: {e}",
                M::KIND
            )),
        }
    }
}
