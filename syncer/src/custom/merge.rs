//! From-host ownership (pure): the host owns a copied object, yet a tenant's edit of a field
//! stays until the host changes that same field. Decided field by field from three values:
//! what the host said at the last sync, what it says now, and what the tenant's copy holds.

use serde_json::{Map, Value};

/// The content the virtual copy should have. A field the host changed since `last` takes the
/// host's value (or goes, when the host dropped it); any other field keeps the tenant's
/// value (or stays gone, when the tenant dropped it). Objects merge key by key; lists and
/// scalars are single values. Without `last` (never synced) or without a copy, the host's
/// content is the answer.
pub fn merge(last: Option<&Value>, host: &Value, copy: Option<&Value>) -> Value {
    match (last, copy) {
        (Some(last), Some(copy)) => {
            merge_value(Some(last), Some(host), Some(copy)).unwrap_or(Value::Object(Map::new()))
        }
        _ => host.clone(),
    }
}

fn merge_value(last: Option<&Value>, host: Option<&Value>, copy: Option<&Value>) -> Option<Value> {
    match (last, host, copy) {
        (Some(Value::Object(l)), Some(Value::Object(h)), Some(Value::Object(c))) => {
            let keys = h.keys().chain(c.keys().filter(|k| !h.contains_key(*k)));
            let merged = keys
                .filter_map(|key| {
                    merge_value(l.get(key), h.get(key), c.get(key)).map(|v| (key.clone(), v))
                })
                .collect();
            Some(Value::Object(merged))
        }
        _ if last != host => host.cloned(),
        _ => copy.cloned(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::merge;

    #[test]
    fn a_first_sync_copies_the_host() {
        let host = json!({"spec": {"a": 1}});
        assert_eq!(merge(None, &host, None), host);
        assert_eq!(merge(None, &host, Some(&json!({"spec": {"a": 2}}))), host);
    }

    #[test]
    fn a_tenant_edit_stays_while_the_host_keeps_that_field() {
        let last = json!({"spec": {"a": 1, "b": "x"}});
        let host = json!({"spec": {"a": 1, "b": "x"}});
        let copy = json!({"spec": {"a": 5, "b": "x"}});
        assert_eq!(merge(Some(&last), &host, Some(&copy)), copy);
    }

    #[test]
    fn the_host_wins_the_field_it_changes_and_only_that_one() {
        let last = json!({"spec": {"a": 1, "b": "x"}});
        let host = json!({"spec": {"a": 2, "b": "x"}});
        let copy = json!({"spec": {"a": 5, "b": "tenant"}});
        assert_eq!(
            merge(Some(&last), &host, Some(&copy)),
            json!({"spec": {"a": 2, "b": "tenant"}})
        );
    }

    #[test]
    fn a_field_the_host_drops_goes_and_one_it_adds_comes() {
        let last = json!({"spec": {"a": 1, "b": 2}});
        let host = json!({"spec": {"a": 1, "c": 3}});
        let copy = json!({"spec": {"a": 1, "b": 2}});
        assert_eq!(
            merge(Some(&last), &host, Some(&copy)),
            json!({"spec": {"a": 1, "c": 3}})
        );
    }

    #[test]
    fn tenant_additions_and_removals_of_unchanged_fields_stay() {
        let last = json!({"spec": {"a": 1, "b": 2}});
        let host = last.clone();
        let copy = json!({"spec": {"a": 1, "extra": true}});
        assert_eq!(merge(Some(&last), &host, Some(&copy)), copy);
    }

    #[test]
    fn lists_are_one_value() {
        let last = json!({"spec": {"items": [1, 2]}});
        let host = json!({"spec": {"items": [1, 2, 3]}});
        let copy = json!({"spec": {"items": [9]}});
        assert_eq!(merge(Some(&last), &host, Some(&copy)), host);
        let copy = json!({"spec": {"items": [9]}});
        assert_eq!(merge(Some(&last), &last, Some(&copy)), copy);
    }

    #[test]
    fn a_host_change_of_a_whole_object_replaces_the_tenant_s_object() {
        let last = json!({"spec": {"o": {"x": 1}}});
        let host = json!({"spec": {"o": {"y": 2}}});
        let copy = json!({"spec": {"o": {"x": 1, "t": 3}}});
        assert_eq!(
            merge(Some(&last), &host, Some(&copy)),
            json!({"spec": {"o": {"y": 2, "t": 3}}}),
            "the host's change to o.x (dropped) and o.y (added) apply; the tenant's o.t stays"
        );
    }
}
