//! Label, annotation and name spellings shared by the operator and the syncer.

use std::collections::BTreeMap;

/// `app.kubernetes.io/managed-by` value on every object the operator creates.
pub const OPERATOR_MANAGER: &str = "vnest-operator";
pub const LABEL_MANAGED_BY: &str = "app.kubernetes.io/managed-by";
pub const LABEL_INSTANCE: &str = "app.kubernetes.io/instance";
pub const LABEL_COMPONENT: &str = "app.kubernetes.io/component";
/// The VirtualCluster an operator-made object belongs to.
pub const LABEL_VIRTUAL_CLUSTER: &str = "vnest.dev/virtual-cluster";
/// On cluster-scoped objects (which cannot be owned): the namespace of that VirtualCluster.
pub const LABEL_VIRTUAL_CLUSTER_NAMESPACE: &str = "vnest.dev/virtual-cluster-namespace";
/// Finalizer that removes a VirtualCluster's cluster-scoped and syncer-made objects.
pub const FINALIZER: &str = "vnest.dev/cleanup";
/// On a namespace: the VirtualCluster whose Pod Security Standard its labels carry.
pub const ANNOTATION_POD_SECURITY_FROM: &str = "vnest.dev/pod-security-from";

/// Pod labels the seed's dashboards, alert rules and runbooks select on
/// (`app=vcluster,release=<name>`). Any tenant pod can carry them too, so nothing the operator
/// makes routes traffic or grants access by them; the StatefulSet's selector keeps them only
/// because a selector cannot change.
pub const LABEL_APP: &str = "app";
pub const APP_VCLUSTER: &str = "vcluster";
pub const LABEL_RELEASE: &str = "release";

/// On the control-plane pod: `vnest.dev/control-plane: <name>`. The `<name>` and
/// `<name>-headless` Services and the NetworkPolicies select the control plane by this label
/// alone: it is under a [reserved prefix](RESERVED_LABEL_PREFIXES), so no pod the syncer makes
/// from a tenant's can carry it.
pub const LABEL_CONTROL_PLANE: &str = "vnest.dev/control-plane";

/// Label key prefixes of the syncer (`vcluster.loft.sh/`, its markers) and the operator
/// (`vnest.dev/`, among them [`LABEL_CONTROL_PLANE`] and [`LABEL_VIRTUAL_CLUSTER`]). A tenant
/// label under them never reaches a host object as written: the syncer rewrites its key, and
/// pod patches may not set it, so a host selector on these keys matches only what vnest made.
pub const RESERVED_LABEL_PREFIXES: [&str; 2] = ["vcluster.loft.sh/", "vnest.dev/"];

/// The selector of VirtualCluster `name`'s control-plane pod, as its Services and
/// NetworkPolicies write it.
pub fn control_plane_selector(name: &str) -> BTreeMap<String, String> {
    BTreeMap::from([(LABEL_CONTROL_PLANE.to_string(), name.to_string())])
}

/// Whether label `key` is vnest's own (see [`RESERVED_LABEL_PREFIXES`]).
pub fn is_reserved_label_key(key: &str) -> bool {
    RESERVED_LABEL_PREFIXES.iter().any(|p| key.starts_with(p))
}

/// On host objects the syncer creates: the virtual cluster that owns them, and the virtual
/// namespace they came from (vCluster's spellings, which runbooks rely on).
pub const LABEL_SYNCER_MANAGED_BY: &str = "vcluster.loft.sh/managed-by";
pub const LABEL_SYNCER_NAMESPACE: &str = "vcluster.loft.sh/namespace";
pub const ANNOTATION_OBJECT_NAME: &str = "vcluster.loft.sh/object-name";
pub const ANNOTATION_OBJECT_NAMESPACE: &str = "vcluster.loft.sh/object-namespace";
pub const ANNOTATION_OBJECT_UID: &str = "vcluster.loft.sh/object-uid";
pub const ANNOTATION_OBJECT_KIND: &str = "vcluster.loft.sh/object-kind";

