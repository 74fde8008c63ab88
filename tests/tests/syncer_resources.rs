//! Pod patches, replicated Services and the networking and scheduling syncs through the
//! syncer as a real process on the operator's ServiceAccount (so the operator's Role and
//! ClusterRole are all it has): a pod arrives on the host patched as configured, or is
//! refused with the entry named; replicated Services follow their source both ways and go
//! when their entry goes; tenant PriorityClasses reach the host; Ingresses and PDBs round
//! trip with their status; fromHost classes are shown read-only.

use std::time::Duration;

use k8s_openapi::api::{
    core::v1::{Pod, Secret, Service},
    networking::v1::{Ingress, IngressClass},
    node::v1::RuntimeClass,
    policy::v1::PodDisruptionBudget,
    scheduling::v1::PriorityClass,
    storage::v1::StorageClass,
};
use kube::{
    Api,
    api::{Patch, PatchParams, PostParams},
};
use serde_json::json;
use vnest_crds::{
    VirtualCluster,
    meta::{LABEL_FROM_HOST, LABEL_SYNCER_MANAGED_BY, SYNCER_CONFIG_KEY},
    translate::host_cluster_name,
};
use vnest_tests::tenant::{
    TIMEOUT, Tenant, VC, absent, delete, merge_patch, merge_patch_status, present, setup,
    syncing_to_host, warning_about,
};
use vnest_tests::{TestNamespace, syncer::SyncerWiring, wait};

/// The seed's two pod examples on the bed: the tenant's `app` label arrives prefixed, no
/// volume keeps its host path, a later label change follows patched; a pod whose patched
/// label would be invalid is refused with an event naming the entry.
#[tokio::test]
async fn pods_arrive_on_the_host_patched() {
    let s = setup(
        "res-patch",
        json!({ "sync": { "toHost": { "pods": {
            "translatePatches": [{ "path": "metadata.labels.app", "expression": "'vcluster-' + value" }],
            "patches": [{ "path": "spec.volumes[*].hostPath", "op": "remove" }],
        } } } }),
    )
    .await;
    let _syncer = s.start_syncer();
    let pod = |name: &str, app: &str| {
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": { "name": name, "labels": { "app": app, "tier": "front" } },
            "spec": {
                "containers": [{ "name": "app", "image": "nginx",
                                 "volumeMounts": [{ "name": "logs", "mountPath": "/logs" }] }],
                "volumes": [{ "name": "logs", "hostPath": { "path": "/var/log" } }],
            },
        })
    };
    s.create::<Pod>(pod("web", "web")).await;
    let host_pods: Api<Pod> = s.host_api();
    let host = s.host_copy(&host_pods, "web").await;
    let labels = host.metadata.labels.clone().unwrap();
    assert_eq!(labels["app"], "vcluster-web");
    assert_eq!(labels["tier"], "front");
    assert_eq!(labels[LABEL_SYNCER_MANAGED_BY], VC);
    let volume = &host.spec.unwrap().volumes.unwrap()[0];
    assert_eq!(volume.name, "logs");
    assert!(volume.host_path.is_none(), "{volume:?}");
    assert!(
        volume.empty_dir.is_some(),
        "the API server defaults a sourceless volume: {volume:?}"
    );
    // The tenant's own pod is untouched.
    let virt = s.virt_api::<Pod>().get("web").await.unwrap();
    assert_eq!(virt.metadata.labels.unwrap()["app"], "web");

    // Labels follow after creation, patched again.
    merge_patch(
        &s.virt_api::<Pod>(),
        "web",
        json!({ "metadata": { "labels": { "app": "web2" } } }),
    )
    .await;
    wait::until("patched label update", TIMEOUT, || async {
        let p = present(&host_pods, s.host_name("web")).await?;
        let app = p.metadata.labels.unwrap_or_default().remove("app");
        (app.as_deref() == Some("vcluster-web2"))
            .then_some(())
            .ok_or(format!("app={app:?}"))
    })
    .await;

    // 'vcluster-' + 60 characters is no label value: refused, with the entry named.
    let long = "a".repeat(60);
    s.create::<Pod>(pod("long", &long)).await;
    let event = warning_about(&s, "long").await;
    assert_eq!(event.reason.as_deref(), Some("PodPatchFailed"));
    let message = event.message.unwrap_or_default();
    assert!(
        message.contains("spec.sync.toHost.pods.translatePatches[0] (metadata.labels.app)"),
        "{message}"
    );
    absent(&host_pods, s.host_name("long")).await.unwrap();
    s.teardown().await;
}

