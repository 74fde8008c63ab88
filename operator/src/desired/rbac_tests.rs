use super::*;

use crate::desired::test_support::*;

fn grants(rules: &[PolicyRule], group: &str, resource: &str, verb: &str) -> bool {
    rules.iter().any(|r| {
        r.api_groups
            .as_deref()
            .unwrap_or_default()
            .iter()
            .any(|g| g == group)
            && r.resources
                .as_deref()
                .unwrap_or_default()
                .iter()
                .any(|x| x == resource)
            && r.verbs.iter().any(|v| v == verb)
    })
}

/// The rule of `rules` that grants on `resource` alone.
fn rule_on<'a>(rules: &'a [PolicyRule], resource: &str) -> &'a PolicyRule {
    rules
        .iter()
        .find(|r| r.resources.as_deref() == Some(&[resource.to_string()][..]))
        .unwrap_or_else(|| panic!("a {resource} rule"))
}

/// The rule of `rules` on Services may read (get, list, watch) exactly the Services `names`.
fn assert_reads_only_services_named(rules: &[PolicyRule], names: &[&str]) {
    let rule = rule_on(rules, "services");
    assert_eq!(rule.verbs, ["get", "list", "watch"]);
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    assert_eq!(rule.resource_names.as_deref(), Some(&names[..]));
}

/// Token Secrets need Secret writes only when the tenant chose them over annotations.
#[test]
fn synced_pods_can_store_their_token() {
    let spec =
        spec_from_yaml("sync: {toHost: {secrets: {enabled: false}, services: {enabled: false}}}");
    let rules = role_rules(&input(&spec));
    assert!(
        !grants(&rules, "", "secrets", "create"),
        "tokens travel in pod annotations: {rules:?}"
    );
    let spec = spec_from_yaml(
        "sync: {toHost: {pods: {useSecretsForSATokens: true}, secrets: {enabled: false}, services: {enabled: false}}}",
    );
    let rules = role_rules(&input(&spec));
    assert!(
        grants(&rules, "", "secrets", "create"),
        "token Secrets: {rules:?}"
    );
}

/// The syncer reads its own host Service and Endpoints (for pods' KUBERNETES_SERVICE_HOST
/// and the virtual `kubernetes` Service), whatever it syncs, and no other Service.
#[test]
fn the_syncer_reads_only_its_own_service_and_endpoints() {
    let spec = spec_from_yaml(
        "sync: {toHost: {pods: {enabled: false}, services: {enabled: false}, endpoints: {enabled: false}}}",
    );
    let rules = role_rules(&input(&spec));
    let own = rules
        .iter()
        .find(|r| {
            r.resources.as_deref() == Some(&["services".to_string(), "endpoints".to_string()][..])
        })
        .unwrap_or_else(|| panic!("a rule on the own Service: {rules:?}"));
    assert_eq!(own.verbs, READ);
    assert_eq!(
        own.resource_names.as_deref(),
        Some(&["team-alpha".to_string()][..])
    );
    let unnamed = rules.iter().filter(|r| r.resource_names.is_none());
    assert!(
        !unnamed
            .clone()
            .any(|r| grants(std::slice::from_ref(r), "", "services", "get")),
        "{rules:?}"
    );
    assert!(
        !unnamed
            .clone()
            .any(|r| grants(std::slice::from_ref(r), "", "endpoints", "get")),
        "{rules:?}"
    );
}

/// Pods' trust-bundle ConfigMaps need ConfigMap writes even with ConfigMap sync off, and
/// no more than reading, creating and patching them.
#[test]
fn synced_pods_can_write_their_trust_bundle_config_maps() {
    let spec = spec_from_yaml("sync: {toHost: {configmaps: {enabled: false}}}");
    let rules = role_rules(&input(&spec));
    assert_eq!(
        rule_on(&rules, "configmaps").verbs,
        ["get", "create", "patch"]
    );
    let spec =
        spec_from_yaml("sync: {toHost: {configmaps: {enabled: false}, pods: {enabled: false}}}");
    let rules = role_rules(&input(&spec));
    assert!(!grants(&rules, "", "configmaps", "get"), "{rules:?}");
}

