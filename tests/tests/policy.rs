//! VirtualClusterPolicies on the real bed (issue 16): the platform admins' policy selecting a
//! namespace bounds and defaults the VirtualClusters there, through the real operator.
//!
//! Every policy here selects only its own test's namespace (by a label carrying the namespace's
//! name), so tests running side by side, and other engineers' operators, never see each other's.

use std::time::Duration;

use k8s_openapi::api::{
    apps::v1::StatefulSet,
    core::v1::{Namespace, ResourceQuota, Service},
    networking::v1::NetworkPolicy,
    rbac::v1::Role,
};
use kube::{
    Api, Client,
    api::{DeleteParams, DynamicObject, Patch, PatchParams, PostParams},
    core::ApiResource,
};
use serde_json::{Value, json};
use vnest_crds::VirtualClusterPolicy;
use vnest_tests::{
    OperatorProcess, TestNamespace, bed, crd,
    fixtures::{
        condition_message, create_virtual_cluster, free_port, host_namespace, spec_refusal,
        wait_condition,
    },
    tenant::{absent, delete, merge_patch},
    wait,
};

/// The label each test puts on its namespace for its policies to select.
const SELECT: &str = "vnest-tests/policy";

struct Governed {
    client: Client,
    ns: TestNamespace,
    policies: Vec<String>,
    _operator: OperatorProcess,
}

impl Governed {
    /// A labelled namespace, the policies `specs` (name suffix, spec without the selector)
    /// selecting it, and only then an operator for it: its first look already sees them.
    async fn start(prefix: &str, specs: &[(&str, Value)]) -> Self {
        let (client, ns) = host_namespace(prefix).await;
        Api::<Namespace>::all(client.clone())
            .patch(
                &ns.name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "metadata": { "labels": { SELECT: ns.name } } })),
            )
            .await
            .expect("label the test namespace");
        let mut policies = Vec::new();
        for (suffix, spec) in specs {
            policies.push(create_policy(&client, &ns.name, suffix, spec.clone()).await);
        }
        let operator = OperatorProcess::start(bed(), &ns.name, "op-a", free_port());
        Governed {
            client,
            ns,
            policies,
            _operator: operator,
        }
    }

    fn policies(&self) -> Api<VirtualClusterPolicy> {
        Api::all(self.client.clone())
    }

    async fn teardown(self) {
        for name in &self.policies {
            let _ = self.policies().delete(name, &DeleteParams::default()).await;
        }
        self.ns.delete(&self.client).await;
    }
}

/// Creates policy `<namespace>-<suffix>` selecting `namespace`'s test label; its name.
async fn create_policy(client: &Client, namespace: &str, suffix: &str, mut spec: Value) -> String {
    let name = format!("{namespace}-{suffix}");
    spec["namespaceSelector"] = json!({ "matchLabels": { SELECT: namespace } });
    let policy: VirtualClusterPolicy = serde_json::from_value(json!({
        "apiVersion": "vnest.dev/v1alpha1", "kind": "VirtualClusterPolicy",
        "metadata": { "name": name }, "spec": spec,
    }))
    .expect("policy JSON");
    Api::<VirtualClusterPolicy>::all(client.clone())
        .create(&PostParams::default(), &policy)
        .await
        .unwrap_or_else(|e| panic!("create VirtualClusterPolicy {name}: {e}"));
    name
}

const TIMEOUT: Duration = Duration::from_secs(30);

/// A VirtualCluster outside its policy's bounds is refused with the policy and the field named,
/// and nothing is made for it.
#[tokio::test]
async fn a_virtual_cluster_outside_its_policy_is_refused_naming_policy_and_field() {
    let g = Governed::start(
        "pol-out",
        &[(
            "strict",
            json!({ "allowedDistros": ["k3s"], "controlPlane": { "maxPersistenceSize": "10Gi" } }),
        )],
    )
    .await;
    let n = g.ns.name.as_str();
    create_virtual_cluster(
        &g.client,
        n,
        "big",
        json!({ "controlPlane": {
            "distro": { "k8s": { "enabled": true } },
            "statefulSet": { "persistence": { "size": "20Gi" } },
        } }),
    )
    .await;
    let message = spec_refusal(&g.client, n, "big").await;
    let policy = format!("VirtualClusterPolicy {n}-strict");
    for named in [
        "spec.controlPlane.distro: k8s is not an allowed distro",
        "spec.controlPlane.statefulSet.persistence.size: 20Gi is above 10Gi",
        policy.as_str(),
        "allowedDistros",
        "maxPersistenceSize",
    ] {
        assert!(message.contains(named), "{named:?} not in: {message}");
    }

    // Nothing of it is made, not just not yet.
    let statefulsets: Api<StatefulSet> = Api::namespaced(g.client.clone(), n);
    let services: Api<Service> = Api::namespaced(g.client.clone(), n);
    let roles: Api<Role> = Api::namespaced(g.client.clone(), n);
    wait::holds(
        "no StatefulSet, Service or Role for the refused spec",
        Duration::from_secs(5),
        || async {
            absent(&statefulsets, "big").await?;
            absent(&services, "big").await?;
            absent(&roles, "vc-big").await
        },
    )
    .await;
    g.teardown().await;
}

