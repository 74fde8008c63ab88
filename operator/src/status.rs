//! The status the operator reports: phase, conditions and what it applied, computed from what
//! it observed. Pure, so every transition is unit-tested.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use vnest_crds::{Phase, VirtualClusterStatus};

pub const READY: &str = "Ready";
pub const CONTROL_PLANE_READY: &str = "ControlPlaneReady";
pub const SPEC_VALID: &str = "SpecValid";

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

    let spec_valid = match &observed.spec_error {
        None => condition(
            SPEC_VALID,
            true,
            "Valid",
            "the spec can be applied".into(),
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
    let conditions = keep_transition_times(
        previous_conditions,
        vec![ready_condition, control_plane, spec_valid],
    );
    let mut status = previous.cloned().unwrap_or_default();
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
        assert_eq!(
            (valid.status.as_str(), valid.reason.as_str()),
            ("False", "InvalidSpec")
        );
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
}
