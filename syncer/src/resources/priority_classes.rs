//! `sync.toHost.priorityclasses`: every tenant PriorityClass kept as a host class
//! ([`crate::translate::priority_class`] says what the copy is). Cluster-scoped, so not the
//! namespaced engine: both sides are watched and each virtual name is reconciled from live
//! reads (there are few classes). The host watch's first list queues every copy this
//! virtual cluster made, so copies of classes deleted while the syncer was down go at start.

use std::sync::Arc;

use futures::{StreamExt, stream};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::{
    Api, ResourceExt,
    api::DeleteParams,
    runtime::{WatchStreamExt, watcher},
};
use vnest_crds::containment::covers;
use vnest_crds::meta::{
    ANNOTATION_OBJECT_NAME, LABEL_SYNCER_MANAGED_BY, LABEL_VIRTUAL_CLUSTER_NAMESPACE,
};

use crate::{
    engine::{self, Ctx, Queue, is_not_found},
    translate::priority_class::{host_class_name, host_copies_selector, host_priority_class},
};

const KIND: &str = "PriorityClass";

/// Runs the sync until its watches end.
pub async fn run(ctx: Arc<Ctx>) {
    ctx.metrics.reconcile_errors.with_label_values(&[KIND]);
    let queue = Queue::default();
    // A virtual class queues its name; a host copy the virtual name it came from.
    let virt = watcher(
        Api::<PriorityClass>::all(ctx.virt.clone()),
        watcher::Config::default(),
    )
    .default_backoff()
    .map(|ev| ev.map(|e| touched(e).map(|o| o.name_any())));
    let host_config = watcher::Config::default().labels(&host_copies_selector(&ctx.target));
    let host = watcher(Api::<PriorityClass>::all(ctx.host.clone()), host_config)
        .default_backoff()
        .map(|ev| {
            ev.map(|e| {
                touched(e).and_then(|o| o.annotations().get(ANNOTATION_OBJECT_NAME).cloned())
            })
        });
    let events = stream::select(virt, host).for_each({
        let queue = queue.clone();
        move |name| {
            match name {
                Ok(Some(name)) => queue.push((String::new(), name)),
                Ok(None) => {}
                Err(e) => tracing::warn!(kind = KIND, error = %e, "watch failed; retrying"),
            }
            futures::future::ready(())
        }
    });
    let watch_task = tokio::spawn(events);
    engine::work(&ctx, &queue, KIND, |key| {
        let ctx = ctx.clone();
        async move { reconcile(&ctx, &key.1).await }
    })
    .await;
    watch_task.abort();
}

/// The object a watch event is about, if it is about one.
fn touched(event: watcher::Event<PriorityClass>) -> Option<PriorityClass> {
    match event {
        watcher::Event::Apply(o) | watcher::Event::InitApply(o) | watcher::Event::Delete(o) => {
            Some(o)
        }
        _ => None,
    }
}

/// Whether host class `host` is a copy this virtual cluster's syncer made.
fn ours(ctx: &Ctx, host: &PriorityClass) -> bool {
    let labels = host.labels();
    labels.get(LABEL_SYNCER_MANAGED_BY) == Some(&ctx.target.vc)
        && labels.get(LABEL_VIRTUAL_CLUSTER_NAMESPACE) == Some(&ctx.target.host_namespace)
}

async fn delete(ctx: &Ctx, api: &Api<PriorityClass>, name: &str) -> anyhow::Result<()> {
    ctx.metrics.count_host_write(KIND);
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => {
            tracing::info!(kind = KIND, host = name, "deleted host copy");
            Ok(())
        }
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(anyhow::anyhow!(
            "failed to delete host PriorityClass {name}: {e}"
        )),
    }
}

async fn reconcile(ctx: &Ctx, name: &str) -> anyhow::Result<()> {
    let Some(host_name) = host_class_name(name, &ctx.target) else {
        return Ok(());
    };
    let virt_api: Api<PriorityClass> = Api::all(ctx.virt.clone());
    let host_api: Api<PriorityClass> = Api::all(ctx.host.clone());
    let virt = virt_api
        .get_opt(name)
        .await
        .map_err(|e| anyhow::anyhow!("failed to read virtual PriorityClass {name}: {e}"))?;
    let desired = virt
        .filter(|v| v.metadata.deletion_timestamp.is_none())
        .and_then(|v| host_priority_class(&v, &ctx.target));
    let host = host_api
        .get_opt(&host_name)
        .await
        .map_err(|e| anyhow::anyhow!("failed to read host PriorityClass {host_name}: {e}"))?;
    if host.as_ref().is_some_and(|h| !ours(ctx, h)) {
        tracing::warn!(kind = KIND, host = %host_name, "a host class of the copy's name is not ours; left alone");
        return Ok(());
    }
    let Some(desired) = desired else {
        if host.is_some() {
            delete(ctx, &host_api, &host_name).await?;
        }
        return Ok(());
    };
    if let Some(h) = &host {
        // A class's value is immutable: a changed one needs a new copy (the deletion's
        // watch event queues the name again).
        if h.value != desired.value {
            return delete(ctx, &host_api, &host_name).await;
        }
        if covers(&serde_json::to_value(h)?, &serde_json::to_value(&desired)?) {
            return Ok(());
        }
    }
    ctx.metrics.count_host_write(KIND);
    engine::apply(&host_api, &host_name, &desired)
        .await
        .map_err(|e| anyhow::anyhow!("failed to apply host PriorityClass {host_name}: {e}"))?;
    tracing::info!(kind = KIND, host = %host_name, "applied host copy");
    Ok(())
}