/// Waits until the operator's `vc-config-<vc>` mentions `text`, then the wiring from it.
async fn rewired_when_config_has(s: &Tenant, text: &str, wanted: bool) -> SyncerWiring {
    let secrets: Api<Secret> = s.host_api();
    wait::until(
        &format!("syncer config with {text}: {wanted}"),
        TIMEOUT,
        || async {
            let secret = secrets
                .get(&format!("vc-config-{VC}"))
                .await
                .map_err(|e| e.to_string())?;
            let config = secret.data.unwrap_or_default().remove(SYNCER_CONFIG_KEY);
            let config = String::from_utf8(config.map(|b| b.0).unwrap_or_default()).unwrap();
            (config.contains(text) == wanted)
                .then_some(())
                .ok_or(config)
        },
    )
    .await;
    SyncerWiring::from_operator(&s.host, &s.ns.name, VC, &s.vns.name).await
}

fn service(name: &str, selector: serde_json::Value, ports: serde_json::Value) -> Service {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": { "name": name },
        "spec": { "selector": selector, "ports": ports },
    }))
    .unwrap()
}

async fn create_service(api: &Api<Service>, service: Service) -> Service {
    api.create(&PostParams::default(), &service).await.unwrap()
}

/// The Service's ClusterIP, as its API server gave it (or it was asked for).
fn cluster_ip(svc: &Service) -> Option<String> {
    svc.spec.as_ref().and_then(|spec| spec.cluster_ip.clone())
}

/// The virtual Service `name`'s ports, as (port, name).
fn ports_of(svc: &Service) -> Vec<(i32, Option<String>)> {
    svc.spec
        .iter()
        .flat_map(|s| s.ports.iter().flatten())
        .map(|p| (p.port, p.name.clone()))
        .collect()
}

/// `networking.replicateServices` round trip: a host Service in another host namespace shows
/// in the virtual cluster on its own address, a virtual Service is exposed in the host
/// namespace selecting its host pods; both follow their sources (and a tenant's edit is
/// undone), a replica goes with its source, and after the entries go a restarted syncer
/// deletes what is left.
#[tokio::test]
async fn replicated_services_follow_their_sources_both_ways() {
    let s = setup("res-rep", json!({})).await;
    let source_ns = TestNamespace::create(&s.host, "res-rep-src").await;
    let shared: Api<Service> = Api::namespaced(s.host.clone(), &source_ns.name);
    let db_ports = json!([{ "name": "pg", "port": 5432 }]);
    let created = create_service(
        &shared,
        service("shared-db", json!({ "app": "db" }), db_ports.clone()),
    )
    .await;
    let host_ip = created.spec.unwrap().cluster_ip.unwrap();
    let virt_services: Api<Service> = s.virt_api();
    create_service(
        &virt_services,
        service(
            "api",
            json!({ "app": "api" }),
            json!([{ "port": 80, "targetPort": 8080 }]),
        ),
    )
    .await;
    s.patch_spec(
        json!({ "networking": { "replicateServices": {
            "fromHost": [{ "from": format!("{}/shared-db", source_ns.name), "to": format!("{}/db", s.vns.name) }],
            "toHost": [{ "from": format!("{}/api", s.vns.name), "to": "api-replica" }],
        } } }),
    )
    .await;
    let wiring = rewired_when_config_has(&s, "api-replica", true).await;
    let syncer = vnest_tests::SyncerProcess::start(&wiring, vnest_tests::fixtures::free_port());

    // fromHost: the host's address and ports, no selector, marked as the host's.
    let db = wait::until("virtual replica db", TIMEOUT, || async {
        present(&virt_services, "db").await
    })
    .await;
    let spec = db.spec.clone().unwrap();
    assert_eq!(spec.cluster_ip.as_deref(), Some(host_ip.as_str()));
    assert!(spec.selector.is_none());
    assert_eq!(ports_of(&db), vec![(5432, Some("pg".to_string()))]);
    assert_eq!(db.metadata.labels.unwrap()[LABEL_FROM_HOST], "true");

    // toHost: in the host namespace, selecting the api pods' host copies.
    let host_services: Api<Service> = s.host_api();
    let replica = wait::until("host replica api-replica", TIMEOUT, || async {
        present(&host_services, "api-replica").await
    })
    .await;
    let selector = replica.spec.clone().unwrap().selector.unwrap();
    assert_eq!(selector["app"], "api");
    assert_eq!(selector[LABEL_SYNCER_MANAGED_BY], VC);
    // The fromHost replica is not copied back to the host under a synced name.
    absent(&host_services, s.host_name("db")).await.unwrap();

    // Both follow their sources.
    let two_ports = json!({ "spec": { "ports": [{ "name": "pg", "port": 5432 }, { "name": "admin", "port": 5433 }] } });
    merge_patch(&shared, "shared-db", two_ports).await;
    merge_patch(
        &virt_services,
        "api",
        json!({ "spec": { "ports": [{ "port": 81, "targetPort": 8080 }] } }),
    )
    .await;
    wait::until("virtual replica with both ports", TIMEOUT, || async {
        let db = present(&virt_services, "db").await?;
        (ports_of(&db).len() == 2)
            .then_some(())
            .ok_or(format!("{:?}", ports_of(&db)))
    })
    .await;
    wait::until("host replica on port 81", TIMEOUT, || async {
        let r = present(&host_services, "api-replica").await?;
        (ports_of(&r) == vec![(81, None)])
            .then_some(())
            .ok_or(format!("{:?}", ports_of(&r)))
    })
    .await;

    // A tenant's edit of the fromHost replica does not stay.
    virt_services
        .patch(
            "db",
            &PatchParams::default(),
            &Patch::Merge(
                json!({ "metadata": { "annotations": { "vnest.dev/replicated-from": "forged" } } }),
            ),
        )
        .await
        .unwrap();
    wait::until("tenant edit undone", TIMEOUT, || async {
        let db = present(&virt_services, "db").await?;
        let from = db
            .metadata
            .annotations
            .unwrap_or_default()
            .remove("vnest.dev/replicated-from");
        (from == Some(format!("{}/shared-db", source_ns.name)))
            .then_some(())
            .ok_or(format!("{from:?}"))
    })
    .await;

    // The replica goes with its source and comes back with it.
    delete(&shared, "shared-db").await;
    wait::until("virtual replica gone with its source", TIMEOUT, || async {
        absent(&virt_services, "db").await
    })
    .await;
    create_service(
        &shared,
        service("shared-db", json!({ "app": "db" }), db_ports),
    )
    .await;
    wait::until("virtual replica back", TIMEOUT, || async {
        present(&virt_services, "db").await
    })
    .await;

    // Entries removed while the syncer is down: its restart deletes both replicas.
    drop(syncer);
    s.patch_spec(json!({ "networking": { "replicateServices": null } }))
        .await;
    let wiring = rewired_when_config_has(&s, "api-replica", false).await;
    let _syncer = vnest_tests::SyncerProcess::start(&wiring, vnest_tests::fixtures::free_port());
    wait::until("replicas of removed entries deleted", TIMEOUT, || async {
        absent(&virt_services, "db").await?;
        absent(&host_services, "api-replica").await
    })
    .await;
    // The tenant's own Service and its ordinary host copy stay.
    present(&virt_services, "api").await.unwrap();
    present(&host_services, s.host_name("api")).await.unwrap();
    source_ns.delete(&s.host).await;
    s.teardown().await;
}

