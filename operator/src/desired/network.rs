//! The Services in front of the virtual API server and the isolation NetworkPolicies.

use serde_json::{Value, json};
use vnest_crds::meta::{self, ChildNames};

use super::{Child, ChildKind, Input};

/// Port the syncer's proxy listens on inside the pod; the Service exposes it as 443.
pub const PROXY_PORT: i32 = 8443;
/// The `<name>` Service's port, named `https`, which the tenant kubeconfig points at.
pub const SERVICE_PORT: i32 = 443;
/// The syncer's `/metrics`, `/healthz` and `/readyz` port, on the pod IP; the headless
/// Service names it `metrics` for a ServiceMonitor.
pub const SYNCER_METRICS_PORT: i32 = 8081;

/// URL tenants reach the virtual API server at (`exportKubeconfig.server` or the Service URL).
pub fn endpoint(input: &Input) -> String {
    input
        .spec
        .export_kubeconfig
        .server
        .clone()
        .unwrap_or_else(|| {
            format!(
                "https://{}.{}.svc:{SERVICE_PORT}",
                input.name, input.namespace
            )
        })
}

pub fn services(input: &Input, names: &ChildNames) -> Vec<Child> {
    let config = &input.spec.control_plane.service;
    let ports = json!([{ "name": "https", "port": SERVICE_PORT, "targetPort": PROXY_PORT, "protocol": "TCP" }]);
    let mut spec = json!({ "type": config.spec.type_, "ports": ports });
    // Without a selector the EndpointSlice controller leaves the Service alone and
    // [`wake_endpoint_slice`] gives it its one endpoint.
    if input.wake.is_none() {
        spec["selector"] = json!(input.control_plane_selector());
    }
    let mut service = input.child(
        ChildKind::Service,
        &names.service,
        "control-plane",
        json!({ "spec": spec }),
    );
    let metadata = &mut service.object["metadata"];
    if let Some(labels) = metadata["labels"].as_object_mut() {
        for (k, v) in &config.labels {
            labels.entry(k.clone()).or_insert_with(|| json!(v));
        }
    }
    if !config.annotations.is_empty() {
        metadata["annotations"] = json!(config.annotations);
    }
    let mut headless_ports = ports.clone();
    if let Some(list) = headless_ports.as_array_mut() {
        list.push(json!({ "name": "metrics", "port": SYNCER_METRICS_PORT, "targetPort": SYNCER_METRICS_PORT, "protocol": "TCP" }));
    }
    let headless = input.child(
        ChildKind::Service,
        &names.headless_service,
        "control-plane",
        json!({ "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": true,
            "ports": headless_ports,
            "selector": input.control_plane_selector(),
        }}),
    );
    vec![service, headless]
}

/// Name of the EndpointSlice that routes the `<name>` Service to the wake endpoint.
pub fn wake_slice_name(name: &str) -> String {
    format!("{name}-wake")
}

/// While [`Input::wake`] is set: the `<name>` Service's endpoint, the operator's wake
/// listener. Its port is named like the Service's, which is how a proxy matches them.
pub fn wake_endpoint_slice(input: &Input, names: &ChildNames) -> Option<Child> {
    let wake = input.wake?;
    let address_type = if wake.ip.is_ipv4() { "IPv4" } else { "IPv6" };
    let mut slice = input.child(
        ChildKind::EndpointSlice,
        &wake_slice_name(input.name),
        "wake",
        json!({
            "addressType": address_type,
            "endpoints": [{ "addresses": [wake.ip.to_string()], "conditions": { "ready": true } }],
            "ports": [{ "name": "https", "port": wake.port, "protocol": "TCP" }],
        }),
    );
    if let Some(labels) = slice.object["metadata"]["labels"].as_object_mut() {
        labels.insert(SERVICE_NAME_LABEL.into(), json!(names.service));
        labels.insert(SLICE_MANAGED_BY_LABEL.into(), json!(meta::OPERATOR_MANAGER));
    }
    Some(slice)
}

/// The label tying an EndpointSlice to its Service.
const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";
/// Tells the EndpointSlice controllers the slice is not theirs.
const SLICE_MANAGED_BY_LABEL: &str = "endpointslice.kubernetes.io/managed-by";

fn synced_workloads(input: &Input) -> Value {
    json!({ "matchLabels": { meta::LABEL_SYNCER_MANAGED_BY: input.name } })
}

