//! Prometheus metrics and the `/metrics`, `/healthz`, `/readyz` endpoints.

use std::{
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
};

use axum::{Router, extract::State, http::StatusCode, routing::get};
use prometheus::{
    Encoder, Histogram, HistogramOpts, IntCounterVec, IntGaugeVec, Opts, Registry, TextEncoder,
    core::Collector,
};

/// Every `reason` of `vnest_reconcile_errors_total`; each series exists from the start (at 0),
/// so alerts and `rate()` see a failure's first increment.
pub const ERROR_REASONS: [&str; 5] = ["conflict", "api", "certificates", "apply", "finalizer"];

#[derive(Clone)]
pub struct Metrics {
    pub registry: Registry,
    pub reconciles: IntCounterVec,
    pub reconcile_errors: IntCounterVec,
    pub reconcile_duration: Histogram,
    /// Create/update/delete requests the reconciler sent, by kind and verb.
    pub api_writes: IntCounterVec,
    /// Full reads the reconciler sent (its caches hold metadata only), by kind and why:
    /// `verify` (a child not verified yet, or with a field taken), `content` (a field a
    /// reconcile needs, read again only after the object changed), `certificates`.
    pub api_reads: IntCounterVec,
    pub virtual_clusters: IntGaugeVec,
    /// VirtualClusters scaled to zero, by reason (`Paused`, `Schedule`, `Inactivity`).
    pub sleeping: IntGaugeVec,
    pub sleeps: IntCounterVec,
    /// Wakes, by what ended the sleep (`Schedule`, `Request`, `Resumed`, `SleepModeRemoved`).
    pub wakes: IntCounterVec,
    pub auto_deletes: IntCounterVec,
    /// Connections to the wake listener, by outcome (`Waking`, `Paused`, `Refused`, `Timeout`).
    pub wake_connections: IntCounterVec,
}

impl Default for Metrics {
    fn default() -> Self {
        let registry = Registry::new();
        let counter = |name: &str, help: &str, labels: &[&str]| {
            register(&registry, IntCounterVec::new(Opts::new(name, help), labels))
        };
        let gauge = |name: &str, help: &str, labels: &[&str]| {
            register(&registry, IntGaugeVec::new(Opts::new(name, help), labels))
        };
        let reconciles = counter(
            "vnest_reconcile_total",
            "VirtualCluster reconciles",
            &["result"],
        );
        let reconcile_errors = counter(
            "vnest_reconcile_errors_total",
            "Failed VirtualCluster reconciles",
            &["reason"],
        );
        let reconcile_duration = register(
            &registry,
            Histogram::with_opts(
                HistogramOpts::new(
                    "vnest_reconcile_duration_seconds",
                    "Time spent in one reconcile",
                )
                .buckets(vec![
                    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                ]),
            ),
        );
        let api_writes = counter(
            "vnest_api_writes_total",
            "Writes the operator sent to the API server",
            &["kind", "verb"],
        );
        let api_reads = counter(
            "vnest_api_reads_total",
            "Single-object reads the operator sent to the API server",
            &["kind", "purpose"],
        );
        let virtual_clusters = gauge(
            "vnest_virtual_clusters",
            "VirtualClusters by phase",
            &["phase"],
        );
        let sleeping = gauge(
            "vnest_sleeping_virtual_clusters",
            "VirtualClusters scaled to zero, by reason",
            &["reason"],
        );
        let sleeps = counter(
            "vnest_sleeps_total",
            "VirtualClusters put to sleep",
            &["reason"],
        );
        let wakes = counter("vnest_wakes_total", "VirtualClusters woken", &["reason"]);
        let auto_deletes = counter(
            "vnest_auto_deletes_total",
            "VirtualClusters deleted by spec.autoDelete",
            &["reason"],
        );
        let wake_connections = counter(
            "vnest_wake_connections_total",
            "Connections to the wake endpoint, by outcome",
            &["outcome"],
        );
        for result in ["ok", "error"] {
            reconciles.with_label_values(&[result]);
        }
        for reason in ERROR_REASONS {
            reconcile_errors.with_label_values(&[reason]);
        }
        Metrics {
            registry,
            reconciles,
            reconcile_errors,
            reconcile_duration,
            api_writes,
            api_reads,
            virtual_clusters,
            sleeping,
            sleeps,
            wakes,
            auto_deletes,
            wake_connections,
        }
    }
}

