//! The loop around every engine: two watched caches feed a queue, every key is queued again
//! on a re-list and every [`RESYNC`], and workers drain the queue while metrics record how
//! long keys waited, how long reconciles took and how many failed.

use std::{
    sync::{Arc, Mutex, atomic::Ordering},
    time::Duration,
};

use futures::{Stream, StreamExt, TryStreamExt, stream};
use kube::{
    Api, Resource, ResourceExt,
    runtime::{
        WatchStreamExt,
        reflector::{ObjectRef, reflector},
        watcher,
    },
};
use vnest_crds::translate::managed_by_selector;

use super::{Ctx, Key, Queue, Referrals, Syncer, Watches, key_of, reconcile::Engine, virtual_key};
use crate::cache::{self, Cache};

/// Workers per resource type: reconciles mostly wait on the API, so more than cores. The
/// syncer benchmark (syncer/README.md) measured 32 as faster than 16 at 1,000 pods, and 64 as
/// no faster than 32 while holding more memory.
const WORKERS: usize = 32;
/// Every key is reconciled again this often, whatever the watches say.
pub const RESYNC: Duration = Duration::from_secs(300);

/// Waits for the first list of both caches of a `kind`, then counts its engine as synced
/// (`/readyz` waits for every engine).
pub async fn caches_synced<K>(ctx: &Ctx, kind: &str, virt: &Cache<K>, host: &Cache<K>)
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

/// Which of a runner's two caches an event came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Virtual,
    Host,
}

/// A watch event as a runner receives it.
pub type Event<K> = watcher::Result<watcher::Event<K>>;

/// One side's reflected watch events, tagged with the side.
pub fn side<K, S>(side: Side, events: S) -> impl Stream<Item = (Side, Event<K>)> + Send + 'static
where
    S: Stream<Item = watcher::Result<watcher::Event<K>>> + Send + 'static,
{
    events.map(move |e| (side, e))
}

/// What every runner shares: its name, its two caches, its queue and how many workers drain
/// it. [`Loop::run`] is the one sync loop every runner (to-host engine, from-host mirrors,
/// custom resources) goes through.
pub struct Loop<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    /// For logs and metrics.
    pub kind: String,
    pub virt: Cache<K>,
    pub host: Cache<K>,
    pub queue: Queue,
    pub workers: usize,
}

impl<K> Loop<K>
where
    K: Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    /// Runs until the watches end: `events` (both sides, already through the reflectors that
    /// fill the caches) queue keys through `touched` for every object they name (with whether
    /// the event deleted it), and through
    /// `every_key` on a re-list (after the API server or etcd restarted, or a watch expired,
    /// no event names an object deleted while the watch was down: every key is reconciled
    /// then, or a copy deleted in that gap stays wrong until the next resync). Once both
    /// caches have listed, `every_key` runs again every [`RESYNC`], and the workers call
    /// `reconcile` on each key the queue hands out.
    pub async fn run<E, T, A, R, Fut>(
        self,
        ctx: &Ctx,
        events: E,
        touched: T,
        every_key: A,
        reconcile: R,
    ) where
        E: Stream<Item = (Side, Event<K>)> + Send + 'static,
        T: Fn(Side, &K, bool) + Send + 'static,
        A: Fn() + Clone + Send + Sync + 'static,
        R: Fn(Key) -> Fut,
        Fut: Future<Output = anyhow::Result<()>>,
    {
        let kind = self.kind;
        // The error series exists from the start (at 0), so alert rules see the first failure.
        ctx.metrics.reconcile_errors.with_label_values(&[&kind]);
        let watch_task = tokio::spawn(events.for_each({
            let (kind, every_key) = (kind.clone(), every_key.clone());
            move |(side, event)| {
                dispatch(&kind, side, event, &touched, &every_key);
                futures::future::ready(())
            }
        }));
        caches_synced(ctx, &kind, &self.virt, &self.host).await;
        let resync = tokio::spawn(async move {
            loop {
                every_key();
                tokio::time::sleep(RESYNC).await;
            }
        });
        let (queue, reconcile) = (&self.queue, &reconcile);
        futures::future::join_all((0..self.workers).map(|_| work(ctx, queue, &kind, reconcile)))
            .await;
        resync.abort();
        watch_task.abort();
    }
}

