//! Reading and writing the host objects a VirtualCluster owns. Reads come from metadata watch
//! caches (one per kind, filtered to operator-made objects) that keep per child only what
//! [`drift`] reads ([`cache`]); a child is read in full only when its metadata says it may
//! have drifted, or for the few fields a reconcile needs ([`content`]), and then only after it
//! changed. Writes are server-side applies with one field manager.

mod cache;

use std::{collections::HashMap, sync::Arc};

use futures::{Stream, StreamExt, TryStreamExt};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, DynamicObject, Patch, PatchParams, ValidationDirective},
    core::PartialObjectMeta,
    runtime::{WatchStreamExt, watcher},
};
use serde_json::Value;
use vnest_crds::meta;

use self::cache::{KindCache, Observed};
use crate::{
    content,
    desired::{Child, ChildKind},
    drift::{self, Check},
    metrics::Metrics,
};

/// Field manager of every server-side apply the operator sends.
pub const FIELD_MANAGER: &str = "vnest-operator";

/// What applying one child did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Applied {
    Created,
    Updated,
    Unchanged,
}

/// A child's metadata as its watch delivers it (to the cache and the controller's triggers).
pub type ChildMeta = PartialObjectMeta<DynamicObject>;

/// The caches of the operator-made objects of every [`ChildKind`].
#[derive(Clone)]
pub struct ChildStores {
    caches: Arc<HashMap<ChildKind, KindCache>>,
}

/// Objects per page of a cache's list, the first and each re-list after a watch desync. The
/// lists are paged consistent reads rather than `resourceVersion=0`, which the API server
/// answers from its watch cache in one piece whatever the limit: a page is held whole, with
/// every object's managedFields, until the cache has taken in its marks, and unpaged lists of
/// every child kind were 26 of the 50 MiB a restarted operator held at 300 VirtualClusters.
pub const LIST_PAGE_SIZE: u32 = 100;

/// The label selector matching objects the operator made.
pub fn managed_selector() -> String {
    format!("{}={}", meta::LABEL_MANAGED_BY, meta::OPERATOR_MANAGER)
}

type TriggerStream = futures::stream::BoxStream<'static, Result<ChildMeta, watcher::Error>>;

impl ChildStores {
    /// Starts a metadata watch per kind over `namespace` (or all). Returns the caches and, per
    /// kind, the stream that must be polled to keep its cache filled (the controller polls it
    /// as an `owns` trigger).
    pub fn start(
        client: &Client,
        namespace: Option<&str>,
    ) -> (Self, Vec<(ChildKind, TriggerStream)>) {
        let caches: Arc<HashMap<ChildKind, KindCache>> = Arc::new(
            ChildKind::ALL
                .into_iter()
                .map(|kind| (kind, KindCache::new(kind.is_cluster_scoped())))
                .collect(),
        );
        let mut streams = Vec::new();
        for kind in ChildKind::ALL {
            let ar = kind.api_resource();
            let api: Api<ChildMeta> = match namespace {
                Some(ns) if !kind.is_cluster_scoped() => {
                    Api::namespaced_with(client.clone(), ns, &ar)
                }
                _ => Api::all_with(client.clone(), &ar),
            };
            let config = watcher::Config::default()
                .labels(&managed_selector())
                .page_size(LIST_PAGE_SIZE);
            let caches = caches.clone();
            let stream = watcher(api, config)
                .default_backoff()
                .map_ok(move |event| {
                    caches[&kind].observe(&event);
                    event
                })
                // Deletions too: a child someone deleted must trigger its owner's reconcile,
                // not wait for an unrelated event or the periodic resync.
                .touched_objects();
            streams.push((kind, stream.boxed()));
        }
        (ChildStores { caches }, streams)
    }

    fn cache(&self, kind: ChildKind) -> &KindCache {
        &self.caches[&kind]
    }

    fn get(&self, kind: ChildKind, namespace: &str, name: &str) -> Option<Observed> {
        let cache = self.cache(kind);
        cache.get(&cache.key(Some(namespace), name))
    }

