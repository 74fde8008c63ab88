//! Endpoints. Of selector-less virtual Services: the tenant manages them, so they are copied
//! to the host Service's Endpoints, pod references renamed to the host pods. Of selector
//! Services: the host's endpoints controller fills the host copy's, which are shown in the
//! virtual cluster with references renamed back to the virtual pods.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    EndpointAddress, EndpointSubset, Endpoints, ObjectReference, Service,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::Target;

/// On virtual Endpoints the syncer copied from the host; it writes no others.
pub const ANNOTATION_FROM_HOST: &str = "vnest.dev/endpoints-from-host";
/// Label the virtual cluster's own endpoints controller puts on the Endpoints it manages;
/// where it runs, it owns them and the syncer stays out.
pub const LABEL_ENDPOINTS_MANAGED_BY: &str = "endpoints.kubernetes.io/managed-by";

/// Every address of `subsets`, ready or not.
fn addresses_mut(
    subsets: &mut Option<Vec<EndpointSubset>>,
) -> impl Iterator<Item = &mut EndpointAddress> {
    subsets.iter_mut().flatten().flat_map(|subset| {
        subset
            .addresses
            .iter_mut()
            .flatten()
            .chain(subset.not_ready_addresses.iter_mut().flatten())
    })
}

fn host_target_ref(r: &ObjectReference, target: &Target) -> Option<ObjectReference> {
    // Only pods have host copies; a reference to anything else would point nowhere.
    (r.kind.as_deref() == Some("Pod")).then(|| ObjectReference {
        kind: Some("Pod".to_string()),
        name: r
            .name
            .as_deref()
            .map(|n| target.host_name(n, r.namespace.as_deref().unwrap_or_default())),
        namespace: Some(target.host_namespace.clone()),
        ..Default::default()
    })
}

/// The host copy of virtual Endpoints `virt` (named like the host Service, so it backs it).
pub fn host_endpoints(virt: &Endpoints, target: &Target) -> Endpoints {
    let mut subsets = virt.subsets.clone();
    for address in addresses_mut(&mut subsets) {
        address.node_name = None;
        address.target_ref = address
            .target_ref
            .as_ref()
            .and_then(|r| host_target_ref(r, target));
    }
    Endpoints {
        metadata: target.host_meta("Endpoints", &virt.metadata),
        subsets,
    }
}

/// The virtual pod (namespace, name, uid) host pod `host_pod` stands for, if it is synced.
pub type VirtualPodOf<'a> = &'a dyn Fn(&str) -> Option<(String, String, String)>;