/// On the host Secret carrying a pod's virtual service-account token: when (Unix seconds) the
/// syncer renews it, so a restarted syncer does not mint a new one early.
pub const ANNOTATION_TOKEN_RENEW_AT: &str = "vnest.dev/token-renew-at";

/// On virtual objects the syncer copied from the host (fromHost classes, bound volumes): only
/// objects carrying it are ever updated or deleted by the syncer.
pub const LABEL_FROM_HOST: &str = "vnest.dev/from-host";

/// On host Services the syncer made for `networking.replicateServices.toHost` (beside the
/// managed-by label, which scopes them to one virtual cluster).
pub const LABEL_REPLICATED_TO_HOST: &str = "vnest.dev/replicated-to-host";
/// On replicated Services, both ways: `<namespace>/<name>` of the Service they mirror.
pub const ANNOTATION_REPLICATED_FROM: &str = "vnest.dev/replicated-from";

/// Hash of the desired state last applied to an operator-made object; a differing hash means
/// the spec changed and the object must be applied again.
pub const ANNOTATION_APPLIED_HASH: &str = "vnest.dev/applied-hash";

/// On the control plane's pod template: a short hash of `vc-config-<name>`'s content, so a
/// change to it (a `spec.sync` edit) rolls the pod and the restarted syncer reads it.
pub const ANNOTATION_CONFIG_HASH: &str = "vnest.dev/config-hash";

/// Key under which `vc-config-<name>` holds the [`crate::SyncerConfig`] YAML.
pub const SYNCER_CONFIG_KEY: &str = "config.yaml";

/// Names of the host objects that make up virtual cluster `name`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChildNames {
    pub statefulset: String,
    pub service: String,
    pub headless_service: String,
    pub service_account: String,
    pub role: String,
    pub config_secret: String,
    pub certs_secret: String,
    pub kubeconfig_secret: String,
    pub resource_quota: String,
    pub limit_range: String,
    pub workload_network_policy: String,
    pub control_plane_network_policy: String,
    /// The ClusterRole and ClusterRoleBinding (cluster-scoped, so the namespace is in it).
    pub cluster_role: String,
}

impl ChildNames {
    pub fn new(namespace: &str, name: &str, kubeconfig_secret: Option<&str>) -> Self {
        ChildNames {
            statefulset: name.to_string(),
            service: name.to_string(),
            headless_service: format!("{name}-headless"),
            service_account: format!("vc-{name}"),
            role: format!("vc-{name}"),
            config_secret: format!("vc-config-{name}"),
            certs_secret: format!("{name}-certs"),
            kubeconfig_secret: kubeconfig_secret.map_or_else(|| format!("vc-{name}"), String::from),
            resource_quota: format!("vc-{name}"),
            limit_range: format!("vc-{name}"),
            workload_network_policy: format!("vc-work-{name}"),
            control_plane_network_policy: format!("vc-cp-{name}"),
            cluster_role: format!("vc-{namespace}-{name}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn child_names_follow_the_design_table() {
        let n = ChildNames::new("team-alpha", "team-alpha", None);
        assert_eq!(n.statefulset, "team-alpha");
        assert_eq!(n.headless_service, "team-alpha-headless");
        assert_eq!(n.config_secret, "vc-config-team-alpha");
        assert_eq!(n.certs_secret, "team-alpha-certs");
        assert_eq!(n.kubeconfig_secret, "vc-team-alpha");
        assert_eq!(n.workload_network_policy, "vc-work-team-alpha");
        assert_eq!(n.control_plane_network_policy, "vc-cp-team-alpha");
        assert_eq!(n.cluster_role, "vc-team-alpha-team-alpha");
    }

    #[test]
    fn kubeconfig_secret_name_can_be_overridden() {
        let n = ChildNames::new("ns", "vc", Some("tenant-kubeconfig"));
        assert_eq!(n.kubeconfig_secret, "tenant-kubeconfig");
    }
}
