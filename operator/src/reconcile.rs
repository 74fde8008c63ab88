//! The VirtualCluster controller: validate, make sure the PKI exists, apply the desired state,
//! report status and events; on deletion, remove what owner references cannot.

use std::{
    collections::{BTreeMap, HashMap},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use chrono::{DateTime, Utc};
use futures::{
    FutureExt, StreamExt,
    future::{BoxFuture, Shared},
};
use k8s_openapi::{
    api::{
        coordination::v1::Lease,
        core::v1::{Namespace, ObjectReference, Secret},
    },
    apimachinery::pkg::apis::meta::v1::Time,
    jiff::Timestamp,
};
use kube::{
    Api, Client, Resource, ResourceExt,
    api::{DeleteParams, DynamicObject, ListParams, ObjectMeta, Patch, PatchParams, PostParams},
    core::{ApiResource, PartialObjectMeta},
    runtime::{
        Controller, WatchStreamExt,
        controller::Action,
        events::{Event, EventType, Recorder},
        finalizer::{Event as Finalizer, finalizer},
        reflector::{self, ObjectRef, Store},
        watcher,
    },
};
use serde_json::json;
use tracing::{Instrument, info, info_span, warn};
use vnest_crds::{
    Phase, RenderedTemplate, VirtualCluster, VirtualClusterPolicy, VirtualClusterStatus,
    VirtualClusterTemplate, activity, meta,
};

use crate::{
    certs::Certs,
    children::{self, Applied, ChildStores, FIELD_MANAGER},
    conditions,
    desired::{self, ChildKind, Input},
    lifecycle::{
        decide::{self, Decision, Desired, Policy, State},
        enact, facts,
        reason::{DeleteReason, SleepReason},
    },
    metrics::{Metrics, Readiness},
    settings::Settings,
    status::{self, Observed},
    template, validate, wake,
};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error(transparent)]
    Certs(#[from] crate::certs::CertError),
    #[error("{0}")]
    Apply(String),
    #[error("finalizer: {0}")]
    Finalizer(String),
}

