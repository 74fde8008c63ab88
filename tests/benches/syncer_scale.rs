//! Syncer scale benchmark on the real test bed (not a timed test):
//!
//! ```sh
//! cargo build -p vnest-operator && cargo build --release -p vnest-syncer
//! VNEST_SYNCER_BIN=target/release/vnest-syncer \
//!   cargo bench -p vnest-tests --bench syncer_scale -- 1000    # N pods (default 1000)
//! ```
//!
//! Creates N pods in a virtual namespace and reports p50/p99 latency from the virtual create
//! returning to the host pod being seen, and from the host pod Running to the virtual pod
//! Running; host API writes per pod; writes during 60 s of idleness (target 0); the
//! syncer's peak RSS; and, from the syncer's own histograms, where the time went (queue
//! wait, reconcile, each API call). The bed's two KWOK nodes hold 220 pods, so the bench
//! adds fake KWOK nodes of its own for N and deletes them afterwards.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Node, Pod, ServiceAccount};
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, PostParams},
    runtime::{WatchStreamExt, watcher},
};
use serde_json::json;
use vnest_crds::meta::{ANNOTATION_OBJECT_NAME, LABEL_SYNCER_NAMESPACE};
use vnest_tests::{
    OperatorProcess, SyncerProcess, TestNamespace, bed,
    fixtures::{create_virtual_cluster, free_port, host_namespace},
    measure::{peak_rss_mib, percentile},
    syncer::SyncerWiring,
    wait,
};

/// Pods each added fake node holds.
const PODS_PER_NODE: usize = 250;

