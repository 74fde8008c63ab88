//! The operator as a real process against the real host API server: a VirtualCluster becomes
//! every object the design names and reaches Ready on a KWOK node; policies come and go with
//! the spec; tampered children are put back; deletion leaves nothing behind; a bad spec is
//! refused without stopping the others; `controlPlane.ingress` makes and removes an Ingress; an idle resync writes nothing; two replicas do not
//! fight, even with skewed clocks; a restart mid-reconcile converges.

use std::time::Duration;

use k8s_openapi::{
    api::{
        apps::v1::StatefulSet,
        coordination::v1::Lease,
        core::v1::{
            ConfigMap, Event, LimitRange, Namespace, Pod, ResourceQuota, Secret, Service,
            ServiceAccount,
        },
        networking::v1::{Ingress, NetworkPolicy},
        rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding},
    },
    apimachinery::pkg::apis::meta::v1::MicroTime,
    jiff::Timestamp,
};
use kube::{
    Api, Client, ResourceExt,
    api::{ListParams, Patch, PatchParams, PostParams},
};
use serde_json::json;
use vnest_crds::{Phase, SyncerConfig, VirtualCluster};
use vnest_tests::{
    OperatorProcess, TestNamespace, bed,
    fixtures::{
        READY_TIMEOUT, condition_message, create_virtual_cluster, free_port, host_namespace,
        patch_spec, provide_data_volume, ready_virtual_cluster, refused_virtual_cluster, setup,
        wait_condition,
    },
    tenant::{delete, merge_patch, present},
    wait,
};

fn secret_text(secret: &Secret, key: &str) -> String {
    let data = secret
        .data
        .as_ref()
        .unwrap_or_else(|| panic!("secret {} has no data", secret.name_any()));
    String::from_utf8(
        data.get(key)
            .unwrap_or_else(|| panic!("secret {} has no {key}", secret.name_any()))
            .0
            .clone(),
    )
    .unwrap()
}

async fn gone<K>(api: &Api<K>, name: &str) -> bool
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    matches!(api.get_opt(name).await, Ok(None))
}

fn all_policies() -> serde_json::Value {
    json!({
        "resourceQuota": { "enabled": true, "quota": { "pods": 30, "requests.cpu": "4" } },
        "limitRange": { "enabled": true },
        "networkPolicy": { "enabled": true },
        "podSecurityStandard": "baseline",
    })
}

/// [`setup`] plus VirtualCluster `vc` with [`all_policies`], once it is Ready.
async fn ready_with_all_policies(prefix: &str) -> (Client, TestNamespace, OperatorProcess) {
    let (client, ns, operator) = setup(prefix).await;
    ready_virtual_cluster(
        &client,
        &ns.name,
        "vc",
        json!({ "policies": all_policies() }),
    )
    .await;
    (client, ns, operator)
}

