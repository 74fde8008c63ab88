//! Watch events read as "something changed": the trigger of the loops that keep a few fixed
//! objects (the DNS objects, the virtual `kubernetes` Service) as they should be.

use futures::future::{Ready, ready};
use kube::runtime::watcher;

/// `Some(())` for an applied or deleted object, for `filter_map` over a watch. Our own apply
/// of an unchanged object writes nothing, so it makes no event and no loop. A failed watch
/// is logged, naming `watch`, and retried by the watch's back-off.
pub fn change<K>(
    event: Result<watcher::Event<K>, watcher::Error>,
    watch: &str,
) -> Ready<Option<()>> {
    ready(match event {
        Ok(watcher::Event::Apply(_) | watcher::Event::Delete(_)) => Some(()),
        Ok(_) => None,
        Err(e) => {
            tracing::warn!(error = %e, "{watch} watch failed; retrying");
            None
        }
    })
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
}
