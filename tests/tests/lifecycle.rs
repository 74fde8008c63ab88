//! Sleep, wake, pause and auto-delete, with the operator as a real process against the real
//! host API server: a paused cluster is scaled to zero with its tenant pods removed and every
//! other object (same UIDs) kept, and comes back on resume; a sleep schedule fires at its
//! minute and the wake schedule a minute later; inactivity measured from the activity Lease
//! puts it to sleep and a renewal wakes it; a TTL deletes it after a Warning event; an unknown
//! time zone is refused with nothing changed; with autoWakeup, a sleeping cluster's Service
//! routes to the operator's wake endpoint, a request there wakes it, and the Service selects
//! the pod again once it is Ready.

use std::{collections::BTreeMap, time::Duration};

use k8s_openapi::{
    api::{
        apps::v1::StatefulSet,
        coordination::v1::Lease,
        core::v1::{Event, PersistentVolumeClaim, Pod, Secret, Service},
        discovery::v1::EndpointSlice,
    },
    jiff::Timestamp,
};
use kube::{
    Api, Client, ResourceExt,
    api::{ListParams, Patch, PatchParams, PostParams},
};
use serde_json::json;
use vnest_crds::{Phase, VirtualCluster, activity};
use vnest_tests::{
    OperatorProcess, bed,
    fixtures::{
        READY_TIMEOUT, condition_message, create_virtual_cluster, free_port, host_namespace,
        patch_spec, ready_virtual_cluster, refused_virtual_cluster, setup, wait_condition,
    },
    wait,
};

/// How late (in seconds) a scheduled sleep or wake may be enacted on a busy machine; the
/// operator's resync is ten minutes, so a schedule found only by a resync exceeds it.
const LATE_BOUND: i64 = 30;

/// When `vc`'s condition `type_` last changed, in Unix seconds.
fn transition_of(vc: &VirtualCluster, type_: &str) -> i64 {
    vc.status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == type_))
        .unwrap_or_else(|| panic!("no {type_} condition"))
        .last_transition_time
        .0
        .as_second()
}

/// The VirtualCluster once `check` accepts it (an `Err` says what was seen instead).
async fn wait_vc(
    client: &Client,
    namespace: &str,
    what: &str,
    timeout: Duration,
    check: impl Fn(&VirtualCluster) -> Result<(), String>,
) -> VirtualCluster {
    let api: Api<VirtualCluster> = Api::namespaced(client.clone(), namespace);
    wait::until(what, timeout, || async {
        let vc = api.get("vc").await.map_err(|e| e.to_string())?;
        check(&vc).map(|()| vc)
    })
    .await
}

fn phase_is(phase: Phase) -> impl Fn(&VirtualCluster) -> Result<(), String> {
    move |vc| {
        let status = vc.status.clone().unwrap_or_default();
        if status.phase == Some(phase) {
            Ok(())
        } else {
            Err(format!("{:?} {:?}", status.phase, status.conditions))
        }
    }
}

fn sleeping_reason(vc: &VirtualCluster) -> (String, String) {
    let c = vc
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Sleeping"))
        .unwrap_or_else(|| panic!("no Sleeping condition: {:?}", vc.status));
    (c.status.clone(), c.reason.clone())
}

/// Ok once the cluster's `Sleeping` condition is False.
fn awake(vc: &VirtualCluster) -> Result<(), String> {
    match sleeping_reason(vc) {
        (status, _) if status == "False" => Ok(()),
        other => Err(format!("{other:?}")),
    }
}

async fn statefulset_replicas(client: &Client, namespace: &str) -> i32 {
    Api::<StatefulSet>::namespaced(client.clone(), namespace)
        .get("vc")
        .await
        .unwrap()
        .spec
        .replicas
        .unwrap_or(1)
}

/// A host pod the syncer would have made for a tenant workload.
async fn create_tenant_pod(client: &Client, namespace: &str, name: &str) {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": { "name": name, "labels": { "vcluster.loft.sh/managed-by": "vc", "vcluster.loft.sh/namespace": "default" } },
        "spec": { "containers": [{ "name": "app", "image": "nginx" }] },
    }))
    .unwrap();
    Api::<Pod>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &pod)
        .await
        .unwrap();
}

