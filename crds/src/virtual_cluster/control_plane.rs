//! `spec.controlPlane`: which Kubernetes distribution runs the virtual API server, and how
//! its StatefulSet, Service and Ingress look on the host.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::core::v1::{Affinity, EnvVar, ResourceRequirements, Toleration},
    apimachinery::pkg::api::resource::Quantity,
};
use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ControlPlane {
    #[serde(default)]
    pub distro: Distro,
    #[serde(default)]
    pub backing_store: BackingStore,
    #[serde(default)]
    pub stateful_set: StatefulSetConfig,
    #[serde(default)]
    pub service: ServiceConfig,
    #[serde(default)]
    pub ingress: IngressConfig,
    #[serde(default)]
    pub coredns: CoreDns,
}

/// The public image vnest runs CoreDNS from unless the spec names another.
pub const DEFAULT_COREDNS_IMAGE: &str = "registry.k8s.io/coredns/coredns:v1.12.1";

/// The virtual cluster's DNS server (vCluster's `controlPlane.coredns`): the syncer keeps a
/// CoreDNS Deployment, its ConfigMap and the `kube-dns` Service in the virtual cluster's
/// `kube-system`, and tenant pods resolve through it.
#[derive(KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CoreDns {
    /// Off: vnest deploys no DNS server (and removes the one it deployed); pods resolve
    /// through a `kube-system/kube-dns` the tenant provides, if any.
    #[serde(default = "on")]
    pub enabled: bool,
    #[serde(default)]
    pub deployment: CoreDnsDeployment,
}

impl Default for CoreDns {
    fn default() -> Self {
        CoreDns {
            enabled: true,
            deployment: CoreDnsDeployment::default(),
        }
    }
}

impl CoreDns {
    /// No DNS server deployed.
    pub fn disabled() -> Self {
        CoreDns {
            enabled: false,
            ..CoreDns::default()
        }
    }
}

fn on() -> bool {
    true
}

/// How the CoreDNS Deployment in the virtual cluster runs (its pods are synced to the host
/// like any tenant pod).
#[derive(KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CoreDnsDeployment {
    /// Image reference; `registry.k8s.io/coredns/coredns:v1.12.1` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512))]
    pub image: Option<String>,
    #[serde(default = "one")]
    #[schemars(range(min = 0, max = 10))]
    pub replicas: i32,
    #[serde(default)]
    pub node_selector: BTreeMap<String, String>,
    #[serde(default)]
    pub tolerations: Vec<Toleration>,
}

impl Default for CoreDnsDeployment {
    fn default() -> Self {
        CoreDnsDeployment {
            image: None,
            replicas: one(),
            node_selector: BTreeMap::new(),
            tolerations: Vec::new(),
        }
    }
}

fn one() -> i32 {
    1
}

impl CoreDnsDeployment {
    /// The image to run: the spec's, or [`DEFAULT_COREDNS_IMAGE`].
    pub fn image(&self) -> &str {
        self.image.as_deref().unwrap_or(DEFAULT_COREDNS_IMAGE)
    }
}

/// The backing distribution. At most one may be enabled; k3s runs when none is.
#[derive(KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[x_kube(validation = Rule::new(
    "(has(self.k3s) && self.k3s.enabled ? 1 : 0) + (has(self.k0s) && self.k0s.enabled ? 1 : 0) + (has(self.k8s) && self.k8s.enabled ? 1 : 0) <= 1"
).message("enable only one of k3s, k0s and k8s (set enabled: false on the others); with none enabled vnest runs k3s"))]
pub struct Distro {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub k3s: Option<DistroConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub k0s: Option<DistroConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub k8s: Option<DistroConfig>,
}

/// A distribution vnest can run as the virtual control plane.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DistroKind {
    K3s,
    K0s,
    K8s,
}

impl DistroKind {
    /// The spelling used in the spec and in `status.distro`.
    pub fn as_str(self) -> &'static str {
        match self {
            DistroKind::K3s => "k3s",
            DistroKind::K0s => "k0s",
            DistroKind::K8s => "k8s",
        }
    }
}

impl Distro {
    /// The enabled distribution and its settings; k3s with defaults when none is enabled.
    /// (The schema already refuses more than one.)
    pub fn selected(&self) -> (DistroKind, DistroConfig) {
        let enabled = |c: &Option<DistroConfig>| c.as_ref().filter(|c| c.enabled).cloned();
        if let Some(c) = enabled(&self.k0s) {
            (DistroKind::K0s, c)
        } else if let Some(c) = enabled(&self.k8s) {
            (DistroKind::K8s, c)
        } else {
            let k3s = self.k3s.clone().unwrap_or_default();
            (DistroKind::K3s, k3s)
        }
    }
}

#[derive(KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DistroConfig {
    #[serde(default)]
    pub enabled: bool,
    /// Image of the distribution; the operator's pinned default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<Image>,
    /// Extra command-line arguments, e.g. `--disable=traefik,servicelb,metrics-server,local-storage`.
    #[serde(default)]
    #[schemars(length(max = 64))]
    pub extra_args: Vec<String>,
    /// Extra environment of the distribution's main container (kube-apiserver for `k8s`),
    /// e.g. `GOMEMLIMIT`; a name given here replaces the operator's default of that name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub env: Vec<EnvVar>,
}

