//! The status a virtual pod shows: its host copy's while there is one, and a terminal one
//! once the host copy is gone, as a kubelet would leave it.

use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateTerminated, ContainerStatus, Pod, PodCondition, PodStatus,
};

/// The status the virtual pod should show: the host pod's, as the host reports it, except
/// the QoS class, which the virtual API server fixed at creation and will not let change (a
/// host LimitRange's defaults can make the host copy Burstable where the tenant's pod is
/// BestEffort), and the conditions only the virtual cluster knows of: `DisruptionTarget`
/// from an eviction in the virtual cluster, or a readiness gate a tenant controller sets,
/// which the host's conditions must not wipe out.
pub fn virtual_status(host: &Pod, virt: &Pod) -> Option<PodStatus> {
    let mut status = host.status.clone()?;
    // The init container vnest added is not the tenant's.
    if let Some(init) = status.init_container_statuses.as_mut() {
        init.retain(|c| c.name != super::hosts::REWRITE_HOSTS);
    }
    let virt_status = virt.status.as_ref();
    status.qos_class = virt_status.and_then(|s| s.qos_class.clone());
    let host_types: Vec<String> = status
        .conditions
        .iter()
        .flatten()
        .map(|c| c.type_.clone())
        .collect();
    let virtual_only = virt_status
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .filter(|c| !host_types.contains(&c.type_))
        .cloned();
    let conditions: Vec<PodCondition> = status
        .conditions
        .take()
        .unwrap_or_default()
        .into_iter()
        .chain(virtual_only)
        .collect();
    status.conditions = (!conditions.is_empty()).then_some(conditions);
    Some(status)
}

/// Exit code and reason the kubelet reports for a container whose end it did not see.
const UNKNOWN_EXIT_CODE: i32 = 137;
const UNKNOWN_REASON: &str = "ContainerStatusUnknown";

/// The status a virtual pod ends with when its host copy is gone before the pod reached a
/// terminal phase (deleted, evicted, or the host pod's last status never came back): `Failed`,
/// every container that had not ended terminated as the kubelet marks one whose end it did
/// not see, and not ready. `None` for a pod that already ended. Without it a pod holding a
/// finalizer (a Job's tracking finalizer) would stay Running and undeletable for ever.
pub fn ended_status(virt: &Pod) -> Option<PodStatus> {
    let mut status = virt.status.clone().unwrap_or_default();
    if matches!(status.phase.as_deref(), Some("Succeeded" | "Failed")) {
        return None;
    }
    status.phase = Some("Failed".into());
    for containers in [
        &mut status.init_container_statuses,
        &mut status.container_statuses,
        &mut status.ephemeral_container_statuses,
    ] {
        containers.iter_mut().flatten().for_each(end_container);
    }
    for condition in status.conditions.iter_mut().flatten() {
        if matches!(condition.type_.as_str(), "Ready" | "ContainersReady") {
            condition.status = "False".into();
            condition.reason = Some("PodFailed".into());
        }
    }
    Some(status)
}

