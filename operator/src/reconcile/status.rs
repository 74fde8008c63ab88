//! Step four, the one place status is computed: phase, conditions and what was applied,
//! from what the writes left ([`Written`]) or, on deletion, `Terminating`. The computation
//! is pure, so every transition is unit-tested; the status is written only when it changed.

use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{
    Api, Resource, ResourceExt,
    api::{Patch, PatchParams},
    runtime::{controller::Action, reflector::ObjectRef},
};
use serde_json::json;
use vnest_crds::{Phase, VirtualCluster, VirtualClusterStatus};

use super::{
    apply::Written,
    context::Context,
    error::Error,
    plan::{Plan, Step},
};
use crate::{
    children::FIELD_MANAGER,
    conditions::{self, CONTROL_PLANE_READY, READY, SLEEPING, SPEC_VALID},
    error::{ApiError, Request},
    lifecycle::{
        decide::{Decision, Desired},
        facts::{self, to_time},
        reason::SleepReason,
    },
};

/// Reports `plan` as `written` left it, and when to look again. Fails with the apply error,
/// for the error policy to retry with backoff.
pub async fn report(ctx: &Context, plan: &Plan, written: Written) -> Result<Action, Error> {
    let vc = &plan.vc;
    let enact = match &plan.step {
        Step::Enact(enact) => Some(enact),
        _ => None,
    };
    let observed = Observed {
        generation: vc.metadata.generation,
        deleting: false,
        spec_error: match &plan.step {
            Step::Invalid(errors) => Some(errors.to_string()),
            _ => None,
        },
        apply_error: written.error.as_ref().map(ToString::to_string),
        statefulset: written.statefulset,
        distro: vc
            .spec
            .control_plane
            .distro
            .selected()
            .0
            .as_str()
            .to_string(),
        endpoint: written.endpoint,
        kubeconfig_secret: plan.names.kubeconfig_secret.clone(),
        lifecycle: written.lifecycle,
        last_activity: enact.and_then(|e| e.last_activity),
        policy: plan.policy.clone(),
    };
    let mut status = compute(vc.status.as_ref(), &observed, to_time(plan.now));
    if let Some(template) = &plan.template {
        status.template = template.clone();
    }
    ctx.record_phase(ObjectRef::from_obj(vc), Some(&status));
    write(ctx, vc, status).await?;
    match (written.error, enact) {
        (Some(err), _) => Err(err.into()),
        (None, Some(enact)) => Ok(Action::requeue(requeue_after(
            enact.decision.recheck_at(),
            plan.now,
        ))),
        (None, None) => Ok(Action::await_change()),
    }
}

/// Marks `vc` `Terminating`, keeping only its `Ready` condition.
pub async fn report_terminating(ctx: &Context, vc: &VirtualCluster) -> Result<(), ApiError> {
    if vc.status.as_ref().and_then(|s| s.phase) == Some(Phase::Terminating) {
        return Ok(());
    }
    let observed = Observed {
        generation: vc.metadata.generation,
        deleting: true,
        ..Default::default()
    };
    let mut terminating = compute(vc.status.as_ref(), &observed, to_time(facts::now()));
    terminating.conditions.retain(|c| c.type_ == READY);
    write(ctx, vc, terminating).await
}

async fn write(
    ctx: &Context,
    vc: &VirtualCluster,
    status: VirtualClusterStatus,
) -> Result<(), ApiError> {
    if vc.status.as_ref() == Some(&status) {
        return Ok(());
    }
    let name = vc.name_any();
    let api: Api<VirtualCluster> =
        Api::namespaced(ctx.client.clone(), &vc.namespace().unwrap_or_default());
    let body = json!({ "apiVersion": VirtualCluster::api_version(&()), "kind": VirtualCluster::kind(&()), "status": status });
    api.patch_status(
        &name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&body),
    )
    .await
    .request("write the status of", || format!("VirtualCluster {name}"))?;
    ctx.metrics.write("VirtualCluster", "status");
    Ok(())
}

/// Until the next lifecycle moment or the periodic resync, whichever comes first. `now` is
/// truncated to the second, so this never wakes before the moment.
fn requeue_after(moment: Option<DateTime<Utc>>, now: DateTime<Utc>) -> Duration {
    let resync = Duration::from_secs(600);
    moment
        .and_then(|m| (m - now).to_std().ok())
        .map_or(resync, |d| d.min(resync))
}

