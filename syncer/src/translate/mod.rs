//! Pure translation between virtual objects and their host copies: one file per kind, no API
//! calls, so every rule is a unit test.

pub mod api_service;
pub mod configmap;
pub mod endpoints;
pub mod error;
pub mod event;
pub mod from_host;
pub mod gateway;
pub mod ingress;
pub mod network_policy;
pub mod node;
pub mod pdb;
pub mod placement;
pub mod pod;
pub mod pod_security;
pub mod priority_class;
pub mod pv;
pub mod pvc;
pub mod replicated_service;
pub mod secret;
pub mod service;
pub mod service_account;

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use vnest_crds::translate;

pub use error::TranslateError;

/// Annotations of a virtual object that never reach its host copy: the syncer's own, and
/// kubectl's copy of the virtual manifest (which names virtual objects).
fn annotation_passes(key: &str) -> bool {
    !key.starts_with("vcluster.loft.sh/")
        && key != "kubectl.kubernetes.io/last-applied-configuration"
}

/// Where host copies go: the virtual cluster's name and its host namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub vc: String,
    pub host_namespace: String,
}

impl Target {
    pub fn new(vc: &str, host_namespace: &str) -> Self {
        Target {
            vc: vc.to_string(),
            host_namespace: host_namespace.to_string(),
        }
    }

    /// Host name of virtual object `name` in virtual namespace `namespace`.
    pub fn host_name(&self, name: &str, namespace: &str) -> String {
        translate::host_name(name, namespace, &self.vc)
    }

    /// Metadata of the host copy of a `kind` object: translated name in the host namespace,
    /// tenant labels (reserved keys rewritten) plus markers, tenant annotations plus the
    /// `object-*` annotations. Nothing else (no uid, owner references or finalizers).
    pub fn host_meta(&self, kind: &str, virt: &ObjectMeta) -> ObjectMeta {
        let name = virt.name.as_deref().unwrap_or_default();
        let namespace = virt.namespace.as_deref().unwrap_or_default();
        let annotations = host_annotations(kind, virt);
        ObjectMeta {
            name: Some(self.host_name(name, namespace)),
            namespace: Some(self.host_namespace.clone()),
            labels: Some(translate::host_labels(
                virt.labels.as_ref(),
                namespace,
                &self.vc,
            )),
            annotations: Some(annotations),
            ..Default::default()
        }
    }
}

/// The annotations of the host copy of `kind` object `virt`: the tenant's own (those that
/// pass the reserved-key filter) plus the `object-*` annotations naming the original.
pub fn host_annotations(kind: &str, virt: &ObjectMeta) -> BTreeMap<String, String> {
    let mut annotations: BTreeMap<String, String> = virt
        .annotations
        .iter()
        .flatten()
        .filter(|(k, _)| annotation_passes(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    annotations.extend(translate::object_annotations(
        kind,
        virt.name.as_deref().unwrap_or_default(),
        virt.namespace.as_deref().unwrap_or_default(),
        virt.uid.as_deref().unwrap_or_default(),
    ));
    annotations
}

#[cfg(test)]
pub(crate) mod test_support {
    use serde::de::DeserializeOwned;

    use super::Target;

    pub fn target() -> Target {
        Target::new("vc", "host-ns")
    }

    /// An object from a YAML fixture.
    pub fn from_yaml<K: DeserializeOwned>(yaml: &str) -> K {
        serde_yaml::from_str(yaml).expect("fixture YAML")
    }
}

#[cfg(test)]
mod tests {
    use vnest_crds::meta::{ANNOTATION_OBJECT_UID, LABEL_SYNCER_MANAGED_BY};

    use super::test_support::*;
    use super::*;

    /// The host copy is named, labelled and annotated as design.md says, and carries none of
    /// the virtual object's identity fields.
    #[test]
    fn host_metadata_names_the_virtual_object() {
        let virt: ObjectMeta = from_yaml(
            r#"
name: web
namespace: shop
uid: u-1
resourceVersion: "7"
finalizers: [x]
labels: { app: web }
annotations:
  note: kept
  vcluster.loft.sh/object-uid: forged
  kubectl.kubernetes.io/last-applied-configuration: "{}"
"#,
        );
        let host = target().host_meta("ConfigMap", &virt);
        assert_eq!(host.name.as_deref(), Some("web-x-shop-x-vc"));
        assert_eq!(host.namespace.as_deref(), Some("host-ns"));
        assert_eq!(host.labels.as_ref().unwrap()[LABEL_SYNCER_MANAGED_BY], "vc");
        let annotations = host.annotations.unwrap();
        assert_eq!(annotations["note"], "kept");
        assert_eq!(annotations[ANNOTATION_OBJECT_UID], "u-1");
        assert!(!annotations.contains_key("kubectl.kubernetes.io/last-applied-configuration"));
        assert!(host.resource_version.is_none() && host.finalizers.is_none());
    }
}
