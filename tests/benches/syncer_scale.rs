//! Syncer scale benchmark on the real test bed (not a timed test):
//!
//! ```sh
//! cargo build -p vnest-operator && cargo build --release -p vnest-syncer
//! VNEST_SYNCER_BIN=target/release/vnest-syncer \
//!   cargo bench -p vnest-tests --bench syncer_scale -- 1000    # N pods (default 1000)
//! ```
//!
//! Side by side in one run, each path with the same client concurrency: N pods created straight
//! on the host (the API server's own limit), then the same N pods created in a virtual namespace
//! and synced; then both paths again at a steady 20 pods/s. For each: the time from the first
//! create sent to the last pod seen on the host (and the syncer's ratio to the direct time), and
//! the percentiles from a pod's create being sent to its host pod being seen. For the syncer
//! also: host Running → virtual Running, host API writes per pod, writes during 60 s of
//! idleness (target 0), its peak RSS, and, from its own histograms, where the time went (queue
//! wait, reconcile, each API call); and the CPU every program on the machine spent in each
//! burst (the bed shares this machine's cores, so that bounds the ratio). The bed's two KWOK nodes hold 220 pods, so the bench adds
//! fake KWOK nodes of its own and deletes them afterwards.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
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
    measure::{cpu_seconds_by_program, cpu_spent, peak_rss_mib, percentile, rss_mib},
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

/// Creates in flight at once on either path (the syncer's own host client is bounded by its
/// worker count instead).
const CLIENT_CONCURRENCY: usize = 16;
/// The steady phases' rate and length.
const STEADY_PODS_PER_SECOND: u64 = 20;
const STEADY_SECONDS: u64 = 15;

/// One path's pods of one phase: when each create was sent. Pods seen on the host are
/// recorded per path ([`Seen`]), under the name the create used.
#[derive(Clone, Default)]
struct Phase {
    sent: Seen,
}

impl Phase {
    /// Waits until every pod of the phase is seen on the host; returns the time from the first
    /// create sent to the last pod seen.
    async fn all_seen(&self, seen: &Seen) -> Duration {
        let names: Vec<String> = self.sent.lock().unwrap().keys().cloned().collect();
        wait::until(
            "every pod on the host",
            Duration::from_secs(900),
            || async {
                let seen = seen.lock().unwrap();
                let missing = names.iter().filter(|n| !seen.contains_key(*n)).count();
                (missing == 0)
                    .then_some(())
                    .ok_or(format!("{missing} not yet"))
            },
        )
        .await;
        let sent = self.sent.lock().unwrap();
        let seen = seen.lock().unwrap();
        let first = sent.values().min().copied().expect("a phase sends pods");
        let last = sent.keys().filter_map(|n| seen.get(n)).max().copied();
        last.expect("every pod seen")
            .saturating_duration_since(first)
    }
}

fn bench_pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": { "name": name, "labels": { "app": "bench" } },
        "spec": { "containers": [{ "name": "app", "image": "nginx" }] },
    }))
    .unwrap()
}

/// Sends the creates of `names` into `api`, `CLIENT_CONCURRENCY` at a time, recording each
/// create's send time in `phase`.
async fn burst(api: &Api<Pod>, names: Vec<String>, phase: &Phase) {
    futures::stream::iter(names)
        .for_each_concurrent(CLIENT_CONCURRENCY, |name| async move {
            record(&phase.sent, name.clone());
            api.create(&PostParams::default(), &bench_pod(&name))
                .await
                .expect("create pod");
        })
        .await;
}

/// Sends the creates of `names` into `api` at `STEADY_PODS_PER_SECOND`, each on its own task.
async fn steady(api: &Api<Pod>, names: Vec<String>, phase: &Phase) {
    let mut tick = tokio::time::interval(Duration::from_millis(1000 / STEADY_PODS_PER_SECOND));
    let mut creates = Vec::new();
    for name in names {
        tick.tick().await;
        record(&phase.sent, name.clone());
        let api = api.clone();
        creates.push(tokio::spawn(async move {
            api.create(&PostParams::default(), &bench_pod(&name))
                .await
                .expect("create pod");
        }));
    }
    for create in creates {
        create.await.expect("create task");
    }
}