/// A fake node KWOK runs (as `tests/testbed/up.sh` makes them), holding many pods.
fn fake_node(name: &str) -> Node {
    serde_json::from_value(json!({
        "metadata": {
            "name": name,
            "annotations": { "kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0" },
            "labels": { "type": "kwok", "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "vnest-tests/bench": "syncer" },
        },
        "status": {
            "allocatable": { "cpu": "256", "memory": "1Ti", "pods": PODS_PER_NODE.to_string() },
            "capacity": { "cpu": "256", "memory": "1Ti", "pods": PODS_PER_NODE.to_string() },
            "nodeInfo": { "architecture": "amd64", "operatingSystem": "linux", "kubeletVersion": "fake", "kubeProxyVersion": "fake" },
        },
    }))
    .expect("node JSON")
}

/// `<name>_sum / <name>_count` for each label value of a histogram, in milliseconds.
fn histogram_means(text: &str, name: &str) -> Vec<(String, f64, f64)> {
    let value = |line: &str| line.rsplit(' ').next()?.parse::<f64>().ok();
    let mut out = Vec::new();
    for line in text
        .lines()
        .filter(|l| l.starts_with(&format!("{name}_count{{")))
    {
        let labels = &line[line.find('{').unwrap_or(0)..=line.find('}').unwrap_or(0)];
        let sum = text
            .lines()
            .find(|l| l.starts_with(&format!("{name}_sum{labels}")))
            .and_then(value);
        if let (Some(count), Some(sum)) = (value(line), sum) {
            out.push((labels.to_string(), count, sum / count.max(1.0) * 1000.0));
        }
    }
    out
}

/// Per pod name: when an event was first seen.
type Seen = Arc<Mutex<HashMap<String, Instant>>>;

fn record(seen: &Seen, name: String) {
    seen.lock()
        .unwrap()
        .entry(name)
        .or_insert_with(Instant::now);
}

fn running(pod: &Pod) -> bool {
    pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
}

fn latencies(from: &Seen, to: &Seen) -> Vec<Duration> {
    let (from, to) = (from.lock().unwrap(), to.lock().unwrap());
    from.iter()
        .filter_map(|(name, start)| Some(to.get(name)?.saturating_duration_since(*start)))
        .collect()
}

#[tokio::main]
async fn main() {
    let n: usize = vnest_tests::measure::size_arg(1000);
    let (host, ns) = host_namespace("sy-bench").await;
    let nodes: Api<Node> = Api::all(host.clone());
    let node_names: Vec<String> = (0..n.div_ceil(PODS_PER_NODE))
        .map(|i| format!("{}-node-{i}", ns.name))
        .collect();
    for name in &node_names {
        nodes
            .create(&PostParams::default(), &fake_node(name))
            .await
            .expect("create fake node");
    }
    let _operator = OperatorProcess::start(bed(), &ns.name, "op", free_port());
    create_virtual_cluster(&host, &ns.name, "vc", json!({})).await;
    let virt = bed().virtual_cluster().await;
    let vns = TestNamespace::create(&virt, "sy-bench").await;
    let wiring = SyncerWiring::from_operator(&host, &ns.name, "vc", &vns.name).await;
    let accounts: Api<ServiceAccount> = Api::namespaced(virt.clone(), &vns.name);
    wait::until(
        "virtual default ServiceAccount",
        Duration::from_secs(60),
        || async { accounts.get("default").await.map_err(|e| e.to_string()) },
    )
    .await;
    let syncer = SyncerProcess::start(&wiring, free_port());
    wait::until("syncer ready", Duration::from_secs(60), || {
        syncer.get("/readyz")
    })
    .await;

    let (created, host_seen, host_running, virt_running): (Seen, Seen, Seen, Seen) =
        Default::default();
    let host_pods: Api<Pod> = Api::namespaced(host.clone(), &ns.name);
    let host_watch = watcher(
        host_pods,
        watcher::Config::default().labels(&format!("{LABEL_SYNCER_NAMESPACE}={}", vns.name)),
    )
    .applied_objects()
    .try_for_each({
        let (seen, run) = (host_seen.clone(), host_running.clone());
        move |p| {
            if let Some(name) = p.annotations().get(ANNOTATION_OBJECT_NAME) {
                record(&seen, name.clone());
                if running(&p) {
                    record(&run, name.clone());
                }
            }
            futures::future::ready(Ok(()))
        }
    });
    let virt_pods: Api<Pod> = Api::namespaced(virt.clone(), &vns.name);
    let virt_watch = watcher(virt_pods.clone(), watcher::Config::default())
        .applied_objects()
        .try_for_each({
            let run = virt_running.clone();
            move |p| {
                if running(&p) {
                    record(&run, p.name_any());
                }
                futures::future::ready(Ok(()))
            }
        });
    let watches = tokio::spawn(async move {
        let _ = futures::join!(host_watch, virt_watch);
    });

    let writes = "vnest_syncer_host_writes_total";
    let writes_before = syncer.counter(writes).await.unwrap();
    let started = Instant::now();
    futures::stream::iter(0..n)
        .for_each_concurrent(16, |i| {
            let (api, created) = (virt_pods.clone(), created.clone());
            async move {
                let name = format!("bench-{i}");
                let pod: Pod = serde_json::from_value(json!({
                    "metadata": { "name": name, "labels": { "app": "bench" } },
                    "spec": { "containers": [{ "name": "app", "image": "nginx" }] },
                }))
                .unwrap();
                api.create(&PostParams::default(), &pod)
                    .await
                    .expect("create pod");
                record(&created, name);
            }
        })
        .await;
    wait::until(
        "every virtual pod Running",
        Duration::from_secs(600),
        || async {
            let done = virt_running.lock().unwrap().len();
            (done == n).then_some(()).ok_or(format!("{done}/{n}"))
        },
    )
    .await;
    let all_running = started.elapsed();
    let writes_total = syncer.counter(writes).await.unwrap() - writes_before;
    let idle_before = syncer.counter(writes).await.unwrap();
    tokio::time::sleep(Duration::from_secs(60)).await;
    let idle_writes = syncer.counter(writes).await.unwrap() - idle_before;
    let rss = peak_rss_mib(syncer.pid());
    watches.abort();

    let create = latencies(&created, &host_seen);
    let status = latencies(&host_running, &virt_running);
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!("syncer_scale N={n}");
    println!(
        "  all virtual pods Running after     {:>8.1} s",
        all_running.as_secs_f64()
    );
    println!(
        "  virtual create -> host pod seen    p50 {:>7.1} ms  p99 {:>7.1} ms",
        ms(percentile(create.clone(), 0.5)),
        ms(percentile(create, 0.99))
    );
    println!(
        "  host Running -> virtual Running    p50 {:>7.1} ms  p99 {:>7.1} ms",
        ms(percentile(status.clone(), 0.5)),
        ms(percentile(status, 0.99))
    );
    println!(
        "  host writes per pod                {:>8.2}",
        writes_total / n as f64
    );
    println!("  host writes in 60 s idle           {idle_writes:>8.0}");
    println!("  syncer peak RSS                    {rss:>8.1} MiB");
    let metrics = syncer.get("/metrics").await.unwrap_or_default();
    for histogram in [
        "vnest_syncer_queue_wait_seconds",
        "vnest_syncer_reconcile_duration_seconds",
        "vnest_syncer_api_call_seconds",
    ] {
        for (labels, count, mean_ms) in histogram_means(&metrics, histogram) {
            println!("  {histogram}{labels:<22} n {count:>6.0}  mean {mean_ms:>7.1} ms");
        }
    }
    for line in metrics
        .lines()
        .filter(|l| l.starts_with("vnest_syncer_host_writes_total{"))
    {
        println!("  {line}");
    }
    drop(syncer);
    let _ = virt_pods
        .delete_collection(
            &DeleteParams::default().grace_period(0),
            &Default::default(),
        )
        .await;
    vns.delete(&virt).await;
    ns.delete(&host).await;
    for name in &node_names {
        let _ = nodes.delete(name, &DeleteParams::default()).await;
    }
}