fn end_container(container: &mut ContainerStatus) {
    container.ready = false;
    container.started = Some(false);
    let ended = container
        .state
        .as_ref()
        .is_some_and(|s| s.terminated.is_some());
    if !ended {
        container.last_state = container.state.take();
        container.state = Some(ContainerState {
            terminated: Some(ContainerStateTerminated {
                exit_code: UNKNOWN_EXIT_CODE,
                reason: Some(UNKNOWN_REASON.into()),
                message: Some(
                    "The container could not be located when the pod was terminated".into(),
                ),
                ..Default::default()
            }),
            ..Default::default()
        });
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::test_support::*;
    use super::*;

    /// Status flows back: phase, IPs, conditions.
    #[test]
    fn host_status_is_the_virtual_status() {
        let host: Pod = from_yaml(
            "metadata: {name: x}\nstatus: {phase: Running, podIP: 10.244.0.7, hostIP: 127.0.0.1, conditions: [{type: Ready, status: 'True'}]}",
        );
        let virt: Pod = from_yaml(
            "metadata: {name: x}\nstatus: {phase: Pending, conditions: [{type: Ready, status: 'False'}]}",
        );
        let status = virtual_status(&host, &virt).unwrap();
        assert_eq!(status.phase.as_deref(), Some("Running"));
        assert_eq!(status.pod_ip.as_deref(), Some("10.244.0.7"));
        let conditions = status.conditions.unwrap();
        assert_eq!(conditions.len(), 1);
        assert_eq!(conditions[0].status, "True");
    }

    /// The rewrite-hosts init container vnest adds is left out of the tenant's status.
    #[test]
    fn vnests_own_init_container_is_not_shown() {
        let host: Pod = from_yaml(
            "metadata: {name: x}\nstatus: {phase: Running, initContainerStatuses: [{name: vnest-rewrite-hosts, image: s, imageID: s, ready: true, restartCount: 0}, {name: setup, image: b, imageID: b, ready: true, restartCount: 0}]}",
        );
        let status = virtual_status(&host, &from_yaml("metadata: {name: x}")).unwrap();
        let names: Vec<String> = status
            .init_container_statuses
            .unwrap()
            .into_iter()
            .map(|c| c.name)
            .collect();
        assert_eq!(names, ["setup"]);
    }

    /// The host's LimitRange defaults change the host pod's QoS class; the virtual pod's
    /// (immutable) stays, or every status update would be refused.
    #[test]
    fn the_virtual_qos_class_is_kept() {
        let host: Pod =
            from_yaml("metadata: {name: x}\nstatus: {phase: Running, qosClass: Burstable}");
        let virt: Pod =
            from_yaml("metadata: {name: x}\nstatus: {phase: Pending, qosClass: BestEffort}");
        let status = virtual_status(&host, &virt).unwrap();
        assert_eq!(status.qos_class.as_deref(), Some("BestEffort"));
    }

    /// An eviction's `DisruptionTarget` and a tenant's readiness-gate condition exist only
    /// in the virtual cluster; the host's status keeps them rather than wiping them out.
    #[test]
    fn conditions_only_the_virtual_pod_has_are_kept() {
        let host: Pod = from_yaml(
            "metadata: {name: x}\nstatus: {phase: Running, conditions: [{type: Ready, status: 'True'}]}",
        );
        let virt: Pod = from_yaml(
            "metadata: {name: x}
status:
  phase: Running
  conditions:
  - {type: Ready, status: 'False'}
  - {type: DisruptionTarget, status: 'True', reason: EvictionByEvictionAPI}
  - {type: example.com/feature-ready, status: 'True'}",
        );
        let conditions = virtual_status(&host, &virt).unwrap().conditions.unwrap();
        let shown: Vec<(&str, &str)> = conditions
            .iter()
            .map(|c| (c.type_.as_str(), c.status.as_str()))
            .collect();
        assert_eq!(
            shown,
            [
                ("Ready", "True"),
                ("DisruptionTarget", "True"),
                ("example.com/feature-ready", "True")
            ]
        );
    }

    /// A running pod whose host copy went ends Failed, its running container terminated as
    /// unknown (137) and its finished init container as it was; an ended pod is left alone.
    #[test]
    fn a_pod_whose_host_copy_went_ends_failed() {
        let virt: Pod = from_yaml(
            "metadata: {name: x}
status:
  phase: Running
  conditions: [{type: Ready, status: 'True'}, {type: DisruptionTarget, status: 'True'}]
  initContainerStatuses:
  - {name: init, image: i, imageID: '', ready: true, restartCount: 0, state: {terminated: {exitCode: 0, reason: Completed}}}
  containerStatuses:
  - {name: app, image: a, imageID: '', ready: true, restartCount: 0, started: true, state: {running: {startedAt: '2026-12-07T15:00:00Z'}}}",
        );
        let ended = ended_status(&virt).unwrap();
        assert_eq!(ended.phase.as_deref(), Some("Failed"));
        let app = &ended.container_statuses.as_ref().unwrap()[0];
        let terminated = app.state.as_ref().unwrap().terminated.as_ref().unwrap();
        assert_eq!(terminated.exit_code, 137);
        assert_eq!(terminated.reason.as_deref(), Some("ContainerStatusUnknown"));
        assert!(app.last_state.as_ref().unwrap().running.is_some());
        assert!(!app.ready);
        let init = &ended.init_container_statuses.as_ref().unwrap()[0];
        let init_end = init.state.as_ref().unwrap().terminated.as_ref().unwrap();
        assert_eq!((init_end.exit_code, init.last_state.is_none()), (0, true));
        let conditions = ended.conditions.unwrap();
        assert_eq!(conditions[0].status, "False");
        assert_eq!(conditions[1].status, "True", "DisruptionTarget stays");

        let mut done = virt.clone();
        done.status.as_mut().unwrap().phase = Some("Succeeded".into());
        assert_eq!(ended_status(&done), None);
        let never_started: Pod = from_yaml("metadata: {name: x}");
        assert_eq!(
            ended_status(&never_started).unwrap().phase.as_deref(),
            Some("Failed")
        );
    }
}
