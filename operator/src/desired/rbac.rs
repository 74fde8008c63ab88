//! The syncer's host permissions: exactly what its enabled syncs need, plus `spec.rbac`.

use k8s_openapi::api::rbac::v1::PolicyRule;
use serde_json::json;
use vnest_crds::{
    CustomResources, DnsTarget, GATEWAY_API_GROUP, ResourceScope, activity, meta::ChildNames,
    split_service_ref,
};

use super::{Child, ChildKind, Input};

const READ: &[&str] = &["get", "list", "watch"];
const WRITE: &[&str] = &[
    "create", "delete", "patch", "update", "get", "list", "watch",
];

fn rule(group: &str, resources: &[&str], verbs: &[&str]) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![group.to_string()]),
        resources: Some(resources.iter().map(|r| r.to_string()).collect()),
        verbs: verbs.iter().map(|v| v.to_string()).collect(),
        ..Default::default()
    }
}

/// `<plural>.<group>[/<version>]` → (group, plural).
pub fn split_custom_resource_key(key: &str) -> (&str, &str) {
    let without_version = key.split('/').next().unwrap_or(key);
    match without_version.split_once('.') {
        Some((plural, group)) => (group, plural),
        None => ("", without_version),
    }
}

/// Rules on the enabled `resources` of `scope` (any scope when `None`).
fn custom_resource_rules(
    resources: &CustomResources,
    scope: Option<ResourceScope>,
    verbs: &[&str],
) -> Vec<PolicyRule> {
    resources
        .iter()
        .filter(|(_, sync)| {
            sync.enabled
                && scope.is_none_or(|s| sync.scope.unwrap_or(ResourceScope::Namespaced) == s)
        })
        .map(|(key, _)| {
            let (group, plural) = split_custom_resource_key(key);
            rule(group, &[plural], verbs)
        })
        .collect()
}

/// Rules on the host namespace: the toHost resources, plus events and extra rules.
pub fn role_rules(input: &Input) -> Vec<PolicyRule> {
    let to_host = &input.spec.sync.to_host;
    // The syncer records events; with fromHost.events it also reads this namespace's events.
    let event_verbs: &[&str] = if input.spec.sync.from_host.events.enabled {
        &["create", "patch", "get", "list", "watch"]
    } else {
        &["create", "patch"]
    };
    let mut rules = vec![
        rule("", &["events"], event_verbs),
        // Recording tenant activity (vnest_crds::activity); the operator creates the Lease.
        PolicyRule {
            resource_names: Some(vec![activity::lease_name(input.name)]),
            ..rule(
                "coordination.k8s.io",
                &["leases"],
                &["get", "patch", "update"],
            )
        },
    ];
    if to_host.pods.enabled {
        rules.push(rule("", &["pods"], WRITE));
        rules.push(rule(
            "",
            &["pods/status", "pods/ephemeralcontainers"],
            &["get", "patch", "update"],
        ));
        rules.push(rule("", &["pods/log"], &["get"]));
        rules.push(rule(
            "",
            &["pods/exec", "pods/attach", "pods/portforward"],
            &["create", "get"],
        ));
        // With useSecretsForSATokens each synced pod's virtual token lives in a host Secret
        // (otherwise in an annotation of the host pod, which the pods rule covers).
        if to_host.pods.use_secrets_for_sa_tokens && !to_host.secrets.enabled {
            rules.push(rule("", &["secrets"], WRITE));
        }
        // The ClusterTrustBundles a pod projects reach it in a host ConfigMap of its own.
        if !to_host.configmaps.enabled {
            rules.push(rule("", &["configmaps"], &["get", "create", "patch"]));
        }
    }
    // Pods get KUBERNETES_SERVICE_HOST from the virtual cluster's own Service, and the virtual
    // `kubernetes` Service points at its address and endpoints.
    rules.push(PolicyRule {
        resource_names: Some(vec![input.name.to_string()]),
        ..rule("", &["services", "endpoints"], READ)
    });
    // replicateServices.toHost makes host Services too.
    let replicas = !input.spec.networking.replicate_services.to_host.is_empty();
    rules.extend(rule_if_any(
        "",
        &[
            (to_host.services.enabled || replicas, "services"),
            (to_host.endpoints.enabled, "endpoints"),
            (to_host.configmaps.enabled, "configmaps"),
            (to_host.secrets.enabled, "secrets"),
            (
                to_host.persistentvolumeclaims.enabled,
                "persistentvolumeclaims",
            ),
            (to_host.serviceaccounts.enabled, "serviceaccounts"),
        ],
        WRITE,
    ));
    if to_host.endpoints.enabled {
        rules.push(rule("discovery.k8s.io", &["endpointslices"], WRITE));
    }
    rules.extend(rule_if_any(
        "networking.k8s.io",
        &[
            (to_host.ingresses.enabled, "ingresses"),
            (to_host.networkpolicies.enabled, "networkpolicies"),
        ],
        WRITE,
    ));
    if to_host.poddisruptionbudgets.enabled {
        rules.push(rule("policy", &["poddisruptionbudgets"], WRITE));
    }
    let (gateway_to_host, _) = input.spec.sync.gateway_api();
    if !gateway_to_host.is_empty() {
        rules.push(rule(GATEWAY_API_GROUP, &gateway_to_host, WRITE));
    }
    rules.extend(custom_resource_rules(
        &to_host.custom_resources,
        Some(ResourceScope::Namespaced),
        WRITE,
    ));
    rules.extend(input.spec.rbac.role.extra_rules.iter().cloned());
    rules
}