/// The virtual Endpoints of selector Service `svc`, from the host endpoints controller's
/// `host` Endpoints of its copy: addresses and ports as the host has them, references to
/// host pods turned into references to their virtual pods (others dropped), owned by the
/// virtual Service so they go with it.
pub fn virtual_endpoints(
    svc: &Service,
    host: Option<&Endpoints>,
    pod_of: VirtualPodOf,
) -> Endpoints {
    let mut subsets = host.and_then(|h| h.subsets.clone());
    for address in addresses_mut(&mut subsets) {
        address.target_ref = address
            .target_ref
            .as_ref()
            .filter(|r| r.kind.as_deref() == Some("Pod"))
            .and_then(|r| pod_of(r.name.as_deref()?))
            .map(|(namespace, name, uid)| ObjectReference {
                kind: Some("Pod".to_string()),
                namespace: Some(namespace),
                name: Some(name),
                uid: Some(uid),
                ..Default::default()
            });
    }
    Endpoints {
        metadata: ObjectMeta {
            name: svc.metadata.name.clone(),
            namespace: svc.metadata.namespace.clone(),
            labels: svc.metadata.labels.clone(),
            annotations: Some(BTreeMap::from([(
                ANNOTATION_FROM_HOST.to_string(),
                "true".to_string(),
            )])),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".to_string(),
                kind: "Service".to_string(),
                name: svc.metadata.name.clone().unwrap_or_default(),
                uid: svc.metadata.uid.clone().unwrap_or_default(),
                ..Default::default()
            }]),
            ..Default::default()
        },
        subsets,
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::*;

    /// Addresses and ports pass; references point at host pods or are dropped.
    #[test]
    fn addresses_are_copied_and_references_translated() {
        let virt: Endpoints = from_yaml(
            r#"
metadata: { name: db, namespace: shop }
subsets:
- addresses:
  - { ip: 10.0.0.5, nodeName: n1, targetRef: { kind: Pod, name: db-0, namespace: shop } }
  - { ip: 10.0.0.6, targetRef: { kind: Node, name: n1 } }
  ports: [{ port: 5432 }]
"#,
        );
        let host = host_endpoints(&virt, &target());
        assert_eq!(host.metadata.name.as_deref(), Some("db-x-shop-x-vc"));
        let subset = &host.subsets.unwrap()[0];
        let addresses = subset.addresses.as_ref().unwrap();
        assert_eq!(addresses[0].ip, "10.0.0.5");
        assert_eq!(addresses[0].node_name, None);
        let r = addresses[0].target_ref.as_ref().unwrap();
        assert_eq!(r.name.as_deref(), Some("db-0-x-shop-x-vc"));
        assert_eq!(r.namespace.as_deref(), Some("host-ns"));
        assert_eq!(addresses[1].target_ref, None);
        assert_eq!(subset.ports.as_ref().unwrap()[0].port, 5432);
    }

    /// Host addresses come back pointing at the virtual pods; unknown references are
    /// dropped; the copy is marked and owned by the virtual Service.
    #[test]
    fn host_endpoints_point_back_at_virtual_pods() {
        let svc: Service = from_yaml(
            "metadata: {name: web, namespace: shop, uid: svc-uid, labels: {app: web}}\nspec: {selector: {app: web}}",
        );
        let host: Endpoints = from_yaml(
            r#"
metadata: { name: web-x-shop-x-vc, namespace: host-ns }
subsets:
- addresses:
  - { ip: 10.244.0.5, nodeName: kwok-node-0, targetRef: { kind: Pod, name: web-0-x-shop-x-vc, namespace: host-ns } }
  - { ip: 10.244.0.6, targetRef: { kind: Pod, name: someone-else, namespace: host-ns } }
  notReadyAddresses:
  - { ip: 10.244.0.7, targetRef: { kind: Pod, name: web-1-x-shop-x-vc, namespace: host-ns } }
  ports: [{ port: 8080, protocol: TCP }]
"#,
        );
        let pod_of = |host: &str| {
            host.strip_suffix("-x-shop-x-vc")
                .map(|n| ("shop".to_string(), n.to_string(), format!("uid-{n}")))
        };
        let virt = virtual_endpoints(&svc, Some(&host), &pod_of);
        assert_eq!(virt.metadata.name.as_deref(), Some("web"));
        assert_eq!(virt.metadata.namespace.as_deref(), Some("shop"));
        assert!(
            virt.metadata
                .annotations
                .unwrap()
                .contains_key(ANNOTATION_FROM_HOST)
        );
        assert_eq!(virt.metadata.owner_references.unwrap()[0].uid, "svc-uid");
        let subset = &virt.subsets.unwrap()[0];
        let ready = subset.addresses.as_ref().unwrap();
        let r = ready[0].target_ref.as_ref().unwrap();
        assert_eq!(
            (r.namespace.as_deref(), r.name.as_deref(), r.uid.as_deref()),
            (Some("shop"), Some("web-0"), Some("uid-web-0"))
        );
        assert_eq!(ready[0].node_name.as_deref(), Some("kwok-node-0"));
        assert_eq!(ready[1].target_ref, None);
        let not_ready = subset.not_ready_addresses.as_ref().unwrap();
        assert_eq!(
            not_ready[0].target_ref.as_ref().unwrap().name.as_deref(),
            Some("web-1")
        );
        assert_eq!(subset.ports.as_ref().unwrap()[0].port, 8080);
    }

    /// Before the host has endpoints, the virtual ones are empty rather than stale.
    #[test]
    fn no_host_endpoints_mean_no_subsets() {
        let svc: Service = from_yaml("metadata: {name: web, namespace: shop}");
        assert_eq!(virtual_endpoints(&svc, None, &|_| None).subsets, None);
    }
}
