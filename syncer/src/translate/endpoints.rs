//! Endpoints of selector-less virtual Services: the tenant manages them, so they are copied
//! to the host Service's Endpoints, pod references renamed to the host pods.

use k8s_openapi::api::core::v1::{Endpoints, ObjectReference};

use super::Target;

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
    for subset in subsets.iter_mut().flatten() {
        for address in subset
            .addresses
            .iter_mut()
            .flatten()
            .chain(subset.not_ready_addresses.iter_mut().flatten())
        {
            address.node_name = None;
            address.target_ref = address
                .target_ref
                .as_ref()
                .and_then(|r| host_target_ref(r, target));
        }
    }
    Endpoints {
        metadata: target.host_meta("Endpoints", &virt.metadata),
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
}
