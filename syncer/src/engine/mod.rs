//! The one sync engine: for a resource type, watch the virtual cluster and the host
//! namespace, queue the key of every virtual object either side touches, and reconcile each
//! key level-triggered from the two caches — the same inputs always give the same host
//! object, and nothing is written when nothing differs. What differs per type lives in a
//! small [`Syncer`]. The loop that feeds and drains the queue is in [`runner`], the
//! reconcile of one key in `reconcile`, name conflicts between virtual objects in [`conflict`].

pub mod conflict;
pub mod queue;
mod reconcile;
pub mod referrals;
pub mod runner;

use std::{
    collections::HashSet,
    fmt::Debug,
    future::Future,
    sync::{
        Mutex,
        atomic::{AtomicUsize, Ordering},
    },
};

use k8s_openapi::NamespaceResourceScope;
use kube::{
    Api, Client, Resource, ResourceExt,
    api::{DeleteParams, Patch, PatchParams},
    runtime::{
        events::{Event as KubeEvent, EventType, Recorder},
        reflector::{self},
    },
};
use serde::{Serialize, de::DeserializeOwned};
use vnest_crds::{
    SyncerConfig,
    containment::covers,
    meta::{ANNOTATION_OBJECT_NAME, ANNOTATION_OBJECT_NAMESPACE},
};

use crate::{metrics::Metrics, translate::Target};

use crate::cache::Cache;
pub use conflict::{OwnerOf, PodReference, conflict_note, conflicted_reference, name_conflict};
pub use queue::{Key, Queue};
pub use referrals::Referrals;
pub use runner::{caches_synced, run, work};

/// Field manager of every host write.
pub const FIELD_MANAGER: &str = "vnest-syncer";

/// What every synced object is: cached, logged, (de)serialized and shared by the workers.
pub trait Object: Clone + Debug + Serialize + DeserializeOwned + Send + Sync + 'static {}

impl<T: Clone + Debug + Serialize + DeserializeOwned + Send + Sync + 'static> Object for T {}

/// Server-side applies `body` as object `name` of `api`, as [`FIELD_MANAGER`], forced: the
/// fields the syncer sets are its own.
pub async fn apply<K, B>(api: &Api<K>, name: &str, body: &B) -> kube::Result<K>
where
    K: Clone + DeserializeOwned + Debug,
    B: Serialize + Debug,
{
    let params = PatchParams::apply(FIELD_MANAGER).force();
    api.patch(name, &params, &Patch::Apply(body)).await
}

/// As [`apply`], on the status subresource.
pub async fn apply_status<K, B>(api: &Api<K>, name: &str, body: &B) -> kube::Result<K>
where
    K: Clone + DeserializeOwned + Debug,
    B: Serialize + Debug,
{
    let params = PatchParams::apply(FIELD_MANAGER).force();
    api.patch_status(name, &params, &Patch::Apply(body)).await
}

/// Why the syncer is not ready (`/readyz` answers with it).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NotReady {
    /// It may not sync (yet), and why: custom resources not resolved.
    #[error("{0}")]
    Blocked(String),
    #[error("caches not synced")]
    CachesNotSynced,
}

/// Everything a reconcile may use: both clients, where host copies go, the configuration.
pub struct Ctx {
    pub host: Client,
    pub virt: Client,
    pub target: Target,
    pub config: SyncerConfig,
    /// Virtual namespaces to sync; empty means all.
    pub virtual_namespaces: Vec<String>,
    pub recorder: Recorder,
    pub metrics: Metrics,
    /// Engines whose caches have not finished their first list yet.
    pub unsynced: AtomicUsize,
    /// Why the syncer does not sync (yet): custom resources not resolved.
    pub blocked: Mutex<Option<String>>,
    /// Tenant writes the proxy is writing through right now, as (resource, namespace,
    /// name): the to-host sync leaves those objects to it rather than race it to the host.
    pub writing_through: Mutex<HashSet<(String, String, String)>>,
}

impl Ctx {
    /// Ready once every engine's caches finished their first list; else why not.
    pub fn readiness(&self) -> Result<(), NotReady> {
        if let Some(why) = self.blocked.lock().expect("not poisoned").as_ref() {
            return Err(NotReady::Blocked(why.clone()));
        }
        match self.unsynced.load(Ordering::SeqCst) {
            0 => Ok(()),
            _ => Err(NotReady::CachesNotSynced),
        }
    }

    /// Whether virtual namespace `namespace` is one this syncer syncs.
    pub fn namespace_synced(&self, namespace: &str) -> bool {
        self.virtual_namespaces.is_empty() || self.virtual_namespaces.iter().any(|n| n == namespace)
    }

    /// Publishes a Warning event on virtual object `obj`.
    pub async fn warn<K: Resource<DynamicType = ()>>(&self, obj: &K, reason: &str, note: String) {
        self.warn_on(obj.object_ref(&()), reason, note).await;
    }

