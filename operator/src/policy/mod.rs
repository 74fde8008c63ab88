//! VirtualClusterPolicies, as pure functions: which policy governs a namespace, the spec a
//! policy's defaults make of a VirtualCluster's, and what in that spec the policy refuses.
//! The reconcile reads the policies and the namespace's labels from caches and calls these.

mod check;
mod rules;
mod selector;
mod sync;

use std::{borrow::Borrow, collections::BTreeMap};

use kube::ResourceExt;
use serde_json::Value;
use vnest_crds::{AutoDelete, FieldError, SleepMode, VirtualClusterPolicy, VirtualClusterSpec};

pub use check::check;
pub use rules::covers;
pub use selector::selects;

use crate::template::{merge_over, set_fields};

/// The policy governing a namespace with `labels`: `Ok(None)` when none selects it, an error
/// naming every policy when more than one does (which one should win is the admins' call, so
/// neither is applied).
pub fn governing<'a>(
    policies: &'a [impl Borrow<VirtualClusterPolicy>],
    namespace: &str,
    labels: &BTreeMap<String, String>,
) -> Result<Option<&'a VirtualClusterPolicy>, FieldError> {
    let mut selecting: Vec<&VirtualClusterPolicy> = policies
        .iter()
        .map(Borrow::borrow)
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| selects(&p.spec.namespace_selector, labels))
        .collect();
    selecting.sort_by_key(|p| p.name_any());
    match selecting.as_slice() {
        [] => Ok(None),
        [one] => Ok(Some(one)),
        many => {
            let names: Vec<String> = many.iter().map(|p| p.name_any()).collect();
            Err(FieldError::new(
                "metadata.namespace",
                format!(
                    "namespace {namespace} is selected by more than one VirtualClusterPolicy ({}); \
                     nothing is applied until the platform admins change their namespaceSelectors so that one policy selects it",
                    names.join(", ")
                ),
            ))
        }
    }
}

/// `spec` with what it leaves out taken from the policy: first the policy's `defaults` (under
/// every field the spec sets to a value other than its schema default, as for templates; maps
/// merge key by key), then
/// what the policy requires and the spec does not say: the minimum Pod Security Standard, the
/// quota and limit range turned on, the maximum TTL and sleep.
pub fn with_defaults(
    policy: &VirtualClusterPolicy,
    spec: &VirtualClusterSpec,
) -> Result<VirtualClusterSpec, FieldError> {
    let mut spec = match &policy.spec.defaults {
        Some(defaults) => {
            // The policy's defaults as stored (the API server filled in the schema's own
            // defaults, which are what the spec would get anyway), under what the spec sets.
            let mut merged = serde_json::to_value(defaults).unwrap_or(Value::Null);
            merge_over(&mut merged, set_fields(spec));
            // The template reference is the VirtualCluster's alone.
            if let Value::Object(map) = &mut merged {
                map.remove("template");
            }
            let mut merged: VirtualClusterSpec = serde_json::from_value(merged).map_err(|e| {
                FieldError::new(
                    "spec",
                    format!(
                        "with the defaults of VirtualClusterPolicy {} the spec is not valid: {e}",
                        policy.name_any()
                    ),
                )
            })?;
            merged.template = spec.template.clone();
            merged
        }
        None => spec.clone(),
    };
    let bounds = &policy.spec;
    let policies = &mut spec.policies;
    if policies.pod_security_standard.is_none() {
        policies.pod_security_standard = bounds.min_pod_security_standard;
    }
    // `enabled: false` is the schema default, so it cannot be told from a spec that is silent.
    if bounds.resource_quota.is_some() {
        policies.resource_quota.enabled = true;
    }
    if bounds.limit_range.is_some() {
        policies.limit_range.enabled = true;
    }
    if let Some(ttl) = &bounds.lifecycle.max_after_creation {
        let delete = spec.auto_delete.get_or_insert(AutoDelete {
            after_inactivity: None,
            after_creation: None,
        });
        delete.after_creation.get_or_insert_with(|| ttl.clone());
    }
    if let Some(idle) = &bounds.lifecycle.max_sleep_after_inactivity {
        let sleep = spec.sleep_mode.get_or_insert_with(|| SleepMode {
            after_inactivity: None,
            sleep_schedule: None,
            wake_schedule: None,
            timezone: "UTC".into(),
            auto_wakeup: true,
        });
        sleep.after_inactivity.get_or_insert_with(|| idle.clone());
    }
    Ok(spec)
}

