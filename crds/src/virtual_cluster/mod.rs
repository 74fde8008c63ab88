//! The `VirtualCluster` custom resource. Its spec follows the shape of vCluster's
//! `vcluster.yaml`, so a platform team can move a values file into a CR with little editing.

mod control_plane;
mod lifecycle;
mod policies;
mod resolve_dns;
mod status;
mod sync;

pub use control_plane::*;
pub use lifecycle::*;
pub use policies::*;
pub use resolve_dns::*;
pub use status::*;
pub use sync::*;

use k8s_openapi::api::rbac::v1::PolicyRule;
use kube::{CustomResource, KubeSchema, core::Rule};

use crate::meta;
use serde::{Deserialize, Serialize};

/// A virtual Kubernetes cluster whose control plane and synced workloads live in this
/// object's namespace on the host cluster.
// Clippy mistakes the repeated `printcolumn(...)` keys for duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "vnest.dev",
    version = "v1alpha1",
    kind = "VirtualCluster",
    namespaced,
    status = "VirtualClusterStatus",
    shortname = "vc",
    shortname = "vcluster",
    category = "vnest",
    derive = "PartialEq",
    doc = "A virtual Kubernetes cluster: a control plane and syncer running in this namespace of the host.",
    validation = name_length_rule(),
    validation = name_format_rule(),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Distro", type_ = "string", json_path = ".status.distro"),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Endpoint",
        type_ = "string",
        json_path = ".status.endpoint",
        priority = "1"
    ),
    printcolumn(
        name = "Last-Activity",
        type_ = "date",
        json_path = ".status.lastActivityTime",
        priority = "1"
    ),
    printcolumn(
        name = "Sleeping-Since",
        type_ = "date",
        json_path = ".status.sleepingSince",
        priority = "1"
    ),
    printcolumn(
        name = "Next-Sleep",
        type_ = "date",
        json_path = ".status.nextSleepTime",
        priority = "1"
    ),
    printcolumn(
        name = "Next-Wake",
        type_ = "date",
        json_path = ".status.nextWakeTime",
        priority = "1"
    ),
    printcolumn(
        name = "Delete-At",
        type_ = "date",
        json_path = ".status.deleteAt",
        priority = "1"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct VirtualClusterSpec {
    /// The virtual control plane: distro, StatefulSet, Service and Ingress.
    #[serde(default)]
    pub control_plane: ControlPlane,
    /// Which resources the syncer copies between the virtual cluster and the host.
    #[serde(default)]
    pub sync: Sync,
    #[serde(default)]
    pub networking: Networking,
    /// Isolation applied on the host namespace: quota, limit range, network policies, pod security.
    #[serde(default)]
    pub policies: Policies,
    /// Extra permissions for the syncer on the host.
    #[serde(default)]
    pub rbac: Rbac,
    /// Scale the virtual cluster to zero when idle or on a schedule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sleep_mode: Option<SleepMode>,
    /// Delete the VirtualCluster after inactivity or a fixed lifetime.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_delete: Option<AutoDelete>,
    /// Sleep now and stay asleep until set back to false.
    #[serde(default)]
    pub paused: bool,
    /// How the tenant kubeconfig (Secret `vc-<name>` by default) is written.
    #[serde(default)]
    pub export_kubeconfig: ExportKubeconfig,
    /// Start from a VirtualClusterTemplate: its rendered spec, with the fields set here on top.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<crate::TemplateRef>,
}

/// A rule on `metadata.name`, checked when the VirtualCluster is created: the name cannot
/// change afterwards, and an object an older CRD let in must still take status writes and lose
/// its finalizer (the operator refuses it instead, with `SpecValid=False`).
fn on_create(condition: &str, reason: &str) -> Rule {
    Rule::new(format!("oldSelf.hasValue() || {condition}"))
        .optional_old_self(true)
        .message(format!("metadata.name {reason}").as_str())
}

/// Refuses a name some host object could not be named after ([`meta::MAX_VIRTUAL_CLUSTER_NAME`]).
fn name_length_rule() -> Rule {
    on_create(
        &format!(
            "size(self.metadata.name) <= {}",
            meta::MAX_VIRTUAL_CLUSTER_NAME
        ),
        &meta::name_length_reason(),
    )
}

/// Refuses a name the control plane's Services cannot take.
fn name_format_rule() -> Rule {
    on_create(
        "self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",
        meta::NAME_FORMAT_REASON,
    )
}

/// Networking between the virtual cluster and the host.
#[derive(KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Networking {
    #[serde(default)]
    pub replicate_services: ReplicateServices,
    /// Names the virtual cluster's DNS server answers from outside it: a host name through
    /// the host's DNS server, a fixed address, another name, a host Service's ClusterIP, or a
    /// virtual namespace's Service names as those of a host namespace.
    #[serde(default, rename = "resolveDNS", skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub resolve_dns: Vec<ResolveDns>,
    #[serde(default)]
    pub advanced: NetworkingAdvanced,
}

