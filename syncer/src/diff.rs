//! "Does the host object already say what we want?" — comparing only the fields we set, so
//! defaults the API server adds never cause a write.

use serde_json::Value;

/// Whether every field set in `desired` has the same value in `actual`. Objects compare by
/// their keys in `desired`; lists element by element and must be as long; an empty or null
/// desired value is covered by an absent one.
pub fn covers(actual: &Value, desired: &Value) -> bool {
    match (actual, desired) {
        (_, Value::Null) => true,
        (Value::Null, Value::Object(d)) => d.values().all(|v| covers(&Value::Null, v)),
        (Value::Null, Value::Array(d)) => d.is_empty(),
        (Value::Object(a), Value::Object(d)) => d
            .iter()
            .all(|(k, v)| covers(a.get(k).unwrap_or(&Value::Null), v)),
        (Value::Array(a), Value::Array(d)) => {
            a.len() == d.len() && a.iter().zip(d).all(|(a, d)| covers(a, d))
        }
        (a, d) => a == d,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::covers;

    /// Server defaults and status do not count as a difference.
    #[test]
    fn extra_fields_on_the_host_are_ignored() {
        let actual = json!({"spec": {"type": "ClusterIP", "clusterIP": "10.0.0.1", "ports": [{"port": 80, "protocol": "TCP"}]}});
        let desired = json!({"spec": {"ports": [{"port": 80}]}});
        assert!(covers(&actual, &desired));
    }

    /// A changed value, a missing key or a different list length is a difference.
    #[test]
    fn changed_missing_or_resized_fields_differ() {
        let actual = json!({"data": {"a": "1"}, "l": [1, 2]});
        assert!(!covers(&actual, &json!({"data": {"a": "2"}})));
        assert!(!covers(&actual, &json!({"data": {"b": "1"}})));
        assert!(!covers(&actual, &json!({"l": [1]})));
    }

    /// `labels: {}` in the desired object is satisfied by no labels at all.
    #[test]
    fn empty_desired_values_are_covered_by_absence() {
        assert!(covers(
            &json!({}),
            &json!({"labels": {}, "items": [], "x": null})
        ));
        assert!(!covers(&json!({}), &json!({"labels": {"a": "b"}})));
    }
}