/// Records tenant activity at `at`, exactly as the syncer does.
async fn renew_activity(client: &Client, namespace: &str, at: Timestamp) {
    Api::<Lease>::namespaced(client.clone(), namespace)
        .patch(
            &activity::lease_name("vc"),
            &PatchParams {
                field_manager: Some(activity::SYNCER_FIELD_MANAGER.into()),
                ..Default::default()
            },
            &Patch::Merge(activity::renewal(at)),
        )
        .await
        .unwrap();
}

/// UIDs of everything sleeping must keep: the data claim, Services, Secrets, the Lease.
async fn kept_uids(client: &Client, n: &str) -> BTreeMap<String, String> {
    let mut uids = BTreeMap::new();
    let pvc = Api::<PersistentVolumeClaim>::namespaced(client.clone(), n)
        .get("data-vc-0")
        .await
        .unwrap();
    uids.insert("pvc/data-vc-0".into(), pvc.uid().unwrap());
    for name in ["vc", "vc-headless", "tenant-svc-x-default-x-vc"] {
        let svc = Api::<Service>::namespaced(client.clone(), n)
            .get(name)
            .await
            .unwrap();
        uids.insert(format!("service/{name}"), svc.uid().unwrap());
    }
    for name in [
        "vc-certs",
        "vc-config-vc",
        "vc-vc",
        "tenant-secret-x-default-x-vc",
    ] {
        let secret = Api::<Secret>::namespaced(client.clone(), n)
            .get(name)
            .await
            .unwrap();
        uids.insert(format!("secret/{name}"), secret.uid().unwrap());
    }
    let lease = Api::<Lease>::namespaced(client.clone(), n)
        .get("vc-activity")
        .await
        .unwrap();
    uids.insert("lease/vc-activity".into(), lease.uid().unwrap());
    uids
}

async fn metric_line(operator: &OperatorProcess, line: &str) {
    wait::until(line, Duration::from_secs(10), || async {
        let text = operator.metrics().await?;
        if text.lines().any(|l| l == line) {
            Ok(())
        } else {
            Err(text
                .lines()
                .filter(|l| l.starts_with("vnest_"))
                .filter(|l| l.contains("sleep") || l.contains("wake") || l.contains("delete"))
                .collect::<Vec<_>>()
                .join("\n"))
        }
    })
    .await
}

/// Pause scales to zero and removes tenant pods but keeps every other object's UID; resume restores the cluster.
#[tokio::test]
async fn pausing_scales_to_zero_removes_tenant_pods_keeps_the_rest_and_resume_restores_it() {
    let (client, ns, operator) = setup("lc-pause").await;
    let n = ns.name.as_str();
    ready_virtual_cluster(&client, n, "vc", json!({})).await;
    // What the syncer would have made for the tenant: a workload pod, a Service, a Secret.
    create_tenant_pod(&client, n, "web-x-default-x-vc").await;
    let tenant_labels = json!({ "vcluster.loft.sh/managed-by": "vc" });
    let service: Service = serde_json::from_value(json!({
        "metadata": { "name": "tenant-svc-x-default-x-vc", "labels": tenant_labels },
        "spec": { "ports": [{ "port": 80 }] },
    }))
    .unwrap();
    Api::<Service>::namespaced(client.clone(), n)
        .create(&PostParams::default(), &service)
        .await
        .unwrap();
    let secret: Secret = serde_json::from_value(json!({
        "metadata": { "name": "tenant-secret-x-default-x-vc", "labels": tenant_labels },
        "stringData": { "password": "s3cret" },
    }))
    .unwrap();
    Api::<Secret>::namespaced(client.clone(), n)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    let before = kept_uids(&client, n).await;

    patch_spec(&client, n, "vc", json!({ "paused": true })).await;
    let paused = wait_vc(
        &client,
        n,
        "phase Paused",
        Duration::from_secs(30),
        phase_is(Phase::Paused),
    )
    .await;
    assert_eq!(sleeping_reason(&paused), ("True".into(), "Paused".into()));
    assert!(paused.status.as_ref().unwrap().sleeping_since.is_some());
    assert_eq!(statefulset_replicas(&client, n).await, 0);
    let pods: Api<Pod> = Api::namespaced(client.clone(), n);
    wait::until(
        "the tenant pod and the control plane pod to be gone",
        Duration::from_secs(60),
        || async {
            let left: Vec<String> = pods
                .list(&ListParams::default())
                .await
                .map_err(|e| vec![e.to_string()])?
                .items
                .iter()
                .map(ResourceExt::name_any)
                .collect();
            if left.is_empty() { Ok(()) } else { Err(left) }
        },
    )
    .await;
    assert_eq!(kept_uids(&client, n).await, before);
    metric_line(
        &operator,
        "vnest_sleeping_virtual_clusters{reason=\"Paused\"} 1",
    )
    .await;
    metric_line(&operator, "vnest_virtual_clusters{phase=\"Paused\"} 1").await;
    let ready = paused
        .status
        .unwrap()
        .conditions
        .into_iter()
        .find(|c| c.type_ == "Ready")
        .unwrap();
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "Paused")
    );

    patch_spec(&client, n, "vc", json!({ "paused": false })).await;
    let resumed = wait_condition(&client, n, "vc", "Ready", "True", READY_TIMEOUT).await;
    assert_eq!(resumed.status.as_ref().unwrap().phase, Some(Phase::Running));
    assert_eq!(sleeping_reason(&resumed), ("False".into(), "Awake".into()));
    assert_eq!(resumed.status.unwrap().sleeping_since, None);
    assert_eq!(statefulset_replicas(&client, n).await, 1);
    assert_eq!(kept_uids(&client, n).await, before);
    let secret = Api::<Secret>::namespaced(client.clone(), n)
        .get("tenant-secret-x-default-x-vc")
        .await
        .unwrap();
    assert_eq!(secret.data.unwrap()["password"].0, b"s3cret");

    metric_line(&operator, "vnest_sleeps_total{reason=\"Paused\"} 1").await;
    let metrics = operator.metrics().await.unwrap();
    assert!(
        !metrics.contains("vnest_sleeping_virtual_clusters{"),
        "still counted as sleeping:\n{metrics}"
    );
    metric_line(&operator, "vnest_wakes_total{reason=\"Resumed\"} 1").await;
    let events = Api::<Event>::namespaced(client.clone(), n)
        .list(&ListParams::default())
        .await
        .unwrap();
    for reason in ["Paused", "TenantPodsRemoved", "Waking"] {
        assert!(
            events
                .items
                .iter()
                .any(|e| e.reason.as_deref() == Some(reason)),
            "no {reason} event"
        );
    }
    ns.delete(&client).await;
}