/// Host objects the syncer creates for a virtual cluster (label `vcluster.loft.sh/managed-by`),
/// removed with it.
fn syncer_made_kinds() -> Vec<ApiResource> {
    use k8s_openapi::api::{
        core::v1::{ConfigMap, Endpoints, PersistentVolumeClaim, Pod, Service, ServiceAccount},
        networking::v1::{Ingress, NetworkPolicy},
        policy::v1::PodDisruptionBudget,
    };
    vec![
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

pub struct Context {
    pub client: Client,
    pub settings: Settings,
    pub metrics: Metrics,
    stores: ChildStores,
    namespaces: Store<PartialObjectMeta<Namespace>>,
    templates: Store<VirtualClusterTemplate>,
    policies: Store<VirtualClusterPolicy>,
    /// Resolves once every cache has finished its first list. Shared, because a store's own
    /// `wait_until_ready` wakes only the last of several concurrent waiters.
    caches_ready: Shared<BoxFuture<'static, ()>>,
    recorder: Recorder,
    /// Consecutive failures per VirtualCluster, for backoff.
    failures: Mutex<HashMap<ObjectRef<VirtualCluster>, u32>>,
    /// Last phase and sleep reason per VirtualCluster, for the by-phase and sleeping gauges.
    phases: Mutex<HashMap<ObjectRef<VirtualCluster>, Reported>>,
}

/// What a VirtualCluster's status last said: its phase and, while asleep, why.
type Reported = (Phase, Option<String>);

/// Sets a gauge to the number of entries per label, clearing labels that have none.
fn set_counts<'a>(gauge: &prometheus::IntGaugeVec, labels: impl Iterator<Item = &'a str>) {
    let mut counts: BTreeMap<&str, i64> = BTreeMap::new();
    for label in labels {
        *counts.entry(label).or_default() += 1;
    }
    gauge.reset();
    for (label, n) in counts {
        gauge.with_label_values(&[label]).set(n);
    }
}

impl Context {
    /// Records the phase and sleep reason `status` reports, or forgets them when `None`.
    fn record_phase(&self, key: ObjectRef<VirtualCluster>, status: Option<&VirtualClusterStatus>) {
        let mut phases = self.phases.lock().unwrap_or_else(|e| e.into_inner());
        match status.and_then(|s| s.phase) {
            Some(phase) => {
                let sleeping = conditions::find(status, conditions::SLEEPING)
                    .filter(|c| c.status == "True")
                    .map(|c| c.reason.clone());
                phases.insert(key, (phase, sleeping))
            }
            None => phases.remove(&key),
        };
        let names: Vec<String> = phases.values().map(|(p, _)| format!("{p:?}")).collect();
        set_counts(
            &self.metrics.virtual_clusters,
            names.iter().map(String::as_str),
        );
        set_counts(
            &self.metrics.sleeping,
            phases.values().filter_map(|(_, r)| r.as_deref()),
        );
    }

    async fn event(
        &self,
        vc: &VirtualCluster,
        type_: EventType,
        reason: &str,
        action: &str,
        note: String,
    ) {
        self.event_about(vc, None, type_, reason, action, note)
            .await;
    }

    /// An event on `vc` naming the child it concerns, so events about different children are
    /// not folded into one series.
    async fn event_about(
        &self,
        vc: &VirtualCluster,
        child: Option<ObjectReference>,
        type_: EventType,
        reason: &str,
        action: &str,
        note: String,
    ) {
        let event = Event {
            type_,
            reason: reason.into(),
            note: Some(note),
            action: action.into(),
            secondary: child,
        };
        if let Err(err) = self.recorder.publish(&event, &vc.object_ref(&())).await {
            warn!(error = %err, "failed to publish event");
        } else {
            self.metrics.write("Event", "create");
        }
    }
}

/// Loads `<name>-certs`, creating it on first use, and reissues the serving certificate when
/// the names it must cover changed. Never regenerates the CA.
async fn ensure_certs(
    ctx: &Context,
    vc: &VirtualCluster,
    input_names: &vnest_crds::meta::ChildNames,
    sans: &[String],
) -> Result<Certs, Error> {
    let namespace = vc.namespace().unwrap_or_default();
    let name = &input_names.certs_secret;
    let cluster = format!("{namespace}/{}", vc.name_any());
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), &namespace);
    // Read each time rather than cached: a thousand clusters' keys and certificates would
    // be a large part of the operator's memory.
    ctx.metrics.read("Secret", "certificates");
    let existing = api.get_opt(name).await?;
    if let Some(secret) = existing {
        let certs = Certs::from_secret_data(name, &secret.data.unwrap_or_default())?;
        if let Some(reissued) = certs.with_server_sans(&cluster, sans)? {
            let patch = json!({ "data": reissued.to_secret_data() });
            api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
            ctx.metrics.write("Secret", "patch");
            ctx.event(
                vc,
                EventType::Normal,
                "CertificateReissued",
                "Reissue",
                format!("serving certificate reissued for {}", sans.join(", ")),
            )
            .await;
            return Ok(reissued);
        }
        return Ok(certs);
    }
    let certs = Certs::generate(&cluster, sans)?;
    let owner = vc.controller_owner_ref(&()).into_iter().collect();
    let mut labels = BTreeMap::from([
        (
            meta::LABEL_MANAGED_BY.to_string(),
            meta::OPERATOR_MANAGER.to_string(),
        ),
        (meta::LABEL_INSTANCE.to_string(), vc.name_any()),
        (
            meta::LABEL_COMPONENT.to_string(),
            "certificates".to_string(),
        ),
    ]);
    labels.insert(meta::LABEL_VIRTUAL_CLUSTER.to_string(), vc.name_any());
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            labels: Some(labels),
            owner_references: Some(owner),
            ..Default::default()
        },
        data: Some(certs.to_secret_data()),
        type_: Some("Opaque".into()),
        ..Default::default()
    };
    // Create, never apply: if another replica or an earlier reconcile got there first, use theirs.
    match api.create(&PostParams::default(), &secret).await {
        Ok(_) => {
            ctx.metrics.write("Secret", "create");
            ctx.event(
                vc,
                EventType::Normal,
                "Created",
                "Create",
                format!("Secret {name} with the cluster's CA and certificates"),
            )
            .await;
            Ok(certs)
        }
        Err(kube::Error::Api(s)) if s.code == 409 => {
            let secret = api.get(name).await?;
            Ok(Certs::from_secret_data(
                name,
                &secret.data.unwrap_or_default(),
            )?)
        }
        Err(err) => Err(err.into()),
    }
}

async fn write_status(
    ctx: &Context,
    vc: &VirtualCluster,
    status: VirtualClusterStatus,
) -> Result<(), Error> {
    if vc.status.as_ref() == Some(&status) {
        return Ok(());
    }
    let api: Api<VirtualCluster> =
        Api::namespaced(ctx.client.clone(), &vc.namespace().unwrap_or_default());
    let body = json!({ "apiVersion": VirtualCluster::api_version(&()), "kind": VirtualCluster::kind(&()), "status": status });
    api.patch_status(
        &vc.name_any(),
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&body),
    )
    .await?;
    ctx.metrics.write("VirtualCluster", "status");
    Ok(())
}