/// The virtual cluster's own network settings (vCluster's `networking.advanced`).
#[derive(KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkingAdvanced {
    /// DNS domain of the virtual cluster's Services (`<svc>.<ns>.svc.<clusterDomain>`):
    /// tenant pods search it and the virtual cluster's DNS serves it. Independent of the
    /// host's domain.
    #[serde(default = "default_cluster_domain")]
    #[schemars(length(max = 253))]
    #[x_kube(validation = Rule::new(CLUSTER_DOMAIN_RULE).message(CLUSTER_DOMAIN_MESSAGE))]
    pub cluster_domain: String,
}

impl Default for NetworkingAdvanced {
    fn default() -> Self {
        NetworkingAdvanced {
            cluster_domain: default_cluster_domain(),
        }
    }
}

/// Kubernetes' default cluster domain, and vCluster's.
pub const DEFAULT_CLUSTER_DOMAIN: &str = "cluster.local";

fn default_cluster_domain() -> String {
    DEFAULT_CLUSTER_DOMAIN.to_string()
}

const CLUSTER_DOMAIN_RULE: &str =
    "self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')";
const CLUSTER_DOMAIN_MESSAGE: &str =
    "must be a lowercase DNS name without a trailing dot, e.g. cluster.local";

/// Services mirrored across the boundary under another name.
#[derive(KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplicateServices {
    /// Host Services made reachable inside the virtual cluster.
    #[serde(default)]
    #[schemars(length(max = 32))]
    pub from_host: Vec<ServiceMapping>,
    /// Virtual Services exposed on the host.
    #[serde(default)]
    #[schemars(length(max = 32))]
    pub to_host: Vec<ServiceMapping>,
}

const SERVICE_REF_RULE: &str =
    "self.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?/)?[a-z0-9]([-a-z0-9]*[a-z0-9])?$')";
const SERVICE_REF_MESSAGE: &str =
    "must be <namespace>/<name> or <name>, lowercase DNS labels (e.g. kube-system/kube-dns)";

/// One replicated Service: `from` on one side appears as `to` on the other.
#[derive(KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ServiceMapping {
    /// `<namespace>/<name>` (or `<name>`) of the Service to copy.
    #[schemars(length(max = 127))]
    #[x_kube(validation = Rule::new(SERVICE_REF_RULE).message(SERVICE_REF_MESSAGE))]
    pub from: String,
    /// `<namespace>/<name>` (or `<name>`) it appears as.
    #[schemars(length(max = 127))]
    #[x_kube(validation = Rule::new(SERVICE_REF_RULE).message(SERVICE_REF_MESSAGE))]
    pub to: String,
}

/// `(namespace, name)` of a [`ServiceMapping`] side (`<namespace>/<name>` or `<name>`), with
/// `default_namespace` when it names none.
pub fn split_service_ref<'a>(reference: &'a str, default_namespace: &'a str) -> (&'a str, &'a str) {
    reference
        .split_once('/')
        .unwrap_or((default_namespace, reference))
}

/// Extra RBAC rules for the syncer's host permissions.
#[derive(KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Rbac {
    /// Added to the namespaced Role of the syncer.
    #[serde(default)]
    pub role: ExtraRules,
    /// Added to the syncer's ClusterRole (created only when something needs it).
    #[serde(default)]
    pub cluster_role: ExtraRules,
}

#[derive(KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExtraRules {
    #[serde(default)]
    #[schemars(length(max = 64))]
    pub extra_rules: Vec<PolicyRule>,
}

/// Where the tenant kubeconfig goes and what it says.
#[derive(KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExportKubeconfig {
    /// Context name in the kubeconfig; defaults to `vcluster-<name>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("size(self) > 0 && size(self) <= 253").message("must be a non-empty context name of at most 253 characters"))]
    pub context: Option<String>,
    /// Server URL in the kubeconfig; defaults to the in-cluster Service URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("isURL(self) && self.startsWith('https://')").message("must be an https:// URL such as https://team-alpha.example.com:443"))]
    pub server: Option<String>,
    #[serde(default)]
    pub secret: KubeconfigSecret,
}

#[derive(KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct KubeconfigSecret {
    /// Secret name; defaults to `vc-<name>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self.matches('^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$') && size(self) <= 253").message("must be a valid Secret name (lowercase letters, digits, '-' and '.')"))]
    pub name: Option<String>,
}
