//! The Helm chart with real `helm`: it lints, its values schema refuses bad values naming the
//! key, it renders what a platform team expects, and once installed its ServiceAccount's RBAC
//! is enough for the operator to take a VirtualCluster to Ready and clean it up again.

use std::{path::PathBuf, process::Command, time::Duration};

use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::Api;
use serde_json::json;
use vnest_crds::VirtualCluster;
use vnest_tests::{
    OperatorProcess, TestNamespace, bed,
    bed::{repo_root, service_account_kubeconfig},
    crd,
    fixtures::{
        ALL_VERBS, create_virtual_cluster, free_port, host_namespace, provide_data_volume,
        wait_condition,
    },
    operator::operator_binary,
    tenant::absent,
    wait,
};

fn chart() -> PathBuf {
    repo_root().join("charts/vnest")
}

/// Runs the bed's helm against the host; stdout on success, stdout+stderr as the error.
fn helm(args: &[&str]) -> Result<String, String> {
    let out = Command::new(bed().bin("helm"))
        .arg("--kubeconfig")
        .arg(bed().host_kubeconfig())
        .args(args)
        .env(
            "HELM_CACHE_HOME",
            std::env::temp_dir().join("vnest-helm/cache"),
        )
        .env(
            "HELM_CONFIG_HOME",
            std::env::temp_dir().join("vnest-helm/config"),
        )
        .env(
            "HELM_DATA_HOME",
            std::env::temp_dir().join("vnest-helm/data"),
        )
        .output()
        .map_err(|e| e.to_string())?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if out.status.success() {
        Ok(stdout)
    } else {
        Err(format!("{stdout}{}", String::from_utf8_lossy(&out.stderr)))
    }
}

/// `helm template` output as JSON documents.
fn render(sets: &[&str]) -> Vec<serde_json::Value> {
    let chart = chart();
    let mut args = vec![
        "template",
        "rel",
        chart.to_str().unwrap(),
        "-n",
        "vnest-system",
    ];
    for set in sets {
        args.extend(["--set", set]);
    }
    let out = helm(&args).unwrap_or_else(|e| panic!("helm template {sets:?}: {e}"));
    serde_yaml::Deserializer::from_str(&out)
        .map(|doc| serde::Deserialize::deserialize(doc).expect("rendered YAML"))
        .filter(|doc: &serde_json::Value| !doc.is_null())
        .collect()
}

fn find<'a>(docs: &'a [serde_json::Value], kind: &str) -> Option<&'a serde_json::Value> {
    docs.iter().find(|d| d["kind"] == kind)
}

fn operator_args(docs: &[serde_json::Value]) -> Vec<String> {
    let deployment = find(docs, "Deployment").expect("a Deployment");
    serde_json::from_value(deployment["spec"]["template"]["spec"]["containers"][0]["args"].clone())
        .expect("args")
}

/// `helm lint` passes and the values schema refuses each bad value naming its key.
#[test]
fn chart_lints_and_its_schema_refuses_bad_values_by_name() {
    let chart = chart();
    let chart = chart.to_str().unwrap();
    helm(&["lint", chart]).expect("the chart lints clean");
    for (set, names) in [
        ("replicas=0", "/replicas"),
        ("logFormat=xml", "/logFormat"),
        ("metrics.port=70000", "/metrics/port"),
        ("watchNamespaces[0]=Not_A_Namespace", "/watchNamespaces/0"),
        ("replica=2", "'replica' not allowed"),
        (
            "defaultPolicy.namespaceSelector.matchExpressions[0].operator=Like",
            "/defaultPolicy/namespaceSelector/matchExpressions/0/operator",
        ),
    ] {
        let err = helm(&["lint", chart, "--set", set]).expect_err(set);
        assert!(
            err.contains(names),
            "--set {set}: expected {names} in:\n{err}"
        );
    }
}

