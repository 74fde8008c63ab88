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
    certificates::v1::ClusterTrustBundle,
    core::v1::{ConfigMap, Event, Namespace, PersistentVolume, Pod, Service, ServiceAccount},
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
use vnest_crds::{meta::LABEL_CONTROL_PLANE, translate::host_name};
use vnest_tests::tenant::{TIMEOUT, VC, absent, first_warning, phase, present, setup};
use vnest_tests::{
    fixtures::{self, ALL_VERBS, create_virtual_cluster, provide_data_volume, spec_refusal},
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

/// A tenant pod dressed in the control plane's labels is selected by none of its Services or NetworkPolicies.
#[tokio::test]
async fn a_tenant_pod_labelled_as_the_control_plane_joins_none_of_its_services() {
    let spec = json!({ "policies": { "networkPolicy": { "enabled": true } } });
    let s = setup("iso-cp", spec).await;
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

/// `rbac.*.extraRules` are refused, with nothing created, unless the admins allow them.
#[tokio::test]
async fn extra_syncer_rights_are_refused_unless_the_admins_allow_them() {
    // `fixtures::setup` starts the operator as the chart does by default: no
    // `--allow-extra-rules`.
    let (client, ns, _operator) = fixtures::setup("iso-rules").await;
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
            absent(&roles, "vc-greedy").await?;
            absent(&cluster_roles, &cluster_role).await?;
            absent(&statefulsets, "greedy").await
        },
    )
    .await;
    ns.delete(&client).await;
}

/// The first Warning event about `kind` `name` in virtual namespace `ns` with `reason`.
async fn warning_in(virt: &kube::Client, ns: &str, kind: &str, name: &str, reason: &str) -> Event {
    let events: Api<Event> = Api::namespaced(virt.clone(), ns);
    first_warning(&events, &format!("{reason} on {kind} {ns}/{name}"), |e| {
        e.involved_object.name.as_deref() == Some(name)
            && e.involved_object.kind.as_deref() == Some(kind)
            && e.reason.as_deref() == Some(reason)
    })
    .await
}

fn pod_mounting(name: &str, configmap: &str) -> serde_json::Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": name },
        "spec": {
            "containers": [{ "name": "app", "image": "nginx",
                             "volumeMounts": [{ "name": "cfg", "mountPath": "/cfg" }] }],
            "volumes": [{ "name": "cfg", "configMap": { "name": configmap } }],
        },
    })
}

/// Two virtual objects with one host name: the first keeps it, the later one and pods using it are refused with an event.
#[tokio::test]
async fn colliding_host_names_keep_the_first_owner_and_refuse_the_later_object() {
    let mut s = setup("iso-nc", json!({})).await;
    // ConfigMap `a-x-b` in `c` and `a` in `b-x-c` translate to one host name.
    let c = s.vns.name.clone();
    let other = format!("b-x-{c}");
    assert_eq!(host_name("a", &other, VC), host_name("a-x-b", &c, VC));
    let namespaces: Api<Namespace> = Api::all(s.virt.clone());
    let ns: Namespace = serde_json::from_value(json!({ "metadata": { "name": other } })).unwrap();
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let accounts: Api<ServiceAccount> = Api::namespaced(s.virt.clone(), &other);
    wait::until("default ServiceAccount in b-x-c", TIMEOUT, || async {
        accounts.get("default").await.map_err(|e| e.to_string())
    })
    .await;
    s.wiring.virtual_namespace = format!("{c},{other}");
    let _syncer = s.start_syncer();

    // The first owner: c/a-x-b, used by a pod so it is synced.
    s.create::<ConfigMap>(json!({ "metadata": { "name": "a-x-b" }, "data": { "k": "first" } }))
        .await;
    s.create::<Pod>(pod_mounting("first", "a-x-b")).await;
    let host_configmaps: Api<ConfigMap> = s.host_api();
    let host = s.host_name("a-x-b");
    let data_of = |cm: &ConfigMap| cm.data.clone().unwrap_or_default().get("k").cloned();
    wait::until("host copy of c/a-x-b", TIMEOUT, || async {
        let cm = present(&host_configmaps, &host).await?;
        (data_of(&cm).as_deref() == Some("first"))
            .then_some(())
            .ok_or(format!("{:?}", cm.data))
    })
    .await;

    // The later object, and a pod in its namespace mounting it.
    let later_cms: Api<ConfigMap> = Api::namespaced(s.virt.clone(), &other);
    let later: ConfigMap =
        serde_json::from_value(json!({ "metadata": { "name": "a" }, "data": { "k": "second" } }))
            .unwrap();
    later_cms
        .create(&PostParams::default(), &later)
        .await
        .unwrap();
    let later_pods: Api<Pod> = Api::namespaced(s.virt.clone(), &other);
    let pod: Pod = serde_json::from_value(pod_mounting("later", "a")).unwrap();
    later_pods
        .create(&PostParams::default(), &pod)
        .await
        .unwrap();

    let event = warning_in(&s.virt, &other, "ConfigMap", "a", "NameConflict").await;
    let note = event.message.unwrap_or_default();
    for named in [format!("{other}/a"), format!("{c}/a-x-b"), host.clone()] {
        assert!(note.contains(&named), "{named} not in: {note}");
    }
    let event = warning_in(&s.virt, &other, "Pod", "later", "NameConflict").await;
    let note = event.message.unwrap_or_default();
    assert!(note.contains(&format!("{other}/a")), "{note}");

    // The later pod never reaches the host, and the host copy keeps the first's content.
    let host_pods: Api<Pod> = s.host_api();
    let later_host_pod = host_name("later", &other, VC);
    wait::holds(
        "no host pod for the later pod; the host copy keeps c/a-x-b's data",
        Duration::from_secs(5),
        || async {
            absent(&host_pods, &later_host_pod).await?;
            let cm = present(&host_configmaps, &host).await?;
            (data_of(&cm).as_deref() == Some("first"))
                .then_some(())
                .ok_or(format!("{:?}", cm.data))
        },
    )
    .await;

    let _ = later_pods
        .delete_collection(
            &DeleteParams::default().grace_period(0),
            &ListParams::default(),
        )
        .await;
    let _ = namespaces.delete(&other, &DeleteParams::default()).await;
    s.teardown().await;
}

