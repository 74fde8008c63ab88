//! Secrets `vc-config-<name>` (the syncer's configuration and the distribution's files) and
//! `vc-<name>` (the tenant kubeconfig), and the names the serving certificate must cover.

use base64::Engine;
use serde_json::{Map, json};
use sha2::{Digest, Sha256};
use vnest_crds::{
    HostDns, SyncerConfig,
    meta::{self, ChildNames},
};

use super::{Child, ChildKind, Input, distro, endpoint};

fn b64(data: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(data)
}

/// The content of `vc-config-<name>`, by key: the syncer's configuration, then the
/// distribution's files.
fn config_files(input: &Input) -> Vec<(&'static str, String)> {
    let mut config = SyncerConfig::from_spec(input.namespace, input.name, input.spec);
    config.host_service_cidrs = input.settings.host_service_cidrs.clone();
    // The rewrite-hosts init container runs the syncer's own binary unless the spec names
    // another image.
    let hosts_image = &mut config.sync.to_host.pods.rewrite_hosts.init_container.image;
    hosts_image.get_or_insert_with(|| input.settings.images.syncer.clone());
    if !input.spec.networking.resolve_dns.is_empty() {
        config.host_dns = input.settings.host_dns.map(|server| HostDns {
            server,
            cluster_domain: input.settings.cluster_domain.clone(),
        });
    }
    let yaml = serde_yaml::to_string(&config).unwrap_or_default();
    let mut files = vec![(meta::SYNCER_CONFIG_KEY, yaml)];
    files.extend(distro::config_files(input));
    files
}

pub fn syncer_config(input: &Input, names: &ChildNames) -> Child {
    let data: Map<_, _> = config_files(input)
        .into_iter()
        .map(|(key, text)| (key.to_string(), json!(b64(text.as_bytes()))))
        .collect();
    input.child(
        ChildKind::Secret,
        &names.config_secret,
        "syncer-config",
        json!({ "type": "Opaque", "data": data }),
    )
}

/// First 16 hex digits of the SHA-256 of `vc-config-<name>`'s keys and content.
pub fn config_hash(input: &Input) -> String {
    let mut hasher = Sha256::new();
    for (key, text) in config_files(input) {
        hasher.update(key.as_bytes());
        hasher.update([0]);
        hasher.update(text.as_bytes());
        hasher.update([0]);
    }
    hasher.finalize()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn context_name(input: &Input) -> String {
    input
        .spec
        .export_kubeconfig
        .context
        .clone()
        .unwrap_or_else(|| format!("vcluster-{}", input.name))
}

/// The tenant kubeconfig, as YAML.
pub fn kubeconfig_yaml(input: &Input) -> String {
    let context = context_name(input);
    let certs = input.certs;
    let kubeconfig = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{ "name": context, "cluster": {
            "server": endpoint(input),
            "certificate-authority-data": b64(certs.ca_cert.as_bytes()),
        }}],
        "users": [{ "name": context, "user": {
            "client-certificate-data": b64(certs.client_cert.as_bytes()),
            "client-key-data": b64(certs.client_key.as_bytes()),
        }}],
        "contexts": [{ "name": context, "context": { "cluster": context, "user": context } }],
        "current-context": context,
    });
    serde_yaml::to_string(&kubeconfig).unwrap_or_default()
}

pub fn kubeconfig(input: &Input, names: &ChildNames) -> Child {
    let certs = input.certs;
    input.child(
        ChildKind::Secret,
        &names.kubeconfig_secret,
        "kubeconfig",
        json!({ "type": "Opaque", "data": {
            "config": b64(kubeconfig_yaml(input).as_bytes()),
            "certificate-authority": b64(certs.ca_cert.as_bytes()),
            "client-certificate": b64(certs.client_cert.as_bytes()),
            "client-key": b64(certs.client_key.as_bytes()),
        }}),
    )
}

/// Host name of an `https://host[:port][/path]` URL.
fn url_host(url: &str) -> Option<&str> {
    let rest = url.strip_prefix("https://")?;
    let authority = rest.split('/').next()?;
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next()?,
        None => authority.rsplit_once(':').map_or(authority, |(h, _)| h),
    };
    (!host.is_empty()).then_some(host)
}

