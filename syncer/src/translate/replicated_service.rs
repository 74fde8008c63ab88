//! `networking.replicateServices`: a Service on one side shown under another name on the
//! other.
//!
//! - fromHost: host Service `from` becomes virtual Service `to` with the host's ClusterIP
//!   and ports and no selector, so a tenant pod resolving `to` reaches the host Service
//!   directly (virtual ClusterIPs are host ClusterIPs, see the Services sync). The replica
//!   carries [`LABEL_FROM_HOST`] and is never copied back to the host. An ExternalName
//!   Service stays one; a headless one has no address to share and is not replicated.
//! - toHost: virtual Service `from` becomes host Service `to` in the host namespace with the
//!   host copy's translated selector, so it selects the same host pods under a name host
//!   workloads know. A virtual Service without a selector has no pods to select and is not
//!   replicated.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use vnest_crds::{
    meta::{ANNOTATION_REPLICATED_FROM, LABEL_REPLICATED_TO_HOST, LABEL_SYNCER_MANAGED_BY},
    translate,
};

use super::{Target, TranslateError, from_host::LABEL_FROM_HOST};

/// A Service's `(namespace, name)`.
pub type ServiceRef = (String, String);

fn reference(svc: &Service) -> String {
    format!(
        "{}/{}",
        svc.metadata.namespace.as_deref().unwrap_or_default(),
        svc.metadata.name.as_deref().unwrap_or_default()
    )
}

fn metadata(to: &ServiceRef, labels: BTreeMap<String, String>, source: &Service) -> ObjectMeta {
    ObjectMeta {
        name: Some(to.1.clone()),
        namespace: Some(to.0.clone()),
        labels: Some(labels),
        annotations: Some(BTreeMap::from([(
            ANNOTATION_REPLICATED_FROM.to_string(),
            reference(source),
        )])),
        ..Default::default()
    }
}

/// Ports as a replica exposes them: no node ports (the host allocates those).
fn ports(spec: &ServiceSpec, keep_target: bool) -> Option<Vec<ServicePort>> {
    spec.ports.as_ref().map(|ports| {
        ports
            .iter()
            .map(|p| ServicePort {
                name: p.name.clone(),
                port: p.port,
                protocol: p.protocol.clone(),
                app_protocol: p.app_protocol.clone(),
                target_port: if keep_target {
                    p.target_port.clone()
                } else {
                    None
                },
                node_port: None,
            })
            .collect()
    })
}

fn is_headless(spec: &ServiceSpec) -> bool {
    spec.cluster_ip
        .as_deref()
        .is_none_or(|ip| ip.is_empty() || ip == "None")
}

/// Virtual Service `to` standing for host Service `host`, or why there is none.
pub fn from_host_replica(host: &Service, to: &ServiceRef) -> Result<Service, TranslateError> {
    let spec = host.spec.clone().unwrap_or_default();
    let labels = BTreeMap::from([(LABEL_FROM_HOST.to_string(), "true".to_string())]);
    let spec = if spec.type_.as_deref() == Some("ExternalName") {
        ServiceSpec {
            ports: ports(&spec, false),
            type_: spec.type_,
            external_name: spec.external_name,
            ..Default::default()
        }
    } else if is_headless(&spec) {
        return Err(TranslateError::Headless {
            service: reference(host),
        });
    } else {
        ServiceSpec {
            type_: Some("ClusterIP".to_string()),
            cluster_ip: spec.cluster_ip.clone(),
            cluster_ips: spec.cluster_ips.clone(),
            ip_families: spec.ip_families.clone(),
            ports: ports(&spec, false),
            ..Default::default()
        }
    };
    Ok(Service {
        metadata: metadata(to, labels, host),
        spec: Some(spec),
        status: None,
    })
}

