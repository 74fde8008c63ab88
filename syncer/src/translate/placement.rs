//! Where host pods may run, as the VirtualCluster's author decides it: the tolerations
//! `sync.toHost.pods.enforceTolerations` and the node selector `sync.fromHost.nodes.selector.labels`
//! are added to every host pod, and the taints those tolerations tolerate are left off the
//! virtual nodes, so the tenant sees the nodes its pods may use as plain schedulable nodes.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PodSpec, Taint, Toleration};
use vnest_crds::Sync;

/// The placement every host pod of one virtual cluster gets.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Placement {
    tolerations: Vec<Toleration>,
    node_selector: BTreeMap<String, String>,
}

impl Placement {
    pub fn from_sync(sync: &Sync) -> Self {
        let nodes = &sync.from_host.nodes;
        let node_selector = if nodes.enabled && !nodes.selector.all {
            nodes.selector.labels.clone()
        } else {
            BTreeMap::new()
        };
        Placement {
            tolerations: sync.to_host.pods.enforce_tolerations.clone(),
            node_selector,
        }
    }

    /// Adds the enforced tolerations the pod lacks and the enforced node-selector labels (which
    /// win over a tenant's label of the same key: no other value leads to a node it can see).
    pub fn apply(&self, spec: &mut PodSpec) {
        if !self.tolerations.is_empty() {
            let tolerations = spec.tolerations.get_or_insert_default();
            for enforced in &self.tolerations {
                if !tolerations.contains(enforced) {
                    tolerations.push(enforced.clone());
                }
            }
        }
        if !self.node_selector.is_empty() {
            spec.node_selector
                .get_or_insert_default()
                .extend(self.node_selector.clone());
        }
    }

    /// `taints` without those an enforced toleration tolerates.
    pub fn shown_taints(&self, taints: &[Taint]) -> Vec<Taint> {
        taints
            .iter()
            .filter(|taint| !self.tolerations.iter().any(|t| tolerates(t, taint)))
            .cloned()
            .collect()
    }
}

/// Whether `toleration` tolerates `taint`, as the scheduler decides it: an empty effect
/// matches every effect, an empty key with `Exists` every key, `Exists` any value and
/// `Equal` (the default operator) only the same value.
pub fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    let effect = toleration.effect.as_deref().unwrap_or_default();
    if !effect.is_empty() && effect != taint.effect {
        return false;
    }
    let key = toleration.key.as_deref().unwrap_or_default();
    match toleration.operator.as_deref().unwrap_or("Equal") {
        "Exists" => key.is_empty() || key == taint.key,
        _ => {
            key == taint.key
                && toleration.value.as_deref().unwrap_or_default()
                    == taint.value.as_deref().unwrap_or_default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toleration(key: &str, operator: &str, value: &str, effect: &str) -> Toleration {
        let some = |s: &str| (!s.is_empty()).then(|| s.to_string());
        Toleration {
            key: some(key),
            operator: some(operator),
            value: some(value),
            effect: some(effect),
            ..Default::default()
        }
    }

    fn taint(key: &str, value: &str, effect: &str) -> Taint {
        Taint {
            key: key.to_string(),
            value: (!value.is_empty()).then(|| value.to_string()),
            effect: effect.to_string(),
            ..Default::default()
        }
    }

    fn sync(yaml: &str) -> Sync {
        serde_yaml::from_str(yaml).expect("sync YAML")
    }

    #[test]
    fn tolerations_match_as_the_scheduler_matches_them() {
        let dedicated = taint("dedicated", "ci", "NoSchedule");
        for ((key, operator, value, effect), tolerated) in [
            (("dedicated", "Exists", "", "NoSchedule"), true),
            (("dedicated", "Exists", "", ""), true),
            (("", "Exists", "", ""), true),
            (("dedicated", "Equal", "ci", "NoSchedule"), true),
            (("dedicated", "", "ci", ""), true),
            (("dedicated", "Equal", "gpu", "NoSchedule"), false),
            (("dedicated", "Exists", "", "NoExecute"), false),
            (("other", "Exists", "", ""), false),
        ] {
            let t = toleration(key, operator, value, effect);
            assert_eq!(tolerates(&t, &dedicated), tolerated, "{t:?}");
        }
    }

    #[test]
    fn enforced_tolerations_and_node_labels_reach_every_host_pod_once() {
        let placement = Placement::from_sync(&sync(
            "toHost: { pods: { enforceTolerations: [{ key: pool, operator: Exists, effect: NoSchedule }] } }
fromHost: { nodes: { enabled: true, selector: { labels: { pool: tenants } } } }",
        ));
        let mut spec = PodSpec {
            node_selector: Some(BTreeMap::from([
                ("disk".to_string(), "ssd".to_string()),
                ("pool".to_string(), "other".to_string()),
            ])),
            tolerations: Some(vec![toleration("pool", "Exists", "", "NoSchedule")]),
            ..Default::default()
        };
        placement.apply(&mut spec);
        assert_eq!(
            spec.tolerations.unwrap(),
            vec![toleration("pool", "Exists", "", "NoSchedule")],
            "a toleration the pod already has is not added twice"
        );
        let selector = spec.node_selector.unwrap();
        assert_eq!(selector["pool"], "tenants", "the enforced label wins");
        assert_eq!(selector["disk"], "ssd", "the tenant's other labels stay");
    }

    #[test]
    fn nothing_is_enforced_by_default_or_when_every_node_is_shown() {
        for yaml in [
            "{}",
            "fromHost: { nodes: { enabled: true, selector: { all: true } } }",
        ] {
            let placement = Placement::from_sync(&sync(yaml));
            let mut spec = PodSpec::default();
            placement.apply(&mut spec);
            assert_eq!(spec, PodSpec::default(), "{yaml}");
        }
        let off = Placement::from_sync(&sync(
            "fromHost: { nodes: { enabled: false, selector: { labels: { pool: tenants } } } }",
        ));
        let mut spec = PodSpec::default();
        off.apply(&mut spec);
        assert_eq!(spec.node_selector, None, "no node sync, no selector");
    }

    #[test]
    fn virtual_nodes_leave_off_only_the_tolerated_taints() {
        let placement = Placement::from_sync(&sync(
            "toHost: { pods: { enforceTolerations: [{ key: pool, operator: Exists, effect: NoSchedule }] } }",
        ));
        let shown = placement.shown_taints(&[
            taint("pool", "tenants", "NoSchedule"),
            taint("pool", "tenants", "NoExecute"),
            taint("maintenance", "", "NoSchedule"),
        ]);
        assert_eq!(
            shown,
            vec![
                taint("pool", "tenants", "NoExecute"),
                taint("maintenance", "", "NoSchedule")
            ]
        );
    }
}