/// Records pods of `api` in `seen` as they appear (under the name `name_of` gives) and,
/// when `running` is given, as they run.
fn watch_pods(
    api: Api<Pod>,
    config: watcher::Config,
    seen: Seen,
    run: Option<Seen>,
    name_of: fn(&Pod) -> Option<String>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let _ = watcher(api, config)
            .applied_objects()
            .try_for_each(|p| {
                if let Some(name) = name_of(&p) {
                    if let Some(run) = run.as_ref().filter(|_| running(&p)) {
                        record(run, name.clone());
                    }
                    record(&seen, name);
                }
                futures::future::ready(Ok(()))
            })
            .await;
    })
}

/// The CPU each program spent during the two bursts (from the first create to the last pod
/// seen on the host), the busiest first, and the totals: on a machine whose cores the whole
/// bed shares, the ratio of the totals bounds the ratio of the burst times.
fn print_cpu(direct: &BTreeMap<String, f64>, synced: &BTreeMap<String, f64>) {
    let total = |m: &BTreeMap<String, f64>| m.values().sum::<f64>();
    println!(
        "  burst CPU, all programs                direct {:>7.1} s | syncer {:>7.1} s | ratio {:.2}",
        total(direct),
        total(synced),
        total(synced) / total(direct).max(f64::EPSILON)
    );
    let labels: BTreeSet<&String> = synced.keys().chain(direct.keys()).collect();
    let mut busiest: Vec<(&String, f64)> = labels
        .into_iter()
        .map(|label| (label, synced.get(label).copied().unwrap_or_default()))
        .collect();
    busiest.sort_by(|a, b| b.1.total_cmp(&a.1));
    for (label, spent) in busiest.into_iter().take(8) {
        let before = direct.get(label).copied().unwrap_or_default();
        println!("    {label:<36} direct {before:>7.1} s | syncer {spent:>7.1} s");
    }
}

