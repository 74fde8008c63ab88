//! The syncer as a real process between the bed's virtual API server and a host namespace
//! the operator prepared, authenticated as the operator-made ServiceAccount (so the
//! operator's Role is all it has): tenant pods run on KWOK nodes under vCluster's names and
//! report back Running; Services take the host ClusterIP; only used ConfigMaps and Secrets
//! are copied; copies deleted by hand come back; objects deleted while the syncer is down
//! are cleaned up on restart; pod security refusals leave the pod Pending with an event;
//! names at the 63-character edge work.

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Endpoints, Node, Pod, Secret, Service};
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, ListParams, Patch, PatchParams},
};
use serde_json::{Value, json};
use vnest_crds::meta::{
    ANNOTATION_OBJECT_KIND, ANNOTATION_OBJECT_NAME, ANNOTATION_OBJECT_NAMESPACE,
    ANNOTATION_OBJECT_UID, LABEL_SYNCER_MANAGED_BY, LABEL_SYNCER_NAMESPACE,
};
use vnest_tests::tenant::{
    TIMEOUT, Tenant as Setup, VC, absent, delete, phase, present, setup, virtual_whoami,
    warning_about,
};
use vnest_tests::{SyncerProcess, bed, wait};

fn pod(name: &str, labels: Value, spec: Value) -> Value {
    json!({ "apiVersion": "v1", "kind": "Pod", "metadata": { "name": name, "labels": labels }, "spec": spec })
}

fn app_spec(configmap: &str, secret: &str) -> Value {
    json!({
        "containers": [{
            "name": "app", "image": "nginx",
            "envFrom": [{ "configMapRef": { "name": configmap } }],
            "volumeMounts": [{ "name": "creds", "mountPath": "/creds" }],
        }],
        "volumes": [{ "name": "creds", "secret": { "secretName": secret } }],
    })
}

fn configmap(name: &str, value: &str) -> Value {
    json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": name }, "data": { "key": value } })
}

