//! Step two, pure: from the VirtualCluster and what `read` found, the spec to reconcile (its
//! own fields over its template's over its policy's defaults), whether it is valid, the
//! lifecycle decision, and the desired state with the namespace's labels.

use std::{collections::BTreeMap, sync::Arc};

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Namespace;
use kube::{ResourceExt, core::PartialObjectMeta};
use serde_json::{Value, json};
use vnest_crds::{
    FieldError, FieldErrors, RenderedTemplate, VirtualCluster, VirtualClusterPolicy,
    VirtualClusterTemplate,
    meta::{self, ChildNames},
};

use super::read::Observation;
use crate::{
    certs::Certs,
    desired::{self, DesiredState, Input},
    lifecycle::{
        decide::{self, Decision, Desired, State},
        facts,
        reason::DeleteReason,
    },
    settings::{Settings, WakeEndpoint},
    template, validate, wake,
};

/// What one reconcile is to do.
pub struct Plan {
    /// The VirtualCluster with the spec to reconcile.
    pub vc: VirtualCluster,
    pub names: ChildNames,
    /// The VirtualClusterPolicy governing it, named in `SpecValid`.
    pub policy: Option<String>,
    /// The template version to record in the status; `None` keeps the one recorded (the
    /// template could not be used).
    pub template: Option<Option<RenderedTemplate>>,
    /// To the second, so status times compare equal with what is read back.
    pub now: DateTime<Utc>,
    /// `(pods created, pods ready)` of the StatefulSet as read.
    pub statefulset: Option<(i32, i32)>,
    /// The namespace as cached, whose Pod Security labels [`Plan::target`] compares.
    namespace: Option<Arc<PartialObjectMeta<Namespace>>>,
    pub step: Step,
}

pub enum Step {
    /// The spec cannot be applied: every problem, one after another. Only the status changes.
    Invalid(FieldErrors),
    /// The auto-delete moment came.
    Delete {
        reason: DeleteReason,
        at: DateTime<Utc>,
    },
    Enact(Enact),
}

/// A valid spec's lifecycle decision and what applying it takes.
pub struct Enact {
    pub decision: Decision,
    /// What the status remembered before this decision.
    pub previous: State,
    pub last_activity: Option<DateTime<Utc>>,
    /// Where the `<name>` Service routes while the cluster cannot answer itself.
    pub wake: Option<WakeEndpoint>,
    /// The names the serving certificate must cover.
    pub sans: Vec<String>,
}

impl Enact {
    pub fn asleep(&self) -> bool {
        matches!(self.decision.desired, Desired::Asleep { .. })
    }
}

/// The objects to apply once the certificates are known.
pub struct Target {
    pub endpoint: String,
    pub state: DesiredState,
    /// The body applied to the namespace to set or clear its Pod Security labels; `None`
    /// when they are as they should be.
    pub namespace_labels: Option<Value>,
}

pub fn plan(
    settings: &Settings,
    original: &VirtualCluster,
    observed: Observation,
    now: DateTime<Utc>,
) -> Plan {
    let templated = with_template(observed.template.as_deref(), original);
    let (templated, template_error, rendered_from) = match templated {
        Ok(Some((effective, from))) => (effective, None, Some(from)),
        Ok(None) => (original.clone(), None, None),
        Err(error) => (original.clone(), Some(error), None),
    };
    // The policy's defaults go under the template's and the VirtualCluster's own fields.
    let governed = match template_error {
        None => with_policy(&observed, &templated),
        Some(_) => Ok(None),
    };
    let (vc, policy_error, governing) = match governed {
        Ok(Some((effective, policy))) => (effective, None, Some(policy)),
        Ok(None) => (templated, None, None),
        Err(error) => (templated, Some(error), None),
    };
    // A template that cannot be used leaves the version last rendered on record; a policy
    // refusing the rendered spec does not.
    let template = template_error.is_none().then_some(rendered_from);
    let namespace = vc.namespace().unwrap_or_default();
    let name = vc.name_any();
    let names = ChildNames::new(
        &namespace,
        &name,
        vc.spec.export_kubeconfig.secret.name.as_deref(),
    );
    let checked = match template_error.or(policy_error) {
        Some(error) => Err(error.into()),
        None => check(settings, &vc, governing.as_deref()),
    };
    let step = match checked {
        Err(errors) => Step::Invalid(errors),
        Ok(policy) => {
            let facts = facts::facts(&vc, observed.lease_activity);
            let decision = decide::decide(&policy, &facts, now);
            match decision.desired {
                Desired::Delete { reason, at } => Step::Delete { reason, at },
                Desired::Asleep { .. } | Desired::Awake { .. } => {
                    let asleep = matches!(decision.desired, Desired::Asleep { .. });
                    let auto_wakeup = policy.sleep.as_ref().is_some_and(|s| s.auto_wakeup);
                    let ready = observed.statefulset.map_or(0, |(_, r)| r);
                    Step::Enact(Enact {
                        decision,
                        previous: facts.previous,
                        last_activity: facts.last_activity,
                        wake: settings
                            .wake
                            .filter(|_| wake::routes_to_wake(auto_wakeup, asleep, ready)),
                        sans: desired::server_sans(
                            &namespace,
                            &name,
                            &vc.spec,
                            &settings.cluster_domain,
                            observed.cluster_ip.as_deref(),
                        ),
                    })
                }
            }
        }
    };
    Plan {
        policy: governing.as_ref().map(|p| p.name_any()),
        vc,
        names,
        template,
        now,
        statefulset: observed.statefulset,
        namespace: observed.namespace,
        step,
    }
}

