//! API proxy benchmark on the real test bed (not a timed test):
//!
//! ```sh
//! cargo build -p vnest-operator && cargo build --release -p vnest-syncer
//! VNEST_SYNCER_BIN=$PWD/target/release/vnest-syncer \
//!   cargo bench -p vnest-tests --bench proxy_latency -- 1000    # N requests (default 1000)
//! ```
//!
//! The same GET of a namespace, N times in a row and N times 16 at a time, straight to the
//! virtual API server (the bed's admin certificate) and through the syncer's proxy (the
//! tenant's `vc-<name>` certificate, impersonated): p50/p90/p99 of each and the proxy's
//! added p50; the activity Lease writes the run caused (at most one per 30 s); the syncer's
//! peak RSS.

use std::time::{Duration, Instant};

use futures::{StreamExt, stream};
use k8s_openapi::api::{coordination::v1::Lease, core::v1::Namespace};
use kube::{Api, Client};
use serde_json::json;
use vnest_tests::{
    SyncerProcess, TestNamespace, bed,
    fixtures::{create_virtual_cluster, free_port, setup},
    measure::{peak_rss_mib, report_ms},
    syncer::SyncerWiring,
    wait,
};

/// Width of the label column of the latency report.
const LABEL_WIDTH: usize = 34;

const CONCURRENCY: usize = 16;

async fn get_once(client: &Client, name: &str) -> Duration {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let start = Instant::now();
    namespaces.get(name).await.expect("GET namespace");
    start.elapsed()
}

async fn sequential(client: &Client, name: &str, n: usize) -> Vec<Duration> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(get_once(client, name).await);
    }
    out
}

async fn concurrent(client: &Client, name: &str, n: usize) -> (Vec<Duration>, Duration) {
    let start = Instant::now();
    let out = stream::iter(0..n)
        .map(|_| get_once(client, name))
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    (out, start.elapsed())
}

async fn renew_time(leases: &Api<Lease>) -> Option<String> {
    let lease = leases.get_opt("vc-activity").await.ok()??;
    Some(format!("{:?}", lease.spec?.renew_time?))
}

#[tokio::main]
async fn main() {
    let n: usize = vnest_tests::measure::size_arg(1000);
    let (host, ns, _operator) = setup("px-bench").await;
    create_virtual_cluster(&host, &ns.name, "vc", json!({})).await;
    let direct = bed().virtual_cluster().await;
    let vns = TestNamespace::create(&direct, "px-bench").await;
    let wiring = SyncerWiring::from_operator(&host, &ns.name, "vc", &vns.name).await;
    let syncer = SyncerProcess::start(&wiring, free_port());
    let proxied = syncer.tenant_client().await;
    wait::until("proxy answers", Duration::from_secs(60), || async {
        let namespaces: Api<Namespace> = Api::all(proxied.clone());
        namespaces.get(&vns.name).await.map_err(|e| e.to_string())
    })
    .await;
    // Warm both paths (connections, TLS sessions, caches).
    sequential(&direct, &vns.name, 50).await;
    sequential(&proxied, &vns.name, 50).await;

    let leases: Api<Lease> = Api::namespaced(host.clone(), &ns.name);
    let mut renewals = Vec::new();
    let started = Instant::now();
    let watch_lease = async {
        loop {
            if let Some(t) = renew_time(&leases).await
                && renewals.last() != Some(&t)
            {
                renewals.push(t);
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    };
    let measure = async {
        let direct_seq = sequential(&direct, &vns.name, n).await;
        let proxied_seq = sequential(&proxied, &vns.name, n).await;
        let (direct_par, direct_took) = concurrent(&direct, &vns.name, n).await;
        let (proxied_par, proxied_took) = concurrent(&proxied, &vns.name, n).await;
        (
            direct_seq,
            proxied_seq,
            direct_par,
            direct_took,
            proxied_par,
            proxied_took,
        )
    };
    let (direct_seq, proxied_seq, direct_par, direct_took, proxied_par, proxied_took) = tokio::select! {
        r = measure => r,
        () = watch_lease => unreachable!("the Lease poll never ends"),
    };
    let ran = started.elapsed();

    println!("proxy_latency N={n} (GET namespace)");
    let d = report_ms("direct, one at a time", LABEL_WIDTH, &direct_seq);
    let p = report_ms(
        "through the proxy, one at a time",
        LABEL_WIDTH,
        &proxied_seq,
    );
    println!(
        "  proxy adds                         p50 {:.2} ms",
        (p.as_secs_f64() - d.as_secs_f64()) * 1000.0
    );
    report_ms(
        &format!("direct, {CONCURRENCY} at a time"),
        LABEL_WIDTH,
        &direct_par,
    );
    report_ms(
        &format!("through the proxy, {CONCURRENCY} at a time"),
        LABEL_WIDTH,
        &proxied_par,
    );
    let rate = |took: Duration| n as f64 / took.as_secs_f64();
    println!(
        "  throughput                         direct {:.0}/s, through the proxy {:.0}/s",
        rate(direct_took),
        rate(proxied_took)
    );
    println!(
        "  activity Lease renewals seen       {} in {:.0} s (at most one per 30 s)",
        renewals.len(),
        ran.as_secs_f64()
    );
    println!(
        "  syncer peak RSS                    {:.1} MiB",
        peak_rss_mib(syncer.pid())
    );
    vns.delete(&direct).await;
    ns.delete(&host).await;
}
