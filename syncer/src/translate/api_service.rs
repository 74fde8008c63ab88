//! The virtual cluster's own `default/kubernetes` Service, pointed at the control plane as
//! its tenants reach it: the host Service in front of the control-plane pod. The virtual API
//! server runs with `--endpoint-reconciler-type=none` (its own address is a pod address no
//! tenant pod could use), so nothing else fills its Endpoints and EndpointSlice; and its
//! ClusterIP, the first of the virtual range, is on the host the address of some other
//! Service (with equal ranges, the host's own API server).

use std::collections::BTreeMap;

use k8s_openapi::api::{
    core::v1::{EndpointAddress, EndpointPort, EndpointSubset, Endpoints, Service},
    discovery::v1::{self as discovery, EndpointConditions, EndpointSlice},
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

pub const NAMESPACE: &str = "default";
pub const NAME: &str = "kubernetes";
/// On the Endpoints: the EndpointSlice mirroring controller leaves them alone (the syncer
/// writes the slice itself, named like the API server's own).
const LABEL_SKIP_MIRROR: &str = "endpointslice.kubernetes.io/skip-mirror";
const LABEL_SERVICE_NAME: &str = "kubernetes.io/service-name";
const LABEL_SLICE_MANAGED_BY: &str = "endpointslice.kubernetes.io/managed-by";
/// The API server names the Service's port this; used when the Service names none.
const DEFAULT_PORT_NAME: &str = "https";

/// Whether virtual object `namespace/name` is the API server's own Service (or its
/// Endpoints), which has no host copy.
pub fn is_api_service(namespace: &str, name: &str) -> bool {
    namespace == NAMESPACE && name == NAME
}

/// The address the virtual Service should have, when it differs from its own: the host
/// Service's (`control_plane`) ClusterIP.
pub fn address_to_adopt(virt: &Service, control_plane: &Service) -> Option<String> {
    let wanted = control_plane
        .spec
        .as_ref()?
        .cluster_ip
        .as_ref()
        .filter(|ip| !ip.is_empty() && *ip != "None")?;
    let actual = virt.spec.as_ref().and_then(|s| s.cluster_ip.as_ref());
    (actual != Some(wanted)).then(|| wanted.clone())
}

fn port_name(virt: &Service) -> String {
    virt.spec
        .as_ref()
        .and_then(|s| s.ports.as_ref())
        .and_then(|ports| ports.first())
        .and_then(|p| p.name.clone())
        .unwrap_or_else(|| DEFAULT_PORT_NAME.to_string())
}

/// The control plane's addresses, (ready, not ready), and the port it serves on, from the
/// host Endpoints of its Service.
fn control_plane_addresses(host: &Endpoints) -> (Vec<String>, Vec<String>, Option<EndpointPort>) {
    let subsets = host.subsets.iter().flatten();
    let ips = |list: &Option<Vec<EndpointAddress>>| -> Vec<String> {
        list.iter().flatten().map(|a| a.ip.clone()).collect()
    };
    let ready = subsets.clone().flat_map(|s| ips(&s.addresses)).collect();
    let not_ready = subsets
        .clone()
        .flat_map(|s| ips(&s.not_ready_addresses))
        .collect();
    let port = subsets
        .flat_map(|s| s.ports.iter().flatten())
        .next()
        .cloned();
    (ready, not_ready, port)
}

fn meta(labels: BTreeMap<String, String>) -> ObjectMeta {
    ObjectMeta {
        name: Some(NAME.to_string()),
        namespace: Some(NAMESPACE.to_string()),
        labels: Some(labels),
        ..Default::default()
    }
}

/// The virtual Service's Endpoints: the control-plane pods, on the port they serve the
/// tenant API at, under the Service's port name.
pub fn virtual_endpoints(host: &Endpoints, virt: &Service) -> Endpoints {
    let (ready, not_ready, port) = control_plane_addresses(host);
    let addresses = |ips: Vec<String>| {
        (!ips.is_empty()).then(|| {
            ips.into_iter()
                .map(|ip| EndpointAddress {
                    ip,
                    ..Default::default()
                })
                .collect()
        })
    };
    let has_address = !ready.is_empty() || !not_ready.is_empty();
    let subsets = port.filter(|_| has_address).map(|port| {
        vec![EndpointSubset {
            addresses: addresses(ready),
            not_ready_addresses: addresses(not_ready),
            ports: Some(vec![EndpointPort {
                name: Some(port_name(virt)),
                port: port.port,
                protocol: Some(port.protocol.unwrap_or_else(|| "TCP".to_string())),
                app_protocol: None,
            }]),
        }]
    });
    Endpoints {
        metadata: meta(BTreeMap::from([(
            LABEL_SKIP_MIRROR.to_string(),
            "true".to_string(),
        )])),
        subsets,
    }
}

/// The EndpointSlice of the same addresses, named like the API server's own.
pub fn virtual_endpoint_slice(endpoints: &Endpoints, manager: &str) -> EndpointSlice {
    let subset = endpoints.subsets.iter().flatten().next();
    let endpoint = |ip: &EndpointAddress, ready: bool| discovery::Endpoint {
        addresses: vec![ip.ip.clone()],
        conditions: Some(EndpointConditions {
            ready: Some(ready),
            ..Default::default()
        }),
        ..Default::default()
    };
    let list: Vec<discovery::Endpoint> = subset
        .into_iter()
        .flat_map(|s| {
            let ready = s.addresses.iter().flatten().map(|a| endpoint(a, true));
            let not_ready = s
                .not_ready_addresses
                .iter()
                .flatten()
                .map(|a| endpoint(a, false));
            ready.chain(not_ready)
        })
        .collect();
    let ipv6 = list.first().is_some_and(|e| e.addresses[0].contains(':'));
    let ports = subset
        .and_then(|s| s.ports.as_ref())
        .into_iter()
        .flatten()
        .map(|p| discovery::EndpointPort {
            name: p.name.clone(),
            port: Some(p.port),
            protocol: p.protocol.clone(),
            app_protocol: None,
        })
        .collect();
    EndpointSlice {
        metadata: meta(BTreeMap::from([
            (LABEL_SERVICE_NAME.to_string(), NAME.to_string()),
            (LABEL_SLICE_MANAGED_BY.to_string(), manager.to_string()),
        ])),
        address_type: if ipv6 { "IPv6" } else { "IPv4" }.to_string(),
        endpoints: Some(list),
        ports: Some(ports),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoints(yaml: &str) -> Endpoints {
        serde_yaml::from_str(yaml).unwrap()
    }

    fn service(yaml: &str) -> Service {
        serde_yaml::from_str(yaml).unwrap()
    }

    const HOST: &str = r#"
metadata: { name: vc, namespace: team-a }
subsets:
  - addresses: [{ ip: 10.89.0.11, targetRef: { kind: Pod, name: vc-0, namespace: team-a } }]
    notReadyAddresses: [{ ip: 10.89.0.12 }]
    ports: [{ port: 8443, protocol: TCP }]
"#;
    const VIRTUAL: &str = r#"
metadata: { name: kubernetes, namespace: default }
spec: { clusterIP: 10.96.0.1, ports: [{ name: https, port: 443, targetPort: 6443 }] }
"#;

    /// Only the API server's own Service is singled out, not a namesake elsewhere.
    #[test]
    fn only_default_kubernetes_is_the_api_service() {
        assert!(is_api_service("default", "kubernetes"));
        assert!(!is_api_service("team", "kubernetes"));
        assert!(!is_api_service("default", "kubernetes-dashboard"));
    }

    /// The Endpoints name the control-plane pods by address only (no host pod reference
    /// reaches the tenant), on the syncer's port under the Service's port name.
    #[test]
    fn endpoints_point_at_the_control_plane_pods() {
        let virt = virtual_endpoints(&endpoints(HOST), &service(VIRTUAL));
        assert_eq!(virt.metadata.name.as_deref(), Some("kubernetes"));
        assert_eq!(virt.metadata.namespace.as_deref(), Some("default"));
        assert_eq!(
            virt.metadata.labels.unwrap()[LABEL_SKIP_MIRROR],
            "true",
            "the mirroring controller must not make a second slice"
        );
        let subsets = virt.subsets.unwrap();
        assert_eq!(subsets.len(), 1);
        let ready = subsets[0].addresses.as_ref().unwrap();
        assert_eq!(ready.len(), 1);
        assert_eq!(ready[0].ip, "10.89.0.11");
        assert!(ready[0].target_ref.is_none());
        assert_eq!(
            subsets[0].not_ready_addresses.as_ref().unwrap()[0].ip,
            "10.89.0.12"
        );
        let port = &subsets[0].ports.as_ref().unwrap()[0];
        assert_eq!((port.name.as_deref(), port.port), (Some("https"), 8443));
        assert_eq!(port.protocol.as_deref(), Some("TCP"));
    }

    /// With no control-plane address yet the Endpoints are empty, not an empty subset (which
    /// the API server refuses).
    #[test]
    fn no_address_gives_no_subset() {
        let host = endpoints("metadata: { name: vc, namespace: team-a }");
        assert!(
            virtual_endpoints(&host, &service(VIRTUAL))
                .subsets
                .is_none()
        );
        let ports_only =
            endpoints("metadata: { name: vc }\nsubsets: [{ ports: [{ port: 8443 }] }]");
        let virt = virtual_endpoints(&ports_only, &service(VIRTUAL));
        assert!(virt.subsets.is_none());
        let slice = virtual_endpoint_slice(&virt, "m");
        assert_eq!(slice.endpoints, Some(vec![]));
        assert_eq!(slice.address_type, "IPv4");
    }

    /// The slice carries the same addresses and ports as the Endpoints (what conformance
    /// compares), ready or not, labelled with the Service it serves.
    #[test]
    fn the_slice_matches_the_endpoints() {
        let virt = virtual_endpoints(&endpoints(HOST), &service(VIRTUAL));
        let slice = virtual_endpoint_slice(&virt, "vnest-syncer");
        assert_eq!(slice.metadata.name.as_deref(), Some("kubernetes"));
        let labels = slice.metadata.labels.unwrap();
        assert_eq!(labels[LABEL_SERVICE_NAME], "kubernetes");
        assert_eq!(labels[LABEL_SLICE_MANAGED_BY], "vnest-syncer");
        assert_eq!(slice.address_type, "IPv4");
        let found: Vec<(String, Option<bool>)> = slice
            .endpoints
            .iter()
            .flatten()
            .map(|e| (e.addresses[0].clone(), e.conditions.as_ref().unwrap().ready))
            .collect();
        assert_eq!(
            found,
            [
                ("10.89.0.11".to_string(), Some(true)),
                ("10.89.0.12".to_string(), Some(false))
            ]
        );
        let ports = slice.ports.unwrap();
        assert_eq!(ports.len(), 1);
        assert_eq!(ports[0].port, Some(8443));
        assert_eq!(ports[0].name.as_deref(), Some("https"));
    }

    #[test]
    fn ipv6_control_planes_get_an_ipv6_slice() {
        let host = endpoints(
            "metadata: { name: vc }\nsubsets: [{ addresses: [{ ip: 'fd00::5' }], ports: [{ port: 8443 }] }]",
        );
        let virt = virtual_endpoints(&host, &service(VIRTUAL));
        assert_eq!(virtual_endpoint_slice(&virt, "m").address_type, "IPv6");
    }

    /// A Service without a port name gets the API server's.
    #[test]
    fn the_port_is_named_as_the_service_names_it() {
        let unnamed = service("metadata: { name: kubernetes }\nspec: { ports: [{ port: 443 }] }");
        let virt = virtual_endpoints(&endpoints(HOST), &unnamed);
        let named =
            service("metadata: { name: kubernetes }\nspec: { ports: [{ name: api, port: 443 }] }");
        let renamed = virtual_endpoints(&endpoints(HOST), &named);
        let name = |e: Endpoints| {
            e.subsets.unwrap()[0].ports.as_ref().unwrap()[0]
                .name
                .clone()
        };
        assert_eq!(name(virt).as_deref(), Some("https"));
        assert_eq!(name(renamed).as_deref(), Some("api"));
    }

    /// The virtual Service takes the host Service's address once; a headless or unallocated
    /// host Service gives none.
    #[test]
    fn the_host_service_address_is_adopted_once() {
        let host = service("metadata: { name: vc }\nspec: { clusterIP: 10.96.131.117 }");
        assert_eq!(
            address_to_adopt(&service(VIRTUAL), &host).as_deref(),
            Some("10.96.131.117")
        );
        let adopted = service("metadata: { name: kubernetes }\nspec: { clusterIP: 10.96.131.117 }");
        assert_eq!(address_to_adopt(&adopted, &host), None);
        for unusable in ["None", ""] {
            let host = service(&format!(
                "metadata: {{ name: vc }}\nspec: {{ clusterIP: '{unusable}' }}"
            ));
            assert_eq!(
                address_to_adopt(&service(VIRTUAL), &host),
                None,
                "{unusable:?}"
            );
        }
    }
}
