//! The bed's real node (`tests/testbed/node.sh`): kubelet, containerd and runc running the pods
//! the operator writes and the tenant's pods as real containers, from the images
//! `tests/testbed/images.sh` builds from this workspace.

use std::{
    path::{Path, PathBuf},
    process::Command,
    sync::OnceLock,
    time::Duration,
};

use k8s_openapi::api::core::v1::{PersistentVolume, Pod, Secret, Service};
use kube::{Api, Client, api::DeleteParams};
use serde_json::{Value, json};
use vnest_crds::VirtualCluster;

use crate::{
    bed,
    bed::{repo_root, run},
    fixtures::create_bound_volume,
    wait,
};

/// The uid:gid every vnest image runs as; the data volume must be writable for it.
pub const IMAGE_USER: u32 = 65532;
/// Cold start of a control-plane pod on the real node of a busy 2-core machine, with margin.
pub const START: Duration = Duration::from_secs(180);

/// The real node of the running bed.
pub struct RealNode {
    pub name: String,
    /// Label (value `real`) and NoSchedule taint key of the node: only pods asking for it go there.
    pub label: String,
}

/// The bed's real node, with every local image imported into its containerd. Fails the test
/// (never skips it) when the bed runs without one, with the reason up.sh recorded.
pub fn real_node() -> RealNode {
    let node = bed().var("VNEST_TESTBED_NODE");
    assert!(
        !node.starts_with("absent"),
        "the test bed has no real node ({node}); this test needs one"
    );
    import_images();
    RealNode {
        name: node.to_string(),
        label: bed().var("VNEST_TESTBED_NODE_LABEL").to_string(),
    }
}

/// Builds and imports the workspace's images once per test process (images.sh skips what
/// containerd already holds).
fn import_images() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        run(Command::new("bash")
            .arg(repo_root().join("tests/testbed/images.sh"))
            .env("VNEST_TESTBED_DIR", bed().var("VNEST_TESTBED_DIR")));
    });
}

/// One image `tests/testbed/images.sh` builds.
#[derive(Debug)]
pub struct LocalImage {
    pub reference: String,
    /// The image config's `Entrypoint`, as JSON.
    pub entrypoint: String,
    /// `uid:gid`.
    pub user: String,
    /// `<BED|NODE|CARGO>/<binary>:<path in the image>`.
    pub files: Vec<String>,
}

/// Every image images.sh builds (without building them).
pub fn local_images() -> Vec<LocalImage> {
    run(Command::new("bash")
        .arg(repo_root().join("tests/testbed/images.sh"))
        .arg("--list"))
    .lines()
    .filter_map(|l| {
        let mut parts = l.split(' ');
        Some(LocalImage {
            reference: parts.next()?.to_string(),
            entrypoint: parts.next()?.to_string(),
            user: parts.next()?.to_string(),
            files: parts.next()?.split(',').map(str::to_string).collect(),
        })
    })
    .collect()
}

/// The reference of the local image whose name contains `name` (e.g. `vnest-echo`).
pub fn local_image(name: &str) -> String {
    local_images()
        .into_iter()
        .map(|image| image.reference)
        .find(|r| r.contains(name))
        .unwrap_or_else(|| panic!("images.sh builds no image named like {name}"))
}

impl RealNode {
    /// `nodeSelector` and `tolerations` that place a pod on this node.
    pub fn placement(&self) -> Value {
        json!({
            "nodeSelector": { &self.label: "real" },
            "tolerations": [{ "key": &self.label, "operator": "Exists", "effect": "NoSchedule" }],
        })
    }

    /// `spec.controlPlane` of a `k8s` VirtualCluster whose pod runs on this node, its data
    /// on a 1Gi claim.
    pub fn control_plane(&self) -> Value {
        json!({
            "distro": { "k8s": { "enabled": true } },
            "statefulSet": { "scheduling": self.placement(), "persistence": { "size": "1Gi" } },
        })
    }

    /// A hostPath PersistentVolume pre-bound to claim `data-<vc>-0` in `namespace`, in a folder
    /// of the bed owned by the images' user (the bed has no provisioner; hostPath volumes get
    /// no fsGroup ownership change).
    pub async fn provide_data_volume(&self, client: &Client, namespace: &str, vc: &str) -> PathBuf {
        let claim = format!("data-{vc}-0");
        let dir = Path::new(bed().var("VNEST_TESTBED_DIR"))
            .join("volumes")
            .join(namespace)
            .join(&claim);
        std::fs::create_dir_all(&dir).expect("create the volume folder");
        std::os::unix::fs::chown(&dir, Some(IMAGE_USER), Some(IMAGE_USER))
            .expect("chown the volume folder");
        // The operator's default claim size: a smaller claim binds to it too.
        let host_path = json!({ "path": dir.to_string_lossy(), "type": "Directory" });
        create_bound_volume(client, namespace, vc, "5Gi", host_path).await;
        dir
    }
}

