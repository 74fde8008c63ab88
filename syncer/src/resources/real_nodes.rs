//! Real virtual Nodes (`fromHost.nodes` on): host nodes the selector picks, and host nodes
//! synced pods run on, copied into the virtual cluster with their status (images cleared
//! when `clearImageStatus` asks); copies the host no longer has, or no longer selects, go.
//! One queue keyed by node name, fed by both node watches and by virtual pods.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, Patch, PatchParams},
    runtime::{
        WatchStreamExt,
        reflector::{self},
        watcher,
    },
};
use serde_json::json;
use vnest_crds::containment::covers;
use vnest_crds::meta::ANNOTATION_APPLIED_HASH;

use crate::{
    cache,
    cache::Cache,
    engine::{self, Ctx, Queue, is_not_found},
    translate::{
        node::{real_node, real_node_status, selected, without_condition_taints},
        placement::Placement,
    },
};

/// Caches of both sides' nodes and the virtual pods (when pods are synced).
struct Caches {
    host: Cache<Node>,
    virt: Cache<Node>,
    pods: Option<Cache<Pod>>,
}

/// Whether some virtual pod is bound to `node`: the cache for synced namespaces, then (before
/// a copy is deleted) the API, as pods outside the synced namespaces may use it too.
async fn pods_on(
    ctx: &Ctx,
    pods: Option<&Cache<Pod>>,
    node: &str,
    live: bool,
) -> anyhow::Result<bool> {
    let Some(pods) = pods else {
        return Ok(false);
    };
    let cached = pods
        .state()
        .iter()
        .any(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node));
    if cached || !live {
        return Ok(cached);
    }
    super::nodes::pods_anywhere_on(ctx, node).await
}

async fn reconcile(ctx: &Ctx, caches: &Caches, name: &str) -> anyhow::Result<()> {
    let nodes = &ctx.config.sync.from_host.nodes;
    let api: Api<Node> = Api::all(ctx.virt.clone());
    let host = caches.host.get(&reflector::ObjectRef::new(name));
    let virt = caches.virt.get(&reflector::ObjectRef::new(name));
    let ours = virt
        .as_ref()
        .is_some_and(|v| v.annotations().contains_key(ANNOTATION_APPLIED_HASH));
    let wanted = match &host {
        Some(h) => {
            selected(h, &nodes.selector) || pods_on(ctx, caches.pods.as_ref(), name, false).await?
        }
        None => false,
    };
    let host_exists = host.is_some();
    let Some(host) = host.filter(|_| wanted) else {
        let still_used = host_exists && pods_on(ctx, caches.pods.as_ref(), name, true).await?;
        if ours && !still_used {
            match api.delete(name, &DeleteParams::default()).await {
                Ok(_) => tracing::info!(node = name, "deleted virtual copy of host node"),
                Err(e) if is_not_found(&e) => {}
                Err(e) => return Err(e.into()),
            }
        }
        return Ok(());
    };
    if virt.is_some() && !ours {
        // A node someone else made in the virtual cluster under this name: not ours to change.
        return Ok(());
    }
    let desired = real_node(&host, &Placement::from_sync(&ctx.config.sync));
    let hash = |n: &Node| n.annotations().get(ANNOTATION_APPLIED_HASH).cloned();
    if virt.as_ref().and_then(|v| hash(v)) != hash(&desired) {
        engine::apply(&api, name, &desired).await?;
        tracing::info!(node = name, "virtual copy of host node applied");
    }
    let host_taints = host.spec.as_ref().and_then(|s| s.taints.clone());
    if let Some(taints) = virt
        .as_ref()
        .and_then(|v| without_condition_taints(v, host_taints.as_deref().unwrap_or_default()))
    {
        let patch = json!({ "spec": { "taints": taints } });
        api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        tracing::info!(node = name, "dropped the admission's not-ready taint");
    }
    let status = real_node_status(&host, nodes.clear_image_status);
    let current = virt.as_ref().and_then(|v| v.status.clone());
    let images_left = nodes.clear_image_status
        && current
            .as_ref()
            .is_some_and(|s| s.images.as_ref().is_some_and(|i| !i.is_empty()));
    let differs = !covers(
        &serde_json::to_value(&current)?,
        &serde_json::to_value(&status)?,
    );
    if status.is_some() && (differs || images_left) {
        let status = json!({ "apiVersion": "v1", "kind": "Node", "status": status });
        engine::apply_status(&api, name, &status).await?;
    }
    Ok(())
}

/// Watches host and virtual nodes into fresh caches, queuing each node name they report.
fn watch_nodes(client: kube::Client, queue: Queue) -> (Cache<Node>, impl Future<Output = ()>) {
    let (store, writer) = crate::cache::store();
    let events = reflector::reflector(
        writer,
        cache::watch(Api::<Node>::all(client), watcher::Config::default()),
    )
    .touched_objects()
    .for_each(move |node| {
        match node {
            Ok(n) => queue.push((String::new(), n.name_any())),
            Err(e) => tracing::warn!(error = %e, "node watch failed; retrying"),
        }
        futures::future::ready(())
    });
    (store, events)
}

/// Runs the node copies until the watches end; `queue` also gets the nodes of virtual pods
/// (`pods` is their cache, when pods are synced).
pub async fn run(ctx: Arc<Ctx>, pods: Option<Cache<Pod>>, queue: Queue) {
    let (host, host_events) = watch_nodes(ctx.host.clone(), queue.clone());
    let (virt, virt_events) = watch_nodes(ctx.virt.clone(), queue.clone());
    let work = async move {
        let pods_ready = async {
            match &pods {
                Some(p) => p.wait_until_ready().await,
                None => Ok(()),
            }
        };
        let ready = futures::join!(host.wait_until_ready(), virt.wait_until_ready(), pods_ready);
        if ready.0.is_err() || ready.1.is_err() || ready.2.is_err() {
            return;
        }
        let caches = Caches { host, virt, pods };
        engine::work(&ctx, &queue, "Node", |key| {
            let (ctx, caches) = (&ctx, &caches);
            async move { reconcile(ctx, caches, &key.1).await }
        })
        .await;
    };
    futures::join!(host_events, virt_events, work);
}
