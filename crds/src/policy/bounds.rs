//! The parts of a `VirtualClusterPolicy` that bound one area of a VirtualCluster's spec.

use k8s_openapi::{api::rbac::v1::PolicyRule, apimachinery::pkg::api::resource::Quantity};
use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::QuantityMap;

/// `spec.controlPlane` of a policy.
#[derive(KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ControlPlaneBounds {
    /// Ceilings on `controlPlane.statefulSet.resources` (the operator's defaults count when the
    /// spec sets none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_resources: Option<ResourceCeilings>,
    /// Ceiling on `controlPlane.statefulSet.persistence.size` (5Gi when the spec sets none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("isQuantity(string(self))").message("must be a quantity such as 20Gi"))]
    pub max_persistence_size: Option<Quantity>,
}

/// Ceilings on a container's requests and limits, e.g. `limits: {memory: 2Gi}`.
#[derive(KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ResourceCeilings {
    #[serde(default)]
    pub requests: QuantityMap,
    #[serde(default)]
    pub limits: QuantityMap,
}

/// A required object and the ceilings on what it may allow: every key here must be set in
/// the VirtualCluster's, at most this much.
#[derive(KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Ceilings {
    #[serde(default)]
    pub max: QuantityMap,
}

/// `spec.rbac` of a policy: extra syncer rules a VirtualCluster may ask for. A rule the
/// VirtualCluster asks for is allowed when one of these covers it (every API group, resource,
/// verb and resource name of it is listed here, or `*`).
#[derive(KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RbacBounds {
    /// Rules `rbac.role.extraRules` may ask for (in the VirtualCluster's namespace).
    #[serde(default)]
    pub role: AllowedRules,
    /// Rules `rbac.clusterRole.extraRules` may ask for (cluster-wide).
    #[serde(default)]
    pub cluster_role: AllowedRules,
}

#[derive(KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AllowedRules {
    #[serde(default)]
    #[schemars(length(max = 64))]
    pub allowed_rules: Vec<PolicyRule>,
}

/// `spec.sync` of a policy; a direction left out is not restricted.
#[derive(KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncBounds {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_host: Option<AllowedToHost>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_host: Option<AllowedFromHost>,
}

/// The only `sync.toHost` resources a VirtualCluster may enable.
#[derive(KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AllowedToHost {
    #[serde(default)]
    pub kinds: Vec<ToHostKind>,
    /// `<plural>.<group>` keys of `sync.toHost.customResources` (any version).
    #[serde(default)]
    #[schemars(length(max = 64), inner(length(min = 1, max = 253)))]
    pub custom_resources: Vec<String>,
}

/// The only `sync.fromHost` resources a VirtualCluster may enable.
#[derive(KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AllowedFromHost {
    #[serde(default)]
    pub kinds: Vec<FromHostKind>,
    /// `<plural>.<group>` keys of `sync.fromHost.customResources` (any version).
    #[serde(default)]
    #[schemars(length(max = 64), inner(length(min = 1, max = 253)))]
    pub custom_resources: Vec<String>,
}

/// A `sync.toHost` field, spelled as in the VirtualCluster spec.
#[derive(JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToHostKind {
    Pods,
    Services,
    Endpoints,
    Configmaps,
    Secrets,
    Persistentvolumeclaims,
    Ingresses,
    Serviceaccounts,
    Networkpolicies,
    Poddisruptionbudgets,
    Priorityclasses,
    Gateways,
    #[serde(rename = "httpRoutes")]
    HttpRoutes,
    #[serde(rename = "grpcRoutes")]
    GrpcRoutes,
    #[serde(rename = "tlsRoutes")]
    TlsRoutes,
}

/// A `sync.fromHost` field, spelled as in the VirtualCluster spec.
#[derive(JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum FromHostKind {
    Nodes,
    StorageClasses,
    IngressClasses,
    CsiDrivers,
    CsiNodes,
    CsiStorageCapacities,
    PriorityClasses,
    GatewayClasses,
    Events,
}
