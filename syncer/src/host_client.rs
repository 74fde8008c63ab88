//! The controllers' host client, throttled by `sync.hostRateLimit` (a fixed window in front
//! of every request, watches included: a throttled watch only starts later).

use std::time::Duration;

use kube::{Client, Config, client::ClientBuilder};
use tower::limit::RateLimitLayer;
use vnest_crds::HostRateLimit;

/// A client for `config` that sends at most `limit.burst` requests at once and
/// `limit.qps` per second on average.
pub fn throttled(config: Config, limit: HostRateLimit) -> Result<Client, kube::Error> {
    Ok(ClientBuilder::try_from(config)?
        .with_layer(&layer(limit))
        .build())
}

/// `burst` requests per window of `burst / qps` seconds.
fn layer(limit: HostRateLimit) -> RateLimitLayer {
    RateLimitLayer::new(u64::from(limit.burst), window(limit))
}

fn window(limit: HostRateLimit) -> Duration {
    Duration::from_secs_f64(f64::from(limit.burst) / f64::from(limit.qps))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::{Layer, Service, ServiceExt};

    #[test]
    fn the_window_holds_one_burst_at_the_average_rate() {
        assert_eq!(
            window(HostRateLimit { qps: 40, burst: 80 }),
            Duration::from_secs(2)
        );
        assert_eq!(
            window(HostRateLimit {
                qps: 200,
                burst: 400
            }),
            Duration::from_secs(2)
        );
        assert_eq!(
            window(HostRateLimit { qps: 10, burst: 5 }),
            Duration::from_millis(500)
        );
    }

    /// The layer admits one burst at once and holds the next request until the window ends.
    #[tokio::test(start_paused = true)]
    async fn a_burst_passes_at_once_and_the_next_request_waits_for_the_window() {
        let limit = HostRateLimit { qps: 2, burst: 4 };
        let mut service = layer(limit).layer(tower::service_fn(|()| async {
            Ok::<_, std::convert::Infallible>(tokio::time::Instant::now())
        }));
        let start = tokio::time::Instant::now();
        let mut answered = Vec::new();
        for _ in 0..6 {
            answered.push(service.ready().await.unwrap().call(()).await.unwrap() - start);
        }
        assert!(
            answered[..4].iter().all(|t| *t == Duration::ZERO),
            "{answered:?}"
        );
        assert_eq!(answered[4], Duration::from_secs(2), "{answered:?}");
        assert_eq!(answered[5], Duration::from_secs(2), "{answered:?}");
    }
}