/// A VirtualCluster becomes every host object the design names and reaches Ready.
#[tokio::test]
async fn a_virtual_cluster_becomes_every_host_object_and_reaches_ready() {
    let (client, ns, _op) = setup("op-ready").await;
    let n = ns.name.as_str();
    provide_data_volume(&client, n, "vc").await;
    create_virtual_cluster(
        &client,
        n,
        "vc",
        json!({
            "controlPlane": { "statefulSet": {
                "resources": { "requests": { "cpu": "100m", "memory": "128Mi" }, "limits": { "cpu": "500m", "memory": "512Mi" } },
                "persistence": { "size": "5Gi" },
                "labels": { "team": "platform" },
            }},
            "sync": { "toHost": { "ingresses": { "enabled": true } }, "fromHost": { "nodes": { "enabled": true } } },
            "policies": all_policies(),
            "exportKubeconfig": { "context": "tenant-ctx" },
        }),
    )
    .await;
    let vc = wait_condition(&client, n, "vc", "Ready", "True", READY_TIMEOUT).await;
    let status = vc.status.clone().unwrap();
    assert_eq!(status.phase, Some(Phase::Running));
    assert_eq!(status.observed_generation, vc.metadata.generation);
    assert_eq!(status.ready_replicas, Some(1));
    assert_eq!(status.distro.as_deref(), Some("k3s"));
    assert_eq!(status.kubeconfig_secret.as_deref(), Some("vc-vc"));
    assert_eq!(status.endpoint, Some(format!("https://vc.{n}.svc:443")));
    for cond in ["Ready", "ControlPlaneReady", "SpecValid"] {
        assert!(
            status
                .conditions
                .iter()
                .any(|c| c.type_ == cond && c.status == "True"),
            "{cond}: {:?}",
            status.conditions
        );
    }
    bed()
        .kubectl(&[
            "-n",
            n,
            "wait",
            "--for=condition=Ready",
            "vc/vc",
            "--timeout=5s",
        ])
        .expect("kubectl wait works");

    // RBAC scoped to the enabled syncs.
    Api::<ServiceAccount>::namespaced(client.clone(), n)
        .get("vc-vc")
        .await
        .unwrap();
    let role = Api::<Role>::namespaced(client.clone(), n)
        .get("vc-vc")
        .await
        .unwrap();
    let rules = role.rules.unwrap_or_default();
    assert!(rules.iter().any(|r| {
        r.resources
            .as_deref()
            .unwrap_or_default()
            .contains(&"pods".to_string())
    }));
    assert!(rules.iter().any(|r| {
        r.resources
            .as_deref()
            .unwrap_or_default()
            .contains(&"ingresses".to_string())
    }));
    let binding = Api::<RoleBinding>::namespaced(client.clone(), n)
        .get("vc-vc")
        .await
        .unwrap();
    assert_eq!(binding.subjects.unwrap()[0].name, "vc-vc");
    let cluster_role = Api::<ClusterRole>::all(client.clone())
        .get(&format!("vc-{n}-vc"))
        .await
        .unwrap();
    assert!(cluster_role.rules.unwrap().iter().any(|r| {
        r.resources
            .as_deref()
            .unwrap_or_default()
            .contains(&"nodes".to_string())
    }));
    Api::<ClusterRoleBinding>::all(client.clone())
        .get(&format!("vc-{n}-vc"))
        .await
        .unwrap();

    // Secrets: syncer config, PKI, kubeconfig.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), n);
    let config: SyncerConfig = serde_yaml::from_str(&secret_text(
        &secrets.get("vc-config-vc").await.unwrap(),
        "config.yaml",
    ))
    .unwrap();
    assert_eq!(config.host_namespace, n);
    assert!(config.sync.to_host.ingresses.enabled);
    let certs = secrets.get("vc-certs").await.unwrap();
    let kubeconfig = secrets.get("vc-vc").await.unwrap();
    assert_eq!(
        secret_text(&kubeconfig, "certificate-authority"),
        secret_text(&certs, "ca.crt")
    );
    let config_yaml = secret_text(&kubeconfig, "config");
    assert!(
        config_yaml.contains("current-context: tenant-ctx"),
        "{config_yaml}"
    );
    assert!(
        config_yaml.contains(&format!("server: https://vc.{n}.svc:443")),
        "{config_yaml}"
    );

    // Services and the StatefulSet.
    let services: Api<Service> = Api::namespaced(client.clone(), n);
    let svc = services.get("vc").await.unwrap().spec.unwrap();
    assert_eq!(svc.ports.unwrap()[0].port, 443);
    assert_eq!(
        services
            .get("vc-headless")
            .await
            .unwrap()
            .spec
            .unwrap()
            .cluster_ip
            .as_deref(),
        Some("None")
    );
    let sts = Api::<StatefulSet>::namespaced(client.clone(), n)
        .get("vc")
        .await
        .unwrap()
        .spec;
    let containers: Vec<String> = sts
        .template
        .spec
        .unwrap()
        .containers
        .iter()
        .map(|c| c.name.clone())
        .collect();
    assert_eq!(containers, ["control-plane", "syncer"]);
    assert_eq!(
        sts.volume_claim_templates.unwrap()[0]
            .metadata
            .name
            .as_deref(),
        Some("data")
    );

    // The pod runs on a KWOK node with the labels the seed's dashboards select on.
    let pod = Api::<Pod>::namespaced(client.clone(), n)
        .get("vc-0")
        .await
        .unwrap();
    assert!(
        pod.spec
            .unwrap()
            .node_name
            .unwrap()
            .starts_with("kwok-node-")
    );
    assert_eq!(pod.metadata.labels.as_ref().unwrap()["app"], "vcluster");
    assert_eq!(pod.metadata.labels.as_ref().unwrap()["release"], "vc");
    // ... and the key the Services select it by, which no synced tenant pod can carry.
    assert_eq!(
        pod.metadata.labels.as_ref().unwrap()["vnest.dev/control-plane"],
        "vc"
    );
    for name in ["vc", "vc-headless"] {
        let selector = services.get(name).await.unwrap().spec.unwrap().selector;
        assert_eq!(
            selector,
            Some(std::collections::BTreeMap::from([(
                "vnest.dev/control-plane".to_string(),
                "vc".to_string()
            )])),
            "{name}"
        );
    }
    assert_eq!(pod.metadata.labels.as_ref().unwrap()["team"], "platform");

    // Policies.
    let quota = Api::<ResourceQuota>::namespaced(client.clone(), n)
        .get("vc-vc")
        .await
        .unwrap();
    assert_eq!(quota.spec.unwrap().hard.unwrap()["pods"].0, "30");
    let limits = Api::<LimitRange>::namespaced(client.clone(), n)
        .get("vc-vc")
        .await
        .unwrap();
    assert_eq!(limits.spec.unwrap().limits[0].type_, "Container");
    let policies: Api<NetworkPolicy> = Api::namespaced(client.clone(), n);
    policies.get("vc-work-vc").await.unwrap();
    policies.get("vc-cp-vc").await.unwrap();
    let namespace = Api::<Namespace>::all(client.clone()).get(n).await.unwrap();
    assert_eq!(
        namespace.labels()["pod-security.kubernetes.io/enforce"],
        "baseline"
    );

    // Every namespaced child is owned by the VirtualCluster.
    for (kind, owners) in [
        (
            "Secret",
            secrets
                .get("vc-certs")
                .await
                .unwrap()
                .metadata
                .owner_references,
        ),
        (
            "Service",
            services.get("vc").await.unwrap().metadata.owner_references,
        ),
        ("ResourceQuota", quota.metadata.owner_references),
    ] {
        let owners = owners.unwrap_or_default();
        assert!(
            owners
                .iter()
                .any(|o| o.kind == "VirtualCluster" && o.uid == vc.uid().unwrap()),
            "{kind} not owned"
        );
    }

    // Events tell what was created.
    let events = Api::<Event>::namespaced(client.clone(), n)
        .list(&ListParams::default())
        .await
        .unwrap();
    let created: Vec<_> = events
        .items
        .iter()
        .filter(|e| {
            e.involved_object.name.as_deref() == Some("vc")
                && e.reason.as_deref() == Some("Created")
        })
        .collect();
    assert!(
        created.len() >= 10,
        "expected a Created event per object, got {}",
        created.len()
    );
    ns.delete(&client).await;
}

