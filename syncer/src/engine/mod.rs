//! The one sync engine: for a resource type, watch the virtual cluster and the host
//! namespace, queue the key of every virtual object either side touches, and reconcile each
//! key level-triggered from the two caches — the same inputs always give the same host
//! object, and nothing is written when nothing differs. What differs per type lives in a
//! small [`Syncer`].

pub mod queue;

use std::{
    collections::HashSet,
    fmt::Debug,
    future::Future,
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use anyhow::Context as _;
use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::NamespaceResourceScope;
use kube::{
    Api, Client, Resource, ResourceExt,
    api::{DeleteParams, Patch, PatchParams},
    runtime::{
        events::{Event as KubeEvent, EventType, Recorder},
        reflector::{self, ObjectRef, Store, reflector},
        watcher,
    },
};
use serde::{Serialize, de::DeserializeOwned};
use vnest_crds::{
    SyncerConfig,
    containment::covers,
    meta::{ANNOTATION_OBJECT_NAME, ANNOTATION_OBJECT_NAMESPACE, ANNOTATION_OBJECT_UID},
    translate::managed_by_selector,
};

use crate::{cache, metrics::Metrics, translate::Target};
pub use queue::{Key, Queue};

/// Field manager of every host write.
pub const FIELD_MANAGER: &str = "vnest-syncer";
/// Workers per resource type: reconciles mostly wait on the API, so more than cores.
const WORKERS: usize = 16;
/// Every key is reconciled again this often, whatever the watches say.
const RESYNC: Duration = Duration::from_secs(300);

/// Waits for the first list of both caches of a `kind`, then counts its engine as synced
/// (`/readyz` waits for every engine).
pub async fn caches_synced<K>(ctx: &Ctx, kind: &str, virt: &Store<K>, host: &Store<K>)
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    let _ = futures::join!(virt.wait_until_ready(), host.wait_until_ready());
    ctx.unsynced.fetch_sub(1, Ordering::SeqCst);
    tracing::info!(kind, virt = virt.len(), host = host.len(), "caches synced");
}

/// One worker of a `kind`: reconciles the keys `queue` hands out, one at a time, for ever,
/// recording queue wait, reconcile time and failures.
pub async fn work<F, Fut>(ctx: &Ctx, queue: &Queue, kind: &str, reconcile: F)
where
    F: Fn(Key) -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    let metrics = &ctx.metrics;
    loop {
        let (key, waited) = queue.pop().await;
        metrics
            .queue_wait
            .with_label_values(&[kind])
            .observe(waited.as_secs_f64());
        let start = std::time::Instant::now();
        let result = reconcile(key.clone()).await;
        metrics
            .reconcile_duration
            .with_label_values(&[kind])
            .observe(start.elapsed().as_secs_f64());
        if let Err(e) = &result {
            metrics.reconcile_errors.with_label_values(&[kind]).inc();
            tracing::warn!(kind, namespace = %key.0, name = %key.1, error = format!("{e:#}"), "reconcile failed");
        }
        queue.done(key, result.is_ok());
    }
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
    pub fn readiness(&self) -> Result<(), String> {
        if let Some(why) = self.blocked.lock().expect("not poisoned").as_ref() {
            return Err(why.clone());
        }
        match self.unsynced.load(Ordering::SeqCst) {
            0 => Ok(()),
            _ => Err("caches not synced".into()),
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
    type K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + Debug
        + Serialize
        + DeserializeOwned
        + Send
        + Sync
        + 'static;
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

    /// How a host copy is deleted (pods pass on the virtual grace period).
    fn delete_params(&self, _virt: Option<&Self::K>) -> DeleteParams {
        DeleteParams::default()
    }
}

/// Caches of one type on both sides; make them first so other syncers can read them.
pub struct Watches<K: Resource<DynamicType = ()> + Clone + 'static> {
    pub virt: Store<K>,
    pub host: Store<K>,
    virt_writer: reflector::store::Writer<K>,
    host_writer: reflector::store::Writer<K>,
}

impl<K: Resource<DynamicType = ()> + Clone + 'static> Default for Watches<K> {
    fn default() -> Self {
        let (virt, virt_writer) = reflector::store();
        let (host, host_writer) = reflector::store();
        Watches {
            virt,
            host,
            virt_writer,
            host_writer,
        }
    }
}

