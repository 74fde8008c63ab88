//! PersistentVolumeClaims: the host copy asks the host's provisioner for the volume; the
//! binding (`volumeName`) and status flow back; only size requests change after creation.

use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimSpec, PersistentVolumeClaimStatus,
    TypedLocalObjectReference, TypedObjectReference,
};

use super::Target;

/// The host copy of virtual claim `virt`.
pub fn host_pvc(virt: &PersistentVolumeClaim, target: &Target) -> PersistentVolumeClaim {
    let namespace = virt.metadata.namespace.as_deref().unwrap_or_default();
    let mut spec = virt.spec.clone().unwrap_or_default();
    // The host binder picks the volume; a tenant naming one could take another tenant's.
    spec.volume_name = None;
    // Clones and snapshots are of objects synced under host names in the same namespace.
    spec.data_source = spec.data_source.map(|s| TypedLocalObjectReference {
        name: target.host_name(&s.name, namespace),
        ..s
    });
    spec.data_source_ref = spec.data_source_ref.map(|s| TypedObjectReference {
        name: target.host_name(&s.name, s.namespace.as_deref().unwrap_or(namespace)),
        namespace: None,
        ..s
    });
    PersistentVolumeClaim {
        metadata: target.host_meta("PersistentVolumeClaim", &virt.metadata),
        spec: Some(spec),
        status: None,
    }
}

/// What is applied to update host claim `actual`: the desired claim with every field that is
/// immutable after creation taken from `actual`, so only resize requests (and the volume
/// attributes class) go down.
pub fn update_body(
    actual: &PersistentVolumeClaim,
    mut desired: PersistentVolumeClaim,
) -> PersistentVolumeClaim {
    let current = actual.spec.clone().unwrap_or_default();
    let wanted = desired.spec.take().unwrap_or_default();
    desired.spec = Some(PersistentVolumeClaimSpec {
        resources: wanted.resources,
        volume_attributes_class_name: wanted.volume_attributes_class_name,
        access_modes: current.access_modes,
        selector: current.selector,
        storage_class_name: current.storage_class_name,
        volume_mode: current.volume_mode,
        data_source: current.data_source,
        data_source_ref: current.data_source_ref,
        volume_name: None,
    });
    desired
}

/// The volume the virtual claim should name: the host's, once the host claim is bound (the
/// virtual PersistentVolume carries the same name).
pub fn volume_to_adopt(
    virt: &PersistentVolumeClaim,
    host: &PersistentVolumeClaim,
) -> Option<String> {
    let host_volume = host
        .spec
        .as_ref()?
        .volume_name
        .as_ref()
        .filter(|v| !v.is_empty())?;
    let virt_volume = virt.spec.as_ref().and_then(|s| s.volume_name.as_ref());
    (virt_volume.is_none_or(String::is_empty)).then(|| host_volume.clone())
}

/// The status the virtual claim should show: the host's (phase, capacity, conditions).
pub fn virtual_status(host: &PersistentVolumeClaim) -> Option<PersistentVolumeClaimStatus> {
    host.status.clone()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    use super::super::test_support::*;
    use super::*;

    const PVC: &str = r#"
metadata: { name: data, namespace: shop, uid: u-1 }
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: fast
  volumeName: someone-elses
  resources: { requests: { storage: 1Gi } }
"#;

    fn request(pvc: &PersistentVolumeClaim) -> Option<&Quantity> {
        pvc.spec
            .as_ref()?
            .resources
            .as_ref()?
            .requests
            .as_ref()?
            .get("storage")
    }

    /// The host claim has vCluster's name, the tenant's request and class, and no volume of
    /// the tenant's choosing.
    #[test]
    fn host_claim_keeps_the_request_but_not_the_volume_name() {
        let host = host_pvc(&from_yaml(PVC), &target());
        assert_eq!(host.metadata.name.as_deref(), Some("data-x-shop-x-vc"));
        assert_eq!(request(&host), Some(&Quantity("1Gi".into())));
        let spec = host.spec.unwrap();
        assert_eq!(spec.storage_class_name.as_deref(), Some("fast"));
        assert_eq!(spec.volume_name, None);
        assert!(host.status.is_none());
    }

    /// A clone names the host copy of the source claim, in the host namespace.
    #[test]
    fn data_sources_name_host_copies() {
        let virt: PersistentVolumeClaim = from_yaml(
            r#"
metadata: { name: copy, namespace: shop }
spec:
  dataSource: { kind: PersistentVolumeClaim, name: data }
  dataSourceRef: { kind: PersistentVolumeClaim, name: data, namespace: other }
"#,
        );
        let spec = host_pvc(&virt, &target()).spec.unwrap();
        assert_eq!(spec.data_source.unwrap().name, "data-x-shop-x-vc");
        let source_ref = spec.data_source_ref.unwrap();
        assert_eq!(source_ref.name, "data-x-other-x-vc");
        assert_eq!(source_ref.namespace, None);
    }

    /// A resize goes down; fields the host fixed at creation (its default class) stay.
    #[test]
    fn updates_carry_the_new_size_and_keep_immutable_fields() {
        let mut actual = host_pvc(&from_yaml(PVC), &target());
        actual.spec.as_mut().unwrap().storage_class_name = Some("host-default".into());
        actual.spec.as_mut().unwrap().volume_name = Some("pv-1".into());
        let mut virt: PersistentVolumeClaim = from_yaml(PVC);
        virt.spec
            .as_mut()
            .unwrap()
            .resources
            .as_mut()
            .unwrap()
            .requests = Some([("storage".to_string(), Quantity("2Gi".into()))].into());
        let body = update_body(&actual, host_pvc(&virt, &target()));
        assert_eq!(request(&body), Some(&Quantity("2Gi".into())));
        let spec = body.spec.unwrap();
        assert_eq!(spec.storage_class_name.as_deref(), Some("host-default"));
        assert_eq!(
            spec.volume_name, None,
            "the binder's field is not ours to apply"
        );
    }

    /// The virtual claim takes the host's volume name once, when it has none.
    #[test]
    fn the_bound_volume_name_is_adopted_once() {
        let mut virt: PersistentVolumeClaim = from_yaml(PVC);
        virt.spec.as_mut().unwrap().volume_name = None;
        let mut host = host_pvc(&virt, &target());
        assert_eq!(volume_to_adopt(&virt, &host), None, "not bound yet");
        host.spec.as_mut().unwrap().volume_name = Some("pv-1".into());
        assert_eq!(volume_to_adopt(&virt, &host).as_deref(), Some("pv-1"));
        virt.spec.as_mut().unwrap().volume_name = Some("pv-1".into());
        assert_eq!(volume_to_adopt(&virt, &host), None);
    }
}
