//! Starts the controller: the caches, the watches that trigger a reconcile, the number in
//! flight, and the error policy (backoff per VirtualCluster).

use std::{
    fmt::Debug,
    sync::{Arc, Mutex},
    time::Duration,
};

use futures::{FutureExt, Stream, StreamExt};
use k8s_openapi::api::core::v1::Namespace;
use kube::{
    Api, Client, Resource, ResourceExt,
    core::PartialObjectMeta,
    runtime::{
        Controller, WatchStreamExt,
        controller::Action,
        reflector::{self, ObjectRef, Store},
        watcher,
    },
};
use serde::de::DeserializeOwned;
use tracing::{info, warn};
use vnest_crds::{VirtualCluster, VirtualClusterPolicy, VirtualClusterTemplate, meta};

use super::{context::Context, error::Error, reconcile};
use crate::{
    children::{self, ChildStores},
    metrics::{Metrics, Readiness},
    recorder::Recorder,
    settings::Settings,
};

/// Exponential backoff per VirtualCluster: 2s, 4s, ... up to 5 minutes.
pub fn backoff(failures: u32) -> Duration {
    Duration::from_secs(2u64.saturating_pow(failures.min(9))).min(Duration::from_secs(300))
}

fn error_policy(vc: Arc<VirtualCluster>, error: &Error, ctx: Arc<Context>) -> Action {
    let reason = error.category();
    ctx.metrics
        .reconcile_errors
        .with_label_values(&[reason])
        .inc();
    let mut failures = ctx.failures.lock().unwrap_or_else(|e| e.into_inner());
    let count = failures
        .entry(ObjectRef::from_obj(vc.as_ref()))
        .or_insert(0);
    *count += 1;
    // Conflicts mean a newer version exists; retry at once.
    let delay = if reason == "conflict" {
        Duration::from_millis(200)
    } else {
        backoff(*count)
    };
    warn!(namespace = %vc.namespace().unwrap_or_default(), name = %vc.name_any(), error = %error, retry_in = ?delay, "reconcile failed");
    Action::requeue(delay)
}

/// A cache of every `K` in the cluster, and the stream of its changes.
fn cluster_cache<K>(
    client: &Client,
) -> (
    Store<K>,
    impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + use<K>,
)
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let writer = reflector::store::Writer::<K>::default();
    let store = writer.as_reader();
    let changes = watcher(
        Api::<K>::all(client.clone()),
        watcher::Config::default().any_semantic(),
    )
    .default_backoff()
    .reflect(writer);
    (store, changes)
}

/// The VirtualClusters in `cache` that `concerned` picks, to reconcile again.
fn affected(
    cache: &Store<VirtualCluster>,
    concerned: impl Fn(&VirtualCluster) -> bool,
) -> Vec<ObjectRef<VirtualCluster>> {
    cache
        .state()
        .into_iter()
        .filter(|vc| concerned(vc))
        .map(|vc| ObjectRef::from_obj(vc.as_ref()))
        .collect()
}

/// Which VirtualClusters one controller reconciles, and how many at once.
#[derive(Clone, Debug)]
pub struct Scope {
    /// One namespace, or all.
    pub namespace: Option<String>,
    /// A label selector on VirtualClusters, or all.
    pub selector: Option<String>,
    /// Reconciles in flight at most (each sends several requests; unbounded, a thousand new
    /// VirtualClusters would flood the API server and the operator's memory at once).
    pub concurrency: u16,
}

