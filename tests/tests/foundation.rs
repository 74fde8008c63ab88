//! The foundation on a real API server: the CRD installs and is served, every example is
//! accepted and reads back as written, invalid specs are refused with vnest's messages, and
//! the test bed itself schedules pods onto KWOK nodes, collects garbage and runs a separate
//! virtual API server.

use std::time::Duration;

use k8s_openapi::api::{
    apps::v1::StatefulSet,
    core::v1::{ConfigMap, Namespace, Pod},
};
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams},
    core::GroupVersionKind,
    discovery::ApiResource,
};
use serde_json::json;
use vnest_crds::VirtualCluster;
use vnest_tests::{
    TestNamespace, bed,
    bed::{repo_root, service_account_kubeconfig},
    crd,
    fixtures::host_namespace,
    tenant::absent,
    wait,
};

fn example(file: &str) -> serde_yaml::Value {
    let path = repo_root().join("examples").join(file);
    serde_yaml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

fn vc_resource() -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk(
        "vnest.dev",
        "v1alpha1",
        "VirtualCluster",
    ))
}

/// The VirtualCluster CRD is Established and served under its short names.
#[tokio::test]
async fn crd_is_established_and_served_with_its_short_names() {
    let client = bed().host().await;
    crd::install(&client).await;
    let out = bed()
        .kubectl(&["api-resources", "--api-group=vnest.dev", "-o", "wide"])
        .unwrap();
    assert!(
        out.contains("virtualclusters") && out.contains("vc,vcluster"),
        "{out}"
    );
}

/// Every example manifest is accepted by strict validation and reads back unchanged.
#[tokio::test]
async fn every_example_is_accepted_and_reads_back_as_written() {
    let (client, ns) = host_namespace("examples").await;
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns.name, &vc_resource());
    let files = [
        "team-alpha-production.yaml",
        "ci-minimal.yaml",
        "training.yaml",
        "saas-customer.yaml",
        "sleep-mode.yaml",
        "auto-delete.yaml",
    ];
    for file in files {
        let doc = example(file);
        let mut obj: DynamicObject = serde_yaml::from_value(doc.clone()).unwrap();
        obj.metadata.namespace = Some(ns.name.clone());
        let name = obj.name_any();
        let mut params = PatchParams::apply("vnest-tests");
        params.field_validation = Some(kube::api::ValidationDirective::Strict);
        api.patch(&name, &params, &Patch::Apply(&obj))
            .await
            .unwrap_or_else(|e| panic!("{file} refused: {e}"));
        let back = api.get(&name).await.unwrap();
        let written: serde_json::Value = serde_json::to_value(&doc["spec"]).unwrap();
        assert_subset(&back.data["spec"], &written, file, "spec");
        // Typed read-back: what the operator will see.
        let typed: VirtualCluster = Api::namespaced(client.clone(), &ns.name)
            .get(&name)
            .await
            .unwrap();
        assert_eq!(typed.name_any(), name);
    }
    ns.delete(&client).await;
}

/// Every field written is present with the same value (the server adds defaults).
fn assert_subset(actual: &serde_json::Value, written: &serde_json::Value, file: &str, path: &str) {
    match written {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                assert_subset(&actual[k], v, file, &format!("{path}.{k}"));
            }
        }
        serde_json::Value::Number(n) if actual.is_string() => {
            assert_eq!(actual.as_str().unwrap(), n.to_string(), "{file}: {path}");
        }
        _ => assert_eq!(actual, written, "{file}: {path}"),
    }
}

/// Schema defaults fill the seed's isolation numbers when a spec leaves them out.
#[tokio::test]
async fn schema_defaults_fill_the_seed_isolation_numbers() {
    let (client, ns) = host_namespace("defaults").await;
    let api: Api<VirtualCluster> = Api::namespaced(client.clone(), &ns.name);
    let vc: VirtualCluster = serde_json::from_value(json!({
        "apiVersion": "vnest.dev/v1alpha1", "kind": "VirtualCluster",
        "metadata": { "name": "minimal" }, "spec": {}
    }))
    .unwrap();
    let back = api.create(&PostParams::default(), &vc).await.unwrap();
    let quota = &back.spec.policies.resource_quota.quota.0;
    assert_eq!(quota["requests.cpu"].0, "8");
    assert_eq!(quota["limits.memory"].0, "32Gi");
    assert!(back.spec.sync.to_host.pods.enabled);
    assert!(!back.spec.sync.to_host.ingresses.enabled);
    assert!(back.spec.sync.from_host.storage_classes.enabled);
    ns.delete(&client).await;
}