/// The rendered chart runs one leader-elected operator with only the RBAC rules its README lists.
#[test]
fn chart_renders_a_leader_elected_operator_with_least_rbac() {
    let docs = render(&[]);
    let deployment = find(&docs, "Deployment").unwrap();
    assert_eq!(deployment["spec"]["replicas"], 2);
    let args = operator_args(&docs);
    assert!(args.contains(&"--leader-election-lease=rel-vnest-operator".to_string()));
    assert!(args.contains(&"--log-format=json".to_string()));
    assert!(
        !args.iter().any(|a| a.starts_with("--namespace")),
        "{args:?}"
    );
    assert!(
        !args.contains(&"--allow-extra-rules".to_string()),
        "extra rules are off by default: {args:?}"
    );
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "rel-vnest-operator");
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(
        pod["containers"][0]["image"],
        "ghcr.io/vnest-dev/vnest-operator:0.1.0"
    );
    assert!(find(&docs, "ServiceMonitor").is_none());
    assert!(find(&docs, "Service").is_some(), "the metrics Service");
    assert!(
        args.contains(&"--service-cidr=10.96.0.0/12".to_string()),
        "{args:?}"
    );

    // Cluster-wide, Leases and EndpointSlices only as the activity and leader Leases and the
    // wake EndpointSlice need them: no deletecollection, no delete of Leases, no wildcards.
    let cluster_role: ClusterRole =
        serde_json::from_value(find(&docs, "ClusterRole").unwrap().clone()).unwrap();
    let rules = cluster_role.rules.unwrap_or_default();
    let verbs_on = |resource: &str| -> Vec<String> {
        rules
            .iter()
            .filter(|r| r.resources.iter().flatten().any(|res| res == resource))
            .flat_map(|r| r.verbs.clone())
            .collect()
    };
    assert_eq!(
        verbs_on("leases"),
        ["get", "list", "watch", "create", "update", "patch"],
        "{rules:?}"
    );
    assert_eq!(
        verbs_on("virtualclusterpolicies"),
        ["get", "list", "watch"],
        "policies are read, never written: {rules:?}"
    );
    assert_eq!(
        verbs_on("ingresses"),
        ALL_VERBS,
        "the control plane's Ingress is a child like the others: {rules:?}"
    );
    assert_eq!(
        verbs_on("endpointslices"),
        ["get", "list", "watch", "create", "patch", "delete"],
        "{rules:?}"
    );
    let env = &pod["containers"][0]["env"];
    assert!(
        env.as_array()
            .unwrap()
            .iter()
            .any(|e| e["name"] == "POD_IP"
                && e["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"),
        "{env}"
    );
    assert!(
        args.contains(&"--wake-address=0.0.0.0:9443".to_string()),
        "{args:?}"
    );
    assert!(
        args.contains(&"--wake-advertise-ip=$(POD_IP)".to_string()),
        "{args:?}"
    );
    assert_eq!(pod["containers"][0]["ports"][1]["name"], "wake");
    assert!(
        !rules.iter().any(|r| r.verbs.iter().any(|v| v == "*")
            || r.resources.iter().flatten().any(|res| res == "*")),
        "no wildcards: {rules:?}"
    );

    // The default policy: every namespace without `vnest.dev/policy`, no extra rules.
    let policy = find(&docs, "VirtualClusterPolicy").expect("the default policy");
    assert_eq!(policy["metadata"]["name"], "rel-vnest-operator-default");
    assert_eq!(
        policy["spec"]["namespaceSelector"],
        json!({ "matchExpressions": [{ "key": "vnest.dev/policy", "operator": "DoesNotExist" }] })
    );
    assert_eq!(policy["spec"]["minPodSecurityStandard"], "baseline");
    assert!(policy["spec"]["rbac"].is_null(), "{policy}");
    assert!(
        find(
            &render(&["defaultPolicy.enabled=false"]),
            "VirtualClusterPolicy"
        )
        .is_none()
    );

    let docs = render(&[
        "serviceMonitor.enabled=true",
        "syncerServiceMonitor.enabled=true",
        "watchNamespaces={team-a,team-b}",
        "images.syncer=registry.local/syncer:dev",
        "images.kubernetes=registry.local/kubernetes:v1.37.2",
        "replicas=1",
        "allowExtraRules=true",
    ]);
    assert!(find(&docs, "ServiceMonitor").is_some());
    // The syncers' ServiceMonitor: every headless Service's `metrics` port, in the watched
    // namespaces.
    let syncers = docs
        .iter()
        .find(|d| {
            d["kind"] == "ServiceMonitor" && d["metadata"]["name"] == "rel-vnest-operator-syncers"
        })
        .expect("the syncers' ServiceMonitor");
    assert_eq!(
        syncers["spec"]["namespaceSelector"]["matchNames"],
        serde_json::json!(["team-a", "team-b"])
    );
    assert_eq!(
        syncers["spec"]["selector"]["matchLabels"]["app.kubernetes.io/managed-by"],
        "vnest-operator"
    );
    // A tenant's Service synced to the host can copy the `app.kubernetes.io/` labels, never a
    // `vnest.dev/` key (the syncer rewrites those).
    assert_eq!(
        syncers["spec"]["selector"]["matchExpressions"],
        serde_json::json!([{ "key": "vnest.dev/virtual-cluster", "operator": "Exists" }])
    );
    assert_eq!(syncers["spec"]["endpoints"][0]["port"], "metrics");
    assert_eq!(find(&docs, "Deployment").unwrap()["spec"]["replicas"], 1);
    let args = operator_args(&docs);
    assert!(
        args.contains(&"--namespace=team-a,team-b".to_string()),
        "{args:?}"
    );
    assert!(args.contains(&"--syncer-image=registry.local/syncer:dev".to_string()));
    assert!(
        args.contains(&"--allow-extra-rules".to_string()),
        "{args:?}"
    );
    assert!(args.contains(&"--kubernetes-image=registry.local/kubernetes:v1.37.2".to_string()));
    // allowExtraRules keeps its meaning in the namespaces the default policy governs.
    let policy = find(&docs, "VirtualClusterPolicy").expect("the default policy");
    assert_eq!(
        policy["spec"]["rbac"]["role"]["allowedRules"][0]["verbs"],
        json!(["*"])
    );
}

