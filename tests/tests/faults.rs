//! Faults injected while work is in flight, then invariants checked after convergence: a
//! syncer killed with `kill -9` mid-burst of creates and again mid-burst of deletes, a
//! tenant namespace deleted while the syncer is down, an operator killed mid-burst of
//! VirtualCluster creates and deletes, a VirtualCluster deleted while the operator is
//! down, the host API server and etcd restarted, and the virtual control-plane pod deleted on
//! the real node mid-burst. Nothing may be lost, duplicated or orphaned. Each test prints its
//! row of the README's fault table (`cargo test --test faults -- --nocapture`).

use std::time::{Duration, Instant};

use k8s_openapi::api::{
    apps::v1::StatefulSet,
    core::v1::{Namespace, Pod, Secret, Service, ServiceAccount},
};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, ListParams, PostParams},
};
use serde_json::json;
use vnest_crds::{VirtualCluster, meta};
use vnest_tests::{
    OperatorProcess, SyncerProcess, TestNamespace, bed,
    faults::{self, Clusters, Row, Sides, Tally},
    fixtures::{create_virtual_cluster, free_port, provide_data_volume, setup, wait_condition},
    node::{
        all_containers_ready, delete_data_volume, real_node, tenant_kubeconfig_through_service,
    },
    tenant::{self, TIMEOUT, VC, delete},
    wait,
};

