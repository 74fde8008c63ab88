//! Endpoints of selector Services, host → virtual: the host endpoints controller fills the
//! host copy's Endpoints from the host pods; they are shown on the virtual Service with pod
//! references renamed back. Where the virtual cluster runs its own endpoints controller (k3s
//! does), its Endpoints carry its label and the syncer leaves them alone.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Endpoints, Pod, Service};
use kube::{
    Api, ResourceExt,
    runtime::{
        WatchStreamExt,
        reflector::{self, ObjectRef},
        watcher,
    },
};
use vnest_crds::{
    meta::{ANNOTATION_OBJECT_NAME, ANNOTATION_OBJECT_NAMESPACE},
    translate::managed_by_selector,
};

use super::same_whole;
use crate::{
    cache,
    cache::Cache,
    engine::{self, Ctx, Key, Queue},
    translate::endpoints::{ANNOTATION_FROM_HOST, LABEL_ENDPOINTS_MANAGED_BY, virtual_endpoints},
};

/// The caches one reconcile reads (Services and pods from their engines).
pub struct Caches {
    pub virt_services: Cache<Service>,
    pub host_services: Cache<Service>,
    pub virt_pods: Cache<Pod>,
    pub host_pods: Cache<Pod>,
}

/// The virtual key an object named like a host copy stands for, from the host Service of
/// that name (host Endpoints carry no annotations of ours).
fn key_of(host_services: &Cache<Service>, host_ns: &str, name: &str) -> Option<Key> {
    let svc = host_services.get(&ObjectRef::new(name).within(host_ns))?;
    let a = svc.annotations();
    Some((
        a.get(ANNOTATION_OBJECT_NAMESPACE)?.clone(),
        a.get(ANNOTATION_OBJECT_NAME)?.clone(),
    ))
}

async fn reconcile(
    ctx: &Ctx,
    caches: &Caches,
    host_endpoints: &Cache<Endpoints>,
    key: &Key,
) -> anyhow::Result<()> {
    let (namespace, name) = key;
    let Some(svc) = caches
        .virt_services
        .get(&ObjectRef::new(name).within(namespace))
    else {
        // Gone: its Endpoints are owned by it and go with it.
        return Ok(());
    };
    let has_selector = svc
        .spec
        .as_ref()
        .and_then(|s| s.selector.as_ref())
        .is_some_and(|s| !s.is_empty());
    if !has_selector {
        return Ok(());
    }
    let host_ns = &ctx.target.host_namespace;
    let host =
        host_endpoints.get(&ObjectRef::new(&ctx.target.host_name(name, namespace)).within(host_ns));
    let api: Api<Endpoints> = Api::namespaced(ctx.virt.clone(), namespace);
    let current = api.get_opt(name).await?;
    let theirs = current.as_ref().is_some_and(|c| {
        !c.annotations().contains_key(ANNOTATION_FROM_HOST)
            || c.labels().contains_key(LABEL_ENDPOINTS_MANAGED_BY)
    });
    if theirs {
        return Ok(());
    }
    let pod_of = |host_pod: &str| {
        let pod = caches
            .host_pods
            .get(&ObjectRef::new(host_pod).within(host_ns))?;
        let a = pod.annotations();
        let (ns, name) = (
            a.get(ANNOTATION_OBJECT_NAMESPACE)?,
            a.get(ANNOTATION_OBJECT_NAME)?,
        );
        let virt = caches.virt_pods.get(&ObjectRef::new(name).within(ns))?;
        Some((ns.clone(), name.clone(), virt.uid()?))
    };
    let desired = virtual_endpoints(&svc, host.as_deref(), &pod_of);
    let same = current.as_ref().is_some_and(|c| {
        same_whole(&c.subsets, &desired.subsets) && c.labels() == desired.labels()
    });
    if !same {
        engine::apply(&api, name, &desired).await?;
        tracing::info!(namespace, name, "virtual endpoints follow the host");
    }
    Ok(())
}

/// Runs until the host Endpoints watch ends; `queue` also gets the keys of changed
/// virtual Services (a follower of the Services engine).
pub async fn run(ctx: Arc<Ctx>, caches: Caches, queue: Queue) {
    let (host_endpoints, writer) = crate::cache::store();
    let api: Api<Endpoints> = Api::namespaced(ctx.host.clone(), &ctx.target.host_namespace);
    let config = watcher::Config::default().labels(&managed_by_selector(&ctx.target.vc));
    let watch = reflector::reflector(writer, cache::watch(api, config))
        .touched_objects()
        .for_each({
            let (queue, services, host_ns) = (
                queue.clone(),
                caches.host_services.clone(),
                ctx.target.host_namespace.clone(),
            );
            move |e| {
                match e {
                    Ok(e) => {
                        if let Some(k) = key_of(&services, &host_ns, &e.name_any()) {
                            queue.push(k);
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "host endpoints watch failed; retrying"),
                }
                futures::future::ready(())
            }
        });
    let work = async {
        let ready = futures::join!(
            host_endpoints.wait_until_ready(),
            caches.virt_services.wait_until_ready(),
            caches.host_services.wait_until_ready(),
            caches.virt_pods.wait_until_ready(),
            caches.host_pods.wait_until_ready(),
        );
        if [ready.0, ready.1, ready.2, ready.3, ready.4]
            .iter()
            .any(Result::is_err)
        {
            return;
        }
        // Host Endpoints listed before their Service was cached were not queued.
        for e in host_endpoints.state() {
            if let Some(k) = key_of(
                &caches.host_services,
                &ctx.target.host_namespace,
                &e.name_any(),
            ) {
                queue.push(k);
            }
        }
        engine::work(&ctx, &queue, "Endpoints", |key| {
            let (ctx, caches, host_endpoints) = (&ctx, &caches, &host_endpoints);
            async move { reconcile(ctx, caches, host_endpoints, &key).await }
        })
        .await;
    };
    futures::join!(watch, work);
}
