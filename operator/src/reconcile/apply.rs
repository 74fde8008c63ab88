//! Step three, the writes: the certificate Secret, the children, the namespace's labels and,
//! while asleep, the removal of the tenant's pods; the events saying so. Returns a
//! [`Written`], which only this step can make, for the status to report.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{Namespace, ObjectReference, Secret};
use kube::{
    Api, Resource, ResourceExt,
    api::{ObjectMeta, Patch, PatchParams, PostParams},
    runtime::{controller::Action, events::EventType},
};
use serde_json::{Value, json};
use tracing::{info, warn};
use vnest_crds::{VirtualCluster, meta};

use super::{
    context::Context,
    error::{ApplyError, Error},
    plan::{Enact, Plan, Step, Target},
    read,
};
use crate::{
    certs::Certs,
    children::{self, Applied, FIELD_MANAGER},
    conditions::{self, CONTROL_PLANE_READY, SPEC_VALID},
    desired::ChildKind,
    error::{ApiError, Request},
    lifecycle::{
        decide::{Decision, Desired, State},
        enact,
        reason::{DeleteReason, SleepReason},
    },
};

/// What the writes left for the status to report. Only [`apply`] makes one, so the status
/// cannot be computed before the writes it reports.
pub struct Written {
    pub endpoint: String,
    /// `(pods created, pods ready)` of the StatefulSet after the writes.
    pub statefulset: Option<(i32, i32)>,
    /// The lifecycle decision enacted; `None` when none was (invalid spec, failed apply).
    pub lifecycle: Option<Decision>,
    pub error: Option<ApplyError>,
    _sealed: (),
}

/// Writes what `plan` calls for; an auto-delete is [`auto_delete`]'s.
pub async fn apply(ctx: &Context, plan: &Plan) -> Result<Written, Error> {
    let vc = &plan.vc;
    let Step::Enact(enact) = &plan.step else {
        if let Step::Invalid(errors) = &plan.step {
            let message = errors.to_string();
            if conditions::find(vc.status.as_ref(), SPEC_VALID).is_none_or(|c| c.message != message)
            {
                ctx.event(vc, EventType::Warning, "InvalidSpec", "Validate", message)
                    .await;
            }
        }
        return Ok(Written {
            endpoint: vc
                .status
                .as_ref()
                .and_then(|s| s.endpoint.clone())
                .unwrap_or_default(),
            statefulset: plan.statefulset,
            lifecycle: None,
            error: None,
            _sealed: (),
        });
    };
    let (endpoint, mut error) =
        match ensure_certs(ctx, vc, &plan.names.certs_secret, &enact.sans).await {
            Err(err) => (String::new(), Some(err)),
            Ok(certs) => {
                let target = plan.target(&ctx.settings, enact, &certs);
                (
                    target.endpoint.clone(),
                    write_target(ctx, vc, &target).await.err(),
                )
            }
        };
    if error.is_none() && enact.asleep() {
        error = remove_tenant_pods(ctx, vc).await.err();
    }
    // Status tells only what was applied: a failed apply keeps the recorded lifecycle.
    let lifecycle = match &error {
        None => {
            report_transition(ctx, vc, enact).await;
            Some(enact.decision)
        }
        Some(err) => {
            let message = err.to_string();
            if conditions::find(vc.status.as_ref(), CONTROL_PLANE_READY)
                .is_none_or(|c| c.message != message)
            {
                ctx.event(vc, EventType::Warning, "ApplyFailed", "Apply", message)
                    .await;
            }
            None
        }
    };
    let namespace = vc.namespace().unwrap_or_default();
    Ok(Written {
        endpoint,
        statefulset: read::statefulset_replicas(ctx, &namespace, &plan.names.statefulset).await?,
        lifecycle,
        error,
        _sealed: (),
    })
}

fn child_reference(kind: ChildKind, namespace: &str, name: &str) -> ObjectReference {
    let ar = kind.api_resource();
    ObjectReference {
        api_version: Some(ar.api_version),
        kind: Some(ar.kind),
        name: Some(name.to_string()),
        namespace: (!kind.is_cluster_scoped()).then(|| namespace.to_string()),
        ..Default::default()
    }
}

