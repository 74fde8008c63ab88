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
