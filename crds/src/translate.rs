//! Names, labels and selectors of host copies of virtual objects, spelled byte for byte as
//! vCluster spells them, so runbooks and dashboards written for vCluster keep working.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

use crate::digest::sha256_hex;
use crate::meta::{
    ANNOTATION_OBJECT_KIND, ANNOTATION_OBJECT_NAME, ANNOTATION_OBJECT_NAMESPACE,
    ANNOTATION_OBJECT_UID, LABEL_SYNCER_MANAGED_BY, LABEL_SYNCER_NAMESPACE, is_reserved_label_key,
};

/// Longest name a label value or DNS-1123 label may have.
const MAX_NAME: usize = 63;
/// Prefix of a rewritten tenant label key (vCluster's `LabelPrefix`).
const REWRITTEN_LABEL_PREFIX: &str = "vcluster.loft.sh/label";

/// vCluster's `SafeConcatName`: the parts joined with `-`; past 63 bytes, the first 52, `-`
/// and 10 hex digits of the SHA-256 of the whole, with every `.-` collapsed to `-`.
pub fn safe_concat_name(parts: &[&str]) -> String {
    let full = parts.join("-");
    if full.len() <= MAX_NAME {
        return full;
    }
    let hash = sha256_hex(full.as_bytes());
    // Kubernetes names are ASCII, so byte 52 is a character boundary; a stray non-ASCII name
    // is cut at the nearest boundary below rather than panicking.
    let mut cut = 52;
    while !full.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}-{}", &full[..cut], &hash[..10]).replace(".-", "-")
}

/// Host name of namespaced object `name` in virtual namespace `namespace` of virtual
/// cluster `vc`: `name-x-namespace-x-vc`, hashed past 63 characters.
pub fn host_name(name: &str, namespace: &str, vc: &str) -> String {
    safe_concat_name(&[name, "x", namespace, "x", vc])
}

/// Host name of cluster-scoped object `name`: `vcluster-name-x-<host namespace>-x-vc`.
pub fn host_cluster_name(name: &str, host_namespace: &str, vc: &str) -> String {
    safe_concat_name(&["vcluster", name, "x", host_namespace, "x", vc])
}

/// The host key of a tenant label key: unchanged, unless it is reserved (`vcluster.loft.sh/…`
/// or `vnest.dev/…`, see [`crate::meta::RESERVED_LABEL_PREFIXES`]), which becomes
/// `vcluster.loft.sh/label-<vc>-x-<10 hex of sha256(key)>` as vCluster does for its marker
/// labels, so a tenant can never forge the syncer's labels nor the operator's (a pod labelled
/// `vnest.dev/control-plane` would otherwise join the control plane's Services).
pub fn host_label_key(key: &str, vc: &str) -> String {
    if !is_reserved_label_key(key) {
        return key.to_string();
    }
    let hash = sha256_hex(key.as_bytes());
    safe_concat_name(&[REWRITTEN_LABEL_PREFIX, vc, "x", &hash[..10]])
}

/// Tenant labels as the host copy carries them, plus `managed-by: <vc>` and
/// `namespace: <virtual namespace>`.
pub fn host_labels(
    labels: Option<&BTreeMap<String, String>>,
    namespace: &str,
    vc: &str,
) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = labels
        .into_iter()
        .flatten()
        .map(|(k, v)| (host_label_key(k, vc), v.clone()))
        .collect();
    out.insert(LABEL_SYNCER_MANAGED_BY.to_string(), vc.to_string());
    out.insert(LABEL_SYNCER_NAMESPACE.to_string(), namespace.to_string());
    out
}

/// A Service-style selector (`matchLabels` only) of virtual namespace `namespace`, matching
/// exactly the host copies of the pods it matches in the virtual cluster.
pub fn host_selector(
    selector: &BTreeMap<String, String>,
    namespace: &str,
    vc: &str,
) -> BTreeMap<String, String> {
    host_labels(Some(selector), namespace, vc)
}

/// A full label selector of virtual namespace `namespace`, translated like [`host_selector`].
pub fn host_label_selector(selector: &LabelSelector, namespace: &str, vc: &str) -> LabelSelector {
    LabelSelector {
        match_labels: Some(host_labels(selector.match_labels.as_ref(), namespace, vc)),
        match_expressions: selector.match_expressions.as_ref().map(|exprs| {
            exprs
                .iter()
                .map(|e| LabelSelectorRequirement {
                    key: host_label_key(&e.key, vc),
                    ..e.clone()
                })
                .collect()
        }),
    }
}