/// `toHost.priorityclasses`: a tenant class appears on the host under the cluster-scoped
/// host name (never as the global default), a pod using it runs on the host naming the copy,
/// a class deleted while the syncer is down loses its copy at the restart, and deleting the
/// VirtualCluster deletes the copies left.
#[tokio::test]
async fn tenant_priority_classes_reach_the_host_and_pods_use_them() {
    let s = setup("res-prio", syncing_to_host("priorityclasses")).await;
    let syncer = s.start_syncer();
    // The bed's virtual API server is shared: a class name of this test's own, and never a
    // global default (it would give every other test's pods this class).
    let class = format!("{}-high", s.vns.name);
    let virt_classes: Api<PriorityClass> = Api::all(s.virt.clone());
    virt_classes
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": { "name": class }, "value": 1000,
                "description": "tenant batch",
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let host_classes: Api<PriorityClass> = Api::all(s.host.clone());
    let host_class = host_cluster_name(&class, &s.ns.name, VC);
    let copy = wait::until("host priority class", TIMEOUT, || async {
        present(&host_classes, &host_class).await
    })
    .await;
    assert_eq!(copy.value, Some(1000));
    assert_ne!(copy.global_default, Some(true));
    assert_eq!(copy.description.as_deref(), Some("tenant batch"));

    s.create::<Pod>(json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": { "name": "batch" },
        "spec": { "priorityClassName": class, "containers": [{ "name": "app", "image": "nginx" }] },
    }))
    .await;
    let host_pod = s.running_host_pod("batch").await;
    let spec = host_pod.spec.unwrap();
    assert_eq!(
        spec.priority_class_name.as_deref(),
        Some(host_class.as_str())
    );
    assert_eq!(spec.priority, Some(1000));

    drop(syncer);
    delete(&virt_classes, &class).await;
    let restarted = s.start_syncer();
    wait::until("host copy of the deleted class gone", TIMEOUT, || async {
        absent(&host_classes, &host_class).await
    })
    .await;

    // Deleting the VirtualCluster removes its cluster-scoped copies too (the finalizer).
    virt_classes
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({ "metadata": { "name": class }, "value": 1000 }))
                .unwrap(),
        )
        .await
        .unwrap();
    wait::until("host copy again", TIMEOUT, || async {
        present(&host_classes, &host_class).await
    })
    .await;
    drop(restarted);
    delete(
        &Api::<VirtualCluster>::namespaced(s.host.clone(), &s.ns.name),
        VC,
    )
    .await;
    wait::until(
        "host copy gone with its VirtualCluster",
        TIMEOUT,
        || async { absent(&host_classes, &host_class).await },
    )
    .await;
    delete(&virt_classes, &class).await;
    s.teardown().await;
}

