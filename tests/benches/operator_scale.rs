//! Operator scale benchmark on the real test bed (not a timed test):
//!
//! ```sh
//! cargo build --release -p vnest-operator
//! cargo bench -p vnest-tests --bench operator_scale -- 200     # N VirtualClusters (default 200)
//! ```
//!
//! Creates N VirtualClusters (quickstart spec: policies on) and reports the time until all are
//! Ready, reconciles per second, API writes per VirtualCluster at creation, writes during an
//! idle period and during a full resync by a restarted operator (both should be 0), and the
//! operator's peak RSS.
//!
//! The operator runs cluster-wide but, through `--selector`, reconciles only this run's
//! VirtualClusters; other tests on the same bed still share its CPU.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use futures::StreamExt;

use k8s_openapi::api::core::v1::{Node, PersistentVolume};
use kube::{
    Api, Client,
    api::{ListParams, Patch, PatchParams, PostParams},
    runtime::{WatchStreamExt, watcher},
};
use serde_json::json;
use vnest_crds::VirtualCluster;
use vnest_tests::{
    OperatorProcess, TestNamespace, bed, crd, fixtures::free_port, measure::peak_rss_mib, wait,
};

/// KWOK nodes big enough for N control plane pods (the bed's two nodes hold 220 pods).
async fn add_bench_nodes(client: &Client, count: usize) {
    let nodes: Api<Node> = Api::all(client.clone());
    for i in 0..count {
        let node: Node = serde_json::from_value(json!({
            "metadata": {
                "name": format!("kwok-bench-{i}"),
                "annotations": { "kwok.x-k8s.io/node": "fake" },
                "labels": { "type": "kwok" },
            },
            "status": {
                "allocatable": { "cpu": "1000", "memory": "4Ti", "pods": "1000" },
                "capacity": { "cpu": "1000", "memory": "4Ti", "pods": "1000" },
            },
        }))
        .unwrap();
        let params = PatchParams::apply("vnest-bench").force();
        nodes
            .patch(&format!("kwok-bench-{i}"), &params, &Patch::Apply(&node))
            .await
            .expect("bench node");
    }
}

async fn remove_bench_nodes(client: &Client, count: usize) {
    let nodes: Api<Node> = Api::all(client.clone());
    for i in 0..count {
        let _ = nodes
            .delete(&format!("kwok-bench-{i}"), &Default::default())
            .await;
    }
}

fn is_ready(vc: &VirtualCluster) -> bool {
    vc.status.as_ref().is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
    })
}

/// The first moment each of this run's VirtualClusters (by namespace) was seen Ready.
type ReadyTimes = Arc<Mutex<HashMap<String, Instant>>>;

/// Records `vc` in `seen` if it is one of this run's and Ready, keeping the earliest sighting.
fn record_ready(seen: &ReadyTimes, run: &str, vc: &VirtualCluster) {
    let ns = vc.metadata.namespace.clone().unwrap_or_default();
    if ns.starts_with(run) && is_ready(vc) {
        seen.lock().unwrap().entry(ns).or_insert_with(Instant::now);
    }
}

/// Records Ready times from a watch. The watcher re-lists after a watch error (a 1,000-cluster
/// run lost 287 Ready times when the first error ended this loop); [`all_ready`] lists now and
/// then as well, so a VirtualCluster that turned Ready while the watch was down is still seen.
fn watch_ready_times(client: Client, run: String) -> ReadyTimes {
    let seen = ReadyTimes::default();
    let record = seen.clone();
    tokio::spawn(async move {
        let api: Api<VirtualCluster> = Api::all(client);
        let mut events = watcher(api, watcher::Config::default())
            .default_backoff()
            .applied_objects()
            .boxed();
        while let Some(event) = events.next().await {
            if let Ok(vc) = event {
                record_ready(&record, &run, &vc);
            }
        }
    });
    seen
}

/// Waits until all `n` VirtualClusters of the run were seen Ready. Counts what the watch
/// recorded and lists every 10 s (not every poll: at 1,000 a list is megabytes of JSON, and
/// the machine is shared); a failed list is retried at the next one.
async fn all_ready(api: &Api<VirtualCluster>, run: &str, seen: &ReadyTimes, n: usize) {
    let listed = Mutex::new(None::<Instant>);
    wait::until(
        "all VirtualClusters Ready",
        Duration::from_secs(1800),
        || async {
            let due = listed
                .lock()
                .unwrap()
                .is_none_or(|at| at.elapsed() >= Duration::from_secs(10));
            if due && seen.lock().unwrap().len() < n {
                *listed.lock().unwrap() = Some(Instant::now());
                if let Ok(list) = api.list(&ListParams::default()).await {
                    for vc in &list.items {
                        record_ready(seen, run, vc);
                    }
                }
            }
            let ready = seen.lock().unwrap().len();
            if ready == n { Ok(()) } else { Err(ready) }
        },
    )
    .await;
}