/// Sets or clears the Pod Security labels this VirtualCluster put on its namespace.
async fn apply_namespace_labels(
    ctx: &Context,
    vc: &VirtualCluster,
    labels: &BTreeMap<String, String>,
) -> Result<(), Error> {
    let namespace = vc.namespace().unwrap_or_default();
    let name = vc.name_any();
    let current = ctx.namespaces.get(&ObjectRef::new(&namespace));
    let current_labels = current
        .as_ref()
        .map(|n| n.labels().clone())
        .unwrap_or_default();
    let owned_by_us = current
        .as_ref()
        .and_then(|n| {
            n.annotations()
                .get(meta::ANNOTATION_POD_SECURITY_FROM)
                .cloned()
        })
        .is_some_and(|v| v == name);
    let up_to_date = labels.iter().all(|(k, v)| current_labels.get(k) == Some(v));
    // Several VirtualClusters may share a namespace: labels already right are left alone
    // whoever set them, and only the one that set them takes them away.
    if (labels.is_empty() && !owned_by_us) || (!labels.is_empty() && up_to_date) {
        return Ok(());
    }
    let annotations = if labels.is_empty() {
        json!({})
    } else {
        json!({ meta::ANNOTATION_POD_SECURITY_FROM: name })
    };
    let body = json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": namespace, "labels": labels, "annotations": annotations } });
    // A manager per VirtualCluster, so applying nothing removes exactly the labels this one set.
    let manager = format!("{FIELD_MANAGER}.{name}");
    Api::<Namespace>::all(ctx.client.clone())
        .patch(
            &namespace,
            &PatchParams::apply(&manager).force(),
            &Patch::Apply(&body),
        )
        .await?;
    ctx.metrics.write("Namespace", "apply");
    Ok(())
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

async fn statefulset_replicas(
    ctx: &Context,
    namespace: &str,
    name: &str,
) -> Result<Option<(i32, i32)>, kube::Error> {
    let Some(sts) = ctx
        .stores
        .content(
            &ctx.client,
            &ctx.metrics,
            ChildKind::StatefulSet,
            namespace,
            name,
        )
        .await?
    else {
        return Ok(None);
    };
    let status = &sts["status"];
    let number = |key: &str| status[key].as_i64().unwrap_or(0) as i32;
    Ok(Some((number("replicas"), number("readyReplicas"))))
}

/// Makes sure the PKI exists, then applies every child and removes the disabled ones.
/// Stops at the first failure and returns it, naming the object.
async fn apply_children(
    ctx: &Context,
    vc: &VirtualCluster,
    names: &vnest_crds::meta::ChildNames,
    observed: &mut Observed,
    replicas: i32,
    wake: Option<crate::settings::WakeEndpoint>,
) -> Result<(), String> {
    let namespace = vc.namespace().unwrap_or_default();
    let name = vc.name_any();
    let spec = &vc.spec;
    let cluster_ip = ctx
        .stores
        .content(
            &ctx.client,
            &ctx.metrics,
            ChildKind::Service,
            &namespace,
            &names.service,
        )
        .await
        .map_err(|err| format!("reading Service {}: {err}", names.service))?
        .and_then(|svc| svc["spec"]["clusterIP"].as_str().map(str::to_string))
        .filter(|ip| !ip.is_empty() && ip != "None");
    let sans = desired::server_sans(
        &namespace,
        &name,
        spec,
        &ctx.settings.cluster_domain,
        cluster_ip.as_deref(),
    );
    let certs = ensure_certs(ctx, vc, names, &sans)
        .await
        .map_err(|err| format!("preparing Secret {}: {err}", names.certs_secret))?;
    let uid = vc.uid().unwrap_or_default();
    let input = Input {
        namespace: &namespace,
        name: &name,
        uid: &uid,
        spec,
        settings: &ctx.settings,
        certs: &certs,
        replicas,
        wake,
    };
    observed.endpoint = desired::endpoint(&input);
    let state = desired::desired_state(&input);

    let mut apply_error = None;
    for child in &state.children {
        match children::apply(&ctx.client, &ctx.stores, &ctx.metrics, &namespace, child).await {
            Ok(Applied::Unchanged) => {}
            Ok(applied) => {
                let verb = if applied == Applied::Created {
                    "Created"
                } else {
                    "Updated"
                };
                let reference = child_reference(child.kind, &namespace, &child.name);
                let note = format!("{verb} {:?} {}", child.kind, child.name);
                ctx.event_about(vc, Some(reference), EventType::Normal, verb, "Apply", note)
                    .await;
            }
            Err(err) => {
                apply_error = Some(format!("applying {:?} {}: {err}", child.kind, child.name));
                break;
            }
        }
    }
    if apply_error.is_none() {
        for (kind, child_name) in &state.absent {
            match children::remove(
                &ctx.client,
                &ctx.stores,
                &ctx.metrics,
                &namespace,
                *kind,
                child_name,
            )
            .await
            {
                Ok(true) => {
                    let reference = child_reference(*kind, &namespace, child_name);
                    let note = format!("Deleted {kind:?} {child_name}: disabled in the spec");
                    ctx.event_about(
                        vc,
                        Some(reference),
                        EventType::Normal,
                        "Deleted",
                        "Delete",
                        note,
                    )
                    .await
                }
                Ok(false) => {}
                Err(err) => {
                    apply_error = Some(format!("deleting {kind:?} {child_name}: {err}"));
                    break;
                }
            }
        }
    }
    if apply_error.is_none()
        && let Err(err) = apply_namespace_labels(ctx, vc, &state.namespace_labels).await
    {
        apply_error = Some(format!("labelling namespace {namespace}: {err}"));
    }
    apply_error.map_or(Ok(()), Err)
}

/// `vc` with the spec its template renders under its own fields, and which template version
/// that was; `Ok(None)` when it names no template.
fn with_template(
    ctx: &Context,
    vc: &VirtualCluster,
) -> Result<Option<(VirtualCluster, RenderedTemplate)>, String> {
    let Some(reference) = &vc.spec.template else {
        return Ok(None);
    };
    let template = ctx
        .templates
        .get(&ObjectRef::new(&reference.name))
        .ok_or_else(|| {
            format!(
                "spec.template.name: VirtualClusterTemplate {:?} does not exist; create it or name \
                 one of `kubectl get virtualclustertemplates`",
                reference.name
            )
        })?;
    let namespace = vc.namespace().unwrap_or_default();
    let rendered = template::render(&template, &vc.name_any(), &namespace, &reference.parameters)?;
    let mut effective = vc.clone();
    effective.spec = template::effective_spec(vc, rendered)?;
    let from = RenderedTemplate {
        name: reference.name.clone(),
        generation: template.metadata.generation.unwrap_or_default(),
    };
    Ok(Some((effective, from)))
}

/// `vc` with the defaults of the VirtualClusterPolicy selecting its namespace, and that
/// policy; `Ok(None)` when none does (the operator's flags alone then apply).
fn with_policy(
    ctx: &Context,
    vc: &VirtualCluster,
) -> Result<Option<(VirtualCluster, Arc<VirtualClusterPolicy>)>, String> {
    let namespace = vc.namespace().unwrap_or_default();
    let labels = ctx
        .namespaces
        .get(&ObjectRef::new(&namespace))
        .map(|ns| ns.labels().clone())
        .unwrap_or_default();
    let policies = ctx.policies.state();
    let Some(governing) = crate::policy::governing(&policies, &namespace, &labels)? else {
        return Ok(None);
    };
    let mut effective = vc.clone();
    effective.spec = crate::policy::with_defaults(governing, &vc.spec)?;
    let governing = policies
        .iter()
        .find(|p| std::ptr::eq(p.as_ref(), governing))
        .cloned()
        .unwrap_or_else(|| Arc::new(governing.clone()));
    Ok(Some((effective, governing)))
}

async fn apply_all(original: &VirtualCluster, ctx: &Context) -> Result<Action, Error> {
    let templated = with_template(ctx, original);
    let (templated, template_error, rendered_from) = match &templated {
        Ok(Some((effective, from))) => (effective, None, Some(from.clone())),
        Ok(None) => (original, None, None),
        Err(message) => (original, Some(message.clone()), None),
    };
    // The policy's defaults go under the template's and the VirtualCluster's own fields.
    let governed = match template_error {
        None => with_policy(ctx, templated),
        Some(_) => Ok(None),
    };
    let (vc, policy_error, governing) = match &governed {
        Ok(Some((effective, policy))) => (effective, None, Some(policy.clone())),
        Ok(None) => (templated, None, None),
        Err(message) => (templated, Some(message.clone()), None),
    };
    // A template that cannot be used leaves the version last rendered on record; a policy
    // refusing the rendered spec does not.
    let template_failed = template_error.is_some();
    let template_error = template_error.or(policy_error);
    let namespace = vc.namespace().unwrap_or_default();
    let name = vc.name_any();
    let spec = &vc.spec;
    let names = vnest_crds::meta::ChildNames::new(
        &namespace,
        &name,
        spec.export_kubeconfig.secret.name.as_deref(),
    );
    let mut observed = Observed {
        policy: governing.as_ref().map(|p| p.name_any()),
        generation: vc.metadata.generation,
        distro: spec.control_plane.distro.selected().0.as_str().to_string(),
        kubeconfig_secret: names.kubeconfig_secret.clone(),
        ..Default::default()
    };

    let spec_error = template_error.or_else(|| {
        let mut errors = validate::validate_name(&name).err().unwrap_or_default();
        errors.extend(
            validate::validate(spec, &namespace)
                .err()
                .unwrap_or_default(),
        );
        // A policy names the extra rules it allows, for the namespaces it selects; elsewhere
        // the operator's flag decides.
        match &governing {
            Some(policy) => errors.extend(crate::policy::check(policy, spec)),
            None => errors.extend(validate::guardrails(spec, ctx.settings.allow_extra_rules)),
        }
        (!errors.is_empty()).then(|| {
            errors
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        })
    });
    if let Some(message) = spec_error {
        observed.spec_error = Some(message.clone());
        let previous = conditions::find(vc.status.as_ref(), conditions::SPEC_VALID);
        if previous.is_none_or(|c| c.message != message) {
            ctx.event(vc, EventType::Warning, "InvalidSpec", "Validate", message)
                .await;
        }
        observed.endpoint = vc
            .status
            .as_ref()
            .and_then(|s| s.endpoint.clone())
            .unwrap_or_default();
        observed.statefulset = statefulset_replicas(ctx, &namespace, &names.statefulset).await?;
        let mut new_status = status::compute(vc.status.as_ref(), &observed, Time(Timestamp::now()));
        // A template that cannot be used leaves the version last rendered on record.
        if !template_failed {
            new_status.template = rendered_from.clone();
        }
        ctx.record_phase(ObjectRef::from_obj(vc), Some(&new_status));
        write_status(ctx, vc, new_status).await?;
        return Ok(Action::await_change());
    }

    let now = facts::now();
    let lease_activity = ctx
        .stores
        .content(
            &ctx.client,
            &ctx.metrics,
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
    let facts = facts::facts(vc, lease_activity);
    let policy = Policy::from_spec(spec).map_err(Error::Apply)?;
    let decision = decide::decide(&policy, &facts, now);
    if let Desired::Delete { reason, at } = decision.desired {
        return auto_delete(ctx, vc, reason, at).await;
    }
    let asleep = matches!(decision.desired, Desired::Asleep { .. });
    let replicas = if asleep { 0 } else { 1 };
    let auto_wakeup = policy.sleep.as_ref().is_some_and(|s| s.auto_wakeup);
    let ready = statefulset_replicas(ctx, &namespace, &names.statefulset)
        .await?
        .map_or(0, |(_, r)| r);
    let wake = ctx
        .settings
        .wake
        .filter(|_| wake::routes_to_wake(auto_wakeup, asleep, ready));
    let mut apply_error = apply_children(ctx, vc, &names, &mut observed, replicas, wake)
        .await
        .err();
    if apply_error.is_none() && asleep {
        match enact::remove_tenant_pods(&ctx.client, &ctx.metrics, &namespace, &name).await {
            Ok(0) => {}
            Ok(n) => {
                let note = format!(
                    "deleted {n} tenant pod(s) while asleep; their volumes, Services and Secrets stay"
                );
                ctx.event(vc, EventType::Normal, "TenantPodsRemoved", "Sleep", note)
                    .await;
            }
            Err(err) => apply_error = Some(format!("removing tenant pods: {err}")),
        }
    }
    // Status tells only what was applied: a failed apply keeps the recorded lifecycle.
    if apply_error.is_none() {
        report_transition(ctx, vc, facts.previous, &decision).await;
        observed.lifecycle = Some(decision);
    }
    observed.last_activity = facts.last_activity;
    if let Some(message) = &apply_error {
        let previous = conditions::find(vc.status.as_ref(), conditions::CONTROL_PLANE_READY);
        if previous.is_none_or(|c| &c.message != message) {
            ctx.event(
                vc,
                EventType::Warning,
                "ApplyFailed",
                "Apply",
                message.clone(),
            )
            .await;
        }
    }

    observed.apply_error = apply_error.clone();
    observed.statefulset = statefulset_replicas(ctx, &namespace, &names.statefulset).await?;
    let mut new_status = status::compute(vc.status.as_ref(), &observed, facts::to_time(now));
    new_status.template = rendered_from;
    ctx.record_phase(ObjectRef::from_obj(vc), Some(&new_status));
    write_status(ctx, vc, new_status).await?;
    match apply_error {
        // Retried with backoff by the error policy.
        Some(message) => Err(Error::Apply(message)),
        None => Ok(Action::requeue(requeue_after(decision.recheck_at(), now))),
    }
}

/// Until the next lifecycle moment or the periodic resync, whichever comes first. `now` is
/// truncated to the second, so this never wakes before the moment.
fn requeue_after(moment: Option<DateTime<Utc>>, now: DateTime<Utc>) -> Duration {
    let resync = Duration::from_secs(600);
    moment
        .and_then(|m| (m - now).to_std().ok())
        .map_or(resync, |d| d.min(resync))
}

/// Counts, logs and publishes a sleep or wake the decision made. What this process last
/// reported wins over `previous`: a reconcile triggered by a child can run on a cached object
/// older than the status just written.
async fn report_transition(
    ctx: &Context,
    vc: &VirtualCluster,
    previous: State,
    decision: &Decision,
) {
    let remembered = ctx
        .phases
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&ObjectRef::from_obj(vc))
        .map(|(_, sleeping)| sleeping.is_some());
    let was_asleep = remembered.unwrap_or(matches!(previous, State::Asleep { .. }));
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
async fn auto_delete(
    ctx: &Context,
    vc: &VirtualCluster,
    reason: DeleteReason,
    at: DateTime<Utc>,
) -> Result<Action, Error> {
    let field = match reason {
        DeleteReason::AfterCreation => "spec.autoDelete.afterCreation",
        DeleteReason::AfterInactivity => "spec.autoDelete.afterInactivity",
    };
    // The cached object may predate a delete this operator already sent.
    if !enact::still_live(&ctx.client, vc).await? {
        return Ok(Action::await_change());
    }
    let note = format!(
        "deleting the virtual cluster: {field} reached at {}",
        at.to_rfc3339()
    );
    warn!(reason = reason.as_str(), delete_at = %at, "{note}");
    ctx.event(vc, EventType::Warning, "AutoDelete", "Delete", note)
        .await;
    enact::delete_virtual_cluster(&ctx.client, &ctx.metrics, vc).await?;
    ctx.metrics
        .auto_deletes
        .with_label_values(&[reason.as_str()])
        .inc();
    Ok(Action::await_change())
}

async fn cleanup(vc: &VirtualCluster, ctx: &Context) -> Result<Action, Error> {
    let namespace = vc.namespace().unwrap_or_default();
    let name = vc.name_any();
    let names = vnest_crds::meta::ChildNames::new(&namespace, &name, None);
    let observed = Observed {
        generation: vc.metadata.generation,
        deleting: true,
        ..Default::default()
    };
    let mut terminating = status::compute(vc.status.as_ref(), &observed, Time(Timestamp::now()));
    terminating
        .conditions
        .retain(|c| c.type_ == conditions::READY);
    if vc.status.as_ref().and_then(|s| s.phase) != Some(Phase::Terminating) {
        write_status(ctx, vc, terminating).await?;
    }

    for kind in [ChildKind::ClusterRoleBinding, ChildKind::ClusterRole] {
        let api: Api<DynamicObject> = Api::all_with(ctx.client.clone(), &kind.api_resource());
        match api
            .delete(&names.cluster_role, &DeleteParams::background())
            .await
        {
            Ok(_) => ctx.metrics.write(&format!("{kind:?}"), "delete"),
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(err) => return Err(err.into()),
        }
    }
    // PriorityClasses the syncer copied to the host (toHost.priorityclasses): cluster-scoped,
    // so scoped by the VirtualCluster's namespace beside its name.
    let classes: Api<k8s_openapi::api::scheduling::v1::PriorityClass> =
        Api::all(ctx.client.clone());
    let class_selector = ListParams::default().labels(&format!(
        "{}={name},{}={namespace}",
        meta::LABEL_SYNCER_MANAGED_BY,
        meta::LABEL_VIRTUAL_CLUSTER_NAMESPACE
    ));
    match classes
        .delete_collection(&DeleteParams::background(), &class_selector)
        .await
    {
        Ok(_) => ctx.metrics.write("PriorityClass", "deletecollection"),
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(err) => return Err(err.into()),
    }
    stop_control_plane(ctx, &namespace, &names.statefulset).await?;
    let selector =
        ListParams::default().labels(&format!("{}={name}", meta::LABEL_SYNCER_MANAGED_BY));
    for ar in syncer_made_kinds() {
        let api: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), &namespace, &ar);
        match api
            .delete_collection(&DeleteParams::background(), &selector)
            .await
        {
            Ok(_) => ctx.metrics.write(&ar.kind, "deletecollection"),
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(err) => return Err(err.into()),
        }
    }
    apply_namespace_labels(ctx, vc, &BTreeMap::new()).await?;
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
    use k8s_openapi::api::{apps::v1::StatefulSet, core::v1::Pod};
    let statefulsets: Api<StatefulSet> = Api::namespaced(ctx.client.clone(), namespace);
    match statefulsets
        .delete(statefulset, &DeleteParams::background())
        .await
    {
        Ok(_) => ctx.metrics.write("StatefulSet", "delete"),
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(err) => return Err(err.into()),
    }
    let pod = format!("{statefulset}-0");
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), namespace);
    // A list (which the chart's RBAC grants for the cleanup), not a get.
    let running = pods
        .list_metadata(&ListParams::default().fields(&format!("metadata.name={pod}")))
        .await?;
    if !running.items.is_empty() {
        return Err(Error::Finalizer(format!(
            "failed to remove the syncer's objects yet: waiting for pod {namespace}/{pod} (the syncer) to stop"
        )));
    }
    Ok(())
}

