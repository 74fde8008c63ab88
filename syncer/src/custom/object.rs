//! Custom-resource objects across the boundary (pure): the host mirror of a tenant's object
//! (to-host) and the tenant's copy of a host object (from-host).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::{api::DynamicObject, discovery::ApiResource};
use serde_json::{Value, json};
use vnest_crds::{
    containment::covers,
    digest::short_hash,
    meta::{ANNOTATION_APPLIED_HASH, LABEL_FROM_HOST},
    translate,
};

use super::merge;
use crate::translate::{Target, TranslateError};

/// On a from-host copy: the host's content at the last sync, so a tenant's edit of a field
/// stays until the host changes that field ([`merge::merge`]).
pub const ANNOTATION_LAST_HOST: &str = "vnest.dev/last-host-content";

/// Everything but apiVersion, kind, metadata and status: what the spec of a custom
/// resource is, whatever its schema calls it.
pub fn content(obj: &DynamicObject) -> Value {
    let mut data = obj.data.clone();
    if let Value::Object(map) = &mut data {
        map.remove("status");
    }
    match data {
        Value::Object(_) => data,
        _ => json!({}),
    }
}

/// The object's status; an empty one (as extension API servers return for objects no
/// controller touched) counts as none, so it is never copied.
pub fn status(obj: &DynamicObject) -> Option<&Value> {
    obj.data
        .get("status")
        .filter(|s| !s.is_null() && s.as_object().is_none_or(|o| !o.is_empty()))
}

/// The host name of a tenant's object.
pub fn host_name(target: &Target, namespaced: bool, name: &str, namespace: &str) -> String {
    if namespaced {
        target.host_name(name, namespace)
    } else {
        translate::host_cluster_name(name, &target.host_namespace, &target.vc)
    }
}

/// The host mirror of tenant object `virt`: translated name and markers, the tenant's
/// content, and [`ANNOTATION_APPLIED_HASH`] of that content, so a field the tenant removes
/// is removed on the host too (the hash changes) while host-side defaults never cause a write.
pub fn to_host(
    target: &Target,
    resource: &ApiResource,
    namespaced: bool,
    virt: &DynamicObject,
) -> Result<Value, TranslateError> {
    let name = virt
        .metadata
        .name
        .as_deref()
        .ok_or_else(|| TranslateError::Unnamed {
            kind: resource.kind.clone(),
        })?;
    let mut meta = target.host_meta(&resource.kind, &virt.metadata);
    if !namespaced {
        meta.name = Some(host_name(target, false, name, ""));
        meta.namespace = None;
    }
    let content = content(virt);
    let hash = short_hash(content.to_string().as_bytes());
    meta.annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(ANNOTATION_APPLIED_HASH.into(), hash);
    Ok(body(resource, meta, content))
}

/// Whether the host mirror `host` already is what `desired` ([`to_host`]) asks for.
pub fn mirror_current(host: &DynamicObject, desired: &Value) -> bool {
    let applied = host
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_APPLIED_HASH));
    let wanted = desired["metadata"]["annotations"][ANNOTATION_APPLIED_HASH].as_str();
    let host_json = serde_json::to_value(host).unwrap_or_default();
    applied.map(String::as_str) == wanted && covers(&host_json, desired)
}

/// The tenant's copy of host object `host`, given the copy as it is (if any): the host's
/// labels and annotations plus [`LABEL_FROM_HOST`], and content merged field by field.
pub fn from_host(
    resource: &ApiResource,
    host: &DynamicObject,
    copy: Option<&DynamicObject>,
) -> Value {
    let host_content = content(host);
    let last: Option<Value> = copy
        .and_then(|c| c.metadata.annotations.as_ref())
        .and_then(|a| a.get(ANNOTATION_LAST_HOST))
        .and_then(|s| serde_json::from_str(s).ok());
    let copy_content = copy.map(content);
    let merged = merge::merge(last.as_ref(), &host_content, copy_content.as_ref());
    let mut labels = host.metadata.labels.clone().unwrap_or_default();
    labels.insert(LABEL_FROM_HOST.into(), "true".into());
    let mut annotations: BTreeMap<String, String> = host
        .metadata
        .annotations
        .iter()
        .flatten()
        .filter(|(k, _)| k.as_str() != "kubectl.kubernetes.io/last-applied-configuration")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    annotations.insert(ANNOTATION_LAST_HOST.into(), host_content.to_string());
    let meta = ObjectMeta {
        name: host.metadata.name.clone(),
        namespace: host.metadata.namespace.clone(),
        labels: Some(labels),
        annotations: Some(annotations),
        ..Default::default()
    };
    body(resource, meta, merged)
}

