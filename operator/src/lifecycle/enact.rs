//! The API side of a lifecycle decision: what sleeping removes from the host, and
//! auto-delete. (Scaling the StatefulSet is part of the desired state.)

use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, ListParams, Preconditions},
};
use vnest_crds::{VirtualCluster, meta};

use crate::{children::unless_gone, metrics::Metrics};

/// Deletes the tenant's workload pods the syncer made on the host (label
/// `vcluster.loft.sh/managed-by=<name>`); PVCs, Services and Secrets stay, and the syncer
/// recreates the pods from the virtual cluster on waking. Returns how many were deleted.
pub async fn remove_tenant_pods(
    client: &Client,
    metrics: &Metrics,
    namespace: &str,
    name: &str,
) -> Result<usize, kube::Error> {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let selector =
        ListParams::default().labels(&format!("{}={name}", meta::LABEL_SYNCER_MANAGED_BY));
    let pods = api.list_metadata(&selector).await?;
    let live = pods
        .items
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .count();
    if live > 0 {
        api.delete_collection(&DeleteParams::background(), &selector)
            .await?;
        metrics.write("Pod", "deletecollection");
    }
    Ok(live)
}

/// Whether `vc` (this UID) still exists and is not being deleted, read from the API server.
pub async fn still_live(client: &Client, vc: &VirtualCluster) -> Result<bool, kube::Error> {
    let api: Api<VirtualCluster> =
        Api::namespaced(client.clone(), &vc.namespace().unwrap_or_default());
    let current = api.get_metadata_opt(&vc.name_any()).await?;
    Ok(current
        .is_some_and(|c| c.metadata.uid == vc.uid() && c.metadata.deletion_timestamp.is_none()))
}

/// Deletes `vc` itself, only if it is still the object the decision was about (same UID).
pub async fn delete_virtual_cluster(
    client: &Client,
    metrics: &Metrics,
    vc: &VirtualCluster,
) -> Result<(), kube::Error> {
    let api: Api<VirtualCluster> =
        Api::namespaced(client.clone(), &vc.namespace().unwrap_or_default());
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: vc.uid(),
            resource_version: None,
        }),
        ..DeleteParams::background()
    };
    if unless_gone(api.delete(&vc.name_any(), &params).await)? {
        metrics.write("VirtualCluster", "delete");
    }
    Ok(())
}
