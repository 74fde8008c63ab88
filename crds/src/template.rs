//! The `VirtualClusterTemplate` custom resource (cluster-scoped): a vetted VirtualCluster spec
//! with parameters, which a VirtualCluster names in `spec.template` instead of spelling
//! everything out. The template body is handlebars over YAML; `{{name}}` and `{{namespace}}`
//! are the VirtualCluster's, every other variable a declared parameter.

use std::collections::BTreeMap;

use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

/// A named, parameterised VirtualCluster spec.
// Clippy mistakes the repeated `printcolumn(...)` keys for duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "vnest.dev",
    version = "v1alpha1",
    kind = "VirtualClusterTemplate",
    shortname = "vct",
    category = "vnest",
    derive = "PartialEq",
    doc = "A vetted VirtualCluster spec with parameters, used through a VirtualCluster's spec.template.",
    printcolumn(
        name = "Description",
        type_ = "string",
        json_path = ".spec.description"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct VirtualClusterTemplateSpec {
    /// What the template is for, shown by `kubectl get vct`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 256))]
    pub description: Option<String>,
    /// Parameters the template body may use, with defaults and allowed values.
    #[serde(default)]
    #[schemars(length(max = 32))]
    pub parameters: Vec<TemplateParameter>,
    /// A VirtualCluster spec as YAML, rendered with handlebars: `{{name}}`, `{{namespace}}`
    /// and the declared parameters.
    #[schemars(length(min = 1, max = 65536))]
    pub template: String,
}

/// One parameter of a template.
#[derive(KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TemplateParameter {
    #[schemars(length(min = 1, max = 63), regex(pattern = r"^[a-zA-Z][a-zA-Z0-9_]*$"))]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 256))]
    pub description: Option<String>,
    /// Used when the VirtualCluster gives no value; without one the parameter is required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub default: Option<String>,
    /// When set, the only values accepted.
    #[serde(default)]
    #[schemars(length(max = 32))]
    pub allowed_values: Vec<String>,
}

/// `spec.template` of a VirtualCluster: which template, with which parameter values.
#[derive(KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TemplateRef {
    /// Name of a VirtualClusterTemplate.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    #[serde(default)]
    #[schemars(length(max = 32))]
    pub parameters: BTreeMap<String, String>,
}

/// `status.template` of a VirtualCluster: the template version its spec was rendered from.
#[derive(KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RenderedTemplate {
    pub name: String,
    /// `metadata.generation` of the template when rendered.
    pub generation: i64,
}
