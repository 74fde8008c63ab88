//! The cache of one kind of child, filled from its metadata watch. Per child it keeps only
//! what a reconcile reads of it (its resourceVersion and drift [`Marks`]) and what this
//! process learnt of it beyond its metadata (the digest it verified, the content fields it
//! read): about 0.3 KiB, where a reflector store kept the metadata object itself with its key
//! (about 2.3 KiB after compaction, 37 MiB at a thousand VirtualClusters).

use std::{collections::HashMap, sync::Mutex};

use kube::{ResourceExt, runtime::watcher};
use serde_json::Value;
use tokio::sync::watch;

use super::{ChildMeta, FIELD_MANAGER};
use crate::drift::Marks;

/// What the watch shows of a child.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observed {
    pub resource_version: Box<str>,
    pub marks: Marks,
}

impl Observed {
    fn of(object: &ChildMeta) -> Self {
        Observed {
            resource_version: object.resource_version().unwrap_or_default().into(),
            marks: Marks::of(&object.metadata, FIELD_MANAGER),
        }
    }
}

/// One child's record. `observed` is None for a child this process applied before its watch
/// event arrived.
#[derive(Default)]
struct Entry {
    observed: Option<Observed>,
    /// The [`crate::drift::owned_fields`] digest the child had when last applied, or read in
    /// full and found as desired.
    verified: Option<Box<str>>,
    /// [`crate::content::keep`] of the child, with the resourceVersion it was read at.
    content: Option<(Box<str>, Value)>,
}

#[derive(Default)]
struct State {
    live: HashMap<Box<str>, Entry>,
    /// The objects of a list in progress (the first, or a re-list after a desync); the live
    /// map serves reads until the list is complete.
    listing: Option<HashMap<Box<str>, Observed>>,
}

/// The children of one kind, keyed by [`KindCache::key`].
pub struct KindCache {
    cluster_scoped: bool,
    state: Mutex<State>,
    ready: watch::Sender<bool>,
}

impl KindCache {
    pub fn new(cluster_scoped: bool) -> Self {
        KindCache {
            cluster_scoped,
            state: Mutex::default(),
            ready: watch::Sender::new(false),
        }
    }

    /// `namespace/name`, the namespace left empty for a cluster-scoped kind.
    pub fn key(&self, namespace: Option<&str>, name: &str) -> String {
        let namespace = namespace.filter(|_| !self.cluster_scoped);
        format!("{}/{name}", namespace.unwrap_or_default())
    }

    fn key_of(&self, object: &ChildMeta) -> String {
        self.key(object.namespace().as_deref(), &object.name_any())
    }

    /// Takes in one event of the kind's watch.
    pub fn observe(&self, event: &watcher::Event<ChildMeta>) {
        let mut state = self.state.lock().unwrap();
        match event {
            watcher::Event::Apply(object) => {
                let entry = state.live.entry(self.key_of(object).into()).or_default();
                entry.observed = Some(Observed::of(object));
            }
            watcher::Event::Delete(object) => {
                state.live.remove(self.key_of(object).as_str());
            }
            watcher::Event::Init => state.listing = Some(HashMap::new()),
            watcher::Event::InitApply(object) => {
                let key = self.key_of(object).into();
                if let Some(listing) = state.listing.as_mut() {
                    listing.insert(key, Observed::of(object));
                }
            }
            watcher::Event::InitDone => {
                let listed = state.listing.take().unwrap_or_default();
                let mut live = std::mem::take(&mut state.live);
                // What was learnt survives a re-list for the children still there, and for
                // those applied but not yet seen; a child gone from the list is forgotten.
                live.retain(|key, entry| entry.observed.is_none() || listed.contains_key(key));
                for (key, observed) in listed {
                    live.entry(key).or_default().observed = Some(observed);
                }
                state.live = live;
                drop(state);
                self.ready.send_replace(true);
            }
        }
    }

    /// What the watch last showed of the child, if it exists.
    pub fn get(&self, key: &str) -> Option<Observed> {
        let state = self.state.lock().unwrap();
        state.live.get(key)?.observed.clone()
    }

    pub fn verified(&self, key: &str) -> Option<Box<str>> {
        let state = self.state.lock().unwrap();
        state.live.get(key)?.verified.clone()
    }

    pub fn set_verified(&self, key: &str, digest: Option<String>) {
        let mut state = self.state.lock().unwrap();
        match digest {
            Some(digest) => {
                state.live.entry(key.into()).or_default().verified = Some(digest.into());
            }
            None => {
                if let Some(entry) = state.live.get_mut(key) {
                    entry.verified = None;
                }
            }
        }
    }

    /// The content read of the child at `resource_version`, if that is what was read.
    pub fn content(&self, key: &str, resource_version: &str) -> Option<Value> {
        let state = self.state.lock().unwrap();
        match &state.live.get(key)?.content {
            Some((read_at, kept)) if **read_at == *resource_version => Some(kept.clone()),
            _ => None,
        }
    }

    pub fn set_content(&self, key: &str, resource_version: &str, kept: Value) {
        let mut state = self.state.lock().unwrap();
        state.live.entry(key.into()).or_default().content = Some((resource_version.into(), kept));
    }

    /// Drops the child and what was learnt of it (after the operator deleted it).
    pub fn forget(&self, key: &str) {
        self.state.lock().unwrap().live.remove(key);
    }

