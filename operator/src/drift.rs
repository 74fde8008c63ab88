//! Deciding whether a child must be applied. It must when it is missing, when its
//! applied-hash annotation says the desired state changed, or when someone edited a field the
//! operator owns. The first two show in the child's metadata. So does the third: a write by
//! anyone else that changes or removes a field the operator applied takes that field out of
//! the operator's managedFields entry (server-side apply moves ownership of every field an
//! update changes, and drops removed fields from every owner). The watch caches therefore
//! keep of each child only its [`Marks`]: the applied hash and a digest of the operator's
//! entry; a child whose digest differs from the one last verified is read in full and compared
//! with [`contains`]. An idle resync therefore writes nothing and reads nothing.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;
/// True when every field of `desired` has the same value in `actual` (which may hold more,
/// such as defaults and status). Quantities compare by value, as the API server rewrites
/// them to a canonical spelling.
pub use vnest_crds::containment::covers_quantities as contains;
use vnest_crds::{digest, meta};

/// Short, stable digest of a desired object.
pub fn hash_of(object: &Value) -> String {
    digest::short_hash(object.to_string().as_bytes())
}

/// `desired` with its applied-hash annotation set.
pub fn with_hash(mut desired: Value) -> (Value, String) {
    let hash = hash_of(&desired);
    let metadata = &mut desired["metadata"];
    if !metadata["annotations"].is_object() {
        metadata["annotations"] = Value::Object(Default::default());
    }
    metadata["annotations"][meta::ANNOTATION_APPLIED_HASH] = Value::String(hash.clone());
    (desired, hash)
}

/// Whether `desired` (already carrying `hash`) must be applied over `actual`.
pub fn needs_apply(desired: &Value, hash: &str, actual: Option<&Value>) -> bool {
    let Some(actual) = actual else { return true };
    let applied = actual["metadata"]["annotations"][meta::ANNOTATION_APPLIED_HASH].as_str();
    applied != Some(hash) || !contains(actual, desired)
}

/// Digest of the fields `manager` owns on the main resource through server-side apply, or
/// None when it owns none there. Stable across status writes, renewals and edits of fields it
/// does not own; changed by any write that takes or removes one of its fields.
pub fn owned_fields(meta: &ObjectMeta, manager: &str) -> Option<String> {
    let entry = meta.managed_fields.as_ref()?.iter().find(|e| {
        e.manager.as_deref() == Some(manager)
            && e.operation.as_deref() == Some("Apply")
            && e.subresource.as_deref().unwrap_or_default().is_empty()
    })?;
    let fields = &entry.fields_v1.as_ref()?.0;
    let version = entry.api_version.as_deref().unwrap_or_default();
    Some(digest::sha256_hex_prefix(
        format!("{version} {fields}").as_bytes(),
        12,
    ))
}

/// What the drift check reads of a child's metadata: its applied-hash annotation and the
/// [`owned_fields`] digest.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Marks {
    pub applied_hash: Option<Box<str>>,
    pub owned: Option<Box<str>>,
}

impl Marks {
    pub fn of(meta: &ObjectMeta, manager: &str) -> Self {
        Marks {
            applied_hash: meta
                .annotations
                .as_ref()
                .and_then(|a| a.get(meta::ANNOTATION_APPLIED_HASH))
                .map(|hash| hash.as_str().into()),
            owned: owned_fields(meta, manager).map(Into::into),
        }
    }
}

/// What the metadata of a cached child says about it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Check {
    /// Not there: create it.
    Missing,
    /// Applied from another desired state (or its annotation was edited): apply.
    Stale,
    /// As last verified, and nobody took a field since: leave it.
    Trusted,
    /// Not verified since this process started, or someone took or removed a field the
    /// operator owns: read it in full and compare.
    Suspect,
}