async fn reconcile(vc: Arc<VirtualCluster>, ctx: Arc<Context>) -> Result<Action, Error> {
    // Drift checks read the caches: until each has finished its first list, a restarted
    // operator would take every child for missing and apply it again.
    ctx.caches_ready.clone().await;
    let started = Instant::now();
    let namespace = vc.namespace().unwrap_or_default();
    let api: Api<VirtualCluster> = Api::namespaced(ctx.client.clone(), &namespace);
    let span = info_span!("reconcile", namespace = %namespace, name = %vc.name_any());
    let result = finalizer(&api, meta::FINALIZER, vc.clone(), |event| async {
        match event {
            Finalizer::Apply(vc) => apply_all(&vc, &ctx).await,
            Finalizer::Cleanup(vc) => cleanup(&vc, &ctx).await,
        }
    })
    .instrument(span)
    .await
    .map_err(|err| match err {
        kube::runtime::finalizer::Error::ApplyFailed(e)
        | kube::runtime::finalizer::Error::CleanupFailed(e) => e,
        other => Error::Finalizer(other.to_string()),
    });
    ctx.metrics
        .reconcile_duration
        .observe(started.elapsed().as_secs_f64());
    let outcome = if result.is_ok() { "ok" } else { "error" };
    ctx.metrics.reconciles.with_label_values(&[outcome]).inc();
    if result.is_ok() {
        ctx.failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&ObjectRef::from_obj(vc.as_ref()));
    }
    result
}