/// One fault test at a time: a restarted API server or etcd would fail the others' calls.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// How many times the CI sizes a run uses: `VNEST_FAULT_SCALE=5 cargo test --test faults
/// -- --nocapture` is the suite's larger, benchmark-style run.
fn scale() -> usize {
    std::env::var("VNEST_FAULT_SCALE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
}

/// Groups of tenant objects in a syncer burst ([`faults::KINDS_PER_GROUP`] objects each):
/// 300 objects at scale 1.
fn groups() -> usize {
    60 * scale()
}
/// How long convergence after a fault may take.
const CONVERGE: Duration = Duration::from_secs(180);

/// Kills `syncer` as soon as its host-write counter reaches `writes`: a kill inside the
/// burst, not after it (polled every 5 ms, so little more work slips past the threshold).
async fn kill_after_writes(syncer: &mut SyncerProcess, writes: f64) {
    let done = || syncer.host_writes();
    wait::reaches("the syncer's host writes", TIMEOUT, done, writes).await;
    syncer.kill();
}

/// Polls the invariants until they hold; the tally and how long it took.
async fn converge(s: &impl Sides, namespaces: &[&str], what: &str) -> (Tally, Duration) {
    converge_to(s, namespaces, what, |_| true).await
}

/// Polls until the invariants hold and `done` is true of the tally.
async fn converge_to(
    s: &impl Sides,
    namespaces: &[&str],
    what: &str,
    done: impl Fn(&Tally) -> bool,
) -> (Tally, Duration) {
    let start = Instant::now();
    let tally = wait::until(what, CONVERGE, || async {
        let t = faults::tally(s, namespaces).await?;
        if t.clean() && done(&t) {
            Ok(t)
        } else {
            Err(t.to_string())
        }
    })
    .await;
    (tally, start.elapsed())
}

/// A syncer killed mid-burst of 300 creates and again mid-burst of their deletes converges
/// on restart to exactly one current host copy per tenant object and no orphans.
#[tokio::test]
async fn a_syncer_killed_mid_burst_loses_duplicates_and_orphans_nothing() {
    let _serial = SERIAL.lock().await;
    let s = tenant::setup("fault-syncer", json!({})).await;
    let groups = groups();
    let total = groups * faults::KINDS_PER_GROUP;
    let mut syncer = s.start_syncer();
    let burst = faults::create_burst(&s.virt, &s.vns.name, groups, "v1");
    let kill = kill_after_writes(&mut syncer, (total / 10) as f64);
    tokio::join!(burst, kill);
    let on_host = faults::host_copies(&s).await.unwrap();
    assert!(
        on_host < total,
        "the syncer had synced the whole burst ({on_host} host copies) before it was killed"
    );
    // While it is down the tenant changes every ConfigMap and Secret: the restarted syncer
    // must carry the current content, not the content of the burst.
    faults::rewrite_burst(&s.virt, &s.vns.name, groups, "v2").await;
    let syncer = s.start_syncer();
    let (tally, took) = converge(&s, &[&s.vns.name], "the burst synced after the kill").await;
    assert!(tally.checked >= total, "{tally}");
    let writes = syncer.host_writes().await.unwrap();
    let fault = format!("kill -9 of the syncer during {total} creates");
    print_row(&fault, total - on_host, &tally, took, writes);

    // And again while the same objects are deleted.
    let mut syncer = syncer;
    let before = syncer.host_writes().await.unwrap();
    let deletes = faults::delete_burst(&s.virt, &s.vns.name);
    let kill = kill_after_writes(&mut syncer, before + (total / 10) as f64);
    tokio::join!(deletes, kill);
    let left = faults::host_copies(&s).await.unwrap();
    assert!(
        left > 0,
        "the syncer had removed every host copy before it was killed"
    );
    let syncer = s.start_syncer();
    // Done when no tenant object is left (claims wait for the virtual controller-manager)
    // and, the invariants holding, so no host copy either.
    let (tally, took) = converge_to(
        &s,
        &[&s.vns.name],
        "no host copies after the deletes",
        |t| t.checked == 0,
    )
    .await;
    assert_eq!(faults::host_copies(&s).await.unwrap(), 0, "{tally}");
    let writes = syncer.host_writes().await.unwrap();
    let fault = format!("kill -9 of the syncer during {total} deletes");
    print_row(&fault, left, &tally, took, writes);
    drop(syncer);
    s.teardown().await;
}

/// A virtual namespace deleted while the syncer is down takes its host copies with it when
/// the syncer comes back; the other namespace's copies stay.
#[tokio::test]
async fn a_tenant_namespace_deleted_while_the_syncer_is_down_leaves_no_host_copies() {
    let _serial = SERIAL.lock().await;
    const SMALL: usize = 10;
    let mut s = tenant::setup("fault-ns", json!({})).await;
    let doomed = TestNamespace::create(&s.virt, "fault-ns-doomed").await;
    let accounts: Api<ServiceAccount> = Api::namespaced(s.virt.clone(), &doomed.name);
    wait::until(
        "default ServiceAccount of the doomed namespace",
        TIMEOUT,
        || async { accounts.get("default").await.map_err(|e| e.to_string()) },
    )
    .await;
    let both = format!("{},{}", s.vns.name, doomed.name);
    s.wiring.virtual_namespace = both;
    let mut syncer = s.start_syncer();
    faults::create_burst(&s.virt, &s.vns.name, SMALL, "kept").await;
    faults::create_burst(&s.virt, &doomed.name, SMALL, "doomed").await;
    let namespaces = [s.vns.name.as_str(), doomed.name.as_str()];
    converge(&s, &namespaces, "both namespaces synced").await;
    let before = faults::host_copies(&s).await.unwrap();
    assert_eq!(before, 2 * SMALL * faults::KINDS_PER_GROUP);

    syncer.kill();
    // The tenant deletes the namespace, as it would, with everything in it. Its pods and
    // claims wait for the syncer (the virtual pods for their host pods to end, the claims
    // for their host copies), so the namespace only goes once the syncer is back.
    let doomed_name = doomed.name.clone();
    doomed.delete(&s.virt).await;
    let namespaces_api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(s.virt.clone());
    let syncer = s.start_syncer();
    let start = Instant::now();
    wait::until("the doomed namespace gone", CONVERGE, || async {
        match namespaces_api.get_opt(&doomed_name).await {
            Ok(None) => Ok(()),
            Ok(Some(ns)) => Err(format!("{:?}", ns.status)),
            Err(e) => Err(e.to_string()),
        }
    })
    .await;
    let (tally, _) = converge_to(
        &s,
        &[&s.vns.name],
        "the doomed namespace's copies gone",
        |_| true,
    )
    .await;
    let took = start.elapsed();
    assert_eq!(
        faults::host_copies(&s).await.unwrap(),
        SMALL * faults::KINDS_PER_GROUP,
        "{tally}"
    );
    let writes = syncer.host_writes().await.unwrap();
    let fault = "a tenant namespace deleted while the syncer is down";
    print_row(fault, SMALL * faults::KINDS_PER_GROUP, &tally, took, writes);
    drop(syncer);
    s.teardown().await;
}

/// VirtualClusters in one burst (50 at scale 1).
fn clusters() -> usize {
    50 * scale()
}

/// Of which deleted in the second burst (20 at scale 1).
fn deleted() -> usize {
    20 * scale()
}

fn cluster(i: usize) -> String {
    format!("vc{i}")
}

fn is_ready(vc: &VirtualCluster) -> bool {
    vc.status.as_ref().is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
    })
}

