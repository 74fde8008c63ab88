//! Desired state: pure functions from a VirtualCluster (plus operator settings and its PKI)
//! to the host objects that should exist, and those that should not.

mod activity;
mod distro;
mod egress;
mod ingress;
mod network;
mod policies;
mod rbac;
mod secrets;
mod security;
mod workload;

/// The control plane's data claim size when the spec sets none.
pub const DEFAULT_PERSISTENCE_SIZE: &str = "5Gi";
/// The control-plane container's `(cpu, memory)` requests when the spec sets no resources.
pub const DEFAULT_CONTROL_PLANE_REQUESTS: (&str, &str) = ("200m", "256Mi");
/// The control-plane container's `(cpu, memory)` limits when the spec sets no resources.
pub const DEFAULT_CONTROL_PLANE_LIMITS: (&str, &str) = ("1", "1Gi");

use std::collections::BTreeMap;

use k8s_openapi::{
    api::{
        apps::v1::StatefulSet,
        coordination::v1::Lease,
        core::v1::{LimitRange, ResourceQuota, Secret, Service, ServiceAccount},
        discovery::v1::EndpointSlice,
        networking::v1::{Ingress, NetworkPolicy},
        rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding},
    },
    apimachinery::pkg::apis::meta::v1::OwnerReference,
};
use kube::{Resource, core::ApiResource};
use serde_json::{Value, json};
use vnest_crds::{
    VirtualClusterSpec,
    meta::{self, ChildNames},
};

use crate::{
    certs::Certs,
    settings::{Settings, WakeEndpoint},
};

pub use network::endpoint;

/// Where the control-plane pod mounts the data claim, `vc-config-<name>` and `<name>-certs`.
const DATA_DIR: &str = "/data";
const CONFIG_DIR: &str = "/etc/vnest/config";
const CERTS_DIR: &str = "/etc/vnest/certs";
pub use secrets::server_sans;

/// The kinds of host object the operator manages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ChildKind {
    ServiceAccount,
    Role,
    RoleBinding,
    ClusterRole,
    ClusterRoleBinding,
    Secret,
    Service,
    StatefulSet,
    ResourceQuota,
    LimitRange,
    NetworkPolicy,
    Lease,
    EndpointSlice,
    Ingress,
}

impl ChildKind {
    pub const ALL: [ChildKind; 14] = [
        ChildKind::ServiceAccount,
        ChildKind::Role,
        ChildKind::RoleBinding,
        ChildKind::ClusterRole,
        ChildKind::ClusterRoleBinding,
        ChildKind::Secret,
        ChildKind::Service,
        ChildKind::StatefulSet,
        ChildKind::ResourceQuota,
        ChildKind::LimitRange,
        ChildKind::NetworkPolicy,
        ChildKind::Lease,
        ChildKind::EndpointSlice,
        ChildKind::Ingress,
    ];

    pub fn api_resource(self) -> ApiResource {
        match self {
            ChildKind::ServiceAccount => ApiResource::erase::<ServiceAccount>(&()),
            ChildKind::Role => ApiResource::erase::<Role>(&()),
            ChildKind::RoleBinding => ApiResource::erase::<RoleBinding>(&()),
            ChildKind::ClusterRole => ApiResource::erase::<ClusterRole>(&()),
            ChildKind::ClusterRoleBinding => ApiResource::erase::<ClusterRoleBinding>(&()),
            ChildKind::Secret => ApiResource::erase::<Secret>(&()),
            ChildKind::Service => ApiResource::erase::<Service>(&()),
            ChildKind::StatefulSet => ApiResource::erase::<StatefulSet>(&()),
            ChildKind::ResourceQuota => ApiResource::erase::<ResourceQuota>(&()),
            ChildKind::LimitRange => ApiResource::erase::<LimitRange>(&()),
            ChildKind::NetworkPolicy => ApiResource::erase::<NetworkPolicy>(&()),
            ChildKind::Lease => ApiResource::erase::<Lease>(&()),
            ChildKind::EndpointSlice => ApiResource::erase::<EndpointSlice>(&()),
            ChildKind::Ingress => ApiResource::erase::<Ingress>(&()),
        }
    }

    /// Cluster-scoped kinds cannot carry an owner reference to a namespaced VirtualCluster;
    /// the finalizer removes them.
    pub fn is_cluster_scoped(self) -> bool {
        matches!(self, ChildKind::ClusterRole | ChildKind::ClusterRoleBinding)
    }
}

/// One host object to apply, as the JSON body of a server-side apply.
#[derive(Clone, Debug, PartialEq)]
pub struct Child {
    pub kind: ChildKind,
    pub name: String,
    pub object: Value,
}

