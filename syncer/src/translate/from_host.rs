//! Cluster-scoped objects the host owns and the virtual cluster shows (StorageClasses,
//! IngressClasses, PriorityClasses, CSIDrivers, CSINodes): the virtual copy has the host's
//! name and content, a marker label, and none of the host's identity.

use std::collections::BTreeMap;

use kube::Resource;
use serde::{Serialize, de::DeserializeOwned};
use serde_json::{Value, json};
pub use vnest_crds::meta::LABEL_FROM_HOST;

use super::annotation_passes;

/// Host labels plus the marker saying the syncer made the virtual object.
pub fn from_host_labels(labels: Option<&BTreeMap<String, String>>) -> BTreeMap<String, String> {
    let mut out = labels.cloned().unwrap_or_default();
    out.insert(LABEL_FROM_HOST.to_string(), "true".to_string());
    out
}

/// The virtual copy of cluster-scoped host object `host`: everything but its identity
/// (uid, resource version, owner references, managed fields) and its status.
pub fn virtual_copy<K: Resource + Serialize + DeserializeOwned>(host: &K) -> anyhow::Result<K> {
    let meta = host.meta();
    let annotations: BTreeMap<&String, &String> = meta
        .annotations
        .iter()
        .flatten()
        .filter(|(k, _)| annotation_passes(k))
        .collect();
    let mut value = serde_json::to_value(host)?;
    if let Value::Object(fields) = &mut value {
        fields.remove("status");
        fields.insert(
            "metadata".to_string(),
            json!({
                "name": meta.name,
                "labels": from_host_labels(meta.labels.as_ref()),
                "annotations": annotations,
            }),
        );
    }
    Ok(serde_json::from_value(value)?)
}

/// Whether a virtual object is one the syncer made (only those are updated or deleted).
pub fn is_from_host<K: Resource>(obj: &K) -> bool {
    obj.meta()
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(LABEL_FROM_HOST))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::{
        networking::v1::IngressClass, scheduling::v1::PriorityClass, storage::v1::StorageClass,
    };

    use super::super::test_support::*;
    use super::*;

    /// A StorageClass keeps provisioner, parameters and the default-class annotation, and
    /// loses the host's identity.
    #[test]
    fn storage_classes_are_copied_without_identity() {
        let host: StorageClass = from_yaml(
            r#"
metadata:
  name: gp3
  uid: u-1
  resourceVersion: "4"
  labels: { tier: fast }
  annotations:
    storageclass.kubernetes.io/is-default-class: "true"
    kubectl.kubernetes.io/last-applied-configuration: "{}"
provisioner: ebs.csi.aws.com
parameters: { type: gp3 }
allowVolumeExpansion: true
volumeBindingMode: WaitForFirstConsumer
"#,
        );
        let copy = virtual_copy(&host).unwrap();
        assert_eq!(copy.metadata.name.as_deref(), Some("gp3"));
        assert_eq!(copy.metadata.uid, None);
        assert_eq!(copy.metadata.resource_version, None);
        assert!(is_from_host(&copy) && !is_from_host(&host));
        assert_eq!(copy.metadata.labels.as_ref().unwrap()["tier"], "fast");
        let annotations = copy.metadata.annotations.unwrap();
        assert_eq!(
            annotations["storageclass.kubernetes.io/is-default-class"],
            "true"
        );
        assert!(!annotations.contains_key("kubectl.kubernetes.io/last-applied-configuration"));
        assert_eq!(copy.provisioner, "ebs.csi.aws.com");
        assert_eq!(copy.parameters.unwrap()["type"], "gp3");
        assert_eq!(copy.allow_volume_expansion, Some(true));
    }

    /// Kinds with a spec or top-level fields keep them whole.
    #[test]
    fn ingress_and_priority_classes_keep_their_fields() {
        let ingress: IngressClass =
            from_yaml("metadata: {name: alb}\nspec: {controller: ingress.k8s.aws/alb}");
        let copy = virtual_copy(&ingress).unwrap();
        assert_eq!(
            copy.spec.unwrap().controller.as_deref(),
            Some("ingress.k8s.aws/alb")
        );
        let priority: PriorityClass =
            from_yaml("metadata: {name: high}\nvalue: 1000\npreemptionPolicy: Never");
        let copy = virtual_copy(&priority).unwrap();
        assert_eq!(copy.value, Some(1000));
        assert_eq!(copy.preemption_policy.as_deref(), Some("Never"));
    }
}
