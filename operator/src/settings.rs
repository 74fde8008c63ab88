//! Operator-wide settings that shape every VirtualCluster's objects (from flags/env).

use std::net::IpAddr;

/// Images the operator writes into StatefulSets when a spec names none.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Images {
    /// `vnest-syncer` of the operator's own version unless overridden.
    pub syncer: String,
    pub k3s: String,
    pub k0s: String,
    /// Upstream Kubernetes: one image with `/usr/local/bin/kube-apiserver`,
    /// `kube-controller-manager` and `kine`, so an override moves them together.
    pub kubernetes: String,
    /// etcd (`/usr/local/bin/etcd`), for `backingStore.etcd` with distro k8s.
    pub etcd: String,
}

impl Default for Images {
    fn default() -> Self {
        Images {
            syncer: format!(
                "ghcr.io/vnest-dev/vnest-syncer:{}",
                env!("CARGO_PKG_VERSION")
            ),
            k3s: "rancher/k3s:v1.31.2-k3s1".into(),
            k0s: "k0sproject/k0s:v1.31.2-k0s.0".into(),
            kubernetes: "ghcr.io/vnest-dev/kubernetes:v1.37.2".into(),
            etcd: "registry.k8s.io/etcd:3.7.0-0".into(),
        }
    }
}

/// kubeadm's default Service CIDR.
pub const DEFAULT_SERVICE_CIDR: &str = "10.96.0.0/12";

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    pub images: Images,
    /// DNS suffix of the host cluster's Services, for certificate names.
    pub cluster_domain: String,
    /// The virtual API server's Service range. It must contain the host's Service CIDR: the
    /// syncer gives virtual Services the ClusterIPs of their host copies.
    pub service_cidr: String,
    /// The host cluster's DNS server (`--host-dns`), given to syncers whose spec has
    /// `networking.resolveDNS` entries; `None` when the Service CIDR is too small to guess it.
    pub host_dns: Option<IpAddr>,
    /// The operator's wake endpoint (`--wake-address`, `--wake-advertise-ip`); auto-wakeup
    /// routes a sleeping cluster's Service to it. `None`: the Service always selects the pod.
    pub wake: Option<WakeEndpoint>,
    /// `--allow-extra-rules`: VirtualClusters may add `rbac.*.extraRules` to the syncer's
    /// roles. Off by default: see `validate::guardrails`.
    pub allow_extra_rules: bool,
}

/// Where the operator's wake listener is reachable from inside the host cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WakeEndpoint {
    /// The operator pod's IP (an EndpointSlice address: never loopback).
    pub ip: IpAddr,
    pub port: u16,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            images: Images::default(),
            cluster_domain: "cluster.local".into(),
            service_cidr: DEFAULT_SERVICE_CIDR.into(),
            host_dns: tenth_address(DEFAULT_SERVICE_CIDR),
            wake: None,
            allow_extra_rules: false,
        }
    }
}

/// The 10th address of `cidr` (`10.96.0.10` for `10.96.0.0/12`): where kubeadm puts the
/// cluster's DNS Service. `None` for a malformed CIDR or one with fewer than 11 addresses.
pub fn tenth_address(cidr: &str) -> Option<IpAddr> {
    let (ip, prefix) = cidr.split_once('/')?;
    let prefix: u32 = prefix.parse().ok()?;
    match ip.parse::<IpAddr>().ok()? {
        IpAddr::V4(v4) if prefix <= 28 => {
            let network = u32::from(v4) & u32::MAX.checked_shl(32 - prefix).unwrap_or(0);
            Some(IpAddr::V4((network + 10).into()))
        }
        IpAddr::V6(v6) if prefix <= 124 => {
            let network = u128::from(v6) & u128::MAX.checked_shl(128 - prefix).unwrap_or(0);
            Some(IpAddr::V6((network + 10).into()))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The default host DNS address is kubeadm's: the 10th address of the Service range,
    /// counted from the network address whatever address the CIDR is written with.
    #[test]
    fn the_host_dns_defaults_to_the_tenth_address_of_the_service_cidr() {
        let at = |cidr: &str| tenth_address(cidr).map(|ip| ip.to_string());
        assert_eq!(at("10.96.0.0/12").as_deref(), Some("10.96.0.10"));
        assert_eq!(at("10.100.7.3/16").as_deref(), Some("10.100.0.10"));
        assert_eq!(at("fd00:10:96::/108").as_deref(), Some("fd00:10:96::a"));
        assert_eq!(at("0.0.0.0/0").as_deref(), Some("0.0.0.10"));
        assert_eq!(at("10.0.0.0/29"), None, "8 addresses have no 10th");
        assert_eq!(at("10.0.0.0"), None);
    }
}