/// Ingress round trip: the host copy routes to the host copies of the Service and TLS
/// Secret and keeps its class, follows an update, shows the controller's load-balancer
/// address to the tenant, takes its TLS Secret's host copy away when the TLS entry goes, and
/// is removed at restart when the tenant deleted it meanwhile.
#[tokio::test]
async fn ingresses_round_trip_with_their_tls_secret_and_status() {
    let s = setup("res-ing", syncing_to_host("ingresses")).await;
    let syncer = s.start_syncer();
    s.create::<Secret>(json!({
        "apiVersion": "v1", "kind": "Secret", "metadata": { "name": "tls" },
        "stringData": { "tls.crt": "cert", "tls.key": "key" },
    }))
    .await;
    s.create::<Ingress>(json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": { "name": "web" },
        "spec": {
            "ingressClassName": "alb",
            "tls": [{ "hosts": ["app.example.com"], "secretName": "tls" }],
            "rules": [{ "host": "app.example.com", "http": { "paths": [{
                "path": "/", "pathType": "Prefix",
                "backend": { "service": { "name": "web", "port": { "number": 80 } } },
            }] } }],
        },
    }))
    .await;
    let host_ingresses: Api<Ingress> = s.host_api();
    let host = s.host_copy(&host_ingresses, "web").await;
    let spec = host.spec.unwrap();
    assert_eq!(spec.ingress_class_name.as_deref(), Some("alb"));
    let rule = &spec.rules.unwrap()[0];
    let backend = &rule.http.as_ref().unwrap().paths[0].backend;
    assert_eq!(backend.service.as_ref().unwrap().name, s.host_name("web"));
    let tls_name = s.host_name("tls");
    assert_eq!(
        spec.tls.unwrap()[0].secret_name.as_deref(),
        Some(tls_name.as_str())
    );
    let host_secrets: Api<Secret> = s.host_api();
    wait::until("host TLS secret", TIMEOUT, || async {
        present(&host_secrets, &tls_name).await
    })
    .await;

    // An update follows.
    let virt_ingresses: Api<Ingress> = s.virt_api();
    let rules = json!({ "spec": { "rules": [{ "host": "shop.example.com", "http": { "paths": [{
        "path": "/", "pathType": "Prefix",
        "backend": { "service": { "name": "web", "port": { "number": 80 } } },
    }] } }] } });
    virt_ingresses
        .patch("web", &PatchParams::default(), &Patch::Merge(rules))
        .await
        .unwrap();
    wait::until("host ingress updated", TIMEOUT, || async {
        let i = present(&host_ingresses, s.host_name("web")).await?;
        let host = i.spec.and_then(|s| s.rules).and_then(|r| r[0].host.clone());
        (host.as_deref() == Some("shop.example.com"))
            .then_some(())
            .ok_or(format!("{host:?}"))
    })
    .await;

    // The host controller's address comes back to the tenant.
    let status = json!({ "status": { "loadBalancer": { "ingress": [{ "ip": "203.0.113.7" }] } } });
    merge_patch_status(&host_ingresses, &s.host_name("web"), status).await;
    wait::until("load-balancer status back", TIMEOUT, || async {
        let v = present(&virt_ingresses, "web").await?;
        let ip = v
            .status
            .and_then(|s| s.load_balancer)
            .and_then(|lb| lb.ingress)
            .and_then(|i| i[0].ip.clone());
        (ip.as_deref() == Some("203.0.113.7"))
            .then_some(())
            .ok_or(format!("{ip:?}"))
    })
    .await;

    // A dropped TLS entry takes its host Secret away at once (well before the five-minute
    // resync), and a TLS entry added back brings it back.
    let tls = |tls: serde_json::Value| json!({ "spec": { "tls": tls } });
    merge_patch(&virt_ingresses, "web", tls(serde_json::Value::Null)).await;
    wait::until(
        "host TLS secret gone with the TLS entry",
        TIMEOUT,
        || async { absent(&host_secrets, &tls_name).await },
    )
    .await;
    merge_patch(
        &virt_ingresses,
        "web",
        tls(json!([{ "hosts": ["shop.example.com"], "secretName": "tls" }])),
    )
    .await;
    wait::until(
        "host TLS secret back with the TLS entry",
        TIMEOUT,
        || async { present(&host_secrets, &tls_name).await },
    )
    .await;

    // Deleted while the syncer is down: gone from the host, with its Secret, after restart.
    drop(syncer);
    delete(&virt_ingresses, "web").await;
    let _syncer = s.start_syncer();
    wait::until("host ingress and its secret gone", TIMEOUT, || async {
        absent(&host_ingresses, s.host_name("web")).await?;
        absent(&host_secrets, &tls_name).await
    })
    .await;
    s.teardown().await;
}

