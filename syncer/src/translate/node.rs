//! Virtual Nodes. With `fromHost.nodes` off, each host node running a synced pod appears in
//! the virtual cluster under its own name with nothing of the host's details (minimal). With
//! it on, host nodes matching the selector are copied as they are (real).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, NodeAddress, NodeCondition, NodeSpec, NodeStatus, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use vnest_crds::{NodeSelector, meta::ANNOTATION_APPLIED_HASH};

use super::placement::Placement;

/// Label marking virtual Nodes the syncer made (vCluster's spelling).
pub const LABEL_FAKE_NODE: &str = "vcluster.loft.sh/fake-node";

/// The virtual Node standing for host node `name`, with the host IP a pod on it reported.
pub fn minimal_node(name: &str, host_ip: Option<&str>) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels: Some(BTreeMap::from([
                (LABEL_FAKE_NODE.to_string(), "true".to_string()),
                ("kubernetes.io/hostname".to_string(), name.to_string()),
            ])),
            ..Default::default()
        },
        spec: None,
        status: Some(NodeStatus {
            conditions: Some(vec![NodeCondition {
                type_: "Ready".to_string(),
                status: "True".to_string(),
                reason: Some("HostNodeRunsSyncedPods".to_string()),
                ..Default::default()
            }]),
            addresses: host_ip.map(|ip| {
                vec![NodeAddress {
                    type_: "InternalIP".to_string(),
                    address: ip.to_string(),
                }]
            }),
            ..Default::default()
        }),
    }
}

/// Taints the API server's node admission puts on every new Node, which only a node
/// lifecycle controller removes; a virtual cluster runs none, so the syncer does.
const CONDITION_TAINTS: [&str; 2] = [
    "node.kubernetes.io/not-ready",
    "node.kubernetes.io/unreachable",
];

/// The virtual node's taints without the condition taints its host node does not carry
/// (`host_taints`), when there are any to drop; other taints (a tenant's) stay.
pub fn without_condition_taints(virt: &Node, host_taints: &[Taint]) -> Option<Vec<Taint>> {
    let taints = virt.spec.as_ref()?.taints.as_ref()?;
    let stray = |t: &Taint| {
        CONDITION_TAINTS.contains(&t.key.as_str())
            && !host_taints
                .iter()
                .any(|h| h.key == t.key && h.effect == t.effect)
    };
    taints
        .iter()
        .any(stray)
        .then(|| taints.iter().filter(|t| !stray(t)).cloned().collect())
}

/// Whether host node `host` is one `selector` picks (`all`, or every listed label).
pub fn selected(host: &Node, selector: &NodeSelector) -> bool {
    let labels = host.metadata.labels.clone().unwrap_or_default();
    selector.all
        || (!selector.labels.is_empty()
            && selector
                .labels
                .iter()
                .all(|(k, v)| labels.get(k) == Some(v)))
}

/// The virtual copy of host node `host`, without status: its labels, annotations, taints
/// (but those the enforced tolerations of `placement` tolerate) and schedulability, plus [`ANNOTATION_APPLIED_HASH`] of exactly those, so the copy is
/// written again only when the host changes them and a tenant's edit of the virtual node
/// stays until then (design.md, "Who owns what").
pub fn real_node(host: &Node, placement: &Placement) -> Node {
    let spec = host.spec.as_ref().map(|s| NodeSpec {
        taints: s.taints.as_deref().map(|t| placement.shown_taints(t)),
        unschedulable: s.unschedulable,
        ..Default::default()
    });
    let labels = host.metadata.labels.clone();
    let mut annotations = host.metadata.annotations.clone().unwrap_or_default();
    annotations.remove(ANNOTATION_APPLIED_HASH);
    let hashed = serde_json::to_string(&(&labels, &annotations, &spec)).unwrap_or_default();
    annotations.insert(
        ANNOTATION_APPLIED_HASH.to_string(),
        vnest_crds::digest::short_hash(hashed.as_bytes()),
    );
    Node {
        metadata: ObjectMeta {
            name: host.metadata.name.clone(),
            labels,
            annotations: Some(annotations),
            ..Default::default()
        },
        spec,
        status: None,
    }
}