/// What the operator made in `namespace`, per VirtualCluster name: objects labelled with
/// the cluster's name, to find duplicates and orphans.
async fn made_for(client: &Client, namespace: &str) -> Result<Vec<(String, String)>, String> {
    let lp = ListParams::default().labels(&format!(
        "{}={}",
        meta::LABEL_MANAGED_BY,
        meta::OPERATOR_MANAGER
    ));
    let mut made = Vec::new();
    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), namespace);
    for o in sets.list(&lp).await.map_err(|e| e.to_string())? {
        made.push(("StatefulSet".to_string(), o.name_any()));
    }
    let services: Api<Service> = Api::namespaced(client.clone(), namespace);
    for o in services.list(&lp).await.map_err(|e| e.to_string())? {
        made.push(("Service".to_string(), o.name_any()));
    }
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    for o in secrets.list(&lp).await.map_err(|e| e.to_string())? {
        made.push(("Secret".to_string(), o.name_any()));
    }
    Ok(made)
}

/// Checks every live VirtualCluster is Ready with its children and no child outlives its
/// cluster: Ok(number of clusters) or what is wrong.
async fn clusters_converged(client: &Client, namespace: &str) -> Result<usize, String> {
    let api: Api<VirtualCluster> = Api::namespaced(client.clone(), namespace);
    let live = api
        .list(&ListParams::default())
        .await
        .map_err(|e| e.to_string())?;
    let not_ready: Vec<String> = live
        .iter()
        .filter(|vc| !is_ready(vc))
        .map(|vc| vc.name_any())
        .collect();
    if !not_ready.is_empty() {
        return Err(format!("not Ready: {not_ready:?}"));
    }
    let names: Vec<String> = live.iter().map(|vc| vc.name_any()).collect();
    let made = made_for(client, namespace).await?;
    // Every child's name starts with its cluster's (`<vc>`, `<vc>-headless`, `vc-<vc>`,
    // `<vc>-certs`, `vc-config-<vc>`): strip the fixed parts and look the cluster up.
    let owner = |name: &str| -> String {
        let name = name
            .strip_prefix("vc-config-")
            .or(name.strip_prefix("vc-"))
            .unwrap_or(name);
        name.split('-').next().unwrap_or_default().to_string()
    };
    let orphans: Vec<&(String, String)> = made
        .iter()
        .filter(|(_, n)| !names.contains(&owner(n)))
        .collect();
    if !orphans.is_empty() {
        return Err(format!(
            "children without a live VirtualCluster: {orphans:?}"
        ));
    }
    for name in &names {
        let sets = made
            .iter()
            .filter(|(k, n)| k == "StatefulSet" && n == name)
            .count();
        let certs = made
            .iter()
            .filter(|(k, n)| k == "Secret" && *n == format!("{name}-certs"))
            .count();
        if sets != 1 || certs != 1 {
            return Err(format!(
                "{name}: {sets} StatefulSets, {certs} certificate Secrets"
            ));
        }
    }
    Ok(live.items.len())
}

