//! NetworkPolicies: every virtual pod of a virtual cluster lives in one host namespace, told
//! apart by the syncer's labels, so a policy's pod and namespace selectors become pod
//! selectors on those labels. The translated policy selects, and admits peers among, only
//! host pods of its own virtual cluster (plus the IP blocks it names).

use std::collections::BTreeMap;

use k8s_openapi::api::networking::v1::{NetworkPolicy, NetworkPolicyPeer};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use kube::core::{Selector, SelectorExt};
use vnest_crds::{
    meta::{LABEL_SYNCER_MANAGED_BY, LABEL_SYNCER_NAMESPACE},
    translate,
};

use super::Target;

/// The labels of every virtual namespace, by name: what namespace selectors match against.
pub type NamespaceLabels = BTreeMap<String, BTreeMap<String, String>>;

fn requirement(key: &str, operator: &str, values: Vec<String>) -> LabelSelectorRequirement {
    LabelSelectorRequirement {
        key: key.to_string(),
        operator: operator.to_string(),
        values: Some(values),
    }
}

/// A selector matching no pod at all (a peer whose namespace selector matched nothing).
fn matches_nothing(vc: &str) -> LabelSelector {
    LabelSelector {
        match_labels: None,
        match_expressions: Some(vec![
            requirement(LABEL_SYNCER_MANAGED_BY, "In", vec![vc.to_string()]),
            requirement(LABEL_SYNCER_MANAGED_BY, "NotIn", vec![vc.to_string()]),
        ]),
    }
}

/// The virtual namespaces `selector` matches; an unparsable selector matches none.
fn matching_namespaces(selector: &LabelSelector, namespaces: &NamespaceLabels) -> Vec<String> {
    let Ok(selector) = Selector::try_from(selector.clone()) else {
        return Vec::new();
    };
    namespaces
        .iter()
        .filter(|(_, labels)| selector.matches(labels))
        .map(|(name, _)| name.clone())
        .collect()
}

/// Host pod selector of a peer: its pods (all when absent) in the virtual namespaces its
/// namespace selector matches, or in the policy's own namespace when it has none.
fn host_peer_selector(
    peer: &NetworkPolicyPeer,
    namespace: &str,
    target: &Target,
    namespaces: &NamespaceLabels,
) -> LabelSelector {
    let vc = &target.vc;
    let pods = peer.pod_selector.clone().unwrap_or_default();
    let Some(ns_selector) = &peer.namespace_selector else {
        return translate::host_label_selector(&pods, namespace, vc);
    };
    let matched = matching_namespaces(ns_selector, namespaces);
    if matched.is_empty() {
        return matches_nothing(vc);
    }
    let mut selector = translate::host_label_selector(&pods, namespace, vc);
    if let Some(labels) = selector.match_labels.as_mut() {
        labels.remove(LABEL_SYNCER_NAMESPACE);
    }
    selector
        .match_expressions
        .get_or_insert_with(Vec::new)
        .push(requirement(LABEL_SYNCER_NAMESPACE, "In", matched));
    selector
}

fn host_peer(
    peer: &NetworkPolicyPeer,
    namespace: &str,
    target: &Target,
    namespaces: &NamespaceLabels,
) -> NetworkPolicyPeer {
    if peer.ip_block.is_some() {
        return peer.clone();
    }
    NetworkPolicyPeer {
        ip_block: None,
        namespace_selector: None,
        pod_selector: Some(host_peer_selector(peer, namespace, target, namespaces)),
    }
}

