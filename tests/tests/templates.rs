//! VirtualClusterTemplates on the real API server: a shipped template is accepted strictly, a
//! VirtualCluster naming it is reconciled as the rendered spec with its own fields on top and
//! records the template version, a template change rolls forward, and a missing template or
//! parameter is a `SpecValid=False` naming the field with nothing applied.

use std::time::Duration;

use k8s_openapi::api::{apps::v1::StatefulSet, core::v1::ResourceQuota};
use kube::{
    Api, Client,
    api::{DeleteParams, Patch, PatchParams, ValidationDirective},
};
use serde_json::json;
use vnest_crds::{VirtualCluster, VirtualClusterTemplate};
use vnest_tests::{
    bed::repo_root,
    fixtures::{create_virtual_cluster, provide_data_volume, setup, spec_refusal, wait_condition},
    tenant::merge_patch,
    wait,
};

/// `examples/templates/<file>` applied strictly under `name` (templates are cluster-scoped,
/// so each test run uses its own).
async fn apply_shipped_template(client: &Client, file: &str, name: &str) -> VirtualClusterTemplate {
    let path = repo_root().join("examples/templates").join(file);
    let mut template: VirtualClusterTemplate =
        serde_yaml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    template.metadata.name = Some(name.to_string());
    let mut params = PatchParams::apply("vnest-tests");
    params.field_validation = Some(ValidationDirective::Strict);
    Api::<VirtualClusterTemplate>::all(client.clone())
        .patch(name, &params, &Patch::Apply(&template))
        .await
        .unwrap_or_else(|e| panic!("{file} refused: {e}"))
}

fn hard(quota: &ResourceQuota, key: &str) -> String {
    quota.spec.as_ref().unwrap().hard.as_ref().unwrap()[key]
        .0
        .clone()
}

/// A templated VirtualCluster renders, rolls forward on template changes and reports bad references.
#[tokio::test]
async fn a_templated_virtual_cluster_renders_rolls_forward_and_reports_bad_references() {
    let (client, ns, _operator) = setup("tmpl").await;
    let n = ns.name.as_str();
    let small = format!("small-{n}");
    let templates: Api<VirtualClusterTemplate> = Api::all(client.clone());
    let template = apply_shipped_template(&client, "small.yaml", &small).await;

    provide_data_volume(&client, n, "dev").await;
    create_virtual_cluster(
        &client,
        n,
        "dev",
        json!({
            "template": { "name": small, "parameters": { "team": "alpha" } },
            // The user's own value wins over the template's 20 pods.
            "policies": { "resourceQuota": { "quota": { "pods": "7" } } },
        }),
    )
    .await;
    let ready = wait_condition(&client, n, "dev", "Ready", "True", Duration::from_secs(90)).await;
    let recorded = ready.status.unwrap().template.expect("status.template");
    assert_eq!(recorded.name, small);
    assert_eq!(Some(recorded.generation), template.metadata.generation);
    let quotas: Api<ResourceQuota> = Api::namespaced(client.clone(), n);
    let quota = quotas.get("vc-dev").await.expect("the template's quota");
    assert_eq!(hard(&quota, "requests.cpu"), "4");
    assert_eq!(hard(&quota, "pods"), "7");
    let sts = Api::<StatefulSet>::namespaced(client.clone(), n)
        .get("dev")
        .await
        .unwrap();
    let pod_labels = sts.spec.template.metadata.unwrap().labels.unwrap();
    assert_eq!(
        pod_labels["team"], "alpha",
        "the parameter reached the pods"
    );

    // Editing the template rolls forward: a new quota and the new generation on record.
    let mut body = template.spec.template.clone();
    body = body.replace("requests.cpu: \"4\"", "requests.cpu: \"6\"");
    assert_ne!(body, template.spec.template, "the test edits the template");
    let edited = merge_patch(&templates, &small, json!({ "spec": { "template": body } })).await;
    wait::until(
        "the quota follows the template",
        Duration::from_secs(30),
        || async {
            let quota = quotas.get("vc-dev").await.map_err(|e| e.to_string())?;
            let vc = Api::<VirtualCluster>::namespaced(client.clone(), n)
                .get("dev")
                .await
                .map_err(|e| e.to_string())?;
            let generation = vc.status.and_then(|s| s.template).map(|t| t.generation);
            if hard(&quota, "requests.cpu") == "6" && generation == edited.metadata.generation {
                Ok(())
            } else {
                Err(format!("{} {generation:?}", hard(&quota, "requests.cpu")))
            }
        },
    )
    .await;

    // A required parameter left out, and a template that does not exist: nothing applied.
    create_virtual_cluster(
        &client,
        n,
        "noteam",
        json!({ "template": { "name": small } }),
    )
    .await;
    let message = spec_refusal(&client, n, "noteam").await;
    assert!(
        message.starts_with("spec.template.parameters.team: required"),
        "{message}"
    );
    create_virtual_cluster(
        &client,
        n,
        "ghost",
        json!({ "template": { "name": "no-such" } }),
    )
    .await;
    let message = spec_refusal(&client, n, "ghost").await;
    assert!(message.contains("spec.template.name"), "{message}");
    let statefulsets: Api<StatefulSet> = Api::namespaced(client.clone(), n);
    for name in ["noteam", "ghost"] {
        assert!(
            statefulsets.get_opt(name).await.unwrap().is_none(),
            "{name} applied nothing"
        );
    }

    let _ = templates.delete(&small, &DeleteParams::default()).await;
    ns.delete(&client).await;
}
