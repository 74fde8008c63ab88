//! End to end on the bed's real node: the control-plane pod the operator writes (distro `k8s`,
//! kine + SQLite on the data claim, the syncer on the operator-made ServiceAccount) runs as
//! real containers, and a tenant's workloads run, talk to each other and are reachable through
//! it — from apply to delete. No harness process stands in for any part of the pod.

use std::{
    io::{BufRead, BufReader},
    path::Path,
    process::{Command, Stdio},
    time::Duration,
};

use k8s_openapi::api::{
    apps::v1::StatefulSet,
    core::v1::{PersistentVolumeClaim, Pod, Secret, Service},
};
use kube::{Api, api::ListParams};
use serde_json::json;
use vnest_tests::{
    bed,
    bed::workspace_binary,
    fixtures::{self, create_virtual_cluster, patch_spec, wait_condition},
    node::{
        START, all_containers_ready, delete_data_volume, echo_workload, ready_echo_pods,
        ready_tenant_kubeconfig, real_node, tenant_kubectl as tenant,
    },
    tenant::{absent, present},
    wait,
};

const VC: &str = "vc";
const CONVERGE: Duration = Duration::from_secs(90);

/// The tenant's workload: [`echo_workload`] as one manifest.
fn workload(placement: &serde_json::Value) -> String {
    json!({ "apiVersion": "v1", "kind": "List", "items": echo_workload(placement) }).to_string()
}

