//! Whether an RBAC rule a VirtualCluster asks for is within one a policy allows.

use k8s_openapi::api::rbac::v1::PolicyRule;

/// `true` when `allowed` grants at least everything `asked` does: each of its API groups,
/// resources, verbs and non-resource URLs is listed in `allowed` (or `allowed` lists `*`),
/// and, when `allowed` is limited to some resource names, `asked` is limited to those too.
pub fn covers(allowed: &PolicyRule, asked: &PolicyRule) -> bool {
    let within = |allowed: Option<&Vec<String>>, asked: Option<&Vec<String>>| {
        let allowed = allowed.map(Vec::as_slice).unwrap_or_default();
        asked
            .into_iter()
            .flatten()
            .all(|a| allowed.iter().any(|x| x == "*" || x == a))
    };
    let names = match allowed.resource_names.as_deref().unwrap_or_default() {
        [] => true,
        names => {
            let asked = asked.resource_names.as_deref().unwrap_or_default();
            !asked.is_empty() && asked.iter().all(|a| names.contains(a))
        }
    };
    within(allowed.api_groups.as_ref(), asked.api_groups.as_ref())
        && within(allowed.resources.as_ref(), asked.resources.as_ref())
        && within(Some(&allowed.verbs), Some(&asked.verbs))
        && within(
            allowed.non_resource_urls.as_ref(),
            asked.non_resource_urls.as_ref(),
        )
        && names
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(yaml: &str) -> PolicyRule {
        serde_yaml::from_str(yaml).unwrap()
    }

    #[test]
    fn a_narrower_rule_is_covered() {
        let allowed =
            rule("{apiGroups: [''], resources: [configmaps, secrets], verbs: [get, list, watch]}");
        assert!(covers(
            &allowed,
            &rule("{apiGroups: [''], resources: [secrets], verbs: [list]}")
        ));
        assert!(covers(&allowed, &allowed));
    }

    /// One verb, group or resource more than allowed and the rule is not covered.
    #[test]
    fn anything_beyond_the_allowed_rule_is_not_covered() {
        let allowed = rule("{apiGroups: [''], resources: [secrets], verbs: [get, list]}");
        assert!(!covers(
            &allowed,
            &rule("{apiGroups: [''], resources: [secrets], verbs: [list, delete]}")
        ));
        assert!(!covers(
            &allowed,
            &rule("{apiGroups: [apps], resources: [secrets], verbs: [list]}")
        ));
        assert!(!covers(
            &allowed,
            &rule("{apiGroups: [''], resources: [secrets, nodes], verbs: [list]}")
        ));
        assert!(
            !covers(
                &allowed,
                &rule("{apiGroups: [''], resources: ['*'], verbs: [list]}")
            ),
            "a wildcard asks for everything"
        );
        assert!(!covers(
            &allowed,
            &rule("{nonResourceURLs: [/metrics], verbs: [get]}")
        ));
    }

    #[test]
    fn wildcards_in_the_allowed_rule_cover_anything() {
        let allowed = rule("{apiGroups: ['*'], resources: ['*'], verbs: [get]}");
        assert!(covers(
            &allowed,
            &rule("{apiGroups: [apps], resources: [deployments], verbs: [get]}")
        ));
        assert!(!covers(
            &allowed,
            &rule("{apiGroups: [apps], resources: [deployments], verbs: [patch]}")
        ));
    }

    /// An allowed rule limited to some names covers only rules limited to those names.
    #[test]
    fn resource_names_must_stay_within_the_allowed_names() {
        let allowed = rule(
            "{apiGroups: [''], resources: [configmaps], verbs: [get], resourceNames: [shared]}",
        );
        assert!(covers(
            &allowed,
            &rule(
                "{apiGroups: [''], resources: [configmaps], verbs: [get], resourceNames: [shared]}"
            )
        ));
        assert!(!covers(
            &allowed,
            &rule("{apiGroups: [''], resources: [configmaps], verbs: [get]}")
        ));
        assert!(!covers(
            &allowed,
            &rule(
                "{apiGroups: [''], resources: [configmaps], verbs: [get], resourceNames: [other]}"
            )
        ));
    }
}