/// The API server refuses invalid specs with vnest's own CEL messages naming the field.
#[tokio::test]
async fn invalid_specs_are_refused_with_vnest_messages() {
    let (client, ns) = host_namespace("invalid").await;
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns.name, &vc_resource());
    let cases = [
        (
            json!({ "controlPlane": { "distro": { "k3s": { "enabled": true }, "k0s": { "enabled": true } } } }),
            "spec.controlPlane.distro",
            "enable only one of k3s, k0s and k8s",
        ),
        (
            json!({ "controlPlane": { "backingStore": { "database": { "embedded": { "enabled": true } }, "etcd": { "embedded": { "enabled": true } } } } }),
            "spec.controlPlane.backingStore",
            "enable only one of database.embedded and etcd.embedded",
        ),
        (
            json!({ "sleepMode": { "sleepSchedule": "every evening" } }),
            "spec.sleepMode.sleepSchedule",
            "must be a 5-field cron expression",
        ),
        (
            json!({ "sleepMode": { "timezone": "UTC" } }),
            "spec.sleepMode",
            "set afterInactivity or sleepSchedule",
        ),
        (
            json!({ "autoDelete": { "afterInactivity": "4 hours" } }),
            "spec.autoDelete.afterInactivity",
            "must be whole seconds (1800) or a duration",
        ),
        (
            json!({ "policies": { "resourceQuota": { "quota": { "pods": "lots" } } } }),
            "spec.policies.resourceQuota.quota[pods]",
            "must be a Kubernetes quantity",
        ),
        (
            json!({ "sync": { "toHost": { "priorityclasses": { "enabled": true } }, "fromHost": { "priorityClasses": { "enabled": true } } } }),
            "spec.sync",
            "a resource syncs in one direction only",
        ),
        (
            json!({ "controlPlane": { "ingress": { "enabled": true } } }),
            "spec.controlPlane.ingress",
            "set host when the ingress is enabled",
        ),
        (
            json!({ "exportKubeconfig": { "server": "http://insecure.example.com" } }),
            "spec.exportKubeconfig.server",
            "must be an https:// URL",
        ),
        (
            json!({ "policies": { "networkPolicy": { "outgoingConnections": { "ipBlock": { "cidr": "10.0.0.0/33" } } } } }),
            "spec.policies.networkPolicy.outgoingConnections.ipBlock.cidr",
            "must be a CIDR",
        ),
        (
            json!({ "controlPlane": { "distro": { "k3s": { "enabled": "yes" } } } }),
            "spec.controlPlane.distro.k3s.enabled",
            "boolean",
        ),
    ];
    for (i, (spec, field, message)) in cases.into_iter().enumerate() {
        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "vnest.dev/v1alpha1", "kind": "VirtualCluster",
            "metadata": { "name": format!("bad-{i}") }, "spec": spec,
        }))
        .unwrap();
        let err = api
            .create(&PostParams::default(), &obj)
            .await
            .expect_err(&format!("case {i} ({field}) was accepted"));
        let text = err.to_string();
        assert!(
            text.contains(field) && text.contains(message),
            "case {i}: expected {field}: {message}, got {text}"
        );
    }
    let left = api.list(&ListParams::default()).await.unwrap();
    assert!(left.items.is_empty(), "a refused object was stored");
    ns.delete(&client).await;
}

/// A name some host object could not take is refused by the API server itself, with the
/// maximum in the message, so nothing is half-applied (issue 16: a 63-character name got its
/// ClusterRole, Secrets and Service, and then `<name>-headless` was refused). The longest
/// allowed name is taken and can still be updated (the rules run on creation only).
#[tokio::test]
async fn names_the_host_objects_cannot_take_are_refused_on_creation() {
    let (client, ns) = host_namespace("names").await;
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns.name, &vc_resource());
    let object = |name: &str| -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "vnest.dev/v1alpha1", "kind": "VirtualCluster",
            "metadata": { "name": name }, "spec": {},
        }))
        .unwrap()
    };
    let max = vnest_crds::meta::MAX_VIRTUAL_CLUSTER_NAME;
    assert_eq!(max, 52);
    let cases = [
        (
            "a".repeat(63),
            "metadata.name must be at most 52 characters: the StatefulSet's pods",
        ),
        (
            format!("a{}", "b".repeat(max)),
            "metadata.name must be at most 52 characters: the StatefulSet's pods",
        ),
        (
            "team.alpha".to_string(),
            "metadata.name must be a DNS-1035 label",
        ),
        (
            "1team".to_string(),
            "metadata.name must be a DNS-1035 label",
        ),
    ];
    for (name, message) in &cases {
        let err = api
            .create(&PostParams::default(), &object(name))
            .await
            .expect_err(&format!(
                "{name:?} ({} characters) was accepted",
                name.len()
            ));
        let text = err.to_string();
        assert!(
            text.contains(message),
            "{name:?}: expected {message:?}, got {text}"
        );
    }
    let left = api.list(&ListParams::default()).await.unwrap();
    assert!(left.items.is_empty(), "a refused object was stored");

    let longest = format!("a{}", "b".repeat(max - 1));
    api.create(&PostParams::default(), &object(&longest))
        .await
        .expect("the longest allowed name");
    api.patch(
        &longest,
        &PatchParams::default(),
        &Patch::Merge(json!({ "metadata": { "labels": { "edited": "yes" } } })),
    )
    .await
    .expect("an update of the longest allowed name");
    ns.delete(&client).await;
}

