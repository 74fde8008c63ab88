//! The syncer's Prometheus registry, with vCluster's metric names so the seed's alert rules
//! and dashboards work unchanged.

use prometheus::{IntCounterVec, Opts, Registry, TextEncoder};

pub struct Metrics {
    registry: Registry,
    /// Failed reconciles, by resource kind (`vcluster_syncer_reconcile_errors_total`).
    pub reconcile_errors: IntCounterVec,
    /// Writes to the host API, by resource kind (the benchmark's writes per object and the
    /// "nothing written while idle" check read it).
    pub host_writes: IntCounterVec,
    /// Requests the API proxy answered, by route (`virtual`, `host_pod`, `local`) and code.
    pub proxy_requests: IntCounterVec,
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
        for metric in [&reconcile_errors, &host_writes, &proxy_requests] {
            registry
                .register(Box::new(metric.clone()))
                .expect("metric registered once");
        }
        Metrics {
            registry,
            reconcile_errors,
            host_writes,
            proxy_requests,
        }
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
}
