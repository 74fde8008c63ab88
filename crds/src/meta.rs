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

/// Hash of the desired state last applied to an object vnest makes (the operator's children;
/// the syncer's virtual nodes and custom objects; host pods, of the few spec fields that may
/// still change, so they are cached without their containers); a differing hash means the
/// desired state changed and the object must be applied again.
pub const ANNOTATION_APPLIED_HASH: &str = "vnest.dev/applied-hash";

/// On the control plane's pod template: a short hash of `vc-config-<name>`'s content, so a
/// change to it (a `spec.sync` edit) rolls the pod and the restarted syncer reads it.
pub const ANNOTATION_CONFIG_HASH: &str = "vnest.dev/config-hash";

/// Key under which `vc-config-<name>` holds the [`crate::SyncerConfig`] YAML.
pub const SYNCER_CONFIG_KEY: &str = "config.yaml";

/// Longest VirtualCluster name whose host objects can all be made: 52.
///
/// The control plane's StatefulSet sets it: the StatefulSet controller names each revision
/// `<name>-<hash>` (the hash up to 10 characters) and labels every pod
/// `controller-revision-hash: <name>-<hash>`, and a label value holds at most 63 characters,
/// so 63 - 1 - 10 = 52; past it the StatefulSet is created but its pod never is. The next
/// limits are the `<name>-headless` Service (a DNS-1035 label: 54), the pod `<name>-0` (its
/// hostname: 61) and the label values carrying the name itself (63); every other child
/// (`vc-<name>`, `vc-config-<name>`, `vc-cp-<name>`, ...) is a DNS subdomain of up to 253.
pub const MAX_VIRTUAL_CLUSTER_NAME: usize = 52;

/// Why a name longer than [`MAX_VIRTUAL_CLUSTER_NAME`] is refused (after `metadata.name`).
pub fn name_length_reason() -> String {
    format!(
        "must be at most {MAX_VIRTUAL_CLUSTER_NAME} characters: the StatefulSet's pods \
         (label controller-revision-hash=<name>-<hash of up to 10 characters>, at most 63) and \
         the headless Service <name>-headless derive from it"
    )
}

/// Why a name that is not a DNS-1035 label is refused (after `metadata.name`).
pub const NAME_FORMAT_REASON: &str = "must be a DNS-1035 label (lowercase letters, digits and '-', \
     starting with a letter and ending with a letter or digit): the Services <name> and \
     <name>-headless take it";

/// Whether `text` is a DNS-1035 label of any length: what a Service name must be.
fn is_dns1035(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.first().is_some_and(u8::is_ascii_lowercase)
        && bytes
            .last()
            .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
}

