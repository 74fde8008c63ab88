//! Deciding whether a child must be applied, without a request: it must when it is missing,
//! when its applied-hash annotation says the desired state changed, or when someone edited a
//! field the operator owns. An idle resync therefore writes nothing.

use serde_json::Value;
use sha2::{Digest, Sha256};
use vnest_crds::{meta, quantity_value};

/// Short, stable digest of a desired object.
pub fn hash_of(object: &Value) -> String {
    let digest = Sha256::digest(object.to_string().as_bytes());
    digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
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

/// True when every field of `desired` has the same value in `actual` (which may hold more,
/// such as defaults and status). Quantities compare by value, as the API server rewrites
/// them to a canonical spelling.
pub fn contains(actual: &Value, desired: &Value) -> bool {
    match (desired, actual) {
        (Value::Object(want), Value::Object(have)) => want.iter().all(|(k, w)| match have.get(k) {
            Some(h) => contains(h, w),
            None => is_empty(w),
        }),
        (Value::Object(want), Value::Null) => want.values().all(is_empty),
        (Value::Array(want), Value::Array(have)) => {
            want.len() == have.len() && want.iter().zip(have).all(|(w, h)| contains(h, w))
        }
        (Value::Array(want), Value::Null) => want.is_empty(),
        (Value::String(w), Value::String(h)) => {
            w == h || matches!((quantity_value(w), quantity_value(h)), (Some(a), Some(b)) if a == b)
        }
        (Value::Number(w), Value::String(h)) | (Value::String(h), Value::Number(w)) => {
            quantity_value(h).is_some_and(|h| Some(h) == w.as_f64())
        }
        (w, h) => w == h,
    }
}

/// The API server drops empty maps and lists; wanting one is satisfied by its absence.
fn is_empty(value: &Value) -> bool {
    match value {
        Value::Object(m) => m.values().all(is_empty),
        Value::Array(a) => a.is_empty(),
        Value::Null => true,
        _ => false,
    }
}

/// Whether `desired` (already carrying `hash`) must be applied over `actual`.
pub fn needs_apply(desired: &Value, hash: &str, actual: Option<&Value>) -> bool {
    let Some(actual) = actual else { return true };
    let applied = actual["metadata"]["annotations"][meta::ANNOTATION_APPLIED_HASH].as_str();
    applied != Some(hash) || !contains(actual, desired)
}

#[cfg(test)]
mod tests {
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
}
