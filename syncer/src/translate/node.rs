//! Minimal virtual Nodes: with `fromHost.nodes` off, each host node running a synced pod
//! appears in the virtual cluster under its own name with nothing of the host's details.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, NodeAddress, NodeCondition, NodeStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