/// Why `name` cannot name a VirtualCluster, each reason to follow `metadata.name`: the checks
/// the CRD's CEL rules make on creation, repeated by the operator for a VirtualCluster an
/// older CRD let in.
pub fn virtual_cluster_name_errors(name: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if name.len() > MAX_VIRTUAL_CLUSTER_NAME {
        errors.push(name_length_reason());
    }
    if !is_dns1035(name) {
        errors.push(NAME_FORMAT_REASON.to_string());
    }
    errors
}

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
    /// The Ingress in front of the `<name>` Service (`controlPlane.ingress`).
    pub ingress: String,
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
            ingress: name.to_string(),
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
        assert_eq!(n.ingress, "team-alpha");
        assert_eq!(n.cluster_role, "vc-team-alpha-team-alpha");
    }

    /// Which rule a derived name must follow.
    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Rule {
        /// Service names: at most 63, starting with a letter.
        Dns1035,
        /// Label values and pod hostnames: at most 63.
        Label,
        /// Other object names: at most 253.
        Subdomain,
    }

    fn valid(rule: Rule, text: &str) -> bool {
        let dns1123 = |max: usize| {
            let b = text.as_bytes();
            !b.is_empty()
                && b.len() <= max
                && b[0].is_ascii_alphanumeric()
                && b[b.len() - 1].is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || b"-.".contains(c))
        };
        match rule {
            Rule::Dns1035 => text.len() <= 63 && is_dns1035(text),
            Rule::Label => dns1123(63) && !text.contains('.'),
            Rule::Subdomain => dns1123(253),
        }
    }

    /// Every host name and label value derived from VirtualCluster `name` in `namespace`: the
    /// operator's children, the activity Lease and wake EndpointSlice, and what the
    /// StatefulSet controller derives (pod, revision and its label, claim).
    fn derived(namespace: &str, name: &str) -> Vec<(&'static str, Rule, String)> {
        let n = ChildNames::new(namespace, name, None);
        // The StatefulSet controller's revision hash: a 32-bit FNV hash, safe-encoded, at most
        // 10 characters (kubernetes `controller.ComputeHash`).
        let revision = format!("{}-{}", n.statefulset, "b".repeat(10));
        let pod = format!("{}-0", n.statefulset);
        vec![
            ("Service", Rule::Dns1035, n.service),
            ("headless Service", Rule::Dns1035, n.headless_service),
            ("pod hostname", Rule::Label, pod.clone()),
            ("pod-name label", Rule::Label, pod.clone()),
            (
                "controller-revision-hash label",
                Rule::Label,
                revision.clone(),
            ),
            (
                "name labels (instance, release, control-plane)",
                Rule::Label,
                name.to_string(),
            ),
            ("StatefulSet", Rule::Subdomain, n.statefulset.clone()),
            ("ControllerRevision", Rule::Subdomain, revision),
            ("data claim", Rule::Subdomain, format!("data-{pod}")),
            ("ServiceAccount", Rule::Subdomain, n.service_account),
            ("Role", Rule::Subdomain, n.role),
            ("config Secret", Rule::Subdomain, n.config_secret),
            ("certs Secret", Rule::Subdomain, n.certs_secret),
            ("kubeconfig Secret", Rule::Subdomain, n.kubeconfig_secret),
            ("ResourceQuota", Rule::Subdomain, n.resource_quota),
            ("LimitRange", Rule::Subdomain, n.limit_range),
            (
                "workload NetworkPolicy",
                Rule::Subdomain,
                n.workload_network_policy,
            ),
            (
                "control-plane NetworkPolicy",
                Rule::Subdomain,
                n.control_plane_network_policy,
            ),
            ("ClusterRole", Rule::Subdomain, n.cluster_role),
            (
                "activity Lease",
                Rule::Subdomain,
                crate::activity::lease_name(name),
            ),
            (
                "wake EndpointSlice",
                Rule::Subdomain,
                format!("{name}-wake"),
            ),
        ]
    }

    fn invalid(namespace: &str, name: &str) -> Vec<String> {
        derived(namespace, name)
            .into_iter()
            .filter(|(_, rule, text)| !valid(*rule, text))
            .map(|(what, rule, text)| format!("{what} ({rule:?}): {text} ({})", text.len()))
            .collect()
    }

    /// A name of the maximum length (in the longest namespace) gives only valid host names;
    /// one character more breaks the StatefulSet's revision label, so the limit is tight.
    #[test]
    fn the_longest_allowed_name_gives_valid_host_names_and_one_more_does_not() {
        let namespace = "n".repeat(63);
        let longest = format!("a{}", "b".repeat(MAX_VIRTUAL_CLUSTER_NAME - 1));
        assert!(virtual_cluster_name_errors(&longest).is_empty());
        assert_eq!(invalid(&namespace, &longest), Vec::<String>::new());

        let too_long = format!("{longest}c");
        let broken = invalid(&namespace, &too_long);
        assert_eq!(broken.len(), 1, "{broken:?}");
        assert!(
            broken[0].starts_with("controller-revision-hash label"),
            "{broken:?}"
        );
        assert_eq!(
            virtual_cluster_name_errors(&too_long),
            [format!(
                "must be at most {MAX_VIRTUAL_CLUSTER_NAME} characters: the StatefulSet's pods \
                 (label controller-revision-hash=<name>-<hash of up to 10 characters>, at most \
                 63) and the headless Service <name>-headless derive from it"
            )]
        );
        // The 63-character name of the report breaks the headless Service as well.
        let broken = invalid(&namespace, &"a".repeat(63));
        assert!(
            broken.iter().any(|b| b.starts_with("headless Service")),
            "{broken:?}"
        );
    }

    /// Names a Service cannot take are refused whatever their length.
    #[test]
    fn names_that_are_not_dns_1035_labels_are_refused() {
        for name in ["1team", "team.alpha", "team-", "Team", "", "team_a"] {
            assert_eq!(
                virtual_cluster_name_errors(name),
                [NAME_FORMAT_REASON],
                "{name:?}"
            );
            assert!(!invalid("ns", name).is_empty(), "{name:?}");
        }
        for name in ["a", "team-alpha", "t3", "a-1"] {
            assert!(virtual_cluster_name_errors(name).is_empty(), "{name:?}");
            assert_eq!(invalid("ns", name), Vec::<String>::new(), "{name:?}");
        }
    }

    #[test]
    fn kubeconfig_secret_name_can_be_overridden() {
        let n = ChildNames::new("ns", "vc", Some("tenant-kubeconfig"));
        assert_eq!(n.kubeconfig_secret, "tenant-kubeconfig");
    }
}