/// Prints the fault-table row of an operator fault: `checked` clusters converged, found whole
/// by [`clusters_converged`], in `took`, with `operator`'s API writes.
async fn print_operator_row(
    fault: &str,
    in_flight: usize,
    checked: usize,
    took: Duration,
    operator: &OperatorProcess,
) {
    let writes = operator.counter("vnest_api_writes_total").await.unwrap();
    let tally = Tally {
        checked,
        ..Tally::default()
    };
    print_row(fault, in_flight, &tally, took, writes);
}

/// Prints one row of the fault table.
fn print_row(fault: &str, in_flight: usize, tally: &Tally, converged: Duration, writes: f64) {
    let row = Row {
        fault,
        in_flight,
        tally,
        converged,
        writes,
    };
    println!("{row}");
}

/// Returns as soon as `operator` has made `writes` API writes.
async fn wait_busy(operator: &OperatorProcess, writes: f64) {
    let done = || async { operator.counter("vnest_api_writes_total").await };
    wait::reaches("the operator's API writes", TIMEOUT, done, writes).await;
}

/// An operator killed mid-burst of 50 VirtualCluster creates, and again mid-burst of 20
/// deletes, converges after a restart: every cluster Ready with exactly one of each child,
/// the deleted ones gone with every child, and the surviving clusters' PKI never regenerated.
#[tokio::test]
async fn an_operator_killed_mid_burst_converges_with_nothing_lost_or_orphaned() {
    let _serial = SERIAL.lock().await;
    let (client, ns, mut first) = setup("fault-op").await;
    let (clusters, deleted) = (clusters(), deleted());
    let n = ns.name.as_str();
    for i in 0..clusters {
        provide_data_volume(&client, n, &cluster(i)).await;
    }
    wait::until("the operator ready", TIMEOUT, || async {
        first.metrics().await
    })
    .await;
    let creates = futures::future::join_all((0..clusters).map(|i| {
        let client = &client;
        async move { create_virtual_cluster(client, n, &cluster(i), json!({})).await }
    }));
    let busy = wait_busy(&first, 20.0);
    tokio::join!(creates, busy);
    first.kill();
    let api: Api<VirtualCluster> = Api::namespaced(client.clone(), n);
    let ready_at_kill = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .iter()
        .filter(|vc| is_ready(vc))
        .count();
    assert!(
        ready_at_kill < clusters,
        "every cluster was Ready before the kill"
    );

    let second = OperatorProcess::start(bed(), n, "op-a", free_port());
    let start = Instant::now();
    let count = wait::until("every cluster converged", CONVERGE, || {
        clusters_converged(&client, n)
    })
    .await;
    let took = start.elapsed();
    assert_eq!(count, clusters);
    let fault = format!("kill -9 of the operator during {clusters} VirtualCluster creates");
    print_operator_row(&fault, clusters - ready_at_kill, clusters, took, &second).await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), n);
    let mut cas = Vec::new();
    for i in deleted..clusters {
        let certs = secrets.get(&format!("{}-certs", cluster(i))).await.unwrap();
        cas.push(certs.data.unwrap_or_default().get("ca.crt").cloned());
    }

    // The deletes, and a kill in their middle.
    let mut second = second;
    let before = second.counter("vnest_api_writes_total").await.unwrap();
    let deletes = futures::future::join_all((0..deleted).map(|i| {
        let api = api.clone();
        async move {
            api.delete(&cluster(i), &DeleteParams::default())
                .await
                .map(drop)
        }
    }));
    let busy = wait_busy(&second, before + 1.0);
    let (results, ()) = tokio::join!(deletes, busy);
    second.kill();
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    let remaining = api.list(&ListParams::default()).await.unwrap().items.len();
    assert!(
        remaining > clusters - deleted,
        "every delete had finished before the kill"
    );

    let third = OperatorProcess::start(bed(), n, "op-a", free_port());
    let start = Instant::now();
    let count = wait::until("the deletes converged", CONVERGE, || async {
        let count = clusters_converged(&client, n).await?;
        (count == clusters - deleted)
            .then_some(count)
            .ok_or(format!("{count} clusters"))
    })
    .await;
    let took = start.elapsed();
    let fault = format!("kill -9 of the operator during {deleted} VirtualCluster deletes");
    let in_flight = remaining - (clusters - deleted);
    print_operator_row(&fault, in_flight, count, took, &third).await;
    for (i, ca) in (deleted..clusters).zip(cas) {
        let certs = secrets.get(&format!("{}-certs", cluster(i))).await.unwrap();
        assert_eq!(
            certs.data.unwrap_or_default().get("ca.crt").cloned(),
            ca,
            "{} regenerated its CA",
            cluster(i)
        );
    }
    drop(third);
    ns.delete(&client).await;
}

