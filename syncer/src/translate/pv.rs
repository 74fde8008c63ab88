//! PersistentVolumes from the host: the volume a synced claim bound to appears in the virtual
//! cluster under its host name (the name the virtual claim's `volumeName` shows), bound to
//! the virtual claim.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ObjectReference, PersistentVolume};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::from_host::from_host_labels;

/// The virtual claim a host volume is bound to, as the tenant knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VirtualClaim {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

/// The name of the host claim host volume `pv` is bound to, when it is in `host_namespace`.
pub fn bound_claim<'a>(pv: &'a PersistentVolume, host_namespace: &str) -> Option<&'a str> {
    let claim = pv.spec.as_ref()?.claim_ref.as_ref()?;
    (claim.namespace.as_deref() == Some(host_namespace))
        .then_some(claim.name.as_deref())
        .flatten()
}

/// The virtual copy of host volume `host`, bound to `claim` (or, once the claim is gone,
/// keeping the `claim_ref` the virtual copy had, as a Released volume does).
pub fn virtual_pv(host: &PersistentVolume, claim: Option<ObjectReference>) -> PersistentVolume {
    let mut spec = host.spec.clone().unwrap_or_default();
    spec.claim_ref = claim;
    PersistentVolume {
        metadata: ObjectMeta {
            name: host.metadata.name.clone(),
            labels: Some(from_host_labels(host.metadata.labels.as_ref())),
            annotations: Some(BTreeMap::new()),
            ..Default::default()
        },
        spec: Some(spec),
        status: host.status.clone(),
    }
}

/// The virtual `claimRef` pointing at `claim`.
pub fn claim_ref(claim: &VirtualClaim) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".to_string()),
        kind: Some("PersistentVolumeClaim".to_string()),
        namespace: Some(claim.namespace.clone()),
        name: Some(claim.name.clone()),
        uid: Some(claim.uid.clone()),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::super::{from_host::is_from_host, test_support::*};
    use super::*;

    const PV: &str = r#"
metadata: { name: pv-1, uid: host-uid, resourceVersion: "9", labels: { zone: a } }
spec:
  capacity: { storage: 1Gi }
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: fast
  hostPath: { path: /data }
  claimRef: { namespace: host-ns, name: data-x-shop-x-vc, uid: host-claim-uid }
status: { phase: Bound }
"#;

    /// Only volumes bound to a claim in our host namespace are ours to show.
    #[test]
    fn the_bound_claim_is_found_only_in_the_host_namespace() {
        let pv: PersistentVolume = from_yaml(PV);
        assert_eq!(bound_claim(&pv, "host-ns"), Some("data-x-shop-x-vc"));
        assert_eq!(bound_claim(&pv, "other-ns"), None);
    }

    /// The virtual volume keeps the host's name, size and reclaim policy, is bound to the
    /// virtual claim, and carries none of the host's identity.
    #[test]
    fn the_virtual_volume_is_bound_to_the_virtual_claim() {
        let claim = VirtualClaim {
            namespace: "shop".into(),
            name: "data".into(),
            uid: "virt-uid".into(),
        };
        let pv = virtual_pv(&from_yaml(PV), Some(claim_ref(&claim)));
        assert_eq!(pv.metadata.name.as_deref(), Some("pv-1"));
        assert_eq!(pv.metadata.uid, None);
        assert_eq!(pv.metadata.resource_version, None);
        assert!(is_from_host(&pv));
        assert_eq!(pv.metadata.labels.as_ref().unwrap()["zone"], "a");
        let spec = pv.spec.unwrap();
        assert_eq!(
            spec.persistent_volume_reclaim_policy.as_deref(),
            Some("Retain")
        );
        let bound = spec.claim_ref.unwrap();
        assert_eq!(
            (
                bound.namespace.as_deref(),
                bound.name.as_deref(),
                bound.uid.as_deref()
            ),
            (Some("shop"), Some("data"), Some("virt-uid"))
        );
        assert_eq!(pv.status.unwrap().phase.as_deref(), Some("Bound"));
    }
}