/// A PodDisruptionBudget guards exactly the tenant's host pods: its translated selector
/// counts the one synced pod, which the host's disruption controller reports back.
#[tokio::test]
async fn pod_disruption_budgets_count_the_tenants_host_pods() {
    let s = setup("res-pdb", syncing_to_host("poddisruptionbudgets")).await;
    let _syncer = s.start_syncer();
    s.create::<PodDisruptionBudget>(json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": { "name": "web" },
        "spec": { "minAvailable": 1, "selector": { "matchLabels": { "app": "web" } } },
    }))
    .await;
    s.create::<Pod>(json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": { "name": "web", "labels": { "app": "web" } },
        "spec": { "containers": [{ "name": "app", "image": "nginx" }] },
    }))
    .await;
    let host_pdbs: Api<PodDisruptionBudget> = s.host_api();
    let host = s.host_copy(&host_pdbs, "web").await;
    let labels = host.spec.unwrap().selector.unwrap().match_labels.unwrap();
    assert_eq!(labels["app"], "web");
    assert_eq!(labels[LABEL_SYNCER_MANAGED_BY], VC);
    s.running_host_pod("web").await;
    let virt_pdbs: Api<PodDisruptionBudget> = s.virt_api();
    wait::until("virtual PDB counts the one host pod", TIMEOUT, || async {
        let p = present(&virt_pdbs, "web").await?;
        let expected = p.status.and_then(|st| st.expected_pods);
        (expected == Some(1))
            .then_some(())
            .ok_or(format!("{expected:?}"))
    })
    .await;
    delete(&virt_pdbs, "web").await;
    wait::until("host PDB gone", TIMEOUT, || async {
        absent(&host_pdbs, s.host_name("web")).await
    })
    .await;
    s.teardown().await;
}

/// fromHost classes are the host's: a host StorageClass and IngressClass appear in the
/// virtual cluster, a tenant's edit of a copy is undone, a host change arrives, and the copy
/// goes with the host object.
#[tokio::test]
async fn from_host_classes_are_shown_read_only() {
    let spec = json!({ "sync": { "fromHost": { "ingressClasses": { "enabled": true } } } });
    let s = setup("res-cls", spec).await;
    let _syncer = s.start_syncer();
    // Cluster-scoped and the virtual API server is shared: names of this test's own.
    let (storage, ingress) = (format!("{}-fast", s.ns.name), format!("{}-alb", s.ns.name));
    let host_storage: Api<StorageClass> = Api::all(s.host.clone());
    host_storage
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": { "name": storage, "labels": { "tier": "fast" } },
                "provisioner": "ebs.csi.aws.com", "parameters": { "type": "gp3" },
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let host_ingress: Api<IngressClass> = Api::all(s.host.clone());
    host_ingress
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": { "name": ingress }, "spec": { "controller": "ingress.k8s.aws/alb" },
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let virt_storage: Api<StorageClass> = Api::all(s.virt.clone());
    let copy = wait::until("virtual StorageClass", TIMEOUT, || async {
        present(&virt_storage, &storage).await
    })
    .await;
    assert_eq!(copy.provisioner, "ebs.csi.aws.com");
    assert_eq!(copy.metadata.labels.unwrap()[LABEL_FROM_HOST], "true");
    let virt_ingress: Api<IngressClass> = Api::all(s.virt.clone());
    let copy = wait::until("virtual IngressClass", TIMEOUT, || async {
        present(&virt_ingress, &ingress).await
    })
    .await;
    assert_eq!(
        copy.spec.unwrap().controller.as_deref(),
        Some("ingress.k8s.aws/alb")
    );

    let tier = |value: &str| Patch::Merge(json!({ "metadata": { "labels": { "tier": value } } }));
    let tier_is = |want: &'static str| {
        let virt_storage = virt_storage.clone();
        let storage = storage.clone();
        move || {
            let (virt_storage, storage) = (virt_storage.clone(), storage.clone());
            async move {
                let c = present(&virt_storage, &storage).await?;
                let got = c.metadata.labels.unwrap_or_default().remove("tier");
                (got.as_deref() == Some(want))
                    .then_some(())
                    .ok_or(format!("{got:?}"))
            }
        }
    };
    virt_storage
        .patch(&storage, &PatchParams::default(), &tier("forged"))
        .await
        .unwrap();
    wait::until("tenant edit undone", TIMEOUT, tier_is("fast")).await;
    host_storage
        .patch(&storage, &PatchParams::default(), &tier("gold"))
        .await
        .unwrap();
    wait::until("host change arrives", TIMEOUT, tier_is("gold")).await;

    delete(&host_storage, &storage).await;
    delete(&host_ingress, &ingress).await;
    wait::until("copies gone with the host classes", TIMEOUT, || async {
        absent(&virt_storage, &storage).await?;
        absent(&virt_ingress, &ingress).await
    })
    .await;
    s.teardown().await;
}