/// A VirtualCluster deleted while no operator runs is gone with every child once one starts.
#[tokio::test]
async fn a_virtual_cluster_deleted_while_the_operator_is_down_is_cleaned_up_on_restart() {
    let _serial = SERIAL.lock().await;
    let (client, ns, mut first) = setup("fault-down").await;
    let n = ns.name.as_str();
    for name in ["kept", "doomed"] {
        provide_data_volume(&client, n, name).await;
        create_virtual_cluster(&client, n, name, json!({})).await;
    }
    wait::until("both Ready", CONVERGE, || async {
        let count = clusters_converged(&client, n).await?;
        (count == 2)
            .then_some(())
            .ok_or(format!("{count} clusters"))
    })
    .await;
    first.kill();
    let api: Api<VirtualCluster> = Api::namespaced(client.clone(), n);
    delete(&api, "doomed").await;
    // The operator's finalizer keeps it until an operator runs.
    wait::holds(
        "the doomed cluster waits for the operator",
        Duration::from_secs(2),
        || async { api.get("doomed").await.map(drop).map_err(|e| e.to_string()) },
    )
    .await;
    let second = OperatorProcess::start(bed(), n, "op-a", free_port());
    let start = Instant::now();
    wait::until(
        "the doomed cluster and its children gone",
        CONVERGE,
        || async {
            let count = clusters_converged(&client, n).await?;
            let made = made_for(&client, n).await?;
            (count == 1 && !made.iter().any(|(_, name)| name.contains("doomed")))
                .then_some(())
                .ok_or(format!("{count} clusters; {made:?}"))
        },
    )
    .await;
    let fault = "a VirtualCluster deleted while the operator is down";
    print_operator_row(fault, 1, 1, start.elapsed(), &second).await;
    drop(second);
    ns.delete(&client).await;
}

/// The host API server, and then etcd (under both API servers), killed with SIGKILL and
/// restarted in the middle of a tenant burst (creates, then content changes): the syncer and
/// the operator ride it out and the burst converges with nothing lost, duplicated or orphaned.
#[tokio::test]
async fn host_api_server_and_etcd_restarts_mid_burst_lose_nothing() {
    let _serial = SERIAL.lock().await;
    let s = tenant::setup("fault-restart", json!({})).await;
    let groups = groups();
    let total = groups * faults::KINDS_PER_GROUP;
    let syncer = s.start_syncer();
    let writes = || syncer.host_writes();
    wait::until("the syncer's metrics", TIMEOUT, writes).await;
    for (component, content) in [("host-apiserver", "v1"), ("etcd", "v2")] {
        let before = writes().await.unwrap();
        let burst = async {
            if content == "v1" {
                faults::create_burst(&s.virt, &s.vns.name, groups, content).await;
            } else {
                faults::rewrite_burst(&s.virt, &s.vns.name, groups, content).await;
            }
        };
        let restart = async {
            wait::reaches(
                "the syncer's host writes",
                TIMEOUT,
                writes,
                before + (groups / 2) as f64,
            )
            .await;
            bed().restart(component);
        };
        tokio::join!(burst, restart);
        let in_flight = total
            - faults::tally(&s, &[&s.vns.name])
                .await
                .map_or(0, |t| t.checked - t.lost.len() - t.stale.len());
        let start_writes = writes().await.unwrap_or(before);
        let (tally, took) = converge(
            &s,
            &[&s.vns.name],
            &format!("the burst after restarting {component}"),
        )
        .await;
        assert!(tally.checked >= total, "{tally}");
        let change = if content == "v1" {
            "creates"
        } else {
            "updates"
        };
        let fault = format!("restart of {component} during {total} {change}");
        let burst_writes = writes().await.unwrap() - start_writes;
        print_row(&fault, in_flight, &tally, took, burst_writes);
    }
    drop(syncer);
    s.teardown().await;
}

