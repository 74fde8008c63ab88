//! Whether a namespace's labels match a policy's `namespaceSelector`, with the semantics of a
//! Kubernetes label selector (`matchLabels` and `matchExpressions` all hold).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// `true` when `labels` satisfy `selector`; the empty selector matches every namespace. An
/// operator other than In, NotIn, Exists and DoesNotExist (which the CRD's rule refuses)
/// matches nothing.
pub fn selects(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let by_labels = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    by_labels
        && selector.match_expressions.iter().flatten().all(|e| {
            let value = labels.get(&e.key);
            let values = e.values.as_deref().unwrap_or_default();
            match e.operator.as_str() {
                "In" => value.is_some_and(|v| values.contains(v)),
                "NotIn" => value.is_none_or(|v| !values.contains(v)),
                "Exists" => value.is_some(),
                "DoesNotExist" => value.is_none(),
                _ => false,
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn selector(yaml: &str) -> LabelSelector {
        serde_yaml::from_str(yaml).unwrap()
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_empty_selector_selects_every_namespace() {
        assert!(selects(&selector("{}"), &labels(&[])));
        assert!(selects(&selector("{}"), &labels(&[("a", "b")])));
    }

    #[test]
    fn match_labels_must_all_hold() {
        let s = selector("matchLabels: {tier: prod, team: a}");
        assert!(selects(
            &s,
            &labels(&[("tier", "prod"), ("team", "a"), ("x", "y")])
        ));
        assert!(!selects(&s, &labels(&[("tier", "prod")])));
        assert!(!selects(&s, &labels(&[("tier", "dev"), ("team", "a")])));
    }

    #[test]
    fn expressions_follow_kubernetes_semantics() {
        let in_ = selector("matchExpressions: [{key: tier, operator: In, values: [a, b]}]");
        assert!(selects(&in_, &labels(&[("tier", "b")])));
        assert!(!selects(&in_, &labels(&[])));
        let not_in = selector("matchExpressions: [{key: tier, operator: NotIn, values: [a]}]");
        assert!(
            selects(&not_in, &labels(&[])),
            "NotIn holds for a missing key"
        );
        assert!(!selects(&not_in, &labels(&[("tier", "a")])));
        let exists = selector("matchExpressions: [{key: tier, operator: Exists}]");
        assert!(selects(&exists, &labels(&[("tier", "")])));
        let absent =
            selector("matchExpressions: [{key: vnest.dev/policy, operator: DoesNotExist}]");
        assert!(selects(&absent, &labels(&[("tier", "a")])));
        assert!(!selects(
            &absent,
            &labels(&[("vnest.dev/policy", "strict")])
        ));
        let unknown = selector("matchExpressions: [{key: tier, operator: Like}]");
        assert!(!selects(&unknown, &labels(&[("tier", "a")])));
    }
}