/// The Gateway API fields grant writes on their kinds in the namespace, reads of host
/// GatewayClasses, and reads of their CRDs by name (to resolve them).
#[test]
fn gateway_api_sync_gets_its_rights() {
    let spec = spec_from_yaml(
        "sync: {toHost: {gateways: {enabled: true}, httpRoutes: {enabled: true}}, fromHost: {gatewayClasses: {enabled: true}}}",
    );
    let rules = role_rules(&input(&spec));
    assert!(grants(&rules, GATEWAY_API_GROUP, "gateways", "patch"));
    assert!(grants(&rules, GATEWAY_API_GROUP, "httproutes", "delete"));
    assert!(!grants(&rules, GATEWAY_API_GROUP, "grpcroutes", "patch"));
    let cluster = cluster_role_rules(&input(&spec));
    assert!(grants(
        &cluster,
        GATEWAY_API_GROUP,
        "gatewayclasses",
        "watch"
    ));
    assert!(!grants(
        &cluster,
        GATEWAY_API_GROUP,
        "gatewayclasses",
        "create"
    ));
    let crd_names = rule_on(&cluster, "customresourcedefinitions")
        .resource_names
        .clone()
        .unwrap();
    assert!(crd_names.contains(&"httproutes.gateway.networking.k8s.io".to_string()));
    assert!(crd_names.contains(&"gatewayclasses.gateway.networking.k8s.io".to_string()));
}

#[test]
fn role_covers_enabled_to_host_resources_only() {
    let spec =
        spec_from_yaml("sync: {toHost: {ingresses: {enabled: true}, services: {enabled: false}}}");
    let rules = role_rules(&input(&spec));
    assert!(grants(&rules, "", "pods", "create"));
    assert!(grants(&rules, "", "pods/log", "get"));
    assert!(grants(&rules, "networking.k8s.io", "ingresses", "patch"));
    assert!(!grants(&rules, "", "services", "create"));
    assert!(!grants(
        &rules,
        "networking.k8s.io",
        "networkpolicies",
        "create"
    ));
    assert!(!grants(&rules, "policy", "poddisruptionbudgets", "create"));
}

/// The syncer may renew its own activity Lease and nothing else of coordination.k8s.io.
#[test]
fn role_lets_the_syncer_renew_only_its_activity_lease() {
    let spec = spec_from_yaml("{}");
    let rules = role_rules(&input(&spec));
    let lease_rules: Vec<_> = rules
        .iter()
        .filter(|r| r.api_groups.as_deref() == Some(&["coordination.k8s.io".to_string()]))
        .collect();
    assert_eq!(lease_rules.len(), 1);
    assert_eq!(
        lease_rules[0].resource_names.as_deref(),
        Some(&["team-alpha-activity".to_string()][..])
    );
    assert!(grants(&rules, "coordination.k8s.io", "leases", "patch"));
    assert!(!grants(&rules, "coordination.k8s.io", "leases", "create"));
    assert!(!grants(&rules, "coordination.k8s.io", "leases", "delete"));
}

#[test]
fn extra_rules_are_appended() {
    let spec = spec_from_yaml(
        "rbac: {role: {extraRules: [{apiGroups: [networking.k8s.io], resources: [networkpolicies], verbs: [get]}]}}",
    );
    assert!(grants(
        &role_rules(&input(&spec)),
        "networking.k8s.io",
        "networkpolicies",
        "get"
    ));
}

/// Synced claims need to read the host volumes they bind to, and nothing more.
#[test]
fn synced_claims_may_read_but_not_change_persistent_volumes() {
    let rules = cluster_role_rules(&input(&spec_from_yaml("{}")));
    assert!(grants(&rules, "", "persistentvolumes", "watch"));
    assert!(!grants(&rules, "", "persistentvolumes", "create"));
    let spec = spec_from_yaml("sync: {toHost: {persistentvolumeclaims: {enabled: false}}}");
    assert!(!grants(
        &cluster_role_rules(&input(&spec)),
        "",
        "persistentvolumes",
        "get"
    ));
}

#[test]
fn cluster_role_only_when_from_host_needs_it() {
    let spec = spec_from_yaml(
        "sync: {toHost: {persistentvolumeclaims: {enabled: false}}, fromHost: {storageClasses: {enabled: false}, csiDrivers: {enabled: false}, csiNodes: {enabled: false}, csiStorageCapacities: {enabled: false}}}",
    );
    let i = input(&spec);
    assert!(cluster(&i, &i.names()).is_none());

    let spec = spec_from_yaml(
        "sync: {fromHost: {nodes: {enabled: true}, storageClasses: {enabled: false}}}",
    );
    let rules = cluster_role_rules(&input(&spec));
    assert!(grants(&rules, "", "nodes", "watch"));
    assert!(!grants(&rules, "", "nodes", "create"));
    assert!(!grants(&rules, "storage.k8s.io", "storageclasses", "get"));
    assert!(grants(&rules, "storage.k8s.io", "csidrivers", "list"));
}

