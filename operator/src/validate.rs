//! Checks a spec the schema accepted but the operator cannot act on (a cron with an hour of
//! 25, an unknown time zone, a quantity an older CRD let through). A failing spec is reported
//! in `SpecValid=False` with every field named, and nothing is applied.

use chrono::{DateTime, Duration, Utc};
pub use vnest_crds::FieldError;
use vnest_crds::{
    DistroKind, DurationSpec, QuantityMap, VirtualClusterSpec, patch::PodPatches, quantity_value,
    split_service_ref,
};

use crate::lifecycle::{
    policy::{Policy, SleepPolicy},
    schedule::{Cron, parse_cron},
};

/// Where the "never fires" check starts: a fixed moment, so validation is a pure function.
const NEVER_FIRES_FROM: DateTime<Utc> = DateTime::from_timestamp_nanos(1_767_225_600_000_000_000);

pub fn parse_timezone(name: &str) -> Result<chrono_tz::Tz, String> {
    name.parse().map_err(|_| {
        format!("{name:?} is not an IANA time zone; use a name such as UTC or Europe/Berlin")
    })
}

struct Checker {
    errors: Vec<FieldError>,
}

impl Checker {
    fn fail(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.errors.push(FieldError {
            field: field.into(),
            message: message.into(),
        });
    }

    /// `value` parsed, or `None` (with the error recorded) when it is absent or cannot be.
    fn duration(&mut self, field: &str, value: Option<&DurationSpec>) -> Option<Duration> {
        let value = value?;
        let parsed = value
            .to_std()
            .map_err(|e| e.to_string())
            .and_then(|std| Duration::from_std(std).map_err(|e| format!("{value}: {e}")));
        parsed.map_err(|err| self.fail(field, err)).ok()
    }

    fn cron(&mut self, field: &str, value: Option<&str>) -> Option<Cron> {
        let expression = value?;
        match parse_cron(expression) {
            Err(err) => self.fail(field, err),
            // Any date that exists fires within eight years (29 February does).
            Ok(cron)
                if cron
                    .next_after(NEVER_FIRES_FROM, chrono_tz::Tz::UTC)
                    .is_none() =>
            {
                self.fail(field, format!("{expression:?} never fires (no such date)"))
            }
            Ok(cron) => return Some(cron),
        }
        None
    }

    fn quantities(&mut self, field: &str, map: &QuantityMap) {
        for (key, value) in &map.0 {
            if quantity_value(&value.0).is_none() {
                self.fail(
                    format!("{field}[{key}]"),
                    format!(
                        "{:?} is not a quantity; write e.g. 8, 500m or 16Gi",
                        value.0
                    ),
                );
            }
        }
    }
}

/// An enabled `controlPlane.ingress` needs a host that is a DNS name (the CRD says so too,
/// but a spec rendered from a template or a policy's defaults reaches the operator unchecked).
fn check_ingress(c: &mut Checker, ingress: &vnest_crds::IngressConfig) {
    const FIELD: &str = "spec.controlPlane.ingress.host";
    if !ingress.enabled {
        return;
    }
    match ingress.host.as_deref() {
        None => c.fail(
            FIELD,
            "set host when the ingress is enabled, e.g. team-alpha.vc.example.com",
        ),
        Some(host) if !is_ingress_host(host) => c.fail(
            FIELD,
            format!("{host:?} is not a DNS name; write a lowercase name such as team-alpha.vc.example.com"),
        ),
        Some(_) => {}
    }
}

/// A lowercase DNS name of at most 253 characters, optionally starting with `*.`: what an
/// Ingress rule's `host` takes.
fn is_ingress_host(host: &str) -> bool {
    let name = host.strip_prefix("*.").unwrap_or(host);
    let label = |l: &str| {
        (1..=63).contains(&l.len())
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    };
    host.len() <= 253 && name.split('.').all(label)
}