/// A tenant's `spec.nodeName` is honoured only for a node the tenant is shown; otherwise the pod is refused with an event.
#[tokio::test]
async fn a_pod_naming_a_node_is_placed_there_only_when_the_tenant_is_shown_it() {
    let s = setup("iso-node", json!({})).await;
    let _syncer = s.start_syncer();
    // A pod the host schedules shows the tenant the node it runs on.
    s.create::<Pod>(json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": { "name": "scheduled" },
        "spec": { "containers": [{ "name": "app", "image": "nginx" }] },
    }))
    .await;
    let shown = s.running_host_pod("scheduled").await;
    let node = shown.spec.unwrap().node_name.unwrap();

    let bogus = "not-a-node-of-this-cluster";
    s.create::<Pod>(json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": { "name": "bogus" },
        "spec": { "nodeName": bogus, "containers": [{ "name": "app", "image": "nginx" }] },
    }))
    .await;
    s.create::<Pod>(json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": { "name": "pinned" },
        "spec": { "nodeName": node, "containers": [{ "name": "app", "image": "nginx" }] },
    }))
    .await;

    let event = warning_in(&s.virt, &s.vns.name, "Pod", "bogus", "NodeNotAllowed").await;
    let note = event.message.unwrap_or_default();
    assert!(note.contains(bogus), "{note}");
    assert!(
        note.contains("not one of the virtual cluster's nodes"),
        "{note}"
    );
    let pinned = s.running_host_pod("pinned").await;
    assert_eq!(
        pinned.spec.unwrap().node_name.as_deref(),
        Some(node.as_str())
    );
    s.never_on_host("bogus").await;
    s.teardown().await;
}

/// A self-signed CA certificate as PEM, named `name`.
fn ca_pem(name: &str) -> String {
    let mut params = rcgen::CertificateParams::new(vec![name.to_string()]).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let key = rcgen::KeyPair::generate().unwrap();
    params.self_signed(&key).unwrap().pem()
}

/// Whether key `key` of host ConfigMap `cm` holds exactly `pem`.
async fn holds_bundle(
    config_maps: &Api<ConfigMap>,
    cm: &str,
    key: &str,
    pem: &str,
) -> Result<(), String> {
    let data = present(config_maps, cm).await?.data.unwrap_or_default();
    match data.get(key) {
        Some(found) if found == pem => Ok(()),
        found => Err(format!("{key}: {found:?}")),
    }
}