/// What one reconcile found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Observed {
    pub generation: Option<i64>,
    pub deleting: bool,
    /// Field errors of an invalid spec, one per line.
    pub spec_error: Option<String>,
    /// Why applying the desired state failed.
    pub apply_error: Option<String>,
    /// `(pods created, pods ready)` of the StatefulSet, when it exists.
    pub statefulset: Option<(i32, i32)>,
    pub distro: String,
    pub endpoint: String,
    pub kubeconfig_secret: String,
    /// The lifecycle decision applied; `None` when nothing was decided (invalid spec,
    /// deletion), which keeps what the status said.
    pub lifecycle: Option<Decision>,
    pub last_activity: Option<DateTime<Utc>>,
    /// The VirtualClusterPolicy the spec was checked against, named in `SpecValid` (a message,
    /// not a status field: an older CRD on the host would refuse the whole status write).
    pub policy: Option<String>,
}

fn sleep_message(reason: SleepReason, since: DateTime<Utc>) -> String {
    let why = match reason {
        SleepReason::Paused => "spec.paused is true",
        SleepReason::Schedule => "sleepSchedule fired",
        SleepReason::Inactivity => "no tenant activity for sleepMode.afterInactivity",
    };
    format!("scaled to zero since {}: {why}", since.to_rfc3339())
}

fn condition(
    type_: &str,
    ok: bool,
    reason: &str,
    message: String,
    generation: Option<i64>,
    now: &Time,
) -> Condition {
    Condition {
        type_: type_.to_string(),
        status: if ok { "True" } else { "False" }.to_string(),
        reason: reason.to_string(),
        message,
        observed_generation: generation,
        last_transition_time: now.clone(),
    }
}

/// Keeps the previous transition time when a condition's status did not change.
fn keep_transition_times(previous: &[Condition], mut conditions: Vec<Condition>) -> Vec<Condition> {
    for c in &mut conditions {
        if let Some(old) = previous
            .iter()
            .find(|o| o.type_ == c.type_ && o.status == c.status)
        {
            c.last_transition_time = old.last_transition_time.clone();
        }
    }
    conditions
}

pub fn compute(
    previous: Option<&VirtualClusterStatus>,
    observed: &Observed,
    now: Time,
) -> VirtualClusterStatus {
    let generation = observed.generation;
    let (created, ready) = observed.statefulset.unwrap_or((0, 0));
    let asleep = match observed.lifecycle.map(|d| d.desired) {
        Some(Desired::Asleep { reason, since }) => Some((reason, since)),
        _ => None,
    };

    let spec_valid = match &observed.spec_error {
        None => condition(
            SPEC_VALID,
            true,
            "Valid",
            match &observed.policy {
                Some(policy) => {
                    format!("the spec can be applied, within VirtualClusterPolicy {policy}")
                }
                None => "the spec can be applied".into(),
            },
            generation,
            &now,
        ),
        Some(err) => condition(
            SPEC_VALID,
            false,
            "InvalidSpec",
            err.clone(),
            generation,
            &now,
        ),
    };
    let control_plane = if let Some(err) = &observed.apply_error {
        condition(
            CONTROL_PLANE_READY,
            false,
            "ApplyFailed",
            err.clone(),
            generation,
            &now,
        )
    } else if observed.spec_error.is_some() {
        condition(
            CONTROL_PLANE_READY,
            false,
            "InvalidSpec",
            "nothing is applied until the spec is fixed".into(),
            generation,
            &now,
        )
    } else if let Some((reason, since)) = asleep {
        condition(
            CONTROL_PLANE_READY,
            false,
            "Sleeping",
            sleep_message(reason, since),
            generation,
            &now,
        )
    } else if ready > 0 {
        condition(
            CONTROL_PLANE_READY,
            true,
            "StatefulSetReady",
            format!("{ready} control plane pod(s) ready"),
            generation,
            &now,
        )
    } else if observed.statefulset.is_none() || created == 0 {
        condition(
            CONTROL_PLANE_READY,
            false,
            "PodPending",
            "waiting for the control plane pod to be created".into(),
            generation,
            &now,
        )
    } else {
        condition(
            CONTROL_PLANE_READY,
            false,
            "PodNotReady",
            "the control plane pod is starting".into(),
            generation,
            &now,
        )
    };
    let phase = if observed.deleting {
        Phase::Terminating
    } else if observed.spec_error.is_some() || observed.apply_error.is_some() {
        Phase::Failed
    } else if let Some((reason, _)) = asleep {
        if reason == SleepReason::Paused {
            Phase::Paused
        } else {
            Phase::Sleeping
        }
    } else if ready > 0 {
        Phase::Running
    } else if created > 0 {
        Phase::Provisioning
    } else {
        Phase::Pending
    };
    let ready_condition = match phase {
        Phase::Running => condition(
            READY,
            true,
            "Running",
            "the virtual cluster is serving".into(),
            generation,
            &now,
        ),
        _ => condition(
            READY,
            false,
            &format!("{phase:?}"),
            control_plane.message.clone(),
            generation,
            &now,
        ),
    };

    let previous_conditions = previous
        .map(|p| p.conditions.as_slice())
        .unwrap_or_default();
    let sleeping = match (observed.lifecycle, asleep) {
        (None, _) => conditions::find(previous, SLEEPING).cloned(),
        (Some(_), Some((reason, since))) => Some(condition(
            SLEEPING,
            true,
            reason.as_str(),
            sleep_message(reason, since),
            generation,
            &now,
        )),
        (Some(_), None) => Some(condition(
            SLEEPING,
            false,
            "Awake",
            "the control plane is scaled up".into(),
            generation,
            &now,
        )),
    };
    let mut conditions = vec![ready_condition, control_plane, spec_valid];
    conditions.extend(sleeping);
    let conditions = keep_transition_times(previous_conditions, conditions);
    let mut status = previous.cloned().unwrap_or_default();
    if let Some(decision) = observed.lifecycle {
        status.sleeping_since = asleep.map(|(_, since)| to_time(since));
        status.next_sleep_time = decision.next_sleep.map(to_time);
        status.next_wake_time = decision.next_wake.map(to_time);
        status.delete_at = decision.delete_at.map(to_time);
    }
    if let Some(activity) = observed.last_activity {
        status.last_activity_time = Some(to_time(activity));
    }
    status.phase = Some(phase);
    status.conditions = conditions;
    status.observed_generation = generation;
    status.distro = Some(observed.distro.clone());
    status.ready_replicas = Some(ready);
    status.endpoint = Some(observed.endpoint.clone());
    status.kubeconfig_secret = Some(observed.kubeconfig_secret.clone());
    status
}