/// Turning a policy on adds its objects; turning it off removes them.
#[tokio::test]
async fn toggling_policies_adds_and_removes_their_objects() {
    let (client, ns, _op) = ready_with_all_policies("op-toggle").await;
    let n = ns.name.as_str();
    let quotas: Api<ResourceQuota> = Api::namespaced(client.clone(), n);
    let limits: Api<LimitRange> = Api::namespaced(client.clone(), n);
    let policies: Api<NetworkPolicy> = Api::namespaced(client.clone(), n);
    let namespaces: Api<Namespace> = Api::all(client.clone());

    patch_spec(
        &client,
        n,
        "vc",
        json!({ "policies": {
            "resourceQuota": { "enabled": false }, "limitRange": { "enabled": false },
            "networkPolicy": { "enabled": false }, "podSecurityStandard": null,
        }}),
    )
    .await;
    wait::until(
        "policy objects removed",
        Duration::from_secs(30),
        || async {
            let labels = namespaces
                .get(n)
                .await
                .map_err(|e| e.to_string())?
                .labels()
                .clone();
            let removed = gone(&quotas, "vc-vc").await
                && gone(&limits, "vc-vc").await
                && gone(&policies, "vc-work-vc").await
                && gone(&policies, "vc-cp-vc").await
                && !labels.contains_key("pod-security.kubernetes.io/enforce");
            if removed {
                Ok(())
            } else {
                Err(format!("still present; namespace labels {labels:?}"))
            }
        },
    )
    .await;

    patch_spec(&client, n, "vc", json!({ "policies": { "resourceQuota": { "enabled": true }, "podSecurityStandard": "restricted" } })).await;
    wait::until(
        "quota and pod security back",
        Duration::from_secs(30),
        || async {
            let quota = quotas.get_opt("vc-vc").await.map_err(|e| e.to_string())?;
            let labels = namespaces
                .get(n)
                .await
                .map_err(|e| e.to_string())?
                .labels()
                .clone();
            match quota {
                Some(q)
                    if labels
                        .get("pod-security.kubernetes.io/enforce")
                        .map(String::as_str)
                        == Some("restricted") =>
                {
                    Ok(q)
                }
                other => Err(format!("{other:?} {labels:?}")),
            }
        },
    )
    .await;
    assert!(gone(&limits, "vc-vc").await, "the limit range stays off");
    ns.delete(&client).await;
}

