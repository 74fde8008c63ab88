//! The Argo CD and Backstage integrations in `examples/`, checked against the real API server
//! and, for the Argo CD health script, Argo CD's own Lua engine (gopher-lua, built by
//! `tests/testbed/build-lua-health.sh`): the health follows a VirtualCluster's status, the
//! ApplicationSet's directories hold VirtualClusters the API server and operator accept, and
//! the Backstage skeleton renders one that reaches Ready with its lifetime set.

use std::{
    collections::BTreeMap,
    io::Write,
    path::PathBuf,
    process::{Command, Stdio},
    time::Duration,
};

use kube::{
    Api, Client,
    api::{DynamicObject, Patch, PatchParams, ValidationDirective},
    core::GroupVersionKind,
    discovery::ApiResource,
};
use serde_json::{Value, json};
use vnest_crds::VirtualClusterTemplate;
use vnest_tests::{
    OperatorProcess, bed,
    bed::{repo_root, run},
    fixtures::{
        create_virtual_cluster, free_port, host_namespace, provide_data_volume, setup,
        wait_condition,
    },
};

fn example(path: &str) -> String {
    std::fs::read_to_string(repo_root().join("examples").join(path)).unwrap()
}

fn lua_health_binary() -> PathBuf {
    let out = run(Command::new("bash").arg(repo_root().join("tests/testbed/build-lua-health.sh")));
    PathBuf::from(out.trim())
}