/// Apply → every container of `vc-0` Running and ready on the real node → `Ready` → the tenant's
/// kubeconfig works through the host Service and through `kubectl vnest connect
/// --port-forward` → the tenant's Deployment runs as real containers whose pods reach each other
/// through the virtual Service's ClusterIP, with logs and exec through the proxy → a
/// `spec.sync` edit reaches the running syncer → pause (StatefulSet at 0) and resume keep the
/// tenant's objects → deleting the VirtualCluster leaves nothing behind.
#[tokio::test]
async fn a_k8s_virtual_cluster_runs_for_real_from_apply_to_delete() {
    let node = real_node();
    let (client, ns, _operator) = fixtures::setup("real").await;
    let volume = node.provide_data_volume(&client, &ns.name, VC).await;
    let placement = node.placement();
    let spec = json!({
        "controlPlane": node.control_plane(),
        "policies": { "podSecurityStandard": "restricted" },
    });
    create_virtual_cluster(&client, &ns.name, VC, spec).await;

    // The control plane runs for real: every container Running and ready on the real node.
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns.name);
    let control_plane = all_containers_ready(&pods, "vc-0", &node.name, START).await;
    let containers: Vec<&str> = control_plane
        .spec
        .as_ref()
        .unwrap()
        .containers
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    for expected in ["kine", "control-plane", "controller-manager", "syncer"] {
        assert!(
            containers.contains(&expected),
            "{expected} missing from {containers:?}"
        );
    }
    wait_condition(&client, &ns.name, VC, "Ready", "True", CONVERGE).await;

    // The tenant's kubeconfig, through the host Service (kube-proxy → the syncer's proxy).
    let kubeconfig = ready_tenant_kubeconfig(&client, &ns.name, VC, CONVERGE).await;

    // The virtual `kubernetes` Service is the control plane as tenants reach it: the host
    // Service's address, and Endpoints and an EndpointSlice naming the control-plane pod on
    // the syncer's port. It gets no host copy of its own.
    let services: Api<Service> = Api::namespaced(client.clone(), &ns.name);
    let host_ip = services.get(VC).await.unwrap().spec.unwrap().cluster_ip;
    let pod_ip = control_plane.status.as_ref().unwrap().pod_ip.clone();
    let expected = format!("{} {1}:8443 {1}:8443", host_ip.unwrap(), pod_ip.unwrap());
    wait::until(
        "the virtual kubernetes Service pointing at the control plane",
        CONVERGE,
        || async {
            let get = |args: &[&str]| {
                let mut all = vec!["get"];
                all.extend_from_slice(args);
                tenant(&kubeconfig, &all).map(|out| out.trim().to_string())
            };
            let found = [
                get(&["service", "kubernetes", "-o", "jsonpath={.spec.clusterIP}"])?,
                get(&[
                    "endpoints",
                    "kubernetes",
                    "-o",
                    "jsonpath={.subsets[*].addresses[*].ip}:{.subsets[*].ports[*].port}",
                ])?,
                get(&[
                    "endpointslices",
                    "-l",
                    "kubernetes.io/service-name=kubernetes",
                    "-o",
                    "jsonpath={.items[*].endpoints[*].addresses[*]}:{.items[*].ports[*].port}",
                ])?,
            ]
            .join(" ");
            if found == expected {
                Ok(())
            } else {
                Err(found)
            }
        },
    )
    .await;
    wait::holds(
        "no host copy of the API server's Service",
        Duration::from_secs(5),
        || absent(&services, "kubernetes-x-default-x-vc"),
    )
    .await;

    // ... and through `kubectl vnest connect --port-forward` (host API server → kubelet →
    // containerd's port-forward into the pod).
    let forwarded = std::env::temp_dir().join(format!("vnest-real-{}.kubeconfig", ns.name));
    let _ = std::fs::remove_file(&forwarded);
    let mut connect = plugin_connect(&ns.name, &forwarded);
    let namespaces = wait::until("kubectl through the port-forward", CONVERGE, || async {
        tenant(&forwarded, &["get", "namespace", "default", "-o", "name"])
    })
    .await;
    assert_eq!(namespaces.trim(), "namespace/default");
    connect.kill().unwrap();
    connect.wait().unwrap();

    // The tenant's Deployment and Service; its pods run as real containers on the real node.
    let manifest = std::env::temp_dir().join(format!("vnest-real-{}-workload.json", ns.name));
    std::fs::write(&manifest, workload(&placement)).unwrap();
    tenant(&kubeconfig, &["apply", "-f", manifest.to_str().unwrap()]).unwrap();
    let host_pods = wait::until("two tenant pods on the host", CONVERGE, || async {
        let list = pods
            // The tenant's namespace only: vnest's CoreDNS pod (kube-system) is synced too.
            .list(
                &ListParams::default()
                    .labels("vcluster.loft.sh/managed-by=vc,vcluster.loft.sh/namespace=default"),
            )
            .await
            .map_err(|e| e.to_string())?;
        let names: Vec<String> = list
            .items
            .iter()
            .filter_map(|p| p.metadata.name.clone())
            .collect();
        if names.len() == 2 {
            Ok(names)
        } else {
            Err(format!("{names:?}"))
        }
    })
    .await;
    for name in &host_pods {
        all_containers_ready(&pods, name, &node.name, START).await;
    }
    let virtual_pods: Vec<String> = ready_echo_pods(&kubeconfig, CONVERGE)
        .await
        .into_iter()
        .map(|(name, _)| name)
        .collect();

    // One tenant pod reaches the others through the virtual Service's ClusterIP (kubectl exec
    // through the proxy runs the client inside the real container).
    let service_ip = tenant(
        &kubeconfig,
        &["get", "service", "echo", "-o", "jsonpath={.spec.clusterIP}"],
    )
    .unwrap();
    let url = format!("http://{service_ip}:80/through-the-service");
    let answer = wait::until("a pod answering through the Service", CONVERGE, || async {
        tenant(
            &kubeconfig,
            &["exec", &virtual_pods[0], "--", "vnest-echo", "get", &url],
        )
    })
    .await;
    assert!(answer.contains("GET /through-the-service"), "{answer}");

    // Logs through the proxy come from the real container.
    let logs = wait::until("the request in a pod's log", CONVERGE, || async {
        let mut all = String::new();
        for pod in &virtual_pods {
            all += &tenant(&kubeconfig, &["logs", pod])?;
        }
        if all.contains("GET /through-the-service") {
            Ok(all)
        } else {
            Err(all)
        }
    })
    .await;
    assert!(logs.contains("listening on :8080"), "{logs}");

    // A `spec.sync` edit reaches the running syncer: with configmaps.all, a ConfigMap no pod
    // uses is synced too.
    tenant(
        &kubeconfig,
        &["create", "configmap", "unused", "--from-literal=k=v"],
    )
    .unwrap();
    patch_spec(
        &client,
        &ns.name,
        VC,
        json!({ "sync": { "toHost": { "configmaps": { "all": true } } } }),
    )
    .await;
    let host_configmaps: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(client.clone(), &ns.name);
    wait::until(
        "ConfigMap unused on the host after the sync edit",
        START,
        || present(&host_configmaps, "unused-x-default-x-vc"),
    )
    .await;

    // Pause (StatefulSet at 0) and resume: the tenant's objects survive in SQLite on the claim.
    patch_spec(&client, &ns.name, VC, json!({ "paused": true })).await;
    let statefulsets: Api<StatefulSet> = Api::namespaced(client.clone(), &ns.name);
    wait::until("the control plane scaled to 0", CONVERGE, || async {
        let statefulset = statefulsets.get(VC).await.map_err(|e| e.to_string())?;
        let replicas = statefulset.spec.replicas;
        let pod = pods.get_opt("vc-0").await.map_err(|e| e.to_string())?;
        if replicas == Some(0) && pod.is_none() {
            Ok(())
        } else {
            Err(format!(
                "replicas {replicas:?}, pod present: {}",
                pod.is_some()
            ))
        }
    })
    .await;
    assert!(
        volume.join("db/state.db").exists(),
        "kine's SQLite database is on the data claim"
    );
    patch_spec(&client, &ns.name, VC, json!({ "paused": false })).await;
    all_containers_ready(&pods, "vc-0", &node.name, START).await;
    wait_condition(&client, &ns.name, VC, "Ready", "True", CONVERGE).await;
    let kept = wait::until(
        "the tenant's Deployment after the wake",
        CONVERGE,
        || async { tenant(&kubeconfig, &["get", "deployment", "echo", "-o", "name"]) },
    )
    .await;
    assert_eq!(kept.trim(), "deployment.apps/echo");

    // Deleting the VirtualCluster leaves nothing behind in the namespace.
    Api::<vnest_crds::VirtualCluster>::namespaced(client.clone(), &ns.name)
        .delete(VC, &Default::default())
        .await
        .unwrap();
    wait::until("nothing of the virtual cluster left", START, || async {
        let left = leftovers(&client, &ns.name).await?;
        if left.is_empty() {
            Ok(())
        } else {
            Err(format!("{left:?}"))
        }
    })
    .await;
    delete_data_volume(&client, &ns.name, VC).await;
    ns.delete(&client).await;
}