/// `controlPlane.ingress` makes Ingress `<name>` routing its host to the API Service's port
/// 443 in the asked-for class, and disabling it deletes the Ingress.
#[tokio::test]
async fn enabling_the_ingress_creates_it_and_disabling_removes_it() {
    let (client, ns, _op) = setup("op-ingress").await;
    let n = ns.name.as_str();
    let ingress = json!({ "ingress": {
        "enabled": true, "host": "vc.example.com", "ingressClassName": "nginx",
        "annotations": { "team": "alpha" },
    }});
    create_virtual_cluster(&client, n, "vc", json!({ "controlPlane": ingress })).await;
    let ingresses: Api<Ingress> = Api::namespaced(client.clone(), n);
    let made = wait::until("Ingress vc made", Duration::from_secs(60), || async {
        ingresses
            .get_opt("vc")
            .await
            .map_err(|e| e.to_string())?
            .ok_or_else(|| "no Ingress vc yet".to_string())
    })
    .await;
    let spec = made.spec.clone().unwrap();
    assert_eq!(spec.ingress_class_name.as_deref(), Some("nginx"));
    let rule = &spec.rules.as_ref().unwrap()[0];
    assert_eq!(rule.host.as_deref(), Some("vc.example.com"));
    let backend = rule.http.as_ref().unwrap().paths[0]
        .backend
        .service
        .clone()
        .unwrap();
    assert_eq!(backend.name, "vc");
    assert_eq!(backend.port.unwrap().number, Some(443));
    let tls = spec.tls.unwrap();
    assert_eq!(
        tls[0].hosts.as_deref(),
        Some(&["vc.example.com".to_string()][..])
    );
    let annotations = made.annotations();
    assert_eq!(
        annotations["nginx.ingress.kubernetes.io/ssl-passthrough"],
        "true"
    );
    assert_eq!(annotations["team"], "alpha");
    assert_eq!(made.owner_references()[0].name, "vc");

    patch_spec(
        &client,
        n,
        "vc",
        json!({ "controlPlane": { "ingress": { "enabled": false } } }),
    )
    .await;
    wait::until("Ingress vc removed", Duration::from_secs(30), || async {
        if gone(&ingresses, "vc").await {
            Ok(())
        } else {
            Err("Ingress vc still present".to_string())
        }
    })
    .await;
    ns.delete(&client).await;
}