/// More keys to queue when a virtual object changes (pods → the ConfigMaps they use).
pub type Follower<K> = (Queue, fn(&K) -> Vec<Key>);

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

/// The other virtual object a host copy belongs to, when its annotations name one that is
/// not `key`: two virtual names translate to one host name (`a-x-b` in `c`, `a` in `b-x-c`).
/// The first owner keeps the host name; `key` is a name conflict until that copy is gone.
/// Copies without the annotations (never written by this syncer's engine) conflict with none.
pub fn name_conflict<K: Resource>(key: &Key, host: &K) -> Option<Key> {
    virtual_key(host).filter(|owner| owner != key)
}

/// The note of a `NameConflict` event on `later`, naming both virtual objects and the host name.
pub fn conflict_note(kind: &str, later: &Key, owner: &Key, host_name: &str) -> String {
    format!(
        "not synced to the host: {kind} {}/{} and {}/{} both translate to host name {host_name}; \
         {}/{} had it first and keeps it (rename one of them)",
        later.0, later.1, owner.0, owner.1, owner.0, owner.1
    )
}

/// The first of `refs` whose host copy (per `owner_of`) belongs to another virtual object,
/// with that owner: a pod using it would mount another namespace's data.
pub fn conflicted_reference(
    refs: &[Key],
    owner_of: impl Fn(&Key) -> Option<Key>,
) -> Option<(Key, Key)> {
    refs.iter()
        .find_map(|r| owner_of(r).filter(|o| o != r).map(|o| (r.clone(), o)))
}

/// The owner of the host copy of a virtual key, if any.
pub type OwnerOf = Box<dyn Fn(&Key) -> Option<Key> + Send + Sync>;

/// A kind of object pods reference: its name, the keys a pod uses, and the owner of the host
/// copy of a key (from that kind's host cache), to refuse pods using a conflicted name.
pub struct PodReference {
    pub kind: &'static str,
    pub used_by: fn(&k8s_openapi::api::core::v1::Pod) -> Vec<Key>,
    pub owner_of: OwnerOf,
}

impl PodReference {
    /// Reads owners from `host`, the host cache of the kind's engine.
    pub fn new<K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static>(
        kind: &'static str,
        used_by: fn(&k8s_openapi::api::core::v1::Pod) -> Vec<Key>,
        host: Store<K>,
        target: Target,
    ) -> Self {
        let owner_of = move |k: &Key| {
            let name = target.host_name(&k.1, &k.0);
            let copy = host.get(&ObjectRef::new(&name).within(&target.host_namespace))?;
            virtual_key(copy.as_ref())
        };
        PodReference {
            kind,
            used_by,
            owner_of: Box::new(owner_of),
        }
    }
}

pub fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.is_not_found())
}

struct Engine<S: Syncer> {
    syncer: S,
    ctx: Arc<Ctx>,
    virt: Store<S::K>,
    host: Store<S::K>,
    queue: Queue,
    /// Refusals already reported, so a level-triggered loop does not repeat its event.
    reported: Mutex<HashSet<(String, String)>>,
}