/// Why `name` cannot name a VirtualCluster (too long or not a DNS-1035 label), or `Ok`. The
/// CRD refuses such names on creation; this catches one an older CRD let in, before any host
/// object is made from it.
pub fn validate_name(name: &str) -> Result<(), Vec<FieldError>> {
    let errors: Vec<FieldError> = vnest_crds::meta::virtual_cluster_name_errors(name)
        .into_iter()
        .map(|message| FieldError {
            field: "metadata.name".to_string(),
            message,
        })
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// Every problem with `spec` of a VirtualCluster in `namespace`, or, when the operator can
/// apply it, its lifecycle fields parsed.
pub fn validate(spec: &VirtualClusterSpec, namespace: &str) -> Result<Policy, Vec<FieldError>> {
    let mut c = Checker { errors: Vec::new() };

    let distro = &spec.control_plane.distro;
    let enabled = [&distro.k3s, &distro.k0s, &distro.k8s]
        .iter()
        .filter(|d| d.as_ref().is_some_and(|d| d.enabled))
        .count();
    if enabled > 1 {
        c.fail(
            "spec.controlPlane.distro",
            "enable only one of k3s, k0s and k8s",
        );
    }
    let store = &spec.control_plane.backing_store;
    if store.database.embedded.enabled && store.etcd.embedded.enabled {
        c.fail(
            "spec.controlPlane.backingStore",
            "enable only one of database.embedded and etcd.embedded",
        );
    } else if store.database.embedded.enabled && distro.selected().0 == DistroKind::K0s {
        c.fail(
            "spec.controlPlane.backingStore.database",
            "k0s runs on etcd only; remove database.embedded.enabled (k0s then uses its embedded etcd), or choose distro k3s or k8s for the embedded database",
        );
    }
    if let Some(size) = &spec.control_plane.stateful_set.persistence.size
        && !quantity_value(&size.0).is_some_and(|v| v > 0.0)
    {
        c.fail(
            "spec.controlPlane.statefulSet.persistence.size",
            format!("{:?} must be a positive quantity such as 10Gi", size.0),
        );
    }

    check_ingress(&mut c, &spec.control_plane.ingress);

    let (to_host, from_host) = (&spec.sync.to_host, &spec.sync.from_host);
    if to_host.priorityclasses.enabled && from_host.priority_classes.enabled {
        c.fail("spec.sync", "priority classes are enabled in both toHost.priorityclasses and fromHost.priorityClasses; disable one");
    }
    for (key, sync) in &to_host.custom_resources {
        if sync.enabled
            && from_host
                .custom_resources
                .get(key)
                .is_some_and(|s| s.enabled)
        {
            c.fail(
                format!("spec.sync.toHost.customResources[{key}]"),
                "also enabled in spec.sync.fromHost.customResources; a resource syncs in one direction only",
            );
        }
    }

    // The syncer may write Services only in its own namespace.
    for (i, m) in spec
        .networking
        .replicate_services
        .to_host
        .iter()
        .enumerate()
    {
        let (to_namespace, name) = split_service_ref(&m.to, namespace);
        if to_namespace != namespace {
            c.fail(
                format!("spec.networking.replicateServices.toHost[{i}].to"),
                format!("{:?} is outside the VirtualCluster's namespace {namespace}; the host Service can only be made there, so write {name} or {namespace}/{name}", m.to),
            );
        }
    }
    // The schema cannot type `target` (a string or an object): each entry is read here.
    let domain = &spec.networking.advanced.cluster_domain;
    for (i, entry) in spec.networking.resolve_dns.iter().enumerate() {
        if let Err(e) = entry.mapping(domain) {
            c.fail(
                format!("spec.networking.resolveDNS[{i}].{}", e.field),
                e.message,
            );
        }
    }
    if let Err(errors) = PodPatches::compile(&to_host.pods) {
        c.errors.extend(errors);
    }

    let policies = &spec.policies;
    c.quantities(
        "spec.policies.resourceQuota.quota",
        &policies.resource_quota.quota,
    );
    let limits = &policies.limit_range;
    c.quantities("spec.policies.limitRange.default", &limits.default);
    c.quantities(
        "spec.policies.limitRange.defaultRequest",
        &limits.default_request,
    );
    c.quantities("spec.policies.limitRange.max", &limits.max);
    c.quantities("spec.policies.limitRange.min", &limits.min);
    c.quantities(
        "spec.policies.limitRange.persistentVolumeClaimMax",
        &limits.persistent_volume_claim_max,
    );

    let sleep = spec.sleep_mode.as_ref().map(|sleep| {
        let after_inactivity = c.duration(
            "spec.sleepMode.afterInactivity",
            sleep.after_inactivity.as_ref(),
        );
        let sleep_schedule = c.cron(
            "spec.sleepMode.sleepSchedule",
            sleep.sleep_schedule.as_deref(),
        );
        let wake_schedule = c.cron(
            "spec.sleepMode.wakeSchedule",
            sleep.wake_schedule.as_deref(),
        );
        let timezone = parse_timezone(&sleep.timezone)
            .map_err(|err| c.fail("spec.sleepMode.timezone", err))
            .unwrap_or(chrono_tz::Tz::UTC);
        if after_inactivity.is_some_and(|d| d.is_zero()) {
            c.fail(
                "spec.sleepMode.afterInactivity",
                "0 would sleep at once and forever; use paused: true for that",
            );
        }
        if let (Some(sleep_at), Some(wake_at)) = (&sleep.sleep_schedule, &sleep.wake_schedule)
            && sleep_at.split_whitespace().eq(wake_at.split_whitespace())
        {
            c.fail(
                "spec.sleepMode.wakeSchedule",
                "is the same as sleepSchedule; the virtual cluster would sleep and wake at the same moment",
            );
        }
        if !sleep.auto_wakeup && sleep.wake_schedule.is_none() {
            c.fail(
                "spec.sleepMode",
                "with autoWakeup false and no wakeSchedule the virtual cluster would never wake; set a wakeSchedule or autoWakeup: true",
            );
        }
        SleepPolicy {
            after_inactivity,
            sleep_schedule,
            wake_schedule,
            timezone,
            auto_wakeup: sleep.auto_wakeup,
        }
    });
    let delete = spec.auto_delete.as_ref();
    let delete_after_inactivity = c.duration(
        "spec.autoDelete.afterInactivity",
        delete.and_then(|d| d.after_inactivity.as_ref()),
    );
    let delete_after_creation = c.duration(
        "spec.autoDelete.afterCreation",
        delete.and_then(|d| d.after_creation.as_ref()),
    );

    if c.errors.is_empty() {
        Ok(Policy {
            paused: spec.paused,
            sleep,
            delete_after_creation,
            delete_after_inactivity,
        })
    } else {
        Err(c.errors)
    }
}

/// What the admins' flags forbid a VirtualCluster author to ask: extra rights for the
/// syncer (`rbac.*.extraRules`) unless the operator runs with `--allow-extra-rules`.
/// Whoever may write a VirtualCluster (a Backstage template, an Argo CD project) could
/// otherwise grant the syncer any host right the operator can bind.
pub fn guardrails(spec: &VirtualClusterSpec, allow_extra_rules: bool) -> Vec<FieldError> {
    let mut c = Checker { errors: Vec::new() };
    let rules = [
        ("spec.rbac.role.extraRules", &spec.rbac.role.extra_rules),
        (
            "spec.rbac.clusterRole.extraRules",
            &spec.rbac.cluster_role.extra_rules,
        ),
    ];
    for (field, rules) in rules {
        if !allow_extra_rules && !rules.is_empty() {
            c.fail(
                field,
                "extra rights for the syncer are refused: this operator runs without --allow-extra-rules (chart value allowExtraRules), the platform admins' choice; remove the rules, or ask the admins to allow them",
            );
        }
    }
    c.errors
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extra_rules_are_refused_unless_the_admins_allow_them() {
        let spec: VirtualClusterSpec = serde_yaml::from_str(
            "rbac: {role: {extraRules: [{apiGroups: [''], resources: [secrets], verbs: [list]}]}, clusterRole: {extraRules: [{apiGroups: [''], resources: [nodes], verbs: [patch]}]}}",
        )
        .unwrap();
        let refused: Vec<String> = guardrails(&spec, false)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(refused.len(), 2, "{refused:?}");
        assert!(refused[0].starts_with("spec.rbac.role.extraRules: "));
        assert!(refused[1].starts_with("spec.rbac.clusterRole.extraRules: "));
        assert!(refused.iter().all(|e| e.contains("--allow-extra-rules")));
        assert_eq!(guardrails(&spec, true), Vec::new());
        assert_eq!(
            guardrails(&VirtualClusterSpec::default(), false),
            Vec::new()
        );
    }

    /// A template or a policy's defaults can enable the ingress without a usable host; the
    /// operator names the field and the fix instead of applying an Ingress the API refuses.
    #[test]
    fn an_enabled_ingress_needs_a_dns_host() {
        assert_eq!(
            errors("controlPlane: {ingress: {enabled: true}}"),
            vec![
                "spec.controlPlane.ingress.host: set host when the ingress is enabled, e.g. team-alpha.vc.example.com"
            ]
        );
        assert_only_error(
            "controlPlane: {ingress: {enabled: true, host: Team_Alpha.example.com}}",
            "spec.controlPlane.ingress.host: \"Team_Alpha.example.com\" is not a DNS name",
        );
        for good in ["vc.example.com", "*.vc.example.com", "vc-1"] {
            let yaml = format!("controlPlane: {{ingress: {{enabled: true, host: '{good}'}}}}");
            assert!(errors(&yaml).is_empty(), "{good}");
        }
        assert!(errors("controlPlane: {ingress: {enabled: false}}").is_empty());
        assert!(!is_ingress_host(&format!("{}.example.com", "a".repeat(64))));
        assert!(!is_ingress_host("-a.example.com"));
        assert!(!is_ingress_host("a..example.com"));
    }

    fn errors(yaml: &str) -> Vec<String> {
        let spec: VirtualClusterSpec = serde_yaml::from_str(yaml).unwrap();
        validate(&spec, "team-alpha")
            .err()
            .unwrap_or_default()
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    /// `validate` reports exactly one error for `yaml`, and it starts with `prefix`.
    fn assert_only_error(yaml: &str, prefix: &str) {
        let errs = errors(yaml);
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(errs[0].starts_with(prefix), "{errs:?}");
    }

    /// A resolveDNS entry the operator cannot read is refused with its index and field; the
    /// seed's entry passes.
    #[test]
    fn a_bad_resolve_dns_entry_is_named_by_index_and_field() {
        assert_eq!(
            errors(
                "networking: {resolveDNS: [{hostname: '*.amazonaws.com', target: host, service: ''}]}"
            ),
            Vec::<String>::new()
        );
        assert_only_error(
            "networking: {resolveDNS: [{hostname: a.example.com, target: host}, {hostname: b.example.com, target: {ip: nope}}]}",
            "spec.networking.resolveDNS[1].target.ip: ",
        );
    }

    /// The report's 63-character name: refused with the maximum, before anything is made.
    #[test]
    fn a_name_too_long_for_its_host_objects_is_refused_with_the_maximum() {
        let errors = validate_name(&"a".repeat(63)).unwrap_err();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0]
                .to_string()
                .starts_with("metadata.name: must be at most 52 characters: "),
            "{}",
            errors[0]
        );
        assert!(validate_name(&"a".repeat(52)).is_ok());
        let errors = validate_name("team.alpha").unwrap_err();
        assert!(errors[0].message.contains("DNS-1035"), "{errors:?}");
    }

    #[test]
    fn seed_examples_are_valid() {
        for file in [
            "team-alpha-production",
            "ci-minimal",
            "training",
            "saas-customer",
            "sleep-mode",
            "auto-delete",
        ] {
            let path = format!("{}/../examples/{file}.yaml", env!("CARGO_MANIFEST_DIR"));
            let doc: serde_yaml::Value =
                serde_yaml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            let spec: VirtualClusterSpec = serde_yaml::from_value(doc["spec"].clone()).unwrap();
            assert!(validate(&spec, "team-alpha").is_ok(), "{file}");
        }
    }

    /// k0s has no embedded database here; asking for one is refused, not silently ignored.
    #[test]
    fn k0s_with_the_embedded_database_is_refused_naming_the_field() {
        assert_only_error(
            "controlPlane: {distro: {k0s: {enabled: true}}, backingStore: {database: {embedded: {enabled: true}}}}",
            "spec.controlPlane.backingStore.database: k0s runs on etcd only",
        );
        assert!(errors("controlPlane: {distro: {k0s: {enabled: true}}}").is_empty());
        assert!(
            errors(
                "controlPlane: {distro: {k8s: {enabled: true}}, backingStore: {database: {embedded: {enabled: true}}}}"
            )
            .is_empty()
        );
        assert_only_error(
            "controlPlane: {backingStore: {database: {embedded: {enabled: true}}, etcd: {embedded: {enabled: true}}}}",
            "spec.controlPlane.backingStore: ",
        );
    }

    #[test]
    fn out_of_range_cron_fields_are_named() {
        assert_only_error(
            "sleepMode: {sleepSchedule: '0 25 * * *'}",
            "spec.sleepMode.sleepSchedule: \"0 25 * * *\" is not a valid cron",
        );
    }

    #[test]
    fn wrong_field_counts_and_time_zones_are_refused() {
        let errs = errors(
            "sleepMode: {sleepSchedule: '0 20 * *', wakeSchedule: '0 8 * * 1-5', timezone: Mars/Olympus}",
        );
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert!(errs[0].contains("has 4 fields"));
        assert!(errs[1].starts_with("spec.sleepMode.timezone:"));
    }

    #[test]
    fn every_bad_quantity_is_reported_by_key() {
        let errs =
            errors("policies: {resourceQuota: {quota: {pods: lots, requests.cpu: '1.2.3'}}}");
        assert_eq!(
            errs,
            vec![
                "spec.policies.resourceQuota.quota[pods]: \"lots\" is not a quantity; write e.g. 8, 500m or 16Gi",
                "spec.policies.resourceQuota.quota[requests.cpu]: \"1.2.3\" is not a quantity; write e.g. 8, 500m or 16Gi",
            ]
        );
    }

    #[test]
    fn both_directions_for_one_resource_are_refused() {
        assert_only_error(
            "sync: {toHost: {customResources: {a.example.com: {enabled: true}}}, fromHost: {customResources: {a.example.com: {enabled: true}}}}",
            "spec.sync.toHost.customResources[a.example.com]",
        );
        assert_eq!(errors("sync: {toHost: {priorityclasses: {enabled: true}}, fromHost: {priorityClasses: {enabled: true}}}").len(), 1);
    }

    /// Pod patches the syncer could not run are refused here, each entry named.
    #[test]
    fn unparsable_pod_patches_are_refused() {
        let errs = errors(
            r#"sync: {toHost: {pods: {translatePatches: [{path: metadata.labels.app, expression: "'vcluster-' + valu"}], patches: [{path: "spec.volumes[*.hostPath", op: remove}]}}}"#,
        );
        assert_eq!(
            errs,
            vec![
                "spec.sync.toHost.pods.patches[0].path: \"spec.volumes[*.hostPath\": '[' at character 13 is never closed",
                "spec.sync.toHost.pods.translatePatches[0].expression: unknown name valu at character 15; use value or one of the functions lower, upper, replace, trimPrefix, trimSuffix",
            ]
        );
        let ok = errors(
            r#"sync: {toHost: {pods: {translatePatches: [{path: metadata.labels.app, expression: "'vcluster-' + value"}], patches: [{path: "spec.volumes[*].hostPath", op: remove}]}}}"#,
        );
        assert!(ok.is_empty(), "{ok:?}");
    }

    /// A host replica can only be made in the VirtualCluster's own namespace.
    #[test]
    fn replicated_services_to_another_host_namespace_are_refused() {
        let errs = errors(
            "networking: {replicateServices: {toHost: [{from: shop/api, to: other/api}, {from: shop/web, to: team-alpha/web}, {from: shop/db, to: db}]}}",
        );
        assert_eq!(
            errs,
            vec![
                "spec.networking.replicateServices.toHost[0].to: \"other/api\" is outside the VirtualCluster's namespace team-alpha; the host Service can only be made there, so write api or team-alpha/api"
            ]
        );
    }

    #[test]
    fn two_distros_and_zero_size_are_refused() {
        let errs = errors(
            "controlPlane: {distro: {k3s: {enabled: true}, k8s: {enabled: true}}, statefulSet: {persistence: {size: '0'}}}",
        );
        assert_eq!(errs.len(), 2, "{errs:?}");
    }

    #[test]
    fn bad_durations_are_refused() {
        assert_only_error(
            "autoDelete: {afterCreation: 'soon'}",
            "spec.autoDelete.afterCreation:",
        );
    }

    #[test]
    fn sleep_modes_that_cannot_work_are_refused() {
        assert_eq!(
            errors("sleepMode: {afterInactivity: 0}"),
            vec![
                "spec.sleepMode.afterInactivity: 0 would sleep at once and forever; use paused: true for that"
            ]
        );
        assert_only_error(
            "sleepMode: {sleepSchedule: '0 20 * * *', wakeSchedule: '0  20 * * *'}",
            "spec.sleepMode.wakeSchedule: is the same as sleepSchedule",
        );
        assert_only_error(
            "sleepMode: {sleepSchedule: '0 20 * * *', autoWakeup: false}",
            "spec.sleepMode: with autoWakeup false",
        );
    }

    #[test]
    fn a_date_that_never_comes_is_refused() {
        let errs = errors("sleepMode: {sleepSchedule: '0 0 30 2 *'}");
        assert_eq!(
            errs,
            vec!["spec.sleepMode.sleepSchedule: \"0 0 30 2 *\" never fires (no such date)"]
        );
        assert_eq!(errors("sleepMode: {sleepSchedule: '0 0 29 2 *'}").len(), 0);
    }
}