/// Children deleted or edited by hand are put back without regenerating the CA.
#[tokio::test]
async fn deleted_or_edited_children_are_put_back() {
    let (client, ns, _op) = setup("op-restore").await;
    let n = ns.name.as_str();
    ready_virtual_cluster(&client, n, "vc", json!({})).await;
    let services: Api<Service> = Api::namespaced(client.clone(), n);
    let roles: Api<Role> = Api::namespaced(client.clone(), n);
    let statefulsets: Api<StatefulSet> = Api::namespaced(client.clone(), n);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), n);
    let ca_before = secret_text(&secrets.get("vc-certs").await.unwrap(), "ca.crt");

    delete(&services, "vc").await;
    merge_patch(&roles, "vc-vc", json!({ "rules": [] })).await;
    merge_patch(&statefulsets, "vc", json!({ "spec": { "replicas": 3 } })).await;
    delete(&secrets, "vc-vc").await;
    // A removal leaves no field manager of its own behind: only the operator's managedFields
    // entry shrinks, and that alone must bring the label back.
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), n);
    accounts
        .patch(
            "vc-vc",
            &PatchParams::default(),
            &Patch::Merge(
                json!({ "metadata": { "labels": { "app.kubernetes.io/instance": null } } }),
            ),
        )
        .await
        .unwrap();

    wait::until("children restored", Duration::from_secs(30), || async {
        let svc = services.get_opt("vc").await.map_err(|e| e.to_string())?;
        let rules = roles
            .get("vc-vc")
            .await
            .map_err(|e| e.to_string())?
            .rules
            .unwrap_or_default();
        let replicas = statefulsets
            .get("vc")
            .await
            .map_err(|e| e.to_string())?
            .spec
            .replicas;
        let kubeconfig = secrets.get_opt("vc-vc").await.map_err(|e| e.to_string())?;
        let labelled = accounts
            .get("vc-vc")
            .await
            .map_err(|e| e.to_string())?
            .labels()
            .contains_key("app.kubernetes.io/instance");
        if svc.is_some()
            && !rules.is_empty()
            && replicas == Some(1)
            && kubeconfig.is_some()
            && labelled
        {
            Ok(())
        } else {
            Err(format!(
                "service {} rules {} replicas {replicas:?} kubeconfig {} label {labelled}",
                svc.is_some(),
                rules.len(),
                kubeconfig.is_some()
            ))
        }
    })
    .await;
    let ca_after = secret_text(&secrets.get("vc-certs").await.unwrap(), "ca.crt");
    assert_eq!(ca_before, ca_after, "the CA was regenerated");
    ns.delete(&client).await;
}

/// Deleting a VirtualCluster leaves no object of it on the host.
#[tokio::test]
async fn deleting_the_virtual_cluster_leaves_nothing_behind() {
    let (client, ns, _op) = setup("op-delete").await;
    let n = ns.name.as_str();
    ready_virtual_cluster(&client, n, "vc", json!({ "policies": all_policies(), "sync": { "fromHost": { "nodes": { "enabled": true } } } })).await;
    // An object the syncer would have made for a tenant pod's ConfigMap.
    let synced: ConfigMap = serde_json::from_value(json!({ "metadata": {
        "name": "app-config-x-default-x-vc", "labels": { "vcluster.loft.sh/managed-by": "vc" }
    }}))
    .unwrap();
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), n);
    configmaps
        .create(&PostParams::default(), &synced)
        .await
        .unwrap();

    delete(&Api::<VirtualCluster>::namespaced(client.clone(), n), "vc").await;
    let vcs: Api<VirtualCluster> = Api::namespaced(client.clone(), n);
    wait::until(
        "the VirtualCluster to be gone",
        Duration::from_secs(60),
        || async {
            if gone(&vcs, "vc").await {
                Ok(())
            } else {
                Err("still there")
            }
        },
    )
    .await;

    let selector = "app.kubernetes.io/instance=vc";
    wait::until(
        "every owned object collected",
        Duration::from_secs(90),
        || async {
            let mut left = Vec::new();
            for kind in [
                "serviceaccounts",
                "roles",
                "rolebindings",
                "secrets",
                "services",
                "statefulsets",
                "pods",
                "resourcequotas",
                "limitranges",
                "networkpolicies",
                "persistentvolumeclaims",
            ] {
                let out = bed()
                    .kubectl(&["-n", n, "get", kind, "-l", selector, "-o", "name"])
                    .map_err(|e| vec![e])?;
                left.extend(out.lines().map(String::from));
            }
            for kind in ["clusterroles", "clusterrolebindings"] {
                let out = bed()
                    .kubectl(&["get", kind, "-l", selector, "-o", "name"])
                    .map_err(|e| vec![e])?;
                left.extend(
                    out.lines()
                        .filter(|l| l.contains(&format!("vc-{n}-vc")))
                        .map(String::from),
                );
            }
            let pod = bed()
                .kubectl(&["-n", n, "get", "pods", "-o", "name"])
                .map_err(|e| vec![e])?;
            left.extend(pod.lines().map(String::from));
            let pvc = bed()
                .kubectl(&["-n", n, "get", "pvc", "-o", "name"])
                .map_err(|e| vec![e])?;
            left.extend(pvc.lines().map(String::from));
            if !gone(&configmaps, "app-config-x-default-x-vc").await {
                left.push("syncer-made configmap".into());
            }
            if left.is_empty() { Ok(()) } else { Err(left) }
        },
    )
    .await;
    let labels = Api::<Namespace>::all(client.clone())
        .get(n)
        .await
        .unwrap()
        .labels()
        .clone();
    assert!(
        !labels.contains_key("pod-security.kubernetes.io/enforce"),
        "{labels:?}"
    );
    ns.delete(&client).await;
}

