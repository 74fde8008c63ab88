//! ConfigMaps: synced when a virtual pod in the same namespace uses them, or all with `all`.

use k8s_openapi::api::core::v1::{ConfigMap, Pod};

use super::{keys_beside, metadata_covers, same_whole, used_by_a_synced_pod};
use crate::{
    cache::Cache,
    engine::{Ctx, Decision, Key, Syncer},
    translate::{configmap::host_configmap, pod::references},
};

pub struct ConfigMaps {
    /// Virtual pods, to tell which ConfigMaps are in use.
    pub pods: Cache<Pod>,
}

/// The ConfigMaps a pod uses, as keys to queue when the pod changes.
pub fn used_by(pod: &Pod) -> Vec<Key> {
    let refs = pod.spec.as_ref().map(references).unwrap_or_default();
    keys_beside(pod, refs.configmaps)
}

impl Syncer for ConfigMaps {
    type K = ConfigMap;
    const KIND: &'static str = "ConfigMap";

    /// Data is compared whole, so a key the tenant removed goes from the host too.
    fn needs_update(&self, actual: &ConfigMap, desired: &ConfigMap) -> bool {
        !same_whole(&actual.data, &desired.data)
            || !same_whole(&actual.binary_data, &desired.binary_data)
            || !metadata_covers(actual, desired)
    }

    async fn desired(&self, ctx: &Ctx, virt: &ConfigMap) -> anyhow::Result<Decision<ConfigMap>> {
        if !ctx.config.sync.to_host.configmaps.all
            && !used_by_a_synced_pod(ctx, &self.pods, virt, used_by).await?
        {
            return Ok(Decision::Skip);
        }
        Ok(Decision::Sync(host_configmap(virt, &ctx.target)))
    }
}