/// A pod projecting a ClusterTrustBundle by name gets the virtual cluster's bundle of that
/// name, never the host's: its host copy mounts a ConfigMap of its own that the syncer fills
/// from the virtual bundle, and that follows the bundle when it changes.
#[tokio::test]
async fn a_projected_cluster_trust_bundle_is_the_virtual_clusters_not_the_hosts() {
    let s = setup("iso-ctb", json!({})).await;
    // Cluster-scoped, so named after this run's namespace; the host gets a decoy of the name.
    let name = format!("{}.bundle", s.ns.name);
    let bundle = |pem: &str| {
        json!({
            "apiVersion": "certificates.k8s.io/v1", "kind": "ClusterTrustBundle",
            "metadata": { "name": name }, "spec": { "trustBundle": pem },
        })
    };
    let (host_ca, virtual_ca, renewed_ca) = (ca_pem("host"), ca_pem("tenant"), ca_pem("tenant-2"));
    let host_bundles: Api<ClusterTrustBundle> = Api::all(s.host.clone());
    let virtual_bundles: Api<ClusterTrustBundle> = Api::all(s.virt.clone());
    let params = PostParams::default();
    let decoy = serde_json::from_value(bundle(&host_ca)).unwrap();
    host_bundles.create(&params, &decoy).await.unwrap();
    let own = serde_json::from_value(bundle(&virtual_ca)).unwrap();
    virtual_bundles.create(&params, &own).await.unwrap();
    let _syncer = s.start_syncer();
    s.create::<Pod>(json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": { "name": "bundled" },
        "spec": {
            "containers": [{ "name": "app", "image": "nginx",
                             "volumeMounts": [{ "name": "cas", "mountPath": "/cas" }] }],
            "volumes": [{ "name": "cas", "projected": { "sources": [
                { "clusterTrustBundle": { "name": name, "path": "ca.pem" } }
            ] } }],
        },
    }))
    .await;

    let host_pods: Api<Pod> = s.host_api();
    let host_pod = s.host_copy(&host_pods, "bundled").await;
    let volumes = host_pod.spec.unwrap().volumes.unwrap();
    let source = &volumes[0]
        .projected
        .as_ref()
        .unwrap()
        .sources
        .as_ref()
        .unwrap()[0];
    assert!(source.cluster_trust_bundle.is_none(), "{source:?}");
    let config_map = source.config_map.as_ref().expect("a ConfigMap source");
    let item = &config_map.items.as_ref().unwrap()[0];
    assert_eq!(item.path, "ca.pem");

    let config_maps: Api<ConfigMap> = s.host_api();
    let (cm, key) = (&config_map.name, &item.key);
    wait::until("the virtual bundle in the host ConfigMap", TIMEOUT, || {
        holds_bundle(&config_maps, cm, key, &virtual_ca)
    })
    .await;
    assert_ne!(virtual_ca, host_ca);

    let mut renewed = virtual_bundles.get(&name).await.unwrap();
    renewed.spec.trust_bundle = renewed_ca.clone();
    virtual_bundles
        .replace(&name, &params, &renewed)
        .await
        .unwrap();
    wait::until("the renewed bundle in the host ConfigMap", TIMEOUT, || {
        holds_bundle(&config_maps, cm, key, &renewed_ca)
    })
    .await;

    let gone = DeleteParams::default();
    host_bundles.delete(&name, &gone).await.unwrap();
    virtual_bundles.delete(&name, &gone).await.unwrap();
    s.teardown().await;
}

/// `kubectl auth can-i` as `kubeconfig`: Some(true/false) from the API server's authorizer,
/// None when the question could not be asked (so a broken kubeconfig never reads as "no").
fn can_i(kubeconfig: &std::path::Path, args: &[&str]) -> Option<bool> {
    let out = std::process::Command::new(vnest_tests::bed().bin("kubectl"))
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["auth", "can-i"])
        .args(args)
        .output()
        .ok()?;
    match String::from_utf8_lossy(&out.stdout).trim() {
        "yes" => Some(true),
        "no" => Some(false),
        _ => None,
    }
}

/// The syncer's own host token (ServiceAccount `vc-<vc>`, as the control-plane pod holds it)
/// is refused every verb on every namespaced kind tried in another namespace, in
/// `kube-system` and across all namespaces, and every write of every cluster-scoped kind
/// tried; in its own namespace it may create pods (so the refusals are the authorizer's).
#[tokio::test]
async fn the_syncers_token_is_refused_outside_its_namespace() {
    let s = setup("iso-token", json!({})).await;
    let other = vnest_tests::TestNamespace::create(&s.host, "iso-token-other").await;
    let token = &s.wiring.host_kubeconfig;
    assert_eq!(
        can_i(token, &["create", "pods", "-n", &s.ns.name]),
        Some(true),
        "the syncer's token must work in its own namespace"
    );
    let namespaced = [
        "pods",
        "secrets",
        "configmaps",
        "services",
        "serviceaccounts",
        "persistentvolumeclaims",
        "events",
        "roles.rbac.authorization.k8s.io",
        "rolebindings.rbac.authorization.k8s.io",
        "networkpolicies.networking.k8s.io",
        "statefulsets.apps",
        "leases.coordination.k8s.io",
        "virtualclusters.vnest.dev",
    ];
    let mut granted = Vec::new();
    for scope in [
        vec!["-n", other.name.as_str()],
        vec!["-n", "kube-system"],
        vec!["--all-namespaces"],
    ] {
        for kind in namespaced {
            for verb in ALL_VERBS {
                let mut args = vec![verb, kind];
                args.extend(&scope);
                match can_i(token, &args) {
                    Some(false) => {}
                    answer => granted.push(format!("{args:?} → {answer:?}")),
                }
            }
        }
    }
    let cluster_scoped = [
        "nodes",
        "namespaces",
        "persistentvolumes",
        "clusterroles.rbac.authorization.k8s.io",
        "clusterrolebindings.rbac.authorization.k8s.io",
        "customresourcedefinitions.apiextensions.k8s.io",
        "virtualclusterpolicies.vnest.dev",
        "priorityclasses.scheduling.k8s.io",
    ];
    for kind in cluster_scoped {
        for verb in ["create", "update", "patch", "delete", "deletecollection"] {
            match can_i(token, &[verb, kind]) {
                Some(false) => {}
                answer => granted.push(format!("{verb} {kind} → {answer:?}")),
            }
        }
    }
    assert!(
        granted.is_empty(),
        "the syncer's token may do more than its namespace: {granted:#?}"
    );
    other.delete(&s.host).await;
    s.teardown().await;
}

