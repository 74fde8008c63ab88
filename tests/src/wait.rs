//! Polling until the cluster reaches a state, with a deadline and the last observation in the
//! failure message.

use std::{fmt::Debug, future::Future, time::Duration};

/// Polls `probe` every 250 ms until it returns `Ok`, or panics after `timeout` with the last
/// `Err` it returned.
pub async fn until<T, E: Debug, F, Fut>(what: &str, timeout: Duration, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        match probe().await {
            Ok(value) => return value,
            Err(last) if tokio::time::Instant::now() >= deadline => {
                panic!("timed out after {timeout:?} waiting for {what}; last seen: {last:?}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
}

/// Polls `probe` every 250 ms for the whole `window` and panics on the first `Err`: proves a
/// state lasts (a standby stays passive, a refused object stays absent) rather than looking
/// once after a sleep.
pub async fn holds<E: Debug, F, Fut>(what: &str, window: Duration, mut probe: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), E>>,
{
    let end = tokio::time::Instant::now() + window;
    let mut looks = 0u32;
    while tokio::time::Instant::now() < end {
        if let Err(seen) = probe().await {
            panic!("{what} stopped holding after {looks} looks: {seen:?}");
        }
        looks += 1;
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    probe()
        .await
        .unwrap_or_else(|seen| panic!("{what} stopped holding at the end of {window:?}: {seen:?}"));
}

/// Returns as soon as `counter` reads at least `target`, polling every 5 ms (not 250: a test
/// that kills a process inside a burst must act the moment the work has started); panics
/// after `timeout` naming `what`.
pub async fn reaches<F, Fut>(what: &str, timeout: Duration, counter: F, target: f64)
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<f64, String>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let done = counter().await.unwrap_or(0.0);
        if done >= target {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}: {done} of {target}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
