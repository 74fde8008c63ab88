//! Services: the host copy selects the host copies of the virtual pods; the host owns the
//! ClusterIP, which the virtual Service then takes over.

use std::net::IpAddr;

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec, ServiceStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use vnest_crds::{ServiceCidr, translate};

use super::Target;

fn is_headless(spec: &ServiceSpec) -> bool {
    spec.cluster_ip.as_deref() == Some("None")
}

/// The host copy of virtual Service `virt`.
pub fn host_service(virt: &Service, target: &Target) -> Service {
    let namespace = virt.metadata.namespace.as_deref().unwrap_or_default();
    let mut spec = virt.spec.clone().unwrap_or_default();
    // Addresses and node ports are the host's to allocate; only "headless" is a request.
    if !is_headless(&spec) {
        spec.cluster_ip = None;
        spec.cluster_ips = None;
    }
    spec.health_check_node_port = None;
    for port in spec.ports.iter_mut().flatten() {
        port.node_port = None;
    }
    spec.selector = spec
        .selector
        .filter(|s| !s.is_empty())
        .map(|s| translate::host_selector(&s, namespace, &target.vc));
    Service {
        metadata: target.host_meta("Service", &virt.metadata),
        spec: Some(spec),
        status: None,
    }
}

/// Host copy `desired` asking for the addresses the virtual API server gave `virt`, when
/// each lies in the dynamic band of one of the host's Service ranges: the host can then hand
/// out the same addresses unless they are taken, and the virtual Service keeps its own. An
/// address in a range's static band (where admins pin Services such as the cluster DNS) is
/// never asked for, so a tenant cannot reserve it on the host.
pub fn asking_for_virtual_addresses(
    desired: &Service,
    virt: &Service,
    host_cidrs: &[ServiceCidr],
) -> Option<Service> {
    let virt_spec = virt.spec.as_ref()?;
    if is_headless(virt_spec) {
        return None;
    }
    let addresses = match (&virt_spec.cluster_ips, &virt_spec.cluster_ip) {
        (Some(ips), _) if !ips.is_empty() => ips.clone(),
        (_, Some(ip)) if !ip.is_empty() => vec![ip.clone()],
        _ => return None,
    };
    let dynamic = |ip: &String| {
        ip.parse::<IpAddr>()
            .is_ok_and(|ip| host_cidrs.iter().any(|c| c.is_dynamic(ip)))
    };
    if !addresses.iter().all(dynamic) {
        return None;
    }
    let mut preferred = desired.clone();
    let spec = preferred.spec.get_or_insert_default();
    spec.cluster_ip = addresses.first().cloned();
    spec.cluster_ips = Some(addresses);
    Some(preferred)
}

/// Whether Service `svc` holds a ClusterIP (or is headless), which it keeps for life; an
/// ExternalName Service holds none until it changes type.
pub fn has_address(svc: &Service) -> bool {
    svc.spec
        .as_ref()
        .and_then(|s| s.cluster_ip.as_deref())
        .is_some_and(|ip| !ip.is_empty())
}

/// The host's ClusterIP when the virtual Service does not have it yet (a ClusterIP is
/// immutable, so the virtual Service has to be recreated with it).
pub fn cluster_ip_to_adopt(virt: &Service, host: &Service) -> Option<String> {
    let host_spec = host.spec.as_ref()?;
    if is_headless(host_spec) {
        return None;
    }
    let host_ip = host_spec.cluster_ip.as_ref().filter(|ip| !ip.is_empty())?;
    let virt_ip = virt.spec.as_ref().and_then(|s| s.cluster_ip.as_ref());
    (virt_ip != Some(host_ip)).then(|| host_ip.clone())
}