/// A spec the operator cannot apply is reported on that cluster only; the others still reach Ready.
#[tokio::test]
async fn a_spec_the_operator_cannot_apply_is_reported_and_does_not_stop_the_others() {
    let (client, ns, _op) = setup("op-invalid").await;
    let n = ns.name.as_str();
    // The schema accepts five fields; the hour 25 only fails when the operator parses it.
    create_virtual_cluster(
        &client,
        n,
        "broken",
        json!({ "sleepMode": { "sleepSchedule": "0 25 * * *", "timezone": "Mars/Olympus" } }),
    )
    .await;
    provide_data_volume(&client, n, "healthy").await;
    create_virtual_cluster(&client, n, "healthy", json!({})).await;

    let broken = refused_virtual_cluster(&client, n, "broken").await;
    assert_eq!(broken.status.as_ref().unwrap().phase, Some(Phase::Failed));
    let message = condition_message(&broken, "SpecValid");
    assert!(
        message.contains("spec.sleepMode.sleepSchedule")
            && message.contains("spec.sleepMode.timezone"),
        "{message}"
    );
    wait_condition(&client, n, "healthy", "Ready", "True", READY_TIMEOUT).await;

    // Nothing of the broken one was applied.
    let statefulsets: Api<StatefulSet> = Api::namespaced(client.clone(), n);
    assert!(gone(&statefulsets, "broken").await);
    assert!(
        gone(
            &Api::<Secret>::namespaced(client.clone(), n),
            "vc-config-broken"
        )
        .await
    );
    let events = Api::<Event>::namespaced(client.clone(), n)
        .list(&ListParams::default())
        .await
        .unwrap();
    assert!(
        events
            .items
            .iter()
            .any(|e| e.involved_object.name.as_deref() == Some("broken")
                && e.type_.as_deref() == Some("Warning")
                && e.reason.as_deref() == Some("InvalidSpec")),
        "no InvalidSpec warning event"
    );

    // Fixing the spec lets it through.
    patch_spec(
        &client,
        n,
        "broken",
        json!({ "sleepMode": { "sleepSchedule": "0 20 * * *", "timezone": "UTC" } }),
    )
    .await;
    wait_condition(
        &client,
        n,
        "broken",
        "SpecValid",
        "True",
        Duration::from_secs(30),
    )
    .await;
    ns.delete(&client).await;
}

/// A converged operator makes no API writes while nothing changes.
#[tokio::test]
async fn an_idle_resync_writes_nothing() {
    let (client, ns, operator) = ready_with_all_policies("op-idle").await;
    let n = ns.name.as_str();
    // Let the trailing reconciles (StatefulSet status updates) settle.
    let settled = operator
        .settled_writes(Duration::from_secs(2), Duration::from_secs(30))
        .await;
    let reconciles = operator.counter("vnest_reconcile_total").await.unwrap();
    // Touching the object triggers a reconcile that finds everything as desired.
    merge_patch(
        &Api::<VirtualCluster>::namespaced(client.clone(), n),
        "vc",
        json!({ "metadata": { "annotations": { "touched": "1" } } }),
    )
    .await;
    // A reconcile after the touch.
    operator
        .reconciled(reconciles + 1.0, Duration::from_secs(30))
        .await;
    // No writes after the idle reconcile.
    operator
        .writes_stay_at(settled, Duration::from_secs(3))
        .await;
    ns.delete(&client).await;
}