/// Runs the engine for `syncer` until the watches end.
pub async fn run<S: Syncer>(
    syncer: S,
    ctx: Arc<Ctx>,
    watches: Watches<S::K>,
    queue: Queue,
    followers: Vec<Follower<S::K>>,
) {
    // The error series exists from the start (at 0), so alert rules see the first failure.
    ctx.metrics.reconcile_errors.with_label_values(&[S::KIND]);
    let engine = Arc::new(Engine {
        syncer,
        ctx: ctx.clone(),
        virt: watches.virt.clone(),
        host: watches.host.clone(),
        queue: queue.clone(),
        reported: Mutex::default(),
    });
    let host_ns = ctx.target.host_namespace.clone();
    let virt_events = cache::watch(
        Api::<S::K>::all(ctx.virt.clone()),
        watcher::Config::default(),
    )
    .try_filter({
        let ctx = ctx.clone();
        move |ev| {
            let keep = match ev {
                watcher::Event::Apply(o)
                | watcher::Event::InitApply(o)
                | watcher::Event::Delete(o) => {
                    ctx.namespace_synced(&o.namespace().unwrap_or_default())
                }
                _ => true,
            };
            futures::future::ready(keep)
        }
    });
    let virt_events = reflector(watches.virt_writer, virt_events).map(|e| (true, e));
    let host_config = watcher::Config::default().labels(&managed_by_selector(&ctx.target.vc));
    let host_events = reflector(
        watches.host_writer,
        cache::watch(
            Api::<S::K>::namespaced(ctx.host.clone(), &host_ns),
            host_config,
        ),
    )
    .map(|e| (false, e));
    let (virt_store, host_store, target) = (
        watches.virt.clone(),
        watches.host.clone(),
        ctx.target.clone(),
    );
    let events = stream::select(virt_events, host_events).for_each(move |(is_virt, event)| {
        let obj = match event {
            Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o) | watcher::Event::Delete(o)) => o,
            // A re-list (after the API server or etcd restarted, or a watch expired) names
            // no object deleted while the watch was down: reconcile every key then, or a
            // host copy deleted in that gap stays missing until the next resync.
            Ok(watcher::Event::InitDone) => {
                push_every_key(&virt_store, &host_store, &queue);
                return futures::future::ready(());
            }
            Ok(_) => return futures::future::ready(()),
            Err(e) => {
                tracing::warn!(kind = S::KIND, virt = is_virt, error = %e, "watch failed; retrying");
                return futures::future::ready(());
            }
        };
        if is_virt {
            // A virtual object without a host copy yet goes first: creation latency is what
            // tenants feel, status follow-ups of earlier objects can wait.
            let key = key_of(&obj);
            let host_name = target.host_name(&key.1, &key.0);
            if host_store.get(&ObjectRef::new(&host_name).within(&target.host_namespace)).is_none() {
                queue.push_urgent(key);
            } else {
                queue.push(key);
            }
            for (q, keys) in &followers {
                keys(&obj).into_iter().for_each(|k| q.push(k));
            }
        } else if let Some(k) = virtual_key(&obj) {
            queue.push(k);
        }
        futures::future::ready(())
    });
    let watch_task = tokio::spawn(events);

    caches_synced(&ctx, S::KIND, &engine.virt, &engine.host).await;
    let resync = tokio::spawn({
        let engine = engine.clone();
        async move {
            loop {
                engine.push_all();
                tokio::time::sleep(RESYNC).await;
            }
        }
    });
    futures::future::join_all((0..WORKERS).map(|_| engine.clone().work())).await;
    resync.abort();
    watch_task.abort();
}

/// Queues the key of every virtual object and of every host copy's source.
fn push_every_key<K>(virt: &Store<K>, host: &Store<K>, queue: &Queue)
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    virt.state()
        .iter()
        .for_each(|o| queue.push(key_of(o.as_ref())));
    host.state()
        .iter()
        .filter_map(|o| virtual_key(o.as_ref()))
        .for_each(|k| queue.push(k));
}

impl<S: Syncer> Engine<S> {
    fn push_all(&self) {
        push_every_key(&self.virt, &self.host, &self.queue);
    }

    async fn work(self: Arc<Self>) {
        work(&self.ctx, &self.queue, S::KIND, |key| {
            let this = self.clone();
            async move { this.reconcile(&key).await }
        })
        .await
    }

    fn host_api(&self) -> Api<S::K> {
        Api::namespaced(self.ctx.host.clone(), &self.ctx.target.host_namespace)
    }

    fn count_write(&self) {
        self.ctx
            .metrics
            .host_writes
            .with_label_values(&[S::KIND])
            .inc();
    }

    async fn delete_host(&self, name: &str, virt: Option<&S::K>) -> anyhow::Result<()> {
        self.count_write();
        match self
            .host_api()
            .delete(name, &self.syncer.delete_params(virt))
            .await
        {
            Ok(_) => {
                tracing::info!(kind = S::KIND, host = name, "deleted host copy");
                Ok(())
            }
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(e).with_context(|| format!("failed to delete host {} {name}", S::KIND)),
        }
    }

