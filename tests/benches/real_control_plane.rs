//! The real control plane on the bed's real node (not a timed test):
//!
//! ```sh
//! cargo build --workspace --bins && bash tests/testbed/images.sh   # warm images
//! cargo bench -p vnest-tests --bench real_control_plane -- 300      # idle seconds (default 300)
//! ```
//!
//! A `k8s` VirtualCluster (kine + SQLite) placed on the real node: apply → `Ready`, apply →
//! the first tenant pod Running as a real container. Then one more control plane per API-server
//! profile in [`PROFILES`], side by side on the same node, and after the idle time the resident
//! memory of each container of every control-plane pod (VmRSS of its main process, found
//! through containerd) and each pod's sum: the steps from upstream's defaults to the
//! operator's lean ones, measured in one run.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use serde_json::json;
use vnest_tests::{
    bed, fixtures,
    fixtures::{create_virtual_cluster, wait_condition},
    node::{
        all_containers_ready, container_rss_mib, delete_virtual_cluster, local_image, real_node,
        tenant_kubeconfig_through_service,
    },
    wait,
};

const VC: &str = "bench";
const TIMEOUT: Duration = Duration::from_secs(300);

/// One API-server profile measured beside the operator's defaults; its arguments and
/// variables override the defaults of the same name.
struct Profile {
    /// The VirtualCluster's name.
    name: &'static str,
    /// What it changes, for the table.
    change: &'static str,
    extra_args: &'static [&'static str],
    env: &'static [(&'static str, &'static str)],
}

/// Profiles measured side by side with the first cluster (`bench`, the operator's defaults).
const PROFILES: &[Profile] = &[
    Profile {
        name: "no-wcache",
        change: "watch cache off",
        extra_args: &["--watch-cache=false"],
        env: &[],
    },
    Profile {
        name: "gogc50",
        change: "watch cache off, GOGC=50",
        extra_args: &["--watch-cache=false"],
        env: &[("GOGC", "50")],
    },
    Profile {
        name: "no-apf",
        change: "watch cache off, GOGC=50, priority and fairness off",
        extra_args: &[
            "--watch-cache=false",
            "--enable-priority-and-fairness=false",
        ],
        env: &[("GOGC", "50")],
    },
    Profile {
        name: "memlimit",
        change: "watch cache off, GOGC=50, priority and fairness off, GOMEMLIMIT=128MiB",
        extra_args: &[
            "--watch-cache=false",
            "--enable-priority-and-fairness=false",
        ],
        env: &[("GOGC", "50"), ("GOMEMLIMIT", "128MiB")],
    },
];

fn distro(extra_args: &[&str], env: &[(&str, &str)]) -> serde_json::Value {
    let env: Vec<_> = env
        .iter()
        .map(|(name, value)| json!({ "name": name, "value": value }))
        .collect();
    json!({ "k8s": { "enabled": true, "extraArgs": extra_args, "env": env } })
}

#[tokio::main]
async fn main() {
    let idle: u64 = vnest_tests::measure::size_arg(300);
    let node = real_node();
    let (client, ns, _operator) = fixtures::setup("bench-real").await;
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

    // Every other profile beside it, on the same node.
    for Profile {
        name,
        extra_args,
        env,
        ..
    } in PROFILES
    {
        node.provide_data_volume(&client, &ns.name, name).await;
        create_virtual_cluster(
            &client,
            &ns.name,
            name,
            json!({ "controlPlane": {
                "distro": distro(extra_args, env),
                "statefulSet": { "scheduling": placement },
            } }),
        )
        .await;
    }
    for Profile { name, .. } in PROFILES {
        wait_condition(&client, &ns.name, name, "Ready", "True", TIMEOUT).await;
    }

    println!("  idle for {idle} s ...");
    tokio::time::sleep(Duration::from_secs(idle)).await;
    let measured = std::iter::once((VC, "the operator's defaults"))
        .chain(PROFILES.iter().map(|p| (p.name, p.change)));
    for (name, change) in measured {
        let control_plane = pods
            .get(&format!("{name}-0"))
            .await
            .expect("control-plane pod");
        let mut total = 0.0;
        let mut row = Vec::new();
        for (container, rss) in container_rss_mib(&control_plane) {
            row.push(format!("{container} {rss:.1}"));
            total += rss;
        }
        println!(
            "  {name:<12} {total:>7.1} MiB  ({})  — {change}",
            row.join(", ")
        );
    }
    println!("  (MiB of VmRSS per container after {idle} s idle; the pod's sum first)");

    for Profile { name, .. } in PROFILES {
        delete_virtual_cluster(&client, &ns.name, name).await;
    }
    delete_virtual_cluster(&client, &ns.name, VC).await;
    ns.delete(&client).await;
}
