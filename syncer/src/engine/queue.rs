//! A keyed work queue: each key is queued at most once, never handed to two workers at the
//! same time (a push while it is being worked on runs it again afterwards), and retried
//! with exponential back-off after failures. Two lanes: urgent keys (objects without a host
//! copy yet) are handed out before the others, each lane first in, first out.

use std::{
    collections::{HashMap, HashSet, VecDeque},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use tokio::sync::Notify;

/// A virtual object's namespace and name.
pub type Key = (String, String);

const BACKOFF_BASE: Duration = Duration::from_millis(250);
const BACKOFF_MAX: Duration = Duration::from_secs(60);

#[derive(Default)]
struct State {
    urgent: VecDeque<Key>,
    order: VecDeque<Key>,
    /// Queued keys and since when.
    queued: HashMap<Key, Instant>,
    active: HashSet<Key>,
    dirty: HashSet<Key>,
    failures: HashMap<Key, u32>,
}

#[derive(Clone, Default)]
pub struct Queue {
    state: Arc<Mutex<State>>,
    notify: Arc<Notify>,
}

/// Delay before retry number `failures` (1-based): 250 ms doubling, at most a minute.
pub fn backoff(failures: u32) -> Duration {
    BACKOFF_BASE
        .saturating_mul(1 << failures.saturating_sub(1).min(16))
        .min(BACKOFF_MAX)
}

impl Queue {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn push(&self, key: Key) {
        self.insert(key, false);
    }

    /// Pushes `key` into the urgent lane: new objects should not wait behind updates of
    /// earlier ones, nor overtake other new objects (a stack would starve the first ones).
    pub fn push_urgent(&self, key: Key) {
        self.insert(key, true);
    }

    fn insert(&self, key: Key, urgent: bool) {
        let mut s = self.lock();
        if s.active.contains(&key) {
            s.dirty.insert(key);
        } else if !s.queued.contains_key(&key) {
            s.queued.insert(key.clone(), Instant::now());
            if urgent {
                s.urgent.push_back(key);
            } else {
                s.order.push_back(key);
            }
            drop(s);
            self.notify.notify_one();
        } else if urgent && let Some(i) = s.order.iter().position(|k| *k == key) {
            // Already queued behind updates: move it to the urgent lane.
            s.order.remove(i);
            s.urgent.push_back(key);
        }
    }

    /// Pushes `key` after `delay`.
    pub fn push_after(&self, key: Key, delay: Duration) {
        let queue = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            queue.push(key);
        });
    }

    /// The next key and how long it waited, marked as being worked on until [`Queue::done`].
    pub async fn pop(&self) -> (Key, Duration) {
        loop {
            let notified = self.notify.notified();
            {
                let mut s = self.lock();
                if let Some(key) = s.urgent.pop_front().or_else(|| s.order.pop_front()) {
                    let since = s.queued.remove(&key);
                    s.active.insert(key.clone());
                    return (key, since.map(|t| t.elapsed()).unwrap_or_default());
                }
            }
            notified.await;
        }
    }

    /// Ends work on `key`: success clears its back-off, failure schedules a retry.
    pub fn done(&self, key: Key, ok: bool) {
        let mut s = self.lock();
        s.active.remove(&key);
        let retry = if ok {
            s.failures.remove(&key);
            None
        } else {
            let n = s.failures.entry(key.clone()).or_default();
            *n += 1;
            Some(backoff(*n))
        };
        let again = s.dirty.remove(&key);
        drop(s);
        match retry {
            Some(delay) if !again => self.push_after(key, delay),
            _ if again => self.push(key),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: &str) -> Key {
        ("ns".into(), n.into())
    }

    /// Pushing a key twice before it is worked on runs it once.
    #[tokio::test]
    async fn duplicate_pushes_collapse() {
        let q = Queue::default();
        q.push(key("a"));
        q.push(key("a"));
        q.push(key("b"));
        assert_eq!(q.pop().await.0, key("a"));
        assert_eq!(q.pop().await.0, key("b"));
        assert!(q.lock().order.is_empty());
    }

    /// A push during work is not lost and not run in parallel: it comes back after `done`.
    #[tokio::test]
    async fn a_push_while_active_runs_again_after_done() {
        let q = Queue::default();
        q.push(key("a"));
        let (k, _) = q.pop().await;
        q.push(key("a"));
        assert!(q.lock().order.is_empty());
        q.done(k, true);
        assert_eq!(q.pop().await.0, key("a"));
    }

    /// New objects overtake queued updates (even one already queued as an update) and keep
    /// their own order among themselves.
    #[tokio::test]
    async fn urgent_keys_overtake_updates_in_arrival_order() {
        let q = Queue::default();
        q.push(key("a"));
        q.push(key("b"));
        q.push_urgent(key("c"));
        q.push_urgent(key("b"));
        q.push_urgent(key("d"));
        let mut order = Vec::new();
        for _ in 0..4 {
            order.push(q.pop().await.0);
        }
        assert_eq!(order, [key("c"), key("b"), key("d"), key("a")]);
    }

    /// The wait reported is the time since the key was first queued.
    #[tokio::test]
    async fn pop_reports_how_long_the_key_waited() {
        let q = Queue::default();
        q.push(key("a"));
        tokio::time::sleep(Duration::from_millis(20)).await;
        q.push(key("a"));
        let (_, waited) = q.pop().await;
        assert!(waited >= Duration::from_millis(20), "{waited:?}");
    }

    /// Failures back off exponentially up to a minute.
    #[test]
    fn backoff_doubles_and_is_capped() {
        assert_eq!(backoff(1), Duration::from_millis(250));
        assert_eq!(backoff(3), Duration::from_secs(1));
        assert_eq!(backoff(30), Duration::from_secs(60));
    }
}
