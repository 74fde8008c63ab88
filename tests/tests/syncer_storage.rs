//! Storage and networking resources through the syncer as a real process on the operator's
//! ServiceAccount: a tenant claim binds to a host volume (made by hand: the bed has no
//! provisioner) and the bound volume appears in the virtual cluster; a NetworkPolicy's
//! translated selectors select exactly the tenant's host pods; host CSIStorageCapacities
//! are shown in the virtual namespace of the same name.

use k8s_openapi::api::{
    core::v1::{Namespace, PersistentVolume, PersistentVolumeClaim, Pod},
    networking::v1::NetworkPolicy,
    storage::v1::CSIStorageCapacity,
};
use kube::{
    Api,
    api::{DeleteParams, ListParams, PostParams},
    core::{Selector, SelectorExt},
};
use serde_json::json;
use vnest_crds::translate::host_name;
use vnest_tests::tenant::{TIMEOUT, VC, absent, delete, present, setup, syncing_to_host};
use vnest_tests::{SyncerProcess, fixtures::free_port, wait};

/// A tenant's claim binds on the host and its volume appears in the virtual cluster.
#[tokio::test]
async fn a_tenant_claim_binds_on_the_host_and_its_volume_appears_virtually() {
    let s = setup("st-pvc", json!({})).await;
    let syncer = SyncerProcess::start(&s.wiring, free_port());
    let host_claim = host_name("data", &s.vns.name, VC);
    let pv_name = format!("pv-{}", s.ns.name);
    // The bed has no provisioner: a host volume waiting for the host claim's name.
    let pv: PersistentVolume = serde_json::from_value(json!({
        "metadata": { "name": pv_name },
        "spec": {
            "capacity": { "storage": "1Gi" }, "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "",
            "hostPath": { "path": format!("/tmp/{pv_name}") },
            "claimRef": { "namespace": s.ns.name, "name": host_claim },
        }
    }))
    .unwrap();
    let host_pvs: Api<PersistentVolume> = Api::all(s.host.clone());
    host_pvs
        .create(&PostParams::default(), &pv)
        .await
        .expect("create host PV");

    s.create::<PersistentVolumeClaim>(json!({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": { "name": "data" },
        "spec": { "accessModes": ["ReadWriteOnce"], "storageClassName": "",
                  "resources": { "requests": { "storage": "1Gi" } } },
    }))
    .await;
    let virt_claims: Api<PersistentVolumeClaim> = Api::namespaced(s.virt.clone(), &s.vns.name);
    let host_claims: Api<PersistentVolumeClaim> = Api::namespaced(s.host.clone(), &s.ns.name);

    // Bound on the host; the binding, phase and capacity come back to the tenant.
    let bound = wait::until("virtual claim bound", TIMEOUT, || async {
        let c = virt_claims.get("data").await.map_err(|e| e.to_string())?;
        let phase = c.status.as_ref().and_then(|st| st.phase.clone());
        let volume = c.spec.as_ref().and_then(|sp| sp.volume_name.clone());
        match (phase.as_deref(), volume) {
            (Some("Bound"), Some(v)) => Ok((v, c)),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    assert_eq!(bound.0, pv_name);
    let capacity = bound.1.status.unwrap().capacity.unwrap();
    assert_eq!(capacity["storage"].0, "1Gi");

    // The volume shows under the name the claim names, bound to the virtual claim.
    let virt_pvs: Api<PersistentVolume> = Api::all(s.virt.clone());
    let shown = wait::until("virtual PV", TIMEOUT, || present(&virt_pvs, &pv_name)).await;
    let claim = shown.spec.unwrap().claim_ref.unwrap();
    assert_eq!(claim.namespace.as_deref(), Some(s.vns.name.as_str()));
    assert_eq!(claim.name.as_deref(), Some("data"));

    // A restarted syncer writes nothing new and keeps the binding.
    drop(syncer);
    let _syncer = s.start_syncer();

    // Deleting the tenant claim removes the host claim and finishes the virtual one; the
    // Retain volume stays, Released, on both sides.
    virt_claims
        .delete("data", &DeleteParams::default())
        .await
        .expect("delete claim");
    wait::until("claims gone", TIMEOUT, || async {
        absent(&host_claims, &host_claim).await?;
        absent(&virt_claims, "data").await
    })
    .await;
    wait::until("virtual PV released", TIMEOUT, || async {
        let pv = virt_pvs.get(&pv_name).await.map_err(|e| e.to_string())?;
        let phase = pv.status.and_then(|st| st.phase);
        if phase.as_deref() == Some("Released") {
            Ok(())
        } else {
            Err(format!("{phase:?}"))
        }
    })
    .await;
    // The host volume goes, and so does its virtual copy.
    host_pvs
        .delete(&pv_name, &DeleteParams::default())
        .await
        .expect("delete PV");
    wait::until("virtual PV gone", TIMEOUT, || absent(&virt_pvs, &pv_name)).await;
    s.teardown().await;
}

/// A tenant NetworkPolicy selects exactly the tenant's host pods.
#[tokio::test]
async fn a_network_policy_selects_exactly_the_tenants_host_pods() {
    let s = setup("st-np", syncing_to_host("networkpolicies")).await;
    let _syncer = s.start_syncer();
    for (name, app) in [("web-0", "web"), ("db-0", "db")] {
        s.create::<Pod>(json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": { "name": name, "labels": { "app": app } },
            "spec": { "containers": [{ "name": "c", "image": "nginx" }] },
        }))
        .await;
    }
    // A host pod of the same labels that is not the tenant's.
    let stranger: Pod = serde_json::from_value(json!({
        "metadata": { "name": "stranger", "labels": { "app": "web" } },
        "spec": { "containers": [{ "name": "c", "image": "nginx" }] },
    }))
    .unwrap();
    let host_pods: Api<Pod> = Api::namespaced(s.host.clone(), &s.ns.name);
    wait::until("host stranger pod", TIMEOUT, || async {
        host_pods
            .create(&PostParams::default(), &stranger)
            .await
            .map_err(|e| e.to_string())
    })
    .await;
    s.create::<NetworkPolicy>(json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": { "name": "web" },
        "spec": { "podSelector": { "matchLabels": { "app": "web" } },
                  "ingress": [{ "from": [{ "podSelector": { "matchLabels": { "app": "db" } } }] }] },
    }))
    .await;
    let policy = s.host_copy(&s.host_api::<NetworkPolicy>(), "web").await;
    let spec = policy.spec.unwrap();
    let selected = |selector: &k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector| {
        let selector = Selector::try_from(selector.clone()).unwrap();
        let host_pods = host_pods.clone();
        async move {
            let mut names: Vec<String> = host_pods
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .into_iter()
                .filter(|p| {
                    selector.matches(p.metadata.labels.as_ref().unwrap_or(&Default::default()))
                })
                .map(|p| p.metadata.name.unwrap_or_default())
                .collect();
            names.sort();
            names
        }
    };
    let web = host_name("web-0", &s.vns.name, VC);
    let db = host_name("db-0", &s.vns.name, VC);
    wait::until("both host pods", TIMEOUT, || async {
        let pods = host_pods
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?;
        if pods.items.len() >= 3 {
            Ok(())
        } else {
            Err(format!("{} pods", pods.items.len()))
        }
    })
    .await;
    assert_eq!(selected(spec.pod_selector.as_ref().unwrap()).await, [web]);
    let peer = spec.ingress.unwrap()[0].from.clone().unwrap()[0].clone();
    assert_eq!(peer.namespace_selector, None);
    assert_eq!(selected(peer.pod_selector.as_ref().unwrap()).await, [db]);
    s.teardown().await;
}

