//! `status` of a VirtualCluster: what the operator observed and applied.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(JsonSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VirtualClusterStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,
    /// `Ready`, `ControlPlaneReady`, `SpecValid`, `Sleeping`, ...
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// The spec generation this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The distribution running the control plane (`k3s`, `k0s`, `k8s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distro: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_replicas: Option<i32>,
    /// Secret holding the tenant kubeconfig.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubeconfig_secret: Option<String>,
    /// URL of the virtual API server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// Time of the last tenant request seen by the syncer's proxy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_activity_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sleeping_since: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_sleep_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_wake_time: Option<Time>,
    /// When auto-delete will remove this VirtualCluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_at: Option<Time>,
    /// The VirtualClusterTemplate version the spec was rendered from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<crate::RenderedTemplate>,
}

#[derive(JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Phase {
    Pending,
    Provisioning,
    Running,
    Sleeping,
    Paused,
    Failed,
    Terminating,
}