#[cfg(test)]
pub(crate) fn policy(yaml: &str) -> VirtualClusterPolicy {
    let spec: vnest_crds::VirtualClusterPolicySpec = serde_yaml::from_str(yaml).unwrap();
    VirtualClusterPolicy::new("tenants", spec)
}

#[cfg(test)]
mod tests {
    use vnest_crds::{DurationSpec, PodSecurityStandard};

    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn named(name: &str, yaml: &str) -> VirtualClusterPolicy {
        let mut p = policy(yaml);
        p.metadata.name = Some(name.into());
        p
    }

    fn spec(yaml: &str) -> VirtualClusterSpec {
        serde_yaml::from_str(yaml).unwrap()
    }

    /// No policy: the namespace is governed as before policies existed.
    #[test]
    fn a_namespace_no_policy_selects_is_ungoverned() {
        let policies = [named("a", "namespaceSelector: {matchLabels: {tier: a}}")];
        let got = governing(&policies, "ns", &labels(&[("tier", "b")])).unwrap();
        assert!(got.is_none());
    }

    #[test]
    fn the_one_selecting_policy_governs() {
        let policies = [
            named("a", "namespaceSelector: {matchLabels: {tier: a}}"),
            named("b", "namespaceSelector: {matchLabels: {tier: b}}"),
        ];
        let got = governing(&policies, "ns", &labels(&[("tier", "b")])).unwrap();
        assert_eq!(got.map(|p| p.name_any()), Some("b".to_string()));
    }

    /// Two policies on one namespace: both named, neither applied.
    #[test]
    fn overlapping_policies_are_an_error_naming_both() {
        let policies = [
            named("wide", "namespaceSelector: {}"),
            named("narrow", "namespaceSelector: {matchLabels: {tier: a}}"),
        ];
        let err = governing(&policies, "team-a", &labels(&[("tier", "a")]))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("(narrow, wide)") && err.contains("namespace team-a"),
            "{err}"
        );
    }

    /// A policy being deleted no longer counts, so deleting one of two overlapping fixes it.
    #[test]
    fn a_policy_being_deleted_governs_nothing() {
        let mut going = named("going", "namespaceSelector: {}");
        going.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                "2026-01-01T00:00:00Z".parse().unwrap(),
            ));
        let policies = [going, named("staying", "namespaceSelector: {}")];
        let got = governing(&policies, "ns", &labels(&[])).unwrap();
        assert_eq!(got.map(|p| p.name_any()), Some("staying".to_string()));
    }

    /// The policy's defaults fill only what the spec leaves at its schema default.
    #[test]
    fn policy_defaults_fill_what_the_spec_leaves_out() {
        let p = policy(
            "namespaceSelector: {}\ndefaults: {controlPlane: {statefulSet: {persistence: {size: 2Gi}}}, policies: {networkPolicy: {enabled: true}}, sync: {toHost: {ingresses: {enabled: true}}}}",
        );
        let got = with_defaults(
            &p,
            &spec("controlPlane: {statefulSet: {persistence: {size: 8Gi}}}"),
        )
        .unwrap();
        let size = got.control_plane.stateful_set.persistence.size.unwrap();
        assert_eq!(size.0, "8Gi", "the spec's own value wins");
        assert!(got.policies.network_policy.enabled);
        assert!(got.sync.to_host.ingresses.enabled);
        assert!(got.sync.to_host.services.enabled, "schema defaults stay");
        let silent = with_defaults(&p, &spec("{}")).unwrap();
        assert_eq!(
            silent
                .control_plane
                .stateful_set
                .persistence
                .size
                .unwrap()
                .0,
            "2Gi"
        );
    }

    /// A policy can turn a default-on sync off for the VirtualClusters that say nothing.
    #[test]
    fn policy_defaults_can_turn_a_default_on_resource_off() {
        let p = policy(
            "namespaceSelector: {}\ndefaults: {sync: {fromHost: {storageClasses: {enabled: false}}}}",
        );
        let got = with_defaults(&p, &spec("{}")).unwrap();
        assert!(!got.sync.from_host.storage_classes.enabled);
    }

    #[test]
    fn the_template_reference_stays_the_virtual_clusters() {
        let p = policy("namespaceSelector: {}\ndefaults: {paused: false}");
        let got = with_defaults(&p, &spec("template: {name: small}")).unwrap();
        assert_eq!(got.template.unwrap().name, "small");
    }

    /// What a policy requires is filled in where the spec is silent, never over what it says.
    #[test]
    fn requirements_fill_the_minimum_pod_security_quota_ttl_and_sleep() {
        let p = policy(
            "namespaceSelector: {}\nminPodSecurityStandard: baseline\nresourceQuota: {max: {pods: 20}}\nlimitRange: {}\nlifecycle: {maxAfterCreation: 72h, maxSleepAfterInactivity: 30m}",
        );
        let got = with_defaults(&p, &spec("{}")).unwrap();
        assert_eq!(
            got.policies.pod_security_standard,
            Some(PodSecurityStandard::Baseline)
        );
        assert!(got.policies.resource_quota.enabled);
        assert!(got.policies.limit_range.enabled);
        assert_eq!(
            got.auto_delete.unwrap().after_creation,
            Some(DurationSpec::Text("72h".into()))
        );
        let sleep = got.sleep_mode.unwrap();
        assert_eq!(
            sleep.after_inactivity,
            Some(DurationSpec::Text("30m".into()))
        );
        assert!(sleep.auto_wakeup);

        let own = with_defaults(
            &p,
            &spec("policies: {podSecurityStandard: restricted}\nautoDelete: {afterCreation: 1h}\nsleepMode: {sleepSchedule: '0 20 * * *', afterInactivity: 10m}"),
        )
        .unwrap();
        assert_eq!(
            own.policies.pod_security_standard,
            Some(PodSecurityStandard::Restricted)
        );
        assert_eq!(
            own.auto_delete.unwrap().after_creation,
            Some(DurationSpec::Text("1h".into()))
        );
        let sleep = own.sleep_mode.unwrap();
        assert_eq!(
            sleep.after_inactivity,
            Some(DurationSpec::Text("10m".into()))
        );
        assert_eq!(sleep.sleep_schedule.as_deref(), Some("0 20 * * *"));
    }
}