/// Registers `metric` with `registry` and returns it. The definitions are constants, so an
/// invalid or twice-registered one is a programming error.
fn register<M: Collector + Clone + 'static>(
    registry: &Registry,
    metric: prometheus::Result<M>,
) -> M {
    let metric = metric.expect("valid metric definition");
    registry
        .register(Box::new(metric.clone()))
        .expect("metric registered once");
    metric
}

impl Metrics {
    pub fn write(&self, kind: &str, verb: &str) {
        self.api_writes.with_label_values(&[kind, verb]).inc();
    }

    pub fn read(&self, kind: &str, purpose: &str) {
        self.api_reads.with_label_values(&[kind, purpose]).inc();
    }

    pub fn render(&self) -> String {
        let mut buffer = Vec::new();
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut buffer);
        String::from_utf8(buffer).unwrap_or_default()
    }
}

/// Set once the controller's caches have synced.
#[derive(Clone, Default)]
pub struct Readiness(Arc<AtomicBool>);

impl Readiness {
    pub fn set_ready(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
    fn is_ready(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

pub async fn serve(
    address: SocketAddr,
    metrics: Metrics,
    readiness: Readiness,
) -> anyhow::Result<()> {
    let app = Router::new()
        .route(
            "/metrics",
            get(|State((m, _)): State<(Metrics, Readiness)>| async move { m.render() }),
        )
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/readyz",
            get(|State((_, r)): State<(Metrics, Readiness)>| async move {
                if r.is_ready() {
                    (StatusCode::OK, "ok")
                } else {
                    (StatusCode::SERVICE_UNAVAILABLE, "caches not synced")
                }
            }),
        )
        .with_state((metrics, readiness));
    let listener = tokio::net::TcpListener::bind(address).await?;
    axum::serve(listener, app).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `register` returns is what the registry reports.
    #[test]
    fn a_registered_metric_is_gathered() {
        let registry = Registry::new();
        let c = register(
            &registry,
            IntCounterVec::new(Opts::new("t_total", "t"), &["l"]),
        );
        c.with_label_values(&["x"]).inc();
        let families = registry.gather();
        assert_eq!(families.len(), 1);
        assert_eq!(families[0].name(), "t_total");
    }

    #[test]
    fn outcome_and_error_series_exist_before_the_first_reconcile() {
        let text = Metrics::default().render();
        for reason in ERROR_REASONS {
            assert!(
                text.contains(&format!(
                    "vnest_reconcile_errors_total{{reason=\"{reason}\"}} 0"
                )),
                "{reason} missing:\n{text}"
            );
        }
        assert!(
            text.contains("vnest_reconcile_total{result=\"error\"} 0"),
            "{text}"
        );
    }

    #[test]
    fn rendered_metrics_carry_the_documented_names() {
        let m = Metrics::default();
        m.reconciles.with_label_values(&["ok"]).inc();
        m.write("StatefulSet", "apply");
        m.virtual_clusters.with_label_values(&["Running"]).set(3);
        m.reconcile_duration.observe(0.01);
        m.sleeping.with_label_values(&["Schedule"]).set(2);
        m.sleeps.with_label_values(&["Inactivity"]).inc();
        m.wakes.with_label_values(&["Request"]).inc();
        m.auto_deletes.with_label_values(&["AfterCreation"]).inc();
        let text = m.render();
        assert!(
            text.contains("vnest_reconcile_total{result=\"ok\"} 1"),
            "{text}"
        );
        assert!(text.contains("vnest_api_writes_total{kind=\"StatefulSet\",verb=\"apply\"} 1"));
        assert!(text.contains("vnest_virtual_clusters{phase=\"Running\"} 3"));
        assert!(text.contains("vnest_reconcile_duration_seconds_count 1"));
        assert!(text.contains("vnest_sleeping_virtual_clusters{reason=\"Schedule\"} 2"));
        assert!(text.contains("vnest_sleeps_total{reason=\"Inactivity\"} 1"));
        assert!(text.contains("vnest_wakes_total{reason=\"Request\"} 1"));
        assert!(text.contains("vnest_auto_deletes_total{reason=\"AfterCreation\"} 1"));
    }
}
