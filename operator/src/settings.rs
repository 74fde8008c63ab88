//! Operator-wide settings that shape every VirtualCluster's objects (from flags/env).

use std::net::IpAddr;

use vnest_crds::ServiceCidr;

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

fn default_service_cidr() -> ServiceCidr {
    DEFAULT_SERVICE_CIDR.parse().expect("a valid CIDR")
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    pub images: Images,
    /// DNS suffix of the host cluster's Services, for certificate names.
    pub cluster_domain: String,
    /// The virtual API server's Service range. It must contain the host's Service CIDR: the
    /// syncer gives virtual Services the ClusterIPs of their host copies.
    pub service_cidr: ServiceCidr,
    /// The host's own Service ranges (its `kubernetes` ServiceCIDR object), given to every
    /// syncer so it can ask the host for the address the virtual API server chose; empty
    /// when unreadable (then every virtual Service is recreated with its host copy's).
    pub host_service_cidrs: Vec<ServiceCidr>,
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
        let service_cidr = default_service_cidr();
        Settings {
            images: Images::default(),
            cluster_domain: "cluster.local".into(),
            service_cidr,
            host_service_cidrs: vec![],
            host_dns: service_cidr.nth(10),
            wake: None,
            allow_extra_rules: false,
        }
    }
}