/// Names of every object in `namespace` that the operator or the syncer made for `vc`.
async fn leftovers(client: &kube::Client, namespace: &str) -> Result<Vec<String>, String> {
    let mut left = names_of::<Pod>(client, namespace).await?;
    left.extend(names_of::<Service>(client, namespace).await?);
    left.extend(names_of::<Secret>(client, namespace).await?);
    left.extend(names_of::<PersistentVolumeClaim>(client, namespace).await?);
    left.extend(names_of::<StatefulSet>(client, namespace).await?);
    Ok(left)
}

/// `<Kind>/<name>` of every `K` in `namespace`.
async fn names_of<K>(client: &kube::Client, namespace: &str) -> Result<Vec<String>, String>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let kind = K::kind(&Default::default()).to_string();
    let list = Api::<K>::namespaced(client.clone(), namespace)
        .list_metadata(&ListParams::default())
        .await
        .map_err(|e| e.to_string())?;
    Ok(list
        .items
        .into_iter()
        .filter_map(|o| o.metadata.name.map(|n| format!("{kind}/{n}")))
        .collect())
}

/// `kubectl vnest connect vc --port-forward --output FILE`, running until killed; returns once
/// it says where it forwards.
fn plugin_connect(namespace: &str, output: &Path) -> std::process::Child {
    let plugin = workspace_binary("kubectl-vnest", "VNEST_PLUGIN_BIN");
    let mut child = Command::new(plugin)
        .arg("--kubeconfig")
        .arg(bed().host_kubeconfig())
        .args(["connect", VC, "-n", namespace, "--port-forward", "--output"])
        .arg(output)
        .env_remove("KUBECONFIG")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("kubectl vnest connect");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let said = lines.find(|line| line.as_ref().is_ok_and(|l| l.starts_with("forwarding")));
    assert!(
        said.is_some(),
        "kubectl vnest connect never said it forwards"
    );
    // Keep reading, so that nothing it says later meets a closed pipe.
    std::thread::spawn(move || lines.for_each(drop));
    child
}