/// A virtual Service keeps the address its API server gave it: the host copy asks for the
/// same address (the bed's host and virtual API servers share a Service range) and gets it,
/// so the tenant's Service is never deleted and recreated. An address the host has already
/// given out is refused there; that Service is recreated on the host copy's address instead.
#[tokio::test]
async fn a_virtual_service_keeps_its_address_unless_the_host_gave_it_out() {
    let s = setup("res-svc-ip", json!({})).await;
    let _syncer = s.start_syncer();
    let virt_services: Api<Service> = s.virt_api();
    let host_services: Api<Service> = s.host_api();
    let ports = json!([{ "port": 80 }]);
    let web = create_service(
        &virt_services,
        service("web", json!({ "app": "web" }), ports.clone()),
    )
    .await;
    let host_web = s.host_copy(&host_services, "web").await;
    assert_eq!(cluster_ip(&host_web), cluster_ip(&web));
    let now = virt_services.get("web").await.unwrap();
    assert_eq!(now.metadata.uid, web.metadata.uid, "never recreated");

    // A host Service holds an address; the tenant asks for that one in its own cluster.
    let decoy = create_service(
        &host_services,
        service("decoy", json!({ "app": "decoy" }), ports.clone()),
    )
    .await;
    let taken = cluster_ip(&decoy).unwrap();
    let mut wanted = service("taken", json!({ "app": "taken" }), ports);
    wanted.spec.as_mut().unwrap().cluster_ip = Some(taken.clone());
    let asked = create_service(&virt_services, wanted).await;
    assert_eq!(cluster_ip(&asked).as_ref(), Some(&taken));
    let host_taken = s.host_copy(&host_services, "taken").await;
    assert_ne!(cluster_ip(&host_taken).as_ref(), Some(&taken));
    let recreated = wait::until(
        "taken recreated on its host copy's address",
        TIMEOUT,
        || async {
            let v = present(&virt_services, "taken").await?;
            (cluster_ip(&v) == cluster_ip(&host_taken))
                .then_some(v)
                .ok_or("not yet".to_string())
        },
    )
    .await;
    assert_ne!(recreated.metadata.uid, asked.metadata.uid);
    s.teardown().await;
}

/// An ExternalName Service turned into one with an address keeps the address its virtual API
/// server gave it then: the host copy, updated to the new type, asks for that address too, so
/// a client holding it (or a DNS answer for it) is not left with one the Service lost.
#[tokio::test]
async fn an_external_name_service_given_an_address_keeps_its_virtual_one() {
    let s = setup("res-svc-ext", json!({})).await;
    let _syncer = s.start_syncer();
    let virt_services: Api<Service> = s.virt_api();
    let host_services: Api<Service> = s.host_api();
    let external: Service = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": { "name": "ext" },
        "spec": { "type": "ExternalName", "externalName": "foo.example.com" },
    }))
    .unwrap();
    let created = create_service(&virt_services, external).await;
    s.host_copy(&host_services, "ext").await;
    let changed = virt_services
        .patch(
            "ext",
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": {
                "type": "ClusterIP", "externalName": null,
                "selector": { "app": "ext" }, "ports": [{ "port": 80 }],
            } })),
        )
        .await
        .unwrap();
    let address = cluster_ip(&changed).expect("the virtual API server gave an address");
    let host_copy = wait::until("host copy with an address", TIMEOUT, || async {
        let h = present(&host_services, s.host_name("ext")).await?;
        cluster_ip(&h)
            .filter(|ip| !ip.is_empty())
            .map(|_| h)
            .ok_or("no address yet".to_string())
    })
    .await;
    assert_eq!(cluster_ip(&host_copy).as_ref(), Some(&address));
    wait::holds(
        "virtual ext keeps its address and identity",
        Duration::from_secs(5),
        || async {
            let v = present(&virt_services, "ext").await?;
            (v.metadata.uid == created.metadata.uid && cluster_ip(&v).as_ref() == Some(&address))
                .then_some(())
                .ok_or(format!("now {:?} {:?}", v.metadata.uid, cluster_ip(&v)))
        },
    )
    .await;
    s.teardown().await;
}

