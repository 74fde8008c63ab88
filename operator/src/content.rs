//! The few fields of a child a reconcile reads besides its metadata, kept per child with the
//! resourceVersion they were read at (a few bytes each instead of the whole object).

use serde_json::Value;

use crate::desired::ChildKind;

/// The paths a reconcile reads of `kind`: a StatefulSet's replica counts (status), a
/// Service's cluster IP (its serving certificate names it), the activity Lease's renewal.
pub fn paths(kind: ChildKind) -> &'static [&'static [&'static str]] {
    match kind {
        ChildKind::StatefulSet => &[&["status", "replicas"], &["status", "readyReplicas"]],
        ChildKind::Service => &[&["spec", "clusterIP"]],
        ChildKind::Lease => &[&["spec", "renewTime"]],
        _ => &[],
    }
}

/// `object` reduced to the values at `paths` (absent ones stay absent).
pub fn keep(object: &Value, paths: &[&[&str]]) -> Value {
    let mut kept = Value::Object(Default::default());
    for path in paths {
        let Some(value) = path.iter().try_fold(object, |v, key| v.get(key)) else {
            continue;
        };
        let mut slot = &mut kept;
        for key in *path {
            if !slot.is_object() {
                *slot = Value::Object(Default::default());
            }
            slot = slot
                .as_object_mut()
                .expect("made an object above")
                .entry(key.to_string())
                .or_insert(Value::Null);
        }
        *slot = value.clone();
    }
    kept
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn keeps_only_the_read_paths() {
        let sts = json!({
            "metadata": { "name": "x" },
            "spec": { "template": { "spec": { "containers": [{ "name": "k8s" }] } } },
            "status": { "replicas": 1, "readyReplicas": 1, "currentRevision": "abc" },
        });
        assert_eq!(
            keep(&sts, paths(ChildKind::StatefulSet)),
            json!({ "status": { "replicas": 1, "readyReplicas": 1 } })
        );
        let fresh = json!({ "status": { "replicas": 0 } });
        assert_eq!(
            keep(&fresh, paths(ChildKind::StatefulSet)),
            json!({ "status": { "replicas": 0 } })
        );
        assert_eq!(keep(&sts, paths(ChildKind::Secret)), json!({}));
        let svc = json!({ "spec": { "clusterIP": "10.96.0.7", "ports": [] } });
        assert_eq!(
            keep(&svc, paths(ChildKind::Service)),
            json!({ "spec": { "clusterIP": "10.96.0.7" } })
        );
    }
}
