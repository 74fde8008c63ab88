//! PriorityClasses to the host (`sync.toHost.priorityclasses`): a tenant's class becomes the
//! cluster-scoped `vcluster-<name>-x-<host namespace>-x-<vc>` (design.md), never the host's
//! global default, and pods name it under that name. `system-` classes are the API server's
//! own (their values are above what any other class may have): they are not copied, and a
//! pod asking for one gets the host's default priority, so no tenant claims system priority
//! on the host.

use std::collections::BTreeMap;

use k8s_openapi::api::{core::v1::PodSpec, scheduling::v1::PriorityClass};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use vnest_crds::{
    meta::{LABEL_SYNCER_NAMESPACE, LABEL_VIRTUAL_CLUSTER_NAMESPACE},
    translate,
};

use super::{Target, host_annotations};

/// The host name of virtual class `name`, or `None` for the API server's own classes.
pub fn host_class_name(name: &str, target: &Target) -> Option<String> {
    (!name.starts_with("system-"))
        .then(|| translate::host_cluster_name(name, &target.host_namespace, &target.vc))
}

/// Labels scoping a host class to one virtual cluster: managed-by `<vc>` alone is not unique
/// across host namespaces, so the VirtualCluster's namespace goes beside it.
pub fn host_labels(
    labels: Option<&BTreeMap<String, String>>,
    target: &Target,
) -> BTreeMap<String, String> {
    let mut out = translate::host_labels(labels, "", &target.vc);
    out.remove(LABEL_SYNCER_NAMESPACE);
    out.insert(
        LABEL_VIRTUAL_CLUSTER_NAMESPACE.to_string(),
        target.host_namespace.clone(),
    );
    out
}

/// The label selector of every host class this virtual cluster's syncer made.
pub fn host_copies_selector(target: &Target) -> String {
    let labels = host_labels(None, target);
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The host copy of virtual class `virt`, or `None` when it is not copied.
pub fn host_priority_class(virt: &PriorityClass, target: &Target) -> Option<PriorityClass> {
    let name = virt.metadata.name.as_deref().unwrap_or_default();
    let host_name = host_class_name(name, target)?;
    let annotations = host_annotations("PriorityClass", &virt.metadata);
    Some(PriorityClass {
        metadata: ObjectMeta {
            name: Some(host_name),
            labels: Some(host_labels(virt.metadata.labels.as_ref(), target)),
            annotations: Some(annotations),
            ..Default::default()
        },
        value: virt.value,
        // A tenant's default applies inside its virtual cluster, never to the whole host.
        // Unset rather than false: the API server omits false, and an unset field reads
        // back equal, so an unchanged copy is never written again.
        global_default: None,
        preemption_policy: virt.preemption_policy.clone(),
        description: virt.description.clone(),
    })
}

/// Points a host pod at the host copy of its class (or at the host's default for a
/// `system-` class: the class and the priority it gave go).
pub fn translate_pod_priority(spec: &mut PodSpec, target: &Target) {
    let Some(name) = spec.priority_class_name.take() else {
        return;
    };
    spec.priority_class_name = host_class_name(&name, target);
    if spec.priority_class_name.is_none() {
        spec.priority = None;
        spec.preemption_policy = None;
    }
}

#[cfg(test)]
mod tests {
    use vnest_crds::meta::{ANNOTATION_OBJECT_NAME, LABEL_SYNCER_MANAGED_BY};

    use super::super::test_support::*;
    use super::*;

    /// The host copy has the cluster-scoped host name, the tenant's value and policy, is
    /// never the global default, and is scoped to this virtual cluster.
    #[test]
    fn a_tenant_class_becomes_a_host_class_that_is_never_the_default() {
        let virt: PriorityClass = from_yaml(
            "metadata: {name: high, uid: u-1, labels: {team: a}}\nvalue: 1000\nglobalDefault: true\npreemptionPolicy: Never\ndescription: batch",
        );
        let host = host_priority_class(&virt, &target()).unwrap();
        assert_eq!(
            host.metadata.name.as_deref(),
            Some("vcluster-high-x-host-ns-x-vc")
        );
        assert!(host.metadata.namespace.is_none());
        assert_eq!(host.value, Some(1000));
        assert_eq!(host.global_default, None, "never the host's default");
        assert_eq!(host.preemption_policy.as_deref(), Some("Never"));
        let labels = host.metadata.labels.unwrap();
        assert_eq!(labels["team"], "a");
        assert_eq!(labels[LABEL_SYNCER_MANAGED_BY], "vc");
        assert_eq!(labels[LABEL_VIRTUAL_CLUSTER_NAMESPACE], "host-ns");
        assert!(!labels.contains_key(LABEL_SYNCER_NAMESPACE));
        assert_eq!(
            host.metadata.annotations.unwrap()[ANNOTATION_OBJECT_NAME],
            "high"
        );
        assert_eq!(
            host_copies_selector(&target()),
            "vcluster.loft.sh/managed-by=vc,vnest.dev/virtual-cluster-namespace=host-ns"
        );
    }

    /// The API server's own classes stay where they are.
    #[test]
    fn system_classes_are_not_copied() {
        let virt: PriorityClass =
            from_yaml("metadata: {name: system-cluster-critical}\nvalue: 2000000000");
        assert!(host_priority_class(&virt, &target()).is_none());
    }

    /// Pods name the host copy; a system class leaves the host to pick the priority.
    #[test]
    fn pods_name_the_host_copy_and_never_a_system_class() {
        let mut spec: PodSpec =
            from_yaml("priorityClassName: high\npriority: 1000\ncontainers: []");
        translate_pod_priority(&mut spec, &target());
        assert_eq!(
            spec.priority_class_name.as_deref(),
            Some("vcluster-high-x-host-ns-x-vc")
        );
        assert_eq!(spec.priority, Some(1000));
        let mut spec: PodSpec = from_yaml(
            "priorityClassName: system-node-critical\npriority: 2000001000\npreemptionPolicy: PreemptLowerPriority\ncontainers: []",
        );
        translate_pod_priority(&mut spec, &target());
        assert_eq!(
            (
                spec.priority_class_name,
                spec.priority,
                spec.preemption_policy
            ),
            (None, None, None)
        );
        let mut spec: PodSpec = from_yaml("priority: 0\ncontainers: []");
        translate_pod_priority(&mut spec, &target());
        assert_eq!((spec.priority_class_name, spec.priority), (None, Some(0)));
    }
}
