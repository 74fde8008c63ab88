//! Projected ClusterTrustBundles. The host kubelet would look a tenant's bundle names and
//! signers up among the *host's* bundles, so each `clusterTrustBundle` source becomes an item
//! of one host ConfigMap per pod, which the syncer fills from the virtual cluster's bundles
//! ([`bundle_data`]) as the kubelet would: the anchors deduplicated and re-encoded, a missing
//! bundle an empty file when the source is optional and a missing key (the pod waits) when it
//! is not.

use std::{
    borrow::Borrow,
    collections::{BTreeMap, BTreeSet},
};

use k8s_openapi::api::{
    certificates::v1::ClusterTrustBundle,
    core::v1::{
        ClusterTrustBundleProjection, ConfigMapProjection, KeyToPath, PodSpec, Volume,
        VolumeProjection,
    },
};
use kube::core::{Selector, SelectorExt};
use vnest_crds::translate::safe_concat_name;

/// Host ConfigMap holding the projected bundles of the pod whose host name is `host_pod`.
pub fn config_map_name(host_pod: &str) -> String {
    safe_concat_name(&[host_pod, "trust-bundles"])
}

/// The ConfigMap key of source `source` of volume `volume` (positions in the virtual pod).
fn key(volume: usize, source: usize) -> String {
    format!("bundle-{volume}-{source}")
}

/// Every `clusterTrustBundle` source of `spec` with the ConfigMap key it is delivered under.
pub fn trust_bundle_sources(spec: &PodSpec) -> Vec<(String, &ClusterTrustBundleProjection)> {
    let mut found = Vec::new();
    for (i, volume) in spec.volumes.iter().flatten().enumerate() {
        let sources = volume
            .projected
            .iter()
            .flat_map(|p| p.sources.iter().flatten());
        for (j, source) in sources.enumerate() {
            if let Some(bundle) = &source.cluster_trust_bundle {
                found.push((key(i, j), bundle));
            }
        }
    }
    found
}

/// Replaces every `clusterTrustBundle` source with the matching item of host ConfigMap
/// `config_map`, keeping its path and owner. The item is never optional: the syncer writes
/// the ConfigMap just after the pod, and the kubelet must wait for it rather than start the
/// pod without the file (an optional source that selects nothing is an empty item instead).
pub(super) fn replace_trust_bundles(volumes: &mut [Volume], config_map: &str) {
    for (i, volume) in volumes.iter_mut().enumerate() {
        let sources = volume
            .projected
            .iter_mut()
            .flat_map(|p| p.sources.iter_mut().flatten());
        for (j, source) in sources.enumerate() {
            let Some(bundle) = source.cluster_trust_bundle.take() else {
                continue;
            };
            *source = VolumeProjection {
                config_map: Some(ConfigMapProjection {
                    name: config_map.to_string(),
                    items: Some(vec![KeyToPath {
                        key: key(i, j),
                        path: bundle.path,
                        user: bundle.user,
                        ..Default::default()
                    }]),
                    optional: Some(false),
                }),
                ..Default::default()
            };
        }
    }
}

/// The bundles `source` selects: by name, that one; by signer, those of the signer that its
/// label selector matches (no selector matches none, an empty one all).
fn selected<'a, B: Borrow<ClusterTrustBundle>>(
    source: &ClusterTrustBundleProjection,
    bundles: &'a [B],
) -> Vec<&'a ClusterTrustBundle> {
    let bundles = bundles.iter().map(Borrow::borrow);
    if let Some(name) = &source.name {
        return bundles
            .filter(|b| b.metadata.name.as_ref() == Some(name))
            .collect();
    }
    let (Some(signer), Some(selector)) = (&source.signer_name, &source.label_selector) else {
        return Vec::new();
    };
    let Ok(selector) = Selector::try_from(selector.clone()) else {
        return Vec::new();
    };
    bundles
        .filter(|b| b.spec.signer_name.as_ref() == Some(signer))
        .filter(|b| selector.matches(b.metadata.labels.as_ref().unwrap_or(&BTreeMap::new())))
        .collect()
}

/// The trust anchors of `bundles` as the kubelet writes them: every PEM block's contents
/// once, each re-encoded as a `CERTIFICATE` block (in sorted order, so the ConfigMap only
/// changes when the anchors do).
fn normalized(bundles: &[&ClusterTrustBundle]) -> String {
    let anchors: BTreeSet<Vec<u8>> = bundles
        .iter()
        .flat_map(|b| pem::parse_many(&b.spec.trust_bundle).unwrap_or_default())
        .map(|block| block.into_contents())
        .collect();
    let config = pem::EncodeConfig::new().set_line_ending(pem::LineEnding::LF);
    anchors
        .into_iter()
        .map(|der| pem::encode_config(&pem::Pem::new("CERTIFICATE", der), config))
        .collect()
}