#[test]
fn custom_resources_land_in_the_role_or_cluster_role_by_scope() {
    let spec = spec_from_yaml(
        "sync: {toHost: {customResources: {certificates.cert-manager.io: {enabled: true}}}, fromHost: {customResources: {clusterissuers.cert-manager.io/v1: {enabled: true, scope: Cluster}}}}",
    );
    let i = input(&spec);
    assert!(grants(
        &role_rules(&i),
        "cert-manager.io",
        "certificates",
        "create"
    ));
    let cluster_rules = cluster_role_rules(&i);
    assert!(grants(
        &cluster_rules,
        "cert-manager.io",
        "clusterissuers",
        "list"
    ));
    assert!(!grants(
        &cluster_rules,
        "cert-manager.io",
        "clusterissuers",
        "create"
    ));
}

/// fromHost replicas read only the named host Services; toHost ones write Services in
/// the namespace even when Services themselves are not synced.
#[test]
fn replicated_services_get_exactly_the_access_they_need() {
    let spec = spec_from_yaml(
        "sync: {toHost: {services: {enabled: false}}}\nnetworking: {replicateServices: {fromHost: [{from: kube-system/dns, to: kube-system/dns}, {from: other/dns, to: x/dns}, {from: db, to: db}]}}",
    );
    let i = input(&spec);
    assert_reads_only_services_named(&cluster_role_rules(&i), &["db", "dns"]);
    assert!(!grants(&role_rules(&i), "", "services", "create"));
    let spec = spec_from_yaml(
        "sync: {toHost: {services: {enabled: false}}}\nnetworking: {replicateServices: {toHost: [{from: shop/api, to: api}]}}",
    );
    let i = input(&spec);
    assert!(grants(&role_rules(&i), "", "services", "create"));
    assert!(!grants(&cluster_role_rules(&i), "", "services", "get"));
}

/// resolveDNS reads the host Services it maps by name only; other targets need no read.
#[test]
fn resolve_dns_host_services_are_read_by_name_only() {
    let spec = spec_from_yaml(
        "networking: {resolveDNS: [{service: default/db, target: {hostService: data/postgres}}, {hostname: a.example.com, target: host}, {namespace: shared, target: {hostNamespace: platform}}]}",
    );
    assert_reads_only_services_named(&cluster_role_rules(&input(&spec)), &["postgres"]);
    let spec = spec_from_yaml(
        "networking: {resolveDNS: [{hostname: a.example.com, target: {ip: 10.0.0.1}}]}",
    );
    assert!(!grants(
        &cluster_role_rules(&input(&spec)),
        "",
        "services",
        "get"
    ));
}

#[test]
fn namespaced_from_host_resources_are_read_cluster_wide() {
    let spec = spec_from_yaml(
        "sync: {fromHost: {customResources: {widgets.example.com: {enabled: true}}}}",
    );
    let i = input(&spec);
    assert!(!grants(&role_rules(&i), "example.com", "widgets", "list"));
    assert!(grants(
        &cluster_role_rules(&i),
        "example.com",
        "widgets",
        "watch"
    ));
    assert!(!grants(
        &cluster_role_rules(&i),
        "example.com",
        "widgets",
        "create"
    ));
}

#[test]
fn resolving_custom_resources_reads_their_crds_by_name_and_apiservices() {
    let spec = spec_from_yaml(
        "sync: {toHost: {customResources: {flunders.wardle.example.com/v1beta1: {enabled: true}, off.example.com: {enabled: false}}}}",
    );
    let rules = cluster_role_rules(&input(&spec));
    let crd_rule = rule_on(&rules, "customresourcedefinitions");
    assert_eq!(
        crd_rule.resource_names.as_deref(),
        Some(&["flunders.wardle.example.com".to_string()][..])
    );
    assert_eq!(crd_rule.verbs, vec!["get"]);
    assert!(grants(
        &rules,
        "apiregistration.k8s.io",
        "apiservices",
        "get"
    ));
    assert!(!grants(
        &rules,
        "apiregistration.k8s.io",
        "apiservices",
        "list"
    ));
    let none = cluster_role_rules(&input(&spec_from_yaml("sync: {}")));
    assert!(!grants(
        &none,
        "apiregistration.k8s.io",
        "apiservices",
        "get"
    ));
}

#[test]
fn custom_resource_keys_split_into_group_and_plural() {
    assert_eq!(
        split_custom_resource_key("certificates.cert-manager.io"),
        ("cert-manager.io", "certificates")
    );
    assert_eq!(
        split_custom_resource_key("flunders.wardle.example.com/v1beta1"),
        ("wardle.example.com", "flunders")
    );
}
