use serde_json::{Value, json};

use super::super::test_support::target;
use super::*;

fn route() -> Value {
    json!({
        "parentRefs": [
            {"name": "web"},
            {"name": "shared", "namespace": "infra", "sectionName": "https"}
        ],
        "hostnames": ["shop.example.com"],
        "rules": [{
            "filters": [{"type": "RequestMirror", "requestMirror": {"backendRef": {"name": "audit", "port": 80}}}],
            "backendRefs": [
                {"name": "api", "port": 8080, "weight": 3},
                {"group": "", "kind": "Service", "name": "api-canary", "namespace": "shop", "port": 8080}
            ]
        }]
    })
}

/// Every parentRef names the host copy of its Gateway; a parentRef with a namespace points
/// at the host namespace, one without keeps none (the route's own namespace on the host).
#[test]
fn parent_refs_name_the_host_gateways() {
    let mut spec = route();
    host_spec(Kind::HttpRoute, &mut spec, "shop", &target()).unwrap();
    assert_eq!(spec["parentRefs"][0], json!({"name": "web-x-shop-x-vc"}));
    assert_eq!(
        spec["parentRefs"][1],
        json!({"name": "shared-x-infra-x-vc", "namespace": "host-ns", "sectionName": "https"})
    );
    assert_eq!(spec["hostnames"], json!(["shop.example.com"]));
}

/// Backends and mirrors name the host copies of their Services, in the route's namespace,
/// keeping ports and weights; the Services are reported by field for the existence check.
#[test]
fn backend_refs_name_the_host_services() {
    let mut spec = route();
    let services = host_spec(Kind::GrpcRoute, &mut spec, "shop", &target()).unwrap();
    let backends = &spec["rules"][0]["backendRefs"];
    assert_eq!(
        backends[0],
        json!({"name": "api-x-shop-x-vc", "port": 8080, "weight": 3})
    );
    assert_eq!(backends[1]["name"], "api-canary-x-shop-x-vc");
    assert_eq!(backends[1].get("namespace"), None);
    assert_eq!(
        spec["rules"][0]["filters"][0]["requestMirror"]["backendRef"]["name"],
        "audit-x-shop-x-vc"
    );
    let fields: Vec<(&str, &str)> = services
        .iter()
        .map(|s| (s.field.as_str(), s.name.as_str()))
        .collect();
    assert_eq!(
        fields,
        [
            ("spec.rules[0].filters[0].requestMirror.backendRef", "audit"),
            ("spec.rules[0].backendRefs[0]", "api"),
            ("spec.rules[0].backendRefs[1]", "api-canary"),
        ]
    );
}

/// A backend that is not a core Service, one in another namespace, and an extension filter
/// are refused, naming the field.
#[test]
fn unsupported_references_are_refused_by_field() {
    let cases = [
        (
            json!({"rules": [{"backendRefs": [{"name": "a"}, {"group": "x.io", "kind": "Bucket", "name": "b"}]}]}),
            "spec.rules[0].backendRefs[1] names a Bucket of group \"x.io\"",
        ),
        (
            json!({"rules": [{"backendRefs": [{"name": "a", "namespace": "other"}]}]}),
            "spec.rules[0].backendRefs[0] names Service other/a in another namespace",
        ),
        (
            json!({"rules": [{"filters": [{"type": "ExtensionRef", "extensionRef": {"group": "x.io", "kind": "F", "name": "f"}}]}]}),
            "spec.rules[0].filters[0].extensionRef names an implementation object",
        ),
        (
            json!({"parentRefs": [{"group": "", "kind": "Service", "name": "mesh"}]}),
            "spec.parentRefs[0] names a Service of group \"\"; only Gateways",
        ),
    ];
    for (mut spec, expected) in cases {
        let e = host_spec(Kind::HttpRoute, &mut spec, "shop", &target()).unwrap_err();
        assert_eq!(e.category(), "RefNotPermitted");
        assert!(e.to_string().contains(expected), "{e}");
    }
}

fn gateway() -> Value {
    json!({
        "gatewayClassName": "shared",
        "listeners": [
            {"name": "https", "protocol": "HTTPS", "port": 443,
             "tls": {"mode": "Terminate", "certificateRefs": [{"kind": "Secret", "name": "shop-tls"}]},
             "allowedRoutes": {"namespaces": {"from": "Selector", "selector": {"matchLabels": {"team": "shop"}}}}},
            {"name": "http", "protocol": "HTTP", "port": 80,
             "allowedRoutes": {"namespaces": {"from": "All"}}}
        ]
    })
}