    /// Resolves once the first list is complete.
    pub async fn wait_until_ready(&self) {
        let mut ready = self.ready.subscribe();
        let _ = ready.wait_for(|ready| *ready).await;
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use kube::core::TypeMeta;
    use serde_json::json;

    use super::*;
    use crate::drift::owned_fields;

    fn child(name: &str, version: &str, hash: &str) -> ChildMeta {
        ChildMeta {
            types: Some(TypeMeta {
                api_version: "v1".into(),
                kind: "Service".into(),
            }),
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("team-a".into()),
                resource_version: Some(version.into()),
                annotations: Some(
                    [(
                        vnest_crds::meta::ANNOTATION_APPLIED_HASH.to_string(),
                        hash.to_string(),
                    )]
                    .into(),
                ),
                ..Default::default()
            },
            _phantom: Default::default(),
        }
    }

    fn cache() -> KindCache {
        KindCache::new(false)
    }

    /// A watched child is cached with its version and applied hash, updated in place and gone
    /// with its delete event, together with what was learnt of it.
    #[test]
    fn watch_events_keep_the_marks_and_a_delete_forgets_the_child() {
        let cache = cache();
        let key = cache.key(Some("team-a"), "vc");
        cache.observe(&watcher::Event::Apply(child("vc", "1", "h1")));
        cache.set_verified(&key, Some("d1".into()));
        cache.set_content(&key, "1", json!({ "spec": { "clusterIP": "10.96.0.7" } }));
        cache.observe(&watcher::Event::Apply(child("vc", "2", "h2")));
        let seen = cache.get(&key).unwrap();
        assert_eq!(&*seen.resource_version, "2");
        assert_eq!(seen.marks.applied_hash.as_deref(), Some("h2"));
        assert_eq!(cache.verified(&key).as_deref(), Some("d1"));
        // Content read at version 1 is not served for version 2.
        assert_eq!(cache.content(&key, "2"), None);
        assert_eq!(
            cache.content(&key, "1"),
            Some(json!({ "spec": { "clusterIP": "10.96.0.7" } }))
        );
        cache.observe(&watcher::Event::Delete(child("vc", "3", "h2")));
        assert_eq!(cache.get(&key), None);
        assert_eq!(cache.verified(&key), None);
    }

    /// A digest verified right after a create is kept until the child's watch event arrives,
    /// and the event does not erase it.
    #[test]
    fn verified_before_the_watch_saw_the_child_survives_its_event() {
        let cache = cache();
        let key = cache.key(Some("team-a"), "new");
        cache.set_verified(&key, Some("d".into()));
        assert_eq!(cache.get(&key), None);
        cache.observe(&watcher::Event::Apply(child("new", "5", "h")));
        assert_eq!(cache.verified(&key).as_deref(), Some("d"));
        assert!(cache.get(&key).is_some());
    }

    /// During a re-list the old state serves reads; when it completes, children missing from
    /// the list are gone, the others keep what was learnt, and the cache is ready.
    #[tokio::test]
    async fn a_relist_replaces_the_children_and_keeps_what_was_learnt() {
        let cache = cache();
        cache.observe(&watcher::Event::Init);
        cache.observe(&watcher::Event::InitApply(child("kept", "1", "h")));
        cache.observe(&watcher::Event::InitApply(child("gone", "1", "h")));
        assert_eq!(cache.get(&cache.key(Some("team-a"), "kept")), None);
        cache.observe(&watcher::Event::InitDone);
        cache.wait_until_ready().await;
        let kept = cache.key(Some("team-a"), "kept");
        let gone = cache.key(Some("team-a"), "gone");
        cache.set_verified(&kept, Some("d".into()));
        cache.set_verified(&gone, Some("d".into()));

        cache.observe(&watcher::Event::Init);
        cache.observe(&watcher::Event::InitApply(child("kept", "2", "h")));
        assert!(
            cache.get(&gone).is_some(),
            "the old list serves until the new one is done"
        );
        cache.observe(&watcher::Event::InitDone);
        assert_eq!(cache.get(&gone), None);
        assert_eq!(cache.verified(&gone), None);
        assert_eq!(&*cache.get(&kept).unwrap().resource_version, "2");
        assert_eq!(cache.verified(&kept).as_deref(), Some("d"));
    }

    /// The cached marks are the drift check's: the applied hash and the owned-fields digest
    /// computed from the full managedFields of the event.
    #[test]
    fn the_marks_hold_the_owned_fields_digest() {
        let mut object = child("vc", "1", "h");
        object.metadata.managed_fields = Some(vec![
            k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry {
                manager: Some(FIELD_MANAGER.into()),
                operation: Some("Apply".into()),
                api_version: Some("v1".into()),
                fields_type: Some("FieldsV1".into()),
                fields_v1: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::FieldsV1(
                    json!({ "f:spec": {} }),
                )),
                ..Default::default()
            },
        ]);
        let cache = cache();
        cache.observe(&watcher::Event::Apply(object.clone()));
        let marks = cache.get(&cache.key(Some("team-a"), "vc")).unwrap().marks;
        assert_eq!(
            marks.owned.as_deref(),
            owned_fields(&object.metadata, FIELD_MANAGER).as_deref()
        );
        assert!(marks.owned.is_some());
    }

    /// A cluster-scoped kind ignores the namespace in its keys.
    #[test]
    fn cluster_scoped_keys_have_no_namespace() {
        let cache = KindCache::new(true);
        assert_eq!(cache.key(Some("team-a"), "x"), cache.key(None, "x"));
    }
}
