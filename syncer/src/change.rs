//! Watch events read as "something changed": the trigger of the loops that keep a few fixed
//! objects (the DNS objects, the virtual `kubernetes` Service) as they should be.

use std::time::Duration;

use futures::{
    FutureExt, Stream, StreamExt,
    future::{Ready, ready},
    stream::BoxStream,
};
use kube::{
    Api, Resource,
    runtime::{WatchStreamExt, watcher},
};
use serde::de::DeserializeOwned;

/// A watch of `api` with `config` (kube's default back-off), as a stream of "something
/// changed" ([`change`]); `watch` names it in the log when it fails.
pub fn changes<K>(
    api: Api<K>,
    config: watcher::Config,
    watch: &'static str,
) -> BoxStream<'static, ()>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    watcher(api, config)
        .default_backoff()
        .filter_map(move |event| change(event, watch))
        .boxed()
}

/// `Some(())` for an applied or deleted object, for `filter_map` over a watch. Our own apply
/// of an unchanged object writes nothing, so it makes no event and no loop. A failed watch
/// is logged, naming `watch`, and retried by the watch's back-off.
fn change<K>(event: Result<watcher::Event<K>, watcher::Error>, watch: &str) -> Ready<Option<()>> {
    ready(match event {
        Ok(watcher::Event::Apply(_) | watcher::Event::Delete(_)) => Some(()),
        Ok(_) => None,
        Err(e) => {
            tracing::warn!(error = %e, "{watch} watch failed; retrying");
            None
        }
    })
}

/// Returns after `wait`, or sooner after a change on `changes`: then once the burst it
/// started has gone quiet for `settle`, with the changes of the burst consumed.
pub async fn next_or_after(
    changes: &mut (impl Stream<Item = ()> + Unpin),
    wait: Duration,
    settle: Duration,
) {
    tokio::select! {
        _ = changes.next() => {
            tokio::time::sleep(settle).await;
            while changes.next().now_or_never().flatten().is_some() {}
        }
        _ = tokio::time::sleep(wait) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn changed(event: Result<watcher::Event<u8>, watcher::Error>) -> bool {
        change(event, "test").into_inner().is_some()
    }

    /// Only an object applied or deleted counts; the steps of a relist and errors do not.
    #[test]
    fn only_applied_or_deleted_objects_are_changes() {
        assert!(changed(Ok(watcher::Event::Apply(1))));
        assert!(changed(Ok(watcher::Event::Delete(1))));
        assert!(!changed(Ok(watcher::Event::Init)));
        assert!(!changed(Ok(watcher::Event::InitApply(1))));
        assert!(!changed(Ok(watcher::Event::InitDone)));
        assert!(!changed(Err(watcher::Error::NoResourceVersion)));
    }

    /// Without a change the wait runs its course; a change ends it early, after the burst
    /// settles, with every change of the burst consumed and a later one left for next time.
    #[tokio::test(start_paused = true)]
    async fn a_change_cuts_the_wait_short_once_its_burst_settles() {
        let (tx, mut changes) = futures::channel::mpsc::unbounded::<()>();
        let (wait, settle) = (Duration::from_secs(300), Duration::from_secs(1));
        let mut waited = async || {
            let start = tokio::time::Instant::now();
            next_or_after(&mut changes, wait, settle).await;
            start.elapsed()
        };
        assert_eq!(waited().await, wait);
        tx.unbounded_send(()).unwrap();
        tx.unbounded_send(()).unwrap();
        assert_eq!(waited().await, settle, "the burst, at once");
        tx.unbounded_send(()).unwrap();
        assert_eq!(waited().await, settle, "the later change");
        assert_eq!(waited().await, wait, "nothing left over");
    }
}
