//! `controlPlane.ingress`: an Ingress `<name>` that routes `host` to the `<name>` Service's
//! `https` port, where the syncer's proxy serves the virtual API server over TLS.

use std::collections::BTreeMap;

use serde_json::json;
use vnest_crds::meta::ChildNames;

use super::{Child, ChildKind, Input, network::SERVICE_PORT};

/// What ingress-nginx needs to hand the TLS connection to the proxy untouched (the proxy
/// authenticates tenants by their client certificates, so the controller must not
/// terminate TLS) and to speak HTTPS to it should it terminate anyway.
const NGINX_PASSTHROUGH: [(&str, &str); 2] = [
    ("nginx.ingress.kubernetes.io/ssl-passthrough", "true"),
    ("nginx.ingress.kubernetes.io/backend-protocol", "HTTPS"),
];

/// Annotations the ingress class needs for TLS passthrough. Only ingress-nginx does it with
/// annotations on an Ingress; it is assumed for a class whose name contains `nginx` and for
/// the cluster's default class (no `ingressClassName`, as vCluster's chart assumes). Other
/// controllers ignore these keys; for them the user's annotations say what they need.
fn passthrough_annotations(class: Option<&str>) -> BTreeMap<String, String> {
    let nginx = class.is_none_or(|c| c.contains("nginx"));
    NGINX_PASSTHROUGH
        .iter()
        .filter(|_| nginx)
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The Ingress, or `None` when disabled (or without a host, which validation refuses).
pub fn control_plane_ingress(input: &Input, names: &ChildNames) -> Option<Child> {
    let config = &input.spec.control_plane.ingress;
    let host = config.host.as_deref().filter(|_| config.enabled)?;
    let class = config.ingress_class_name.as_deref();
    let mut annotations = passthrough_annotations(class);
    // The user's annotations win on the same key.
    annotations.extend(config.annotations.clone());
    let backend =
        json!({ "service": { "name": names.service, "port": { "number": SERVICE_PORT } } });
    let mut spec = json!({
        "rules": [{ "host": host, "http": { "paths": [
            { "path": "/", "pathType": "Prefix", "backend": backend },
        ] } }],
        // So a controller that terminates TLS knows the host; without a secretName it uses
        // its default certificate.
        "tls": [{ "hosts": [host] }],
    });
    if let Some(class) = class {
        spec["ingressClassName"] = json!(class);
    }
    let mut ingress = input.child(
        ChildKind::Ingress,
        &names.ingress,
        "ingress",
        json!({ "spec": spec }),
    );
    if !annotations.is_empty() {
        ingress.object["metadata"]["annotations"] = json!(annotations);
    }
    Some(ingress)
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;
    use crate::desired::{desired_state, test_support::*};

    fn ingress(yaml: &str) -> Option<Value> {
        let spec = spec_from_yaml(yaml);
        let state = desired_state(&input(&spec));
        let found = find(&state, ChildKind::Ingress, "team-alpha").map(|c| c.object.clone());
        let absent = state
            .absent
            .contains(&(ChildKind::Ingress, "team-alpha".to_string()));
        assert_eq!(found.is_none(), absent, "either applied or removed");
        found
    }

    /// The Ingress sends `host` to the Service port the tenant kubeconfig uses, in the
    /// class asked for, owned by the VirtualCluster like every other child.
    #[test]
    fn an_enabled_ingress_routes_its_host_to_the_api_service() {
        let ing = ingress(
            "controlPlane: {ingress: {enabled: true, host: vc.example.com, ingressClassName: nginx}}",
        )
        .unwrap();
        assert_eq!(ing["apiVersion"], "networking.k8s.io/v1");
        assert_eq!(ing["kind"], "Ingress");
        assert_eq!(ing["metadata"]["namespace"], "team-alpha");
        assert_eq!(ing["metadata"]["ownerReferences"][0]["uid"], "uid-1");
        assert_eq!(
            ing["metadata"]["labels"]["app.kubernetes.io/managed-by"],
            "vnest-operator"
        );
        let spec = &ing["spec"];
        assert_eq!(spec["ingressClassName"], "nginx");
        assert_eq!(spec["rules"][0]["host"], "vc.example.com");
        let path = &spec["rules"][0]["http"]["paths"][0];
        assert_eq!(path["pathType"], "Prefix");
        assert_eq!(
            path["backend"],
            json!({ "service": { "name": "team-alpha", "port": { "number": 443 } } })
        );
        assert_eq!(spec["tls"], json!([{ "hosts": ["vc.example.com"] }]));
        // The port the Ingress names is the one the kubeconfig's server URL uses.
        let spec = spec_from_yaml("{}");
        assert!(crate::desired::endpoint(&input(&spec)).ends_with(":443"));
    }

    #[test]
    fn a_disabled_or_absent_ingress_is_removed() {
        assert!(ingress("{}").is_none());
        assert!(
            ingress("controlPlane: {ingress: {enabled: false, host: vc.example.com}}").is_none()
        );
    }

    /// ingress-nginx passes TLS through only when told; so it is for the default class.
    #[test]
    fn nginx_and_the_default_class_get_the_passthrough_annotations() {
        for yaml in [
            "controlPlane: {ingress: {enabled: true, host: vc.example.com, ingressClassName: nginx-internal}}",
            "controlPlane: {ingress: {enabled: true, host: vc.example.com}}",
        ] {
            let ing = ingress(yaml).unwrap();
            let annotations = &ing["metadata"]["annotations"];
            assert_eq!(
                annotations["nginx.ingress.kubernetes.io/ssl-passthrough"], "true",
                "{yaml}"
            );
            assert_eq!(
                annotations["nginx.ingress.kubernetes.io/backend-protocol"],
                "HTTPS"
            );
        }
        let ing =
            ingress("controlPlane: {ingress: {enabled: true, host: vc.example.com}}").unwrap();
        assert!(ing["spec"].get("ingressClassName").is_none());
    }

    #[test]
    fn other_classes_get_only_the_users_annotations() {
        let ing = ingress(
            "controlPlane: {ingress: {enabled: true, host: vc.example.com, ingressClassName: traefik}}",
        )
        .unwrap();
        assert!(ing["metadata"].get("annotations").is_none(), "{ing}");
        let ing = ingress(
            "controlPlane: {ingress: {enabled: true, host: vc.example.com, ingressClassName: haproxy, annotations: {haproxy.org/ssl-passthrough: 'true'}}}",
        )
        .unwrap();
        assert_eq!(
            ing["metadata"]["annotations"],
            json!({ "haproxy.org/ssl-passthrough": "true" })
        );
    }

    #[test]
    fn the_users_annotations_win_over_the_passthrough_ones() {
        let ing = ingress(
            "controlPlane: {ingress: {enabled: true, host: vc.example.com, annotations: {nginx.ingress.kubernetes.io/ssl-passthrough: 'false', team: alpha}}}",
        )
        .unwrap();
        let annotations = &ing["metadata"]["annotations"];
        assert_eq!(
            annotations["nginx.ingress.kubernetes.io/ssl-passthrough"],
            "false"
        );
        assert_eq!(
            annotations["nginx.ingress.kubernetes.io/backend-protocol"],
            "HTTPS"
        );
        assert_eq!(annotations["team"], "alpha");
    }
}