/// `minute hour` of the UTC instant `seconds` in Asia/Kolkata (UTC+05:30, no DST).
fn kolkata_minute_hour(seconds: i64) -> String {
    let local = seconds + 5 * 3600 + 30 * 60;
    format!("{} {}", (local / 60) % 60, (local / 3600) % 24)
}

/// A cron sleep fires in its minute even with fresh activity, and the wake schedule ends it.
#[tokio::test]
async fn a_sleep_schedule_fires_at_its_minute_despite_fresh_activity_and_the_wake_schedule_ends_it()
{
    let (client, ns, operator) = setup("lc-schedule").await;
    let n = ns.name.as_str();
    ready_virtual_cluster(&client, n, "vc", json!({})).await;
    // Scheduled relative to now, once the cluster is Ready: cron has minute resolution, so the
    // first minute boundary at least 25 s after the edit, and the wake one minute later.
    let sleep_at = (Timestamp::now().as_second() + 25) / 60 * 60 + 60;
    let wake_at = sleep_at + 60;
    patch_spec(
        &client,
        n,
        "vc",
        json!({ "sleepMode": {
            "sleepSchedule": format!("{} * * *", kolkata_minute_hour(sleep_at)),
            "wakeSchedule": format!("{} * * *", kolkata_minute_hour(wake_at)),
            "timezone": "Asia/Kolkata",
        }}),
    )
    .await;
    wait_vc(
        &client,
        n,
        "the next sleep time",
        Duration::from_secs(20),
        |vc| {
            let next = vc.status.as_ref().and_then(|s| s.next_sleep_time.as_ref());
            match next.map(|t| t.0.as_second()) {
                Some(at) if at == sleep_at => Ok(()),
                other => Err(format!("next sleep {other:?}, want {sleep_at}")),
            }
        },
    )
    .await;
    let wide = bed()
        .kubectl(&["-n", n, "get", "vc", "-o", "wide"])
        .unwrap();
    for column in [
        "LAST-ACTIVITY",
        "SLEEPING-SINCE",
        "NEXT-SLEEP",
        "NEXT-WAKE",
        "DELETE-AT",
    ] {
        assert!(wide.contains(column), "{wide}");
    }

    // The tenant is busy right up to the moment: the schedule still wins.
    let until_busy = (sleep_at - Timestamp::now().as_second() - 3).max(0) as u64;
    tokio::time::sleep(Duration::from_secs(until_busy)).await;
    renew_activity(&client, n, Timestamp::now()).await;
    let asleep = wait_vc(
        &client,
        n,
        "phase Sleeping",
        Duration::from_secs(60),
        phase_is(Phase::Sleeping),
    )
    .await;
    assert_eq!(sleeping_reason(&asleep), ("True".into(), "Schedule".into()));
    let status = asleep.status.clone().unwrap();
    assert_eq!(
        status.sleeping_since.map(|t| t.0.as_second()),
        Some(sleep_at)
    );
    assert_eq!(
        status.next_wake_time.map(|t| t.0.as_second()),
        Some(wake_at)
    );
    assert!(status.last_activity_time.is_some());
    // Never early, and requeued for the moment itself rather than found by the next resync
    // (ten minutes away): the bound leaves a busy machine its slack.
    let enacted = transition_of(&asleep, "Sleeping");
    assert!(
        (sleep_at..=sleep_at + LATE_BOUND).contains(&enacted),
        "slept at {enacted}, scheduled for {sleep_at}"
    );
    assert_eq!(statefulset_replicas(&client, n).await, 0);
    let wide = bed()
        .kubectl(&["-n", n, "get", "vc", "-o", "wide"])
        .unwrap();
    assert!(wide.contains("Sleeping"), "{wide}");

    let woke = wait_vc(
        &client,
        n,
        "awake again at the wake moment",
        Duration::from_secs(120),
        awake,
    )
    .await;
    let woke_at = transition_of(&woke, "Sleeping");
    assert!(
        (wake_at..=wake_at + LATE_BOUND).contains(&woke_at),
        "woke at {woke_at}, scheduled for {wake_at}"
    );
    assert!(
        enacted < woke_at,
        "woke ({woke_at}) before it slept ({enacted})"
    );
    assert_eq!(statefulset_replicas(&client, n).await, 1);
    wait_condition(&client, n, "vc", "Ready", "True", READY_TIMEOUT).await;
    metric_line(&operator, "vnest_sleeps_total{reason=\"Schedule\"} 1").await;
    metric_line(&operator, "vnest_wakes_total{reason=\"Schedule\"} 1").await;
    ns.delete(&client).await;
}