/// Queues what one watch event calls for: the keys of the object it names, or every key
/// after a re-list.
fn dispatch<K>(
    kind: &str,
    side: Side,
    event: Event<K>,
    touched: &impl Fn(Side, &K, bool),
    every_key: &impl Fn(),
) {
    match event {
        Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => touched(side, &o, false),
        Ok(watcher::Event::Delete(o)) => touched(side, &o, true),
        Ok(watcher::Event::InitDone) => every_key(),
        Ok(_) => {}
        Err(e) => {
            let virt = side == Side::Virtual;
            tracing::warn!(kind, virt, error = %e, "watch failed; retrying");
        }
    }
}

/// Runs the engine for `syncer` until the watches end.
pub async fn run<S: Syncer>(
    syncer: S,
    ctx: Arc<Ctx>,
    watches: Watches<S::K>,
    queue: Queue,
    followers: Vec<Referrals<S::K>>,
) {
    let engine = Arc::new(Engine {
        syncer,
        ctx: ctx.clone(),
        virt: watches.virt.clone(),
        host: watches.host.clone(),
        queue: queue.clone(),
        reported: Mutex::default(),
    });
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
    let host_config = watcher::Config::default().labels(&managed_by_selector(&ctx.target.vc));
    let host_events = cache::watch(
        Api::<S::K>::namespaced(ctx.host.clone(), &ctx.target.host_namespace),
        host_config,
    )
    .modify(|o| S::TRIM_HOST.into_iter().for_each(|trim| trim(o)));
    let events = stream::select(
        side(Side::Virtual, reflector(watches.virt_writer, virt_events)),
        side(Side::Host, reflector(watches.host_writer, host_events)),
    );
    let touched = {
        let (host_store, target, queue) = (watches.host.clone(), ctx.target.clone(), queue.clone());
        move |side: Side, obj: &S::K, deleted: bool| match side {
            Side::Virtual => {
                // A virtual object without a host copy yet goes first: creation latency is
                // what tenants feel, status follow-ups of earlier objects can wait.
                let key = key_of(obj);
                followers.iter().for_each(|r| r.touched(obj, deleted));
                let host_name = target.host_name(&key.1, &key.0);
                let copy = ObjectRef::new(&host_name).within(&target.host_namespace);
                if host_store.get(&copy).is_none() {
                    queue.push_urgent(key);
                } else {
                    queue.push(key);
                }
            }
            Side::Host => {
                if let Some(k) = virtual_key(obj) {
                    queue.push(k);
                }
            }
        }
    };
    let every_key = {
        let engine = engine.clone();
        move || engine.push_all()
    };
    let runner = Loop {
        kind: S::KIND.to_string(),
        virt: watches.virt,
        host: watches.host,
        queue,
        workers: WORKERS,
    };
    runner
        .run(&ctx, events, touched, every_key, |key| {
            let engine = engine.clone();
            async move { engine.reconcile(&key).await }
        })
        .await;
}

/// Queues the key of every virtual object and of every host copy's source.
pub(super) fn push_every_key<K>(virt: &Cache<K>, host: &Cache<K>, queue: &Queue)
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

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;

    use super::*;

    fn cm(name: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    /// Objects an event names are queued from their side, a delete marked as one; a re-list
    /// (`InitDone`) queues
    /// every key, since no event names what was deleted while the watch was down.
    #[test]
    fn a_relist_reconciles_every_key() {
        let seen = RefCell::new(Vec::new());
        let touched = |side: Side, o: &ConfigMap, deleted: bool| {
            let gone = if deleted { " deleted" } else { "" };
            seen.borrow_mut()
                .push(format!("{side:?} {}{gone}", o.name_any()))
        };
        let every_key = || seen.borrow_mut().push("every key".to_string());
        let events = [
            (Side::Virtual, Ok(watcher::Event::Apply(cm("a")))),
            (Side::Host, Ok(watcher::Event::Delete(cm("b")))),
            (Side::Host, Ok(watcher::Event::Init)),
            (Side::Host, Ok(watcher::Event::InitApply(cm("c")))),
            (Side::Host, Ok(watcher::Event::InitDone)),
        ];
        for (side, event) in events {
            dispatch("ConfigMap", side, event, &touched, &every_key);
        }
        assert_eq!(
            seen.into_inner(),
            ["Virtual a", "Host b deleted", "Host c", "every key"]
        );
    }
}