/// The status a real virtual node shows: the host's, without the list of pulled images
/// when `clear_image_status` asks to hide it.
pub fn real_node_status(host: &Node, clear_image_status: bool) -> Option<NodeStatus> {
    let mut status = host.status.clone()?;
    if clear_image_status {
        status.images = None;
    }
    Some(status)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOST: &str = r#"
metadata:
  name: worker-1
  uid: host-uid
  resourceVersion: "9"
  labels: { vcluster-enabled: "true", kubernetes.io/hostname: worker-1 }
  annotations: { node.alpha.kubernetes.io/ttl: "0" }
spec:
  podCIDR: 10.244.1.0/24
  providerID: aws:///i-1
  unschedulable: true
  taints: [{ key: dedicated, value: ci, effect: NoSchedule }]
status:
  capacity: { cpu: "4", pods: "110" }
  conditions: [{ type: Ready, status: "True" }]
  images: [{ names: [registry.example/secret-app:1], sizeBytes: 1 }]
"#;

    fn host() -> Node {
        serde_yaml::from_str(HOST).unwrap()
    }

    /// The seed's `selector.labels` picks nodes with every label; `all` picks every node;
    /// an empty selector picks none (then only nodes running synced pods are copied).
    #[test]
    fn the_selector_needs_every_label_or_all() {
        let mut selector = NodeSelector::default();
        assert!(!selected(&host(), &selector));
        selector
            .labels
            .insert("vcluster-enabled".into(), "true".into());
        assert!(selected(&host(), &selector));
        selector.labels.insert("zone".into(), "a".into());
        assert!(!selected(&host(), &selector));
        let all = NodeSelector {
            all: true,
            ..Default::default()
        };
        assert!(selected(&host(), &all));
    }

    /// Labels, annotations, taints and schedulability are copied; the host's identity and
    /// addressing fields are not.
    #[test]
    fn real_nodes_copy_what_scheduling_needs() {
        let node = real_node(&host(), &Placement::default());
        assert_eq!(node.metadata.name.as_deref(), Some("worker-1"));
        assert_eq!(node.metadata.labels.unwrap()["vcluster-enabled"], "true");
        assert!(node.metadata.uid.is_none() && node.metadata.resource_version.is_none());
        let spec = node.spec.unwrap();
        assert_eq!(spec.unschedulable, Some(true));
        assert_eq!(spec.taints.unwrap()[0].key, "dedicated");
        assert_eq!(spec.pod_cidr, None);
        assert_eq!(spec.provider_id, None);
    }

    /// The hash changes when the host changes a copied field, and only then.
    #[test]
    fn the_applied_hash_follows_copied_fields_only() {
        let hash = |n: &Node| {
            real_node(n, &Placement::default())
                .metadata
                .annotations
                .unwrap()[ANNOTATION_APPLIED_HASH]
                .clone()
        };
        let before = hash(&host());
        let mut status_only = host();
        status_only.status = None;
        status_only.metadata.resource_version = Some("10".into());
        assert_eq!(hash(&status_only), before);
        let mut relabelled = host();
        relabelled
            .metadata
            .labels
            .as_mut()
            .unwrap()
            .insert("new".into(), "x".into());
        assert_ne!(hash(&relabelled), before);
    }

    /// `clearImageStatus` hides which images the host pulled; otherwise status is the host's.
    #[test]
    fn image_status_is_cleared_only_when_asked() {
        assert!(real_node_status(&host(), true).unwrap().images.is_none());
        let kept = real_node_status(&host(), false).unwrap();
        assert_eq!(kept.images.unwrap().len(), 1);
        assert_eq!(kept.capacity.unwrap()["cpu"].0, "4");
    }

    /// The node is Ready, marked as ours, and shows only the address pods already know.
    #[test]
    fn minimal_nodes_are_ready_marked_and_bare() {
        let node = minimal_node("kwok-node-0", Some("127.0.0.1"));
        assert_eq!(
            node.metadata.labels.as_ref().unwrap()[LABEL_FAKE_NODE],
            "true"
        );
        let status = node.status.unwrap();
        assert_eq!(status.conditions.unwrap()[0].status, "True");
        assert_eq!(status.addresses.unwrap()[0].address, "127.0.0.1");
        assert!(status.capacity.is_none() && status.node_info.is_none());
    }

    fn tainted(taints: &[(&str, &str)]) -> Node {
        Node {
            spec: Some(NodeSpec {
                taints: Some(
                    taints
                        .iter()
                        .map(|(key, effect)| Taint {
                            key: key.to_string(),
                            effect: effect.to_string(),
                            ..Default::default()
                        })
                        .collect(),
                ),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn the_admission_not_ready_taint_is_dropped_and_a_tenant_taint_kept() {
        let virt = tainted(&[
            ("node.kubernetes.io/not-ready", "NoSchedule"),
            ("team", "NoSchedule"),
        ]);
        let kept = without_condition_taints(&virt, &[]).expect("a taint to drop");
        let keys: Vec<_> = kept.iter().map(|t| t.key.as_str()).collect();
        assert_eq!(keys, ["team"]);
    }

    #[test]
    fn a_condition_taint_the_host_node_carries_stays() {
        let virt = tainted(&[("node.kubernetes.io/unreachable", "NoExecute")]);
        let host = tainted(&[("node.kubernetes.io/unreachable", "NoExecute")]);
        let host_taints = host.spec.unwrap().taints.unwrap();
        assert_eq!(without_condition_taints(&virt, &host_taints), None);
    }

    #[test]
    fn nothing_to_drop_means_no_write() {
        assert_eq!(
            without_condition_taints(&tainted(&[("team", "NoSchedule")]), &[]),
            None
        );
        assert_eq!(without_condition_taints(&Node::default(), &[]), None);
    }
}