/// The host copy of virtual NetworkPolicy `virt`, given the virtual namespaces' labels.
pub fn host_network_policy(
    virt: &NetworkPolicy,
    target: &Target,
    namespaces: &NamespaceLabels,
) -> NetworkPolicy {
    let namespace = virt.metadata.namespace.as_deref().unwrap_or_default();
    let mut spec = virt.spec.clone().unwrap_or_default();
    spec.pod_selector = Some(translate::host_label_selector(
        &spec.pod_selector.unwrap_or_default(),
        namespace,
        &target.vc,
    ));
    let translate_peers = |peers: &mut Option<Vec<NetworkPolicyPeer>>| {
        for peer in peers.iter_mut().flatten() {
            *peer = host_peer(peer, namespace, target, namespaces);
        }
    };
    for rule in spec.ingress.iter_mut().flatten() {
        translate_peers(&mut rule.from);
    }
    for rule in spec.egress.iter_mut().flatten() {
        translate_peers(&mut rule.to);
    }
    NetworkPolicy {
        metadata: target.host_meta("NetworkPolicy", &virt.metadata),
        spec: Some(spec),
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::*;

    fn namespaces() -> NamespaceLabels {
        [
            ("shop", vec![("team", "a")]),
            ("db", vec![("team", "a"), ("tier", "data")]),
            ("other", vec![("team", "b")]),
        ]
        .into_iter()
        .map(|(n, l)| {
            let labels = l.into_iter().map(|(k, v)| (k.to_string(), v.to_string()));
            (n.to_string(), labels.collect())
        })
        .collect()
    }

    fn policy(yaml_spec: &str) -> NetworkPolicy {
        from_yaml(&format!(
            "metadata: {{name: allow, namespace: shop}}\nspec:\n{yaml_spec}"
        ))
    }

    fn host_labels(pairs: &[(&str, &str)], ns: &str) -> BTreeMap<String, String> {
        let mut labels: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        labels.insert(LABEL_SYNCER_MANAGED_BY.into(), "vc".into());
        labels.insert(LABEL_SYNCER_NAMESPACE.into(), ns.into());
        labels
    }

    fn selects(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
        Selector::try_from(selector.clone())
            .unwrap()
            .matches(labels)
    }

    fn translated(spec: &str) -> NetworkPolicy {
        host_network_policy(&policy(spec), &target(), &namespaces())
    }

    /// An empty pod selector ("every pod here") means every host pod of this virtual
    /// namespace of this virtual cluster, and nothing else in the host namespace.
    #[test]
    fn the_policy_selects_only_its_own_namespaces_pods() {
        let host = translated("  podSelector: {}\n  policyTypes: [Ingress]");
        assert_eq!(host.metadata.name.as_deref(), Some("allow-x-shop-x-vc"));
        let spec = host.spec.unwrap();
        let selector = spec.pod_selector.unwrap();
        assert!(selects(&selector, &host_labels(&[("app", "x")], "shop")));
        assert!(!selects(&selector, &host_labels(&[], "db")));
        let mut other_vc = host_labels(&[], "shop");
        other_vc.insert(LABEL_SYNCER_MANAGED_BY.into(), "other-vc".into());
        assert!(!selects(&selector, &other_vc));
        assert!(
            !selects(&selector, &BTreeMap::new()),
            "host pods not synced"
        );
        assert_eq!(spec.policy_types.unwrap(), ["Ingress"]);
    }

    /// Pod labels and expressions of the selector are kept (reserved keys rewritten).
    #[test]
    fn pod_selectors_keep_their_labels_and_expressions() {
        let host = translated(
            "  podSelector:\n    matchLabels: {app: web}\n    matchExpressions: [{key: tier, operator: In, values: [front]}]",
        );
        let selector = host.spec.unwrap().pod_selector.unwrap();
        assert!(selects(
            &selector,
            &host_labels(&[("app", "web"), ("tier", "front")], "shop")
        ));
        assert!(!selects(&selector, &host_labels(&[("app", "web")], "shop")));
    }

    /// A pod-only peer means pods of the same virtual namespace.
    #[test]
    fn pod_peers_stay_in_the_policys_namespace() {
        let host = translated(
            "  podSelector: {}\n  ingress: [{from: [{podSelector: {matchLabels: {role: client}}}]}]",
        );
        let peer = host.spec.unwrap().ingress.unwrap()[0].from.clone().unwrap()[0].clone();
        assert_eq!(peer.namespace_selector, None);
        let selector = peer.pod_selector.as_ref().unwrap();
        assert!(selects(
            selector,
            &host_labels(&[("role", "client")], "shop")
        ));
        assert!(!selects(
            selector,
            &host_labels(&[("role", "client")], "db")
        ));
    }

    /// A namespace selector becomes the list of virtual namespaces it matches now.
    #[test]
    fn namespace_peers_select_the_matching_virtual_namespaces() {
        let host = translated(
            "  podSelector: {}\n  egress: [{to: [{namespaceSelector: {matchLabels: {team: a}}, podSelector: {matchLabels: {app: db}}}]}]",
        );
        let peer = host.spec.unwrap().egress.unwrap()[0].to.clone().unwrap()[0].clone();
        assert_eq!(
            peer.namespace_selector, None,
            "host peers stay in the host namespace"
        );
        let selector = peer.pod_selector.as_ref().unwrap();
        assert!(selects(selector, &host_labels(&[("app", "db")], "shop")));
        assert!(selects(selector, &host_labels(&[("app", "db")], "db")));
        assert!(!selects(selector, &host_labels(&[("app", "db")], "other")));
        assert!(!selects(selector, &host_labels(&[("app", "web")], "db")));
    }

    /// `namespaceSelector: {}` is every namespace of the virtual cluster, not of the host.
    #[test]
    fn an_empty_namespace_selector_means_the_whole_virtual_cluster() {
        let host = translated("  podSelector: {}\n  ingress: [{from: [{namespaceSelector: {}}]}]");
        let peer = host.spec.unwrap().ingress.unwrap()[0].from.clone().unwrap()[0].clone();
        let selector = peer.pod_selector.as_ref().unwrap();
        for ns in ["shop", "db", "other"] {
            assert!(selects(selector, &host_labels(&[], ns)), "{ns}");
        }
        assert!(!selects(selector, &BTreeMap::new()));
    }

    /// A namespace selector matching no virtual namespace admits no pod (an empty peer list
    /// would admit everything).
    #[test]
    fn a_namespace_selector_matching_nothing_admits_nothing() {
        let host = translated(
            "  podSelector: {}\n  ingress: [{from: [{namespaceSelector: {matchLabels: {team: z}}}]}]",
        );
        let peers = host.spec.unwrap().ingress.unwrap()[0].from.clone().unwrap();
        assert_eq!(peers.len(), 1);
        let selector = peers[0].pod_selector.as_ref().unwrap();
        for ns in ["shop", "db", "other"] {
            assert!(!selects(selector, &host_labels(&[], ns)));
        }
    }

    /// IP blocks and ports pass through unchanged.
    #[test]
    fn ip_blocks_and_ports_pass_through() {
        let host = translated(
            "  podSelector: {}\n  egress: [{to: [{ipBlock: {cidr: 10.0.0.0/8, except: [10.1.0.0/16]}}], ports: [{port: 53, protocol: UDP}]}]",
        );
        let rule = &host.spec.unwrap().egress.unwrap()[0];
        let block = rule.to.as_ref().unwrap()[0].ip_block.as_ref().unwrap();
        assert_eq!(block.cidr, "10.0.0.0/8");
        assert_eq!(
            rule.ports.as_ref().unwrap()[0].protocol.as_deref(),
            Some("UDP")
        );
    }
}