/// Runs the controller over the VirtualClusters of `scope` until shutdown.
pub async fn run(
    client: Client,
    settings: Settings,
    metrics: Metrics,
    readiness: Readiness,
    scope: Scope,
    identity: &str,
) {
    let Scope {
        namespace,
        selector,
        concurrency,
    } = scope;
    let (stores, streams) = ChildStores::start(&client, namespace.as_deref());
    let ns_writer = reflector::store::Writer::<PartialObjectMeta<Namespace>>::default();
    let namespaces = ns_writer.as_reader();
    // Only label changes matter to the controller (they choose the governing policy); of the
    // annotations only the one naming who set the Pod Security labels is read.
    let namespace_changes = watcher(
        Api::<PartialObjectMeta<Namespace>>::all(client.clone()),
        watcher::Config::default().page_size(children::LIST_PAGE_SIZE),
    )
    .default_backoff()
    .modify(|o| {
        o.metadata.managed_fields = None;
        let annotations = o.annotations_mut();
        annotations.retain(|key, _| key == meta::ANNOTATION_POD_SECURITY_FROM);
        if annotations.is_empty() {
            o.metadata.annotations = None;
        }
    })
    .reflect(ns_writer)
    .applied_objects()
    .predicate_filter(
        kube::runtime::predicates::labels,
        kube::runtime::PredicateConfig::default(),
    );
    let (templates, template_changes) = cluster_cache::<VirtualClusterTemplate>(&client);
    let template_changes = template_changes.applied_objects();
    let (policies, policy_changes) = cluster_cache::<VirtualClusterPolicy>(&client);
    // Deletions too: a policy removed may free a namespace another policy also selected.
    let policy_changes = policy_changes.touched_objects();
    let recorder = Recorder::new(
        client.clone(),
        kube::runtime::events::Reporter {
            controller: "vnest-operator".into(),
            instance: Some(identity.to_string()),
        },
    );
    let caches_ready = {
        let stores = stores.clone();
        let namespaces = namespaces.clone();
        let templates = templates.clone();
        let policies = policies.clone();
        async move {
            stores.wait_until_ready().await;
            let _ = namespaces.wait_until_ready().await;
            let _ = templates.wait_until_ready().await;
            let _ = policies.wait_until_ready().await;
        }
    }
    .boxed()
    .shared();
    let ctx = Arc::new(Context {
        client: client.clone(),
        settings,
        metrics,
        stores: stores.clone(),
        namespaces: namespaces.clone(),
        templates,
        policies,
        caches_ready: caches_ready.clone(),
        recorder,
        failures: Mutex::default(),
        phases: Mutex::default(),
    });
    let vcs: Api<VirtualCluster> = match &namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let mut vc_config = watcher::Config::default().page_size(children::LIST_PAGE_SIZE);
    if let Some(selector) = &selector {
        vc_config = vc_config.labels(selector);
    }
    // Cached without managed fields: nothing reads them, and at a thousand VirtualClusters
    // they are a large part of the cache.
    let vc_writer = reflector::store::Writer::<VirtualCluster>::default();
    let vc_reader = vc_writer.as_reader();
    let vc_events = watcher(vcs, vc_config)
        .default_backoff()
        .modify(|vc| vc.metadata.managed_fields = None)
        .reflect(vc_writer)
        .applied_objects();
    let mut controller = Controller::for_stream(vc_events, vc_reader);
    // A changed template rolls forward to every VirtualCluster rendered from it.
    let virtual_clusters = controller.store();
    controller = controller.watches_stream(template_changes, move |template| {
        let name = template.name_any();
        affected(&virtual_clusters, |vc| {
            vc.spec.template.as_ref().is_some_and(|t| t.name == name)
        })
    });
    // A policy change (its selector, bounds or defaults, or its removal) may concern any
    // VirtualCluster its old or new selector matched; the old selector is gone, so all are
    // looked at again. A reconcile with nothing to change writes nothing.
    let virtual_clusters = controller.store();
    controller = controller.watches_stream(policy_changes, move |_policy| {
        affected(&virtual_clusters, |_| true)
    });
    // A namespace's labels decide which policy governs it.
    let virtual_clusters = controller.store();
    controller = controller.watches_stream(namespace_changes, move |ns| {
        let name = ns.name_any();
        affected(&virtual_clusters, |vc| {
            vc.namespace().as_deref() == Some(name.as_str())
        })
    });
    for (kind, stream) in streams {
        let ar = kind.api_resource();
        if kind.is_cluster_scoped() {
            controller = controller.watches_stream_with(
                stream,
                |obj: children::ChildMeta| {
                    let labels = obj.labels();
                    let name = labels.get(meta::LABEL_VIRTUAL_CLUSTER)?;
                    let ns = labels.get(meta::LABEL_VIRTUAL_CLUSTER_NAMESPACE)?;
                    Some(ObjectRef::new(name).within(ns))
                },
                ar,
            );
        } else {
            controller = controller.owns_stream_with(stream, ar);
        }
    }
    tokio::spawn(async move {
        caches_ready.await;
        readiness.set_ready();
        info!("caches synced");
    });
    controller
        .with_config(kube::runtime::controller::Config::default().concurrency(concurrency))
        .shutdown_on_signal()
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            if let Err(err) = result {
                tracing::debug!(error = %err, "reconcile trigger error");
            }
        })
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_caps_at_five_minutes() {
        assert_eq!(backoff(1), Duration::from_secs(2));
        assert_eq!(backoff(3), Duration::from_secs(8));
        assert_eq!(backoff(50), Duration::from_secs(300));
    }
}
