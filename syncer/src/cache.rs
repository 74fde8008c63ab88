//! The watches that fill the syncer's caches, and the caches themselves.

use std::{fmt::Debug, hash::Hash, ops::Deref};

use futures::{
    FutureExt, Stream,
    future::{BoxFuture, Shared},
};
use kube::{
    Api, Resource, ResourceExt,
    runtime::{
        WatchStreamExt,
        reflector::{Store, store::Writer},
        watcher,
    },
};
use serde::de::DeserializeOwned;

/// Watches `api` with kube's default backoff, dropping every object's managedFields on the
/// way in: no sync reads them from a cache, and with a few field managers per object they
/// are a large share of what a cached pod weighs.
pub fn watch<K>(
    api: Api<K>,
    config: watcher::Config,
) -> impl Stream<Item = watcher::Result<watcher::Event<K>>> + Send + 'static
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    watcher(api, config)
        .default_backoff()
        .modify(|o| o.managed_fields_mut().clear())
}

/// A reflector's store whose first list every waiter hears about. kube's
/// `Store::wait_until_ready` is a oneshot channel that wakes only the last of several
/// concurrent waiters; the others hang until something else polls them, which with 32 workers
/// (`futures::join_all` then polls only woken futures) left every ConfigMap and Secret
/// reconcile waiting for the pod cache for ever. Here one shared future waits and wakes all.
pub struct Cache<K: Resource + 'static>
where
    K::DynamicType: Eq + Hash + Clone,
{
    store: Store<K>,
    listed: Shared<BoxFuture<'static, bool>>,
}

/// The watch feeding a [`Cache`] ended before its first list.
#[derive(Debug, thiserror::Error)]
#[error("the cache's watch ended before its first list")]
pub struct Unlisted;

impl<K: Resource + Clone + Send + Sync + 'static> Cache<K>
where
    K::DynamicType: Eq + Hash + Clone + Send + Sync,
{
    pub fn new(store: Store<K>) -> Self {
        let waiter = store.clone();
        let listed = async move { waiter.wait_until_ready().await.is_ok() }
            .boxed()
            .shared();
        Cache { store, listed }
    }

    /// Resolves once the cache has listed; any number of callers may wait at once.
    pub async fn wait_until_ready(&self) -> Result<(), Unlisted> {
        if self.listed.clone().await {
            Ok(())
        } else {
            Err(Unlisted)
        }
    }
}

impl<K: Resource + 'static> Clone for Cache<K>
where
    K::DynamicType: Eq + Hash + Clone,
{
    fn clone(&self) -> Self {
        Cache {
            store: self.store.clone(),
            listed: self.listed.clone(),
        }
    }
}

impl<K: Resource + 'static> Deref for Cache<K>
where
    K::DynamicType: Eq + Hash + Clone,
{
    type Target = Store<K>;

    fn deref(&self) -> &Store<K> {
        &self.store
    }
}

/// A cache and the writer a reflector fills it through.
pub fn store<K>() -> (Cache<K>, Writer<K>)
where
    K: Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Default + Send + Sync,
{
    store_of(Default::default())
}

/// As [`store`], for objects of the dynamic type `dyntype`.
pub fn store_of<K>(dyntype: K::DynamicType) -> (Cache<K>, Writer<K>)
where
    K: Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Send + Sync,
{
    let writer = Writer::new(dyntype);
    (Cache::new(writer.as_reader()), writer)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures::future::join_all;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::runtime::watcher::Event;

    use super::*;

    /// Every one of many concurrent waiters (more than `join_all` polls eagerly, so only
    /// woken ones are polled) hears of the first list, from inside one task as the workers
    /// of an engine wait, and from another task as a second engine's do.
    #[tokio::test]
    async fn every_concurrent_waiter_hears_of_the_first_list() {
        let (cache, mut writer) = store::<ConfigMap>();
        let waiters = |cache: Cache<ConfigMap>| {
            tokio::spawn(async move { join_all((0..40).map(|_| cache.wait_until_ready())).await })
        };
        let (first, second) = (waiters(cache.clone()), waiters(cache.clone()));
        tokio::task::yield_now().await;
        writer.apply_watcher_event(&Event::Init);
        writer.apply_watcher_event(&Event::InitDone);
        for task in [first, second] {
            let results = tokio::time::timeout(Duration::from_secs(5), task)
                .await
                .expect("every waiter woken")
                .unwrap();
            assert!(results.iter().all(Result::is_ok));
        }
    }

    /// A watch that ends before its first list fails every waiter instead of hanging it.
    #[tokio::test]
    async fn a_writer_dropped_before_the_first_list_fails_the_waiters() {
        let (cache, writer) = store::<ConfigMap>();
        let waiting = tokio::spawn({
            let cache = cache.clone();
            async move { cache.wait_until_ready().await }
        });
        tokio::task::yield_now().await;
        drop(writer);
        let result = tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("waiter woken")
            .unwrap();
        assert!(result.is_err());
    }
}