/// Names and addresses the serving certificate is valid for. `cluster_ip` is the `<name>`
/// Service's, once assigned: tenant pods reach the API through it (the syncer sets their
/// `KUBERNETES_SERVICE_HOST` to it), and in-cluster clients name it `kubernetes.default.svc`
/// in the virtual cluster's own domain (`networking.advanced.clusterDomain`);
/// `host_cluster_domain` is the host's, where the `<name>` Service lives.
pub fn server_sans(
    namespace: &str,
    name: &str,
    spec: &vnest_crds::VirtualClusterSpec,
    host_cluster_domain: &str,
    cluster_ip: Option<&str>,
) -> Vec<String> {
    let virtual_domain = &spec.networking.advanced.cluster_domain;
    let mut sans = vec![
        name.to_string(),
        format!("{name}.{namespace}"),
        format!("{name}.{namespace}.svc"),
        format!("{name}.{namespace}.svc.{host_cluster_domain}"),
        "kubernetes".to_string(),
        "kubernetes.default".to_string(),
        "kubernetes.default.svc".to_string(),
        format!("kubernetes.default.svc.{virtual_domain}"),
        "localhost".to_string(),
        "127.0.0.1".to_string(),
    ];
    let extra = [
        cluster_ip,
        spec.export_kubeconfig.server.as_deref().and_then(url_host),
        spec.control_plane
            .ingress
            .enabled
            .then_some(spec.control_plane.ingress.host.as_deref())
            .flatten(),
    ];
    for host in extra.into_iter().flatten() {
        if !sans.iter().any(|s| s == host) {
            sans.push(host.to_string());
        }
    }
    sans
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::desired::test_support::*;

    fn decode(value: &serde_json::Value) -> String {
        let bytes: k8s_openapi::ByteString = serde_json::from_value(value.clone()).unwrap();
        String::from_utf8(bytes.0).unwrap()
    }

    #[test]
    fn syncer_config_secret_holds_the_rendered_config() {
        let spec = spec_from_yaml("sync: {toHost: {ingresses: {enabled: true}}}");
        let i = input(&spec);
        let secret = syncer_config(&i, &i.names()).object;
        let config: SyncerConfig =
            serde_yaml::from_str(&decode(&secret["data"]["config.yaml"])).unwrap();
        assert_eq!(config.host_namespace, "team-alpha");
        assert!(config.sync.to_host.ingresses.enabled);
    }

    /// The syncer learns the host's DNS server only when resolveDNS has entries, so an
    /// operator upgrade rolls no other control-plane pod.
    #[test]
    fn the_host_dns_reaches_the_syncer_only_with_resolve_dns_entries() {
        let read = |yaml: &str| {
            let spec = spec_from_yaml(yaml);
            let i = input(&spec);
            let secret = syncer_config(&i, &i.names()).object;
            serde_yaml::from_str::<SyncerConfig>(&decode(&secret["data"]["config.yaml"]))
                .unwrap()
                .host_dns
        };
        assert_eq!(read("{}"), None);
        let host_dns =
            read("networking: {resolveDNS: [{hostname: '*.amazonaws.com', target: host}]}")
                .expect("the host's DNS server");
        assert_eq!(host_dns.server.to_string(), "10.96.0.10");
        assert_eq!(host_dns.cluster_domain, "cluster.local");
    }

    /// The host's Service ranges the operator read reach every syncer.
    #[test]
    fn the_host_service_ranges_reach_the_syncer() {
        let spec = spec_from_yaml("{}");
        let mut i = input(&spec);
        let read = |i: &Input| {
            let secret = syncer_config(i, &i.names()).object;
            serde_yaml::from_str::<SyncerConfig>(&decode(&secret["data"]["config.yaml"]))
                .unwrap()
                .host_service_cidrs
        };
        assert!(read(&i).is_empty());
        let mut settings = i.settings.clone();
        settings.host_service_cidrs = vec!["10.96.0.0/16".parse().unwrap()];
        i.settings = &settings;
        assert_eq!(read(&i), settings.host_service_cidrs);
    }

    /// Distro k8s: the controller manager's and syncer's kubeconfig names the mounted PKI
    /// files and holds no key material itself.
    #[test]
    fn k8s_config_secret_holds_an_admin_kubeconfig_without_secrets() {
        let spec = spec_from_yaml("controlPlane: {distro: {k8s: {enabled: true}}}");
        let i = input(&spec);
        let secret = syncer_config(&i, &i.names()).object;
        let text = decode(&secret["data"]["admin.kubeconfig"]);
        assert!(!text.contains("BEGIN"), "{text}");
        let config: serde_json::Value = serde_yaml::from_str(&text).unwrap();
        let cluster = &config["clusters"][0]["cluster"];
        assert_eq!(cluster["server"], "https://127.0.0.1:6443");
        assert_eq!(cluster["certificate-authority"], "/etc/vnest/certs/ca.crt");
        let user = &config["users"][0]["user"];
        assert_eq!(user["client-certificate"], "/etc/vnest/certs/client.crt");
        assert_eq!(user["client-key"], "/etc/vnest/certs/client.key");
        assert!(secret["data"].get("k0s.yaml").is_none());
        assert_eq!(decode(&secret["data"]["sa.pub"]), CERTS.ca_public_key);
        assert!(
            CERTS
                .ca_public_key
                .starts_with("-----BEGIN PUBLIC KEY-----")
        );

        // k3s writes its own kubeconfig: nothing beside the syncer's config.
        let k3s_spec = spec_from_yaml("{}");
        let k3s = input(&k3s_spec);
        let data = syncer_config(&k3s, &k3s.names()).object["data"].clone();
        assert_eq!(data.as_object().unwrap().len(), 1, "{data}");
    }

    #[test]
    fn k0s_config_binds_loopback_on_the_service_range_with_etcd_and_the_operator_ca() {
        let spec = spec_from_yaml("controlPlane: {distro: {k0s: {enabled: true}}}");
        let i = input(&spec);
        let secret = syncer_config(&i, &i.names()).object;
        let config: serde_json::Value =
            serde_yaml::from_str(&decode(&secret["data"]["k0s.yaml"])).unwrap();
        let spec = &config["spec"];
        assert_eq!(config["kind"], "ClusterConfig");
        assert_eq!(spec["api"]["port"], 6443);
        assert_eq!(spec["api"]["extraArgs"]["bind-address"], "127.0.0.1");
        assert_eq!(spec["network"]["serviceCIDR"], "10.96.0.0/12");
        assert_eq!(
            spec["controllerManager"]["extraArgs"]["root-ca-file"],
            "/etc/vnest/certs/ca.crt"
        );
        assert_eq!(spec["storage"]["type"], "etcd");
    }

    #[test]
    fn kubeconfig_uses_the_context_and_server_from_the_spec() {
        let spec = spec_from_yaml(
            "exportKubeconfig: {context: ctx-a, server: 'https://vc.example.com:8443'}",
        );
        let i = input(&spec);
        let secret = kubeconfig(&i, &i.names()).object;
        let config: serde_json::Value =
            serde_yaml::from_str(&decode(&secret["data"]["config"])).unwrap();
        assert_eq!(config["current-context"], "ctx-a");
        assert_eq!(
            config["clusters"][0]["cluster"]["server"],
            "https://vc.example.com:8443"
        );
        assert_eq!(
            decode(&secret["data"]["certificate-authority"]),
            CERTS.ca_cert
        );
        assert_eq!(decode(&secret["data"]["client-key"]), CERTS.client_key);
    }

    #[test]
    fn kubeconfig_defaults_to_vcluster_context_and_service_url() {
        let spec = spec_from_yaml("{}");
        let yaml = kubeconfig_yaml(&input(&spec));
        assert!(
            yaml.contains("current-context: vcluster-team-alpha"),
            "{yaml}"
        );
        assert!(
            yaml.contains("server: https://team-alpha.team-alpha.svc:443"),
            "{yaml}"
        );
    }

    #[test]
    fn sans_cover_service_names_and_exported_host() {
        let spec = spec_from_yaml(
            "exportKubeconfig: {server: 'https://vc.example.com:443'}\ncontrolPlane: {ingress: {enabled: true, host: vc-in.example.com}}",
        );
        let sans = server_sans("ns", "vc", &spec, "cluster.local", Some("10.96.0.12"));
        for want in [
            "vc",
            "vc.ns",
            "vc.ns.svc",
            "vc.ns.svc.cluster.local",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
            "10.96.0.12",
            "vc.example.com",
            "vc-in.example.com",
        ] {
            assert!(
                sans.iter().any(|s| s == want),
                "{want} missing from {sans:?}"
            );
        }
    }

    /// In-cluster clients name the API `kubernetes.default.svc.<clusterDomain>` of the virtual
    /// cluster; the host Service keeps the host's domain.
    #[test]
    fn sans_use_the_virtual_cluster_domain_for_kubernetes_default() {
        let spec = spec_from_yaml("networking: {advanced: {clusterDomain: tenant.example}}");
        let sans = server_sans("ns", "vc", &spec, "host.local", None);
        assert!(
            sans.iter()
                .any(|s| s == "kubernetes.default.svc.tenant.example")
        );
        assert!(sans.iter().any(|s| s == "vc.ns.svc.host.local"));
        assert!(
            !sans
                .iter()
                .any(|s| s == "kubernetes.default.svc.host.local")
        );
    }

    #[test]
    fn url_hosts_are_extracted() {
        assert_eq!(url_host("https://a.b:443/x"), Some("a.b"));
        assert_eq!(url_host("https://a.b"), Some("a.b"));
        assert_eq!(url_host("https://[::1]:6443"), Some("::1"));
        assert_eq!(url_host("http://a.b"), None);
    }
}
