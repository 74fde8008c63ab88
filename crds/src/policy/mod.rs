//! The `VirtualClusterPolicy` custom resource (cluster-scoped, owned by the platform admins):
//! it selects namespaces by label and bounds what the VirtualClusters in them may ask, and
//! fills what their specs leave out. The operator checks every VirtualCluster against the one
//! policy selecting its namespace; a spec outside it is refused with `SpecValid=False`.

mod bounds;

pub use bounds::*;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use crate::{DurationSpec, PodSecurityStandard, VirtualClusterSpec};

/// Bounds and defaults for the VirtualClusters of the namespaces it selects.
// Clippy mistakes the repeated `printcolumn(...)` keys for duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "vnest.dev",
    version = "v1alpha1",
    kind = "VirtualClusterPolicy",
    shortname = "vcp",
    category = "vnest",
    derive = "PartialEq",
    doc = "Bounds and defaults for the VirtualClusters in the namespaces it selects; owned by the platform admins.",
    printcolumn(name = "Distros", type_ = "string", json_path = ".spec.allowedDistros"),
    printcolumn(
        name = "Min-PSS",
        type_ = "string",
        json_path = ".spec.minPodSecurityStandard"
    ),
    printcolumn(
        name = "Max-TTL",
        type_ = "string",
        json_path = ".spec.lifecycle.maxAfterCreation"
    ),
    printcolumn(
        name = "Selector",
        type_ = "string",
        json_path = ".spec.namespaceSelector",
        priority = "1"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct VirtualClusterPolicySpec {
    /// The namespaces whose VirtualClusters this policy governs; `{}` selects every namespace.
    /// At most one policy may select a namespace.
    #[x_kube(validation = Rule::new(SELECTOR_RULE).message(SELECTOR_MESSAGE))]
    pub namespace_selector: LabelSelector,
    /// Fields a VirtualCluster (and its template) leaves out are taken from here, as from a
    /// template: a value equal to its schema default counts as left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("!has(self.template)").message("a policy's defaults may not name a template"))]
    pub defaults: Option<Box<VirtualClusterSpec>>,
    /// Distros a VirtualCluster may run; any when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 3))]
    pub allowed_distros: Option<Vec<DistroName>>,
    /// Image repositories a VirtualCluster may set for its distro (`rancher/k3s`), or prefixes
    /// ending in `*` (`registry.example.com/*`); any when absent. The operator's own default
    /// images are always allowed (the admins chose them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32), inner(length(min = 1, max = 253)))]
    pub allowed_images: Option<Vec<String>>,
    /// Ceilings on the control plane's StatefulSet.
    #[serde(default)]
    pub control_plane: ControlPlaneBounds,
    /// The lowest Pod Security Standard a VirtualCluster may enforce; also its default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_pod_security_standard: Option<PodSecurityStandard>,
    /// When set, every VirtualCluster has a ResourceQuota, within these ceilings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_quota: Option<Ceilings>,
    /// When set, every VirtualCluster has a LimitRange, its `max` within these ceilings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_range: Option<Ceilings>,
    /// The extra syncer rights (`rbac.*.extraRules`) a VirtualCluster may ask for.
    #[serde(default)]
    pub rbac: RbacBounds,
    /// The resources a VirtualCluster may sync.
    #[serde(default)]
    pub sync: SyncBounds,
    /// A maximum lifetime and required sleep.
    #[serde(default)]
    pub lifecycle: LifecycleBounds,
}

/// Label selector expressions the API server would accept on a built-in object.
const SELECTOR_RULE: &str = "!has(self.matchExpressions) || self.matchExpressions.all(e, (e.operator in ['In', 'NotIn'] && has(e.values) && size(e.values) > 0) || (e.operator in ['Exists', 'DoesNotExist'] && (!has(e.values) || size(e.values) == 0)))";
const SELECTOR_MESSAGE: &str = "every matchExpressions entry needs operator In or NotIn with values, or Exists or DoesNotExist without values";

/// A distribution a policy may allow.
#[derive(schemars::JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DistroName {
    K3s,
    K0s,
    K8s,
}

impl DistroName {
    pub fn as_str(self) -> &'static str {
        match self {
            DistroName::K3s => "k3s",
            DistroName::K0s => "k0s",
            DistroName::K8s => "k8s",
        }
    }
}

/// `spec.lifecycle` of a policy.
#[derive(KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LifecycleBounds {
    /// Longest `autoDelete.afterCreation` (a TTL) allowed; a VirtualCluster without one gets
    /// this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_after_creation: Option<DurationSpec>,
    /// Every VirtualCluster sleeps after at most this much inactivity
    /// (`sleepMode.afterInactivity`); one without gets this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_sleep_after_inactivity: Option<DurationSpec>,
}