/// Of two operators only the lease holder writes; the other takes over when it stops.
#[tokio::test]
async fn two_operators_share_the_work_through_one_lease() {
    let (client, ns, mut first) = setup("op-leader").await;
    let n = ns.name.as_str();
    let leases: Api<Lease> = Api::namespaced(client.clone(), n);
    let holder = || async {
        let lease = leases
            .get("vnest-operator")
            .await
            .map_err(|e| e.to_string())?;
        lease
            .spec
            .and_then(|s| s.holder_identity)
            .ok_or_else(|| "no holder".to_string())
    };
    wait::until("op-a to lead", Duration::from_secs(30), || async {
        holder()
            .await
            .and_then(|h| if h == "op-a" { Ok(()) } else { Err(h) })
    })
    .await;
    let second = OperatorProcess::start(bed(), n, "op-b", free_port());

    ready_virtual_cluster(&client, n, "vc", json!({})).await;
    assert_eq!(holder().await.unwrap(), "op-a");
    assert_eq!(
        second.counter("vnest_api_writes_total").await.unwrap(),
        0.0,
        "the standby wrote to the API server"
    );

    first.kill();
    wait::until("op-b to take over", Duration::from_secs(90), || async {
        holder()
            .await
            .and_then(|h| if h == "op-b" { Ok(()) } else { Err(h) })
    })
    .await;
    let services: Api<Service> = Api::namespaced(client.clone(), n);
    delete(&services, "vc").await;
    wait::until(
        "the new leader restores the Service",
        Duration::from_secs(60),
        || present(&services, "vc"),
    )
    .await;
    drop(second);
    ns.delete(&client).await;
}

/// A replica whose clock runs an hour behind keeps renewing a 4 s lease: its renewTime always
/// looks an hour stale, yet the operator must wait until the lease stops changing, then lead.
#[tokio::test]
async fn a_skewed_clock_holder_keeps_the_lease_while_it_renews_and_loses_it_when_it_stops() {
    let (client, ns) = host_namespace("op-skew").await;
    let n = ns.name.as_str();
    let leases: Api<Lease> = Api::namespaced(client.clone(), n);
    let skewed_spec = || {
        json!({
            "holderIdentity": "skewed-replica",
            "leaseDurationSeconds": 4,
            "renewTime": MicroTime(Timestamp::now() - Duration::from_secs(3600)),
        })
    };
    leases
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": { "name": "vnest-operator" },
                "spec": skewed_spec(),
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let renewals = {
        let leases = leases.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                let patch = json!({ "spec": skewed_spec() });
                if let Err(err) = leases
                    .patch(
                        "vnest-operator",
                        &PatchParams::default(),
                        &Patch::Merge(&patch),
                    )
                    .await
                {
                    eprintln!("renewal failed: {err}");
                }
            }
        })
    };
    let operator = OperatorProcess::start_with_args(
        bed(),
        n,
        "op-a",
        free_port(),
        &["--leader-election-lease-seconds=4".to_string()],
    );
    wait::until(
        "the operator to serve metrics",
        Duration::from_secs(30),
        || operator.metrics(),
    )
    .await;
    provide_data_volume(&client, n, "vc").await;
    create_virtual_cluster(&client, n, "vc", json!({})).await;

    let holder = || async {
        let lease = leases
            .get("vnest-operator")
            .await
            .map_err(|e| e.to_string())?;
        Ok::<_, String>(
            lease
                .spec
                .and_then(|s| s.holder_identity)
                .unwrap_or_default(),
        )
    };
    // Three lease durations of renewals, each of which looks an hour old to the operator.
    wait::holds(
        "the skewed holder's lease and the operator's silence",
        Duration::from_secs(12),
        || async {
            let holder = holder().await?;
            let writes = operator.counter("vnest_api_writes_total").await?;
            if holder == "skewed-replica" && writes == 0.0 {
                Ok(())
            } else {
                Err(format!("holder {holder}, operator writes {writes}"))
            }
        },
    )
    .await;

    renewals.abort();
    wait::until(
        "op-a to take the lease",
        Duration::from_secs(30),
        || async {
            let holder = holder().await?;
            if holder == "op-a" {
                Ok(())
            } else {
                Err(holder)
            }
        },
    )
    .await;
    wait_condition(&client, n, "vc", "Ready", "True", READY_TIMEOUT).await;
    ns.delete(&client).await;
}