/// Host CSIStorageCapacities appear in the virtual namespace of the same name.
#[tokio::test]
async fn host_storage_capacities_are_shown_in_the_namespace_of_the_same_name() {
    let s = setup("st-csc", json!({})).await;
    // The host namespace named like the tenant's virtual namespace holds a capacity, as a
    // CSI driver's namespace would.
    let host_ns = Namespace {
        metadata: kube::api::ObjectMeta {
            name: Some(s.vns.name.clone()),
            ..Default::default()
        },
        ..Default::default()
    };
    let namespaces: Api<Namespace> = Api::all(s.host.clone());
    namespaces
        .create(&PostParams::default(), &host_ns)
        .await
        .expect("host namespace");
    let host_capacities: Api<CSIStorageCapacity> = Api::namespaced(s.host.clone(), &s.vns.name);
    let capacity: CSIStorageCapacity = serde_json::from_value(json!({
        "metadata": { "name": "fast-zone-a" },
        "storageClassName": "fast", "capacity": "10Gi",
        "nodeTopology": { "matchLabels": { "topology.kubernetes.io/zone": "a" } },
    }))
    .unwrap();
    host_capacities
        .create(&PostParams::default(), &capacity)
        .await
        .unwrap();
    let _syncer = s.start_syncer();

    let virt_capacities: Api<CSIStorageCapacity> = s.virt_api();
    let copy = wait::until("virtual copy of the capacity", TIMEOUT, || {
        present(&virt_capacities, "fast-zone-a")
    })
    .await;
    assert_eq!(copy.storage_class_name, "fast");
    assert_eq!(copy.capacity.unwrap().0, "10Gi");
    assert_eq!(copy.metadata.labels.unwrap()["vnest.dev/from-host"], "true");

    host_capacities
        .patch(
            "fast-zone-a",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({ "capacity": "20Gi" })),
        )
        .await
        .unwrap();
    wait::until("the copy follows the host", TIMEOUT, || async {
        let c = virt_capacities
            .get("fast-zone-a")
            .await
            .map_err(|e| e.to_string())?;
        let capacity = c.capacity.map(|q| q.0);
        (capacity.as_deref() == Some("20Gi"))
            .then_some(())
            .ok_or(format!("{capacity:?}"))
    })
    .await;
    delete(&host_capacities, "fast-zone-a").await;
    wait::until("the copy goes with the host object", TIMEOUT, || {
        absent(&virt_capacities, "fast-zone-a")
    })
    .await;
    let _ = namespaces
        .delete(&s.vns.name, &DeleteParams::background())
        .await;
    s.teardown().await;
}
