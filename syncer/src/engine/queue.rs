//! A keyed work queue: each key is queued at most once, never handed to two workers at the
//! same time (a push while it is being worked on runs it again afterwards), and retried
//! with exponential back-off after failures.

use std::{
    collections::{HashMap, HashSet, VecDeque},
    sync::{Arc, Mutex},
    time::Duration,
};

use tokio::sync::Notify;

/// A virtual object's namespace and name.
pub type Key = (String, String);

const BACKOFF_BASE: Duration = Duration::from_millis(250);
const BACKOFF_MAX: Duration = Duration::from_secs(60);

#[derive(Default)]
struct State {
    order: VecDeque<Key>,
    queued: HashSet<Key>,
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

    /// Pushes `key` ahead of the others (new objects should not wait behind updates).
    pub fn push_front(&self, key: Key) {
        self.insert(key, true);
    }

    fn insert(&self, key: Key, front: bool) {
        let mut s = self.lock();
        if s.active.contains(&key) {
            s.dirty.insert(key);
        } else if s.queued.insert(key.clone()) {
            if front {
                s.order.push_front(key);
            } else {
                s.order.push_back(key);
            }
            drop(s);
            self.notify.notify_one();
        } else if front && let Some(i) = s.order.iter().position(|k| *k == key) {
            // Already queued behind others: move it up.
            s.order.remove(i);
            s.order.push_front(key);
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

    /// The next key, marked as being worked on until [`Queue::done`].
    pub async fn pop(&self) -> Key {
        loop {
            let notified = self.notify.notified();
            {
                let mut s = self.lock();
                if let Some(key) = s.order.pop_front() {
                    s.queued.remove(&key);
                    s.active.insert(key.clone());
                    return key;
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
        assert_eq!(q.pop().await, key("a"));
        assert_eq!(q.pop().await, key("b"));
        assert!(q.lock().order.is_empty());
    }

    /// A push during work is not lost and not run in parallel: it comes back after `done`.
    #[tokio::test]
    async fn a_push_while_active_runs_again_after_done() {
        let q = Queue::default();
        q.push(key("a"));
        let k = q.pop().await;
        q.push(key("a"));
        assert!(q.lock().order.is_empty());
        q.done(k, true);
        assert_eq!(q.pop().await, key("a"));
    }

    /// A new object overtakes queued updates, even if it was already queued.
    #[tokio::test]
    async fn push_front_overtakes() {
        let q = Queue::default();
        q.push(key("a"));
        q.push(key("b"));
        q.push_front(key("c"));
        q.push_front(key("b"));
        assert_eq!(q.pop().await, key("b"));
        assert_eq!(q.pop().await, key("c"));
        assert_eq!(q.pop().await, key("a"));
    }

    /// Failures back off exponentially up to a minute.
    #[test]
    fn backoff_doubles_and_is_capped() {
        assert_eq!(backoff(1), Duration::from_millis(250));
        assert_eq!(backoff(3), Duration::from_secs(1));
        assert_eq!(backoff(30), Duration::from_secs(60));
    }
}
