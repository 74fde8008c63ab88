//! The watches that fill the syncer's caches.

use std::fmt::Debug;

use futures::Stream;
use kube::{
    Api, Resource, ResourceExt,
    runtime::{WatchStreamExt, watcher},
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
