//! The syncer's configuration. The operator renders it from a VirtualCluster into Secret
//! `vc-config-<name>` (key [`crate::meta::SYNCER_CONFIG_KEY`]); the syncer reads it at start.

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use crate::{CoreDns, Networking, PodSecurityStandard, ServiceCidr, Sync, VirtualClusterSpec};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncerConfig {
    /// The VirtualCluster's name (the `-x-<vc>` suffix of translated names).
    pub name: String,
    /// The host namespace synced objects are written to.
    pub host_namespace: String,
    /// Host Service fronting the virtual API server.
    pub service_name: String,
    /// Address the proxy serves tenants on.
    pub listen_address: String,
    pub sync: Sync,
    pub networking: Networking,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_security_standard: Option<PodSecurityStandard>,
    /// `controlPlane.coredns`: the DNS server the syncer keeps in the virtual cluster. Off
    /// when absent: a config without it comes from an operator that deploys no DNS, and a
    /// newer syncer must not start deploying one behind its back.
    #[serde(default = "CoreDns::disabled")]
    pub coredns: CoreDns,
    /// The host cluster's DNS server, which `networking.resolveDNS` entries forward to. Set by
    /// the operator only when the spec has entries, so adding it rolls no other pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_dns: Option<HostDns>,
    /// The host cluster's Service ranges. A virtual Service whose address lies in their
    /// dynamic band asks the host for that same address, so it need not be recreated.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub host_service_cidrs: Vec<ServiceCidr>,
}

/// Where the host cluster's DNS server is, and the domain of its Services.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HostDns {
    /// The address (port 53) the virtual cluster's CoreDNS forwards host lookups to.
    pub server: IpAddr,
    /// The host's cluster domain: a `hostNamespace` entry asks for `<svc>.<ns>.svc.<this>`.
    pub cluster_domain: String,
}

impl SyncerConfig {
    pub fn from_spec(namespace: &str, name: &str, spec: &VirtualClusterSpec) -> Self {
        SyncerConfig {
            name: name.to_string(),
            host_namespace: namespace.to_string(),
            service_name: name.to_string(),
            listen_address: "0.0.0.0:8443".to_string(),
            sync: spec.sync.clone(),
            networking: spec.networking.clone(),
            pod_security_standard: spec.policies.pod_security_standard,
            coredns: spec.control_plane.coredns.clone(),
            host_dns: None,
            host_service_cidrs: vec![],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_yaml_as_the_operator_writes_it() {
        let mut spec = VirtualClusterSpec::default();
        spec.sync.to_host.ingresses.enabled = true;
        let config = SyncerConfig::from_spec("team-alpha", "team-alpha", &spec);
        let yaml = serde_yaml::to_string(&config).unwrap();
        assert!(yaml.contains("hostNamespace: team-alpha"), "{yaml}");
        let back: SyncerConfig = serde_yaml::from_str(&yaml).unwrap();
        assert_eq!(back, config);
        assert!(back.sync.to_host.ingresses.enabled);
        assert!(
            back.coredns.enabled,
            "the spec's default reaches the syncer"
        );
    }

    /// An older operator's config names no DNS server: the syncer then deploys none.
    #[test]
    fn a_config_without_coredns_deploys_none() {
        let config = SyncerConfig::from_spec("ns", "vc", &VirtualClusterSpec::default());
        let mut yaml: serde_yaml::Value = serde_yaml::to_value(&config).unwrap();
        yaml.as_mapping_mut().unwrap().remove("coredns");
        let back: SyncerConfig = serde_yaml::from_value(yaml).unwrap();
        assert!(!back.coredns.enabled);
    }
}
