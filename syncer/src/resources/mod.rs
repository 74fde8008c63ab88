//! The [`Syncer`](crate::engine::Syncer) of each synced type: glue between the pure
//! translators and the engine, plus the few API calls a type needs on the virtual side.

pub mod api_service;
pub mod configmaps;
pub mod endpoints;
pub mod events;
pub mod from_host;
pub mod ingresses;
pub mod network_policies;
pub mod nodes;
pub mod pdbs;
pub mod pods;
pub mod priority_classes;
pub mod pvcs;
pub mod pvs;
pub mod real_nodes;
pub mod replicated_services;
pub mod secrets;
pub mod selector_endpoints;
pub mod service_accounts;
pub mod services;

use kube::{
    Api, Resource, ResourceExt,
    api::{Patch, PatchParams},
};
use serde::{Serialize, de::DeserializeOwned};

use k8s_openapi::{NamespaceResourceScope, api::core::v1::Pod};
use vnest_crds::containment::covers;

use crate::{
    cache::Cache,
    engine::{Ctx, Key},
    translate::pod_security,
};

/// Whether a virtual pod is one the syncer copies (it meets the Pod Security Standard), so
/// the objects it uses are needed on the host.
fn is_synced(ctx: &Ctx, pod: &Pod) -> bool {
    match (ctx.config.pod_security_standard, &pod.spec) {
        (Some(level), Some(spec)) => pod_security::check(spec, level).is_ok(),
        _ => true,
    }
}

/// Whether some synced virtual pod in `pods` uses `virt` (per `uses`), so its host copy is
/// needed; waits for the pod cache's first list.
async fn used_by_a_synced_pod<K: Resource>(
    ctx: &Ctx,
    pods: &Cache<Pod>,
    virt: &K,
    uses: fn(&Pod) -> Vec<Key>,
) -> anyhow::Result<bool> {
    pods.wait_until_ready().await?;
    let key = (virt.namespace().unwrap_or_default(), virt.name_any());
    Ok(pods
        .state()
        .iter()
        .any(|p| is_synced(ctx, p) && uses(p).contains(&key)))
}

/// The objects `names` in the namespace of `referrer`, as keys to queue when it changes.
fn keys_beside<K: Resource>(referrer: &K, names: impl IntoIterator<Item = String>) -> Vec<Key> {
    let ns = referrer.namespace().unwrap_or_default();
    names.into_iter().map(|n| (ns.clone(), n)).collect()
}

/// Whether `actual` holds exactly what `desired` holds, absent counting as empty: for maps
/// compared whole, so a key the tenant removed goes from the host copy too.
fn same_whole<M: Default + PartialEq>(actual: &Option<M>, desired: &Option<M>) -> bool {
    let empty = M::default();
    actual.as_ref().unwrap_or(&empty) == desired.as_ref().unwrap_or(&empty)
}

/// Whether the host copy's metadata already has every label and annotation we set.
fn metadata_covers<K: Resource>(actual: &K, desired: &K) -> bool {
    let json = |k: &K| serde_json::to_value(k.meta()).unwrap_or_default();
    covers(&json(actual), &json(desired))
}

/// The virtual cluster's API for the namespace of `virt`.
fn virtual_api<K>(ctx: &Ctx, virt: &K) -> Api<K>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>,
{
    Api::namespaced(ctx.virt.clone(), &virt.namespace().unwrap_or_default())
}

/// Patches the virtual object's status to `desired` when it does not already show it.
async fn sync_status<K, S>(
    ctx: &Ctx,
    virt: &K,
    current: Option<&S>,
    desired: Option<S>,
) -> anyhow::Result<()>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
    S: Serialize,
{
    let Some(desired) = desired else {
        return Ok(());
    };
    let desired = serde_json::to_value(desired)?;
    let current = serde_json::to_value(current)?;
    if covers(&current, &desired) {
        return Ok(());
    }
    let patch = Patch::Merge(serde_json::json!({ "status": desired }));
    let name = virt.name_any();
    ctx.metrics
        .timed(
            "virtual_status",
            virtual_api(ctx, virt).patch_status(&name, &PatchParams::default(), &patch),
        )
        .await
        .map_err(|e| {
            anyhow::anyhow!(
                "failed to update virtual status of {}: {e}",
                virt.name_any()
            )
        })?;
    Ok(())
}
