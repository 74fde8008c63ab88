//! On deletion: what owner references cannot remove (cluster-scoped objects, and what the
//! syncer made on the host), after the syncer has stopped.

use std::collections::BTreeMap;

use k8s_openapi::api::{
    apps::v1::StatefulSet,
    core::v1::{ConfigMap, Endpoints, PersistentVolumeClaim, Pod, Secret, Service, ServiceAccount},
    networking::v1::{Ingress, NetworkPolicy},
    policy::v1::PodDisruptionBudget,
    scheduling::v1::PriorityClass,
};
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, DynamicObject, ListParams},
    core::ApiResource,
    runtime::{controller::Action, reflector::ObjectRef},
};
use tracing::info;
use vnest_crds::{VirtualCluster, meta, meta::ChildNames};

use super::{
    apply::label_namespace, context::Context, error::Error, plan::namespace_labels,
    status::report_terminating,
};
use crate::{children::unless_gone, desired::ChildKind, error::Request};

/// Host objects the syncer creates for a virtual cluster (label `vcluster.loft.sh/managed-by`),
/// removed with it.
fn syncer_made_kinds() -> [ApiResource; 10] {
    [
        ApiResource::erase::<Pod>(&()),
        ApiResource::erase::<Service>(&()),
        ApiResource::erase::<Endpoints>(&()),
        ApiResource::erase::<ConfigMap>(&()),
        ApiResource::erase::<Secret>(&()),
        ApiResource::erase::<PersistentVolumeClaim>(&()),
        ApiResource::erase::<ServiceAccount>(&()),
        ApiResource::erase::<Ingress>(&()),
        ApiResource::erase::<NetworkPolicy>(&()),
        ApiResource::erase::<PodDisruptionBudget>(&()),
    ]
}

pub async fn cleanup(ctx: &Context, vc: &VirtualCluster) -> Result<Action, Error> {
    let namespace = vc.namespace().unwrap_or_default();
    let name = vc.name_any();
    let names = ChildNames::new(&namespace, &name, None);
    report_terminating(ctx, vc).await?;

    for kind in [ChildKind::ClusterRoleBinding, ChildKind::ClusterRole] {
        let api: Api<DynamicObject> = Api::all_with(ctx.client.clone(), &kind.api_resource());
        let deleted = api
            .delete(&names.cluster_role, &DeleteParams::background())
            .await;
        if unless_gone(deleted).request("delete", || format!("{kind:?} {}", names.cluster_role))? {
            ctx.metrics.write(&format!("{kind:?}"), "delete");
        }
    }
    // PriorityClasses the syncer copied to the host (toHost.priorityclasses): cluster-scoped,
    // so scoped by the VirtualCluster's namespace beside its name.
    let classes: Api<PriorityClass> = Api::all(ctx.client.clone());
    let class_selector = ListParams::default().labels(&format!(
        "{}={name},{}={namespace}",
        meta::LABEL_SYNCER_MANAGED_BY,
        meta::LABEL_VIRTUAL_CLUSTER_NAMESPACE
    ));
    let deleted = classes
        .delete_collection(&DeleteParams::background(), &class_selector)
        .await;
    if unless_gone(deleted).request("delete", || {
        format!("the PriorityClasses of VirtualCluster {name}")
    })? {
        ctx.metrics.write("PriorityClass", "deletecollection");
    }
    stop_control_plane(ctx, &namespace, &names.statefulset).await?;
    let selector =
        ListParams::default().labels(&format!("{}={name}", meta::LABEL_SYNCER_MANAGED_BY));
    for ar in syncer_made_kinds() {
        let api: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), &namespace, &ar);
        let deleted = api
            .delete_collection(&DeleteParams::background(), &selector)
            .await;
        if unless_gone(deleted).request("delete", || {
            format!("the syncer's {} objects of VirtualCluster {name}", ar.kind)
        })? {
            ctx.metrics.write(&ar.kind, "deletecollection");
        }
    }
    let current = ctx.namespaces.get(&ObjectRef::new(&namespace));
    if let Some(body) = namespace_labels(&namespace, &name, current.as_deref(), &BTreeMap::new()) {
        label_namespace(ctx, vc, &body).await?;
    }
    ctx.record_phase(ObjectRef::from_obj(vc), None);
    info!("cleaned up cluster-scoped and syncer-made objects");
    Ok(Action::await_change())
}

/// Deletes the control plane's StatefulSet and fails (so the finalizer stays and the cleanup is
/// retried) until its pod is gone: the syncer runs in that pod and would recreate whatever
/// the cleanup removes while it lives.
async fn stop_control_plane(
    ctx: &Context,
    namespace: &str,
    statefulset: &str,
) -> Result<(), Error> {
    let statefulsets: Api<StatefulSet> = Api::namespaced(ctx.client.clone(), namespace);
    let deleted = statefulsets
        .delete(statefulset, &DeleteParams::background())
        .await;
    if unless_gone(deleted).request("delete", || format!("StatefulSet {statefulset}"))? {
        ctx.metrics.write("StatefulSet", "delete");
    }
    let pod = format!("{statefulset}-0");
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), namespace);
    // A list (which the chart's RBAC grants for the cleanup), not a get.
    let running = pods
        .list_metadata(&ListParams::default().fields(&format!("metadata.name={pod}")))
        .await
        .request("list", || format!("Pod {pod}"))?;
    if !running.items.is_empty() {
        return Err(Error::SyncerRunning {
            namespace: namespace.to_string(),
            pod,
        });
    }
    Ok(())
}
