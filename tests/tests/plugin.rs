//! `kubectl vnest` (the `kubectl-vnest` binary) against the real host: found by real kubectl as
//! a plugin, lists VirtualClusters, prints and merges their kubeconfig, pauses and resumes, and
//! says what to do when the cluster, its secret or the permission is missing; `connect
//! --port-forward` reaches the syncer's proxy through a real port-forward.

use std::{
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::Duration,
};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, config::Kubeconfig};
use serde_json::json;
use vnest_crds::VirtualCluster;
use vnest_tests::{
    TestNamespace, bed,
    bed::{service_account_kubeconfig, workspace_binary},
    fixtures::{create_virtual_cluster, free_port, host_namespace, ready_virtual_cluster, setup},
    syncer::{SyncerProcess, SyncerWiring},
    wait,
};

fn plugin_dir() -> PathBuf {
    let binary = workspace_binary("kubectl-vnest", "VNEST_KUBECTL_VNEST_BIN");
    binary.parent().unwrap().to_path_buf()
}

/// `kubectl vnest` through the real kubectl, the plugin on its PATH.
fn plugin_command(kubeconfig: &Path) -> Command {
    let path = format!(
        "{}:{}",
        plugin_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut command = Command::new(bed().bin("kubectl"));
    command
        .arg("vnest")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .env("PATH", path)
        .env_remove("KUBECONFIG");
    command
}

/// `kubectl vnest <args>`: its stdout, or its stderr as the error.
fn kubectl_vnest(kubeconfig: &Path, args: &[&str]) -> Result<String, String> {
    let out = plugin_command(kubeconfig)
        .args(args)
        .output()
        .expect("run kubectl");
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

async fn paused(api: &Api<VirtualCluster>, name: &str) -> bool {
    api.get(name).await.unwrap().spec.paused
}

/// `kubectl vnest` lists, connects to, pauses and resumes virtual clusters through real kubectl.
#[tokio::test]
async fn plugin_lists_connects_pauses_and_resumes() {
    let (client, ns, _operator) = setup("plugin").await;
    ready_virtual_cluster(&client, &ns.name, "dev", json!({})).await;
    let host = bed().host_kubeconfig();

    let table = kubectl_vnest(&host, &["list", "-n", &ns.name]).unwrap();
    let row = table.lines().find(|l| l.contains(" dev ")).expect(&table);
    assert!(row.starts_with(&ns.name), "{table}");
    assert!(row.contains("Running"), "{table}");
    assert!(
        row.ends_with(&format!("https://dev.{}.svc:443", ns.name)),
        "{table}"
    );
    let all = kubectl_vnest(&host, &["list", "-A"]).unwrap();
    assert!(all.contains(&ns.name), "{all}");

    let printed = kubectl_vnest(
        &host,
        &[
            "kubeconfig",
            "dev",
            "-n",
            &ns.name,
            "--server",
            "https://127.0.0.1:9443",
        ],
    )
    .unwrap();
    let printed = Kubeconfig::from_yaml(&printed).expect("a kubeconfig");
    let cluster = printed.clusters[0].cluster.as_ref().unwrap();
    assert_eq!(cluster.server.as_deref(), Some("https://127.0.0.1:9443"));
    assert!(cluster.certificate_authority_data.is_some());

    // connect merges into an existing file and switches context, keeping the host's entries.
    let file = std::env::temp_dir().join(format!("vnest-plugin-{}.kubeconfig", ns.name));
    std::fs::copy(&host, &file).unwrap();
    let said = kubectl_vnest(
        &host,
        &[
            "connect",
            "dev",
            "-n",
            &ns.name,
            "--context",
            "team-dev",
            "--output",
        ]
        .into_iter()
        .chain([file.to_str().unwrap()])
        .collect::<Vec<_>>(),
    )
    .unwrap();
    assert!(said.contains("team-dev"), "{said}");
    let merged = Kubeconfig::read_from(&file).unwrap();
    let original = Kubeconfig::read_from(&host).unwrap();
    assert_eq!(merged.current_context.as_deref(), Some("team-dev"));
    assert_eq!(merged.contexts.len(), original.contexts.len() + 1);
    assert!(
        said.contains(original.current_context.as_deref().unwrap()),
        "says how to get back: {said}"
    );

    let vcs: Api<VirtualCluster> = Api::namespaced(client.clone(), &ns.name);
    kubectl_vnest(&host, &["pause", "dev", "-n", &ns.name]).unwrap();
    assert!(paused(&vcs, "dev").await);
    kubectl_vnest(&host, &["resume", "dev", "-n", &ns.name]).unwrap();
    assert!(!paused(&vcs, "dev").await);
    ns.delete(&client).await;
}

/// `kubectl vnest` errors name what is missing and how to fix it.
#[tokio::test]
async fn plugin_errors_say_what_is_missing() {
    let (client, ns) = host_namespace("plugin-err").await;
    let host = bed().host_kubeconfig();

    let err = kubectl_vnest(&host, &["kubeconfig", "nope", "-n", &ns.name]).unwrap_err();
    assert!(err.contains("not found"), "{err}");
    assert!(err.contains("kubectl vnest list"), "{err}");

    // No operator watches this namespace: the kubeconfig secret never appears.
    create_virtual_cluster(&client, &ns.name, "unmade", json!({})).await;
    let err = kubectl_vnest(&host, &["connect", "unmade", "-n", &ns.name]).unwrap_err();
    assert!(err.contains("does not exist yet"), "{err}");
    assert!(err.contains(&format!("{}/vc-unmade", ns.name)), "{err}");

    // A ServiceAccount with no grants: a permission error, not a stack trace.
    let nobody = service_account_kubeconfig(&ns.name, "default").await;
    let err = kubectl_vnest(&nobody, &["pause", "unmade", "-n", &ns.name]).unwrap_err();
    assert!(err.contains("no permission"), "{err}");
    assert!(err.contains("kubectl auth can-i"), "{err}");

    let vcs: Api<VirtualCluster> = Api::namespaced(client.clone(), &ns.name);
    let _ = vcs.delete("unmade", &Default::default()).await;
    ns.delete(&client).await;
}

/// `connect --port-forward` reaches the syncer's proxy through a real port-forward of the
/// virtual cluster's pod (host API server → KWOK's server → the proxy port of the bed), and
/// the tenant drives the virtual cluster through it.
#[tokio::test]
async fn connect_port_forwards_to_the_proxy_of_the_virtual_cluster_pod() {
    let (client, ns, _operator) = setup("plugin-pf").await;
    ready_virtual_cluster(&client, &ns.name, "pf", json!({})).await;
    let virt = bed().virtual_cluster().await;
    let vns = TestNamespace::create(&virt, "plugin-pf").await;
    let wiring = SyncerWiring::from_operator(&client, &ns.name, "pf", &vns.name).await;
    let proxy_port: u16 = bed().var("VNEST_TESTBED_POD_PROXY_PORT").parse().unwrap();
    let _syncer = SyncerProcess::start_on(&wiring, free_port(), proxy_port);

    let file = std::env::temp_dir().join(format!("vnest-plugin-{}.kubeconfig", ns.name));
    let _ = std::fs::remove_file(&file);
    let mut connect = plugin_command(&bed().host_kubeconfig())
        .args([
            "connect",
            "pf",
            "-n",
            &ns.name,
            "--port-forward",
            "--output",
        ])
        .arg(&file)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("kubectl vnest connect");
    let mut said = BufReader::new(connect.stdout.take().unwrap()).lines();
    let forwarding = said
        .find(|line| line.as_ref().is_ok_and(|l| l.starts_with("forwarding")))
        .expect("connect says where it forwards")
        .unwrap();
    assert!(
        forwarding.contains(&format!("{}/pf-0:8443", ns.name)),
        "{forwarding}"
    );

    let written = Kubeconfig::read_from(&file).unwrap();
    let server = written.clusters[0].cluster.as_ref().unwrap().server.clone();
    assert!(
        server
            .as_deref()
            .is_some_and(|s| s.starts_with("https://127.0.0.1:")),
        "{server:?}"
    );
    let namespaces = wait::until(
        "kubectl through the port-forward",
        Duration::from_secs(60),
        || async { bed().kubectl_with(&file, &["get", "namespace", &vns.name, "-o", "name"]) },
    )
    .await;
    assert_eq!(namespaces.trim(), format!("namespace/{}", vns.name));
    bed()
        .kubectl_with(
            &file,
            &["-n", &vns.name, "create", "configmap", "through-pf"],
        )
        .unwrap();
    let configmaps: Api<ConfigMap> = Api::namespaced(virt.clone(), &vns.name);
    assert!(configmaps.get_opt("through-pf").await.unwrap().is_some());

    connect.kill().unwrap();
    connect.wait().unwrap();
    vns.delete(&virt).await;
    ns.delete(&client).await;
}