/// A tenant holding only namespace-level rights inside the virtual cluster (`edit` in its one
/// virtual namespace) reaches nothing of the host through the syncer's proxy: the host
/// namespace's Secrets and the tenant kubeconfig are not found, other virtual namespaces are
/// forbidden, and a pod naming the host's own Secret `vc-<vc>` gets the translated name on the
/// host, never the host Secret itself.
#[tokio::test]
async fn a_namespace_tenant_reaches_no_host_object_through_the_proxy() {
    let s = setup("iso-ns-tenant", json!({})).await;
    let syncer = s.start_syncer();
    let vns = s.vns.name.clone();
    let virtual_kubectl = |args: &[&str]| {
        vnest_tests::bed().kubectl_with(&vnest_tests::bed().virtual_kubeconfig(), args)
    };
    virtual_kubectl(&["-n", &vns, "create", "serviceaccount", "dev"]).unwrap();
    virtual_kubectl(&[
        "-n",
        &vns,
        "create",
        "rolebinding",
        "dev-edit",
        "--clusterrole=edit",
        &format!("--serviceaccount={vns}:dev"),
    ])
    .unwrap();
    let token = virtual_kubectl(&["-n", &vns, "create", "token", "dev"]).unwrap();
    let dev = syncer.token_kubeconfig(token.trim());
    let as_dev = |args: &[&str]| vnest_tests::bed().kubectl_with(&dev, args);
    wait::until("the tenant's edit rights", TIMEOUT, || async {
        as_dev(&["-n", &vns, "get", "configmaps", "-o", "name"])
    })
    .await;

    let host_secret = format!("/api/v1/namespaces/{}/secrets/vc-{VC}", s.ns.name);
    let refused = as_dev(&["get", "--raw", &host_secret]).unwrap_err();
    assert!(
        refused.contains("NotFound")
            || refused.contains("not found")
            || refused.contains("Forbidden")
            || refused.contains("forbidden"),
        "{refused}"
    );
    for (args, what) in [
        (
            vec!["get", "secrets", "-n", s.ns.name.as_str()],
            "the host namespace's Secrets",
        ),
        (
            vec!["get", "pods", "-n", "kube-system"],
            "another namespace's pods",
        ),
        (vec!["get", "nodes"], "nodes"),
        (vec!["create", "namespace", "mine"], "a new namespace"),
    ] {
        let denied = as_dev(&args).unwrap_err();
        assert!(denied.contains("forbidden"), "{what}: {denied}");
    }

    // A pod naming the host Secret that holds the tenant kubeconfig: the host copy mounts the
    // translated name, which only a virtual Secret of that name could fill.
    as_dev(&[
        "-n",
        &vns,
        "run",
        "thief",
        "--image=nginx",
        "--restart=Never",
        "--overrides",
        &json!({ "spec": { "volumes": [{ "name": "x", "secret": { "secretName": format!("vc-{VC}") } }],
            "containers": [{ "name": "thief", "image": "nginx", "volumeMounts": [{ "name": "x", "mountPath": "/x" }] }] } })
        .to_string(),
    ])
    .unwrap();
    let host_pods: Api<Pod> = Api::namespaced(s.host.clone(), &s.ns.name);
    let host_pod = wait::until("host copy of the thief pod", TIMEOUT, || {
        present(&host_pods, host_name("thief", &vns, VC))
    })
    .await;
    let secrets: Vec<String> = host_pod
        .spec
        .iter()
        .flat_map(|spec| spec.volumes.iter().flatten())
        .filter_map(|v| v.secret.as_ref()?.secret_name.clone())
        .collect();
    assert!(
        secrets.contains(&host_name(&format!("vc-{VC}"), &vns, VC))
            && !secrets.contains(&format!("vc-{VC}")),
        "{secrets:?}"
    );
    drop(syncer);
    s.teardown().await;
}