/// A counter of `op`, retried for a minute: a scrape can time out while the operator is busy,
/// and one failed scrape must not end a run before its summary.
async fn counter(op: &OperatorProcess, name: &str) -> f64 {
    wait::until(name, Duration::from_secs(60), || op.counter(name)).await
}

/// The `q` quantile (0..=1) of sorted `values`, nearest rank.
fn quantile(sorted: &[f64], q: f64) -> f64 {
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// Prints the `vnest_api_writes_total` series that moved between two scrapes: what wrote.
fn print_write_changes(before: &str, after: &str) {
    let series = |text: &str| -> HashMap<String, String> {
        text.lines()
            .filter(|l| l.starts_with("vnest_api_writes_total{"))
            .filter_map(|l| l.rsplit_once(' '))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let before = series(before);
    for (key, value) in series(after) {
        if before.get(&key) != Some(&value) {
            let was = before.get(&key).map_or("0", String::as_str);
            println!("  write: {key} {was} -> {value}");
        }
    }
}

#[tokio::main]
async fn main() {
    let n: usize = vnest_tests::measure::size_arg(200);
    let binary = std::env::var("VNEST_OPERATOR_BIN")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| vnest_tests::bed::repo_root().join("target/release/vnest-operator"));
    assert!(
        binary.exists(),
        "build the operator first: cargo build --release -p vnest-operator"
    );
    let client = bed().host().await;
    crd::install(&client).await;
    add_bench_nodes(&client, n.div_ceil(500) + 1).await;
    // One namespace per VirtualCluster, as platform teams run them (quotas are per namespace).
    let lease_ns = TestNamespace::create(&client, "bench").await;
    let run = lease_ns.name.clone();
    // Only this run's VirtualClusters: other tests may share the bed.
    let selector = vec![format!("--selector=vnest-bench={run}")];
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let vc_namespace = |i: usize| format!("{run}-vc-{i}");
    for i in 0..n {
        let ns: k8s_openapi::api::core::v1::Namespace = serde_json::from_value(json!({
            "metadata": { "name": vc_namespace(i), "labels": { "vnest-bench": run } }
        }))
        .unwrap();
        namespaces
            .create(&PostParams::default(), &ns)
            .await
            .expect("bench namespace");
        let pv: PersistentVolume = serde_json::from_value(json!({
            "metadata": { "name": format!("pv-{run}-{i}"), "labels": { "vnest-bench": run } },
            "spec": {
                "capacity": { "storage": "10Gi" }, "accessModes": ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Retain",
                "hostPath": { "path": format!("/tmp/bench/{i}") },
                "claimRef": { "namespace": vc_namespace(i), "name": "data-vc-0" },
            }
        }))
        .unwrap();
        pvs.create(&PostParams::default(), &pv)
            .await
            .expect("bench PV");
    }

    // Every namespace watched, the Lease in the run's own, only this run's VirtualClusters.
    let start_operator = || {
        let kubeconfig = bed().host_kubeconfig();
        OperatorProcess::start_as(
            &binary,
            &kubeconfig,
            None,
            &run,
            "bench",
            free_port(),
            &selector,
        )
    };
    let op = start_operator();
    wait::until("operator metrics", Duration::from_secs(30), || async {
        op.metrics().await
    })
    .await;
    let vcs: Api<VirtualCluster> = Api::all(client.clone());
    let ready_at = watch_ready_times(client.clone(), run.clone());
    let mut created_at = HashMap::new();
    let started = Instant::now();
    for i in 0..n {
        let vc: VirtualCluster = serde_json::from_value(json!({
            "apiVersion": "vnest.dev/v1alpha1", "kind": "VirtualCluster",
            "metadata": { "name": "vc", "namespace": vc_namespace(i), "labels": { "vnest-bench": run } },
            "spec": { "policies": { "resourceQuota": { "enabled": true }, "limitRange": { "enabled": true }, "networkPolicy": { "enabled": true } } },
        }))
        .unwrap();
        Api::<VirtualCluster>::namespaced(client.clone(), &vc_namespace(i))
            .create(&PostParams::default(), &vc)
            .await
            .expect("create VirtualCluster");
        created_at.insert(vc_namespace(i), Instant::now());
    }
    let created_in = started.elapsed();
    all_ready(&vcs, &run, &ready_at, n).await;
    let all_ready = started.elapsed();
    let mut latencies: Vec<f64> = {
        let ready_at = ready_at.lock().unwrap();
        created_at
            .iter()
            .filter_map(|(ns, created)| ready_at.get(ns).map(|r| (*r - *created).as_secs_f64()))
            .collect()
    };
    latencies.sort_by(f64::total_cmp);
    let writes = op
        .settled_writes(Duration::from_secs(5), Duration::from_secs(600))
        .await;
    let reconciles = counter(&op, "vnest_reconcile_total").await;
    // Full single-object reads (0 on builds before the metadata-only caches, which had none).
    let reads = counter(&op, "vnest_api_reads_total").await;
    let settle_time = started.elapsed();
    println!("writes until settled:");
    print_write_changes("", &op.metrics().await.unwrap_or_default());

    let before_idle = op.metrics().await.unwrap_or_default();
    tokio::time::sleep(Duration::from_secs(30)).await;
    let idle_writes = counter(&op, "vnest_api_writes_total").await - writes;
    let idle_reads = counter(&op, "vnest_api_reads_total").await - reads;
    if idle_writes > 0.0 {
        print_write_changes(&before_idle, &op.metrics().await.unwrap_or_default());
    }
    let rss = peak_rss_mib(op.pid());
    drop(op);

    // A fresh operator reconciles every VirtualCluster once on start: a full resync.
    let resync = start_operator();
    let resync_started = Instant::now();
    resync.reconciled(n as f64, Duration::from_secs(600)).await;
    let resync_time = resync_started.elapsed();
    let resync_writes = counter(&resync, "vnest_api_writes_total").await;
    let resync_reads = counter(&resync, "vnest_api_reads_total").await;
    if resync_writes > 0.0 {
        print_write_changes("", &resync.metrics().await.unwrap_or_default());
    }
    let resync_rss = peak_rss_mib(resync.pid());

    println!("operator_scale N={n}");
    println!(
        "  create requests sent in          {:>8.1} s",
        created_in.as_secs_f64()
    );
    println!(
        "  all Ready after                  {:>8.1} s",
        all_ready.as_secs_f64()
    );
    println!(
        "  create -> Ready latency          p50 {:.1} s, p90 {:.1} s, p99 {:.1} s, max {:.1} s",
        quantile(&latencies, 0.5),
        quantile(&latencies, 0.9),
        quantile(&latencies, 0.99),
        quantile(&latencies, 1.0)
    );
    println!(
        "  reconciles                       {reconciles:>8.0} ({:.1}/s until settled)",
        reconciles / settle_time.as_secs_f64()
    );
    println!(
        "  API writes per VirtualCluster    {:>8.1} (incl. status and events)",
        writes / n as f64
    );
    println!(
        "  API reads per VirtualCluster     {:>8.1} (single objects, not watches)",
        reads / n as f64
    );
    println!("  writes in 30 s idle              {idle_writes:>8.0} (reads {idle_reads:.0})");
    println!(
        "  full resync: {n} reconciles in {:.1} s, writes {resync_writes:.0}, reads {resync_reads:.0}",
        resync_time.as_secs_f64()
    );
    println!(
        "  operator peak RSS                {rss:>8.1} MiB (resync process: {resync_rss:.1} MiB)"
    );
    // Clean up while the operator still runs, so its finalizer lets the VirtualClusters go.
    for i in 0..n {
        let _ = namespaces
            .delete(&vc_namespace(i), &Default::default())
            .await;
    }
    wait::until(
        "bench VirtualClusters deleted",
        Duration::from_secs(600),
        || async {
            let left = vcs
                .list(&ListParams::default())
                .await
                .map_err(|e| e.to_string())?
                .items
                .iter()
                .filter(|vc| {
                    vc.metadata
                        .namespace
                        .as_deref()
                        .is_some_and(|ns| ns.starts_with(&run))
                })
                .count();
            if left == 0 {
                Ok(())
            } else {
                Err(format!("{left} left"))
            }
        },
    )
    .await;
    drop(resync);
    let selector = ListParams::default().labels(&format!("vnest-bench={run}"));
    let _ = pvs.delete_collection(&Default::default(), &selector).await;
    remove_bench_nodes(&client, n.div_ceil(500) + 1).await;
    lease_ns.delete(&client).await;
}
