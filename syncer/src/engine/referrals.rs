//! References one kind makes to another (a pod to its ConfigMaps, an Ingress or a Gateway to
//! its certificate Secrets), queued on the other kind's engine whenever the referring object
//! changes: what it names now and what it named when last seen, so a dropped reference
//! reconciles the object it named (its host copy may have to go) at once rather than at the
//! next resync.

use std::{
    collections::{HashMap, HashSet},
    sync::Mutex,
};

use kube::Resource;

use super::{Key, Queue, key_of};

/// The references of referring objects of kind `K`, fed to `queue`.
pub struct Referrals<K> {
    queue: Queue,
    of: fn(&K) -> Vec<Key>,
    /// What each referring object named when last seen (objects naming nothing are left out).
    last: Mutex<HashMap<Key, Vec<Key>>>,
}

impl<K: Resource> Referrals<K> {
    pub fn new(queue: Queue, of: fn(&K) -> Vec<Key>) -> Self {
        Referrals {
            queue,
            of,
            last: Mutex::default(),
        }
    }

    /// Queues what `obj` names and what it named before. A deleted object is seen with its
    /// last references, which are queued once more and then forgotten.
    pub fn touched(&self, obj: &K, deleted: bool) {
        let now = (self.of)(obj);
        let before = {
            let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
            if deleted || now.is_empty() {
                last.remove(&key_of(obj))
            } else {
                last.insert(key_of(obj), now.clone())
            }
        };
        let mut seen = HashSet::new();
        for key in before.into_iter().flatten().chain(now) {
            if seen.insert(key.clone()) {
                self.queue.push(key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;

    use super::*;

    /// A ConfigMap standing for a referring object: it names the keys in its data values.
    fn referring(names: &[&str]) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some("gw".into()),
                namespace: Some("shop".into()),
                ..Default::default()
            },
            data: Some(
                names
                    .iter()
                    .map(|n| (n.to_string(), n.to_string()))
                    .collect(),
            ),
            ..Default::default()
        }
    }

    fn named(cm: &ConfigMap) -> Vec<Key> {
        cm.data
            .iter()
            .flatten()
            .map(|(_, n)| ("shop".to_string(), n.clone()))
            .collect()
    }

    /// Every key queued now, in any order.
    async fn drain(queue: &Queue) -> Vec<String> {
        let mut keys = Vec::new();
        while let Ok((key, _)) = tokio::time::timeout(Duration::from_millis(20), queue.pop()).await
        {
            queue.done(key.clone(), true);
            keys.push(key.1);
        }
        keys.sort();
        keys
    }

    /// A reference dropped by an update is queued with the ones that remain, so the object it
    /// named learns it is no longer referred to; a delete queues the last references.
    #[tokio::test]
    async fn a_dropped_reference_is_queued_once_more() {
        let queue = Queue::default();
        let referrals = Referrals::new(queue.clone(), named);
        referrals.touched(&referring(&["a", "b"]), false);
        assert_eq!(drain(&queue).await, ["a", "b"]);
        referrals.touched(&referring(&["a"]), false);
        assert_eq!(drain(&queue).await, ["a", "b"]);
        referrals.touched(&referring(&["a"]), false);
        assert_eq!(drain(&queue).await, ["a"]);
        referrals.touched(&referring(&["a"]), true);
        assert_eq!(drain(&queue).await, ["a"]);
        referrals.touched(&referring(&[]), false);
        assert!(drain(&queue).await.is_empty());
    }

    /// An object that stops naming anything queues what it named once, and is not kept.
    #[tokio::test]
    async fn an_object_naming_nothing_queues_its_last_references_once() {
        let queue = Queue::default();
        let referrals = Referrals::new(queue.clone(), named);
        referrals.touched(&referring(&["a"]), false);
        assert_eq!(drain(&queue).await, ["a"]);
        referrals.touched(&referring(&[]), false);
        assert_eq!(drain(&queue).await, ["a"]);
        assert!(referrals.last.lock().unwrap().is_empty());
        referrals.touched(&referring(&[]), false);
        assert!(drain(&queue).await.is_empty());
    }
}