/// Classifies a cached child by the marks of its metadata alone. `verified` is the
/// [`owned_fields`] digest recorded when the operator last applied the child or found it as
/// desired.
pub fn check(cached: Option<&Marks>, hash: &str, verified: Option<&str>) -> Check {
    let Some(cached) = cached else {
        return Check::Missing;
    };
    if cached.applied_hash.as_deref() != Some(hash) {
        return Check::Stale;
    }
    match cached.owned.as_deref() {
        Some(owned) if verified == Some(owned) => Check::Trusted,
        _ => Check::Suspect,
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry};
    use serde_json::json;

    use super::*;

    #[test]
    fn defaults_and_status_on_the_server_do_not_count_as_drift() {
        let desired =
            json!({ "spec": { "ports": [{ "port": 443 }], "selector": { "app": "vcluster" } } });
        let actual = json!({
            "spec": { "ports": [{ "port": 443, "protocol": "TCP" }], "selector": { "app": "vcluster" }, "clusterIP": "10.96.0.4" },
            "status": { "loadBalancer": {} },
        });
        assert!(contains(&actual, &desired));
    }

    #[test]
    fn an_edited_or_removed_field_is_drift() {
        let desired = json!({ "spec": { "replicas": 1, "selector": { "app": "vcluster" } } });
        assert!(!contains(
            &json!({ "spec": { "replicas": 3, "selector": { "app": "vcluster" } } }),
            &desired
        ));
        assert!(!contains(&json!({ "spec": { "replicas": 1 } }), &desired));
        let rules = json!({ "rules": [{ "verbs": ["get"] }, { "verbs": ["list"] }] });
        assert!(!contains(
            &json!({ "rules": [{ "verbs": ["get"] }] }),
            &rules
        ));
    }

    #[test]
    fn quantities_compare_by_value() {
        assert!(contains(
            &json!({ "cpu": "500m" }),
            &json!({ "cpu": "0.5" })
        ));
        assert!(contains(&json!({ "pods": "50" }), &json!({ "pods": 50 })));
        assert!(!contains(&json!({ "cpu": "1" }), &json!({ "cpu": "2" })));
    }

    #[test]
    fn empty_maps_and_lists_match_their_absence() {
        assert!(contains(
            &json!({ "metadata": { "name": "a" } }),
            &json!({ "metadata": { "name": "a", "labels": {} }, "items": [] })
        ));
    }

    #[test]
    fn hash_changes_with_the_object_and_missing_or_stale_hash_needs_apply() {
        let (a, hash_a) =
            with_hash(json!({ "metadata": { "name": "x" }, "spec": { "replicas": 1 } }));
        let (_, hash_b) =
            with_hash(json!({ "metadata": { "name": "x" }, "spec": { "replicas": 0 } }));
        assert_ne!(hash_a, hash_b);
        assert!(needs_apply(&a, &hash_a, None));
        assert!(!needs_apply(&a, &hash_a, Some(&a)));
        assert!(needs_apply(&a, &hash_b, Some(&a)));
    }

    fn entry(
        manager: &str,
        operation: &str,
        subresource: Option<&str>,
        fields: Value,
    ) -> ManagedFieldsEntry {
        ManagedFieldsEntry {
            manager: Some(manager.into()),
            operation: Some(operation.into()),
            subresource: subresource.map(Into::into),
            api_version: Some("apps/v1".into()),
            fields_type: Some("FieldsV1".into()),
            fields_v1: Some(FieldsV1(fields)),
            time: None,
        }
    }

    fn meta_with(hash: &str, entries: Vec<ManagedFieldsEntry>) -> ObjectMeta {
        ObjectMeta {
            annotations: Some(
                [(meta::ANNOTATION_APPLIED_HASH.to_string(), hash.to_string())].into(),
            ),
            managed_fields: Some(entries),
            ..Default::default()
        }
    }

    const ME: &str = "vnest-operator";

    fn ours() -> ManagedFieldsEntry {
        entry(
            ME,
            "Apply",
            None,
            json!({ "f:spec": { "f:replicas": {}, "f:template": {} } }),
        )
    }

    /// The controller-manager writing the status subresource.
    fn status_writer() -> ManagedFieldsEntry {
        entry(
            "kube-controller-manager",
            "Update",
            Some("status"),
            json!({ "f:status": {} }),
        )
    }

    #[test]
    fn the_digest_ignores_status_writers_and_other_managers_but_not_a_taken_field() {
        let alone = meta_with("h", vec![ours()]);
        let digest = owned_fields(&alone, ME).unwrap();
        let busy = meta_with(
            "h",
            vec![
                status_writer(),
                ours(),
                entry(
                    "vnest-syncer",
                    "Update",
                    None,
                    json!({ "f:spec": { "f:renewTime": {} } }),
                ),
            ],
        );
        assert_eq!(owned_fields(&busy, ME).as_ref(), Some(&digest));
        // `kubectl scale` took spec.replicas: it left the operator's set.
        let scaled = meta_with(
            "h",
            vec![
                entry(ME, "Apply", None, json!({ "f:spec": { "f:template": {} } })),
                entry(
                    "kubectl",
                    "Update",
                    Some("scale"),
                    json!({ "f:spec": { "f:replicas": {} } }),
                ),
            ],
        );
        assert_ne!(owned_fields(&scaled, ME).as_ref(), Some(&digest));
        // Fields the operator only updated (not applied) do not count as owned.
        let updated = meta_with(
            "h",
            vec![entry(ME, "Update", None, json!({ "f:data": {} }))],
        );
        assert_eq!(owned_fields(&updated, ME), None);
    }

    #[test]
    fn only_an_unchanged_verified_child_is_trusted() {
        let meta = meta_with("h", vec![ours()]);
        let marks = Marks::of(&meta, ME);
        let digest = owned_fields(&meta, ME).unwrap();
        assert_eq!(check(None, "h", None), Check::Missing);
        assert_eq!(check(Some(&marks), "other", Some(&digest)), Check::Stale);
        assert_eq!(
            check(Some(&Marks::of(&ObjectMeta::default(), ME)), "h", None),
            Check::Stale
        );
        assert_eq!(check(Some(&marks), "h", Some(&digest)), Check::Trusted);
        // Never verified by this process (a restart): read once.
        assert_eq!(check(Some(&marks), "h", None), Check::Suspect);
        // Verified before someone took a field.
        assert_eq!(check(Some(&marks), "h", Some("before")), Check::Suspect);
        // The operator's entry gone altogether (managedFields reset by an update).
        let reset = meta_with("h", vec![entry("kubectl-edit", "Update", None, json!({}))]);
        assert_eq!(
            check(Some(&Marks::of(&reset, ME)), "h", Some(&digest)),
            Check::Suspect
        );
    }
}