/// Applies every child, removes the disabled ones and labels the namespace. Stops at the
/// first failure and returns it, naming the object.
async fn write_target(
    ctx: &Context,
    vc: &VirtualCluster,
    target: &Target,
) -> Result<(), ApplyError> {
    let namespace = vc.namespace().unwrap_or_default();
    for child in &target.state.children {
        let applied = children::apply(&ctx.client, &ctx.stores, &ctx.metrics, &namespace, child)
            .await
            .request("apply", || format!("{:?} {}", child.kind, child.name))?;
        let verb = match applied {
            Applied::Unchanged => continue,
            Applied::Created => "Created",
            Applied::Updated => "Updated",
        };
        let reference = child_reference(child.kind, &namespace, &child.name);
        let note = format!("{verb} {:?} {}", child.kind, child.name);
        ctx.event_about(vc, Some(reference), EventType::Normal, verb, "Apply", note)
            .await;
    }
    for (kind, name) in &target.state.absent {
        let removed = children::remove(
            &ctx.client,
            &ctx.stores,
            &ctx.metrics,
            &namespace,
            *kind,
            name,
        )
        .await
        .request("delete", || format!("{kind:?} {name}"))?;
        if removed {
            let reference = child_reference(*kind, &namespace, name);
            let note = format!("Deleted {kind:?} {name}: disabled in the spec");
            ctx.event_about(
                vc,
                Some(reference),
                EventType::Normal,
                "Deleted",
                "Delete",
                note,
            )
            .await;
        }
    }
    if let Some(body) = &target.namespace_labels {
        label_namespace(ctx, vc, body).await?;
    }
    Ok(())
}

/// Applies `body`, the Pod Security labels this VirtualCluster puts on its namespace (see
/// [`super::plan::namespace_labels`]).
pub async fn label_namespace(
    ctx: &Context,
    vc: &VirtualCluster,
    body: &Value,
) -> Result<(), ApiError> {
    let namespace = vc.namespace().unwrap_or_default();
    // A manager per VirtualCluster, so applying nothing removes exactly the labels this one set.
    let manager = format!("{FIELD_MANAGER}.{}", vc.name_any());
    Api::<Namespace>::all(ctx.client.clone())
        .patch(
            &namespace,
            &PatchParams::apply(&manager).force(),
            &Patch::Apply(body),
        )
        .await
        .request("label", || format!("Namespace {namespace}"))?;
    ctx.metrics.write("Namespace", "apply");
    Ok(())
}

/// While asleep: deletes the tenant's pods the syncer made, saying how many.
async fn remove_tenant_pods(ctx: &Context, vc: &VirtualCluster) -> Result<(), ApplyError> {
    let namespace = vc.namespace().unwrap_or_default();
    let name = vc.name_any();
    let removed = enact::remove_tenant_pods(&ctx.client, &ctx.metrics, &namespace, &name)
        .await
        .request("remove", || {
            format!("the tenant pods of VirtualCluster {name}")
        })?;
    if removed > 0 {
        let note = format!(
            "deleted {removed} tenant pod(s) while asleep; their volumes, Services and Secrets stay"
        );
        ctx.event(vc, EventType::Normal, "TenantPodsRemoved", "Sleep", note)
            .await;
    }
    Ok(())
}