/// A syncer killed between deleting a virtual Service and recreating it with the host's
/// ClusterIP (the crash state written by hand: the recreation record on the host copy, the
/// virtual Service gone) puts the tenant's Service back on restart, owned by its host copy.
#[tokio::test]
async fn a_service_whose_recreation_was_cut_short_is_put_back() {
    let _serial = SERIAL.lock().await;
    let s = tenant::setup("fault-svc", json!({})).await;
    let mut syncer = s.start_syncer();
    let virt: Api<Service> = s.virt_api();
    let host: Api<Service> = s.host_api();
    s.create::<Service>(
        json!({ "apiVersion": "v1", "kind": "Service", "metadata": { "name": "web" },
        "spec": { "selector": { "app": "web" }, "ports": [{ "port": 80 }] } }),
    )
    .await;
    let host_name = s.host_name("web");
    let cluster_ip = |svc: &Service| svc.spec.as_ref().and_then(|s| s.cluster_ip.clone());
    let adopted = wait::until(
        "the virtual Service on the host's ClusterIP",
        TIMEOUT,
        || async {
            let (v, h) = (
                tenant::present(&virt, "web").await?,
                tenant::present(&host, &host_name).await?,
            );
            (cluster_ip(&v) == cluster_ip(&h))
                .then_some(v)
                .ok_or("not adopted yet".to_string())
        },
    )
    .await;
    syncer.kill();

    let record = serde_json::to_string(&json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": { "name": "web", "namespace": s.vns.name },
        "spec": { "selector": { "app": "web" }, "ports": [{ "port": 80 }],
            "clusterIP": cluster_ip(&adopted), "clusterIPs": [cluster_ip(&adopted)] },
    }))
    .unwrap();
    host.patch_metadata(
        &host_name,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(json!({ "metadata": { "annotations": {
            "vnest.dev/recreating-virtual-service": record } } })),
    )
    .await
    .unwrap();
    virt.delete("web", &DeleteParams::default()).await.unwrap();

    let _syncer = s.start_syncer();
    wait::until(
        "the virtual Service put back and owned",
        TIMEOUT,
        || async {
            let v = tenant::present(&virt, "web").await?;
            let h = tenant::present(&host, &host_name).await?;
            let annotations = h.annotations();
            let owned = annotations.get(meta::ANNOTATION_OBJECT_UID) == v.metadata.uid.as_ref();
            let recorded = annotations.contains_key("vnest.dev/recreating-virtual-service");
            (owned && !recorded && cluster_ip(&v) == cluster_ip(&h))
                .then_some(())
                .ok_or(format!("owned {owned}, record left {recorded}"))
        },
    )
    .await;
    s.teardown().await;
}

