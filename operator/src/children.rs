//! Reading and writing the host objects a VirtualCluster owns. Reads come from watch caches
//! (one reflector per kind, filtered to operator-made objects); writes are server-side applies
//! with one field manager, sent only when [`drift::needs_apply`] says so.

use std::{collections::HashMap, sync::Arc};

use futures::{Stream, StreamExt};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, DynamicObject, Patch, PatchParams, TypeMeta, ValidationDirective},
    runtime::{
        WatchStreamExt,
        reflector::{self, ObjectRef, Store},
        watcher,
    },
};
use serde_json::Value;
use vnest_crds::meta;

use crate::{
    desired::{Child, ChildKind},
    drift,
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

/// Watch caches of the operator-made objects of every [`ChildKind`].
#[derive(Clone)]
pub struct ChildStores {
    stores: Arc<HashMap<ChildKind, Store<DynamicObject>>>,
}

/// The label selector matching objects the operator made.
pub fn managed_selector() -> String {
    format!("{}={}", meta::LABEL_MANAGED_BY, meta::OPERATOR_MANAGER)
}

type TriggerStream = futures::stream::BoxStream<'static, Result<DynamicObject, watcher::Error>>;

impl ChildStores {
    /// Starts a reflector per kind over `namespace` (or all). Returns the stores and, per kind,
    /// the stream that must be polled to keep the store filled (the controller polls it as an
    /// `owns` trigger).
    pub fn start(
        client: &Client,
        namespace: Option<&str>,
    ) -> (Self, Vec<(ChildKind, TriggerStream)>) {
        let mut stores = HashMap::new();
        let mut streams = Vec::new();
        for kind in ChildKind::ALL {
            let ar = kind.api_resource();
            let api: Api<DynamicObject> = match namespace {
                Some(ns) if !kind.is_cluster_scoped() => {
                    Api::namespaced_with(client.clone(), ns, &ar)
                }
                _ => Api::all_with(client.clone(), &ar),
            };
            let writer = reflector::store::Writer::<DynamicObject>::new(ar.clone());
            let reader = writer.as_reader();
            let config = watcher::Config::default()
                .labels(&managed_selector())
                .any_semantic();
            // List items come without apiVersion/kind (watch events carry them); restore
            // them, or every child would look drifted to a freshly started operator.
            let types = TypeMeta {
                api_version: ar.api_version.clone(),
                kind: ar.kind.clone(),
            };
            let stream = watcher(api, config)
                .default_backoff()
                .modify(move |o| {
                    o.managed_fields_mut().clear();
                    o.types = Some(types.clone());
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
            },
            streams,
        )
    }

    pub fn store(&self, kind: ChildKind) -> &Store<DynamicObject> {
        &self.stores[&kind]
    }

    pub fn get(
        &self,
        kind: ChildKind,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Arc<DynamicObject>> {
        let mut key = ObjectRef::new_with(name, kind.api_resource());
        if let Some(ns) = namespace.filter(|_| !kind.is_cluster_scoped()) {
            key = key.within(ns);
        }
        self.store(kind).get(&key)
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

/// Applies `child` unless the cache shows it is already as desired.
pub async fn apply(
    client: &Client,
    stores: &ChildStores,
    metrics: &Metrics,
    namespace: &str,
    child: &Child,
) -> Result<Applied, kube::Error> {
    let (object, hash) = drift::with_hash(child.object.clone());
    let actual = stores
        .get(child.kind, Some(namespace), &child.name)
        .map(|o| serde_json::to_value(o.as_ref()).unwrap_or(Value::Null));
    if !drift::needs_apply(&object, &hash, actual.as_ref()) {
        return Ok(Applied::Unchanged);
    }
    api_for(client, child.kind, namespace)
        .patch(&child.name, &apply_params(), &Patch::Apply(&object))
        .await?;
    metrics.write(&format!("{:?}", child.kind), "apply");
    Ok(if actual.is_some() {
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
    match api_for(client, kind, namespace)
        .delete(name, &DeleteParams::background())
        .await
    {
        Ok(_) => {
            metrics.write(&format!("{kind:?}"), "delete");
            Ok(true)
        }
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(false),
        Err(err) => Err(err),
    }
}

/// Keeps a stream alive for its side effects (filling a store) when nothing else polls it.
pub fn drive(stream: impl Stream + Send + 'static) {
    tokio::spawn(stream.for_each(|_| async {}));
}
