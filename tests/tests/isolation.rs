//! Tenant isolation on the real bed (issue 16): what a hostile tenant tries through the syncer
//! is refused or neutralised on the host.
//!
//! - A tenant pod labelled like the control plane (`app=vcluster,release=<vc>` and the
//!   operator's `vnest.dev/control-plane`) is synced, but the control plane's Services and
//!   NetworkPolicy do not select its host copy, so it takes no part in the tenants' API traffic.
//! - A VirtualCluster author asking for extra syncer rights (`rbac.*.extraRules`) from an
//!   operator the admins did not start with `--allow-extra-rules` gets `SpecValid=False` naming
//!   both fields, and no Role, ClusterRole or StatefulSet is made for it.

use std::time::Duration;

use k8s_openapi::api::{
    apps::v1::StatefulSet,
    core::v1::{PersistentVolume, Pod, Service},
    discovery::v1::EndpointSlice,
    networking::v1::NetworkPolicy,
    rbac::v1::{ClusterRole, Role},
};
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, ListParams, PostParams},
};
use serde_json::json;
use std::collections::BTreeMap;
use vnest_crds::meta::LABEL_CONTROL_PLANE;
use vnest_tests::tenant::{TIMEOUT, VC, phase, present, setup};
use vnest_tests::{
    fixtures::{self, create_virtual_cluster, provide_data_volume, spec_refusal},
    wait,
};

/// `k=v,k=v` of a `matchLabels`-style selector.
fn selector_string(selector: &BTreeMap<String, String>) -> String {
    selector
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Names of the host pods `selector` matches, as the API server evaluates it.
async fn selected(pods: &Api<Pod>, selector: &str) -> Vec<String> {
    let list = pods
        .list_metadata(&ListParams::default().labels(selector))
        .await
        .expect("list host pods");
    let mut names: Vec<String> = list.items.iter().map(|p| p.name_any()).collect();
    names.sort();
    names
}

#[tokio::test]
async fn a_tenant_pod_labelled_as_the_control_plane_joins_none_of_its_services() {
    let s = setup(
        "iso-cp",
        json!({ "policies": { "networkPolicy": { "enabled": true } } }),
    )
    .await;
    // The bed has no storage provisioner: a volume for the control plane's data claim lets
    // its pod be scheduled (onto a KWOK node, which runs it and gives it an IP).
    provide_data_volume(&s.host, &s.ns.name, VC).await;
    let _syncer = s.start_syncer();
    let impostor = "impostor";
    s.create::<Pod>(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": impostor, "labels": {
            "app": "vcluster", "release": VC, LABEL_CONTROL_PLANE: VC,
        } },
        "spec": { "containers": [{ "name": "app", "image": "nginx" }] },
    }))
    .await;

    // The host copy exists and runs (so it has an IP an endpoint could use), and so does the
    // control plane's pod, which the StatefulSet controller made.
    let host_pod = s.running_host_pod(impostor).await;
    let host_name = host_pod.name_any();
    let host_pods: Api<Pod> = s.host_api();
    let control_plane = format!("{VC}-0");
    wait::until("the control-plane pod Running", TIMEOUT, || async {
        let pod = present(&host_pods, &control_plane).await?;
        (phase(&pod) == Some("Running"))
            .then_some(())
            .ok_or(format!("{:?}", pod.status))
    })
    .await;

    // It kept the runbook labels, so selecting by them (what the Services did before) takes
    // it: the attack is real, and this test exercises it.
    let runbook = format!("app=vcluster,release={VC}");
    assert_eq!(
        selected(&host_pods, &runbook).await,
        sorted([control_plane.clone(), host_name.clone()]),
        "{:?}",
        host_pod.labels()
    );

    // Every selector of the control plane, evaluated by the API server, returns the
    // control-plane pod alone.
    let services: Api<Service> = s.host_api();
    let mut selectors = Vec::new();
    for name in [VC.to_string(), format!("{VC}-headless")] {
        let svc = services.get(&name).await.unwrap();
        let selector = svc.spec.and_then(|sp| sp.selector).unwrap_or_default();
        assert_eq!(
            selector,
            BTreeMap::from([(LABEL_CONTROL_PLANE.to_string(), VC.to_string())]),
            "Service {name}"
        );
        selectors.push((format!("Service {name}"), selector_string(&selector)));
    }
    let policies: Api<NetworkPolicy> = s.host_api();
    let policy = policies.get(&format!("vc-cp-{VC}")).await.unwrap();
    let pod_selector = policy.spec.unwrap().pod_selector.unwrap_or_default();
    assert!(pod_selector.match_expressions.is_none());
    let match_labels = pod_selector.match_labels.unwrap_or_default();
    selectors.push((
        format!("NetworkPolicy vc-cp-{VC}"),
        selector_string(&match_labels),
    ));
    for (what, selector) in &selectors {
        assert_eq!(
            selected(&host_pods, selector).await,
            std::slice::from_ref(&control_plane),
            "{what} selects {selector}; the impostor's host labels are {:?}",
            host_pod.labels()
        );
    }

    // And so the EndpointSlice controller gives the Services the control-plane pod only.
    // (The selector lists above are the proof; this is what a client of a Service sees.) A
    // probe Service with the old selector shows the controller has taken the impostor in.
    let probe = "probe-runbook-labels";
    let probe_service: Service = serde_json::from_value(json!({
        "metadata": { "name": probe },
        "spec": { "selector": { "app": "vcluster", "release": VC },
                  "clusterIP": "None", "publishNotReadyAddresses": true,
                  "ports": [{ "name": "https", "port": 443 }] },
    }))
    .unwrap();
    services
        .create(&PostParams::default(), &probe_service)
        .await
        .unwrap();
    let slices: Api<EndpointSlice> = s.host_api();
    let targets_of = |service: String| {
        let slices = slices.clone();
        async move {
            let by_service = format!("kubernetes.io/service-name={service}");
            let list = slices
                .list(&ListParams::default().labels(&by_service))
                .await
                .map_err(|e| e.to_string())?;
            let mut targets: Vec<String> = list
                .items
                .iter()
                .flat_map(|slice| slice.endpoints.iter().flatten())
                .filter_map(|e| e.target_ref.as_ref()?.name.clone())
                .collect();
            targets.sort();
            Ok::<_, String>(targets)
        }
    };
    let both = sorted([control_plane.clone(), host_name.clone()]);
    wait::until("both pods behind the probe Service", TIMEOUT, || async {
        let targets = targets_of(probe.to_string()).await?;
        (targets == both)
            .then_some(())
            .ok_or(format!("{targets:?}"))
    })
    .await;
    let headless = format!("{VC}-headless");
    wait::until(
        "the control-plane pod behind the headless Service",
        TIMEOUT,
        || async {
            let targets = targets_of(headless.clone()).await?;
            targets
                .contains(&control_plane)
                .then_some(())
                .ok_or(format!("{targets:?}"))
        },
    )
    .await;
    for service in [VC.to_string(), headless] {
        let targets = targets_of(service.clone()).await.unwrap();
        assert!(!targets.contains(&host_name), "{service}: {targets:?}");
    }

    let volume = format!("pv-{}-data-{VC}-0", s.ns.name);
    let volumes: Api<PersistentVolume> = Api::all(s.host.clone());
    s.teardown().await;
    let _ = volumes.delete(&volume, &DeleteParams::default()).await;
}