/// Whether the tenant's copy already is what `desired` ([`from_host`]) asks for. Content
/// compares exactly: a field the host dropped must go from the copy too.
pub fn copy_current(copy: &DynamicObject, desired: &Value) -> bool {
    let copy_json = serde_json::to_value(copy).unwrap_or_default();
    let mut wanted_content = desired.clone();
    if let Value::Object(map) = &mut wanted_content {
        for key in ["apiVersion", "kind", "metadata"] {
            map.remove(key);
        }
    }
    content(copy) == wanted_content && covers(&copy_json["metadata"], &desired["metadata"])
}

fn body(resource: &ApiResource, meta: ObjectMeta, content: Value) -> Value {
    let mut body = content;
    body["apiVersion"] = json!(resource.api_version);
    body["kind"] = json!(resource.kind);
    body["metadata"] = serde_json::to_value(meta).unwrap_or_default();
    body
}

#[cfg(test)]
mod tests {
    use kube::core::GroupVersionKind;
    use vnest_crds::meta::{ANNOTATION_OBJECT_NAME, ANNOTATION_OBJECT_UID};

    use super::*;

    fn resource() -> ApiResource {
        let gvk = GroupVersionKind::gvk("wardle.example.com", "v1beta1", "Flunder");
        ApiResource::from_gvk_with_plural(&gvk, "flunders")
    }

    fn object(value: Value) -> DynamicObject {
        serde_json::from_value(value).unwrap()
    }

    fn tenant_flunder() -> DynamicObject {
        object(json!({
            "apiVersion": "wardle.example.com/v1beta1", "kind": "Flunder",
            "metadata": {"name": "f", "namespace": "team", "uid": "u-1", "resourceVersion": "7",
                         "labels": {"app": "x"}},
            "spec": {"reference": "r"},
            "status": {"phase": "ok"},
        }))
    }

    #[test]
    fn the_host_mirror_has_the_translated_name_markers_and_tenant_content() {
        let target = Target::new("vc", "host-ns");
        let m = to_host(&target, &resource(), true, &tenant_flunder()).unwrap();
        assert_eq!(m["metadata"]["name"], "f-x-team-x-vc");
        assert_eq!(m["metadata"]["namespace"], "host-ns");
        assert_eq!(m["metadata"]["annotations"][ANNOTATION_OBJECT_NAME], "f");
        assert_eq!(m["metadata"]["annotations"][ANNOTATION_OBJECT_UID], "u-1");
        assert_eq!(m["metadata"]["resourceVersion"], Value::Null);
        assert_eq!(m["spec"]["reference"], "r");
        assert_eq!(m["status"], Value::Null, "status belongs to the host");
        assert_eq!(m["apiVersion"], "wardle.example.com/v1beta1");
        assert_eq!(m["kind"], "Flunder");
    }

    #[test]
    fn a_cluster_scoped_mirror_gets_the_cluster_name_rule_and_no_namespace() {
        let target = Target::new("vc", "host-ns");
        let mut f = tenant_flunder();
        f.metadata.namespace = None;
        let m = to_host(&target, &resource(), false, &f).unwrap();
        assert_eq!(m["metadata"]["name"], "vcluster-f-x-host-ns-x-vc");
        assert_eq!(m["metadata"]["namespace"], Value::Null);
    }