/// Inactivity measured from the activity Lease puts the cluster to sleep; a renewal wakes it.
#[tokio::test]
async fn inactivity_from_the_activity_lease_sleeps_and_a_renewal_wakes_it() {
    let (client, ns, operator) = setup("lc-idle").await;
    let n = ns.name.as_str();
    ready_virtual_cluster(
        &client,
        n,
        "vc",
        json!({ "sleepMode": { "afterInactivity": "15s" } }),
    )
    .await;
    // Activity postpones the sleep to 15 s after it.
    let active_at = Timestamp::from_second(Timestamp::now().as_second()).unwrap();
    renew_activity(&client, n, active_at).await;
    wait_vc(
        &client,
        n,
        "the activity in status",
        Duration::from_secs(10),
        |vc| {
            let status = vc.status.clone().unwrap_or_default();
            let seen = status.last_activity_time.map(|t| t.0);
            let next = status.next_sleep_time.map(|t| t.0.as_second());
            if seen == Some(active_at) && next == Some(active_at.as_second() + 15) {
                Ok(())
            } else {
                Err(format!("{seen:?} {next:?}"))
            }
        },
    )
    .await;
    let asleep = wait_vc(
        &client,
        n,
        "phase Sleeping",
        Duration::from_secs(30),
        phase_is(Phase::Sleeping),
    )
    .await;
    assert_eq!(
        sleeping_reason(&asleep),
        ("True".into(), "Inactivity".into())
    );
    assert_eq!(
        asleep
            .status
            .unwrap()
            .sleeping_since
            .map(|t| t.0.as_second()),
        Some(active_at.as_second() + 15)
    );
    assert_eq!(statefulset_replicas(&client, n).await, 0);

    // A request while asleep (what a wake endpoint records) wakes it.
    tokio::time::sleep(Duration::from_secs(1)).await;
    renew_activity(&client, n, Timestamp::now()).await;
    wait_vc(
        &client,
        n,
        "awake after the renewal",
        Duration::from_secs(10),
        awake,
    )
    .await;
    assert_eq!(statefulset_replicas(&client, n).await, 1);
    metric_line(&operator, "vnest_sleeps_total{reason=\"Inactivity\"} 1").await;
    metric_line(&operator, "vnest_wakes_total{reason=\"Request\"} 1").await;
    ns.delete(&client).await;
}