/// Host Service `to` (in the host namespace) selecting the host pods of virtual Service
/// `virt`, or why there is none.
pub fn to_host_replica(
    virt: &Service,
    to: &str,
    target: &Target,
) -> Result<Service, TranslateError> {
    let namespace = virt.metadata.namespace.as_deref().unwrap_or_default();
    let spec = virt.spec.clone().unwrap_or_default();
    let selector = spec
        .selector
        .as_ref()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| TranslateError::NoSelector {
            service: reference(virt),
        })?;
    let labels = BTreeMap::from([
        (LABEL_SYNCER_MANAGED_BY.to_string(), target.vc.clone()),
        (LABEL_REPLICATED_TO_HOST.to_string(), "true".to_string()),
    ]);
    let to = (target.host_namespace.clone(), to.to_string());
    Ok(Service {
        metadata: metadata(&to, labels, virt),
        spec: Some(ServiceSpec {
            type_: Some("ClusterIP".to_string()),
            selector: Some(translate::host_selector(selector, namespace, &target.vc)),
            ports: ports(&spec, true),
            session_affinity: spec.session_affinity.clone(),
            publish_not_ready_addresses: spec.publish_not_ready_addresses,
            ..Default::default()
        }),
        status: None,
    })
}

/// Whether `actual` must be deleted and made again to become `desired`: a ClusterIP, its
/// families and the type between ExternalName and ClusterIP cannot change in place.
pub fn needs_recreate(actual: &Service, desired: &Service) -> bool {
    let (a, d) = (
        actual.spec.clone().unwrap_or_default(),
        desired.spec.clone().unwrap_or_default(),
    );
    let external = |s: &ServiceSpec| s.type_.as_deref() == Some("ExternalName");
    (d.cluster_ip.is_some() && a.cluster_ip != d.cluster_ip) || external(&a) != external(&d)
}

/// The replicas in `existing` that no configured `wanted` name asks for any more.
pub fn stale<'a>(existing: &'a [ServiceRef], wanted: &[ServiceRef]) -> Vec<&'a ServiceRef> {
    existing.iter().filter(|r| !wanted.contains(r)).collect()
}

#[cfg(test)]
mod tests {
    use vnest_crds::meta::LABEL_SYNCER_NAMESPACE;

    use super::super::test_support::*;
    use super::*;

    fn to(ns: &str, name: &str) -> ServiceRef {
        (ns.to_string(), name.to_string())
    }

    const HOST: &str = r#"
metadata: { name: webhook, namespace: kube-system, uid: u-1, labels: { app: lb } }
spec:
  type: LoadBalancer
  clusterIP: 10.96.0.44
  clusterIPs: [10.96.0.44]
  selector: { app: lb }
  ports: [{ name: https, port: 443, targetPort: 9443, nodePort: 30443, protocol: TCP }]
"#;

    /// The seed's mapping: the virtual Service takes the host's address and ports, selects
    /// nothing, and is marked as the host's.
    #[test]
    fn a_host_service_becomes_a_selectorless_virtual_service_on_its_address() {
        let replica = from_host_replica(&from_yaml(HOST), &to("kube-system", "webhook")).unwrap();
        assert_eq!(replica.metadata.name.as_deref(), Some("webhook"));
        assert_eq!(replica.metadata.namespace.as_deref(), Some("kube-system"));
        assert_eq!(
            replica.metadata.labels.as_ref().unwrap()[LABEL_FROM_HOST],
            "true"
        );
        assert_eq!(
            replica.metadata.annotations.as_ref().unwrap()[ANNOTATION_REPLICATED_FROM],
            "kube-system/webhook"
        );
        assert!(replica.metadata.uid.is_none());
        let spec = replica.spec.unwrap();
        assert_eq!(spec.cluster_ip.as_deref(), Some("10.96.0.44"));
        assert_eq!(spec.type_.as_deref(), Some("ClusterIP"));
        assert!(spec.selector.is_none());
        let port = &spec.ports.unwrap()[0];
        assert_eq!((port.port, port.name.as_deref()), (443, Some("https")));
        assert!(port.node_port.is_none() && port.target_port.is_none());
    }