/// The label selector that finds every host object the syncer of `vc` made.
pub fn managed_by_selector(vc: &str) -> String {
    format!("{LABEL_SYNCER_MANAGED_BY}={vc}")
}

/// Annotations naming the virtual object a host copy came from.
pub fn object_annotations(
    kind: &str,
    name: &str,
    namespace: &str,
    uid: &str,
) -> BTreeMap<String, String> {
    [
        (ANNOTATION_OBJECT_NAME, name),
        (ANNOTATION_OBJECT_NAMESPACE, namespace),
        (ANNOTATION_OBJECT_UID, uid),
        (ANNOTATION_OBJECT_KIND, kind),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Short names are joined, not hashed (the seed's `nginx-x-default-x-team-alpha`).
    #[test]
    fn short_names_are_joined_with_x() {
        assert_eq!(
            host_name("nginx", "default", "team-alpha"),
            "nginx-x-default-x-team-alpha"
        );
    }

    /// Exactly 63 characters is still a valid name and stays unhashed.
    #[test]
    fn a_name_of_exactly_63_characters_is_kept() {
        let name = "a".repeat(63 - "-x-ns-x-vc".len());
        let host = host_name(&name, "ns", "vc");
        assert_eq!(host.len(), 63);
        assert_eq!(host, format!("{name}-x-ns-x-vc"));
    }

    /// One character more and the name is cut at 52 and hashed, like vCluster.
    #[test]
    fn a_name_of_64_characters_is_hashed_to_63() {
        let name = "a".repeat(64 - "-x-ns-x-vc".len());
        let full = format!("{name}-x-ns-x-vc");
        let host = host_name(&name, "ns", "vc");
        assert_eq!(host.len(), 63);
        assert_eq!(&host[..52], &full[..52]);
        assert_eq!(&host[52..53], "-");
        assert_eq!(&host[53..], &sha256_hex(full.as_bytes())[..10]);
    }

    /// Known vCluster output: the SHA-256 of the joined name decides the suffix.
    #[test]
    fn hashed_names_match_vclusters_safe_concat_name() {
        let full = "a-very-long-deployment-name-abcdefghij-7d9f8c6b5-x4z2q-x-default-x-vc";
        assert!(full.len() > 63);
        // Expected value computed independently (Python hashlib) from vCluster's formula.
        assert_eq!(
            safe_concat_name(&[full]),
            "a-very-long-deployment-name-abcdefghij-7d9f8c6b5-x4z-e1e86fb634"
        );
        // sha256("abc") is the FIPS 180-2 test vector; the hex helper must agree with it.
        assert!(sha256_hex(b"abc").starts_with("ba7816bf8f"));
    }

    /// A dot left at the cut would make `.-`, which DNS names forbid; vCluster collapses it.
    #[test]
    fn a_dot_at_the_cut_is_collapsed() {
        let name = format!("{}.{}", "a".repeat(51), "b".repeat(20));
        let host = host_name(&name, "ns", "vc");
        assert!(!host.contains(".-"), "{host}");
        assert_eq!(host.len(), 62);
        assert!(host.starts_with(&"a".repeat(51)));
    }

    /// Different long names sharing 52 characters still get different host names.
    #[test]
    fn long_names_with_a_common_prefix_differ() {
        let a = host_name(&format!("{}-one", "p".repeat(60)), "ns", "vc");
        let b = host_name(&format!("{}-two", "p".repeat(60)), "ns", "vc");
        assert_ne!(a, b);
    }

    /// Cluster-scoped objects carry the host namespace so two host namespaces never clash.
    #[test]
    fn cluster_scoped_names_carry_the_host_namespace() {
        assert_eq!(
            host_cluster_name("fast", "team-alpha", "vc"),
            "vcluster-fast-x-team-alpha-x-vc"
        );
    }

    /// Tenant labels pass through; the syncer's markers are added.
    #[test]
    fn tenant_labels_are_kept_and_markers_added() {
        let labels = BTreeMap::from([("app".to_string(), "web".to_string())]);
        let host = host_labels(Some(&labels), "default", "vc");
        assert_eq!(host["app"], "web");
        assert_eq!(host[LABEL_SYNCER_MANAGED_BY], "vc");
        assert_eq!(host[LABEL_SYNCER_NAMESPACE], "default");
        assert_eq!(host.len(), 3);
    }

    /// A tenant cannot claim another virtual cluster's objects by setting `managed-by`.
    #[test]
    fn a_forged_managed_by_label_is_rewritten_not_passed_through() {
        let labels = BTreeMap::from([
            (LABEL_SYNCER_MANAGED_BY.to_string(), "other".to_string()),
            ("vcluster.loft.sh/object-uid".to_string(), "x".to_string()),
        ]);
        let host = host_labels(Some(&labels), "default", "vc");
        assert_eq!(host[LABEL_SYNCER_MANAGED_BY], "vc");
        let rewritten = host_label_key(LABEL_SYNCER_MANAGED_BY, "vc");
        assert_eq!(rewritten, "vcluster.loft.sh/label-vc-x-e5f1b28ab2");
        assert_eq!(host[&rewritten], "other");
        assert!(!host.contains_key("vcluster.loft.sh/object-uid"));
        assert_eq!(host.len(), 4);
    }

    /// A tenant pod labelled like a control plane (`app=vcluster,release=<vc>` and the
    /// operator's own key) gets host labels the control plane's selector does not match.
    #[test]
    fn a_tenant_cannot_label_its_way_into_the_control_planes_selector() {
        let labels = BTreeMap::from([
            ("app".to_string(), "vcluster".to_string()),
            ("release".to_string(), "vc".to_string()),
            (
                crate::meta::LABEL_CONTROL_PLANE.to_string(),
                "vc".to_string(),
            ),
            (
                crate::meta::LABEL_VIRTUAL_CLUSTER.to_string(),
                "vc".to_string(),
            ),
        ]);
        let host = host_labels(Some(&labels), "default", "vc");
        let selector = crate::meta::control_plane_selector("vc");
        assert!(
            !selector.iter().all(|(k, v)| host.get(k) == Some(v)),
            "{host:?}"
        );
        assert!(
            !host.keys().any(|k| k.starts_with("vnest.dev/")),
            "{host:?}"
        );
        // The runbook labels pass through (only vnest's keys are rewritten), and the tenant's
        // value is kept under the rewritten key.
        assert_eq!(host["app"], "vcluster");
        let rewritten = host_label_key(crate::meta::LABEL_CONTROL_PLANE, "vc");
        assert!(
            rewritten.starts_with("vcluster.loft.sh/label-vc-x-"),
            "{rewritten}"
        );
        assert_eq!(host[&rewritten], "vc");
    }

    /// Service selectors select the host copies: rewritten keys plus the markers.
    #[test]
    fn selectors_are_scoped_to_the_virtual_namespace() {
        let selector = BTreeMap::from([("app".to_string(), "web".to_string())]);
        let host = host_selector(&selector, "shop", "vc");
        assert_eq!(host["app"], "web");
        assert_eq!(host[LABEL_SYNCER_NAMESPACE], "shop");
        assert_eq!(host[LABEL_SYNCER_MANAGED_BY], "vc");
    }

    /// Expressions keep their operator and values; only reserved keys change.
    #[test]
    fn label_selector_expressions_are_translated() {
        let selector = LabelSelector {
            match_labels: None,
            match_expressions: Some(vec![
                LabelSelectorRequirement {
                    key: "tier".into(),
                    operator: "In".into(),
                    values: Some(vec!["a".into()]),
                },
                LabelSelectorRequirement {
                    key: LABEL_SYNCER_NAMESPACE.into(),
                    operator: "Exists".into(),
                    values: None,
                },
            ]),
        };
        let host = host_label_selector(&selector, "shop", "vc");
        let exprs = host.match_expressions.unwrap();
        assert_eq!(exprs[0].key, "tier");
        assert_eq!(exprs[0].values.as_deref(), Some(&["a".to_string()][..]));
        assert_eq!(exprs[1].key, host_label_key(LABEL_SYNCER_NAMESPACE, "vc"));
        assert_eq!(host.match_labels.unwrap()[LABEL_SYNCER_NAMESPACE], "shop");
    }

    /// The four object annotations the seed's troubleshooting steps read.
    #[test]
    fn object_annotations_name_the_virtual_object() {
        let a = object_annotations("Pod", "web", "shop", "u-1");
        assert_eq!(a[ANNOTATION_OBJECT_NAME], "web");
        assert_eq!(a[ANNOTATION_OBJECT_NAMESPACE], "shop");
        assert_eq!(a[ANNOTATION_OBJECT_UID], "u-1");
        assert_eq!(a[ANNOTATION_OBJECT_KIND], "Pod");
    }

    #[test]
    fn managed_by_selector_is_the_marker_label() {
        assert_eq!(managed_by_selector("vc"), "vcluster.loft.sh/managed-by=vc");
    }
}