/// A rule for those of `resources` that are switched on; `None` when none is.
fn rule_if_any(group: &str, resources: &[(bool, &str)], verbs: &[&str]) -> Option<PolicyRule> {
    let on: Vec<&str> = resources
        .iter()
        .filter_map(|(on, r)| on.then_some(*r))
        .collect();
    (!on.is_empty()).then(|| rule(group, &on, verbs))
}

/// Cluster-wide rules, or none when nothing needs them.
pub fn cluster_role_rules(input: &Input) -> Vec<PolicyRule> {
    let from_host = &input.spec.sync.from_host;
    let to_host = &input.spec.sync.to_host;
    let mut rules = Vec::new();
    rules.extend(rule_if_any(
        "",
        &[
            (from_host.nodes.enabled, "nodes"),
            // The volumes synced claims bind to are shown in the virtual cluster.
            (to_host.persistentvolumeclaims.enabled, "persistentvolumes"),
        ],
        READ,
    ));
    rules.extend(rule_if_any(
        "storage.k8s.io",
        &[
            (from_host.storage_classes.enabled, "storageclasses"),
            (from_host.csi_drivers.enabled, "csidrivers"),
            (from_host.csi_nodes.enabled, "csinodes"),
            (
                from_host.csi_storage_capacities.enabled,
                "csistoragecapacities",
            ),
        ],
        READ,
    ));
    // replicateServices.fromHost and resolveDNS's hostService targets read exactly the named
    // host Services, wherever they are (the syncer lists and watches them with a
    // metadata.name field selector).
    let networking = &input.spec.networking;
    let domain = &networking.advanced.cluster_domain;
    let mut named: Vec<String> = networking
        .replicate_services
        .from_host
        .iter()
        .map(|m| split_service_ref(&m.from, input.namespace).1.to_string())
        .chain(networking.resolve_dns.iter().filter_map(|entry| {
            match entry.mapping(domain).ok()?.target {
                DnsTarget::HostService(_, name) => Some(name),
                _ => None,
            }
        }))
        .collect();
    named.sort();
    named.dedup();
    if !named.is_empty() {
        rules.push(PolicyRule {
            resource_names: Some(named),
            ..rule("", &["services"], READ)
        });
    }
    if from_host.ingress_classes.enabled {
        rules.push(rule("networking.k8s.io", &["ingressclasses"], READ));
    }
    if from_host.priority_classes.enabled {
        rules.push(rule("scheduling.k8s.io", &["priorityclasses"], READ));
    }
    if from_host.gateway_classes.enabled {
        rules.push(rule(GATEWAY_API_GROUP, &["gatewayclasses"], READ));
    }
    if to_host.priorityclasses.enabled {
        rules.push(rule("scheduling.k8s.io", &["priorityclasses"], WRITE));
    }
    rules.extend(custom_resource_rules(
        &to_host.custom_resources,
        Some(ResourceScope::Cluster),
        WRITE,
    ));
    // From-host objects are read wherever they are on the host.
    rules.extend(custom_resource_rules(
        &from_host.custom_resources,
        None,
        READ,
    ));
    rules.extend(custom_resource_resolution(input));
    rules.extend(input.spec.rbac.cluster_role.extra_rules.iter().cloned());
    rules
}

/// What the syncer reads at start to resolve its custom resources: their CRDs by name, and
/// APIServices (named by version, which the key may leave to discovery).
fn custom_resource_resolution(input: &Input) -> Vec<PolicyRule> {
    let sync = &input.spec.sync;
    let mut crds: Vec<String> = sync
        .to_host
        .custom_resources
        .iter()
        .chain(&sync.from_host.custom_resources)
        .filter(|(_, entry)| entry.enabled)
        .map(|(key, _)| key.split('/').next().unwrap_or(key).to_string())
        .collect();
    // The Gateway API fields are resolved as custom resources of their group.
    let (to, from) = sync.gateway_api();
    crds.extend(
        to.iter()
            .chain(&from)
            .map(|plural| format!("{plural}.{GATEWAY_API_GROUP}")),
    );
    crds.sort();
    crds.dedup();
    if crds.is_empty() {
        return vec![];
    }
    vec![
        PolicyRule {
            resource_names: Some(crds),
            ..rule(
                "apiextensions.k8s.io",
                &["customresourcedefinitions"],
                &["get"],
            )
        },
        rule("apiregistration.k8s.io", &["apiservices"], &["get"]),
    ]
}

fn subjects(input: &Input, names: &ChildNames) -> serde_json::Value {
    json!([{ "kind": "ServiceAccount", "name": names.service_account, "namespace": input.namespace }])
}

pub fn namespaced(input: &Input, names: &ChildNames) -> Vec<Child> {
    vec![
        input.child(ChildKind::ServiceAccount, &names.service_account, "syncer", json!({})),
        input.child(ChildKind::Role, &names.role, "syncer", json!({ "rules": role_rules(input) })),
        input.child(
            ChildKind::RoleBinding,
            &names.role,
            "syncer",
            json!({
                "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": names.role },
                "subjects": subjects(input, names),
            }),
        ),
    ]
}

/// ClusterRole and binding, or `None` when no sync needs cluster-scoped access.
pub fn cluster(input: &Input, names: &ChildNames) -> Option<Vec<Child>> {
    let rules = cluster_role_rules(input);
    if rules.is_empty() {
        return None;
    }
    Some(vec![
        input.child(ChildKind::ClusterRole, &names.cluster_role, "syncer", json!({ "rules": rules })),
        input.child(
            ChildKind::ClusterRoleBinding,
            &names.cluster_role,
            "syncer",
            json!({
                "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": names.cluster_role },
                "subjects": subjects(input, names),
            }),
        ),
    ])
}
#[cfg(test)]
#[path = "rbac_tests.rs"]
mod tests;
