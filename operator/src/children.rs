//! Reading and writing the host objects a VirtualCluster owns. Reads come from metadata-only
//! watch caches (one per kind, filtered to operator-made objects; see [`drift`] for how drift
//! shows in metadata); a child is read in full only when its metadata says it may have
//! drifted, or for the few fields a reconcile needs ([`content`]), and then only after it
//! changed. Writes are server-side applies with one field manager.

use std::{
    collections::{BTreeMap, HashMap},
    sync::{Arc, Mutex},
};

use futures::{Stream, StreamExt, TryStreamExt};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, DynamicObject, Patch, PatchParams, ValidationDirective},
    core::PartialObjectMeta,
    runtime::{
        WatchStreamExt,
        reflector::{self, ObjectRef, Store},
        watcher,
    },
};
use serde_json::Value;
use vnest_crds::meta;

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

/// A child's metadata as cached: labels, annotations, owner references, and of managedFields
/// only the digest of the operator's entry.
pub type ChildMeta = PartialObjectMeta<DynamicObject>;

/// One child: its kind, namespace (empty when cluster-scoped) and name.
type Key = (ChildKind, String, String);

/// Metadata caches of the operator-made objects of every [`ChildKind`], with what this process
/// learnt about each child beyond its metadata.
#[derive(Clone)]
pub struct ChildStores {
    stores: Arc<HashMap<ChildKind, Store<ChildMeta>>>,
    /// The [`drift::owned_fields`] digest each child had when last applied or read in full and
    /// found as desired.
    verified: Arc<Mutex<HashMap<Key, String>>>,
    /// [`content::keep`] of each child read for its content, with the resourceVersion read.
    content: Arc<Mutex<HashMap<Key, (String, Value)>>>,
}

/// Objects per page of a cache's list, the first and each re-list after a watch desync. The
/// lists are paged consistent reads rather than `resourceVersion=0`, which the API server
/// answers from its watch cache in one piece whatever the limit: a page is held whole, with
/// every object's managedFields, until the cache has compacted it, and unpaged lists of every
/// child kind were 26 of the 50 MiB a restarted operator held at 300 VirtualClusters.
pub const LIST_PAGE_SIZE: u32 = 100;

/// The label selector matching objects the operator made.
pub fn managed_selector() -> String {
    format!("{}={}", meta::LABEL_MANAGED_BY, meta::OPERATOR_MANAGER)
}

/// The labels a cached child keeps: those that map a cluster-scoped child to its
/// VirtualCluster (a namespaced one maps through its owner reference).
fn cached_labels(kind: ChildKind) -> &'static [&'static str] {
    if kind.is_cluster_scoped() {
        &[
            meta::LABEL_VIRTUAL_CLUSTER,
            meta::LABEL_VIRTUAL_CLUSTER_NAMESPACE,
        ]
    } else {
        &[]
    }
}

/// Reduces a child's metadata to what is read from its cache: the applied-hash annotation,
/// the digest of the operator's managedFields entry ([`drift::compact_managed_fields`]), the
/// owner references and the labels of [`cached_labels`]. A map left empty is dropped, as
/// each label or annotation map costs a B-tree node (about 0.5 KiB) however few entries it
/// holds.
pub fn compact(meta: &mut ObjectMeta, kind: ChildKind) {
    drift::compact_managed_fields(meta, FIELD_MANAGER);
    let labels = cached_labels(kind);
    retain_keys(&mut meta.labels, |key| labels.contains(&key));
    retain_keys(&mut meta.annotations, |key| {
        key == meta::ANNOTATION_APPLIED_HASH
    });
}

fn retain_keys(map: &mut Option<BTreeMap<String, String>>, keep: impl Fn(&str) -> bool) {
    if let Some(entries) = map {
        entries.retain(|key, _| keep(key));
        if entries.is_empty() {
            *map = None;
        }
    }
}

type TriggerStream = futures::stream::BoxStream<'static, Result<ChildMeta, watcher::Error>>;

fn key(kind: ChildKind, namespace: Option<&str>, name: &str) -> Key {
    let namespace = namespace.filter(|_| !kind.is_cluster_scoped());
    (
        kind,
        namespace.unwrap_or_default().to_string(),
        name.to_string(),
    )
}

impl ChildStores {
    /// Starts a metadata reflector per kind over `namespace` (or all). Returns the stores and,
    /// per kind, the stream that must be polled to keep the store filled (the controller polls
    /// it as an `owns` trigger).
    pub fn start(
        client: &Client,
        namespace: Option<&str>,
    ) -> (Self, Vec<(ChildKind, TriggerStream)>) {
        let mut stores = HashMap::new();
        let mut streams = Vec::new();
        let this = ChildStores {
            stores: Arc::default(),
            verified: Arc::default(),
            content: Arc::default(),
        };
        for kind in ChildKind::ALL {
            let ar = kind.api_resource();
            let api: Api<ChildMeta> = match namespace {
                Some(ns) if !kind.is_cluster_scoped() => {
                    Api::namespaced_with(client.clone(), ns, &ar)
                }
                _ => Api::all_with(client.clone(), &ar),
            };
            let writer = reflector::store::Writer::<ChildMeta>::new(ar.clone());
            let reader = writer.as_reader();
            let config = watcher::Config::default()
                .labels(&managed_selector())
                .page_size(LIST_PAGE_SIZE);
            let forget = this.clone();
            let stream = watcher(api, config)
                .default_backoff()
                .modify(move |o| compact(&mut o.metadata, kind))
                .map_ok(move |event| {
                    if let watcher::Event::Delete(o) = &event {
                        forget.forget(&key(kind, o.namespace().as_deref(), &o.name_any()));
                    }
                    event
                })
                .reflect(writer)
                // Deletions too: a child someone deleted must trigger its owner's reconcile,
                // not wait for an unrelated event or the periodic resync.
                .touched_objects();
            stores.insert(kind, reader);
            streams.push((kind, stream.boxed()));
        }
        (
            ChildStores {
                stores: Arc::new(stores),
                ..this
            },
            streams,
        )
    }

