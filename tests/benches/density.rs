//! Density on the bed's real node (not a timed test):
//!
//! ```sh
//! cargo build --workspace --bins && bash tests/testbed/images.sh   # warm images
//! cargo bench -p vnest-tests --bench density -- 6                   # N idle clusters (default 6)
//! ```
//!
//! N `k8s` VirtualClusters with the operator's defaults, each control-plane pod and each
//! cluster's CoreDNS on the real node, side by side. Once all are Ready and their DNS runs,
//! and after [`IDLE`]: the resident memory of every control-plane pod and DNS pod (VmRSS of
//! each container's main process), the machine's `MemAvailable` before the first apply and
//! after the idle time (the kernel's view: page cache and the node agents' own growth count
//! too), and how many idle clusters the memory available before would hold at that cost.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::{Api, ResourceExt, api::ListParams};
use serde_json::json;
use vnest_tests::{
    fixtures,
    fixtures::{create_virtual_cluster, wait_condition},
    node::{all_containers_ready, container_rss_mib, delete_virtual_cluster, real_node},
    wait,
};

const TIMEOUT: Duration = Duration::from_secs(600);
/// How long every cluster sits idle before its memory is read.
const IDLE: Duration = Duration::from_secs(120);

/// `MemAvailable` of this machine, MiB.
fn mem_available_mib() -> f64 {
    let meminfo = std::fs::read_to_string("/proc/meminfo").expect("/proc/meminfo");
    let kib: f64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("MemAvailable in /proc/meminfo");
    kib / 1024.0
}

/// Sum of the VmRSS of `pod`'s containers, MiB.
fn pod_rss_mib(pod: &Pod) -> f64 {
    container_rss_mib(pod).iter().map(|(_, rss)| rss).sum()
}

#[tokio::main]
async fn main() {
    let n: usize = vnest_tests::measure::size_arg(6);
    let node = real_node();
    let (client, ns, _operator) = fixtures::setup("density").await;
    let placement = node.placement();
    let names: Vec<String> = (0..n).map(|i| format!("idle-{i}")).collect();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns.name);

    let available_before = mem_available_mib();
    let applied = Instant::now();
    for name in &names {
        node.provide_data_volume(&client, &ns.name, name).await;
        let spec = json!({
            "controlPlane": {
                "distro": { "k8s": { "enabled": true } },
                "statefulSet": { "scheduling": placement },
                "coredns": { "deployment": placement },
            },
        });
        create_virtual_cluster(&client, &ns.name, name, spec).await;
    }
    for name in &names {
        wait_condition(&client, &ns.name, name, "Ready", "True", TIMEOUT).await;
    }
    let to_ready = applied.elapsed();
    // Each cluster's CoreDNS host pod, running and ready on the node.
    let dns_pods = |name: &str| {
        let (pods, selector) = (
            pods.clone(),
            format!("k8s-app=kube-dns,vcluster.loft.sh/managed-by={name}"),
        );
        async move {
            let list = pods
                .list(&ListParams::default().labels(&selector))
                .await
                .map_err(|e| e.to_string())?;
            match list.items.as_slice() {
                [] => Err(format!("no pod matches {selector}")),
                found => Ok(found.iter().map(|p| p.name_any()).collect::<Vec<_>>()),
            }
        }
    };
    for name in &names {
        let found = wait::until(&format!("the DNS pod of {name}"), TIMEOUT, || {
            dns_pods(name)
        })
        .await;
        for pod in found {
            all_containers_ready(&pods, &pod, &node.name, TIMEOUT).await;
        }
    }
    let to_dns = applied.elapsed();

    println!(
        "density: {n} idle k8s virtual clusters (kine + SQLite, CoreDNS) on {}",
        node.name
    );
    println!(
        "  apply → all Ready:        {:.1} s",
        to_ready.as_secs_f64()
    );
    println!("  apply → all DNS running:  {:.1} s", to_dns.as_secs_f64());
    println!("  idle for {} s ...", IDLE.as_secs());
    tokio::time::sleep(IDLE).await;

    let mut control_planes = Vec::new();
    let mut dns = Vec::new();
    for name in &names {
        let control_plane = pods
            .get(&format!("{name}-0"))
            .await
            .expect("control-plane pod");
        let mut dns_rss = 0.0;
        for pod in dns_pods(name).await.expect("DNS pods") {
            dns_rss += pod_rss_mib(&pods.get(&pod).await.expect("DNS pod"));
        }
        let control_plane_rss = pod_rss_mib(&control_plane);
        println!(
            "  {name:<8} control-plane pod {control_plane_rss:>6.1} MiB, CoreDNS {dns_rss:>5.1} MiB"
        );
        control_planes.push(control_plane_rss);
        dns.push(dns_rss);
    }
    let mean = |values: &[f64]| values.iter().sum::<f64>() / values.len() as f64;
    let per_cluster = mean(&control_planes) + mean(&dns);
    let available_after = mem_available_mib();
    let machine_per_cluster = (available_before - available_after) / n as f64;
    println!(
        "  mean per cluster: control-plane pod {:.1} MiB + CoreDNS {:.1} MiB = {per_cluster:.1} MiB of VmRSS",
        mean(&control_planes),
        mean(&dns)
    );
    println!(
        "  MemAvailable {available_before:.0} → {available_after:.0} MiB: {machine_per_cluster:.1} MiB per cluster as the machine sees it"
    );
    println!(
        "  idle clusters the {available_before:.0} MiB available before would hold: {:.0} by VmRSS, {:.0} by MemAvailable",
        available_before / per_cluster,
        available_before / machine_per_cluster
    );

    for name in &names {
        delete_virtual_cluster(&client, &ns.name, name).await;
    }
    ns.delete(&client).await;
}
