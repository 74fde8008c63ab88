//! The environment the kubelet gives a container about the Services of its namespace
//! (`enableServiceLinks`) and about the API server's own Service, written as the kubelet's
//! `envvars.FromServices` writes it. The host kubelet would describe the host's Services
//! (under their host names), so the host pod has links turned off and carries the virtual
//! cluster's instead.

use k8s_openapi::api::core::v1::{EnvVar, Service, ServicePort};

/// `my-svc` → `MY_SVC`, as the kubelet names a Service's variables.
fn variable_name(service: &str) -> String {
    service.replace('-', "_").to_uppercase()
}

fn var(name: String, value: String) -> EnvVar {
    EnvVar {
        name,
        value: Some(value),
        value_from: None,
    }
}

/// The variables of `services` that have a ClusterIP (headless and ExternalName Services
/// have none and get none), in the kubelet's order.
pub fn from_services<'a>(services: impl IntoIterator<Item = &'a Service>) -> Vec<EnvVar> {
    let mut vars = Vec::new();
    for service in services {
        let Some(spec) = service.spec.as_ref() else {
            continue;
        };
        let Some(ip) = spec
            .cluster_ip
            .as_deref()
            .filter(|ip| !ip.is_empty() && *ip != "None")
        else {
            continue;
        };
        let ports = spec.ports.as_deref().unwrap_or_default();
        let Some(first) = ports.first() else {
            continue;
        };
        let prefix = variable_name(service.metadata.name.as_deref().unwrap_or_default());
        vars.push(var(format!("{prefix}_SERVICE_HOST"), ip.to_string()));
        vars.push(var(
            format!("{prefix}_SERVICE_PORT"),
            first.port.to_string(),
        ));
        for port in ports {
            if let Some(name) = port.name.as_deref().filter(|n| !n.is_empty()) {
                vars.push(var(
                    format!("{prefix}_SERVICE_PORT_{}", variable_name(name)),
                    port.port.to_string(),
                ));
            }
        }
        for (i, port) in ports.iter().enumerate() {
            vars.extend(link_variables(&prefix, ip, port, i == 0));
        }
    }
    vars
}

/// The Docker-link variables of one port (`<PREFIX>_PORT_<port>_<PROTO>…`), and
/// `<PREFIX>_PORT` for the first.
fn link_variables(prefix: &str, ip: &str, port: &ServicePort, first: bool) -> Vec<EnvVar> {
    let protocol = port.protocol.as_deref().unwrap_or("TCP");
    let address = if ip.contains(':') {
        format!("[{ip}]:{}", port.port)
    } else {
        format!("{ip}:{}", port.port)
    };
    let url = format!("{}://{address}", protocol.to_lowercase());
    let port_prefix = format!("{prefix}_PORT_{}_{}", port.port, protocol.to_uppercase());
    let mut vars = Vec::new();
    if first {
        vars.push(var(format!("{prefix}_PORT"), url.clone()));
    }
    vars.extend([
        var(port_prefix.clone(), url),
        var(format!("{port_prefix}_PROTO"), protocol.to_lowercase()),
        var(format!("{port_prefix}_PORT"), port.port.to_string()),
        var(format!("{port_prefix}_ADDR"), ip.to_string()),
    ]);
    vars
}