/// The spec of a pod on the node of `placement` ([`RealNode::placement`]) running vnest-echo
/// on :8080, ready when it serves, that passes the `restricted` Pod Security Standard.
pub fn echo_pod_spec(placement: &Value) -> Value {
    json!({
        "nodeSelector": placement["nodeSelector"],
        "tolerations": placement["tolerations"],
        "terminationGracePeriodSeconds": 2,
        "securityContext": { "runAsNonRoot": true, "runAsUser": IMAGE_USER, "seccompProfile": { "type": "RuntimeDefault" } },
        "containers": [{
            "name": "echo", "image": local_image("vnest-echo"), "imagePullPolicy": "Never",
            "args": ["serve", ":8080"],
            "ports": [{ "containerPort": 8080 }],
            "readinessProbe": { "httpGet": { "path": "/ready", "port": 8080 }, "periodSeconds": 2 },
            "securityContext": { "allowPrivilegeEscalation": false, "capabilities": { "drop": ["ALL"] } },
        }],
    })
}

/// A tenant's workload in virtual namespace `default`: Deployment `echo` of two
/// [`echo_pod_spec`] pods and Service `echo` (port 80) in front of them.
pub fn echo_workload(placement: &Value) -> Vec<Value> {
    vec![
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": { "name": "echo", "namespace": "default" },
            "spec": {
                "replicas": 2,
                "selector": { "matchLabels": { "app": "echo" } },
                "template": {
                    "metadata": { "labels": { "app": "echo" } },
                    "spec": echo_pod_spec(placement),
                },
            },
        }),
        json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": { "name": "echo", "namespace": "default" },
            "spec": { "selector": { "app": "echo" }, "ports": [{ "port": 80, "targetPort": 8080 }] },
        }),
    ]
}

/// The two pods of [`echo_workload`] as (name, pod IP), once both are Running and ready in the
/// virtual cluster; panics after `timeout`.
pub async fn ready_echo_pods(kubeconfig: &Path, timeout: Duration) -> Vec<(String, String)> {
    wait::until("both echo pods Running and ready", timeout, || async {
        let out = tenant_kubectl(
            kubeconfig,
            &[
                "get", "pods", "-l", "app=echo", "-o",
                r#"jsonpath={range .items[*]}{.metadata.name} {.status.podIP} {.status.phase} {.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}"#,
            ],
        )?;
        let running: Vec<(String, String)> = out
            .lines()
            .filter(|l| l.ends_with(" Running True"))
            .filter_map(|l| {
                let mut parts = l.split(' ');
                Some((parts.next()?.to_string(), parts.next()?.to_string()))
            })
            .collect();
        if running.len() == 2 { Ok(running) } else { Err(out) }
    })
    .await
}

/// The tenant kubeconfig of [`tenant_kubeconfig_through_service`], once the tenant's API
/// answers `/readyz` through it; panics after `timeout`.
pub async fn ready_tenant_kubeconfig(
    client: &Client,
    namespace: &str,
    vc: &str,
    timeout: Duration,
) -> PathBuf {
    let kubeconfig = tenant_kubeconfig_through_service(client, namespace, vc).await;
    wait::until("the tenant API through the Service", timeout, || async {
        tenant_kubectl(&kubeconfig, &["get", "--raw", "/readyz"])
    })
    .await;
    kubeconfig
}

/// Deletes VirtualCluster `vc` and its data volume (without waiting for either to go).
pub async fn delete_virtual_cluster(client: &Client, namespace: &str, vc: &str) {
    Api::<VirtualCluster>::namespaced(client.clone(), namespace)
        .delete(vc, &DeleteParams::default())
        .await
        .unwrap_or_else(|e| panic!("delete VirtualCluster {namespace}/{vc}: {e}"));
    delete_data_volume(client, namespace, vc).await;
}

/// Deletes the PersistentVolume [`RealNode::provide_data_volume`] made.
pub async fn delete_data_volume(client: &Client, namespace: &str, vc: &str) {
    let _ = Api::<PersistentVolume>::all(client.clone())
        .delete(
            &format!("pv-{namespace}-data-{vc}-0"),
            &DeleteParams::default(),
        )
        .await;
}