/// Loads Secret `name`, creating it on first use, and reissues the serving certificate when
/// the names it must cover changed. Never regenerates the CA. Read each time rather than
/// cached: a thousand clusters' keys and certificates would be a large part of the
/// operator's memory.
async fn ensure_certs(
    ctx: &Context,
    vc: &VirtualCluster,
    name: &str,
    sans: &[String],
) -> Result<Certs, ApplyError> {
    let namespace = vc.namespace().unwrap_or_default();
    let cluster = format!("{namespace}/{}", vc.name_any());
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), &namespace);
    let object = || format!("Secret {name}");
    let invalid = |source| ApplyError::Certs {
        secret: name.to_string(),
        source,
    };
    ctx.metrics.read("Secret", "certificates");
    if let Some(secret) = api.get_opt(name).await.request("read", object)? {
        let certs =
            Certs::from_secret_data(name, &secret.data.unwrap_or_default()).map_err(invalid)?;
        let Some(reissued) = certs.with_server_sans(&cluster, sans).map_err(invalid)? else {
            return Ok(certs);
        };
        let patch = json!({ "data": reissued.to_secret_data() });
        api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .request("patch", object)?;
        ctx.metrics.write("Secret", "patch");
        let note = format!("serving certificate reissued for {}", sans.join(", "));
        ctx.event(
            vc,
            EventType::Normal,
            "CertificateReissued",
            "Reissue",
            note,
        )
        .await;
        return Ok(reissued);
    }
    let certs = Certs::generate(&cluster, sans).map_err(invalid)?;
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels: Some(BTreeMap::from([
                (
                    meta::LABEL_MANAGED_BY.to_string(),
                    meta::OPERATOR_MANAGER.to_string(),
                ),
                (meta::LABEL_INSTANCE.to_string(), vc.name_any()),
                (
                    meta::LABEL_COMPONENT.to_string(),
                    "certificates".to_string(),
                ),
                (meta::LABEL_VIRTUAL_CLUSTER.to_string(), vc.name_any()),
            ])),
            owner_references: Some(vc.controller_owner_ref(&()).into_iter().collect()),
            ..Default::default()
        },
        data: Some(certs.to_secret_data()),
        type_: Some("Opaque".into()),
        ..Default::default()
    };
    // Create, never apply: if another replica or an earlier reconcile got there first, use theirs.
    match api.create(&PostParams::default(), &secret).await {
        Err(kube::Error::Api(s)) if s.code == 409 => {
            let secret = api.get(name).await.request("read", object)?;
            Ok(Certs::from_secret_data(name, &secret.data.unwrap_or_default()).map_err(invalid)?)
        }
        created => {
            created.request("create", object)?;
            ctx.metrics.write("Secret", "create");
            let note = format!("Secret {name} with the cluster's CA and certificates");
            ctx.event(vc, EventType::Normal, "Created", "Create", note)
                .await;
            Ok(certs)
        }
    }
}

/// Counts, logs and publishes a sleep or wake the decision made. What this process last
/// reported wins over the status it read: a reconcile triggered by a child can run on a
/// cached object older than the status just written.
async fn report_transition(ctx: &Context, vc: &VirtualCluster, enact: &Enact) {
    let was_asleep = ctx
        .reported_asleep(vc)
        .unwrap_or(matches!(enact.previous, State::Asleep { .. }));
    let decision = &enact.decision;
    match (was_asleep, decision.desired) {
        (false, Desired::Asleep { reason, since }) => {
            ctx.metrics
                .sleeps
                .with_label_values(&[reason.as_str()])
                .inc();
            info!(reason = reason.as_str(), since = %since, "going to sleep");
            let verb = if reason == SleepReason::Paused {
                "Paused"
            } else {
                "Sleeping"
            };
            let note = format!("scaling to zero: {}", reason.as_str());
            ctx.event(vc, EventType::Normal, verb, "Sleep", note).await;
        }
        (true, Desired::Awake { .. }) => {
            let why = decision.woke_by.map_or("Unknown", |w| w.as_str());
            ctx.metrics.wakes.with_label_values(&[why]).inc();
            info!(reason = why, "waking up");
            let note = format!("scaling up: {why}");
            ctx.event(vc, EventType::Normal, "Waking", "Wake", note)
                .await;
        }
        _ => {}
    }
}

/// Deletes a VirtualCluster whose auto-delete moment came: a Warning event and a log line
/// with the reason first, then the delete (the finalizer cleans up as for any deletion).
pub async fn auto_delete(
    ctx: &Context,
    vc: &VirtualCluster,
    reason: DeleteReason,
    at: DateTime<Utc>,
) -> Result<Action, Error> {
    let field = match reason {
        DeleteReason::AfterCreation => "spec.autoDelete.afterCreation",
        DeleteReason::AfterInactivity => "spec.autoDelete.afterInactivity",
    };
    let object = || format!("VirtualCluster {}", vc.name_any());
    // The cached object may predate a delete this operator already sent.
    if !enact::still_live(&ctx.client, vc)
        .await
        .request("read", object)?
    {
        return Ok(Action::await_change());
    }
    let note = format!(
        "deleting the virtual cluster: {field} reached at {}",
        at.to_rfc3339()
    );
    warn!(reason = reason.as_str(), delete_at = %at, "{note}");
    ctx.event(vc, EventType::Warning, "AutoDelete", "Delete", note)
        .await;
    enact::delete_virtual_cluster(&ctx.client, &ctx.metrics, vc)
        .await
        .request("delete", object)?;
    ctx.metrics
        .auto_deletes
        .with_label_values(&[reason.as_str()])
        .inc();
    Ok(Action::await_change())
}