/// Exponential backoff per VirtualCluster: 2s, 4s, ... up to 5 minutes.
pub fn backoff(failures: u32) -> Duration {
    Duration::from_secs(2u64.saturating_pow(failures.min(9))).min(Duration::from_secs(300))
}

fn error_policy(vc: Arc<VirtualCluster>, error: &Error, ctx: Arc<Context>) -> Action {
    // One of metrics::ERROR_REASONS.
    let reason = match error {
        Error::Kube(kube::Error::Api(s)) if s.code == 409 => "conflict",
        Error::Kube(_) => "api",
        Error::Certs(_) => "certificates",
        Error::Apply(_) => "apply",
        Error::Finalizer(_) => "finalizer",
    };
    ctx.metrics
        .reconcile_errors
        .with_label_values(&[reason])
        .inc();
    let mut failures = ctx.failures.lock().unwrap_or_else(|e| e.into_inner());
    let count = failures
        .entry(ObjectRef::from_obj(vc.as_ref()))
        .or_insert(0);
    *count += 1;
    // Conflicts mean a newer version exists; retry at once.
    let delay = if reason == "conflict" {
        Duration::from_millis(200)
    } else {
        backoff(*count)
    };
    warn!(namespace = %vc.namespace().unwrap_or_default(), name = %vc.name_any(), error = %error, retry_in = ?delay, "reconcile failed");
    Action::requeue(delay)
}

