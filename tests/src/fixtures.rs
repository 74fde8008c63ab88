//! Objects tests create: VirtualClusters, pre-bound volumes for their data claims, free ports.

use std::time::Duration;

use k8s_openapi::api::core::v1::PersistentVolume;
use kube::{
    Api, Client,
    api::{Patch, PatchParams, PostParams},
};
use serde_json::{Value, json};
use vnest_crds::VirtualCluster;

use crate::{OperatorProcess, TestNamespace, bed, crd, wait};

/// Creates VirtualCluster `name` in `namespace` with `spec` (JSON, as a user would write it).
pub async fn create_virtual_cluster(
    client: &Client,
    namespace: &str,
    name: &str,
    spec: Value,
) -> VirtualCluster {
    let vc: VirtualCluster = serde_json::from_value(json!({
        "apiVersion": "vnest.dev/v1alpha1", "kind": "VirtualCluster",
        "metadata": { "name": name, "namespace": namespace }, "spec": spec,
    }))
    .expect("VirtualCluster JSON");
    Api::<VirtualCluster>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &vc)
        .await
        .unwrap_or_else(|e| panic!("create VirtualCluster {namespace}/{name}: {e}"))
}

/// Merges `patch` into the VirtualCluster's spec.
pub async fn patch_spec(client: &Client, namespace: &str, name: &str, patch: Value) {
    Api::<VirtualCluster>::namespaced(client.clone(), namespace)
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": patch })),
        )
        .await
        .unwrap_or_else(|e| panic!("patch VirtualCluster {namespace}/{name}: {e}"));
}

/// A PersistentVolume pre-bound to claim `data-<vc>-0`, so the control plane pod can be
/// scheduled (the bed has no storage provisioner; KWOK never mounts it).
pub async fn provide_data_volume(client: &Client, namespace: &str, vc: &str) {
    let path = format!("/tmp/{namespace}/data-{vc}-0");
    create_bound_volume(client, namespace, vc, "100Gi", json!({ "path": path })).await;
}

/// Creates PersistentVolume `pv-<namespace>-data-<vc>-0` of `capacity`, on `host_path` (the
/// volume's `hostPath` JSON), pre-bound to claim `data-<vc>-0` in `namespace`.
pub async fn create_bound_volume(
    client: &Client,
    namespace: &str,
    vc: &str,
    capacity: &str,
    host_path: Value,
) {
    let claim = format!("data-{vc}-0");
    let pv: PersistentVolume = serde_json::from_value(json!({
        "metadata": { "name": format!("pv-{namespace}-{claim}"), "labels": { "vnest-tests/namespace": namespace } },
        "spec": {
            "capacity": { "storage": capacity },
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "hostPath": host_path,
            "claimRef": { "namespace": namespace, "name": claim },
        }
    }))
    .expect("PV JSON");
    Api::<PersistentVolume>::all(client.clone())
        .create(&PostParams::default(), &pv)
        .await
        .unwrap_or_else(|e| panic!("create PersistentVolume for {namespace}/{claim}: {e}"));
}

/// How long a VirtualCluster on KWOK may take to become Ready on a busy machine.
pub const READY_TIMEOUT: Duration = Duration::from_secs(90);

/// VirtualCluster `name` made from `spec` with its data volume provided, once it is Ready.
pub async fn ready_virtual_cluster(
    client: &Client,
    namespace: &str,
    name: &str,
    spec: Value,
) -> VirtualCluster {
    provide_data_volume(client, namespace, name).await;
    create_virtual_cluster(client, namespace, name, spec).await;
    wait_condition(client, namespace, name, "Ready", "True", READY_TIMEOUT).await
}

/// The VirtualCluster once its `type` condition has `status`.
pub async fn wait_condition(
    client: &Client,
    namespace: &str,
    name: &str,
    type_: &str,
    status: &str,
    timeout: Duration,
) -> VirtualCluster {
    let api: Api<VirtualCluster> = Api::namespaced(client.clone(), namespace);
    wait::until(
        &format!("{namespace}/{name} {type_}={status}"),
        timeout,
        || async {
            let vc = api.get(name).await.map_err(|e| e.to_string())?;
            let conditions = vc
                .status
                .as_ref()
                .map(|s| s.conditions.clone())
                .unwrap_or_default();
            if conditions
                .iter()
                .any(|c| c.type_ == type_ && c.status == status)
            {
                Ok(vc)
            } else {
                Err(format!("{conditions:?}"))
            }
        },
    )
    .await
}

/// The VirtualCluster once the operator has refused its spec (`SpecValid=False`).
pub async fn refused_virtual_cluster(
    client: &Client,
    namespace: &str,
    name: &str,
) -> VirtualCluster {
    wait_condition(
        client,
        namespace,
        name,
        "SpecValid",
        "False",
        Duration::from_secs(30),
    )
    .await
}

/// The message of `SpecValid=False`, once the operator has refused the VirtualCluster's spec.
pub async fn spec_refusal(client: &Client, namespace: &str, name: &str) -> String {
    let refused = refused_virtual_cluster(client, namespace, name).await;
    condition_message(&refused, "SpecValid")
}

/// The message of the VirtualCluster's `type_` condition; empty when it has none.
pub fn condition_message(vc: &VirtualCluster, type_: &str) -> String {
    vc.status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == type_))
        .map(|c| c.message.clone())
        .unwrap_or_default()
}

/// Every verb RBAC grants on a resource, in the order Kubernetes lists them.
pub const ALL_VERBS: [&str; 8] = [
    "get",
    "list",
    "watch",
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
];

/// A loopback TCP port nothing listens on right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// The bed's host client with the CRDs installed, and a namespace `<prefix>-…` of the test's own.
pub async fn host_namespace(prefix: &str) -> (Client, TestNamespace) {
    let client = bed().host().await;
    crd::install(&client).await;
    let ns = TestNamespace::create(&client, prefix).await;
    (client, ns)
}

/// [`host_namespace`] plus an operator `op-a` watching only that namespace.
pub async fn setup(prefix: &str) -> (Client, TestNamespace, OperatorProcess) {
    let (client, ns) = host_namespace(prefix).await;
    let operator = OperatorProcess::start(bed(), &ns.name, "op-a", free_port());
    (client, ns, operator)
}