fn dns_peer() -> Value {
    json!({
        "to": [{ "namespaceSelector": {}, "podSelector": { "matchLabels": { "k8s-app": "kube-dns" } } }],
        "ports": [{ "protocol": "UDP", "port": 53 }, { "protocol": "TCP", "port": 53 }],
    })
}

/// `vc-work-<name>`: synced workloads talk to each other, the control plane, DNS and the
/// allowed outside ranges; only their own virtual cluster gets in.
pub fn workload_policy(input: &Input, names: &ChildNames) -> Option<Child> {
    let policy = &input.spec.policies.network_policy;
    if !policy.enabled {
        return None;
    }
    let same_cluster = json!([
        { "podSelector": synced_workloads(input) },
        { "podSelector": { "matchLabels": input.control_plane_selector() } },
    ]);
    let ip_block = &policy.outgoing_connections.ip_block;
    Some(input.child(
        ChildKind::NetworkPolicy,
        &names.workload_network_policy,
        "network-policy",
        json!({ "spec": {
            "podSelector": synced_workloads(input),
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [{ "from": same_cluster }],
            "egress": [
                { "to": same_cluster },
                dns_peer(),
                { "to": [{ "ipBlock": { "cidr": ip_block.cidr, "except": ip_block.except } }] },
            ],
        }}),
    ))
}