/// Auto-delete warns with an event first, then deletes the VirtualCluster.
#[tokio::test]
async fn auto_delete_after_creation_warns_then_deletes_the_virtual_cluster() {
    let (client, ns, operator) = setup("lc-ttl").await;
    let n = ns.name.as_str();
    let created = create_virtual_cluster(
        &client,
        n,
        "vc",
        json!({ "autoDelete": { "afterCreation": "6s" } }),
    )
    .await;
    let created_at = created.metadata.creation_timestamp.unwrap().0.as_second();
    wait_vc(
        &client,
        n,
        "deleteAt in status",
        Duration::from_secs(6),
        |vc| {
            let at = vc.status.as_ref().and_then(|s| s.delete_at.clone());
            match at.map(|t| t.0.as_second()) {
                Some(at) if at == created_at + 6 => Ok(()),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
    let vcs: Api<VirtualCluster> = Api::namespaced(client.clone(), n);
    wait::until(
        "the VirtualCluster to be gone",
        Duration::from_secs(40),
        || async {
            match vcs.get_opt("vc").await {
                Ok(None) => Ok(()),
                other => Err(format!("{:?}", other.map(|o| o.map(|v| v.status)))),
            }
        },
    )
    .await;
    let events = Api::<Event>::namespaced(client.clone(), n)
        .list(&ListParams::default())
        .await
        .unwrap();
    let warning = events
        .items
        .iter()
        .find(|e| e.reason.as_deref() == Some("AutoDelete"))
        .expect("an AutoDelete event");
    assert_eq!(warning.type_.as_deref(), Some("Warning"));
    assert!(
        warning
            .message
            .as_deref()
            .unwrap_or_default()
            .contains("spec.autoDelete.afterCreation"),
        "{warning:?}"
    );
    let log = std::fs::read_to_string(&operator.log).unwrap();
    assert!(
        log.contains("deleting the virtual cluster: spec.autoDelete.afterCreation"),
        "{log}"
    );
    metric_line(
        &operator,
        "vnest_auto_deletes_total{reason=\"AfterCreation\"} 1",
    )
    .await;
    ns.delete(&client).await;
}

/// An unknown time zone is refused naming the field, and nothing changes.
#[tokio::test]
async fn an_unknown_time_zone_is_refused_by_field_and_changes_nothing() {
    let (client, ns, _op) = setup("lc-invalid").await;
    let n = ns.name.as_str();
    ready_virtual_cluster(&client, n, "vc", json!({})).await;
    let statefulsets: Api<StatefulSet> = Api::namespaced(client.clone(), n);
    let before = statefulsets.get("vc").await.unwrap();

    // Pausing with a time zone that passes the schema but does not exist: nothing happens.
    patch_spec(
        &client,
        n,
        "vc",
        json!({ "paused": true, "sleepMode": { "afterInactivity": "1h", "timezone": "Mars/Olympus" } }),
    )
    .await;
    let refused = refused_virtual_cluster(&client, n, "vc").await;
    let message = condition_message(&refused, "SpecValid");
    assert!(
        message.starts_with("spec.sleepMode.timezone: \"Mars/Olympus\" is not an IANA time zone"),
        "{message}"
    );
    assert_ne!(refused.status.unwrap().phase, Some(Phase::Paused));
    let after = statefulsets.get("vc").await.unwrap();
    assert_eq!(after.metadata.generation, before.metadata.generation);
    assert_eq!(after.spec.replicas, Some(1));
    ns.delete(&client).await;
}

/// The `vc` Service's selector, and the addresses and port of the `vc-wake` EndpointSlice.
async fn routing(client: &Client, n: &str) -> (bool, Option<(Vec<String>, Option<i32>)>) {
    let svc = Api::<Service>::namespaced(client.clone(), n)
        .get("vc")
        .await
        .unwrap();
    let has_selector = svc.spec.and_then(|s| s.selector).is_some();
    let slice = Api::<EndpointSlice>::namespaced(client.clone(), n)
        .get_opt("vc-wake")
        .await
        .unwrap()
        .map(|s| {
            let addresses = s
                .endpoints
                .into_iter()
                .flatten()
                .flat_map(|e| e.addresses)
                .collect();
            let port = s.ports.unwrap_or_default().first().and_then(|p| p.port);
            (addresses, port)
        });
    (has_selector, slice)
}

/// A request to the wake endpoint as a tenant's kubeconfig makes it: TLS to the server name
/// `vc.<n>.svc`, verified with the virtual cluster's CA. Returns the response head and body.
async fn request_via_wake_endpoint(client: &Client, n: &str, port: u16) -> (String, String) {
    let certs = Api::<Secret>::namespaced(client.clone(), n)
        .get("vc-certs")
        .await
        .unwrap();
    let ca = certs.data.unwrap()["ca.crt"].0.clone();
    let dir = std::env::temp_dir().join(format!("vnest-wake-{n}"));
    std::fs::create_dir_all(&dir).unwrap();
    let ca_file = dir.join("ca.crt");
    std::fs::write(&ca_file, ca).unwrap();
    let host = format!("vc.{n}.svc");
    let out = tokio::process::Command::new("curl")
        .args(["-s", "--max-time", "10", "-D", "-", "--cacert"])
        .arg(&ca_file)
        .arg("--resolve")
        .arg(format!("{host}:{port}:127.0.0.1"))
        .arg(format!("https://{host}:{port}/api/v1/namespaces"))
        .output()
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or_else(|| {
        panic!(
            "no HTTP response (curl {:?}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (head.to_string(), body.to_string())
}

/// While asleep the Service routes to the wake endpoint; a TLS request there gets 503 + Retry-After and wakes the cluster.
#[tokio::test]
async fn while_asleep_the_service_routes_to_the_wake_endpoint_and_a_request_there_wakes_it() {
    let (client, ns) = host_namespace("lc-wake").await;
    let n = ns.name.as_str();
    let wake_port = free_port();
    // The EndpointSlice must carry a routable address; the test reaches the listener on loopback.
    let operator = OperatorProcess::start_with_args(
        bed(),
        n,
        "op-a",
        free_port(),
        &[
            format!("--wake-address=127.0.0.1:{wake_port}"),
            "--wake-advertise-ip=10.0.0.1".to_string(),
        ],
    );
    ready_virtual_cluster(
        &client,
        n,
        "vc",
        json!({ "sleepMode": { "afterInactivity": "10s", "autoWakeup": true } }),
    )
    .await;
    let awake_routing = || async {
        match routing(&client, n).await {
            (true, None) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    };
    wait::until(
        "Service selects the pod",
        Duration::from_secs(10),
        awake_routing,
    )
    .await;

    wait_vc(
        &client,
        n,
        "phase Sleeping",
        Duration::from_secs(30),
        phase_is(Phase::Sleeping),
    )
    .await;
    assert_eq!(statefulset_replicas(&client, n).await, 0);
    wait::until(
        "Service routed to the wake endpoint",
        Duration::from_secs(10),
        || async {
            match routing(&client, n).await {
                (false, Some((addresses, port)))
                    if addresses == ["10.0.0.1"] && port == Some(i32::from(wake_port)) =>
                {
                    Ok(())
                }
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;

    tokio::time::sleep(Duration::from_secs(1)).await;
    let (head, body) = request_via_wake_endpoint(&client, n, wake_port).await;
    assert!(head.starts_with("HTTP/1.1 503"), "{head}");
    assert!(head.lines().any(|l| l == "Retry-After: 5"), "{head}");
    let status: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(status["kind"], "Status", "{body}");
    assert_eq!(status["reason"], "ServiceUnavailable");

    wait_vc(
        &client,
        n,
        "awake after the request",
        Duration::from_secs(15),
        awake,
    )
    .await;
    assert_eq!(statefulset_replicas(&client, n).await, 1);
    wait_condition(&client, n, "vc", "Ready", "True", READY_TIMEOUT).await;
    wait::until(
        "Service selects the pod again",
        Duration::from_secs(15),
        awake_routing,
    )
    .await;
    metric_line(&operator, "vnest_wakes_total{reason=\"Request\"} 1").await;
    metric_line(
        &operator,
        "vnest_wake_connections_total{outcome=\"Waking\"} 1",
    )
    .await;
    ns.delete(&client).await;
}
