//! "Does the live object already say what we want?" Containment of a desired object in a live
//! one, comparing only the fields the desired object sets, so defaults, status and fields other
//! writers own never count as a difference. The operator (its children) and the syncer (host
//! copies) both decide whether to write with it.
//!
//! Objects compare by the keys of the desired object; lists element by element and must be as
//! long; an empty map or list (or null) in the desired object is satisfied by an absent field,
//! since the API server drops empty values. The two entry points differ only at the leaves.

use serde_json::Value;

use crate::quantity_value;

/// Whether every field set in `desired` has the same value in `actual`. A desired `null` is
/// "not set" and matches anything; other leaves must be equal.
pub fn covers(actual: &Value, desired: &Value) -> bool {
    contained(actual, desired, &|actual, desired| {
        desired.is_null() || actual == desired
    })
}

/// As [`covers`], but quantities (`"500m"`, `"0.5"`, `50`) compare by value, as the API server
/// rewrites them to a canonical spelling, and a desired `null` must be null or absent.
pub fn covers_quantities(actual: &Value, desired: &Value) -> bool {
    contained(
        actual,
        desired,
        &|actual, desired| match (desired, actual) {
            (Value::String(w), Value::String(h)) => {
                w == h
                    || matches!((quantity_value(w), quantity_value(h)), (Some(a), Some(b)) if a == b)
            }
            (Value::Number(w), Value::String(h)) | (Value::String(h), Value::Number(w)) => {
                quantity_value(h).is_some_and(|h| Some(h) == w.as_f64())
            }
            (w, h) => w == h,
        },
    )
}

/// The walk both share: maps by desired key, lists pairwise, `leaf(actual, desired)` for the rest.
fn contained(actual: &Value, desired: &Value, leaf: &dyn Fn(&Value, &Value) -> bool) -> bool {
    match (desired, actual) {
        (Value::Object(want), Value::Object(have)) => want.iter().all(|(k, w)| match have.get(k) {
            Some(h) => contained(h, w, leaf),
            None => is_empty(w),
        }),
        (Value::Object(want), Value::Null) => want.values().all(is_empty),
        (Value::Array(want), Value::Array(have)) => {
            want.len() == have.len() && want.iter().zip(have).all(|(w, h)| contained(h, w, leaf))
        }
        (Value::Array(want), Value::Null) => want.is_empty(),
        (w, h) => leaf(h, w),
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Server defaults and status do not count as a difference.
    #[test]
    fn extra_fields_on_the_live_object_are_ignored() {
        let actual = json!({
            "spec": { "type": "ClusterIP", "clusterIP": "10.0.0.1", "ports": [{ "port": 80, "protocol": "TCP" }] },
            "status": { "loadBalancer": {} },
        });
        let desired = json!({ "spec": { "ports": [{ "port": 80 }] } });
        assert!(covers(&actual, &desired));
        assert!(covers_quantities(&actual, &desired));
    }

    /// A changed value, a missing key or a different list length is a difference.
    #[test]
    fn changed_missing_or_resized_fields_differ() {
        let actual = json!({ "data": { "a": "1" }, "l": [1, 2] });
        for desired in [
            json!({ "data": { "a": "2" } }),
            json!({ "data": { "b": "1" } }),
            json!({ "l": [1] }),
            json!({ "l": [1, 2, 3] }),
            json!({ "data": "a" }),
        ] {
            assert!(!covers(&actual, &desired), "{desired}");
            assert!(!covers_quantities(&actual, &desired), "{desired}");
        }
    }

    /// `labels: {}` in the desired object is satisfied by no labels at all.
    #[test]
    fn empty_desired_values_are_covered_by_absence() {
        let empty = json!({ "labels": {}, "items": [], "x": null, "m": { "n": {} } });
        assert!(covers(&json!({}), &empty));
        assert!(covers_quantities(&json!({}), &empty));
        assert!(covers(&Value::Null, &empty));
        assert!(!covers(&json!({}), &json!({ "labels": { "a": "b" } })));
        assert!(!covers_quantities(&json!({}), &json!({ "items": [1] })));
    }

    /// Only the quantity-aware comparison reads `"500m"` as `"0.5"`; only the plain one lets a
    /// desired null stand for any value.
    #[test]
    fn the_leaves_are_where_the_two_differ() {
        let cpu = (json!({ "cpu": "500m" }), json!({ "cpu": "0.5" }));
        assert!(covers_quantities(&cpu.0, &cpu.1));
        assert!(!covers(&cpu.0, &cpu.1));
        assert!(covers_quantities(
            &json!({ "pods": "50" }),
            &json!({ "pods": 50 })
        ));
        assert!(!covers_quantities(
            &json!({ "cpu": "1" }),
            &json!({ "cpu": "2" })
        ));
        let set = json!({ "x": "value" });
        assert!(covers(&set, &json!({ "x": null })));
        assert!(!covers_quantities(&set, &json!({ "x": null })));
    }
}
