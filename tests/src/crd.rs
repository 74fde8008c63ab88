//! Installing vnest's CRDs into the test bed, exactly as the chart ships them.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{
    Api, Client,
    api::{Patch, PatchParams},
};

use crate::{bed::repo_root, wait};

/// The CRDs from `charts/vnest/crds/`.
pub fn chart_crds() -> Vec<CustomResourceDefinition> {
    let path = repo_root().join("charts/vnest/crds/virtualclusters.yaml");
    let text = std::fs::read_to_string(&path).expect("chart CRD file");
    serde_yaml::Deserializer::from_str(&text)
        .map(|doc| serde::Deserialize::deserialize(doc).expect("CRD document"))
        .collect()
}

/// Applies the chart's CRDs and waits until the API server serves them.
pub async fn install(client: &Client) {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in chart_crds() {
        let name = crd.metadata.name.clone().expect("CRD name");
        api.patch(
            &name,
            &PatchParams::apply("vnest-tests").force(),
            &Patch::Apply(&crd),
        )
        .await
        .expect("apply CRD");
        wait::until(
            &format!("CRD {name} Established"),
            Duration::from_secs(30),
            || async {
                let crd = api.get(&name).await.map_err(|e| e.to_string())?;
                let established = crd
                    .status
                    .and_then(|s| s.conditions)
                    .unwrap_or_default()
                    .iter()
                    .any(|c| c.type_ == "Established" && c.status == "True");
                if established {
                    Ok(())
                } else {
                    Err("not established".to_string())
                }
            },
        )
        .await;
    }
}