    pub fn store(&self, kind: ChildKind) -> &Store<ChildMeta> {
        &self.stores[&kind]
    }

    pub fn get(
        &self,
        kind: ChildKind,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Arc<ChildMeta>> {
        let mut key = ObjectRef::new_with(name, kind.api_resource());
        if let Some(ns) = namespace.filter(|_| !kind.is_cluster_scoped()) {
            key = key.within(ns);
        }
        self.store(kind).get(&key)
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
        let Some(cached) = self.get(kind, Some(namespace), name) else {
            return Ok(None);
        };
        let key = key(kind, Some(namespace), name);
        let version = cached.resource_version().unwrap_or_default();
        if let Some((read_at, kept)) = self.content.lock().unwrap().get(&key)
            && *read_at == version
        {
            return Ok(Some(kept.clone()));
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
        self.content
            .lock()
            .unwrap()
            .insert(key, (version, kept.clone()));
        Ok(Some(kept))
    }

    fn verified(&self, key: &Key) -> Option<String> {
        self.verified.lock().unwrap().get(key).cloned()
    }

    fn set_verified(&self, key: Key, digest: Option<String>) {
        let mut verified = self.verified.lock().unwrap();
        match digest {
            Some(digest) => verified.insert(key, digest),
            None => verified.remove(&key),
        };
    }

    fn forget(&self, key: &Key) {
        self.verified.lock().unwrap().remove(key);
        self.content.lock().unwrap().remove(key);
    }

    /// Resolves once every cache has completed its first list.
    pub async fn wait_until_ready(&self) {
        for store in self.stores.values() {
            let _ = store.wait_until_ready().await;
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
    let key = key(child.kind, Some(namespace), &child.name);
    let cached = stores.get(child.kind, Some(namespace), &child.name);
    let api = api_for(client, child.kind, namespace);
    let verified = stores.verified(&key);
    let mut exists = cached.is_some();
    match drift::check(
        cached.as_ref().map(|o| &o.metadata),
        &hash,
        verified.as_deref(),
        FIELD_MANAGER,
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
                    stores.set_verified(key, owned);
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
    stores.set_verified(key, drift::owned_fields(&applied.metadata, FIELD_MANAGER));
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
    if stores.get(kind, Some(namespace), name).is_none() {
        return Ok(false);
    }
    let deleted = api_for(client, kind, namespace)
        .delete(name, &DeleteParams::background())
        .await;
    let removed = unless_gone(deleted)?;
    if removed {
        metrics.write(&format!("{kind:?}"), "delete");
        stores.forget(&key(kind, Some(namespace), name));
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

#[cfg(test)]
mod tests {
    use super::*;

    fn cached(labels: &[(&str, &str)], annotations: &[(&str, &str)]) -> ObjectMeta {
        let map = |pairs: &[(&str, &str)]| {
            Some(
                pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            )
        };
        ObjectMeta {
            name: Some("vc".into()),
            labels: map(labels),
            annotations: map(annotations),
            ..Default::default()
        }
    }

    const LABELS: [(&str, &str); 4] = [
        (meta::LABEL_MANAGED_BY, meta::OPERATOR_MANAGER),
        (meta::LABEL_VIRTUAL_CLUSTER, "vc"),
        (meta::LABEL_VIRTUAL_CLUSTER_NAMESPACE, "team-a"),
        (meta::LABEL_APP, "vcluster"),
    ];

    /// A cached child keeps its applied hash and, when cluster-scoped, the two labels that
    /// name its VirtualCluster; every other label and annotation goes.
    #[test]
    fn compacting_keeps_only_what_the_cache_is_read_for() {
        let annotations = [
            (meta::ANNOTATION_APPLIED_HASH, "abc"),
            ("deployment.kubernetes.io/revision", "3"),
        ];
        let mut namespaced = cached(&LABELS, &annotations);
        compact(&mut namespaced, ChildKind::StatefulSet);
        assert_eq!(namespaced.labels, None);
        assert_eq!(
            namespaced.annotations,
            cached(&[], &[(meta::ANNOTATION_APPLIED_HASH, "abc")]).annotations
        );
        let mut cluster_scoped = cached(&LABELS, &annotations);
        compact(&mut cluster_scoped, ChildKind::ClusterRole);
        assert_eq!(cluster_scoped.labels, cached(&LABELS[1..3], &[]).labels);
        let mut unannotated = cached(&[], &[("other", "x")]);
        compact(&mut unannotated, ChildKind::Service);
        assert_eq!(unannotated.annotations, None);
    }
}