/// The default policy the chart renders is one the API server accepts as written (a strict
/// server-side dry run: a real one would govern every test namespace on the shared bed).
#[tokio::test]
async fn the_default_policy_is_accepted_strictly() {
    let client = bed().host().await;
    crd::install(&client).await;
    for sets in [&[][..], &["allowExtraRules=true"][..]] {
        let docs = render(sets);
        let policy = find(&docs, "VirtualClusterPolicy").expect("the default policy");
        let obj: kube::api::DynamicObject = serde_json::from_value(policy.clone()).unwrap();
        let api: Api<kube::api::DynamicObject> = Api::all_with(
            client.clone(),
            &kube::core::ApiResource::erase::<vnest_crds::VirtualClusterPolicy>(&()),
        );
        let mut params = kube::api::PatchParams::apply("vnest-tests");
        params.field_validation = Some(kube::api::ValidationDirective::Strict);
        params.dry_run = true;
        api.patch(
            &obj.metadata.name.clone().unwrap(),
            &params,
            &kube::api::Patch::Apply(&obj),
        )
        .await
        .unwrap_or_else(|e| panic!("the default policy {sets:?} is refused: {e}"));
    }
}

/// An operator on the installed chart's ServiceAccount token can make a VirtualCluster Ready and clean it up.
#[tokio::test]
async fn installed_chart_rbac_is_enough_to_run_and_clean_up_a_virtual_cluster() {
    let (client, release_ns) = host_namespace("chart").await;
    let tenant_ns = TestNamespace::create(&client, "chart-vc").await;
    let release = format!("r{}", std::process::id());
    let chart = chart();
    helm(&[
        "install",
        &release,
        chart.to_str().unwrap(),
        "-n",
        &release_ns.name,
        "--skip-crds",
        "--set",
        "replicas=1",
        // A real default policy would govern every namespace of the shared bed (other tests'
        // too); it is checked by rendering and a dry run instead.
        "--set",
        "defaultPolicy.enabled=false",
    ])
    .expect("helm install");

    // The operator runs as a local process (KWOK pods run nothing) with the chart's token.
    let service_account = format!("{release}-vnest-operator");
    let kubeconfig = service_account_kubeconfig(&release_ns.name, &service_account).await;
    let mut operator = OperatorProcess::start_as(
        &operator_binary(),
        &kubeconfig,
        Some(&tenant_ns.name),
        &release_ns.name,
        "chart-op",
        free_port(),
        // The VirtualCluster below asks for extra Role rules, which the admins allow.
        &["--allow-extra-rules".to_string()],
    );

    provide_data_volume(&client, &tenant_ns.name, "vc").await;
    // Everything that needs a grant: policies and PSS labels, extra Role rules (escalate),
    // a ClusterRole for node sync from the host.
    create_virtual_cluster(
        &client,
        &tenant_ns.name,
        "vc",
        json!({
            "policies": {
                "resourceQuota": { "enabled": true },
                "limitRange": { "enabled": true },
                "networkPolicy": { "enabled": true },
                "podSecurityStandard": "baseline",
            },
            "rbac": { "role": { "extraRules": [
                { "apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "list"] },
            ] } },
            "sync": { "fromHost": { "nodes": { "enabled": true, "selector": { "all": true } } } },
        }),
    )
    .await;
    let ready = wait_condition(
        &client,
        &tenant_ns.name,
        "vc",
        "Ready",
        "True",
        Duration::from_secs(90),
    )
    .await;
    assert!(operator.is_running(), "log: {}", operator.log.display());
    assert!(
        ready
            .status
            .unwrap()
            .conditions
            .iter()
            .all(|c| c.reason != "ApplyFailed"),
        "nothing was forbidden"
    );

    let vcs: Api<VirtualCluster> = Api::namespaced(client.clone(), &tenant_ns.name);
    vcs.delete("vc", &Default::default()).await.unwrap();
    wait::until("VirtualCluster gone", Duration::from_secs(60), || {
        absent(&vcs, "vc")
    })
    .await;
    let cluster_roles: Api<ClusterRole> = Api::all(client.clone());
    assert!(
        cluster_roles
            .get_opt(&format!("vc-{}-vc", tenant_ns.name))
            .await
            .unwrap()
            .is_none(),
        "the finalizer removed the syncer's ClusterRole"
    );
    let log = std::fs::read_to_string(&operator.log).unwrap_or_default();
    assert!(
        !log.contains("forbidden"),
        "operator log has RBAC denials:\n{log}"
    );

    operator.kill();
    helm(&["uninstall", &release, "-n", &release_ns.name]).expect("helm uninstall");
    tenant_ns.delete(&client).await;
    release_ns.delete(&client).await;
}