impl Plan {
    /// The desired state of `enact`, with the certificates the cluster has.
    pub fn target(&self, settings: &Settings, enact: &Enact, certs: &Certs) -> Target {
        let namespace = self.vc.namespace().unwrap_or_default();
        let name = self.vc.name_any();
        let uid = self.vc.uid().unwrap_or_default();
        let input = Input {
            namespace: &namespace,
            name: &name,
            uid: &uid,
            spec: &self.vc.spec,
            settings,
            certs,
            replicas: if enact.asleep() { 0 } else { 1 },
            wake: enact.wake,
        };
        let state = desired::desired_state(&input);
        Target {
            endpoint: desired::endpoint(&input),
            namespace_labels: namespace_labels(
                &namespace,
                &name,
                self.namespace.as_deref(),
                &state.namespace_labels,
            ),
            state,
        }
    }
}

/// The effective spec's problems joined into one message, or its lifecycle fields parsed.
fn check(
    settings: &Settings,
    vc: &VirtualCluster,
    governing: Option<&VirtualClusterPolicy>,
) -> Result<crate::lifecycle::policy::Policy, FieldErrors> {
    let namespace = vc.namespace().unwrap_or_default();
    let mut errors = validate::validate_name(&vc.name_any())
        .err()
        .unwrap_or_default();
    let parsed = validate::validate(&vc.spec, &namespace).map_err(|e| errors.extend(e));
    // A policy names the extra rules it allows, for the namespaces it selects; elsewhere the
    // operator's flag decides.
    match governing {
        Some(policy) => errors.extend(crate::policy::check(policy, &vc.spec)),
        None => errors.extend(validate::guardrails(&vc.spec, settings.allow_extra_rules)),
    }
    match parsed {
        Ok(policy) if errors.is_empty() => Ok(policy),
        _ => Err(FieldErrors(errors)),
    }
}

/// `vc` with the spec `template` renders under its own fields, and which template version
/// that was; `Ok(None)` when it names no template.
fn with_template(
    template: Option<&VirtualClusterTemplate>,
    vc: &VirtualCluster,
) -> Result<Option<(VirtualCluster, RenderedTemplate)>, FieldError> {
    let Some(reference) = &vc.spec.template else {
        return Ok(None);
    };
    let template = template.ok_or_else(|| {
        FieldError::new(
            "spec.template.name",
            format!(
                "VirtualClusterTemplate {:?} does not exist; create it or name one of \
                 `kubectl get virtualclustertemplates`",
                reference.name
            ),
        )
    })?;
    let namespace = vc.namespace().unwrap_or_default();
    let rendered = template::render(template, &vc.name_any(), &namespace, &reference.parameters)?;
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
    observed: &Observation,
    vc: &VirtualCluster,
) -> Result<Option<(VirtualCluster, Arc<VirtualClusterPolicy>)>, FieldError> {
    let namespace = vc.namespace().unwrap_or_default();
    let labels = observed
        .namespace
        .as_ref()
        .map(|ns| ns.labels().clone())
        .unwrap_or_default();
    let policies = &observed.policies;
    let Some(governing) = crate::policy::governing(policies, &namespace, &labels)? else {
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

/// The apply body that gives `namespace` the Pod Security `labels` VirtualCluster `name`
/// asks for (none: takes away those it set); `None` when nothing need change. Several
/// VirtualClusters may share a namespace: labels already right are left alone whoever set
/// them, and only the one that set them takes them away.
pub fn namespace_labels(
    namespace: &str,
    name: &str,
    current: Option<&PartialObjectMeta<Namespace>>,
    labels: &BTreeMap<String, String>,
) -> Option<Value> {
    let current_labels = current.map(|n| n.labels().clone()).unwrap_or_default();
    let owned_by_us = current
        .and_then(|n| n.annotations().get(meta::ANNOTATION_POD_SECURITY_FROM))
        .is_some_and(|v| v == name);
    let up_to_date = labels.iter().all(|(k, v)| current_labels.get(k) == Some(v));
    if (labels.is_empty() && !owned_by_us) || (!labels.is_empty() && up_to_date) {
        return None;
    }
    let annotations = if labels.is_empty() {
        json!({})
    } else {
        json!({ meta::ANNOTATION_POD_SECURITY_FROM: name })
    };
    Some(
        json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": namespace, "labels": labels, "annotations": annotations } }),
    )
}
