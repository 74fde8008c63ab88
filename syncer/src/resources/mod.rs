//! The [`Syncer`](crate::engine::Syncer) of each synced type: glue between the pure
//! translators and the engine, plus the few API calls a type needs on the virtual side.

pub mod configmaps;
pub mod endpoints;
pub mod pods;
pub mod secrets;
pub mod services;

use kube::{Api, Resource, ResourceExt, api::Patch, api::PatchParams};
use serde::{Serialize, de::DeserializeOwned};

use crate::diff::covers;

/// Patches the virtual object's status to `desired` when it does not already show it.
async fn sync_status<K, S>(
    api: &Api<K>,
    virt: &K,
    current: Option<&S>,
    desired: Option<&S>,
) -> anyhow::Result<()>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
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
    api.patch_status(
        &virt.name_any(),
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({ "status": desired })),
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