fn names(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

#[tokio::main]
async fn main() {
    let n: usize = vnest_tests::measure::size_arg(1000);
    let steady_n = (STEADY_PODS_PER_SECOND * STEADY_SECONDS) as usize;
    let (host, ns) = host_namespace("sy-bench").await;
    let direct_ns = TestNamespace::create(&host, "sy-direct").await;
    let nodes: Api<Node> = Api::all(host.clone());
    let node_names: Vec<String> = (0..(2 * (n + steady_n)).div_ceil(PODS_PER_NODE))
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
    for (client, namespace) in [(&virt, &vns.name), (&host, &direct_ns.name)] {
        let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
        wait::until(
            "default ServiceAccount",
            Duration::from_secs(60),
            || async { accounts.get("default").await.map_err(|e| e.to_string()) },
        )
        .await;
    }
    let syncer = SyncerProcess::start(&wiring, free_port());
    wait::until("syncer ready", Duration::from_secs(60), || {
        syncer.get("/readyz")
    })
    .await;

    let (direct_seen, synced_seen, host_running, virt_running): (Seen, Seen, Seen, Seen) =
        Default::default();
    let direct_pods: Api<Pod> = Api::namespaced(host.clone(), &direct_ns.name);
    let virt_pods: Api<Pod> = Api::namespaced(virt.clone(), &vns.name);
    let watches = [
        watch_pods(
            direct_pods.clone(),
            watcher::Config::default(),
            direct_seen.clone(),
            None,
            |p| Some(p.name_any()),
        ),
        watch_pods(
            Api::namespaced(host.clone(), &ns.name),
            watcher::Config::default().labels(&format!("{LABEL_SYNCER_NAMESPACE}={}", vns.name)),
            synced_seen.clone(),
            Some(host_running.clone()),
            |p| p.annotations().get(ANNOTATION_OBJECT_NAME).cloned(),
        ),
        watch_pods(
            virt_pods.clone(),
            watcher::Config::default(),
            Seen::default(),
            Some(virt_running.clone()),
            |p| Some(p.name_any()),
        ),
    ];

    let direct_burst = Phase::default();
    let cpu_start = cpu_seconds_by_program();
    burst(&direct_pods, names("burst", n), &direct_burst).await;
    let direct_all = direct_burst.all_seen(&direct_seen).await;
    let direct_cpu = cpu_spent(&cpu_start, &cpu_seconds_by_program());

    let writes_before = syncer.host_writes().await.unwrap();
    let synced_burst = Phase::default();
    let cpu_start = cpu_seconds_by_program();
    burst(&virt_pods, names("burst", n), &synced_burst).await;
    let synced_all = synced_burst.all_seen(&synced_seen).await;
    let synced_cpu = cpu_spent(&cpu_start, &cpu_seconds_by_program());
    wait::until(
        "every virtual pod Running",
        Duration::from_secs(600),
        || async {
            let done = virt_running.lock().unwrap().len();
            (done == n).then_some(()).ok_or(format!("{done}/{n}"))
        },
    )
    .await;
    let all_running = synced_burst
        .sent
        .lock()
        .unwrap()
        .values()
        .min()
        .expect("sent")
        .elapsed();
    let writes_total = syncer.host_writes().await.unwrap() - writes_before;
    let idle_before = syncer.host_writes().await.unwrap();
    tokio::time::sleep(Duration::from_secs(60)).await;
    let idle_writes = syncer.host_writes().await.unwrap() - idle_before;
    let (rss, rss_idle) = (peak_rss_mib(syncer.pid()), rss_mib(syncer.pid()));

    let (direct_steady, synced_steady) = (Phase::default(), Phase::default());
    steady(&direct_pods, names("steady", steady_n), &direct_steady).await;
    direct_steady.all_seen(&direct_seen).await;
    steady(&virt_pods, names("steady", steady_n), &synced_steady).await;
    synced_steady.all_seen(&synced_seen).await;
    watches.iter().for_each(|w| w.abort());

    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let pcts = |v: Vec<Duration>| [0.5, 0.9, 0.99].map(|p| ms(percentile(v.clone(), p)));
    let row = |label: &str, direct: Vec<Duration>, synced: Vec<Duration>| {
        let (d, s) = (pcts(direct), pcts(synced));
        println!(
            "  {label:<38} direct p50 {:>7.1} p90 {:>7.1} p99 {:>7.1} ms | syncer p50 {:>7.1} p90 {:>7.1} p99 {:>7.1} ms | p50 +{:.1} ms",
            d[0],
            d[1],
            d[2],
            s[0],
            s[1],
            s[2],
            s[0] - d[0]
        );
    };
    println!(
        "syncer_scale N={n}, steady {steady_n} pods at {STEADY_PODS_PER_SECOND}/s, {CLIENT_CONCURRENCY} creates in flight"
    );
    println!(
        "  burst: all {n} pods on the host after     direct {:>7.1} s | syncer {:>7.1} s | ratio {:.2}",
        direct_all.as_secs_f64(),
        synced_all.as_secs_f64(),
        synced_all.as_secs_f64() / direct_all.as_secs_f64()
    );
    print_cpu(&direct_cpu, &synced_cpu);
    row(
        "burst: create sent -> host pod seen",
        latencies(&direct_burst.sent, &direct_seen),
        latencies(&synced_burst.sent, &synced_seen),
    );
    row(
        "steady: create sent -> host pod seen",
        latencies(&direct_steady.sent, &direct_seen),
        latencies(&synced_steady.sent, &synced_seen),
    );
    let status = latencies(&host_running, &virt_running);
    println!(
        "  burst: all virtual pods Running after {:>8.1} s",
        all_running.as_secs_f64()
    );
    println!(
        "  host Running -> virtual Running    p50 {:>7.1} ms  p99 {:>7.1} ms",
        ms(percentile(status.clone(), 0.5)),
        ms(percentile(status, 0.99))
    );
    println!(
        "  host writes per pod (burst)        {:>8.2}",
        writes_total / n as f64
    );
    println!("  host writes in 60 s idle           {idle_writes:>8.0}");
    println!("  syncer peak RSS (after the burst)  {rss:>8.1} MiB");
    println!("  syncer RSS after 60 s idle         {rss_idle:>8.1} MiB");
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
    for api in [&virt_pods, &direct_pods] {
        let _ = api
            .delete_collection(
                &DeleteParams::default().grace_period(0),
                &Default::default(),
            )
            .await;
    }
    vns.delete(&virt).await;
    direct_ns.delete(&host).await;
    ns.delete(&host).await;
    for name in &node_names {
        let _ = nodes.delete(name, &DeleteParams::default()).await;
    }
}