/// The data of the host ConfigMap for `spec`'s sources, given the virtual cluster's bundles.
/// A source that selects nothing is an empty file when optional and left out otherwise, so
/// the kubelet keeps the pod from starting, as it does for a missing bundle.
pub fn bundle_data<B: Borrow<ClusterTrustBundle>>(
    spec: &PodSpec,
    bundles: &[B],
) -> BTreeMap<String, String> {
    trust_bundle_sources(spec)
        .into_iter()
        .filter_map(|(key, source)| {
            let chosen = selected(source, bundles);
            if chosen.is_empty() {
                return source
                    .optional
                    .unwrap_or(false)
                    .then(|| (key, String::new()));
            }
            Some((key, normalized(&chosen)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;

    use super::super::super::test_support::*;
    use super::super::fixture::*;
    use super::super::host_pod;
    use super::*;

    /// A self-signed CA certificate as PEM, distinct per `name`.
    fn ca(name: &str) -> String {
        let mut params = rcgen::CertificateParams::new(vec![name.to_string()]).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let key = rcgen::KeyPair::generate().unwrap();
        params.self_signed(&key).unwrap().pem()
    }

    fn bundle(
        name: &str,
        signer: Option<&str>,
        labels: &[(&str, &str)],
        pem: &str,
    ) -> ClusterTrustBundle {
        from_yaml(&format!(
            "metadata: {{ name: '{name}', labels: {{ {} }} }}
spec: {{ signerName: {}, trustBundle: {} }}",
            labels
                .iter()
                .map(|(k, v)| format!("'{k}': '{v}'"))
                .collect::<Vec<_>>()
                .join(", "),
            signer.map_or("null".to_string(), |s| format!("'{s}'")),
            serde_json::to_string(pem).unwrap(),
        ))
    }

    const PROJECTING: &str = r#"
metadata: { name: ctb, namespace: shop, uid: u-2 }
spec:
  containers: [{ name: app, image: agnhost }]
  volumes:
  - name: plain
    emptyDir: {}
  - name: anchors
    projected:
      defaultMode: 420
      sources:
      - configMap: { name: settings }
      - clusterTrustBundle: { name: one, path: one.pem }
      - clusterTrustBundle:
          signerName: example.com/signer
          labelSelector: { matchLabels: { alive: "true" } }
          path: signer.pem
          optional: true
          user: 1000
"#;

    fn spec() -> PodSpec {
        from_yaml::<Pod>(PROJECTING).spec.unwrap()
    }

    /// Each source becomes a required item of the pod's ConfigMap under its own key, keeping
    /// its path and owner; other sources and volumes stay as they were.
    #[test]
    fn bundle_sources_become_items_of_the_pods_config_map() {
        let host_spec = host_pod(&from_yaml(PROJECTING), &target(), &env())
            .spec
            .unwrap();
        let volumes = host_spec.volumes.unwrap();
        assert!(volumes[0].empty_dir.is_some());
        let sources = volumes[1]
            .projected
            .as_ref()
            .unwrap()
            .sources
            .as_ref()
            .unwrap();
        assert_eq!(
            sources[0].config_map.as_ref().unwrap().name,
            "settings-x-shop-x-vc"
        );
        for (source, (key, path, user)) in sources[1..].iter().zip([
            ("bundle-1-1", "one.pem", None),
            ("bundle-1-2", "signer.pem", Some(1000)),
        ]) {
            assert!(source.cluster_trust_bundle.is_none());
            let cm = source.config_map.as_ref().unwrap();
            assert_eq!(cm.name, "ctb-x-shop-x-vc-trust-bundles");
            assert_eq!(cm.optional, Some(false));
            let item = &cm.items.as_ref().unwrap()[0];
            assert_eq!(
                (item.key.as_str(), item.path.as_str(), item.user),
                (key, path, user)
            );
        }
        let keys: Vec<String> = trust_bundle_sources(&spec())
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(keys, ["bundle-1-1", "bundle-1-2"]);
    }

    /// By name one bundle; by signer the signer's bundles the selector matches, their
    /// anchors once each, byte for byte as Go's PEM encoder writes them.
    #[test]
    fn data_holds_the_selected_anchors_once_each() {
        let (a, b, c) = (ca("a"), ca("b"), ca("c"));
        let bundles = [
            bundle("one", None, &[], &a),
            bundle(
                "s1",
                Some("example.com/signer"),
                &[("alive", "true")],
                &format!("{b}{a}"),
            ),
            bundle("s2", Some("example.com/signer"), &[("alive", "true")], &b),
            bundle("s3", Some("example.com/signer"), &[("alive", "false")], &c),
            bundle("s4", Some("other.com/signer"), &[("alive", "true")], &c),
        ];
        let data = bundle_data(&spec(), &bundles);
        assert_eq!(data["bundle-1-1"], a);
        let joined = &data["bundle-1-2"];
        assert_eq!(joined.len(), a.len() + b.len(), "{joined}");
        assert!(joined.contains(&a) && joined.contains(&b) && !joined.contains(&c));
        // Rendering again, in another order, gives the same bytes.
        let mut reversed = bundles.to_vec();
        reversed.reverse();
        assert_eq!(bundle_data(&spec(), &reversed), data);
    }

    /// A bundle that is not there: an optional source gets an empty file, a required one no
    /// key at all, so the kubelet holds the pod back.
    #[test]
    fn a_missing_bundle_is_empty_when_optional_and_absent_when_required() {
        let data = bundle_data(&spec(), &[] as &[ClusterTrustBundle]);
        assert_eq!(data.get("bundle-1-2").map(String::as_str), Some(""));
        assert!(!data.contains_key("bundle-1-1"));
    }

    /// A signer source without a label selector matches nothing; an empty selector matches
    /// every bundle of the signer.
    #[test]
    fn no_selector_matches_nothing_and_an_empty_one_everything() {
        let (a, b) = (ca("a"), ca("b"));
        let bundles = [
            bundle("s1", Some("example.com/signer"), &[], &a),
            bundle("s2", Some("example.com/signer"), &[("x", "y")], &b),
        ];
        let source = |selector: &str| -> PodSpec {
            from_yaml(&format!(
                "containers: [{{ name: app }}]
volumes:
- name: v
  projected:
    sources:
    - clusterTrustBundle: {{ signerName: example.com/signer, path: p, optional: true{selector} }}"
            ))
        };
        assert_eq!(bundle_data(&source(""), &bundles)["bundle-0-0"], "");
        let all = &bundle_data(&source(", labelSelector: {}"), &bundles)["bundle-0-0"];
        assert!(all.contains(&a) && all.contains(&b));
    }
}
