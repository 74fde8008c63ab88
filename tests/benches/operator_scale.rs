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

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, PersistentVolume};
use kube::{
    Api, Client,
    api::{ListParams, Patch, PatchParams, PostParams},
};
use serde_json::json;
use vnest_crds::VirtualCluster;
use vnest_tests::{OperatorProcess, TestNamespace, bed, crd, fixtures::free_port, wait};

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

/// Ready VirtualClusters in this run's namespaces.
async fn ready_count(api: &Api<VirtualCluster>, run: &str) -> usize {
    let list = api
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    list.iter()
        .filter(|vc| {
            vc.metadata
                .namespace
                .as_deref()
                .is_some_and(|ns| ns.starts_with(run))
        })
        .filter(|vc| {
            vc.status.as_ref().is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "True")
            })
        })
        .count()
}

fn peak_rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// Waits until the operator's write counter stops moving for `quiet`; returns it.
async fn settled_writes(op: &OperatorProcess, quiet: Duration) -> f64 {
    wait::until(
        "operator writes to settle",
        Duration::from_secs(600),
        || async {
            let before = op.counter("vnest_api_writes_total").await?;
            tokio::time::sleep(quiet).await;
            let after = op.counter("vnest_api_writes_total").await?;
            if before == after {
                Ok(after)
            } else {
                Err(format!("{before} -> {after}"))
            }
        },
    )
    .await
}

#[tokio::main]
async fn main() {
    let n: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(200);
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

    let op = OperatorProcess::start_binary(&binary, bed(), None, &run, "bench", free_port());
    wait::until("operator metrics", Duration::from_secs(30), || async {
        op.metrics().await
    })
    .await;
    let vcs: Api<VirtualCluster> = Api::all(client.clone());
    let started = Instant::now();
    for i in 0..n {
        let vc: VirtualCluster = serde_json::from_value(json!({
            "apiVersion": "vnest.dev/v1alpha1", "kind": "VirtualCluster",
            "metadata": { "name": "vc", "namespace": vc_namespace(i) },
            "spec": { "policies": { "resourceQuota": { "enabled": true }, "limitRange": { "enabled": true }, "networkPolicy": { "enabled": true } } },
        }))
        .unwrap();
        Api::<VirtualCluster>::namespaced(client.clone(), &vc_namespace(i))
            .create(&PostParams::default(), &vc)
            .await
            .expect("create VirtualCluster");
    }
    let created_in = started.elapsed();
    wait::until(
        "all VirtualClusters Ready",
        Duration::from_secs(1800),
        || async {
            let ready = ready_count(&vcs, &run).await;
            if ready == n { Ok(()) } else { Err(ready) }
        },
    )
    .await;
    let all_ready = started.elapsed();
    let writes = settled_writes(&op, Duration::from_secs(5)).await;
    let reconciles = op.counter("vnest_reconcile_total").await.unwrap();
    let settle_time = started.elapsed();

    tokio::time::sleep(Duration::from_secs(30)).await;
    let idle_writes = op.counter("vnest_api_writes_total").await.unwrap() - writes;
    let rss = peak_rss_mib(op.pid());
    drop(op);

    // A fresh operator reconciles every VirtualCluster once on start: a full resync.
    let resync = OperatorProcess::start_binary(&binary, bed(), None, &run, "bench", free_port());
    let resync_started = Instant::now();
    wait::until(
        "resync reconciles every VirtualCluster",
        Duration::from_secs(600),
        || async {
            let done = resync.counter("vnest_reconcile_total").await?;
            if done >= n as f64 {
                Ok(())
            } else {
                Err(format!("{done}"))
            }
        },
    )
    .await;
    let resync_time = resync_started.elapsed();
    let resync_writes = resync.counter("vnest_api_writes_total").await.unwrap();
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
        "  reconciles                       {reconciles:>8.0} ({:.1}/s until settled)",
        reconciles / settle_time.as_secs_f64()
    );
    println!(
        "  API writes per VirtualCluster    {:>8.1} (incl. status and events)",
        writes / n as f64
    );
    println!("  writes in 30 s idle              {idle_writes:>8.0}");
    println!(
        "  full resync: {n} reconciles in {:.1} s, writes {resync_writes:.0}",
        resync_time.as_secs_f64()
    );
    println!(
        "  operator peak RSS                {rss:>8.1} MiB (resync process: {resync_rss:.1} MiB)"
    );
    drop(resync);
    let selector = ListParams::default().labels(&format!("vnest-bench={run}"));
    let _ = namespaces
        .delete_collection(&Default::default(), &selector)
        .await;
    lease_ns.delete(&client).await;
    let _ = pvs.delete_collection(&Default::default(), &selector).await;
}