/// Virtual Service `virt` with the node ports the host gave its host copy, when they differ:
/// a tenant reaches the Service on the host's nodes at those, not at the ones the virtual API
/// server chose (node ports, unlike addresses, can change in place).
pub fn with_host_node_ports(virt: &Service, host: &Service) -> Option<Service> {
    let kind = virt.spec.as_ref()?.type_.as_deref();
    if !matches!(kind, Some("NodePort" | "LoadBalancer")) {
        return None;
    }
    let host_ports = host.spec.as_ref()?.ports.as_ref()?;
    let host_node_port = |port: &ServicePort| {
        host_ports
            .iter()
            .find(|h| h.port == port.port && h.protocol == port.protocol)
            .and_then(|h| h.node_port)
    };
    let mut adopted = virt.clone();
    let mut changed = false;
    for port in adopted.spec.as_mut()?.ports.iter_mut().flatten() {
        if let Some(node_port) = host_node_port(port).filter(|n| port.node_port != Some(*n)) {
            port.node_port = Some(node_port);
            changed = true;
        }
    }
    changed.then_some(adopted)
}

/// Virtual Service `virt` as created anew with address `ip`.
pub fn with_cluster_ip(virt: &Service, ip: &str) -> Service {
    let mut service = recreatable(virt);
    let spec = service.spec.get_or_insert_default();
    spec.cluster_ip = Some(ip.to_string());
    spec.cluster_ips = Some(vec![ip.to_string()]);
    service
}

/// Virtual Service `virt` as it can be created again: its metadata and spec, without its
/// addresses (the API server allocates new ones) or anything the server sets.
pub fn recreatable(virt: &Service) -> Service {
    let mut spec = virt.spec.clone().unwrap_or_default();
    spec.cluster_ip = None;
    spec.cluster_ips = None;
    spec.ip_families = None;
    let m = &virt.metadata;
    Service {
        metadata: ObjectMeta {
            name: m.name.clone(),
            namespace: m.namespace.clone(),
            labels: m.labels.clone(),
            annotations: m.annotations.clone(),
            owner_references: m.owner_references.clone(),
            finalizers: m.finalizers.clone(),
            ..Default::default()
        },
        spec: Some(spec),
        status: None,
    }
}

/// The status the virtual Service should show (load-balancer ingress): the host's.
pub fn virtual_status(host: &Service) -> Option<ServiceStatus> {
    host.status.clone()
}

#[cfg(test)]
mod tests {
    use vnest_crds::meta::{LABEL_SYNCER_MANAGED_BY, LABEL_SYNCER_NAMESPACE};

    use super::super::test_support::*;
    use super::*;

    const SVC: &str = r#"
metadata: { name: web, namespace: shop, uid: u-1, resourceVersion: "3" }
spec:
  type: NodePort
  clusterIP: 10.96.1.1
  clusterIPs: [10.96.1.1]
  selector: { app: web }
  ports: [{ name: http, port: 80, targetPort: 8080, nodePort: 30080 }]
"#;

    /// The host Service selects only this virtual cluster's pods from the same namespace.
    #[test]
    fn selector_is_translated_and_addresses_left_to_the_host() {
        let host = host_service(&from_yaml(SVC), &target());
        assert_eq!(host.metadata.name.as_deref(), Some("web-x-shop-x-vc"));
        let spec = host.spec.unwrap();
        let selector = spec.selector.unwrap();
        assert_eq!(selector["app"], "web");
        assert_eq!(selector[LABEL_SYNCER_MANAGED_BY], "vc");
        assert_eq!(selector[LABEL_SYNCER_NAMESPACE], "shop");
        assert_eq!(spec.cluster_ip, None);
        assert_eq!(spec.cluster_ips, None);
        assert_eq!(spec.type_.as_deref(), Some("NodePort"));
        let port = &spec.ports.unwrap()[0];
        assert_eq!((port.port, port.node_port), (80, None));
    }

    /// Headless stays headless; selector-less stays selector-less (its Endpoints are synced).
    #[test]
    fn headless_and_selectorless_services_keep_their_shape() {
        let virt: Service = from_yaml(
            "metadata: {name: db, namespace: shop}\nspec: {clusterIP: None, ports: [{port: 5432}]}",
        );
        let spec = host_service(&virt, &target()).spec.unwrap();
        assert_eq!(spec.cluster_ip.as_deref(), Some("None"));
        assert_eq!(spec.selector, None);
    }