#[cfg(test)]
mod tests {
    use k8s_openapi::jiff::Timestamp;

    use super::*;

    fn at(seconds: i64) -> Time {
        Time(Timestamp::from_second(seconds).unwrap())
    }

    fn observed(statefulset: Option<(i32, i32)>) -> Observed {
        Observed {
            generation: Some(2),
            statefulset,
            distro: "k3s".into(),
            endpoint: "https://vc.ns.svc:443".into(),
            kubeconfig_secret: "vc-vc".into(),
            ..Default::default()
        }
    }

    fn cond<'a>(status: &'a VirtualClusterStatus, type_: &str) -> &'a Condition {
        status.conditions.iter().find(|c| c.type_ == type_).unwrap()
    }

    fn status_and_reason(c: &Condition) -> (&str, &str) {
        (&c.status, &c.reason)
    }

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
    fn phases_follow_the_statefulset() {
        assert_eq!(
            compute(None, &observed(None), at(0)).phase,
            Some(Phase::Pending)
        );
        assert_eq!(
            compute(None, &observed(Some((1, 0))), at(0)).phase,
            Some(Phase::Provisioning)
        );
        let running = compute(None, &observed(Some((1, 1))), at(0));
        assert_eq!(running.phase, Some(Phase::Running));
        assert_eq!(cond(&running, READY).status, "True");
        assert_eq!(
            cond(&running, CONTROL_PLANE_READY).reason,
            "StatefulSetReady"
        );
        assert_eq!(running.observed_generation, Some(2));
        assert_eq!(running.ready_replicas, Some(1));
        assert_eq!(running.kubeconfig_secret.as_deref(), Some("vc-vc"));
    }

    #[test]
    fn invalid_spec_fails_with_the_message() {
        let mut o = observed(None);
        o.spec_error = Some("spec.sleepMode.timezone: bad".into());
        let status = compute(None, &o, at(0));
        assert_eq!(status.phase, Some(Phase::Failed));
        let valid = cond(&status, SPEC_VALID);
        assert_eq!(status_and_reason(valid), ("False", "InvalidSpec"));
        assert_eq!(valid.message, "spec.sleepMode.timezone: bad");
        assert_eq!(cond(&status, READY).status, "False");
    }

    #[test]
    fn apply_errors_are_reported_on_the_control_plane_condition() {
        let mut o = observed(Some((1, 1)));
        o.apply_error = Some("StatefulSet team-alpha: forbidden".into());
        let status = compute(None, &o, at(0));
        assert_eq!(status.phase, Some(Phase::Failed));
        assert_eq!(cond(&status, CONTROL_PLANE_READY).reason, "ApplyFailed");
    }

    #[test]
    fn deletion_is_terminating() {
        let mut o = observed(Some((1, 1)));
        o.deleting = true;
        assert_eq!(compute(None, &o, at(0)).phase, Some(Phase::Terminating));
    }

    #[test]
    fn unchanged_conditions_keep_their_transition_time_so_resyncs_compare_equal() {
        let first = compute(None, &observed(Some((1, 1))), at(10));
        let second = compute(Some(&first), &observed(Some((1, 1))), at(99));
        assert_eq!(first, second);
        let mut broken = observed(Some((1, 0)));
        broken.generation = Some(2);
        let third = compute(Some(&second), &broken, at(200));
        assert_eq!(cond(&third, READY).last_transition_time, at(200));
        assert_eq!(cond(&third, SPEC_VALID).last_transition_time, at(10));
    }

    fn decided(desired: Desired) -> Decision {
        Decision {
            desired,
            next_sleep: None,
            next_wake: Some("2026-12-02T07:00:00Z".parse().unwrap()),
            delete_at: Some("2026-12-09T07:00:00Z".parse().unwrap()),
            woke_by: None,
        }
    }

    /// The decision to sleep for `reason` since `since`.
    fn asleep(reason: SleepReason, since: DateTime<Utc>) -> Option<Decision> {
        Some(decided(Desired::Asleep { reason, since }))
    }

    #[test]
    fn sleeping_and_paused_have_their_phase_condition_and_times() {
        let since = "2026-12-01T19:00:00Z".parse().unwrap();
        let mut o = observed(Some((1, 1)));
        o.lifecycle = asleep(SleepReason::Schedule, since);
        o.last_activity = Some("2026-12-01T18:00:00Z".parse().unwrap());
        let status = compute(None, &o, at(100));
        assert_eq!(status.phase, Some(Phase::Sleeping));
        let sleeping = cond(&status, SLEEPING);
        assert_eq!(status_and_reason(sleeping), ("True", "Schedule"));
        assert_eq!(sleeping.last_transition_time, at(100));
        assert_eq!(cond(&status, READY).reason, "Sleeping");
        assert_eq!(status.sleeping_since, Some(to_time(since)));
        assert_eq!(status.next_wake_time, Some(at(1_796_194_800)));
        assert_eq!(status.delete_at, Some(at(1_796_799_600)));
        assert_eq!(status.last_activity_time, Some(at(1_796_148_000)));

        o.lifecycle = asleep(SleepReason::Paused, since);
        let paused = compute(Some(&status), &o, at(200));
        assert_eq!(paused.phase, Some(Phase::Paused));
        assert_eq!(cond(&paused, SLEEPING).reason, "Paused");
        // Still asleep: the enacted time stays.
        assert_eq!(cond(&paused, SLEEPING).last_transition_time, at(100));
    }

    #[test]
    fn waking_flips_the_condition_and_clears_sleeping_since() {
        let mut o = observed(Some((1, 1)));
        o.lifecycle = asleep(
            SleepReason::Inactivity,
            "2026-12-01T19:00:00Z".parse().unwrap(),
        );
        let asleep = compute(None, &o, at(100));
        o.lifecycle = Some(decided(Desired::Awake {
            since: "2026-12-02T07:00:00Z".parse().unwrap(),
        }));
        let awake = compute(Some(&asleep), &o, at(300));
        assert_eq!(awake.phase, Some(Phase::Running));
        let sleeping = cond(&awake, SLEEPING);
        assert_eq!(status_and_reason(sleeping), ("False", "Awake"));
        assert_eq!(sleeping.last_transition_time, at(300));
        assert_eq!(awake.sleeping_since, None);
    }

    /// An invalid spec changes nothing: the cluster stays as it was, and says so.
    #[test]
    fn an_invalid_spec_keeps_the_sleep_it_had() {
        let mut o = observed(Some((0, 0)));
        o.lifecycle = asleep(SleepReason::Paused, "2026-12-01T19:00:00Z".parse().unwrap());
        let asleep = compute(None, &o, at(100));
        o.lifecycle = None;
        o.spec_error = Some("spec.sleepMode.timezone: bad".into());
        let invalid = compute(Some(&asleep), &o, at(200));
        assert_eq!(cond(&invalid, SLEEPING), cond(&asleep, SLEEPING));
        assert_eq!(invalid.sleeping_since, asleep.sleeping_since);
    }
}