/// The bed schedules a StatefulSet pod onto a KWOK node and reports it Running.
#[tokio::test]
async fn a_statefulset_pod_runs_on_a_kwok_node() {
    let client = bed().host().await;
    let ns = TestNamespace::create(&client, "sts").await;
    let sts: StatefulSet = serde_json::from_value(json!({
        "metadata": { "name": "web" },
        "spec": {
            "replicas": 2, "serviceName": "web",
            "selector": { "matchLabels": { "app": "web" } },
            "template": { "metadata": { "labels": { "app": "web" } },
                "spec": { "containers": [{ "name": "web", "image": "nginx:1.27" }] } },
        }
    }))
    .unwrap();
    Api::<StatefulSet>::namespaced(client.clone(), &ns.name)
        .create(&PostParams::default(), &sts)
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns.name);
    let nodes = wait::until(
        "both pods Running on KWOK nodes",
        Duration::from_secs(60),
        || async {
            let list = pods
                .list(&ListParams::default().labels("app=web"))
                .await
                .map_err(|e| e.to_string())?;
            let running: Vec<String> = list
                .items
                .iter()
                .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
                .filter_map(|p| p.spec.as_ref()?.node_name.clone())
                .collect();
            if running.len() == 2 {
                Ok(running)
            } else {
                Err(format!("{} running", running.len()))
            }
        },
    )
    .await;
    assert!(
        nodes.iter().all(|n| n.starts_with("kwok-node-")),
        "{nodes:?}"
    );
    ns.delete(&client).await;
}

/// The bed's garbage collector deletes objects whose owner is gone.
#[tokio::test]
async fn the_garbage_collector_deletes_owned_objects() {
    let client = bed().host().await;
    let ns = TestNamespace::create(&client, "gc").await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    let owner = api
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({ "metadata": { "name": "owner" } })).unwrap(),
        )
        .await
        .unwrap();
    let child: ConfigMap =
        serde_json::from_value(json!({ "metadata": { "name": "child", "ownerReferences": [{
            "apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.uid().unwrap(),
        }]}}))
        .unwrap();
    api.create(&PostParams::default(), &child).await.unwrap();
    api.delete("owner", &DeleteParams::background())
        .await
        .unwrap();
    wait::until(
        "the owned ConfigMap to be collected",
        Duration::from_secs(60),
        || absent(&api, "child"),
    )
    .await;
    ns.delete(&client).await;
}

/// Objects made in the bed's virtual API server are not visible on the host, and back.
#[tokio::test]
async fn the_virtual_api_server_is_a_separate_cluster() {
    let host = bed().host().await;
    let virt = bed().virtual_cluster().await;
    let ns = TestNamespace::create(&virt, "only-virtual").await;
    let on_host = Api::<Namespace>::all(host.clone())
        .get_opt(&ns.name)
        .await
        .unwrap();
    assert!(
        on_host.is_none(),
        "a namespace created in the virtual cluster appeared on the host"
    );
    // Its own controller manager gives new namespaces a default ServiceAccount.
    let sa: Api<k8s_openapi::api::core::v1::ServiceAccount> =
        Api::namespaced(virt.clone(), &ns.name);
    wait::until(
        "the virtual default ServiceAccount",
        Duration::from_secs(30),
        || async {
            sa.get("default")
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        },
    )
    .await;
    ns.delete(&virt).await;
}

/// A kubeconfig minted for a ServiceAccount carries exactly that account's rights.
#[tokio::test]
async fn a_minted_service_account_kubeconfig_has_only_its_rbac() {
    let client = bed().host().await;
    let ns = TestNamespace::create(&client, "mint").await;
    // `kubectl create <what>` in the test's namespace, which must succeed.
    let create = |what: &[&str]| {
        let args = [&["-n", ns.name.as_str(), "create"][..], what].concat();
        bed().kubectl(&args).unwrap();
    };
    create(&["serviceaccount", "reader"]);
    create(&["role", "pod-reader", "--verb=get,list", "--resource=pods"]);
    create(&[
        "rolebinding",
        "pod-reader",
        "--role=pod-reader",
        &format!("--serviceaccount={}:reader", ns.name),
    ]);
    let path = service_account_kubeconfig(&ns.name, "reader").await;
    let sa_client = vnest_tests::bed::client_for(&path).await;
    Api::<Pod>::namespaced(sa_client.clone(), &ns.name)
        .list(&ListParams::default())
        .await
        .expect("may list pods");
    let denied = Api::<ConfigMap>::namespaced(sa_client, &ns.name)
        .list(&ListParams::default())
        .await;
    assert!(
        matches!(denied, Err(kube::Error::Api(ref s)) if s.code == 403),
        "{denied:?}"
    );
    ns.delete(&client).await;
}
