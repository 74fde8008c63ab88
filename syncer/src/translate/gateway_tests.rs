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

/// A TLSRoute (hostnames and plain backendRefs) is rewritten as the other routes are: its
/// Gateway and its Service named by their host copies, its SNI host names kept.
#[test]
fn tls_routes_name_the_host_gateway_and_services() {
    let mut spec = json!({
        "parentRefs": [{"name": "web", "sectionName": "tls"}],
        "hostnames": ["db.example.com"],
        "rules": [{"backendRefs": [{"name": "db", "port": 5432}]}]
    });
    let services = host_spec(
        Kind::of(GROUP, "tlsroutes").unwrap(),
        &mut spec,
        "shop",
        &target(),
    )
    .unwrap();
    assert_eq!(
        spec,
        json!({
            "parentRefs": [{"name": "web-x-shop-x-vc", "sectionName": "tls"}],
            "hostnames": ["db.example.com"],
            "rules": [{"backendRefs": [{"name": "db-x-shop-x-vc", "port": 5432}]}]
        })
    );
    let names: Vec<&str> = services.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["db"]);
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

/// The fields and virtual names of `refs`.
fn named(refs: &[LocalRef]) -> Vec<(&str, &str, &str)> {
    refs.iter()
        .map(|r| (r.kind, r.field.as_str(), r.name.as_str()))
        .collect()
}

/// Listener certificates are the host copies of the Secrets, which are reported by field
/// for the Secret sync; every listener admits routes from the host namespace only, so no
/// other tenant's route can attach.
#[test]
fn gateway_certificates_are_host_secrets_and_routes_come_from_the_host_namespace() {
    let virt = gateway();
    let mut spec = virt.clone();
    let secrets = host_spec(Kind::Gateway, &mut spec, "shop", &target()).unwrap();
    assert_eq!(
        named(&secrets),
        [(
            "Secret",
            "spec.listeners[0].tls.certificateRefs[0]",
            "shop-tls"
        )]
    );
    assert_eq!(secrets[0].namespace, "shop");
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

/// Every certificate field is followed: several refs per listener, several listeners, and
/// the backend client certificate; an explicit own namespace is the same Secret.
#[test]
fn every_certificate_field_names_its_secret() {
    let mut virt = gateway();
    virt["listeners"][0]["tls"]["certificateRefs"]
        .as_array_mut()
        .unwrap()
        .push(json!({"group": "", "kind": "Secret", "name": "ecdsa", "namespace": "shop"}));
    virt["listeners"][1]["tls"] = json!({"certificateRefs": [{"name": "plain"}]});
    virt["tls"] = json!({"backend": {"clientCertificateRef": {"name": "client"}}});
    let expected = [
        (
            "Secret",
            "spec.listeners[0].tls.certificateRefs[0]",
            "shop-tls",
        ),
        (
            "Secret",
            "spec.listeners[0].tls.certificateRefs[1]",
            "ecdsa",
        ),
        (
            "Secret",
            "spec.listeners[1].tls.certificateRefs[0]",
            "plain",
        ),
        ("Secret", "spec.tls.backend.clientCertificateRef", "client"),
    ];
    assert_eq!(named(&certificates(&virt, "shop")), expected);
    let mut spec = virt.clone();
    let secrets = host_spec(Kind::Gateway, &mut spec, "shop", &target()).unwrap();
    assert_eq!(named(&secrets), expected);
    assert_eq!(
        spec["listeners"][0]["tls"]["certificateRefs"][1],
        json!({"group": "", "kind": "Secret", "name": "ecdsa-x-shop-x-vc"})
    );
    assert_eq!(
        spec["tls"]["backend"]["clientCertificateRef"]["name"],
        "client-x-shop-x-vc"
    );
}

/// The Secrets the Secret sync reconciles leave out references that cannot have a host
/// copy (another namespace, another kind), and keep the good ones of a Gateway that is
/// refused for another reference, so a refusal also takes its Secrets off the host.
#[test]
fn certificates_leave_out_what_cannot_have_a_host_copy() {
    let mut virt = gateway();
    virt["listeners"][1]["tls"] = json!({"certificateRefs": [
        {"name": "elsewhere", "namespace": "certs"},
        {"group": "cert-manager.io", "kind": "Certificate", "name": "cm"},
    ]});
    assert_eq!(
        named(&certificates(&virt, "shop")),
        [(
            "Secret",
            "spec.listeners[0].tls.certificateRefs[0]",
            "shop-tls"
        )]
    );
    assert!(certificates(&json!({"listeners": [{"name": "http"}]}), "shop").is_empty());
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
