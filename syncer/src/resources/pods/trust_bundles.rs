//! The host ConfigMap that carries a pod's projected ClusterTrustBundles: filled from the
//! virtual cluster's bundles ([`bundle_data`]), owned by the host pod so it goes with it, and
//! rewritten when a bundle changes (the watch queues every pod that projects one).

use std::time::Duration;

use futures::{StreamExt, future::BoxFuture};
use k8s_openapi::{
    api::{
        certificates::v1::ClusterTrustBundle,
        core::v1::{ConfigMap, Pod},
    },
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};
use kube::{
    Api, ResourceExt,
    runtime::{reflector, watcher},
};

use crate::{
    cache::{self, Cache},
    engine::{self, Ctx, Queue},
    translate::pod::{bundle_data, config_map_name, trust_bundle_sources},
};

/// How long a reconcile waits for the first list of the bundles (an API server that does
/// not serve them never lists): the pod is retried rather than holding a worker.
const LIST_WAIT: Duration = Duration::from_secs(10);

/// The virtual cluster's ClusterTrustBundles, as the pods projecting them need them.
pub struct TrustBundles {
    bundles: Cache<ClusterTrustBundle>,
}

/// A cache of the virtual ClusterTrustBundles, and the task filling it, which queues every
/// virtual pod in `pods` that projects a bundle on every change.
pub fn watch(ctx: &Ctx, pods: Cache<Pod>, queue: Queue) -> (TrustBundles, BoxFuture<'static, ()>) {
    let (bundles, writer) = cache::store();
    let events = cache::watch(
        Api::<ClusterTrustBundle>::all(ctx.virt.clone()),
        watcher::Config::default(),
    );
    let task = reflector::reflector(writer, events).for_each(move |event| {
        if event.is_ok() {
            let projecting = pods.state().into_iter().filter(|p| {
                p.spec
                    .as_ref()
                    .is_some_and(|s| !trust_bundle_sources(s).is_empty())
            });
            for pod in projecting {
                queue.push((pod.namespace().unwrap_or_default(), pod.name_any()));
            }
        }
        futures::future::ready(())
    });
    (TrustBundles { bundles }, Box::pin(task))
}

impl TrustBundles {
    /// Makes the bundle ConfigMap of `host` (the copy of `virt`) hold what `virt`'s sources
    /// select now; reads it, and writes only when it differs or belongs to another pod.
    pub async fn ensure(&self, ctx: &Ctx, virt: &Pod, host: &Pod) -> anyhow::Result<()> {
        let Some(spec) = virt.spec.as_ref() else {
            return Ok(());
        };
        if trust_bundle_sources(spec).is_empty() {
            return Ok(());
        }
        tokio::time::timeout(LIST_WAIT, self.bundles.wait_until_ready())
            .await
            .map_err(|_| {
                anyhow::anyhow!("the virtual cluster's ClusterTrustBundles are not listed yet")
            })??;
        let data = bundle_data(spec, &self.bundles.state());
        let name = config_map_name(&host.name_any());
        let api: Api<ConfigMap> = Api::namespaced(ctx.host.clone(), &ctx.target.host_namespace);
        let current = api
            .get_opt(&name)
            .await
            .map_err(|e| anyhow::anyhow!("failed to read trust bundle ConfigMap {name}: {e}"))?;
        let owner = super::owned_by(host);
        let up_to_date = current.is_some_and(|c| {
            c.data.unwrap_or_default() == data
                && c.metadata.owner_references.unwrap_or_default() == [owner.clone()]
        });
        if up_to_date {
            return Ok(());
        }
        let config_map = ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(ctx.target.host_namespace.clone()),
                owner_references: Some(vec![owner]),
                ..Default::default()
            },
            data: Some(data),
            ..Default::default()
        };
        ctx.metrics.count_host_write("ConfigMap");
        ctx.metrics
            .timed("trust_bundles", engine::apply(&api, &name, &config_map))
            .await
            .map_err(super::failed_for(virt, "write the trust bundles"))?;
        Ok(())
    }
}
