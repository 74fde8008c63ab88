//! Secrets: synced when a virtual pod, a synced Ingress or a synced Gateway in the same
//! namespace uses them, or all with `all`.

use k8s_openapi::api::{
    core::v1::{Pod, Secret},
    networking::v1::Ingress,
};
use kube::{ResourceExt, api::DynamicObject};

use super::{ingresses, keys_beside, metadata_covers, same_whole, used_by_a_synced_pod};
use crate::{
    cache::Cache,
    custom::gateway,
    engine::{Ctx, Decision, Key, Syncer},
    translate::{pod::references, secret::host_secret},
};

pub struct Secrets {
    /// Virtual pods, to tell which Secrets are in use.
    pub pods: Cache<Pod>,
    /// Virtual Ingresses when they are synced, for their TLS Secrets.
    pub ingresses: Option<Cache<Ingress>>,
    /// Virtual Gateways when they are synced, for their certificate Secrets.
    pub gateways: Option<Cache<DynamicObject>>,
}

/// Whether an object in `referrers` (when that kind is synced) `serves` Secret `virt`,
/// once the cache has listed them.
async fn served_by<K>(
    referrers: &Option<Cache<K>>,
    virt: &Secret,
    serves: impl Fn(&K, &Key) -> bool,
) -> anyhow::Result<bool>
where
    K: kube::Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    let Some(referrers) = referrers else {
        return Ok(false);
    };
    referrers.wait_until_ready().await?;
    let key = (virt.namespace().unwrap_or_default(), virt.name_any());
    Ok(referrers.state().iter().any(|r| serves(r, &key)))
}

/// The Secrets a pod uses (volumes, env, image pull secrets), as keys to queue.
pub fn used_by(pod: &Pod) -> Vec<Key> {
    let refs = pod.spec.as_ref().map(references).unwrap_or_default();
    keys_beside(pod, refs.secrets)
}

impl Syncer for Secrets {
    type K = Secret;
    const KIND: &'static str = "Secret";

    /// Data is compared whole, so a key the tenant removed goes from the host too.
    fn needs_update(&self, actual: &Secret, desired: &Secret) -> bool {
        !same_whole(&actual.data, &desired.data) || !metadata_covers(actual, desired)
    }

    async fn desired(&self, ctx: &Ctx, virt: &Secret) -> anyhow::Result<Decision<Secret>> {
        if !ctx.config.sync.to_host.secrets.all
            && !used_by_a_synced_pod(ctx, &self.pods, virt, used_by).await?
            && !served_by(&self.ingresses, virt, |i, key| {
                ingresses::secrets_of(i).contains(key)
            })
            .await?
            && !served_by(&self.gateways, virt, |g, key| {
                g.metadata.deletion_timestamp.is_none() && gateway::serves(ctx, g, key)
            })
            .await?
        {
            return Ok(Decision::Skip);
        }
        Ok(Decision::Sync(host_secret(virt, &ctx.target)))
    }
}