/// Tenant workloads run on the host under vCluster's names and their status comes back.
#[tokio::test]
async fn tenant_workloads_run_on_the_host_and_report_back() {
    let s = setup("sy-run", json!({})).await;
    let _syncer = s.start_syncer();
    let vns = s.vns.name.clone();

    s.create::<ConfigMap>(configmap("settings", "1")).await;
    s.create::<ConfigMap>(configmap("unused", "1")).await;
    s.create::<Secret>(json!({ "apiVersion": "v1", "kind": "Secret", "metadata": { "name": "creds" }, "stringData": { "password": "p" } })).await;
    s.create::<Service>(json!({
        "apiVersion": "v1", "kind": "Service", "metadata": { "name": "web" },
        "spec": { "selector": { "app": "web" }, "ports": [{ "port": 80, "targetPort": 8080 }] },
    }))
    .await;
    for (name, labels) in [
        ("web-0", json!({ "app": "web" })),
        // A forged marker must not pass through to the host.
        (
            "web-1",
            json!({ "app": "web", LABEL_SYNCER_NAMESPACE: "forged" }),
        ),
    ] {
        s.create::<Pod>(pod(name, labels, app_spec("settings", "creds")))
            .await;
    }

    // Host pods under vCluster's names, annotations, labels and references, run by KWOK.
    let host_pods: Api<Pod> = s.host_api();
    let virt_pods: Api<Pod> = s.virt_api();
    for name in ["web-0", "web-1"] {
        let virt = virt_pods.get(name).await.unwrap();
        let host = wait::until(&format!("host pod of {name} Running"), TIMEOUT, || async {
            let p = present(&host_pods, s.host_name(name)).await?;
            (phase(&p) == Some("Running"))
                .then_some(p)
                .ok_or("not Running".to_string())
        })
        .await;
        let a = host.annotations();
        assert_eq!(a[ANNOTATION_OBJECT_NAME], name);
        assert_eq!(a[ANNOTATION_OBJECT_NAMESPACE], vns);
        assert_eq!(a[ANNOTATION_OBJECT_KIND], "Pod");
        assert_eq!(Some(&a[ANNOTATION_OBJECT_UID]), virt.uid().as_ref());
        let l = host.labels();
        assert_eq!(l["app"], "web");
        assert_eq!(l[LABEL_SYNCER_MANAGED_BY], VC);
        assert_eq!(l[LABEL_SYNCER_NAMESPACE], vns);
        let spec = host.spec.clone().unwrap();
        assert_eq!(spec.automount_service_account_token, Some(false));
        let env_from = spec.containers[0].env_from.clone().unwrap();
        assert_eq!(
            env_from[0].config_map_ref.as_ref().unwrap().name,
            s.host_name("settings")
        );
        let volumes = spec.volumes.unwrap();
        let creds = volumes.iter().find(|v| v.name == "creds").unwrap();
        assert_eq!(
            creds.secret.as_ref().unwrap().secret_name,
            Some(s.host_name("creds"))
        );
        assert!(spec.node_name.is_some(), "scheduled by the host");

        // The virtual pod shows the host's status and is bound to the same node.
        let host_ip = host.status.as_ref().and_then(|st| st.pod_ip.clone());
        let virt = wait::until(
            &format!("virtual {name} Running with an IP"),
            TIMEOUT,
            || async {
                let p = virt_pods.get(name).await.map_err(|e| e.to_string())?;
                let ip = p.status.as_ref().and_then(|st| st.pod_ip.clone());
                if phase(&p) == Some("Running") && ip.is_some() {
                    Ok(p)
                } else {
                    Err(format!("{:?}", p.status))
                }
            },
        )
        .await;
        assert_eq!(virt.status.as_ref().unwrap().pod_ip, host_ip);
        let node = virt.spec.unwrap().node_name.unwrap();
        assert_eq!(Some(&node), host.spec.unwrap().node_name.as_ref());
        // The tenant sees a minimal, schedulable Node for it: the not-ready taint the API
        // server's admission adds to every new Node is gone (no lifecycle controller runs).
        let nodes: Api<Node> = Api::all(s.virt.clone());
        let virtual_node = wait::until(
            &format!("untainted virtual node {node}"),
            TIMEOUT,
            || async {
                let n = present(&nodes, node.clone()).await?;
                let taints = n
                    .spec
                    .as_ref()
                    .and_then(|s| s.taints.clone())
                    .unwrap_or_default();
                taints
                    .is_empty()
                    .then_some(n)
                    .ok_or(format!("taints {taints:?}"))
            },
        )
        .await;
        assert!(
            virtual_node
                .labels()
                .contains_key("vcluster.loft.sh/fake-node")
        );
    }
    let forged = host_pods.get(&s.host_name("web-1")).await.unwrap();
    assert_eq!(forged.labels()[LABEL_SYNCER_NAMESPACE], vns);
    assert!(
        forged.labels().values().any(|v| v == "forged"),
        "kept under a rewritten key"
    );

    // Only what a pod uses is copied.
    let host_cms: Api<ConfigMap> = s.host_api();
    let settings = s.host_copy(&host_cms, "settings").await;
    assert_eq!(settings.data.unwrap()["key"], "1");
    let host_secrets: Api<Secret> = s.host_api();
    s.host_copy(&host_secrets, "creds").await;
    assert!(absent(&host_cms, s.host_name("unused")).await.is_ok());

    // The Service selects the host pods and the virtual Service takes the host ClusterIP.
    let host_services: Api<Service> = s.host_api();
    let host_svc = s.host_copy(&host_services, "web").await;
    let host_ip = host_svc.spec.unwrap().cluster_ip.unwrap();
    let virt_services: Api<Service> = s.virt_api();
    wait::until(
        "virtual service with the host ClusterIP",
        TIMEOUT,
        || async {
            let v = virt_services.get("web").await.map_err(|e| e.to_string())?;
            let ip = v.spec.and_then(|sp| sp.cluster_ip);
            (ip.as_deref() == Some(host_ip.as_str()))
                .then_some(())
                .ok_or(format!("{ip:?} != {host_ip}"))
        },
    )
    .await;
    let host_endpoints: Api<Endpoints> = s.host_api();
    wait::until("host endpoints of both pods", TIMEOUT, || async {
        let ep = present(&host_endpoints, s.host_name("web")).await?;
        let n: usize = ep
            .subsets
            .iter()
            .flatten()
            .map(|ss| ss.addresses.as_ref().map_or(0, Vec::len))
            .sum();
        (n == 2).then_some(()).ok_or(format!("{n} addresses"))
    })
    .await;

    // The pod's token is a virtual service-account token the virtual API server accepts.
    let web_0 = host_pods.get(&s.host_name("web-0")).await.unwrap();
    let token = web_0.annotations()["vcluster.loft.sh/token"].clone();
    assert_eq!(
        virtual_whoami(&token),
        Ok(format!("system:serviceaccount:{vns}:default"))
    );

    // A host copy deleted by hand comes back.
    let before = host_cms.get(&s.host_name("settings")).await.unwrap().uid();
    delete(&host_cms, &s.host_name("settings")).await;
    wait::until("settings recreated", TIMEOUT, || async {
        let cm = present(&host_cms, s.host_name("settings")).await?;
        (cm.uid() != before)
            .then_some(())
            .ok_or("old copy".to_string())
    })
    .await;

    // A changed label, image and deadline reach the running host pod, the rest of its spec
    // intact (the syncer caches host pods trimmed and reads the whole pod to update it).
    let change = json!({
        "metadata": { "labels": { "tier": "front" } },
        "spec": {
            "activeDeadlineSeconds": 36000,
            "containers": [{ "name": "app", "image": "nginx:1.27" }],
        },
    });
    virt_pods
        .patch("web-0", &PatchParams::default(), &Patch::Strategic(change))
        .await
        .unwrap();
    let updated = wait::until("host web-0 updated", TIMEOUT, || async {
        let p = present(&host_pods, s.host_name("web-0")).await?;
        let spec = p.spec.clone().unwrap_or_default();
        let seen = (
            p.labels().get("tier").cloned(),
            spec.containers[0].image.clone(),
            spec.active_deadline_seconds,
        );
        (seen == (Some("front".into()), Some("nginx:1.27".into()), Some(36000)))
            .then_some(spec)
            .ok_or(format!("{seen:?}"))
    })
    .await;
    let env_from = updated.containers[0].env_from.clone();
    assert_eq!(
        env_from.unwrap()[0].config_map_ref.as_ref().unwrap().name,
        s.host_name("settings")
    );

    // A host pod that ends takes its virtual pod with it (vCluster behaviour) ...
    delete(&host_pods, &s.host_name("web-0")).await;
    wait::until("virtual web-0 deleted", TIMEOUT, || {
        absent(&virt_pods, "web-0")
    })
    .await;
    // ... and a deleted virtual pod removes its host copy.
    delete(&virt_pods, "web-1").await;
    wait::until("host web-1 deleted", TIMEOUT, || {
        absent(&host_pods, s.host_name("web-1"))
    })
    .await;
    wait::until("virtual web-1 gone", TIMEOUT, || {
        absent(&virt_pods, "web-1")
    })
    .await;
    s.teardown().await;
}