/// Everything one VirtualCluster should and should not have on the host.
#[derive(Clone, Debug, PartialEq)]
pub struct DesiredState {
    pub children: Vec<Child>,
    /// Objects a disabled feature created earlier; deleted when present.
    pub absent: Vec<(ChildKind, String)>,
    /// Labels the VirtualCluster sets on its namespace (Pod Security Standard).
    pub namespace_labels: BTreeMap<String, String>,
}

/// What the builders need to know about the VirtualCluster being reconciled.
pub struct Input<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    pub uid: &'a str,
    pub spec: &'a VirtualClusterSpec,
    pub settings: &'a Settings,
    pub certs: &'a Certs,
    /// Replicas of the StatefulSet: 1 when awake, 0 while sleeping or paused.
    pub replicas: i32,
    /// Set while the `<name>` Service routes to the operator's wake endpoint instead of the
    /// control-plane pod (see `crate::wake::routes_to_wake`).
    pub wake: Option<WakeEndpoint>,
}

impl Input<'_> {
    pub fn names(&self) -> ChildNames {
        ChildNames::new(
            self.namespace,
            self.name,
            self.spec.export_kubeconfig.secret.name.as_deref(),
        )
    }

    /// Labels every operator-made object carries.
    pub fn labels(&self, component: &str) -> BTreeMap<String, String> {
        BTreeMap::from([
            (
                meta::LABEL_MANAGED_BY.to_string(),
                meta::OPERATOR_MANAGER.to_string(),
            ),
            (meta::LABEL_INSTANCE.to_string(), self.name.to_string()),
            (meta::LABEL_COMPONENT.to_string(), component.to_string()),
            (
                meta::LABEL_VIRTUAL_CLUSTER.to_string(),
                self.name.to_string(),
            ),
        ])
    }

    /// Pod labels the seed's dashboards and runbooks select on (`app=vcluster,release=<name>`),
    /// and the StatefulSet's selector, which cannot change on an existing StatefulSet. A tenant
    /// pod can carry them too, so nothing that routes traffic or admits it selects on them.
    pub fn runbook_labels(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            (meta::LABEL_APP.to_string(), meta::APP_VCLUSTER.to_string()),
            (meta::LABEL_RELEASE.to_string(), self.name.to_string()),
        ])
    }

    /// What the Services and NetworkPolicies select the control-plane pod by: a label no pod the
    /// syncer makes can carry (see [`meta::LABEL_CONTROL_PLANE`]).
    pub fn control_plane_selector(&self) -> BTreeMap<String, String> {
        meta::control_plane_selector(self.name)
    }

    fn owner_reference(&self) -> OwnerReference {
        OwnerReference {
            api_version: vnest_crds::VirtualCluster::api_version(&()).into_owned(),
            kind: vnest_crds::VirtualCluster::kind(&()).into_owned(),
            name: self.name.to_string(),
            uid: self.uid.to_string(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }
    }

    /// `apiVersion`, `kind` and `metadata` of a child; owner reference on namespaced ones.
    fn child(&self, kind: ChildKind, name: &str, component: &str, body: Value) -> Child {
        let ar = kind.api_resource();
        let mut labels = self.labels(component);
        if kind.is_cluster_scoped() {
            labels.insert(
                meta::LABEL_VIRTUAL_CLUSTER_NAMESPACE.to_string(),
                self.namespace.to_string(),
            );
        }
        let mut metadata = json!({ "name": name, "labels": labels });
        if !kind.is_cluster_scoped() {
            metadata["namespace"] = json!(self.namespace);
            metadata["ownerReferences"] = json!([self.owner_reference()]);
        }
        let mut object =
            json!({ "apiVersion": ar.api_version, "kind": ar.kind, "metadata": metadata });
        if let (Value::Object(target), Value::Object(extra)) = (&mut object, body) {
            target.extend(extra);
        }
        Child {
            kind,
            name: name.to_string(),
            object,
        }
    }
}

/// The complete desired state of one VirtualCluster.
pub fn desired_state(input: &Input) -> DesiredState {
    let names = input.names();
    let mut children = Vec::new();
    let mut absent = Vec::new();

    children.extend(rbac::namespaced(input, &names));
    match rbac::cluster(input, &names) {
        Some(objects) => children.extend(objects),
        None => absent.extend([
            (ChildKind::ClusterRole, names.cluster_role.clone()),
            (ChildKind::ClusterRoleBinding, names.cluster_role.clone()),
        ]),
    }
    children.push(secrets::syncer_config(input, &names));
    children.push(secrets::kubeconfig(input, &names));
    children.extend(network::services(input, &names));
    children.push(workload::statefulset(input, &names));
    children.push(activity::lease(input));

    let optional = [
        (
            ChildKind::ResourceQuota,
            names.resource_quota.clone(),
            policies::resource_quota(input, &names),
        ),
        (
            ChildKind::LimitRange,
            names.limit_range.clone(),
            policies::limit_range(input, &names),
        ),
        (
            ChildKind::NetworkPolicy,
            names.workload_network_policy.clone(),
            network::workload_policy(input, &names),
        ),
        (
            ChildKind::NetworkPolicy,
            names.control_plane_network_policy.clone(),
            network::control_plane_policy(input, &names),
        ),
        (
            ChildKind::EndpointSlice,
            network::wake_slice_name(input.name),
            network::wake_endpoint_slice(input, &names),
        ),
        // Last: an Ingress the API server refuses leaves the control plane made.
        (
            ChildKind::Ingress,
            names.ingress.clone(),
            ingress::control_plane_ingress(input, &names),
        ),
    ];
    for (kind, name, child) in optional {
        match child {
            Some(child) => children.push(child),
            None => absent.push((kind, name)),
        }
    }

    DesiredState {
        children,
        absent,
        namespace_labels: policies::namespace_labels(input.spec),
    }
}

