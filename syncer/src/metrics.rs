//! The syncer's Prometheus registry, with vCluster's metric names so the seed's alert rules
//! and dashboards work unchanged.

use std::{future::Future, time::Instant};

use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry, TextEncoder};

/// 1 ms to 10 s: creation latency targets are tens of milliseconds.
const BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

fn histogram(name: &str, help: &str, label: &str) -> HistogramVec {
    HistogramVec::new(
        HistogramOpts::new(name, help).buckets(BUCKETS.to_vec()),
        &[label],
    )
    .expect("valid metric definition")
}

pub struct Metrics {
    registry: Registry,
    /// Failed reconciles, by resource kind (`vcluster_syncer_reconcile_errors_total`).
    pub reconcile_errors: IntCounterVec,
    /// Writes to the host API, by resource kind (the benchmark's writes per object and the
    /// "nothing written while idle" check read it).
    pub host_writes: IntCounterVec,
    /// Requests the API proxy answered, by route (`virtual`, `host_pod`, `local`) and code.
    pub proxy_requests: IntCounterVec,
    /// Time a key waited in its queue before a worker took it, by resource kind.
    pub queue_wait: HistogramVec,
    /// Time one reconcile took, by resource kind.
    pub reconcile_duration: HistogramVec,
    /// Round trips of the API calls on a pod's way to Running, by call (a fixed set:
    /// `host_apply`, `token_request`, `token_secret`, `bind`, `virtual_status`).
    pub api_call: HistogramVec,
    /// Write-through rollbacks that failed or gave up, by `resource` and `reason` (the
    /// names vCluster's troubleshooting guide uses).
    pub rollback_failures: IntCounterVec,
}

impl Metrics {
    pub fn new() -> Self {
        let registry = Registry::new();
        let reconcile_errors = IntCounterVec::new(
            Opts::new(
                "vcluster_syncer_reconcile_errors_total",
                "Reconciles of a synced object that failed, by resource kind",
            ),
            &["resource"],
        )
        .expect("valid metric definition");
        let host_writes = IntCounterVec::new(
            Opts::new(
                "vnest_syncer_host_writes_total",
                "Creates, updates and deletes the syncer sent to the host API, by resource kind",
            ),
            &["resource"],
        )
        .expect("valid metric definition");
        let proxy_requests = IntCounterVec::new(
            Opts::new(
                "vnest_syncer_proxy_requests_total",
                "Requests the API proxy answered, by route and HTTP status code",
            ),
            &["route", "code"],
        )
        .expect("valid metric definition");
        let rollback_failures = IntCounterVec::new(
            Opts::new(
                "vcluster_writethrough_rollback_failures_total",
                "Write-through rollbacks of rejected tenant writes that failed or gave up, by resource and reason",
            ),
            &["resource", "reason"],
        )
        .expect("valid metric definition");
        let queue_wait = histogram(
            "vnest_syncer_queue_wait_seconds",
            "Time a key waited in the work queue before a worker took it, by resource kind",
            "resource",
        );
        let reconcile_duration = histogram(
            "vnest_syncer_reconcile_duration_seconds",
            "Time one reconcile took, by resource kind",
            "resource",
        );
        let api_call = histogram(
            "vnest_syncer_api_call_seconds",
            "Round trip of the API calls a synced pod needs, by call",
            "call",
        );
        for metric in [
            &reconcile_errors,
            &host_writes,
            &proxy_requests,
            &rollback_failures,
        ] {
            registry
                .register(Box::new(metric.clone()))
                .expect("metric registered once");
        }
        for metric in [&queue_wait, &reconcile_duration, &api_call] {
            registry
                .register(Box::new(metric.clone()))
                .expect("metric registered once");
        }
        Metrics {
            registry,
            reconcile_errors,
            host_writes,
            proxy_requests,
            queue_wait,
            reconcile_duration,
            api_call,
            rollback_failures,
        }
    }

    /// Counts one write of a `kind` object to the host API server.
    pub fn count_host_write(&self, kind: &str) {
        self.host_writes.with_label_values(&[kind]).inc();
    }

    /// Awaits `call`, recording its round trip under `name` in [`Metrics::api_call`].
    pub async fn timed<T>(&self, name: &str, call: impl Future<Output = T>) -> T {
        let start = Instant::now();
        let out = call.await;
        self.api_call
            .with_label_values(&[name])
            .observe(start.elapsed().as_secs_f64());
        out
    }

    /// The registry in the Prometheus text format.
    pub fn render(&self) -> String {
        TextEncoder::new()
            .encode_to_string(&self.registry.gather())
            .unwrap_or_default()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The seed's `VClusterSyncErrors` alert reads this exact name.
    #[test]
    fn reconcile_errors_render_under_the_vcluster_name() {
        let m = Metrics::new();
        m.reconcile_errors.with_label_values(&["Pod"]).inc();
        let text = m.render();
        assert!(
            text.contains("vcluster_syncer_reconcile_errors_total{resource=\"Pod\"} 1"),
            "{text}"
        );
    }

    /// A timed call shows up as one observation of its histogram.
    #[tokio::test]
    async fn timed_calls_are_observed_by_name() {
        let m = Metrics::new();
        assert_eq!(m.timed("bind", async { 7 }).await, 7);
        let text = m.render();
        assert!(
            text.contains("vnest_syncer_api_call_seconds_count{call=\"bind\"} 1"),
            "{text}"
        );
    }
}