/// A virtual NodePort Service shows the node port tenants reach it at on the host's nodes:
/// asking for a port the host has already given out, it is updated in place (not recreated)
/// to the port the host gave its copy.
#[tokio::test]
async fn a_virtual_node_port_service_takes_its_host_copys_node_port() {
    let s = setup("res-svc-np", json!({})).await;
    let _syncer = s.start_syncer();
    let node_port = |svc: &Service| {
        svc.spec
            .as_ref()
            .and_then(|s| s.ports.as_ref())
            .and_then(|p| p[0].node_port)
    };
    let virt_services: Api<Service> = s.virt_api();
    let host_services: Api<Service> = s.host_api();
    let node_port_service = |name: &str, port: Option<i32>| {
        let mut svc = service(name, json!({ "app": name }), json!([{ "port": 80 }]));
        let spec = svc.spec.as_mut().unwrap();
        spec.type_ = Some("NodePort".into());
        spec.ports.as_mut().unwrap()[0].node_port = port;
        svc
    };
    // A host Service holds a node port; the tenant asks for that one in its own cluster.
    let decoy = create_service(&host_services, node_port_service("decoy", None)).await;
    let taken = node_port(&decoy).unwrap();
    let asked = create_service(&virt_services, node_port_service("np", Some(taken))).await;
    assert_eq!(node_port(&asked), Some(taken));
    let host_copy = s.host_copy(&host_services, "np").await;
    let host_port = node_port(&host_copy).unwrap();
    assert_ne!(host_port, taken, "the host gave the copy a free port");
    let adopted = wait::until("np on its host copy's node port", TIMEOUT, || async {
        let v = present(&virt_services, "np").await?;
        (node_port(&v) == Some(host_port))
            .then_some(v)
            .ok_or("not yet".to_string())
    })
    .await;
    assert_eq!(adopted.metadata.uid, asked.metadata.uid, "updated in place");
    s.teardown().await;
}

/// A pod gets the kubelet's service-link variables for the Services of its virtual namespace
/// at their virtual addresses (the host kubelet's would describe host Services under their
/// host names, so its links are off on the host copy), unless the pod turned
/// `enableServiceLinks` off.
#[tokio::test]
async fn pods_get_the_service_links_of_their_virtual_namespace() {
    let s = setup("res-links", json!({})).await;
    let _syncer = s.start_syncer();
    let virt_services: Api<Service> = s.virt_api();
    let host_services: Api<Service> = s.host_api();
    let foo = create_service(
        &virt_services,
        service(
            "fooservice",
            json!({ "app": "foo" }),
            json!([{ "port": 8765 }]),
        ),
    )
    .await;
    let ip = foo.spec.unwrap().cluster_ip.unwrap();
    // The syncer has seen the Service once it made the host copy.
    s.host_copy(&host_services, "fooservice").await;
    for (name, links) in [("linked", true), ("unlinked", false)] {
        s.create::<Pod>(json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": { "name": name },
            "spec": { "enableServiceLinks": links, "containers": [{ "name": "app", "image": "nginx" }] },
        }))
        .await;
    }
    let host_pods: Api<Pod> = s.host_api();
    let host_env = |name: &'static str| {
        let (host_pods, host_name) = (host_pods.clone(), s.host_name(name));
        async move {
            let pod = wait::until(&format!("host copy of {name}"), TIMEOUT, || async {
                present(&host_pods, &host_name).await
            })
            .await;
            let spec = pod.spec.unwrap();
            assert_eq!(
                spec.enable_service_links,
                Some(false),
                "{name}: host links off"
            );
            let env = spec.containers[0].env.clone().unwrap_or_default();
            env.into_iter()
                .map(|e| (e.name, e.value.unwrap_or_default()))
                .collect::<Vec<_>>()
        }
    };
    let linked = host_env("linked").await;
    for expected in [
        ("FOOSERVICE_SERVICE_HOST".to_string(), ip.clone()),
        ("FOOSERVICE_SERVICE_PORT".to_string(), "8765".to_string()),
        (
            "FOOSERVICE_PORT_8765_TCP".to_string(),
            format!("tcp://{ip}:8765"),
        ),
    ] {
        assert!(linked.contains(&expected), "{expected:?} in {linked:?}");
    }
    let unlinked = host_env("unlinked").await;
    assert!(
        unlinked
            .iter()
            .all(|(name, _)| !name.starts_with("FOOSERVICE_")),
        "{unlinked:?}"
    );
    assert!(
        unlinked
            .iter()
            .any(|(name, _)| name == "KUBERNETES_SERVICE_HOST"),
        "the API server's variables whatever the links: {unlinked:?}"
    );
    s.teardown().await;
}