#[cfg(test)]
pub(crate) mod test_support {
    use std::sync::LazyLock;

    use super::*;

    pub static CERTS: LazyLock<Certs> = LazyLock::new(|| {
        Certs::generate("team-alpha/team-alpha", &["team-alpha".to_string()]).unwrap()
    });
    pub static SETTINGS: LazyLock<Settings> = LazyLock::new(Settings::default);

    pub fn input(spec: &VirtualClusterSpec) -> Input<'_> {
        Input {
            namespace: "team-alpha",
            name: "team-alpha",
            uid: "uid-1",
            spec,
            settings: &SETTINGS,
            certs: &CERTS,
            replicas: 1,
            wake: None,
        }
    }

    pub fn spec_from_yaml(yaml: &str) -> VirtualClusterSpec {
        serde_yaml::from_str(yaml).unwrap()
    }

    /// The object `make` wants for the spec `yaml` (which must want one).
    pub fn wanted(yaml: &str, make: fn(&Input, &ChildNames) -> Option<Child>) -> serde_json::Value {
        let spec = spec_from_yaml(yaml);
        let i = input(&spec);
        make(&i, &i.names()).expect("the spec wants it").object
    }

    /// The control plane StatefulSet of the spec `yaml`.
    pub fn sts(yaml: &str) -> serde_json::Value {
        let spec = spec_from_yaml(yaml);
        let i = input(&spec);
        workload::statefulset(&i, &i.names()).object
    }

    /// A spec per distribution and backing store beside the default (k3s on SQLite).
    pub const K8S: &str = "controlPlane: {distro: {k8s: {enabled: true}}}";
    pub const K8S_ETCD: &str = "controlPlane: {distro: {k8s: {enabled: true}}, backingStore: {etcd: {embedded: {enabled: true}}}}";
    pub const K3S_ETCD: &str = "controlPlane: {backingStore: {etcd: {embedded: {enabled: true}}}}";
    pub const K0S: &str = "controlPlane: {distro: {k0s: {enabled: true}}}";

    pub fn find<'a>(state: &'a DesiredState, kind: ChildKind, name: &str) -> Option<&'a Child> {
        state
            .children
            .iter()
            .find(|c| c.kind == kind && c.name == name)
    }

    /// The object of the child `kind`/`name`, which the state must hold.
    pub fn object<'a>(
        state: &'a DesiredState,
        kind: ChildKind,
        name: &str,
    ) -> &'a serde_json::Value {
        &find(state, kind, name)
            .unwrap_or_else(|| panic!("no {kind:?} {name} in the desired state"))
            .object
    }
}

#[cfg(test)]
mod tests {
    use super::{test_support::*, *};

    #[test]
    fn a_default_spec_makes_the_core_objects_and_no_optional_ones() {
        let spec = VirtualClusterSpec::default();
        let state = desired_state(&input(&spec));
        let mut kinds: Vec<_> = state
            .children
            .iter()
            .map(|c| (c.kind, c.name.as_str()))
            .collect();
        kinds.sort();
        assert_eq!(
            kinds,
            vec![
                (ChildKind::ServiceAccount, "vc-team-alpha"),
                (ChildKind::Role, "vc-team-alpha"),
                (ChildKind::RoleBinding, "vc-team-alpha"),
                (ChildKind::ClusterRole, "vc-team-alpha-team-alpha"),
                (ChildKind::ClusterRoleBinding, "vc-team-alpha-team-alpha"),
                (ChildKind::Secret, "vc-config-team-alpha"),
                (ChildKind::Secret, "vc-team-alpha"),
                (ChildKind::Service, "team-alpha"),
                (ChildKind::Service, "team-alpha-headless"),
                (ChildKind::StatefulSet, "team-alpha"),
                (ChildKind::Lease, "team-alpha-activity"),
            ]
        );
        assert!(
            state
                .absent
                .contains(&(ChildKind::ResourceQuota, "vc-team-alpha".into()))
        );
        assert!(
            state
                .absent
                .contains(&(ChildKind::NetworkPolicy, "vc-work-team-alpha".into()))
        );
        assert!(state.namespace_labels.is_empty());
    }