/// Runs the controller over `namespace` (or all) for the VirtualClusters matching `selector`
/// (or all) until shutdown.
/// Which VirtualClusters one controller reconciles, and how many at once.
#[derive(Clone, Debug)]
pub struct Scope {
    /// One namespace, or all.
    pub namespace: Option<String>,
    /// A label selector on VirtualClusters, or all.
    pub selector: Option<String>,
    /// Reconciles in flight at most (each sends several requests; unbounded, a thousand new
    /// VirtualClusters would flood the API server and the operator's memory at once).
    pub concurrency: u16,
}

pub async fn run(
    client: Client,
    settings: Settings,
    metrics: Metrics,
    readiness: Readiness,
    scope: Scope,
    identity: &str,
) {
    let Scope {
        namespace,
        selector,
        concurrency,
    } = scope;
    let (stores, streams) = ChildStores::start(&client, namespace.as_deref());
    let ns_writer = reflector::store::Writer::<PartialObjectMeta<Namespace>>::default();
    let namespaces = ns_writer.as_reader();
    // Only label changes matter to the controller (they choose the governing policy).
    let namespace_changes = watcher(
        Api::<PartialObjectMeta<Namespace>>::all(client.clone()),
        watcher::Config::default(),
    )
    .default_backoff()
    .modify(|o| o.managed_fields_mut().clear())
    .reflect(ns_writer)
    .applied_objects()
    .predicate_filter(
        kube::runtime::predicates::labels,
        kube::runtime::PredicateConfig::default(),
    );
    let template_writer = reflector::store::Writer::<VirtualClusterTemplate>::default();
    let templates = template_writer.as_reader();
    let template_changes = watcher(
        Api::<VirtualClusterTemplate>::all(client.clone()),
        watcher::Config::default().any_semantic(),
    )
    .default_backoff()
    .reflect(template_writer)
    .applied_objects();
    let policy_writer = reflector::store::Writer::<VirtualClusterPolicy>::default();
    let policies = policy_writer.as_reader();
    // Deletions too: a policy removed may free a namespace another policy also selected.
    let policy_changes = watcher(
        Api::<VirtualClusterPolicy>::all(client.clone()),
        watcher::Config::default().any_semantic(),
    )
    .default_backoff()
    .reflect(policy_writer)
    .touched_objects();
    let recorder = Recorder::new(
        client.clone(),
        kube::runtime::events::Reporter {
            controller: "vnest-operator".into(),
            instance: Some(identity.to_string()),
        },
    );
    let caches_ready = {
        let stores = stores.clone();
        let namespaces = namespaces.clone();
        let templates = templates.clone();
        let policies = policies.clone();
        async move {
            stores.wait_until_ready().await;
            let _ = namespaces.wait_until_ready().await;
            let _ = templates.wait_until_ready().await;
            let _ = policies.wait_until_ready().await;
        }
    }
    .boxed()
    .shared();
    let ctx = Arc::new(Context {
        client: client.clone(),
        settings,
        metrics,
        stores: stores.clone(),
        namespaces: namespaces.clone(),
        templates,
        policies,
        caches_ready: caches_ready.clone(),
        recorder,
        failures: Mutex::default(),
        phases: Mutex::default(),
    });
    let vcs: Api<VirtualCluster> = match &namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let mut vc_config = watcher::Config::default().any_semantic();
    if let Some(selector) = &selector {
        vc_config = vc_config.labels(selector);
    }
    // Cached without managed fields: nothing reads them, and at a thousand VirtualClusters
    // they are a large part of the cache.
    let vc_writer = reflector::store::Writer::<VirtualCluster>::default();
    let vc_reader = vc_writer.as_reader();
    let vc_events = watcher(vcs, vc_config)
        .default_backoff()
        .modify(|vc| vc.managed_fields_mut().clear())
        .reflect(vc_writer)
        .applied_objects();
    let mut controller = Controller::for_stream(vc_events, vc_reader);
    // A changed template rolls forward to every VirtualCluster rendered from it.
    let virtual_clusters = controller.store();
    controller = controller.watches_stream(template_changes, move |template| {
        let name = template.name_any();
        virtual_clusters
            .state()
            .into_iter()
            .filter(|vc| vc.spec.template.as_ref().is_some_and(|t| t.name == name))
            .map(|vc| ObjectRef::from_obj(vc.as_ref()))
            .collect::<Vec<_>>()
    });
    // A policy change (its selector, bounds or defaults, or its removal) may concern any
    // VirtualCluster its old or new selector matched; the old selector is gone, so all are
    // looked at again. A reconcile with nothing to change writes nothing.
    let virtual_clusters = controller.store();
    controller = controller.watches_stream(policy_changes, move |_policy| {
        virtual_clusters
            .state()
            .into_iter()
            .map(|vc| ObjectRef::from_obj(vc.as_ref()))
            .collect::<Vec<_>>()
    });
    // A namespace's labels decide which policy governs it.
    let virtual_clusters = controller.store();
    controller = controller.watches_stream(namespace_changes, move |ns| {
        let name = ns.name_any();
        virtual_clusters
            .state()
            .into_iter()
            .filter(|vc| vc.namespace().as_deref() == Some(name.as_str()))
            .map(|vc| ObjectRef::from_obj(vc.as_ref()))
            .collect::<Vec<_>>()
    });
    for (kind, stream) in streams {
        let ar = kind.api_resource();
        if kind.is_cluster_scoped() {
            controller = controller.watches_stream_with(
                stream,
                |obj: children::ChildMeta| {
                    let labels = obj.labels();
                    let name = labels.get(meta::LABEL_VIRTUAL_CLUSTER)?;
                    let ns = labels.get(meta::LABEL_VIRTUAL_CLUSTER_NAMESPACE)?;
                    Some(ObjectRef::new(name).within(ns))
                },
                ar,
            );
        } else {
            controller = controller.owns_stream_with(stream, ar);
        }
    }
    tokio::spawn(async move {
        caches_ready.await;
        readiness.set_ready();
        info!("caches synced");
    });
    controller
        .with_config(kube::runtime::controller::Config::default().concurrency(concurrency))
        .shutdown_on_signal()
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            if let Err(err) = result {
                tracing::debug!(error = %err, "reconcile trigger error");
            }
        })
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requeue_is_at_the_next_moment_within_the_resync() {
        let now: DateTime<Utc> = "2026-12-01T10:00:00Z".parse().unwrap();
        let at = |s: &str| Some(s.parse().unwrap());
        assert_eq!(
            requeue_after(at("2026-12-01T10:00:07Z"), now),
            Duration::from_secs(7)
        );
        assert_eq!(
            requeue_after(at("2026-12-02T10:00:00Z"), now),
            Duration::from_secs(600)
        );
        assert_eq!(requeue_after(None, now), Duration::from_secs(600));
    }

    #[test]
    fn backoff_doubles_and_caps_at_five_minutes() {
        assert_eq!(backoff(1), Duration::from_secs(2));
        assert_eq!(backoff(3), Duration::from_secs(8));
        assert_eq!(backoff(50), Duration::from_secs(300));
    }
}