    /// The host is asked for the virtual address only inside the dynamic band of one of
    /// its ranges; headless Services and addresses the host would not hand out get none.
    #[test]
    fn the_host_is_asked_for_a_virtual_address_in_its_dynamic_band() {
        let host_cidrs = ["10.96.0.0/16".parse().unwrap()];
        let virt: Service = from_yaml(SVC);
        let desired = host_service(&virt, &target());
        let preferred = asking_for_virtual_addresses(&desired, &virt, &host_cidrs).unwrap();
        let spec = preferred.spec.as_ref().unwrap();
        assert_eq!(spec.cluster_ip.as_deref(), Some("10.96.1.1"));
        assert_eq!(
            spec.cluster_ips.as_deref(),
            Some(&["10.96.1.1".to_string()][..])
        );
        assert_eq!(spec.selector, desired.spec.as_ref().unwrap().selector);
        assert_eq!(preferred.metadata, desired.metadata);

        let at = |ip: &str| {
            let mut v = virt.clone();
            let spec = v.spec.as_mut().unwrap();
            spec.cluster_ip = Some(ip.into());
            spec.cluster_ips = Some(vec![ip.into()]);
            asking_for_virtual_addresses(&desired, &v, &host_cidrs)
        };
        assert!(at("10.96.0.10").is_none(), "static band: the host DNS's");
        assert!(at("10.100.1.1").is_none(), "outside the host's range");
        assert!(at("None").is_none(), "headless");
        assert!(asking_for_virtual_addresses(&desired, &virt, &[]).is_none());
    }

    /// Only an ExternalName Service (no ClusterIP yet) can still be given an address.
    #[test]
    fn services_with_a_cluster_ip_or_headless_hold_their_address() {
        let external: Service = from_yaml(
            "metadata: {name: ext, namespace: shop}\nspec: {type: ExternalName, externalName: foo.example.com}",
        );
        assert!(!has_address(&external));
        assert!(has_address(&from_yaml(SVC)));
        let headless: Service =
            from_yaml("metadata: {name: db, namespace: shop}\nspec: {clusterIP: None}");
        assert!(has_address(&headless));
    }

    /// The virtual Service ends up with the host's ClusterIP, and only then stops changing.
    #[test]
    fn the_host_cluster_ip_is_adopted_once() {
        let virt: Service = from_yaml(SVC);
        let mut host = host_service(&virt, &target());
        host.spec.as_mut().unwrap().cluster_ip = Some("10.96.7.7".into());
        assert_eq!(
            cluster_ip_to_adopt(&virt, &host).as_deref(),
            Some("10.96.7.7")
        );
        let recreated = with_cluster_ip(&virt, "10.96.7.7");
        assert_eq!(recreated.metadata.resource_version, None);
        assert_eq!(recreated.metadata.uid, None);
        assert_eq!(
            recreated
                .spec
                .as_ref()
                .unwrap()
                .cluster_ips
                .as_ref()
                .unwrap(),
            &["10.96.7.7"]
        );
        assert_eq!(cluster_ip_to_adopt(&recreated, &host), None);
    }

    /// The virtual Service takes the node ports of its host copy, port by port, once.
    #[test]
    fn the_host_node_ports_are_adopted_once() {
        let virt: Service = from_yaml(SVC);
        let mut host = host_service(&virt, &target());
        let with_port = |host: &mut Service, node_port| {
            host.spec.as_mut().unwrap().ports.as_mut().unwrap()[0].node_port = node_port;
        };
        with_port(&mut host, Some(31555));
        let adopted = with_host_node_ports(&virt, &host).unwrap();
        let port = &adopted.spec.as_ref().unwrap().ports.as_ref().unwrap()[0];
        assert_eq!((port.port, port.node_port), (80, Some(31555)));
        assert_eq!(adopted.metadata.uid, virt.metadata.uid, "changed in place");
        assert_eq!(
            adopted.metadata.resource_version, virt.metadata.resource_version,
            "an update that loses to a newer write fails rather than undoing it"
        );
        assert!(with_host_node_ports(&adopted, &host).is_none());
        // Not yet allocated on the host: nothing to take.
        with_port(&mut host, None);
        assert!(with_host_node_ports(&virt, &host).is_none());
        // A virtual Service no longer of a node-port type, its host copy not updated yet.
        with_port(&mut host, Some(31555));
        let mut cluster_ip = virt.clone();
        cluster_ip.spec.as_mut().unwrap().type_ = Some("ClusterIP".into());
        assert!(with_host_node_ports(&cluster_ip, &host).is_none());
    }
}