    #[test]
    fn namespaced_children_are_owned_and_labelled_cluster_ones_are_not_owned() {
        let spec = VirtualClusterSpec::default();
        let state = desired_state(&input(&spec));
        for child in &state.children {
            let metadata = &child.object["metadata"];
            assert_eq!(
                metadata["labels"][meta::LABEL_MANAGED_BY],
                "vnest-operator",
                "{}",
                child.name
            );
            assert_eq!(
                metadata["labels"][meta::LABEL_VIRTUAL_CLUSTER],
                "team-alpha"
            );
            if child.kind.is_cluster_scoped() {
                assert!(metadata.get("ownerReferences").is_none());
                assert!(metadata.get("namespace").is_none());
            } else {
                assert_eq!(metadata["namespace"], "team-alpha");
                assert_eq!(metadata["ownerReferences"][0]["kind"], "VirtualCluster");
                assert_eq!(metadata["ownerReferences"][0]["uid"], "uid-1");
                assert_eq!(metadata["ownerReferences"][0]["controller"], true);
            }
        }
    }

    /// With the longest name the CRD lets in (in the longest namespace), every child the
    /// operator applies, awake or asleep, has a name and label values the API server takes,
    /// and so has the revision label the StatefulSet controller gives the pod. The other
    /// names derived from the StatefulSet are checked beside the constant in `vnest_crds::meta`.
    #[test]
    fn the_longest_allowed_name_gives_children_the_api_server_accepts() {
        let name = "a".repeat(meta::MAX_VIRTUAL_CLUSTER_NAME);
        let namespace = "n".repeat(63);
        let spec = spec_from_yaml(
            "policies: {resourceQuota: {enabled: true}, limitRange: {enabled: true}, networkPolicy: {enabled: true}}",
        );
        let awake = Input {
            namespace: &namespace,
            name: &name,
            ..input(&spec)
        };
        let asleep = Input {
            replicas: 0,
            wake: Some(crate::settings::WakeEndpoint {
                ip: "10.0.0.1".parse().unwrap(),
                port: 9443,
            }),
            ..Input {
                namespace: &namespace,
                name: &name,
                ..input(&spec)
            }
        };
        let children: Vec<Child> = [awake, asleep]
            .iter()
            .flat_map(|i| desired_state(i).children)
            .collect();
        assert!(children.iter().any(|c| c.kind == ChildKind::EndpointSlice));
        for child in &children {
            let limit = if child.kind == ChildKind::Service {
                63
            } else {
                253
            };
            assert!(child.name.len() <= limit, "{:?} {}", child.kind, child.name);
            let metadata = &child.object["metadata"];
            let template = &child.object["spec"]["template"]["metadata"];
            for labels in [&metadata["labels"], &template["labels"]] {
                for (key, value) in labels.as_object().into_iter().flatten() {
                    let value = value.as_str().unwrap();
                    assert!(
                        value.len() <= 63,
                        "{:?} {}: {key}={value}",
                        child.kind,
                        child.name
                    );
                }
            }
            if child.kind == ChildKind::StatefulSet {
                // `controller-revision-hash: <name>-<hash of up to 10 characters>`.
                assert!(child.name.len() + 1 + 10 <= 63, "{}", child.name);
            }
        }
        assert!(crate::validate::validate_name(&name).is_ok());
        assert!(crate::validate::validate_name(&format!("{name}a")).is_err());
    }

    #[test]
    fn enabling_every_policy_adds_its_objects() {
        let spec = spec_from_yaml(
            "policies: {resourceQuota: {enabled: true}, limitRange: {enabled: true}, networkPolicy: {enabled: true}, podSecurityStandard: restricted}",
        );
        let state = desired_state(&input(&spec));
        assert!(find(&state, ChildKind::ResourceQuota, "vc-team-alpha").is_some());
        assert!(find(&state, ChildKind::LimitRange, "vc-team-alpha").is_some());
        assert!(find(&state, ChildKind::NetworkPolicy, "vc-work-team-alpha").is_some());
        assert!(find(&state, ChildKind::NetworkPolicy, "vc-cp-team-alpha").is_some());
        // Only the wake EndpointSlice, which exists while asleep, and the disabled Ingress.
        assert_eq!(
            state.absent,
            vec![
                (ChildKind::EndpointSlice, "team-alpha-wake".to_string()),
                (ChildKind::Ingress, "team-alpha".to_string()),
            ]
        );
        assert_eq!(
            state.namespace_labels["pod-security.kubernetes.io/enforce"],
            "restricted"
        );
    }
}
