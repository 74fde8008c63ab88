//! What a VirtualClusterPolicy refuses in a spec (after its defaults were applied): every
//! field outside a bound is named, with the policy and what would fit.

use k8s_openapi::api::{core::v1::ResourceRequirements, rbac::v1::PolicyRule};
use kube::ResourceExt;
use vnest_crds::{
    DurationSpec, PodSecurityStandard, QuantityMap, VirtualClusterPolicy, VirtualClusterSpec,
    policy::Ceilings, quantity_value,
};

use super::rules::covers;
use crate::{
    desired::{
        DEFAULT_CONTROL_PLANE_LIMITS, DEFAULT_CONTROL_PLANE_REQUESTS, DEFAULT_PERSISTENCE_SIZE,
    },
    validate::FieldError,
};

struct Checker<'a> {
    policy: String,
    bounds: &'a vnest_crds::VirtualClusterPolicySpec,
    errors: Vec<FieldError>,
}

impl Checker<'_> {
    /// Records `field` as refused: `what` is wrong, `fix` says what would fit.
    fn fail(&mut self, field: impl Into<String>, what: impl std::fmt::Display, fix: &str) {
        self.errors.push(FieldError {
            field: field.into(),
            message: format!(
                "{what}: refused by VirtualClusterPolicy {}; {fix}",
                self.policy
            ),
        });
    }

    /// Every key of `max` set in `map` and at most its value there.
    fn ceilings(&mut self, field: &str, map: &QuantityMap, max: &QuantityMap, policy_field: &str) {
        for (key, ceiling) in &max.0 {
            let Some(limit) = quantity_value(&ceiling.0) else {
                continue;
            };
            match map.0.get(key) {
                None => self.fail(
                    format!("{field}[{key}]"),
                    "not set",
                    &format!("set it to at most {} ({policy_field})", ceiling.0),
                ),
                Some(value) if quantity_value(&value.0).is_none_or(|v| v > limit) => self.fail(
                    format!("{field}[{key}]"),
                    format!("{} is above {}", value.0, ceiling.0),
                    &format!("set at most {} ({policy_field})", ceiling.0),
                ),
                Some(_) => {}
            }
        }
    }

    fn duration_at_most(
        &mut self,
        field: &str,
        value: Option<&DurationSpec>,
        max: &DurationSpec,
        policy_field: &str,
    ) {
        let (Some(value), Ok(limit)) = (value, max.to_std()) else {
            return;
        };
        if value.to_std().is_ok_and(|v| v > limit) {
            self.fail(
                field,
                format!("{value} is longer than {max}"),
                &format!("use at most {max} ({policy_field})"),
            );
        }
    }
}

fn quantities(pairs: [(&str, &str); 2]) -> QuantityMap {
    QuantityMap::of(pairs)
}

/// The control-plane container's requests and limits: the spec's, or the operator's defaults.
fn control_plane_resources(resources: Option<&ResourceRequirements>) -> (QuantityMap, QuantityMap) {
    match resources {
        Some(r) => (
            QuantityMap(r.requests.clone().unwrap_or_default()),
            QuantityMap(r.limits.clone().unwrap_or_default()),
        ),
        None => {
            let (cpu, memory) = DEFAULT_CONTROL_PLANE_REQUESTS;
            let (cpu_limit, memory_limit) = DEFAULT_CONTROL_PLANE_LIMITS;
            (
                quantities([("cpu", cpu), ("memory", memory)]),
                quantities([("cpu", cpu_limit), ("memory", memory_limit)]),
            )
        }
    }
}

fn level(pss: PodSecurityStandard) -> u8 {
    match pss {
        PodSecurityStandard::Privileged => 0,
        PodSecurityStandard::Baseline => 1,
        PodSecurityStandard::Restricted => 2,
    }
}

fn rule_text(rule: &PolicyRule) -> String {
    serde_json::to_string(rule).unwrap_or_default()
}

