//! Minimal virtual Nodes for the host nodes synced pods run on (`fromHost.nodes` off): one
//! queue keyed by node name, fed by virtual pod changes; a node is created while a virtual
//! pod is bound to it and deleted when none is.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::{
    Api,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams},
};
use serde_json::json;

use crate::{
    cache::Cache,
    engine::{self, Ctx, Key, Queue, is_not_found},
    translate::node::{LABEL_FAKE_NODE, minimal_node, without_condition_taints},
};

/// The node key a virtual pod touches (nodes are cluster-scoped: empty namespace).
pub fn node_of(pod: &Pod) -> Vec<Key> {
    let node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
    node.map(|n| (String::new(), n)).into_iter().collect()
}

/// Whether any virtual pod, in any namespace (synced or not), is bound to `node`: read from
/// the API, as the caches hold the synced namespaces only.
pub(crate) async fn pods_anywhere_on(ctx: &Ctx, node: &str) -> anyhow::Result<bool> {
    let params = ListParams::default()
        .fields(&format!("spec.nodeName={node}"))
        .limit(1);
    let anywhere = Api::<Pod>::all(ctx.virt.clone()).list(&params).await?;
    Ok(!anywhere.items.is_empty())
}

async fn reconcile(ctx: &Ctx, pods: &Cache<Pod>, node: &str) -> anyhow::Result<()> {
    let api: Api<Node> = Api::all(ctx.virt.clone());
    let on_node: Vec<_> = pods
        .state()
        .into_iter()
        .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node))
        .collect();
    let existing = api.get_opt(node).await?;
    let ours = existing.as_ref().is_some_and(|n| {
        n.metadata
            .labels
            .as_ref()
            .is_some_and(|l| l.contains_key(LABEL_FAKE_NODE))
    });
    if on_node.is_empty() {
        // Pods outside the synced namespaces may use it too: ask the API, not the cache.
        if ours && !pods_anywhere_on(ctx, node).await? {
            match api.delete(node, &DeleteParams::default()).await {
                Ok(_) => tracing::info!(node, "deleted unused virtual node"),
                Err(e) if is_not_found(&e) => {}
                Err(e) => return Err(e.into()),
            }
        }
        return Ok(());
    }
    let host_ip = on_node
        .iter()
        .find_map(|p| p.status.as_ref().and_then(|s| s.host_ip.clone()));
    let desired = minimal_node(node, host_ip.as_deref());
    let addresses = |n: &Node| n.status.as_ref().and_then(|s| s.addresses.clone());
    let (current, created) = match existing {
        None => (api.create(&PostParams::default(), &desired).await?, true),
        // Someone else's node: not ours to change.
        Some(_) if !ours => return Ok(()),
        Some(n) => (n, false),
    };
    if let Some(taints) = without_condition_taints(&current, &[]) {
        let patch = json!({ "spec": { "taints": taints } });
        api.patch(node, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        tracing::info!(node, "dropped the admission's not-ready taint");
    }
    if !created && addresses(&current) == addresses(&desired) {
        return Ok(());
    }
    let status = json!({ "apiVersion": "v1", "kind": "Node", "status": desired.status });
    engine::apply_status(&api, node, &status).await?;
    tracing::info!(node, ip = ?host_ip, "virtual node up to date");
    Ok(())
}

/// Reconciles virtual nodes as `queue` names them, once the pod cache is synced.
pub async fn run(ctx: Arc<Ctx>, pods: Cache<Pod>, queue: Queue) {
    if pods.wait_until_ready().await.is_err() {
        return;
    }
    pods.state()
        .iter()
        .flat_map(|p| node_of(p))
        .for_each(|k| queue.push(k));
    engine::work(&ctx, &queue, "Node", |key| {
        let (ctx, pods) = (&ctx, &pods);
        async move { reconcile(ctx, pods, &key.1).await }
    })
    .await;
}
