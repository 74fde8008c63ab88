//! The watches that fill the syncer's caches, and the caches themselves.

use std::{fmt::Debug, hash::Hash, sync::Arc};

use futures::{
    FutureExt, Stream,
    future::{BoxFuture, Shared},
};
use kube::{
    Api, Resource, ResourceExt,
    runtime::{
        WatchStreamExt,
        reflector::{ObjectRef, Store, store::Writer},
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

/// The reads of kube's [`Store`] the syncs use. Not a `Deref` to it: through one, a generic
/// caller whose bounds miss the ones of [`Cache::wait_until_ready`] silently called kube's
/// `Store::wait_until_ready` instead, whose waiters steal each other's wakeup (a Secret
/// reconcile waiting for the Gateways' first list hung for good).
impl<K: Resource + Clone + 'static> Cache<K>
where
    K::DynamicType: Eq + Hash + Clone,
{
    /// Resolves once the cache has listed; any number of callers may wait at once.
    pub async fn wait_until_ready(&self) -> Result<(), Unlisted> {
        if self.listed.clone().await {
            Ok(())
        } else {
            Err(Unlisted)
        }
    }

    pub fn state(&self) -> Vec<Arc<K>> {
        self.store.state()
    }

    pub fn get(&self, key: &ObjectRef<K>) -> Option<Arc<K>> {
        self.store.get(key)
    }

    pub fn len(&self) -> usize {
        self.store.len()
    }

    pub fn is_empty(&self) -> bool {
        self.store.is_empty()
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

    /// Waits as a generic sync does, knowing no more of `K` than a `Cache` needs.
    async fn generic_wait<K: Resource + Clone + 'static>(cache: Cache<K>) -> bool
    where
        K::DynamicType: Eq + std::hash::Hash + Clone,
    {
        cache.wait_until_ready().await.is_ok()
    }

    /// Waiters in generic code (a Secret reconcile waiting for the Gateways, an engine for
    /// its caches) and in concrete code wait on the same first list and all hear of it.
    #[tokio::test]
    async fn generic_and_concrete_waiters_all_hear_of_the_first_list() {
        let (cache, mut writer) = store::<ConfigMap>();
        let generic = tokio::spawn(join_all((0..3).map(|_| generic_wait(cache.clone()))));
        let concrete = tokio::spawn({
            let cache = cache.clone();
            async move { cache.wait_until_ready().await }
        });
        tokio::task::yield_now().await;
        writer.apply_watcher_event(&Event::Init);
        writer.apply_watcher_event(&Event::InitDone);
        let heard = tokio::time::timeout(Duration::from_secs(5), async {
            (generic.await.unwrap(), concrete.await.unwrap())
        })
        .await
        .expect("every waiter woken");
        assert!(heard.0.iter().all(|listed| *listed) && heard.1.is_ok());
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
