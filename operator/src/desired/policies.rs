//! ResourceQuota, LimitRange and Pod Security labels from `spec.policies`.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};
use vnest_crds::{QuantityMap, VirtualClusterSpec, meta::ChildNames};

use super::{Child, ChildKind, Input};

fn quantities(map: &QuantityMap) -> Value {
    Value::Object(
        map.0
            .iter()
            .map(|(k, v)| (k.clone(), json!(v.0)))
            .collect::<Map<_, _>>(),
    )
}

pub fn resource_quota(input: &Input, names: &ChildNames) -> Option<Child> {
    let policy = &input.spec.policies.resource_quota;
    policy.enabled.then(|| {
        input.child(
            ChildKind::ResourceQuota,
            &names.resource_quota,
            "resource-quota",
            json!({ "spec": { "hard": quantities(&policy.quota) } }),
        )
    })
}

pub fn limit_range(input: &Input, names: &ChildNames) -> Option<Child> {
    let policy = &input.spec.policies.limit_range;
    if !policy.enabled {
        return None;
    }
    let mut container = Map::new();
    container.insert("type".into(), json!("Container"));
    for (field, map) in [
        ("default", &policy.default),
        ("defaultRequest", &policy.default_request),
        ("max", &policy.max),
        ("min", &policy.min),
    ] {
        if !map.is_empty() {
            container.insert(field.into(), quantities(map));
        }
    }
    let mut limits = vec![Value::Object(container)];
    if !policy.persistent_volume_claim_max.is_empty() {
        limits.push(json!({ "type": "PersistentVolumeClaim", "max": quantities(&policy.persistent_volume_claim_max) }));
    }
    Some(input.child(
        ChildKind::LimitRange,
        &names.limit_range,
        "limit-range",
        json!({ "spec": { "limits": limits } }),
    ))
}

/// `pod-security.kubernetes.io/{enforce,audit,warn}` for the chosen standard.
pub fn namespace_labels(spec: &VirtualClusterSpec) -> BTreeMap<String, String> {
    let Some(level) = spec.policies.pod_security_standard else {
        return BTreeMap::new();
    };
    ["enforce", "audit", "warn"]
        .into_iter()
        .map(|mode| {
            (
                format!("pod-security.kubernetes.io/{mode}"),
                level.as_str().to_string(),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::desired::test_support::*;

    #[test]
    fn quota_uses_the_seed_defaults_and_overrides() {
        let quota = wanted("policies: {resourceQuota: {enabled: true}}", resource_quota);
        assert_eq!(quota["spec"]["hard"]["requests.cpu"], "8");
        assert_eq!(quota["spec"]["hard"]["pods"], "50");

        let quota = wanted(
            "policies: {resourceQuota: {enabled: true, quota: {pods: 30}}}",
            resource_quota,
        );
        assert_eq!(quota["spec"]["hard"], json!({ "pods": "30" }));
    }

    #[test]
    fn limit_range_has_container_and_claim_limits_and_skips_empty_maps() {
        let lr = wanted("policies: {limitRange: {enabled: true}}", limit_range);
        let container = &lr["spec"]["limits"][0];
        assert_eq!(container["type"], "Container");
        assert_eq!(container["default"]["memory"], "512Mi");
        assert_eq!(container["defaultRequest"]["cpu"], "100m");
        assert!(container.get("min").is_none());
        assert_eq!(lr["spec"]["limits"][1]["max"]["storage"], "50Gi");
    }

    #[test]
    fn disabled_policies_build_nothing() {
        let spec = spec_from_yaml("{}");
        let i = input(&spec);
        assert!(resource_quota(&i, &i.names()).is_none());
        assert!(limit_range(&i, &i.names()).is_none());
    }

    #[test]
    fn pod_security_standard_sets_all_three_modes() {
        let labels = namespace_labels(&spec_from_yaml("policies: {podSecurityStandard: baseline}"));
        assert_eq!(labels.len(), 3);
        assert_eq!(labels["pod-security.kubernetes.io/audit"], "baseline");
    }
}