/// Listener certificates are the host copies of the Secrets; every listener admits routes
/// from the host namespace only, so no other tenant's route can attach.
#[test]
fn gateway_certificates_are_host_secrets_and_routes_come_from_the_host_namespace() {
    let virt = gateway();
    assert_eq!(certificate_secrets(&virt, "shop"), ["shop-tls"]);
    let mut spec = virt.clone();
    assert!(
        host_spec(Kind::Gateway, &mut spec, "shop", &target())
            .unwrap()
            .is_empty()
    );
    assert_eq!(spec["gatewayClassName"], "shared");
    let https = &spec["listeners"][0];
    assert_eq!(
        https["tls"]["certificateRefs"][0],
        json!({"kind": "Secret", "name": "shop-tls-x-shop-x-vc"})
    );
    for listener in spec["listeners"].as_array().unwrap() {
        assert_eq!(
            listener["allowedRoutes"]["namespaces"],
            json!({"from": "Same"})
        );
    }
}

/// A certificate in another namespace, a non-Secret certificate and implementation
/// parameters are refused by field.
#[test]
fn gateway_references_without_a_host_copy_are_refused() {
    let mut cross = gateway();
    cross["listeners"][0]["tls"]["certificateRefs"][0]["namespace"] = json!("certs");
    let e = host_spec(Kind::Gateway, &mut cross, "shop", &target()).unwrap_err();
    assert!(
        e.to_string()
            .contains("spec.listeners[0].tls.certificateRefs[0] names Secret certs/shop-tls"),
        "{e}"
    );
    let mut params = gateway();
    params["infrastructure"] =
        json!({"parametersRef": {"group": "", "kind": "ConfigMap", "name": "p"}});
    let e = host_spec(Kind::Gateway, &mut params, "shop", &target()).unwrap_err();
    assert!(
        e.to_string().contains("spec.infrastructure.parametersRef"),
        "{e}"
    );
}

/// Route status comes back with the parentRefs the tenant wrote; a parent the tenant did not
/// name is left out; a Gateway's status comes back as it is.
#[test]
fn route_status_names_the_virtual_parents() {
    let virt = route();
    let mut host = virt.clone();
    host_spec(Kind::HttpRoute, &mut host, "shop", &target()).unwrap();
    let condition = json!({"type": "Accepted", "status": "True"});
    let status = json!({"parents": [
        {"parentRef": host["parentRefs"][1], "controllerName": "x.io/gw", "conditions": [condition]},
        {"parentRef": {"name": "someone-else"}, "controllerName": "x.io/gw"}
    ]});
    let back = virtual_status(Kind::HttpRoute, &status, &virt, "shop", &target());
    assert_eq!(
        back,
        json!({"parents": [{"parentRef": virt["parentRefs"][1], "controllerName": "x.io/gw", "conditions": [condition]}]})
    );
    let gateway_status = json!({"addresses": [{"type": "IPAddress", "value": "10.0.0.1"}]});
    assert_eq!(
        virtual_status(
            Kind::Gateway,
            &gateway_status,
            &gateway(),
            "shop",
            &target()
        ),
        gateway_status
    );
}

/// allowedRoutes is enforced in the virtual cluster: Same admits the Gateway's namespace
/// only, Selector the namespaces it matches, All every one; sectionName picks the listener.
#[test]
fn attachment_follows_the_virtual_allowed_routes() {
    let gw = gateway();
    let parent = |section: Option<&str>| ParentRef {
        field: "spec.parentRefs[0]".into(),
        namespace: "infra".into(),
        name: "shared".into(),
        section: section.map(String::from),
    };
    let never = |_: &Value| false;
    let always = |_: &Value| true;
    assert!(
        attachment_refused(&gw, &parent(None), "shop", never).is_none(),
        "http admits All"
    );
    let e = attachment_refused(&gw, &parent(Some("https")), "shop", never).unwrap();
    assert!(
        e.to_string().contains(
            "spec.parentRefs[0] names Gateway infra/shared, whose listeners (https) do not allow routes from namespace shop"
        ),
        "{e}"
    );
    assert!(attachment_refused(&gw, &parent(Some("https")), "shop", always).is_none());
    let same = json!({"listeners": [{"name": "l"}]});
    assert!(attachment_refused(&same, &parent(None), "shop", always).is_some());
    assert!(attachment_refused(&same, &parent(None), "infra", never).is_none());
}