/// Objects changed or deleted while the syncer is down converge when it restarts.
#[tokio::test]
async fn objects_changed_while_the_syncer_is_down_converge_on_restart() {
    let s = setup("sy-restart", json!({})).await;
    let mut syncer = s.start_syncer();
    let cm_spec = |cm: &str| json!({ "containers": [{ "name": "app", "image": "nginx", "envFrom": [{ "configMapRef": { "name": cm } }] }] });
    s.create::<ConfigMap>(configmap("conf", "old")).await;
    s.create::<ConfigMap>(configmap("gone-cm", "x")).await;
    s.create::<Pod>(pod("keeper", json!({}), cm_spec("conf")))
        .await;
    s.create::<Pod>(pod("gone", json!({}), cm_spec("gone-cm")))
        .await;
    let host_pods: Api<Pod> = s.host_api();
    let host_cms: Api<ConfigMap> = s.host_api();
    for name in ["keeper", "gone"] {
        s.host_copy(&host_pods, name).await;
    }
    let old_conf = s.host_copy(&host_cms, "conf").await;
    s.host_copy(&host_cms, "gone-cm").await;
    wait::until("syncer ready", TIMEOUT, || syncer.get("/readyz")).await;
    syncer.kill();

    // While it is down: a pod and its ConfigMap go; another ConfigMap is replaced.
    let virt_pods: Api<Pod> = s.virt_api();
    let virt_cms: Api<ConfigMap> = s.virt_api();
    virt_pods
        .delete("gone", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    delete(&virt_cms, "gone-cm").await;
    delete(&virt_cms, "conf").await;
    let new_conf = s.create::<ConfigMap>(configmap("conf", "new")).await;

    let _syncer = s.start_syncer();
    wait::until("host gone removed", TIMEOUT, || {
        absent(&host_pods, s.host_name("gone"))
    })
    .await;
    wait::until("host gone-cm removed", TIMEOUT, || {
        absent(&host_cms, s.host_name("gone-cm"))
    })
    .await;
    let conf = wait::until("host conf replaced", TIMEOUT, || async {
        let cm = present(&host_cms, s.host_name("conf")).await?;
        (cm.annotations().get(ANNOTATION_OBJECT_UID) == new_conf.uid().as_ref())
            .then_some(cm)
            .ok_or("still the old copy".to_string())
    })
    .await;
    assert_ne!(conf.uid(), old_conf.uid(), "replaced, not patched");
    assert_eq!(conf.data.unwrap()["key"], "new");
    // Exactly one host pod per virtual pod.
    let lp = ListParams::default().labels(&format!("{LABEL_SYNCER_NAMESPACE}={}", s.vns.name));
    let names: Vec<String> = host_pods
        .list(&lp)
        .await
        .unwrap()
        .items
        .iter()
        .map(|p| p.name_any())
        .collect();
    assert_eq!(names, vec![s.host_name("keeper")]);
    s.teardown().await;
}

/// A syncer killed mid-burst ends, after restart, with exactly one host pod per virtual pod and no idle writes.
#[tokio::test]
async fn a_syncer_killed_mid_burst_ends_with_one_host_pod_per_virtual_pod() {
    const PODS: usize = 20;
    let s = setup("sy-burst", json!({})).await;
    let mut syncer = s.start_syncer();
    let spec = json!({ "containers": [{ "name": "app", "image": "nginx" }] });
    let names: Vec<String> = (0..PODS).map(|i| format!("burst-{i}")).collect();
    let (first, second) = names.split_at(PODS / 2);
    let create_all = |batch: &[String]| {
        futures::future::join_all(
            batch
                .iter()
                .map(|n| s.create::<Pod>(pod(n, json!({ "app": "burst" }), spec.clone()))),
        )
    };
    create_all(first).await;
    syncer.kill();
    create_all(second).await;
    let syncer = s.start_syncer();

    let host_pods: Api<Pod> = s.host_api();
    let virt_pods: Api<Pod> = s.virt_api();
    let lp = ListParams::default().labels(&format!("{LABEL_SYNCER_NAMESPACE}={}", s.vns.name));
    wait::until("every virtual pod Running", TIMEOUT, || async {
        let list = virt_pods
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?;
        let running = list
            .items
            .iter()
            .filter(|p| phase(p) == Some("Running"))
            .count();
        (running == PODS)
            .then_some(())
            .ok_or(format!("{running}/{PODS} Running"))
    })
    .await;
    let virt = virt_pods.list(&ListParams::default()).await.unwrap().items;
    let host = host_pods.list(&lp).await.unwrap().items;
    assert_eq!(host.len(), PODS);
    for v in &virt {
        let copies: Vec<_> = host
            .iter()
            .filter(|h| h.annotations().get(ANNOTATION_OBJECT_UID) == v.uid().as_ref())
            .collect();
        assert_eq!(copies.len(), 1, "{}", v.name_any());
        assert_eq!(copies[0].name_any(), s.host_name(&v.name_any()));
    }

    // Converged means quiet: no host writes while nothing changes.
    let before = syncer.host_writes().await.unwrap();
    wait::holds("no idle writes", Duration::from_secs(5), || async {
        let now = syncer.host_writes().await?;
        (now == before)
            .then_some(())
            .ok_or(format!("{before} -> {now} host writes"))
    })
    .await;
    s.teardown().await;
}

/// Pod security refusals leave the pod Pending with an event; names at the 63-character edge sync.
#[tokio::test]
async fn pod_security_refusals_and_names_at_the_63_character_edge() {
    let spec = json!({ "policies": { "podSecurityStandard": "baseline" } });
    let s = setup("sy-edge", spec).await;
    let _syncer = s.start_syncer();
    let plain = json!({ "containers": [{ "name": "app", "image": "nginx" }] });

    // Refused: stays Pending, with a Warning event naming the field; no host pod.
    s.create::<Pod>(pod(
        "hostnet",
        json!({}),
        json!({ "hostNetwork": true, "containers": [{ "name": "app", "image": "nginx" }] }),
    ))
    .await;
    let event = warning_about(&s, "hostnet").await;
    assert_eq!(event.reason.as_deref(), Some("PodSecurityViolation"));
    assert!(
        event
            .message
            .clone()
            .unwrap_or_default()
            .contains("spec.hostNetwork"),
        "{event:?}"
    );

    // Names whose host name is exactly 63 characters stay readable; one more gets hashed.
    let room = 63 - format!("-x-{}-x-{VC}", s.vns.name).len();
    let at_edge = format!("e{}", "a".repeat(room - 1));
    let past_edge = format!("p{}", "a".repeat(room));
    assert_eq!(
        s.host_name(&at_edge),
        format!("{at_edge}-x-{}-x-{VC}", s.vns.name)
    );
    assert_eq!(s.host_name(&past_edge).len(), 63);
    for name in [&at_edge, &past_edge] {
        s.create::<Pod>(pod(name, json!({}), plain.clone())).await;
    }
    let host_pods: Api<Pod> = s.host_api();
    for name in [&at_edge, &past_edge] {
        let host = s.host_copy(&host_pods, name).await;
        assert_eq!(&host.annotations()[ANNOTATION_OBJECT_NAME], name);
    }
    assert_ne!(
        s.host_name(&past_edge),
        format!("{past_edge}-x-{}-x-{VC}", s.vns.name)
    );

    let virt_pods: Api<Pod> = s.virt_api();
    let refused = virt_pods.get("hostnet").await.unwrap();
    assert_eq!(phase(&refused), Some("Pending"));
    assert_eq!(refused.spec.unwrap().node_name, None);
    assert!(absent(&host_pods, s.host_name("hostnet")).await.is_ok());
    s.teardown().await;
}

/// A tenant with its syncer running and virtual pod `name` (one nginx container) Running on
/// the host.
async fn with_running_pod(prefix: &str, name: &str) -> (Setup, SyncerProcess) {
    let s = setup(prefix, json!({})).await;
    let syncer = s.start_syncer();
    let spec = json!({ "containers": [{ "name": "app", "image": "nginx" }] });
    s.create::<Pod>(pod(name, json!({}), spec)).await;
    running_on_the_host(&s, name).await;
    (s, syncer)
}

/// Waits until `name`'s host pod is Running (KWOK ran it) and its virtual pod reports it.
async fn running_on_the_host(s: &Setup, name: &str) {
    let host_pods: Api<Pod> = s.host_api();
    let virt_pods: Api<Pod> = s.virt_api();
    wait::until(&format!("{name} Running on the host"), TIMEOUT, || async {
        let host = present(&host_pods, s.host_name(name)).await?;
        let virt = present(&virt_pods, name).await?;
        match (phase(&host), phase(&virt)) {
            (Some("Running"), Some("Running")) => Ok(()),
            phases => Err(format!("phases (host, virtual) {phases:?}")),
        }
    })
    .await;
}

const TENANT_APP: &str = r#"
apiVersion: v1
kind: ConfigMap
metadata: {name: web-settings}
data: {greeting: hello}
---
apiVersion: v1
kind: Secret
metadata: {name: web-creds}
stringData: {password: p}
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{port: 80, targetPort: 8080}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: app
        image: nginx
        envFrom: [{configMapRef: {name: web-settings}}]
        volumeMounts: [{name: creds, mountPath: /creds}]
      volumes: [{name: creds, secret: {secretName: web-creds}}]
"#;

/// The tenant's own kubeconfig (`vc-<name>`, the operator's admin client certificate) works
/// against the proxy for apply, get, watch and delete; what it applies runs on the host;
/// its requests are recorded on the activity Lease; health is the syncer's.
#[tokio::test]
async fn the_tenant_kubeconfig_drives_the_virtual_cluster_through_the_proxy() {
    let s = setup("px-app", json!({})).await;
    let syncer = s.start_syncer();
    let vns = s.vns.name.clone();
    wait::until("proxy /readyz", TIMEOUT, || async {
        syncer.tenant_kubectl(&["get", "--raw", "/readyz"])
    })
    .await;

    // A watch opened through the proxy streams the pods the Deployment makes.
    let mut watch = std::process::Command::new(bed().bin("kubectl"))
        .arg("--kubeconfig")
        .arg(&syncer.tenant_kubeconfig)
        .args(["-n", &vns, "get", "pods", "--watch", "-o", "name"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("kubectl watch");
    let manifest = std::env::temp_dir().join(format!("vnest-{vns}-app.yaml"));
    std::fs::write(&manifest, TENANT_APP).unwrap();
    let manifest = manifest.to_str().unwrap();
    wait::until("kubectl apply through the proxy", TIMEOUT, || async {
        syncer.tenant_kubectl(&["-n", &vns, "apply", "-f", manifest])
    })
    .await;

    let virt_pods: Api<Pod> = s.virt_api();
    let names = wait::until("two web pods", TIMEOUT, || async {
        let pods = virt_pods
            .list(&ListParams::default().labels("app=web"))
            .await
            .map_err(|e| e.to_string())?;
        let names: Vec<String> = pods.items.iter().map(|p| p.name_any()).collect();
        if names.len() == 2 {
            Ok(names)
        } else {
            Err(format!("{names:?}"))
        }
    })
    .await;
    for name in &names {
        running_on_the_host(&s, name).await;
        let host = present(&s.host_api::<Pod>(), s.host_name(name))
            .await
            .unwrap();
        let env_from = host.spec.unwrap().containers[0].env_from.clone().unwrap();
        assert_eq!(
            env_from[0].config_map_ref.as_ref().unwrap().name,
            s.host_name("web-settings")
        );
    }
    present(&s.host_api::<Secret>(), s.host_name("web-creds"))
        .await
        .unwrap();
    present(&s.host_api::<Service>(), s.host_name("web"))
        .await
        .unwrap();

    // The tenant sees its pods Running through the proxy.
    let shown = wait::until("pods Running through the proxy", TIMEOUT, || async {
        let out = syncer.tenant_kubectl(&[
            "-n",
            &vns,
            "get",
            "pods",
            "-l",
            "app=web",
            "-o",
            "jsonpath={.items[*].status.phase}",
        ])?;
        (out.split_whitespace().filter(|p| *p == "Running").count() == 2)
            .then_some(out.clone())
            .ok_or(out)
    })
    .await;
    assert_eq!(shown, "Running Running");

    // The watch saw both pods while it streamed.
    watch.kill().unwrap();
    let output = watch.wait_with_output().unwrap();
    let watched = String::from_utf8_lossy(&output.stdout);
    for name in &names {
        assert!(
            watched.contains(&format!("pod/{name}")),
            "watch printed {watched:?}"
        );
    }

    // Delete through the proxy: the host copies go.
    syncer
        .tenant_kubectl(&["-n", &vns, "delete", "deployment", "web", "--wait=false"])
        .unwrap();
    let host_pods: Api<Pod> = s.host_api();
    for name in &names {
        wait::until(&format!("host pod of {name} gone"), TIMEOUT, || {
            absent(&host_pods, s.host_name(name))
        })
        .await;
    }

    // The requests were tenant activity: the activity Lease carries a recent renewal.
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> = s.host_api();
    let renewed = wait::until("activity Lease renewed", TIMEOUT, || async {
        let lease = present(&leases, vnest_crds::activity::lease_name(VC)).await?;
        vnest_crds::activity::last_activity(&lease).ok_or("no renewTime".to_string())
    })
    .await;
    let age = k8s_openapi::jiff::Timestamp::now().duration_since(renewed);
    assert!(age.as_secs() < 120, "renewTime {renewed} is {age:?} old");
    let metrics = syncer.get("/metrics").await.unwrap();
    assert!(
        metrics.contains("vnest_syncer_proxy_requests_total{code=\"200\",route=\"virtual\"}"),
        "{metrics}"
    );
    s.teardown().await;
}

/// `kubectl logs` and `kubectl exec` on a virtual pod are served by its host pod (KWOK's
/// server answers the host API server), after the virtual cluster authorized the caller.
#[tokio::test]
async fn logs_and_exec_of_a_virtual_pod_come_from_its_host_pod() {
    let (s, syncer) = with_running_pod("px-exec", "shell").await;
    let vns = s.vns.name.clone();

    let logs = wait::until("kubectl logs through the proxy", TIMEOUT, || async {
        syncer.tenant_kubectl(&["-n", &vns, "logs", "shell"])
    })
    .await;
    assert!(
        logs.contains("a log line from a kwok pod"),
        "logs: {logs:?}"
    );
    let out = syncer
        .tenant_kubectl(&[
            "-n",
            &vns,
            "exec",
            "shell",
            "--",
            "echo",
            "hello-through-the-proxy",
        ])
        .unwrap();
    assert_eq!(out.trim(), "hello-through-the-proxy");

    // A pod the virtual cluster does not have is not found, under the tenant's name.
    let err = syncer
        .tenant_kubectl(&["-n", &vns, "logs", "nosuchpod"])
        .unwrap_err();
    assert!(err.contains("\"nosuchpod\" not found"), "{err}");
    s.teardown().await;
}

/// Bearer tokens pass through for the virtual API server to judge, and the proxy applies
/// the same judgement to the subresources it serves from the host; certificates from
/// another CA are refused, and `--as` with a certificate is refused with the reason.
#[tokio::test]
async fn the_proxy_keeps_each_callers_own_rights() {
    let (s, syncer) = with_running_pod("px-auth", "app").await;
    let vns = s.vns.name.clone();

    let virtual_kubectl = |args: &[&str]| bed().kubectl_with(&bed().virtual_kubeconfig(), args);
    virtual_kubectl(&["-n", &vns, "create", "serviceaccount", "reader"]).unwrap();
    let token = virtual_kubectl(&["-n", &vns, "create", "token", "reader"]).unwrap();
    let reader_kubeconfig = syncer.token_kubeconfig(token.trim());
    let as_reader = |args: &[&str]| {
        let mut all = vec!["-n", vns.as_str()];
        all.extend_from_slice(args);
        bed().kubectl_with(&reader_kubeconfig, &all)
    };
    let denied = as_reader(&["get", "pods"]).unwrap_err();
    assert!(
        denied.contains(&format!("system:serviceaccount:{vns}:reader"))
            && denied.contains("forbidden"),
        "{denied}"
    );
    let grant = |resources: &str| {
        virtual_kubectl(&[
            "-n",
            &vns,
            "create",
            "role",
            "reader",
            "--verb=get,list",
            &format!("--resource={resources}"),
            "--dry-run=client",
            "-o",
            "yaml",
        ])
        .and_then(|role| {
            let path = std::env::temp_dir().join(format!("vnest-{vns}-role.yaml"));
            std::fs::write(&path, role).unwrap();
            virtual_kubectl(&["apply", "-f", path.to_str().unwrap()])
        })
        .unwrap();
    };
    grant("pods");
    virtual_kubectl(&[
        "-n",
        &vns,
        "create",
        "rolebinding",
        "reader",
        "--role=reader",
        &format!("--serviceaccount={vns}:reader"),
    ])
    .unwrap();
    let pods = wait::until("reader may list pods", TIMEOUT, || async {
        as_reader(&["get", "pods", "-o", "name"])
    })
    .await;
    assert_eq!(pods.trim(), "pod/app");
    // The proxy serves logs from the host, but asks the virtual cluster first.
    let denied = as_reader(&["logs", "app"]).unwrap_err();
    assert!(
        denied.contains("cannot get resource \"pods/log\""),
        "{denied}"
    );
    grant("pods,pods/log");
    let logs = wait::until("reader may read logs", TIMEOUT, || async {
        as_reader(&["logs", "app"])
    })
    .await;
    assert!(logs.contains("a log line from a kwok pod"), "{logs}");
    // Reading logs does not grant exec.
    let denied = as_reader(&["exec", "app", "--", "true"]).unwrap_err();
    assert!(
        denied.contains("cannot create resource \"pods/exec\""),
        "{denied}"
    );

    let refused = syncer
        .tenant_kubectl(&["--as=someone", "-n", &vns, "get", "pods"])
        .unwrap_err();
    assert!(
        refused.contains("impersonation (--as) is not supported"),
        "{refused}"
    );

    // The bed's own admin certificate is valid for the bed, not for this virtual cluster.
    let foreign = bed().kubectl_with(
        &bed().virtual_kubeconfig(),
        &[
            &format!("--server=https://127.0.0.1:{}", syncer.proxy_port),
            "--insecure-skip-tls-verify",
            "get",
            "pods",
        ],
    );
    assert!(foreign.is_err(), "a certificate of another CA was accepted");
    s.teardown().await;
}

/// A pod whose host copy goes before the pod ended (here evicted in the virtual cluster
/// while a finalizer holds it, as a Job's tracking finalizer does) ends Failed, keeping the
/// eviction's `DisruptionTarget` condition a Job's pod failure policy reads, so the holder can
/// let it go; without that it stayed Running and undeletable.
#[tokio::test]
async fn an_evicted_pod_held_by_a_finalizer_ends_failed_with_its_disruption_condition() {
    let s = setup("sy-evict", json!({})).await;
    let _syncer = s.start_syncer();
    let hold = "vnest.dev/test-hold";
    s.create::<Pod>(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": "worker", "finalizers": [hold] },
        "spec": { "containers": [{ "name": "app", "image": "nginx" }] },
    }))
    .await;
    running_on_the_host(&s, "worker").await;
    let virt_pods: Api<Pod> = s.virt_api();
    virt_pods
        .evict("worker", &kube::api::EvictParams::default())
        .await
        .unwrap();
    let ended = wait::until("the evicted pod Failed", TIMEOUT, || async {
        let p = present(&virt_pods, "worker").await?;
        (phase(&p) == Some("Failed"))
            .then_some(p)
            .ok_or("not Failed yet".to_string())
    })
    .await;
    let status = ended.status.unwrap();
    let disruption = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "DisruptionTarget");
    assert_eq!(disruption.map(|c| c.status.as_str()), Some("True"));
    let app = &status.container_statuses.unwrap()[0];
    assert!(app.state.as_ref().unwrap().terminated.is_some(), "{app:?}");
    assert!(
        absent(&s.host_api::<Pod>(), s.host_name("worker"))
            .await
            .is_ok()
    );

    virt_pods
        .patch(
            "worker",
            &PatchParams::default(),
            &Patch::Merge(json!({ "metadata": { "finalizers": null } })),
        )
        .await
        .unwrap();
    wait::until("the pod gone once let go", TIMEOUT, || {
        absent(&virt_pods, "worker")
    })
    .await;
    s.teardown().await;
}