/// Every field of `spec` (the effective spec, defaults applied) outside `policy`'s bounds.
pub fn check(policy: &VirtualClusterPolicy, spec: &VirtualClusterSpec) -> Vec<FieldError> {
    let mut c = Checker {
        policy: policy.name_any(),
        bounds: &policy.spec,
        errors: Vec::new(),
    };
    let bounds = c.bounds;

    let (distro, config) = spec.control_plane.distro.selected();
    if let Some(allowed) = &bounds.allowed_distros
        && !allowed.iter().any(|d| d.as_str() == distro.as_str())
    {
        let names: Vec<&str> = allowed.iter().map(|d| d.as_str()).collect();
        c.fail(
            "spec.controlPlane.distro",
            format!("{} is not an allowed distro", distro.as_str()),
            &format!("enable one of {} (allowedDistros)", names.join(", ")),
        );
    }
    if let (Some(allowed), Some(repository)) = (
        &bounds.allowed_images,
        config.image.as_ref().and_then(|i| i.repository.as_deref()),
    ) && !allowed
        .iter()
        .any(|pattern| match pattern.strip_suffix('*') {
            Some(prefix) => repository.starts_with(prefix),
            None => repository == pattern,
        })
    {
        c.fail(
            format!(
                "spec.controlPlane.distro.{}.image.repository",
                distro.as_str()
            ),
            format!("{repository} is not an allowed image"),
            &format!(
                "use one of {} (allowedImages), or leave it out for the operator's default",
                allowed.join(", ")
            ),
        );
    }

    let stateful_set = &spec.control_plane.stateful_set;
    if let Some(max) = &bounds.control_plane.max_resources {
        let (requests, limits) = control_plane_resources(stateful_set.resources.as_ref());
        let field = "spec.controlPlane.statefulSet.resources";
        c.ceilings(
            &format!("{field}.requests"),
            &requests,
            &QuantityMap(
                // A request left out asks for nothing; only one above the ceiling is refused.
                max.requests
                    .0
                    .iter()
                    .filter(|(k, _)| requests.0.contains_key(*k))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            ),
            "controlPlane.maxResources.requests",
        );
        c.ceilings(
            &format!("{field}.limits"),
            &limits,
            &max.limits,
            "controlPlane.maxResources.limits",
        );
    }
    if let Some(max) = &bounds.control_plane.max_persistence_size {
        let size = stateful_set
            .persistence
            .size
            .as_ref()
            .map_or(DEFAULT_PERSISTENCE_SIZE, |q| q.0.as_str());
        if let (Some(v), Some(limit)) = (quantity_value(size), quantity_value(&max.0))
            && v > limit
        {
            c.fail(
                "spec.controlPlane.statefulSet.persistence.size",
                format!("{size} is above {}", max.0),
                &format!(
                    "ask for at most {} (controlPlane.maxPersistenceSize)",
                    max.0
                ),
            );
        }
    }

    let policies = &spec.policies;
    if let (Some(min), Some(pss)) = (
        bounds.min_pod_security_standard,
        policies.pod_security_standard,
    ) && level(pss) < level(min)
    {
        c.fail(
            "spec.policies.podSecurityStandard",
            format!("{} is below {}", pss.as_str(), min.as_str()),
            &format!("use {} or stricter (minPodSecurityStandard)", min.as_str()),
        );
    }
    let required = [
        (
            "spec.policies.resourceQuota",
            "resourceQuota",
            &bounds.resource_quota,
            policies.resource_quota.enabled,
            &policies.resource_quota.quota,
            "quota",
        ),
        (
            "spec.policies.limitRange",
            "limitRange",
            &bounds.limit_range,
            policies.limit_range.enabled,
            &policies.limit_range.max,
            "max",
        ),
    ];
    for (field, policy_field, ceilings, enabled, map, key) in required {
        let Some(Ceilings { max }) = ceilings else {
            continue;
        };
        if !enabled {
            c.fail(
                format!("{field}.enabled"),
                "false",
                &format!("it is required ({policy_field})"),
            );
        }
        c.ceilings(
            &format!("{field}.{key}"),
            map,
            max,
            &format!("{policy_field}.max"),
        );
    }

    for (field, asked, allowed, policy_field) in [
        (
            "spec.rbac.role.extraRules",
            &spec.rbac.role.extra_rules,
            &bounds.rbac.role.allowed_rules,
            "rbac.role.allowedRules",
        ),
        (
            "spec.rbac.clusterRole.extraRules",
            &spec.rbac.cluster_role.extra_rules,
            &bounds.rbac.cluster_role.allowed_rules,
            "rbac.clusterRole.allowedRules",
        ),
    ] {
        for (i, rule) in asked.iter().enumerate() {
            if !allowed.iter().any(|a| covers(a, rule)) {
                let fix = if allowed.is_empty() {
                    format!(
                        "the policy allows no extra rules here ({policy_field} is empty); remove the rule, or ask the platform admins"
                    )
                } else {
                    format!(
                        "narrow it to within one of the rules in {policy_field}, or ask the platform admins"
                    )
                };
                c.fail(
                    format!("{field}[{i}]"),
                    format!("{} is not allowed", rule_text(rule)),
                    &fix,
                );
            }
        }
    }

    for refusal in super::sync::refused(spec, &bounds.sync) {
        c.fail(refusal.field, refusal.what, &refusal.fix);
    }

    let lifecycle = &bounds.lifecycle;
    if let Some(max) = &lifecycle.max_after_creation {
        let ttl = spec
            .auto_delete
            .as_ref()
            .and_then(|d| d.after_creation.as_ref());
        c.duration_at_most(
            "spec.autoDelete.afterCreation",
            ttl,
            max,
            "lifecycle.maxAfterCreation",
        );
    }
    if let Some(max) = &lifecycle.max_sleep_after_inactivity {
        let idle = spec
            .sleep_mode
            .as_ref()
            .and_then(|s| s.after_inactivity.as_ref());
        c.duration_at_most(
            "spec.sleepMode.afterInactivity",
            idle,
            max,
            "lifecycle.maxSleepAfterInactivity",
        );
    }
    c.errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{policy, with_defaults};

    /// The errors of `spec_yaml` under the policy `policy_yaml`, defaults applied first, as
    /// `field: message` lines.
    fn refused(policy_yaml: &str, spec_yaml: &str) -> Vec<String> {
        let p = policy(&format!("namespaceSelector: {{}}\n{policy_yaml}"));
        let spec: VirtualClusterSpec = serde_yaml::from_str(spec_yaml).unwrap();
        let spec = with_defaults(&p, &spec).unwrap();
        check(&p, &spec).iter().map(ToString::to_string).collect()
    }

    fn fields(errors: &[String]) -> Vec<&str> {
        errors
            .iter()
            .map(|e| e.split(':').next().unwrap())
            .collect()
    }

    #[test]
    fn an_empty_policy_allows_the_default_spec() {
        assert_eq!(refused("", "{}"), Vec::<String>::new());
    }

    /// The message names the field, the policy and what would fit.
    #[test]
    fn a_distro_outside_the_allowed_ones_is_refused_naming_policy_and_field() {
        let errs = refused(
            "allowedDistros: [k3s, k8s]",
            "controlPlane: {distro: {k0s: {enabled: true}}}",
        );
        assert_eq!(
            errs,
            vec![
                "spec.controlPlane.distro: k0s is not an allowed distro: refused by VirtualClusterPolicy tenants; enable one of k3s, k8s (allowedDistros)"
            ]
        );
        assert!(
            refused("allowedDistros: [k3s]", "{}").is_empty(),
            "k3s is what runs by default"
        );
    }

    #[test]
    fn images_must_match_an_allowed_repository_or_prefix() {
        let p = "allowedImages: [rancher/k3s, 'registry.example.com/*']";
        assert!(refused(p, "controlPlane: {distro: {k3s: {enabled: true, image: {repository: rancher/k3s, tag: v1}}}}").is_empty());
        assert!(refused(p, "controlPlane: {distro: {k3s: {enabled: true, image: {repository: registry.example.com/k3s}}}}").is_empty());
        let errs = refused(
            p,
            "controlPlane: {distro: {k3s: {enabled: true, image: {repository: evil.example.com/k3s}}}}",
        );
        assert_eq!(
            fields(&errs),
            vec!["spec.controlPlane.distro.k3s.image.repository"]
        );
        assert!(
            refused(p, "{}").is_empty(),
            "the operator's default image is the admins' choice"
        );
    }

    /// The operator's default resources count when the spec sets none.
    #[test]
    fn control_plane_resources_above_the_ceilings_are_refused() {
        let p = "controlPlane: {maxResources: {requests: {cpu: 500m}, limits: {memory: 2Gi}}}";
        assert!(refused(p, "{}").is_empty());
        let errs = refused(
            p,
            "controlPlane: {statefulSet: {resources: {requests: {cpu: '2'}, limits: {memory: 4Gi}}}}",
        );
        assert_eq!(
            fields(&errs),
            vec![
                "spec.controlPlane.statefulSet.resources.requests[cpu]",
                "spec.controlPlane.statefulSet.resources.limits[memory]"
            ]
        );
        let unlimited = refused(
            p,
            "controlPlane: {statefulSet: {resources: {requests: {cpu: 100m}}}}",
        );
        assert_eq!(
            fields(&unlimited),
            vec!["spec.controlPlane.statefulSet.resources.limits[memory]"]
        );
        assert!(unlimited[0].contains("not set"), "{unlimited:?}");
        assert!(
            refused(
                "controlPlane: {maxResources: {limits: {memory: 512Mi}}}",
                "{}"
            )
            .len()
                == 1,
            "the 1Gi default limit is above"
        );
    }

    #[test]
    fn persistence_above_the_ceiling_is_refused_and_the_default_counts() {
        let p = "controlPlane: {maxPersistenceSize: 10Gi}";
        assert!(refused(p, "{}").is_empty());
        let errs = refused(
            p,
            "controlPlane: {statefulSet: {persistence: {size: 20Gi}}}",
        );
        assert_eq!(
            fields(&errs),
            vec!["spec.controlPlane.statefulSet.persistence.size"]
        );
        assert_eq!(
            refused("controlPlane: {maxPersistenceSize: 1Gi}", "{}").len(),
            1
        );
    }

    #[test]
    fn a_pod_security_standard_below_the_minimum_is_refused() {
        let p = "minPodSecurityStandard: baseline";
        let errs = refused(p, "policies: {podSecurityStandard: privileged}");
        assert_eq!(
            errs,
            vec![
                "spec.policies.podSecurityStandard: privileged is below baseline: refused by VirtualClusterPolicy tenants; use baseline or stricter (minPodSecurityStandard)"
            ]
        );
        assert!(refused(p, "policies: {podSecurityStandard: restricted}").is_empty());
        assert!(refused(p, "{}").is_empty(), "the minimum is the default");
    }

    /// A required quota is turned on; its values must stay within the ceilings, each set.
    #[test]
    fn quota_and_limit_range_ceilings_are_enforced() {
        let p = "resourceQuota: {max: {requests.cpu: '8', pods: '50'}}\nlimitRange: {max: {memory: 8Gi}}";
        assert!(
            refused(p, "{}").is_empty(),
            "the schema's default numbers fit"
        );
        let errs = refused(
            p,
            "policies: {resourceQuota: {quota: {requests.cpu: '32'}}, limitRange: {max: {cpu: '4', memory: 64Gi}}}",
        );
        assert_eq!(
            fields(&errs),
            vec![
                "spec.policies.resourceQuota.quota[pods]",
                "spec.policies.resourceQuota.quota[requests.cpu]",
                "spec.policies.limitRange.max[memory]"
            ]
        );
    }

    #[test]
    fn extra_rules_need_a_covering_allowed_rule() {
        let p = "rbac: {role: {allowedRules: [{apiGroups: [''], resources: [secrets, configmaps], verbs: [get, list, watch]}]}}";
        assert!(refused(p, "rbac: {role: {extraRules: [{apiGroups: [''], resources: [secrets], verbs: [list]}]}}").is_empty());
        let errs = refused(
            p,
            "rbac: {role: {extraRules: [{apiGroups: [''], resources: [secrets], verbs: [delete]}]}, clusterRole: {extraRules: [{apiGroups: [''], resources: [secrets], verbs: [list]}]}}",
        );
        assert_eq!(
            fields(&errs),
            vec![
                "spec.rbac.role.extraRules[0]",
                "spec.rbac.clusterRole.extraRules[0]"
            ]
        );
        assert!(
            errs[1].contains("rbac.clusterRole.allowedRules is empty"),
            "{errs:?}"
        );
    }

    /// Default-on resources count as enabled; the policy's defaults can turn them off.
    #[test]
    fn sync_kinds_and_custom_resources_outside_the_lists_are_refused() {
        let p = "sync: {fromHost: {kinds: [events, storageClasses, csiDrivers, csiNodes, csiStorageCapacities], customResources: [clusterissuers.cert-manager.io]}, toHost: {kinds: [pods, services, endpoints, configmaps, secrets, persistentvolumeclaims]}}";
        assert!(refused(p, "{}").is_empty());
        let errs = refused(
            p,
            "sync: {toHost: {ingresses: {enabled: true}, customResources: {certificates.cert-manager.io: {enabled: true}}}, fromHost: {nodes: {enabled: true}, customResources: {clusterissuers.cert-manager.io/v1: {enabled: true}}}}",
        );
        assert_eq!(
            fields(&errs),
            vec![
                "spec.sync.toHost.ingresses.enabled",
                "spec.sync.toHost.customResources[certificates.cert-manager.io]",
                "spec.sync.fromHost.nodes.enabled",
            ]
        );
        let narrow = "sync: {fromHost: {kinds: [events]}}";
        assert_eq!(
            refused(narrow, "{}").len(),
            4,
            "storageClasses and the csi kinds are on by default"
        );
        let with_defaults = "sync: {fromHost: {kinds: [events]}}\ndefaults: {sync: {fromHost: {storageClasses: {enabled: false}, csiDrivers: {enabled: false}, csiNodes: {enabled: false}, csiStorageCapacities: {enabled: false}}}}";
        assert!(refused(with_defaults, "{}").is_empty());
    }

    #[test]
    fn a_ttl_or_idle_time_above_the_maximum_is_refused() {
        let p = "lifecycle: {maxAfterCreation: 72h, maxSleepAfterInactivity: 1h}";
        assert!(refused(p, "{}").is_empty(), "filled with the maximum");
        let errs = refused(
            p,
            "autoDelete: {afterCreation: 30d}\nsleepMode: {afterInactivity: 7200}",
        );
        assert_eq!(
            errs,
            vec![
                "spec.autoDelete.afterCreation: 30d is longer than 72h: refused by VirtualClusterPolicy tenants; use at most 72h (lifecycle.maxAfterCreation)",
                "spec.sleepMode.afterInactivity: 7200s is longer than 1h: refused by VirtualClusterPolicy tenants; use at most 1h (lifecycle.maxSleepAfterInactivity)",
            ]
        );
    }
}