/// The pod once every container in it is running and ready, on `node`.
pub async fn all_containers_ready(
    api: &Api<Pod>,
    name: &str,
    node: &str,
    timeout: Duration,
) -> Pod {
    wait::until(
        &format!("every container of pod {name} running and ready on {node}"),
        timeout,
        || async {
            let pod = api.get(name).await.map_err(|e| e.to_string())?;
            let on = pod.spec.as_ref().and_then(|s| s.node_name.clone());
            let statuses = pod
                .status
                .as_ref()
                .and_then(|s| s.container_statuses.clone())
                .unwrap_or_default();
            let expected = pod.spec.as_ref().map_or(0, |s| s.containers.len());
            let ready = statuses.len() == expected
                && statuses
                    .iter()
                    .all(|c| c.ready && c.state.as_ref().is_some_and(|s| s.running.is_some()));
            if ready && on.as_deref() == Some(node) {
                Ok(pod)
            } else {
                let summary: Vec<String> = statuses
                    .iter()
                    .map(|c| format!("{}: ready={} {:?}", c.name, c.ready, c.state))
                    .collect();
                Err(format!("node {on:?}, containers {summary:?}"))
            }
        },
    )
    .await
}

/// A kubeconfig file from Secret `vc-<vc>` (the tenant's), pointed at the `<vc>` Service's
/// ClusterIP — reached through kube-proxy — while still verifying the certificate against the
/// Service's DNS name, which the machine cannot resolve.
pub async fn tenant_kubeconfig_through_service(
    client: &Client,
    namespace: &str,
    vc: &str,
) -> PathBuf {
    let secret = Api::<Secret>::namespaced(client.clone(), namespace)
        .get(&format!("vc-{vc}"))
        .await
        .expect("tenant kubeconfig Secret");
    let text = secret
        .data
        .as_ref()
        .and_then(|d| d.get("config"))
        .map(|b| String::from_utf8_lossy(&b.0).into_owned())
        .expect("Secret has key config");
    let ip = Api::<Service>::namespaced(client.clone(), namespace)
        .get(vc)
        .await
        .expect("the virtual cluster's Service")
        .spec
        .and_then(|s| s.cluster_ip)
        .expect("Service has a ClusterIP");
    let mut kubeconfig: Value = serde_yaml::from_str(&text).expect("kubeconfig YAML");
    for cluster in kubeconfig["clusters"].as_array_mut().expect("clusters") {
        cluster["cluster"]["server"] = json!(format!("https://{ip}:443"));
        cluster["cluster"]["tls-server-name"] = json!(format!("{vc}.{namespace}.svc"));
    }
    let path = std::env::temp_dir().join(format!("vnest-tenant-{namespace}-{vc}.kubeconfig"));
    std::fs::write(&path, serde_yaml::to_string(&kubeconfig).unwrap()).expect("write kubeconfig");
    path
}

/// Resident memory (VmRSS, MiB) of the main process of each running container of `pod`, by
/// container name: containerd's task list maps the pod status's container IDs to host pids.
pub fn container_rss_mib(pod: &Pod) -> Vec<(String, f64)> {
    let out = Command::new(Path::new(bed().var("VNEST_TESTBED_NODE_BIN")).join("ctr"))
        .args([
            "--address",
            bed().var("VNEST_CONTAINERD_SOCK"),
            "-n",
            "k8s.io",
            "tasks",
            "ls",
        ])
        .output()
        .expect("ctr tasks ls");
    let tasks = String::from_utf8_lossy(&out.stdout).into_owned();
    let pid_of = |id: &str| {
        tasks
            .lines()
            .find(|l| l.starts_with(id))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok())
    };
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.clone())
        .unwrap_or_default()
        .into_iter()
        .filter_map(|c| {
            let id = c.container_id?.strip_prefix("containerd://")?.to_string();
            let status = std::fs::read_to_string(format!("/proc/{}/status", pid_of(&id)?)).ok()?;
            let kib = status
                .lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))?
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<f64>()
                .ok()?;
            Some((c.name, kib / 1024.0))
        })
        .collect()
}

/// Runs the bed's kubectl as the tenant of `kubeconfig`, giving up on a request after 20 s;
/// stdout, or stderr as the error.
pub fn tenant_kubectl(kubeconfig: &Path, args: &[&str]) -> Result<String, String> {
    let mut all = vec!["--request-timeout=20s"];
    all.extend_from_slice(args);
    bed().kubectl_with(kubeconfig, &all)
}