/// The tenant's client, from a kubeconfig file.
async fn client_from(kubeconfig: &std::path::Path) -> Client {
    let file = kube::config::Kubeconfig::read_from(kubeconfig).expect("tenant kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(file, &Default::default())
        .await
        .expect("tenant kubeconfig is usable");
    Client::try_from(config).expect("tenant client")
}

/// The running syncer's host writes, read through the host API server's proxy to the
/// control-plane pod (the port from the syncer container's `--metrics-address`).
async fn pod_syncer_writes(pods: &Api<Pod>, pod: &str) -> Result<f64, String> {
    let spec = pods.get(pod).await.map_err(|e| e.to_string())?.spec;
    let port = spec
        .iter()
        .flat_map(|s| &s.containers)
        .filter(|c| c.name == "syncer")
        .flat_map(|c| c.args.iter().flatten())
        .find_map(|a| a.strip_prefix("--metrics-address="))
        .and_then(|a| a.rsplit(':').next())
        .ok_or("the syncer container has no --metrics-address")?
        .to_string();
    let path = format!(
        "/api/v1/namespaces/{}/pods/{pod}:{port}/proxy/metrics",
        pods.namespace().unwrap_or_default()
    );
    let text = bed().kubectl(&["get", "--raw", &path])?;
    Ok(vnest_tests::scrape::counter(
        &text,
        "vnest_syncer_host_writes_total",
    ))
}

/// The virtual control plane restarted mid-burst — its pod `vc-0` deleted on the real node, as
/// a drain or an eviction would — comes back with its kine data, and the burst converges with
/// nothing lost, duplicated or orphaned.
#[tokio::test]
async fn a_control_plane_pod_deleted_mid_burst_loses_nothing() {
    const START: Duration = Duration::from_secs(240);
    let _serial = SERIAL.lock().await;
    let node = real_node();
    let (client, ns, _operator) = setup("fault-cp").await;
    node.provide_data_volume(&client, &ns.name, VC).await;
    create_virtual_cluster(
        &client,
        &ns.name,
        VC,
        json!({ "controlPlane": {
            "distro": { "k8s": { "enabled": true } },
            "statefulSet": { "scheduling": node.placement(), "persistence": { "size": "1Gi" } },
        } }),
    )
    .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns.name);
    let pod = format!("{VC}-0");
    let first = all_containers_ready(&pods, &pod, &node.name, START).await;
    wait_condition(&client, &ns.name, VC, "Ready", "True", START).await;
    let kubeconfig = tenant_kubeconfig_through_service(&client, &ns.name, VC).await;
    let clusters = Clusters {
        host: client.clone(),
        virt: client_from(&kubeconfig).await,
        host_namespace: ns.name.clone(),
    };
    let burst_ns = "burst";
    let namespaces: Api<Namespace> = Api::all(clusters.virt.clone());
    wait::until("the tenant's namespace made", START, || async {
        let made = serde_json::from_value(json!({ "metadata": { "name": burst_ns } })).unwrap();
        match namespaces.create(&PostParams::default(), &made).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
            Err(e) => Err(e.to_string()),
        }
    })
    .await;
    let accounts: Api<ServiceAccount> = Api::namespaced(clusters.virt.clone(), burst_ns);
    wait::until(
        "the tenant namespace's default ServiceAccount",
        START,
        || async { accounts.get("default").await.map_err(|e| e.to_string()) },
    )
    .await;

    let groups = groups();
    let total = groups * faults::KINDS_PER_GROUP;
    let burst = faults::create_burst(&clusters.virt, burst_ns, groups, "v1");
    let restart = async {
        let copies = || async { faults::host_copies(&clusters).await.map(|n| n as f64) };
        wait::reaches(
            "host copies of the burst",
            CONVERGE,
            copies,
            (total / 10) as f64,
        )
        .await;
        let on_host = faults::host_copies(&clusters).await.unwrap();
        pods.delete(&pod, &DeleteParams::default())
            .await
            .expect("delete the control-plane pod");
        (on_host, Instant::now())
    };
    let ((), (on_host, deleted_at)) = tokio::join!(burst, restart);
    assert!(
        on_host < total,
        "the burst had synced whole ({on_host} host copies) before the control plane went"
    );
    let second = wait::until("a new control-plane pod", START, || async {
        let p = pods.get(&pod).await.map_err(|e| e.to_string())?;
        (p.uid() != first.uid())
            .then_some(())
            .ok_or("the old pod is still there".to_string())
    });
    second.await;
    all_containers_ready(&pods, &pod, &node.name, START).await;
    // Converged counts from the deletion: the restart is part of the fault.
    let (tally, _) = converge(&clusters, &[burst_ns], "the burst after the restart").await;
    let took = deleted_at.elapsed();
    assert!(tally.checked >= total, "{tally}");
    let writes = wait::until("the restarted syncer's metrics", CONVERGE, || {
        pod_syncer_writes(&pods, &pod)
    })
    .await;
    let fault = format!("control-plane pod deleted during {total} creates");
    print_row(&fault, total - on_host, &tally, took, writes);
    delete_data_volume(&client, &ns.name, VC).await;
}