#[cfg(test)]
mod example_tests {
    use super::*;

    /// The shipped example policy parses, and a VirtualCluster that says nothing fits it once
    /// its defaults are applied (the defaults must respect the policy's own ceilings).
    #[test]
    fn the_example_policy_accepts_a_spec_that_says_nothing() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../examples/policies/team-sandbox.yaml"
        );
        let policy: VirtualClusterPolicy =
            serde_yaml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let spec = with_defaults(&policy, &VirtualClusterSpec::default()).unwrap();
        let refused = check(&policy, &spec);
        assert!(refused.is_empty(), "{refused:?}");
        assert_eq!(
            spec.policies.resource_quota.quota.0["pods"].0, "20",
            "the policy's quota default"
        );
        assert!(spec.policies.network_policy.enabled);
    }

    /// The chart's default policy governs every unlabelled namespace once installed: a
    /// VirtualCluster that says nothing, and the shipped examples, must still be accepted.
    #[test]
    fn the_chart_default_policy_accepts_the_default_spec_and_the_examples() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
        let values: serde_yaml::Value = serde_yaml::from_str(
            &std::fs::read_to_string(format!("{root}/charts/vnest/values.yaml")).unwrap(),
        )
        .unwrap();
        let mut spec = values["defaultPolicy"]["spec"].clone();
        spec["namespaceSelector"] = values["defaultPolicy"]["namespaceSelector"].clone();
        let policy = VirtualClusterPolicy::new("default", serde_yaml::from_value(spec).unwrap());
        let mut specs = vec![("{}".to_string(), VirtualClusterSpec::default())];
        for file in [
            "quickstart",
            "ci-minimal",
            "training",
            "sleep-mode",
            "auto-delete",
        ] {
            let doc: serde_yaml::Value = serde_yaml::from_str(
                &std::fs::read_to_string(format!("{root}/examples/{file}.yaml")).unwrap(),
            )
            .unwrap();
            specs.push((
                file.to_string(),
                serde_yaml::from_value(doc["spec"].clone()).unwrap(),
            ));
        }
        for (name, spec) in specs {
            let effective = with_defaults(&policy, &spec).unwrap();
            let refused = check(&policy, &effective);
            assert!(refused.is_empty(), "{name}: {refused:?}");
        }
    }
}