/// An operator killed inside a reconcile (children written, status not) converges after a restart.
#[tokio::test]
async fn an_operator_restarted_mid_reconcile_converges() {
    let (client, ns, mut first) = setup("op-restart").await;
    let n = ns.name.as_str();
    provide_data_volume(&client, n, "vc").await;
    wait::until(
        "the operator to be ready",
        Duration::from_secs(30),
        || async { first.metrics().await },
    )
    .await;
    create_virtual_cluster(&client, n, "vc", json!({ "policies": all_policies() })).await;
    // Killed as soon as it has written more than the finalizer: children exist, and the status
    // apply_all writes last is still missing, so the kill provably cut a reconcile short.
    let writes = || async { first.counter("vnest_api_writes_total").await };
    wait::reaches(
        "the operator to write a child",
        Duration::from_secs(30),
        writes,
        2.0,
    )
    .await;
    first.kill();
    let cut_short = Api::<VirtualCluster>::namespaced(client.clone(), n)
        .get("vc")
        .await
        .unwrap();
    assert!(
        cut_short.status.is_none(),
        "the kill came after the reconcile finished: {:?}",
        cut_short.status
    );
    // The next replica takes the lease once the first one's expires.
    let _second = OperatorProcess::start(bed(), n, "op-a", free_port());
    wait_condition(&client, n, "vc", "Ready", "True", READY_TIMEOUT).await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), n);
    let ca = secret_text(&secrets.get("vc-certs").await.unwrap(), "ca.crt");
    assert_eq!(
        secret_text(
            &secrets.get("vc-vc").await.unwrap(),
            "certificate-authority"
        ),
        ca,
        "kubeconfig and PKI disagree"
    );
    Api::<NetworkPolicy>::namespaced(client.clone(), n)
        .get("vc-cp-vc")
        .await
        .unwrap();
    ns.delete(&client).await;
}

/// A restarted operator resyncs every VirtualCluster with zero writes.
#[tokio::test]
async fn a_restarted_operator_finds_nothing_to_write() {
    let (client, ns, mut first) = ready_with_all_policies("op-resync").await;
    let n = ns.name.as_str();
    first
        .settled_writes(Duration::from_secs(2), Duration::from_secs(30))
        .await;
    first.kill();

    // A new process starts with empty caches and reconciles everything once.
    let second = OperatorProcess::start(bed(), n, "op-b", free_port());
    second.reconciled(1.0, Duration::from_secs(60)).await;
    // No writes from the restarted operator.
    second.writes_stay_at(0.0, Duration::from_secs(3)).await;
    ns.delete(&client).await;
}

/// An operator with `--selector` reconciles only the VirtualClusters it matches.
#[tokio::test]
async fn an_operator_with_a_selector_reconciles_only_matching_virtual_clusters() {
    let (client, ns) = host_namespace("op-shard").await;
    let n = ns.name.as_str();
    let _operator = OperatorProcess::start_with_args(
        bed(),
        n,
        "op-shard",
        free_port(),
        &["--selector=shard=a".to_string()],
    );
    provide_data_volume(&client, n, "mine").await;
    let api: Api<VirtualCluster> = Api::namespaced(client.clone(), n);
    for (name, labels) in [
        ("mine", json!({ "shard": "a" })),
        ("other", json!({ "shard": "b" })),
    ] {
        let vc: VirtualCluster = serde_json::from_value(json!({
            "apiVersion": "vnest.dev/v1alpha1", "kind": "VirtualCluster",
            "metadata": { "name": name, "labels": labels }, "spec": {},
        }))
        .unwrap();
        api.create(&PostParams::default(), &vc).await.unwrap();
    }
    wait_condition(&client, n, "mine", "Ready", "True", READY_TIMEOUT).await;
    let other = api.get("other").await.unwrap();
    assert!(other.status.is_none(), "{:?}", other.status);
    assert!(other.metadata.finalizers.is_none(), "not even a finalizer");
    ns.delete(&client).await;
}