/// Argo CD's verdict on `object`: (status, message).
fn argo_health(object: &Value) -> (String, String) {
    let mut child = Command::new(lua_health_binary())
        .arg(repo_root().join("examples/argocd/health-virtualcluster.lua"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(object.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let verdict: BTreeMap<String, String> = serde_json::from_slice(&out.stdout).unwrap();
    (verdict["status"].clone(), verdict["message"].clone())
}

fn vc_json(namespace: &str, name: &str) -> Value {
    let text = bed()
        .kubectl(&["-n", namespace, "get", "virtualcluster", name, "-o", "json"])
        .unwrap();
    serde_json::from_str(&text).unwrap()
}

/// The Argo CD health ConfigMap carries exactly the Lua script the tests run.
#[test]
fn the_argocd_configmap_carries_the_tested_script() {
    let cm: Value = serde_yaml::from_str(&example("argocd/argocd-cm.yaml")).unwrap();
    let script = cm["data"]["resource.customizations.health.vnest.dev_VirtualCluster"]
        .as_str()
        .unwrap();
    assert_eq!(script, example("argocd/health-virtualcluster.lua"));
}

/// Argo CD's Lua health check reports each VirtualCluster phase correctly.
#[tokio::test]
async fn argo_health_follows_the_virtual_cluster_status() {
    let fresh = json!({ "metadata": { "name": "x", "generation": 1 }, "spec": {} });
    assert_eq!(argo_health(&fresh).0, "Progressing");
    let stale = json!({
        "metadata": { "name": "x", "generation": 3 },
        "status": { "observedGeneration": 2, "conditions": [{ "type": "Ready", "status": "True", "message": "ok" }] },
    });
    let (status, message) = argo_health(&stale);
    assert_eq!(status, "Progressing");
    assert!(message.contains("generation 3"), "{message}");

    let (client, ns, _operator) = setup("argo").await;
    let n = ns.name.as_str();
    for name in ["up", "paused"] {
        provide_data_volume(&client, n, name).await;
    }
    create_virtual_cluster(&client, n, "up", json!({})).await;
    create_virtual_cluster(&client, n, "paused", json!({ "paused": true })).await;
    create_virtual_cluster(
        &client,
        n,
        "bad",
        json!({ "sleepMode": { "sleepSchedule": "0 20 * * *", "timezone": "Mars/Olympus" } }),
    )
    .await;
    let timeout = Duration::from_secs(90);
    wait_condition(&client, n, "up", "Ready", "True", timeout).await;
    wait_condition(&client, n, "paused", "Sleeping", "True", timeout).await;
    wait_condition(&client, n, "bad", "SpecValid", "False", timeout).await;

    assert_eq!(argo_health(&vc_json(n, "up")).0, "Healthy");
    let (status, message) = argo_health(&vc_json(n, "paused"));
    assert_eq!(status, "Suspended");
    assert!(message.contains("paused"), "{message}");
    let (status, message) = argo_health(&vc_json(n, "bad"));
    assert_eq!(status, "Degraded");
    assert!(message.contains("timezone"), "{message}");
    ns.delete(&client).await;
}

/// Applies a shipped template (cluster-scoped, same content for every run).
async fn apply_template(client: &Client, file: &str) {
    let template: VirtualClusterTemplate =
        serde_yaml::from_str(&example(&format!("templates/{file}"))).unwrap();
    let name = template.metadata.name.clone().unwrap();
    let mut params = PatchParams::apply("vnest-tests").force();
    params.field_validation = Some(ValidationDirective::Strict);
    Api::<VirtualClusterTemplate>::all(client.clone())
        .patch(&name, &params, &Patch::Apply(&template))
        .await
        .unwrap_or_else(|e| panic!("{file}: {e}"));
}

/// Applies a VirtualCluster manifest strictly into `namespace`; returns its name.
async fn apply_virtual_cluster(client: &Client, namespace: &str, manifest: &str) -> String {
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(
        "vnest.dev",
        "v1alpha1",
        "VirtualCluster",
    ));
    let mut object: DynamicObject = serde_yaml::from_str(manifest).unwrap();
    object.metadata.namespace = Some(namespace.to_string());
    let name = object.metadata.name.clone().unwrap();
    let mut params = PatchParams::apply("vnest-tests");
    params.field_validation = Some(ValidationDirective::Strict);
    Api::<DynamicObject>::namespaced_with(client.clone(), namespace, &resource)
        .patch(&name, &params, &Patch::Apply(&object))
        .await
        .unwrap_or_else(|e| panic!("{manifest}\nrefused: {e}"));
    name
}

/// Every ApplicationSet directory holds VirtualClusters the operator accepts.
#[tokio::test]
async fn every_applicationset_directory_holds_virtual_clusters_the_operator_accepts() {
    let set: Value = serde_yaml::from_str(&example("argocd/applicationset.yaml")).unwrap();
    let pattern = set["spec"]["generators"][0]["git"]["directories"][0]["path"]
        .as_str()
        .unwrap();
    let parent = pattern.strip_suffix("/*").expect("a directory glob");
    let template = &set["spec"]["template"]["spec"];
    assert_eq!(template["destination"]["namespace"], "{{.path.basename}}");
    assert_eq!(template["source"]["path"], "{{.path.path}}");

    let (client, ns) = host_namespace("appset").await;
    apply_template(&client, "small.yaml").await;
    apply_template(&client, "medium.yaml").await;
    let _operator = OperatorProcess::start(bed(), &ns.name, "op-appset", free_port());
    let mut directories = 0;
    for dir in std::fs::read_dir(repo_root().join(parent)).unwrap() {
        let dir = dir.unwrap().path();
        directories += 1;
        for file in std::fs::read_dir(&dir).unwrap() {
            let manifest = std::fs::read_to_string(file.unwrap().path()).unwrap();
            let name = apply_virtual_cluster(&client, &ns.name, &manifest).await;
            wait_condition(
                &client,
                &ns.name,
                &name,
                "SpecValid",
                "True",
                Duration::from_secs(30),
            )
            .await;
        }
    }
    assert!(
        directories >= 2,
        "the ApplicationSet has clusters to generate"
    );
    ns.delete(&client).await;
}

/// The skeleton with every `${{ values.<key> }}` replaced.
fn render_skeleton(values: &BTreeMap<&str, &str>) -> String {
    let mut text = example("backstage/skeleton/virtualcluster.yaml");
    for (key, value) in values {
        text = text.replace(&format!("${{{{ values.{key} }}}}"), value);
    }
    assert!(
        !text.contains("${{") && !text.contains("{%"),
        "the skeleton uses only the values the template passes:\n{text}"
    );
    text
}

/// The Backstage skeleton renders a VirtualCluster that reaches Ready.
#[tokio::test]
async fn the_backstage_skeleton_renders_a_virtual_cluster_that_reaches_ready() {
    let template: Value = serde_yaml::from_str(&example("backstage/template.yaml")).unwrap();
    let properties = &template["spec"]["parameters"][0]["properties"];
    let passed = template["spec"]["steps"][0]["input"]["values"]
        .as_object()
        .unwrap();
    for (key, value) in passed {
        assert_eq!(value, &format!("${{{{ parameters.{key} }}}}"), "{key}");
        assert!(properties.get(key).is_some(), "parameter {key} is declared");
    }
    let sizes: Vec<&str> = properties["size"]["enum"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    for size in &sizes {
        assert!(
            repo_root()
                .join(format!("examples/templates/{size}.yaml"))
                .exists(),
            "size {size} names a shipped VirtualClusterTemplate"
        );
    }

    let (client, ns) = host_namespace("backstage").await;
    apply_template(&client, "small.yaml").await;
    let _operator = OperatorProcess::start(bed(), &ns.name, "op-backstage", free_port());
    let values = BTreeMap::from([
        ("name", "checkout"),
        ("team", ns.name.as_str()),
        ("purpose", "development"),
        ("size", "small"),
        ("ttl", "72h"),
    ]);
    provide_data_volume(&client, &ns.name, "checkout").await;
    let name = apply_virtual_cluster(&client, &ns.name, &render_skeleton(&values)).await;
    let ready = wait_condition(
        &client,
        &ns.name,
        &name,
        "Ready",
        "True",
        Duration::from_secs(90),
    )
    .await;
    let status = ready.status.unwrap();
    let delete_at = status.delete_at.expect("the ttl became status.deleteAt").0;
    let created = ready.metadata.creation_timestamp.unwrap().0;
    assert_eq!(delete_at.as_second() - created.as_second(), 72 * 3600);
    assert_eq!(status.template.unwrap().name, "small");
    ns.delete(&client).await;
}