    /// Publishes a Warning event on the virtual object `reference` names.
    pub async fn warn_on(
        &self,
        reference: k8s_openapi::api::core::v1::ObjectReference,
        reason: &str,
        note: String,
    ) {
        let event = KubeEvent {
            type_: EventType::Warning,
            reason: reason.to_string(),
            note: Some(note),
            action: "Sync".to_string(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&event, &reference).await {
            tracing::warn!(error = %e, "failed to publish event");
        }
    }
}

/// What to do with a virtual object.
pub enum Decision<K> {
    /// Make the host copy look like this.
    Sync(K),
    /// Not synced (e.g. a ConfigMap no pod uses): no host copy.
    Skip,
    /// Not allowed: no host copy, and a Warning event with this reason and note.
    Refuse { reason: &'static str, note: String },
}

/// When a synced host copy disappears while its virtual object remains.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostGone {
    /// Someone else deleted it: make it again.
    Recreate,
    /// It ended on the host (a pod that ran): end the virtual object too.
    DeleteVirtual,
}

/// A type of object the syncer copies to the host: only what differs from the others.
pub trait Syncer: Send + Sync + 'static {
    type K: Resource<DynamicType = (), Scope = NamespaceResourceScope> + Object;
    /// The kind, as written into `vcluster.loft.sh/object-kind` and metrics.
    const KIND: &'static str;

    /// The host copy `virt` should have.
    fn desired(
        &self,
        ctx: &Ctx,
        virt: &Self::K,
    ) -> impl Future<Output = anyhow::Result<Decision<Self::K>>> + Send;

    /// Whether `actual` must be written to become `desired`.
    fn needs_update(&self, actual: &Self::K, desired: &Self::K) -> bool {
        let to_json = |k: &Self::K| serde_json::to_value(k).unwrap_or_default();
        !covers(&to_json(actual), &to_json(desired))
    }

    /// The object to write the host copy with instead of `desired` (on creation, `actual`
    /// `None`, or on an update of `actual`), when there is a preference the host may refuse
    /// as invalid (a Service asks for its virtual address); after such a refusal `desired`
    /// is written.
    fn preferred_body(
        &self,
        _ctx: &Ctx,
        _virt: &Self::K,
        _desired: &Self::K,
        _actual: Option<&Self::K>,
    ) -> Option<Self::K> {
        None
    }

    /// The object applied to update `actual` (immutable kinds keep their actual spec).
    fn update_body(&self, _actual: &Self::K, desired: Self::K) -> Self::K {
        desired
    }

    /// Brings the virtual object up to date with its host copy (status, host-owned fields).
    fn back(
        &self,
        _ctx: &Ctx,
        _virt: &Self::K,
        _host: &Self::K,
    ) -> impl Future<Output = anyhow::Result<()>> + Send {
        async { Ok(()) }
    }

    /// Finishes a virtual object being deleted once its host copy is gone (claims drop the
    /// protection finalizer the host's copy already honoured).
    fn finish(
        &self,
        _ctx: &Ctx,
        _virt: &Self::K,
    ) -> impl Future<Output = anyhow::Result<()>> + Send {
        async { Ok(()) }
    }

    /// Records on virtual object `virt`, whose host copy is gone, how it ended, before the
    /// syncer deletes it (a pod that had not ended becomes Failed, so a controller's
    /// finalizer on it, such as a Job's, can go).
    fn ended(
        &self,
        _ctx: &Ctx,
        _virt: &Self::K,
    ) -> impl Future<Output = anyhow::Result<()>> + Send {
        async { Ok(()) }
    }

    fn host_gone(&self, _virt: &Self::K) -> HostGone {
        HostGone::Recreate
    }

    /// With the virtual object gone and its host copy still there: puts back a virtual object
    /// the syncer itself removed and had not recreated yet (a crash mid-replacement), and says
    /// whether it did; the host copy is otherwise deleted as an orphan.
    fn restore_virtual(
        &self,
        _ctx: &Ctx,
        _host: &Self::K,
    ) -> impl Future<Output = anyhow::Result<bool>> + Send {
        async { Ok(false) }
    }

    /// Drops from a host copy, before it is cached, what no sync reads from the cache (pods
    /// keep of their spec only the node and the fields an update may change). A kind that
    /// trims is read live before an update, which is built from the whole object.
    const TRIM_HOST: Option<fn(&mut Self::K)> = None;

    /// How a host copy is deleted (pods pass on the virtual grace period).
    fn delete_params(&self, _virt: Option<&Self::K>) -> DeleteParams {
        DeleteParams::default()
    }
}

/// Caches of one type on both sides; make them first so other syncers can read them.
pub struct Watches<K: Resource<DynamicType = ()> + Clone + 'static> {
    pub virt: Cache<K>,
    pub host: Cache<K>,
    virt_writer: reflector::store::Writer<K>,
    host_writer: reflector::store::Writer<K>,
}

impl<K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static> Default for Watches<K> {
    fn default() -> Self {
        let (virt, virt_writer) = crate::cache::store();
        let (host, host_writer) = crate::cache::store();
        Watches {
            virt,
            host,
            virt_writer,
            host_writer,
        }
    }
}

fn key_of<K: Resource>(obj: &K) -> Key {
    (obj.namespace().unwrap_or_default(), obj.name_any())
}

/// The virtual key a host copy came from, read from its annotations.
pub(crate) fn virtual_key<K: Resource>(host: &K) -> Option<Key> {
    let a = host.annotations();
    Some((
        a.get(ANNOTATION_OBJECT_NAMESPACE)?.clone(),
        a.get(ANNOTATION_OBJECT_NAME)?.clone(),
    ))
}

pub fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.is_not_found())
}
