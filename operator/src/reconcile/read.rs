//! Step one: everything a reconcile decides from, read once. The caches answer; the few
//! fields they do not hold (the Service's cluster IP, the StatefulSet's replica counts, the
//! activity Lease's renewal) are read again only after the object changed.

use std::sync::Arc;

use k8s_openapi::{
    api::{coordination::v1::Lease, core::v1::Namespace},
    jiff::Timestamp,
};
use kube::{ResourceExt, core::PartialObjectMeta, runtime::reflector::ObjectRef};
use serde_json::Value;
use vnest_crds::{VirtualCluster, VirtualClusterPolicy, VirtualClusterTemplate, activity};

use super::context::Context;
use crate::{
    desired::ChildKind,
    error::{ApiError, Request},
};

/// What the caches say about one VirtualCluster's surroundings.
pub struct Observation {
    /// The template the spec names, when it names one that exists.
    pub template: Option<Arc<VirtualClusterTemplate>>,
    /// The VirtualCluster's namespace (its labels choose the policy).
    pub namespace: Option<Arc<PartialObjectMeta<Namespace>>>,
    pub policies: Vec<Arc<VirtualClusterPolicy>>,
    /// The last tenant activity the `<name>` activity Lease records.
    pub lease_activity: Option<Timestamp>,
    /// `(pods created, pods ready)` of the control plane StatefulSet, when it exists.
    pub statefulset: Option<(i32, i32)>,
    /// The `<name>` Service's cluster IP, once it has one.
    pub cluster_ip: Option<String>,
}

/// Reads what `vc`'s reconcile needs.
pub async fn read(ctx: &Context, vc: &VirtualCluster) -> Result<Observation, ApiError> {
    let namespace = vc.namespace().unwrap_or_default();
    let name = vc.name_any();
    let template = vc
        .spec
        .template
        .as_ref()
        .and_then(|t| ctx.templates.get(&ObjectRef::new(&t.name)));
    let lease_activity = content(
        ctx,
        ChildKind::Lease,
        &namespace,
        &activity::lease_name(&name),
    )
    .await?
    .and_then(|o| {
        let spec = serde_json::from_value(o["spec"].clone()).ok()?;
        activity::last_activity(&Lease {
            spec: Some(spec),
            ..Default::default()
        })
    });
    let cluster_ip = content(ctx, ChildKind::Service, &namespace, &name)
        .await?
        .and_then(|svc| svc["spec"]["clusterIP"].as_str().map(str::to_string))
        .filter(|ip| !ip.is_empty() && ip != "None");
    Ok(Observation {
        template,
        namespace: ctx.namespaces.get(&ObjectRef::new(&namespace)),
        policies: ctx.policies.state(),
        lease_activity,
        statefulset: statefulset_replicas(ctx, &namespace, &name).await?,
        cluster_ip,
    })
}

/// The fields a reconcile needs of child `kind` `name`, when the cache has it.
async fn content(
    ctx: &Context,
    kind: ChildKind,
    namespace: &str,
    name: &str,
) -> Result<Option<Value>, ApiError> {
    ctx.stores
        .content(&ctx.client, &ctx.metrics, kind, namespace, name)
        .await
        .request("read", || format!("{kind:?} {namespace}/{name}"))
}

/// `(pods created, pods ready)` of StatefulSet `name`, when it exists.
pub async fn statefulset_replicas(
    ctx: &Context,
    namespace: &str,
    name: &str,
) -> Result<Option<(i32, i32)>, ApiError> {
    let Some(sts) = content(ctx, ChildKind::StatefulSet, namespace, name).await? else {
        return Ok(None);
    };
    let status = &sts["status"];
    let number = |key: &str| status[key].as_i64().unwrap_or(0) as i32;
    Ok(Some((number("replicas"), number("readyReplicas"))))
}