    #[test]
    fn a_nameless_object_cannot_be_mirrored() {
        let mut f = tenant_flunder();
        f.metadata.name = None;
        let e = to_host(&Target::new("vc", "h"), &resource(), true, &f)
            .unwrap_err()
            .to_string();
        assert!(e.contains("metadata.name"), "{e}");
    }

    #[test]
    fn a_mirror_is_current_until_the_tenant_changes_or_removes_a_field() {
        let target = Target::new("vc", "h");
        let f = tenant_flunder();
        let desired = to_host(&target, &resource(), true, &f).unwrap();
        let mut host = object(desired.clone());
        // The host's own defaults do not count.
        host.data["spec"]["defaulted"] = json!(true);
        assert!(mirror_current(&host, &desired));
        let mut removed = f.clone();
        removed.data["spec"]
            .as_object_mut()
            .unwrap()
            .remove("reference");
        let desired = to_host(&target, &resource(), true, &removed).unwrap();
        assert!(
            !mirror_current(&host, &desired),
            "a removed field changes the hash"
        );
    }

    #[test]
    fn a_copy_takes_host_content_and_labels_with_the_from_host_mark() {
        let host = object(json!({
            "apiVersion": "wardle.example.com/v1beta1", "kind": "Flunder",
            "metadata": {"name": "shared", "namespace": "team", "uid": "h-1", "labels": {"tier": "gold"}},
            "spec": {"reference": "host"},
            "status": {"phase": "Ready"},
        }));
        let c = from_host(&resource(), &host, None);
        assert_eq!(c["metadata"]["name"], "shared");
        assert_eq!(c["metadata"]["namespace"], "team");
        assert_eq!(c["metadata"]["uid"], Value::Null);
        assert_eq!(c["metadata"]["labels"]["tier"], "gold");
        assert_eq!(c["metadata"]["labels"][LABEL_FROM_HOST], "true");
        assert_eq!(c["spec"]["reference"], "host");
        assert_eq!(
            c["status"],
            Value::Null,
            "status is written through its subresource"
        );
        let last: Value = serde_json::from_str(
            c["metadata"]["annotations"][ANNOTATION_LAST_HOST]
                .as_str()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(last, json!({"spec": {"reference": "host"}}));
    }

    #[test]
    fn a_tenant_edit_of_a_copy_stays_until_the_host_changes_that_field() {
        let mut host = object(json!({
            "apiVersion": "wardle.example.com/v1beta1", "kind": "Flunder",
            "metadata": {"name": "shared", "namespace": "team"},
            "spec": {"reference": "host", "other": 1},
        }));
        let first = object(from_host(&resource(), &host, None));
        let mut edited = first.clone();
        edited.data["spec"]["reference"] = json!("tenant");
        let again = from_host(&resource(), &host, Some(&edited));
        assert!(
            copy_current(&edited, &again),
            "nothing to write: the edit stays"
        );
        host.data["spec"]["other"] = json!(2);
        let after_other = from_host(&resource(), &host, Some(&edited));
        assert_eq!(
            after_other["spec"],
            json!({"reference": "tenant", "other": 2})
        );
        host.data["spec"]["reference"] = json!("host-2");
        let after_same = from_host(&resource(), &host, Some(&object(after_other)));
        assert_eq!(
            after_same["spec"]["reference"], "host-2",
            "the host wins the field it changed"
        );
    }

    #[test]
    fn a_field_the_host_drops_leaves_the_copy() {
        let mut host = object(json!({
            "apiVersion": "v", "kind": "K", "metadata": {"name": "n"},
            "spec": {"a": 1, "b": 2},
        }));
        let copy = object(from_host(&resource(), &host, None));
        host.data["spec"].as_object_mut().unwrap().remove("b");
        let desired = from_host(&resource(), &host, Some(&copy));
        assert!(!copy_current(&copy, &desired));
        assert_eq!(desired["spec"], json!({"a": 1}));
    }
}