    async fn delete_virtual(&self, virt: &S::K) -> anyhow::Result<()> {
        let api: Api<S::K> =
            Api::namespaced(self.ctx.virt.clone(), &virt.namespace().unwrap_or_default());
        match api
            .delete(&virt.name_any(), &DeleteParams::default().grace_period(0))
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(e).with_context(|| {
                format!("failed to delete virtual {} {}", S::KIND, virt.name_any())
            }),
        }
    }

    async fn apply(&self, body: &S::K) -> anyhow::Result<()> {
        self.count_write();
        let name = body.name_any();
        let api = self.host_api();
        let params = PatchParams::apply(FIELD_MANAGER).force();
        self.ctx
            .metrics
            .timed("host_apply", api.patch(&name, &params, &Patch::Apply(body)))
            .await
            .with_context(|| format!("failed to apply host {} {name}", S::KIND))?;
        tracing::info!(kind = S::KIND, host = %name, "applied host copy");
        Ok(())
    }

    fn virt_api(&self, namespace: &str) -> Api<S::K> {
        Api::namespaced(self.ctx.virt.clone(), namespace)
    }

    /// Whether the host copy belongs to a virtual object other than the live one, read live
    /// on both sides: the caches may trail a uid that was just adopted or recreated.
    async fn belongs_to_other(&self, key: &Key, host_name: &str) -> anyhow::Result<bool> {
        let virt = self
            .virt_api(&key.0)
            .get_opt(&key.1)
            .await
            .context("failed to read virtual object")?;
        let host = self
            .host_api()
            .get_opt(host_name)
            .await
            .context("failed to read host copy")?;
        Ok(match (virt, host) {
            (Some(v), Some(h)) => h.annotations().get(ANNOTATION_OBJECT_UID) != v.uid().as_ref(),
            _ => false,
        })
    }

    /// Whether the virtual object is really gone (not just missing from a trailing cache).
    async fn virtual_gone(&self, key: &Key) -> anyhow::Result<bool> {
        let live = self
            .virt_api(&key.0)
            .get_opt(&key.1)
            .await
            .context("failed to read virtual object")?;
        Ok(live.is_none())
    }

    /// Reports a refusal once per virtual uid and note, so a level-triggered loop does not
    /// repeat its event.
    async fn refuse(&self, virt: &S::K, uid: &str, reason: &str, note: String) {
        let first = self
            .reported
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert((uid.to_string(), note.clone()));
        if first {
            let key = key_of(virt);
            tracing::info!(kind = S::KIND, namespace = %key.0, name = %key.1, note, "refused");
            self.ctx.warn(virt, reason, note).await;
        }
    }

    async fn reconcile(&self, key: &Key) -> anyhow::Result<()> {
        let (namespace, name) = key;
        let host_name = self.ctx.target.host_name(name, namespace);
        let virt = self.virt.get(&ObjectRef::new(name).within(namespace));
        let host = self
            .host
            .get(&ObjectRef::new(&host_name).within(&self.ctx.target.host_namespace));
        let host_terminating = host
            .as_ref()
            .is_some_and(|h| h.meta().deletion_timestamp.is_some());
        // Only copies this syncer made are ever deleted: host controllers copy Service labels
        // (and so the managed-by marker) onto objects of their own, such as Endpoints.
        // Nor a copy that another virtual object of the same host name owns (a name conflict).
        let conflict = host.as_ref().and_then(|h| name_conflict(key, h.as_ref()));
        let deletable = conflict.is_none()
            && host.as_ref().is_some_and(|h| {
                h.meta().deletion_timestamp.is_none()
                    && h.annotations().contains_key(ANNOTATION_OBJECT_UID)
            });

        let Some(virt) = virt else {
            if let Some(h) = &host
                && self.syncer.restore_virtual(&self.ctx, h).await?
            {
                return Ok(());
            }
            if deletable && self.virtual_gone(key).await? {
                self.delete_host(&host_name, None).await?;
            }
            return Ok(());
        };
        if virt.meta().deletion_timestamp.is_some() {
            return match host {
                Some(_) if deletable => self.delete_host(&host_name, Some(&virt)).await,
                Some(_) => Ok(()),
                None if self.syncer.host_gone(&virt) == HostGone::DeleteVirtual => {
                    self.delete_virtual(&virt).await
                }
                None => self.syncer.finish(&self.ctx, &virt).await,
            };
        }
        let uid = virt.uid().unwrap_or_default();
        if let Some(owner) = conflict {
            // Neither applied (it would overwrite the owner's copy) nor deleted.
            let note = conflict_note(S::KIND, key, &owner, &host_name);
            self.refuse(virt.as_ref(), &uid, "NameConflict", note).await;
            return Ok(());
        }
        if let Some(h) = &host {
            let host_uid = h
                .annotations()
                .get(ANNOTATION_OBJECT_UID)
                .map(String::as_str);
            if host_uid != Some(uid.as_str())
                && deletable
                && self.belongs_to_other(key, &host_name).await?
            {
                tracing::info!(kind = S::KIND, host = %host_name, "host copy belongs to an older virtual object; replacing");
                return self.delete_host(&host_name, None).await;
            }
        }
        match self.syncer.desired(&self.ctx, &virt).await? {
            Decision::Skip => {
                if deletable {
                    self.delete_host(&host_name, None).await?;
                }
            }
            Decision::Refuse { reason, note } => {
                self.refuse(virt.as_ref(), &uid, reason, note).await;
                if deletable {
                    self.delete_host(&host_name, None).await?;
                }
            }
            Decision::Sync(desired) => match host {
                None if self.syncer.host_gone(&virt) == HostGone::DeleteVirtual => {
                    tracing::info!(
                        kind = S::KIND,
                        namespace,
                        name,
                        "host copy is gone; deleting the virtual object"
                    );
                    self.delete_virtual(&virt).await?;
                }
                None => self.apply(&desired).await?,
                Some(_) if host_terminating => {}
                Some(h) => {
                    // Labels are compared whole, so one the tenant removed goes from the host.
                    let labels_differ = h.labels() != desired.labels();
                    if labels_differ || self.syncer.needs_update(&h, &desired) {
                        self.apply(&self.syncer.update_body(&h, desired)).await?;
                    }
                    self.syncer.back(&self.ctx, &virt, &h).await?;
                }
            },
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;

    use super::*;

    fn key(ns: &str, name: &str) -> Key {
        (ns.to_string(), name.to_string())
    }

    fn host_of(ns: &str, name: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some("a-x-b-x-c-x-vc".into()),
                annotations: Some(
                    [
                        (ANNOTATION_OBJECT_NAMESPACE.to_string(), ns.to_string()),
                        (ANNOTATION_OBJECT_NAME.to_string(), name.to_string()),
                    ]
                    .into(),
                ),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn a_host_copy_of_another_virtual_object_is_a_conflict() {
        let host = host_of("c", "a-x-b");
        assert_eq!(
            name_conflict(&key("b-x-c", "a"), &host),
            Some(key("c", "a-x-b"))
        );
        assert_eq!(name_conflict(&key("c", "a-x-b"), &host), None);
    }

    #[test]
    fn a_host_copy_without_owner_annotations_conflicts_with_none() {
        assert_eq!(
            name_conflict(&key("b-x-c", "a"), &ConfigMap::default()),
            None
        );
    }

    #[test]
    fn the_note_names_both_virtual_objects_and_the_host_name() {
        let note = conflict_note("ConfigMap", &key("b-x-c", "a"), &key("c", "a-x-b"), "h");
        assert!(note.contains("b-x-c/a"), "{note}");
        assert!(note.contains("c/a-x-b"), "{note}");
        assert!(note.contains("host name h"), "{note}");
    }

    #[test]
    fn a_reference_whose_host_copy_another_object_owns_is_found() {
        let refs = [key("b-x-c", "mine"), key("b-x-c", "a")];
        let owner_of = |k: &Key| match k.1.as_str() {
            "a" => Some(key("c", "a-x-b")),
            _ => Some(k.clone()),
        };
        assert_eq!(
            conflicted_reference(&refs, owner_of),
            Some((key("b-x-c", "a"), key("c", "a-x-b")))
        );
        assert_eq!(conflicted_reference(&refs[..1], owner_of), None);
        assert_eq!(conflicted_reference(&refs, |_| None), None);
    }
}