/// `vc-cp-<name>`: the control plane pod accepts its workloads and, from anywhere, the proxy
/// port (the proxy authenticates tenants) and the syncer's metrics port (metrics and health
/// carry no secrets, and Prometheus may run in any namespace).
pub fn control_plane_policy(input: &Input, names: &ChildNames) -> Option<Child> {
    if !input.spec.policies.network_policy.enabled {
        return None;
    }
    Some(input.child(
        ChildKind::NetworkPolicy,
        &names.control_plane_network_policy,
        "network-policy",
        json!({ "spec": {
            "podSelector": { "matchLabels": input.control_plane_selector() },
            "policyTypes": ["Ingress"],
            "ingress": [
                { "from": [{ "podSelector": synced_workloads(input) }] },
                { "ports": [
                    { "protocol": "TCP", "port": PROXY_PORT },
                    { "protocol": "TCP", "port": SYNCER_METRICS_PORT },
                ] },
            ],
        }}),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::desired::{desired_state, test_support::*};

    #[test]
    fn service_maps_443_to_the_proxy_and_selects_the_pod() {
        let spec = spec_from_yaml(
            "controlPlane: {service: {spec: {type: LoadBalancer}, annotations: {a: b}}}",
        );
        let state = desired_state(&input(&spec));
        let svc = object(&state, ChildKind::Service, "team-alpha");
        assert_eq!(svc["spec"]["type"], "LoadBalancer");
        assert_eq!(svc["spec"]["ports"][0]["port"], 443);
        assert_eq!(svc["spec"]["ports"][0]["targetPort"], 8443);
        assert_eq!(svc["metadata"]["annotations"]["a"], "b");
        let headless = object(&state, ChildKind::Service, "team-alpha-headless");
        assert_eq!(headless["spec"]["clusterIP"], "None");
        assert_eq!(
            headless["spec"]["ports"][1],
            json!({ "name": "metrics", "port": 8081, "targetPort": 8081, "protocol": "TCP" })
        );
    }

    /// Both Services and both NetworkPolicies find the control plane by
    /// `vnest.dev/control-plane` alone, never by `app`/`release`, which a tenant pod can carry
    /// to the host; the control-plane pod has the key.
    #[test]
    fn services_and_policies_select_the_control_plane_by_a_key_no_tenant_can_set() {
        let spec = spec_from_yaml("policies: {networkPolicy: {enabled: true}}");
        let i = input(&spec);
        let only_the_key = json!({ "vnest.dev/control-plane": "team-alpha" });
        let state = desired_state(&i);
        for name in ["team-alpha", "team-alpha-headless"] {
            let svc = object(&state, ChildKind::Service, name);
            assert_eq!(svc["spec"]["selector"], only_the_key, "{name}");
        }
        let cp = control_plane_policy(&i, &i.names()).unwrap().object;
        assert_eq!(cp["spec"]["podSelector"]["matchLabels"], only_the_key);
        let work = workload_policy(&i, &i.names()).unwrap().object;
        for peers in [
            &work["spec"]["ingress"][0]["from"],
            &work["spec"]["egress"][0]["to"],
        ] {
            assert_eq!(peers[1]["podSelector"]["matchLabels"], only_the_key);
        }
        let sts = object(&state, ChildKind::StatefulSet, "team-alpha");
        let pod_labels = &sts["spec"]["template"]["metadata"]["labels"];
        assert_eq!(pod_labels["vnest.dev/control-plane"], "team-alpha");
    }

    /// Prometheus, in whatever namespace, can scrape the syncer: the alert on
    /// `vcluster_syncer_reconcile_errors_total` needs a target.
    #[test]
    fn control_plane_policy_admits_the_proxy_and_metrics_ports_from_anywhere() {
        let policy = wanted(
            "policies: {networkPolicy: {enabled: true}}",
            control_plane_policy,
        );
        let open = &policy["spec"]["ingress"][1];
        assert!(open.get("from").is_none(), "{open}");
        assert_eq!(
            open["ports"],
            json!([{ "protocol": "TCP", "port": 8443 }, { "protocol": "TCP", "port": 8081 }])
        );
    }

    #[test]
    fn while_waking_the_service_has_no_selector_and_one_slice_points_at_the_operator() {
        let spec = spec_from_yaml("sleepMode: {afterInactivity: 60}");
        let mut i = input(&spec);
        i.replicas = 0;
        i.wake = Some(crate::settings::WakeEndpoint {
            ip: "10.0.0.1".parse().unwrap(),
            port: 9443,
        });
        let state = desired_state(&i);
        let svc = object(&state, ChildKind::Service, "team-alpha");
        assert!(svc["spec"].get("selector").is_none(), "{svc}");
        assert_eq!(svc["spec"]["ports"][0]["name"], "https");
        let headless = object(&state, ChildKind::Service, "team-alpha-headless");
        assert_eq!(
            headless["spec"]["selector"]["vnest.dev/control-plane"],
            "team-alpha"
        );
        let slice = object(&state, ChildKind::EndpointSlice, "team-alpha-wake");
        assert_eq!(slice["apiVersion"], "discovery.k8s.io/v1");
        assert_eq!(
            slice["metadata"]["labels"]["kubernetes.io/service-name"],
            "team-alpha"
        );
        assert_eq!(
            slice["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"],
            "vnest-operator"
        );
        assert_eq!(slice["metadata"]["ownerReferences"][0]["uid"], "uid-1");
        assert_eq!(slice["addressType"], "IPv4");
        assert_eq!(slice["endpoints"][0]["addresses"][0], "10.0.0.1");
        assert_eq!(
            slice["ports"][0],
            json!({ "name": "https", "port": 9443, "protocol": "TCP" })
        );
        assert!(
            state
                .absent
                .iter()
                .all(|(k, _)| *k != ChildKind::EndpointSlice)
        );

        // Awake again: the selector is back and the slice is to be removed.
        i.wake = None;
        let state = desired_state(&i);
        let svc = object(&state, ChildKind::Service, "team-alpha");
        assert_eq!(
            svc["spec"]["selector"]["vnest.dev/control-plane"],
            "team-alpha"
        );
        assert!(find(&state, ChildKind::EndpointSlice, "team-alpha-wake").is_none());
        assert!(
            state
                .absent
                .contains(&(ChildKind::EndpointSlice, "team-alpha-wake".into()))
        );
    }

    #[test]
    fn endpoint_defaults_to_the_service_url() {
        let spec = spec_from_yaml("{}");
        assert_eq!(
            endpoint(&input(&spec)),
            "https://team-alpha.team-alpha.svc:443"
        );
        let spec = spec_from_yaml("exportKubeconfig: {server: 'https://vc.example.com'}");
        assert_eq!(endpoint(&input(&spec)), "https://vc.example.com");
    }

    #[test]
    fn workload_policy_blocks_private_ranges_and_admits_only_its_cluster() {
        let policy = wanted(
            "policies: {networkPolicy: {enabled: true}}",
            workload_policy,
        );
        let spec = &policy["spec"];
        assert_eq!(
            spec["podSelector"]["matchLabels"]["vcluster.loft.sh/managed-by"],
            "team-alpha"
        );
        assert_eq!(spec["policyTypes"], json!(["Ingress", "Egress"]));
        let from = &spec["ingress"][0]["from"];
        assert!(
            from.as_array()
                .unwrap()
                .iter()
                .all(|peer| peer.get("namespaceSelector").is_none())
        );
        let ip_block = &spec["egress"][2]["to"][0]["ipBlock"];
        assert_eq!(ip_block["cidr"], "0.0.0.0/0");
        assert!(
            ip_block["except"]
                .as_array()
                .unwrap()
                .contains(&json!("10.0.0.0/8"))
        );
        assert_eq!(spec["egress"][1]["ports"][0]["port"], 53);
    }
}