    /// The [`content::paths`] of a child, or None when the cache has no such child. Read from
    /// the API server only when the child changed since last read.
    pub async fn content(
        &self,
        client: &Client,
        metrics: &Metrics,
        kind: ChildKind,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Value>, kube::Error> {
        let cache = self.cache(kind);
        let key = cache.key(Some(namespace), name);
        let Some(cached) = cache.get(&key) else {
            return Ok(None);
        };
        if let Some(kept) = cache.content(&key, &cached.resource_version) {
            return Ok(Some(kept));
        }
        metrics.read(&format!("{kind:?}"), "content");
        let Some(object) = api_for(client, kind, namespace).get_opt(name).await? else {
            return Ok(None);
        };
        let kept = content::keep(
            &serde_json::to_value(&object).unwrap_or_default(),
            content::paths(kind),
        );
        let version = object.resource_version().unwrap_or_default();
        cache.set_content(&key, &version, kept.clone());
        Ok(Some(kept))
    }

    /// Resolves once every cache has completed its first list.
    pub async fn wait_until_ready(&self) {
        for cache in self.caches.values() {
            cache.wait_until_ready().await;
        }
    }
}

fn api_for(client: &Client, kind: ChildKind, namespace: &str) -> Api<DynamicObject> {
    let ar = kind.api_resource();
    if kind.is_cluster_scoped() {
        Api::all_with(client.clone(), &ar)
    } else {
        Api::namespaced_with(client.clone(), namespace, &ar)
    }
}

fn apply_params() -> PatchParams {
    let mut params = PatchParams::apply(FIELD_MANAGER).force();
    params.field_validation = Some(ValidationDirective::Strict);
    params
}

/// Applies `child` unless it is already as desired: trusted from its cached metadata when
/// verified before and untouched since, otherwise read in full and compared.
pub async fn apply(
    client: &Client,
    stores: &ChildStores,
    metrics: &Metrics,
    namespace: &str,
    child: &Child,
) -> Result<Applied, kube::Error> {
    let (object, hash) = drift::with_hash(child.object.clone());
    let cache = stores.cache(child.kind);
    let key = cache.key(Some(namespace), &child.name);
    let cached = cache.get(&key);
    let api = api_for(client, child.kind, namespace);
    let verified = cache.verified(&key);
    let mut exists = cached.is_some();
    match drift::check(
        cached.as_ref().map(|o| &o.marks),
        &hash,
        verified.as_deref(),
    ) {
        Check::Trusted => return Ok(Applied::Unchanged),
        Check::Suspect => {
            metrics.read(&format!("{:?}", child.kind), "verify");
            let actual = api.get_opt(&child.name).await?;
            exists = actual.is_some();
            if let Some(actual) = actual {
                let owned = drift::owned_fields(&actual.metadata, FIELD_MANAGER);
                let value = serde_json::to_value(&actual).unwrap_or(Value::Null);
                // As desired but owned by nobody (managedFields reset): applying once takes
                // the fields back, so that a later edit shows in the digest again.
                if owned.is_some() && !drift::needs_apply(&object, &hash, Some(&value)) {
                    cache.set_verified(&key, owned);
                    return Ok(Applied::Unchanged);
                }
            }
        }
        Check::Missing | Check::Stale => {}
    }
    let applied = api
        .patch(&child.name, &apply_params(), &Patch::Apply(&object))
        .await?;
    metrics.write(&format!("{:?}", child.kind), "apply");
    cache.set_verified(&key, drift::owned_fields(&applied.metadata, FIELD_MANAGER));
    Ok(if exists {
        Applied::Updated
    } else {
        Applied::Created
    })
}

/// Deletes an object a disabled feature had created, if the cache shows it exists.
/// Returns whether a delete was sent.
pub async fn remove(
    client: &Client,
    stores: &ChildStores,
    metrics: &Metrics,
    namespace: &str,
    kind: ChildKind,
    name: &str,
) -> Result<bool, kube::Error> {
    if stores.get(kind, namespace, name).is_none() {
        return Ok(false);
    }
    let deleted = api_for(client, kind, namespace)
        .delete(name, &DeleteParams::background())
        .await;
    let removed = unless_gone(deleted)?;
    if removed {
        metrics.write(&format!("{kind:?}"), "delete");
        let cache = stores.cache(kind);
        cache.forget(&cache.key(Some(namespace), name));
    }
    Ok(removed)
}

/// Whether a delete went through: `Ok(false)` when the object was already gone (404).
pub fn unless_gone<T>(deleted: Result<T, kube::Error>) -> Result<bool, kube::Error> {
    match deleted {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(false),
        Err(err) => Err(err),
    }
}

/// Keeps a stream alive for its side effects (filling a store) when nothing else polls it.
pub fn drive(stream: impl Stream + Send + 'static) {
    tokio::spawn(stream.for_each(|_| async {}));
}
