//! Operator-wide settings that shape every VirtualCluster's objects (from flags/env).

use std::net::IpAddr;

/// Images the operator writes into StatefulSets when a spec names none.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Images {
    /// `vnest-syncer` of the operator's own version unless overridden.
    pub syncer: String,
    pub k3s: String,
    pub k0s: String,
    /// Upstream Kubernetes: API server, controller manager and etcd images.
    pub kube_apiserver: String,
    pub kube_controller_manager: String,
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
            kube_apiserver: "registry.k8s.io/kube-apiserver:v1.31.2".into(),
            kube_controller_manager: "registry.k8s.io/kube-controller-manager:v1.31.2".into(),
            etcd: "registry.k8s.io/etcd:3.5.15-0".into(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    pub images: Images,
    /// DNS suffix of the host cluster's Services, for certificate names.
    pub cluster_domain: String,
    /// The operator's wake endpoint (`--wake-address`, `--wake-advertise-ip`); auto-wakeup
    /// routes a sleeping cluster's Service to it. `None`: the Service always selects the pod.
    pub wake: Option<WakeEndpoint>,
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
            wake: None,
        }
    }
}