fn sorted<const N: usize>(mut names: [String; N]) -> Vec<String> {
    names.sort();
    names.to_vec()
}

#[tokio::test]
async fn extra_syncer_rights_are_refused_unless_the_admins_allow_them() {
    // `fixtures::setup` starts the operator as the chart does by default: no
    // `--allow-extra-rules`.
    let fixtures::Setup {
        client,
        ns,
        operator: _operator,
    } = fixtures::setup("iso-rules").await;
    let n = ns.name.as_str();
    create_virtual_cluster(
        &client,
        n,
        "greedy",
        json!({ "rbac": {
            "role": { "extraRules": [{ "apiGroups": [""], "resources": ["secrets"], "verbs": ["list"] }] },
            "clusterRole": { "extraRules": [{ "apiGroups": [""], "resources": ["nodes"], "verbs": ["patch"] }] },
        } }),
    )
    .await;
    let message = &spec_refusal(&client, n, "greedy").await;
    for named in [
        "spec.rbac.role.extraRules",
        "spec.rbac.clusterRole.extraRules",
        "--allow-extra-rules",
    ] {
        assert!(message.contains(named), "{named} not in: {message}");
    }

    // Nothing of it is made, not just not yet: absent through a window after the refusal.
    let roles: Api<Role> = Api::namespaced(client.clone(), n);
    let cluster_roles: Api<ClusterRole> = Api::all(client.clone());
    let statefulsets: Api<StatefulSet> = Api::namespaced(client.clone(), n);
    let cluster_role = format!("vc-{n}-greedy");
    wait::holds(
        "no Role, ClusterRole or StatefulSet for the refused spec",
        Duration::from_secs(5),
        || async {
            let made = [
                roles.get_opt("vc-greedy").await.map(|o| o.is_some()),
                cluster_roles
                    .get_opt(&cluster_role)
                    .await
                    .map(|o| o.is_some()),
                statefulsets.get_opt("greedy").await.map(|o| o.is_some()),
            ];
            match made.iter().position(|m| !matches!(m, Ok(false))) {
                None => Ok(()),
                Some(i) => Err(format!("object {i}: {:?}", made[i])),
            }
        },
    )
    .await;
    ns.delete(&client).await;
}
