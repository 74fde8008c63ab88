//! The real control plane on the bed's real node (not a timed test):
//!
//! ```sh
//! cargo build --workspace --bins && bash tests/testbed/images.sh   # warm images
//! cargo bench -p vnest-tests --bench real_control_plane -- 300      # idle seconds (default 300)
//! ```
//!
//! A `k8s` VirtualCluster (kine + SQLite) placed on the real node: apply → `Ready`, apply →
//! the first tenant pod Running as a real container, then the resident memory of each
//! container of the control-plane pod after the idle time (VmRSS of its main process, found
//! through containerd), and the whole pod's sum.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use serde_json::json;
use vnest_tests::{
    bed, fixtures,
    fixtures::{create_virtual_cluster, wait_condition},
    node::{
        all_containers_ready, container_rss_mib, delete_data_volume, local_image, real_node,
        tenant_kubeconfig_through_service,
    },
    wait,
};

const VC: &str = "bench";
const TIMEOUT: Duration = Duration::from_secs(300);

#[tokio::main]
async fn main() {
    let idle: u64 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(300);
    let node = real_node();
    let fixtures::Setup {
        client,
        ns,
        operator: _operator,
    } = fixtures::setup("bench-real").await;
    node.provide_data_volume(&client, &ns.name, VC).await;
    let placement = node.placement();

    let applied = Instant::now();
    create_virtual_cluster(
        &client,
        &ns.name,
        VC,
        json!({
            "controlPlane": {
                "distro": { "k8s": { "enabled": true } },
                "statefulSet": { "scheduling": placement },
            },
        }),
    )
    .await;
    wait_condition(&client, &ns.name, VC, "Ready", "True", TIMEOUT).await;
    let to_ready = applied.elapsed();

    let kubeconfig = tenant_kubeconfig_through_service(&client, &ns.name, VC).await;
    let tenant = |args: Vec<String>| {
        let kubeconfig = kubeconfig.clone();
        async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            bed().kubectl_with(&kubeconfig, &args)
        }
    };
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": "first", "namespace": "default" },
        "spec": {
            "nodeSelector": placement["nodeSelector"], "tolerations": placement["tolerations"],
            "containers": [{ "name": "echo", "image": local_image("vnest-echo"), "imagePullPolicy": "Never" }],
        },
    });
    let manifest = std::env::temp_dir().join(format!("vnest-bench-{}.json", ns.name));
    std::fs::write(&manifest, pod.to_string()).unwrap();
    wait::until("the tenant pod created", TIMEOUT, || {
        tenant(vec![
            "apply".into(),
            "-f".into(),
            manifest.display().to_string(),
        ])
    })
    .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns.name);
    all_containers_ready(&pods, "first-x-default-x-bench", &node.name, TIMEOUT).await;
    let to_first_pod = applied.elapsed();

    println!(
        "real control plane (distro k8s, kine + SQLite) on {}",
        node.name
    );
    println!(
        "  apply → Ready:                  {:.1} s",
        to_ready.as_secs_f64()
    );
    println!(
        "  apply → first tenant pod Running: {:.1} s",
        to_first_pod.as_secs_f64()
    );

    println!("  idle for {idle} s ...");
    tokio::time::sleep(Duration::from_secs(idle)).await;
    let control_plane = pods
        .get(&format!("{VC}-0"))
        .await
        .expect("control-plane pod");
    let mut total = 0.0;
    for (container, rss) in container_rss_mib(&control_plane) {
        println!("  {container:<20} {rss:>7.1} MiB");
        total += rss;
    }
    println!(
        "  {:<20} {total:>7.1} MiB (whole pod, after {idle} s idle)",
        "total"
    );

    Api::<vnest_crds::VirtualCluster>::namespaced(client.clone(), &ns.name)
        .delete(VC, &Default::default())
        .await
        .unwrap();
    delete_data_volume(&client, &ns.name, VC).await;
    ns.delete(&client).await;
}