/// Where the virtual API server keeps its objects, in vCluster's shape; both live on the data
/// claim. With neither enabled: the embedded database (SQLite through kine for k8s, k3s's own
/// SQLite), except for k0s, whose only store here is etcd.
#[derive(KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[x_kube(validation = Rule::new(
    "!(has(self.database) && has(self.database.embedded) && has(self.database.embedded.enabled) && self.database.embedded.enabled && has(self.etcd) && has(self.etcd.embedded) && has(self.etcd.embedded.enabled) && self.etcd.embedded.enabled)"
).message("enable only one of database.embedded and etcd.embedded (set enabled: false on the other); with neither vnest uses the embedded database"))]
pub struct BackingStore {
    /// An embedded SQL database (SQLite) on the data claim.
    #[serde(default)]
    pub database: StoreConfig,
    /// An embedded etcd on the data claim; k3s runs it with `--cluster-init`.
    #[serde(default)]
    pub etcd: StoreConfig,
}

#[derive(KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StoreConfig {
    #[serde(default)]
    pub embedded: Embedded,
}

#[derive(KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Embedded {
    #[serde(default)]
    pub enabled: bool,
}

/// The store a control plane runs on, after defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreKind {
    Database,
    Etcd,
}

impl BackingStore {
    /// The store `distro` runs on: etcd when enabled, and always for k0s; the database otherwise.
    pub fn selected(&self, distro: DistroKind) -> StoreKind {
        if self.etcd.embedded.enabled || distro == DistroKind::K0s {
            StoreKind::Etcd
        } else {
            StoreKind::Database
        }
    }
}

#[derive(KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Image {
    /// e.g. `rancher/k3s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("size(self) > 0 && !self.contains(' ')").message("must be an image repository without spaces, e.g. rancher/k3s"))]
    pub repository: Option<String>,
    /// e.g. `v1.31.2-k3s1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self.matches('^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$')").message("must be an image tag: letters, digits, '_', '.', '-', at most 128 characters"))]
    pub tag: Option<String>,
}

/// The control plane's StatefulSet on the host.
#[derive(KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatefulSetConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    #[serde(default)]
    pub persistence: Persistence,
    /// Extra labels on the StatefulSet and its pod.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Extra annotations on the StatefulSet and its pod.
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    #[serde(default)]
    pub scheduling: Scheduling,
}

/// The control plane's data volume (`data-<name>-0`).
#[derive(KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Persistence {
    /// Requested size; 5Gi when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("isQuantity(string(self)) && quantity(string(self)).isGreaterThan(quantity('0'))").message("must be a positive quantity such as 10Gi"))]
    pub size: Option<Quantity>,
    /// StorageClass of the claim; the host's default class when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class: Option<String>,
}

#[derive(KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Scheduling {
    #[serde(default)]
    pub node_selector: BTreeMap<String, String>,
    #[serde(default)]
    pub tolerations: Vec<Toleration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,
}

/// The `<name>` Service in front of the virtual API server.
#[derive(KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceConfig {
    #[serde(default)]
    pub spec: ServiceSpecConfig,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

#[derive(KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ServiceSpecConfig {
    #[serde(default, rename = "type")]
    pub type_: ServiceType,
}

#[derive(JsonSchema, Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum ServiceType {
    #[default]
    ClusterIP,
    NodePort,
    LoadBalancer,
}

/// An Ingress `<name>` for the virtual API server: `host` routed to the `<name>` Service's
/// port 443, where the syncer's proxy speaks TLS itself. For ingress-nginx (a class whose name
/// contains `nginx`, or no class: the cluster's default) the operator adds its TLS-passthrough
/// annotations; other controllers need theirs in `annotations`.
#[derive(KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("!self.enabled || has(self.host)").message("set host when the ingress is enabled, e.g. team-alpha.vc.example.com"))]
pub struct IngressConfig {
    /// Off: no Ingress (the one made earlier is deleted).
    #[serde(default)]
    pub enabled: bool,
    /// The host name tenants reach the API at; also a name of the serving certificate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    #[x_kube(validation = Rule::new("self.matches('^(\\\\*\\\\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')").message("must be a DNS name such as team-alpha.vc.example.com"))]
    pub host: Option<String>,
    /// The IngressClass; the cluster's default class when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    #[x_kube(validation = Rule::new("self.matches('^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$')").message("must be the name of an IngressClass (lowercase letters, digits, '-' and '.'), e.g. nginx"))]
    pub ingress_class_name: Option<String>,
    /// Annotations of the Ingress; they win over the passthrough ones the operator adds.
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(yaml: &str) -> BackingStore {
        serde_yaml::from_str(yaml).unwrap()
    }

    /// vCluster's default: the embedded database unless etcd is asked for; k0s has only etcd.
    #[test]
    fn the_database_is_the_default_store_except_for_k0s() {
        assert_eq!(store("{}").selected(DistroKind::K8s), StoreKind::Database);
        assert_eq!(store("{}").selected(DistroKind::K3s), StoreKind::Database);
        assert_eq!(store("{}").selected(DistroKind::K0s), StoreKind::Etcd);
        let etcd = store("etcd: {embedded: {enabled: true}}");
        assert_eq!(etcd.selected(DistroKind::K8s), StoreKind::Etcd);
        assert_eq!(etcd.selected(DistroKind::K3s), StoreKind::Etcd);
    }
}
