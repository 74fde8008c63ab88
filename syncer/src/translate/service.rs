//! Services: the host copy selects the host copies of the virtual pods; the host owns the
//! ClusterIP, which the virtual Service then takes over.

use k8s_openapi::api::core::v1::{Service, ServiceSpec, ServiceStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use vnest_crds::translate;

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

/// Virtual Service `virt` as created anew with the host's ClusterIP.
pub fn with_cluster_ip(virt: &Service, ip: &str) -> Service {
    let mut spec = virt.spec.clone().unwrap_or_default();
    spec.cluster_ip = Some(ip.to_string());
    spec.cluster_ips = Some(vec![ip.to_string()]);
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
}
