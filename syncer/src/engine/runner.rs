//! The loop around every engine: two watched caches feed a queue, every key is queued again
//! on a re-list and every [`RESYNC`], and workers drain the queue while metrics record how
//! long keys waited, how long reconciles took and how many failed.

use std::{
    sync::{Arc, Mutex, atomic::Ordering},
    time::Duration,
};

use futures::{StreamExt, TryStreamExt, stream};
use kube::{
    Api, Resource, ResourceExt,
    runtime::{
        reflector::{ObjectRef, Store, reflector},
        watcher,
    },
};
use vnest_crds::translate::managed_by_selector;

use super::{Ctx, Follower, Key, Queue, Syncer, Watches, key_of, reconcile::Engine, virtual_key};
use crate::cache;

/// Workers per resource type: reconciles mostly wait on the API, so more than cores.
const WORKERS: usize = 16;
/// Every key is reconciled again this often, whatever the watches say.
pub const RESYNC: Duration = Duration::from_secs(300);

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
pub(super) fn push_every_key<K>(virt: &Store<K>, host: &Store<K>, queue: &Queue)
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
