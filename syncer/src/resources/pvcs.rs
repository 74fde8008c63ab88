//! PersistentVolumeClaims: the host claim is provisioned and bound by the host; the virtual
//! claim takes the bound volume's name and the host's status; resizes go down.

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::{
    ResourceExt,
    api::{Patch, PatchParams},
};
use serde_json::json;

use super::{keys_beside, sync_status, virtual_api};
use crate::{
    engine::{Ctx, Decision, Key, Syncer, is_not_found},
    translate::pvc::{host_pvc, update_body, virtual_status, volume_to_adopt},
};

/// Finalizer the API server puts on every claim until no pod uses it.
const PVC_PROTECTION: &str = "kubernetes.io/pvc-protection";

pub struct Pvcs;

/// The claims a pod's volumes name, as keys in its namespace.
pub fn used_by(pod: &Pod) -> Vec<Key> {
    let volumes = pod.spec.as_ref().and_then(|s| s.volumes.as_ref());
    let claims = volumes
        .into_iter()
        .flatten()
        .filter_map(|v| v.persistent_volume_claim.as_ref())
        .map(|c| c.claim_name.clone());
    keys_beside(pod, claims)
}

/// The virtual volume a virtual claim's binding touches (cluster-scoped: no namespace).
pub fn volume_of(pvc: &PersistentVolumeClaim) -> Vec<Key> {
    let volume = pvc.spec.as_ref().and_then(|s| s.volume_name.clone());
    volume
        .filter(|v| !v.is_empty())
        .map(|v| (String::new(), v))
        .into_iter()
        .collect()
}

impl Syncer for Pvcs {
    type K = PersistentVolumeClaim;
    const KIND: &'static str = "PersistentVolumeClaim";

    async fn desired(
        &self,
        ctx: &Ctx,
        virt: &PersistentVolumeClaim,
    ) -> anyhow::Result<Decision<PersistentVolumeClaim>> {
        Ok(Decision::Sync(host_pvc(virt, &ctx.target)))
    }

    /// The host's claim protection waited for the host pods; the virtual one has nothing
    /// left to wait for (and the bed's virtual control plane runs no protection controller).
    async fn finish(&self, ctx: &Ctx, virt: &PersistentVolumeClaim) -> anyhow::Result<()> {
        if !virt.finalizers().iter().any(|f| f == PVC_PROTECTION) {
            return Ok(());
        }
        let api = virtual_api(ctx, virt);
        let rest: Vec<&String> = virt
            .finalizers()
            .iter()
            .filter(|f| *f != PVC_PROTECTION)
            .collect();
        // The resource version makes this fail rather than drop a finalizer added meanwhile.
        let patch = json!({ "metadata": {
            "finalizers": rest, "resourceVersion": virt.resource_version(),
        } });
        match api
            .patch(
                &virt.name_any(),
                &PatchParams::default(),
                &Patch::Merge(patch),
            )
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(anyhow::anyhow!(
                "failed to release virtual claim {}: {e}",
                virt.name_any()
            )),
        }
    }

    fn update_body(
        &self,
        actual: &PersistentVolumeClaim,
        desired: PersistentVolumeClaim,
    ) -> PersistentVolumeClaim {
        update_body(actual, desired)
    }

    async fn back(
        &self,
        ctx: &Ctx,
        virt: &PersistentVolumeClaim,
        host: &PersistentVolumeClaim,
    ) -> anyhow::Result<()> {
        let api = virtual_api(ctx, virt);
        // The binding first: a virtual claim showing Bound names its volume.
        if let Some(volume) = volume_to_adopt(virt, host) {
            api.patch(
                &virt.name_any(),
                &PatchParams::default(),
                &Patch::Merge(json!({ "spec": { "volumeName": volume } })),
            )
            .await
            .map_err(|e| {
                anyhow::anyhow!(
                    "failed to bind virtual claim {} to {volume}: {e}",
                    virt.name_any()
                )
            })?;
        }
        sync_status(ctx, virt, virt.status.as_ref(), virtual_status(host)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pod_uses_the_claims_its_volumes_name() {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": { "name": "p", "namespace": "ns" },
            "spec": { "containers": [], "volumes": [
                { "name": "data", "persistentVolumeClaim": { "claimName": "data" } },
                { "name": "tmp", "emptyDir": {} },
            ] },
        }))
        .unwrap();
        assert_eq!(used_by(&pod), vec![("ns".to_string(), "data".to_string())]);
    }
}