/// A policy's defaults fill what the spec leaves out, and the extra syncer rules it allows reach
/// the syncer's Role.
#[tokio::test]
async fn policy_defaults_fill_the_spec_and_its_allowed_extra_rules_are_granted() {
    let g = Governed::start(
        "pol-in",
        &[(
            "team",
            json!({
                "defaults": { "policies": { "networkPolicy": { "enabled": true } } },
                "minPodSecurityStandard": "baseline",
                "resourceQuota": { "max": { "pods": "50" } },
                "rbac": { "role": { "allowedRules": [
                    { "apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"] },
                ] } },
            }),
        )],
    )
    .await;
    let n = g.ns.name.as_str();
    // Says nothing about network policies, quota or pod security; asks for an allowed rule.
    create_virtual_cluster(
        &g.client,
        n,
        "team",
        json!({ "rbac": { "role": { "extraRules": [
            { "apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"] },
        ] } } }),
    )
    .await;
    let accepted = wait_condition(&g.client, n, "team", "SpecValid", "True", TIMEOUT).await;
    let valid = condition_message(&accepted, "SpecValid");
    assert_eq!(
        valid,
        format!("the spec can be applied, within VirtualClusterPolicy {n}-team"),
        "SpecValid names the governing policy"
    );

    let quotas: Api<ResourceQuota> = Api::namespaced(g.client.clone(), n);
    let network_policies: Api<NetworkPolicy> = Api::namespaced(g.client.clone(), n);
    let roles: Api<Role> = Api::namespaced(g.client.clone(), n);
    let namespaces: Api<Namespace> = Api::all(g.client.clone());
    wait::until("the policy's defaults applied", TIMEOUT, || async {
        let quota = quotas.get_opt("vc-team").await.map_err(|e| e.to_string())?;
        let pods = quota
            .and_then(|q| q.spec?.hard?.get("pods").cloned())
            .ok_or("no ResourceQuota vc-team (the policy requires one)")?;
        if pods.0 != "50" {
            return Err(format!("quota pods {pods:?}"));
        }
        network_policies
            .get_opt(&format!("vc-work-{}", "team"))
            .await
            .map_err(|e| e.to_string())?
            .ok_or("no NetworkPolicy vc-work-team (the policy's default)")?;
        let ns = namespaces.get(n).await.map_err(|e| e.to_string())?;
        let enforce = ns
            .metadata
            .labels
            .unwrap_or_default()
            .get("pod-security.kubernetes.io/enforce")
            .cloned();
        if enforce.as_deref() != Some("baseline") {
            return Err(format!("pod-security enforce label {enforce:?}"));
        }
        let role = roles
            .get_opt("vc-team")
            .await
            .map_err(|e| e.to_string())?
            .ok_or("no Role vc-team")?;
        let granted = role.rules.unwrap_or_default().iter().any(|r| {
            r.resources.as_deref() == Some(&["configmaps".to_string()][..]) && r.verbs == ["list"]
        });
        granted
            .then_some(())
            .ok_or("the allowed extra rule is not in Role vc-team".to_string())
    })
    .await;
    g.teardown().await;
}

/// Two policies selecting one VirtualCluster refuse it, naming both, until one of them is deleted.
#[tokio::test]
async fn overlapping_policies_refuse_naming_both_until_one_goes() {
    let g = Governed::start(
        "pol-overlap",
        &[("first", json!({})), ("second", json!({}))],
    )
    .await;
    let n = g.ns.name.as_str();
    create_virtual_cluster(&g.client, n, "torn", json!({})).await;
    let message = spec_refusal(&g.client, n, "torn").await;
    let both = format!("more than one VirtualClusterPolicy ({n}-first, {n}-second)");
    assert!(message.contains(&both), "{both:?} not in: {message}");
    let statefulsets: Api<StatefulSet> = Api::namespaced(g.client.clone(), n);
    assert!(
        statefulsets.get_opt("torn").await.unwrap().is_none(),
        "nothing applied under two policies"
    );

    // Deleting one is a policy change: the VirtualCluster is looked at again and accepted.
    delete(&g.policies(), &format!("{n}-second")).await;
    wait_condition(&g.client, n, "torn", "SpecValid", "True", TIMEOUT).await;
    g.teardown().await;
}

