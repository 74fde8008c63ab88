//! Name conflicts: two virtual objects whose names translate to one host name. The first
//! owner keeps the host copy; the other is refused, and so is a pod using it.

use kube::{Resource, runtime::reflector::ObjectRef};

use super::{Key, virtual_key};
use crate::{cache::Cache, translate::Target};

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
        host: Cache<K>,
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

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;
    use vnest_crds::meta::{ANNOTATION_OBJECT_NAME, ANNOTATION_OBJECT_NAMESPACE};

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