/// The variables of the API server's own Service (`kubernetes`, port `https`) at `ip:port`,
/// which every container gets whatever its links setting.
pub fn api_server(ip: &str, port: i32) -> Vec<EnvVar> {
    let service: Service = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "kubernetes" },
        "spec": { "clusterIP": ip, "ports": [{ "name": "https", "port": port, "protocol": "TCP" }] },
    }))
    .expect("a valid Service");
    from_services([&service])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(yaml: &str) -> Service {
        serde_yaml::from_str(yaml).unwrap()
    }

    fn pairs(vars: &[EnvVar]) -> Vec<(String, String)> {
        vars.iter()
            .map(|v| (v.name.clone(), v.value.clone().unwrap_or_default()))
            .collect()
    }

    /// The conformance spec's Service: every variable it looks for, with the kubelet's values.
    #[test]
    fn a_service_gets_the_kubelets_variables() {
        let svc = service(
            "metadata: { name: fooservice }\nspec: { clusterIP: 10.96.5.6, ports: [{ port: 8765, protocol: TCP }] }",
        );
        let got = pairs(&from_services([&svc]));
        let want: Vec<(String, String)> = [
            ("FOOSERVICE_SERVICE_HOST", "10.96.5.6"),
            ("FOOSERVICE_SERVICE_PORT", "8765"),
            ("FOOSERVICE_PORT", "tcp://10.96.5.6:8765"),
            ("FOOSERVICE_PORT_8765_TCP", "tcp://10.96.5.6:8765"),
            ("FOOSERVICE_PORT_8765_TCP_PROTO", "tcp"),
            ("FOOSERVICE_PORT_8765_TCP_PORT", "8765"),
            ("FOOSERVICE_PORT_8765_TCP_ADDR", "10.96.5.6"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(got, want);
    }

    /// Dashes become underscores; named ports get their own variable; only the first port
    /// gets `<PREFIX>_PORT`; a port without a protocol is TCP; IPv6 addresses are bracketed.
    #[test]
    fn names_ports_protocols_and_ipv6() {
        let svc = service(
            "metadata: { name: my-db }\nspec: { clusterIP: 'fd00::7', ports: [{ name: sql, port: 5432 }, { name: metrics-udp, port: 9000, protocol: UDP }] }",
        );
        let got = pairs(&from_services([&svc]));
        let value = |name: &str| {
            got.iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
                .unwrap_or_else(|| panic!("{name} missing from {got:?}"))
        };
        assert_eq!(value("MY_DB_SERVICE_PORT"), "5432");
        assert_eq!(value("MY_DB_SERVICE_PORT_SQL"), "5432");
        assert_eq!(value("MY_DB_SERVICE_PORT_METRICS_UDP"), "9000");
        assert_eq!(value("MY_DB_PORT"), "tcp://[fd00::7]:5432");
        assert_eq!(value("MY_DB_PORT_9000_UDP"), "udp://[fd00::7]:9000");
        assert_eq!(value("MY_DB_PORT_9000_UDP_PROTO"), "udp");
        let firsts = got.iter().filter(|(k, _)| k == "MY_DB_PORT").count();
        assert_eq!(firsts, 1);
    }

    /// Headless, ExternalName (no ClusterIP) and portless Services give nothing.
    #[test]
    fn services_without_an_address_give_nothing() {
        for yaml in [
            "metadata: { name: a }\nspec: { clusterIP: None, ports: [{ port: 80 }] }",
            "metadata: { name: b }\nspec: { type: ExternalName, externalName: example.com }",
            "metadata: { name: c }\nspec: { clusterIP: 10.0.0.1 }",
        ] {
            assert!(from_services([&service(yaml)]).is_empty(), "{yaml}");
        }
    }

    /// The API server's Service: the variables in-cluster clients read, at the given address.
    #[test]
    fn the_api_server_variables() {
        let got = pairs(&api_server("10.96.0.10", 443));
        assert!(got.contains(&("KUBERNETES_SERVICE_HOST".into(), "10.96.0.10".into())));
        assert!(got.contains(&("KUBERNETES_SERVICE_PORT".into(), "443".into())));
        assert!(got.contains(&("KUBERNETES_SERVICE_PORT_HTTPS".into(), "443".into())));
        assert!(got.contains(&("KUBERNETES_PORT".into(), "tcp://10.96.0.10:443".into())));
        assert!(got.contains(&("KUBERNETES_PORT_443_TCP_ADDR".into(), "10.96.0.10".into())));
    }
}