/// Editing a policy re-reconciles every VirtualCluster it governs.
#[tokio::test]
async fn a_policy_edit_re_reconciles_the_virtual_clusters_it_governs() {
    let g = Governed::start("pol-edit", &[("edited", json!({}))]).await;
    let n = g.ns.name.as_str();
    create_virtual_cluster(&g.client, n, "edited", json!({})).await;
    wait_condition(&g.client, n, "edited", "SpecValid", "True", TIMEOUT).await;

    // The admins narrow the policy: the VirtualCluster (k3s by default) no longer fits.
    let policy = format!("{n}-edited");
    merge_patch(
        &g.policies(),
        &policy,
        json!({ "spec": { "allowedDistros": ["k8s"] } }),
    )
    .await;
    let message = spec_refusal(&g.client, n, "edited").await;
    assert!(
        message.contains("k3s is not an allowed distro")
            && message.contains(&format!("VirtualClusterPolicy {policy}")),
        "{message}"
    );

    // And widened again: accepted again, without touching the VirtualCluster.
    merge_patch(
        &g.policies(),
        &policy,
        json!({ "spec": { "allowedDistros": ["k3s", "k8s"] } }),
    )
    .await;
    wait_condition(&g.client, n, "edited", "SpecValid", "True", TIMEOUT).await;
    g.teardown().await;
}

/// Bad policies are refused by the API server: unknown fields (strict field validation, as
/// `kubectl apply` sends) and selector expressions that cannot work.
#[tokio::test]
async fn malformed_policies_are_refused_by_the_api_server() {
    let client = bed().host().await;
    crd::install(&client).await;
    let ar = ApiResource::erase::<VirtualClusterPolicy>(&());
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    let name = format!("pol-bad-{}", std::process::id());
    let attempt = |spec: Value| {
        let api = api.clone();
        let name = name.clone();
        async move {
            let obj: DynamicObject = serde_json::from_value(json!({
                "apiVersion": "vnest.dev/v1alpha1", "kind": "VirtualClusterPolicy",
                "metadata": { "name": name }, "spec": spec,
            }))
            .unwrap();
            let mut params = PatchParams::apply("vnest-tests");
            params.field_validation = Some(kube::api::ValidationDirective::Strict);
            api.patch(&name, &params, &Patch::Apply(&obj))
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        }
    };
    let unknown = attempt(json!({
        "namespaceSelector": { "matchLabels": { SELECT: "none" } },
        "allowedDistro": ["k3s"],
    }))
    .await
    .expect_err("an unknown field is refused");
    // Server-side apply's wording for a field the structural schema does not declare.
    assert!(
        unknown.contains(".spec.allowedDistro: field not declared in schema"),
        "{unknown}"
    );
    let bad_distro = attempt(json!({
        "namespaceSelector": { "matchLabels": { SELECT: "none" } },
        "allowedDistros": ["minikube"],
    }))
    .await
    .expect_err("an unknown distro is refused");
    assert!(bad_distro.contains("allowedDistros"), "{bad_distro}");
    let bad_selector = attempt(json!({
        "namespaceSelector": { "matchExpressions": [{ "key": "tier", "operator": "In" }] },
    }))
    .await
    .expect_err("In without values is refused");
    assert!(
        bad_selector.contains("needs operator In or NotIn with values"),
        "{bad_selector}"
    );
    let defaults_template = attempt(json!({
        "namespaceSelector": { "matchLabels": { SELECT: "none" } },
        "defaults": { "template": { "name": "small" } },
    }))
    .await
    .expect_err("defaults naming a template are refused");
    assert!(
        defaults_template.contains("may not name a template"),
        "{defaults_template}"
    );
    // None of them exists.
    assert!(api.get_opt(&name).await.unwrap().is_none());
}

/// `examples/policies/*.yaml` are what the API server accepts under strict field validation
/// (a server-side dry run: a real policy selecting `vnest.dev/policy` labels is not left on the
/// shared bed).
#[tokio::test]
async fn the_example_policies_are_accepted_strictly() {
    let client = bed().host().await;
    crd::install(&client).await;
    let api: Api<DynamicObject> =
        Api::all_with(client, &ApiResource::erase::<VirtualClusterPolicy>(&()));
    let dir = vnest_tests::bed::repo_root().join("examples/policies");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let obj: DynamicObject = serde_yaml::from_str(&text).unwrap();
        let mut params = PatchParams::apply("vnest-tests");
        params.field_validation = Some(kube::api::ValidationDirective::Strict);
        params.dry_run = true;
        let name = obj.metadata.name.clone().unwrap();
        api.patch(&name, &params, &Patch::Apply(&obj))
            .await
            .unwrap_or_else(|e| panic!("{} refused: {e}", path.display()));
        seen += 1;
    }
    assert!(seen > 0, "no example in {}", dir.display());
}