/// A pod the host will not take (here: it names a RuntimeClass the tenant made, which the
/// host does not have and its admission refuses) is not left Pending in silence: the tenant
/// gets a Warning event with the host's reason.
#[tokio::test]
async fn a_pod_the_host_refuses_gets_an_event_with_the_reason() {
    let s = setup("res-refused", json!({})).await;
    let _syncer = s.start_syncer();
    // Only in the virtual cluster (shared by the bed's tests, so named for this one).
    let class_name = format!("{}-class", s.vns.name);
    let classes: Api<RuntimeClass> = Api::all(s.virt.clone());
    let class: RuntimeClass =
        serde_json::from_value(json!({ "metadata": { "name": class_name }, "handler": "sandbox" }))
            .unwrap();
    classes
        .create(&PostParams::default(), &class)
        .await
        .unwrap();
    s.create::<Pod>(json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": { "name": "sandboxed" },
        "spec": { "runtimeClassName": class_name, "containers": [{ "name": "app", "image": "nginx" }] },
    }))
    .await;
    let event = warning_about(&s, "sandboxed").await;
    assert_eq!(event.reason.as_deref(), Some("HostRefused"), "{event:?}");
    let note = event.message.unwrap_or_default();
    assert!(note.contains(&class_name), "{note}");
    s.never_on_host("sandboxed").await;
    classes
        .delete(&class_name, &Default::default())
        .await
        .unwrap();
    s.teardown().await;
}

/// An ephemeral container a tenant adds to a running pod (`kubectl debug`) is added to the
/// host copy, translated as its containers are, aimed at the same container.
#[tokio::test]
async fn an_ephemeral_container_reaches_the_host_pod() {
    let s = setup("res-ephemeral", json!({})).await;
    let _syncer = s.start_syncer();
    s.create::<Pod>(json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": { "name": "target" },
        "spec": { "containers": [{ "name": "app", "image": "nginx" }] },
    }))
    .await;
    s.running_host_pod("target").await;
    let debugger = json!({ "spec": { "ephemeralContainers": [{
        "name": "debugger", "image": "busybox", "targetContainerName": "app",
        "env": [{ "name": "MY_NS", "valueFrom": { "fieldRef": { "fieldPath": "metadata.namespace" } } }],
    }] } });
    s.virt_api::<Pod>()
        .patch_ephemeral_containers(
            "target",
            &PatchParams::default(),
            &Patch::Strategic(debugger),
        )
        .await
        .unwrap();
    let host_pods: Api<Pod> = s.host_api();
    let added = wait::until(
        "the ephemeral container on the host pod",
        TIMEOUT,
        || async {
            let pod = present(&host_pods, s.host_name("target")).await?;
            pod.spec
                .and_then(|s| s.ephemeral_containers)
                .and_then(|all| all.into_iter().find(|e| e.name == "debugger"))
                .ok_or("not yet".to_string())
        },
    )
    .await;
    assert_eq!(added.target_container_name.as_deref(), Some("app"));
    let vars = added.env.unwrap_or_default();
    assert!(
        vars.iter().any(|e| e.name == "KUBERNETES_SERVICE_HOST"),
        "the virtual API server's variables: {vars:?}"
    );
    let field = vars
        .iter()
        .find(|e| e.name == "MY_NS")
        .and_then(|e| e.value_from.as_ref())
        .and_then(|v| v.field_ref.as_ref())
        .map(|f| f.field_path.clone());
    assert_ne!(
        field.as_deref(),
        Some("metadata.namespace"),
        "the virtual namespace"
    );
    s.teardown().await;
}