    /// ExternalName stays a DNS alias; headless has nothing to share.
    #[test]
    fn external_names_are_kept_and_headless_services_refused() {
        let external: Service = from_yaml(
            "metadata: {name: db, namespace: data}\nspec: {type: ExternalName, externalName: db.example.com}",
        );
        let spec = from_host_replica(&external, &to("default", "db"))
            .unwrap()
            .spec
            .unwrap();
        assert_eq!(spec.external_name.as_deref(), Some("db.example.com"));
        assert!(spec.cluster_ip.is_none());
        let headless: Service =
            from_yaml("metadata: {name: db, namespace: data}\nspec: {clusterIP: None}");
        let err = from_host_replica(&headless, &to("default", "db"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("data/db is headless"), "{err}");
    }

    /// The host replica selects the host copies of the virtual Service's pods and keeps
    /// the target ports; it is scoped to this virtual cluster.
    #[test]
    fn a_virtual_service_becomes_a_host_service_selecting_its_host_pods() {
        let virt: Service = from_yaml(
            "metadata: {name: api, namespace: shop}\nspec:\n  clusterIP: 10.96.0.9\n  selector: {app: api}\n  ports: [{port: 80, targetPort: 8080}]",
        );
        let replica = to_host_replica(&virt, "shop-api", &target()).unwrap();
        assert_eq!(replica.metadata.name.as_deref(), Some("shop-api"));
        assert_eq!(replica.metadata.namespace.as_deref(), Some("host-ns"));
        let labels = replica.metadata.labels.unwrap();
        assert_eq!(labels[LABEL_SYNCER_MANAGED_BY], "vc");
        assert_eq!(labels[LABEL_REPLICATED_TO_HOST], "true");
        let spec = replica.spec.unwrap();
        let selector = spec.selector.unwrap();
        assert_eq!(selector["app"], "api");
        assert_eq!(selector[LABEL_SYNCER_NAMESPACE], "shop");
        assert_eq!(selector[LABEL_SYNCER_MANAGED_BY], "vc");
        assert!(
            spec.cluster_ip.is_none(),
            "the host allocates its own address"
        );
        assert_eq!(
            spec.ports.unwrap()[0].target_port,
            Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(8080))
        );
    }

    /// Without a selector there is nothing on the host to select.
    #[test]
    fn a_selectorless_virtual_service_is_not_replicated_to_the_host() {
        let virt: Service =
            from_yaml("metadata: {name: ext, namespace: shop}\nspec: {ports: [{port: 80}]}");
        let err = to_host_replica(&virt, "ext", &target())
            .unwrap_err()
            .to_string();
        assert!(err.contains("shop/ext has no selector"), "{err}");
    }

    /// A moved host address or a change of type needs a new object; ports do not.
    #[test]
    fn only_immutable_changes_recreate() {
        let host: Service = from_yaml(HOST);
        let replica = from_host_replica(&host, &to("kube-system", "webhook")).unwrap();
        assert!(!needs_recreate(&replica, &replica));
        let mut moved = replica.clone();
        moved.spec.as_mut().unwrap().cluster_ip = Some("10.96.0.45".into());
        assert!(needs_recreate(&moved, &replica));
        let mut ports = replica.clone();
        ports.spec.as_mut().unwrap().ports = None;
        assert!(!needs_recreate(&ports, &replica));
        let external: Service = from_yaml(
            "metadata: {name: webhook, namespace: kube-system}\nspec: {type: ExternalName, externalName: x.example.com}",
        );
        let external = from_host_replica(&external, &to("kube-system", "webhook")).unwrap();
        assert!(needs_recreate(&replica, &external));
        assert!(needs_recreate(&external, &replica));
        // A host replica lets the host pick the address: never recreated for it.
        let virt: Service =
            from_yaml("metadata: {name: a, namespace: s}\nspec: {selector: {a: b}}");
        let desired = to_host_replica(&virt, "a", &target()).unwrap();
        let mut actual = desired.clone();
        actual.spec.as_mut().unwrap().cluster_ip = Some("10.96.3.3".into());
        assert!(!needs_recreate(&actual, &desired));
    }

    /// Startup clean-up removes exactly the replicas whose entry went.
    #[test]
    fn stale_replicas_are_those_no_entry_wants() {
        let existing = vec![to("a", "x"), to("a", "y"), to("b", "x")];
        let wanted = vec![to("a", "y"), to("c", "z")];
        assert_eq!(
            stale(&existing, &wanted),
            vec![&to("a", "x"), &to("b", "x")]
        );
        assert!(stale(&existing, &existing).is_empty());
    }
}
