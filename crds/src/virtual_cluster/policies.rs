//! `spec.policies`: isolation the operator applies to the host namespace. The defaults are
//! the numbers from vCluster's isolation guide.

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::QuantityMap;

#[derive(KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Policies {
    /// ResourceQuota `vc-<name>` capping what the tenant's workloads may use.
    #[serde(default)]
    pub resource_quota: ResourceQuotaPolicy,
    /// LimitRange `vc-<name>` giving containers default requests and limits.
    #[serde(default)]
    pub limit_range: LimitRangePolicy,
    /// NetworkPolicies isolating the namespace from other tenants.
    #[serde(default)]
    pub network_policy: NetworkPolicyPolicy,
    /// Pod Security Standard enforced on the host namespace and by the syncer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_security_standard: Option<PodSecurityStandard>,
}

#[derive(KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ResourceQuotaPolicy {
    #[serde(default)]
    pub enabled: bool,
    /// `spec.hard` of the ResourceQuota.
    #[serde(default = "default_quota")]
    pub quota: QuantityMap,
}

impl Default for ResourceQuotaPolicy {
    fn default() -> Self {
        ResourceQuotaPolicy {
            enabled: false,
            quota: default_quota(),
        }
    }
}

fn default_quota() -> QuantityMap {
    QuantityMap::of([
        ("requests.cpu", "8"),
        ("requests.memory", "16Gi"),
        ("limits.cpu", "16"),
        ("limits.memory", "32Gi"),
        ("pods", "50"),
        ("services", "20"),
        ("services.loadbalancers", "2"),
        ("services.nodeports", "5"),
        ("persistentvolumeclaims", "10"),
        ("secrets", "50"),
        ("configmaps", "50"),
        ("requests.storage", "100Gi"),
    ])
}

/// Container defaults and bounds, plus a cap on claim size.
#[derive(KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LimitRangePolicy {
    #[serde(default)]
    pub enabled: bool,
    /// Default container limits.
    #[serde(default = "default_limits")]
    pub default: QuantityMap,
    /// Default container requests.
    #[serde(default = "default_requests")]
    pub default_request: QuantityMap,
    /// Largest container limits allowed.
    #[serde(default = "default_max")]
    pub max: QuantityMap,
    /// Smallest container requests allowed.
    #[serde(default)]
    pub min: QuantityMap,
    /// Largest PersistentVolumeClaim allowed.
    #[serde(default = "default_pvc_max")]
    pub persistent_volume_claim_max: QuantityMap,
}

impl Default for LimitRangePolicy {
    fn default() -> Self {
        LimitRangePolicy {
            enabled: false,
            default: default_limits(),
            default_request: default_requests(),
            max: default_max(),
            min: QuantityMap::default(),
            persistent_volume_claim_max: default_pvc_max(),
        }
    }
}

fn default_limits() -> QuantityMap {
    QuantityMap::of([("cpu", "500m"), ("memory", "512Mi")])
}
fn default_requests() -> QuantityMap {
    QuantityMap::of([("cpu", "100m"), ("memory", "128Mi")])
}
fn default_max() -> QuantityMap {
    QuantityMap::of([("cpu", "4"), ("memory", "8Gi")])
}
fn default_pvc_max() -> QuantityMap {
    QuantityMap::of([("storage", "50Gi")])
}

/// Workloads may reach each other, the control plane, DNS and `outgoingConnections`;
/// nothing from other namespaces gets in.
#[derive(KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkPolicyPolicy {
    #[serde(default)]
    pub enabled: bool,
    #[serde(default)]
    pub outgoing_connections: OutgoingConnections,
}

#[derive(KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OutgoingConnections {
    #[serde(default)]
    pub ip_block: IpBlock,
}

const CIDR_RULE: &str = "isCIDR(self)";
const CIDR_MESSAGE: &str = "must be a CIDR such as 0.0.0.0/0 or 10.0.0.0/8";

/// Egress allowed to `cidr` except the ranges listed (by default: public addresses only).
#[derive(KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IpBlock {
    #[serde(default = "any_address")]
    #[schemars(length(max = 43))]
    #[x_kube(validation = Rule::new(CIDR_RULE).message(CIDR_MESSAGE))]
    pub cidr: String,
    #[serde(default = "private_ranges")]
    #[schemars(length(max = 32), inner(length(max = 43)))]
    #[x_kube(validation = Rule::new("self.all(c, isCIDR(c))").message("every entry must be a CIDR such as 10.0.0.0/8"))]
    pub except: Vec<String>,
}

impl Default for IpBlock {
    fn default() -> Self {
        IpBlock {
            cidr: any_address(),
            except: private_ranges(),
        }
    }
}

fn any_address() -> String {
    "0.0.0.0/0".into()
}

fn private_ranges() -> Vec<String> {
    [
        "10.0.0.0/8",
        "172.16.0.0/12",
        "192.168.0.0/16",
        "100.64.0.0/10",
        "127.0.0.0/8",
        "169.254.0.0/16",
    ]
    .map(String::from)
    .to_vec()
}

/// The Kubernetes Pod Security Standard levels.
#[derive(JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum PodSecurityStandard {
    Privileged,
    Baseline,
    Restricted,
}

impl PodSecurityStandard {
    /// Volume sources the restricted level allows, as the upstream profile lists them.
    pub const RESTRICTED_VOLUMES: &[&str] = &[
        "configMap",
        "csi",
        "downwardAPI",
        "emptyDir",
        "ephemeral",
        "persistentVolumeClaim",
        "projected",
        "secret",
    ];

    /// The value of the `pod-security.kubernetes.io/*` namespace labels.
    pub fn as_str(self) -> &'static str {
        match self {
            PodSecurityStandard::Privileged => "privileged",
            PodSecurityStandard::Baseline => "baseline",
            PodSecurityStandard::Restricted => "restricted",
        }
    }
}
