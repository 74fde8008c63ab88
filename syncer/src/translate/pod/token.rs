//! The pod's virtual service-account token: which tokens its projected volumes ask for, and
//! the projection that delivers the minted one in place of the host's.

use k8s_openapi::api::core::v1::{
    DownwardAPIProjection, DownwardAPIVolumeFile, KeyToPath, ObjectFieldSelector, PodSpec,
    SecretProjection, Volume, VolumeProjection,
};

/// Key of the virtual service-account token in its host Secret.
pub const TOKEN_KEY: &str = "token";
/// Host pod annotation carrying the pod's virtual service-account token. Under the reserved
/// `vcluster.loft.sh/` prefix, so a tenant annotation can never set it.
pub const ANNOTATION_TOKEN: &str = "vcluster.loft.sh/token";

/// How the pod's minted virtual service-account token reaches the host pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TokenDelivery {
    /// In host Secret `.0` (key [`TOKEN_KEY`]), projected in place of the token.
    Secret(String),
    /// In annotation [`ANNOTATION_TOKEN`] of the host pod itself, projected through the
    /// downward API: no second object, so one host write per pod.
    Annotation {
        token: String,
        /// Unix seconds when the syncer renews it, kept beside it for a restarted syncer.
        renew_at: u64,
    },
}

/// The projection delivering the minted token at `path`.
fn token_projection(delivery: &TokenDelivery, path: &str) -> VolumeProjection {
    match delivery {
        TokenDelivery::Secret(secret) => VolumeProjection {
            secret: Some(SecretProjection {
                name: secret.to_string(),
                items: Some(vec![KeyToPath {
                    key: TOKEN_KEY.to_string(),
                    path: path.to_string(),
                    ..Default::default()
                }]),
                optional: Some(false),
            }),
            ..Default::default()
        },
        TokenDelivery::Annotation { .. } => VolumeProjection {
            downward_api: Some(DownwardAPIProjection {
                items: Some(vec![DownwardAPIVolumeFile {
                    path: path.to_string(),
                    field_ref: Some(ObjectFieldSelector {
                        field_path: format!("metadata.annotations['{ANNOTATION_TOKEN}']"),
                        ..Default::default()
                    }),
                    ..Default::default()
                }]),
            }),
            ..Default::default()
        },
    }
}

/// Replaces projected service-account tokens with the minted token, or drops them.
pub(super) fn replace_tokens(volumes: &mut [Volume], token: Option<&TokenDelivery>) {
    for projected in volumes.iter_mut().filter_map(|v| v.projected.as_mut()) {
        let Some(sources) = &mut projected.sources else {
            continue;
        };
        *sources = std::mem::take(sources)
            .into_iter()
            .filter_map(|source| match (&source.service_account_token, token) {
                (None, _) => Some(source),
                (Some(_), None) => None,
                (Some(projection), Some(delivery)) => {
                    Some(token_projection(delivery, &projection.path))
                }
            })
            .collect();
    }
}

/// The service-account tokens a pod's projected volumes ask for: (audience, expiry seconds).
pub fn requested_tokens(spec: &PodSpec) -> Vec<(Option<String>, Option<i64>)> {
    spec.volumes
        .iter()
        .flatten()
        .filter_map(|v| v.projected.as_ref())
        .flat_map(|p| p.sources.iter().flatten())
        .filter_map(|s| s.service_account_token.as_ref())
        .map(|t| (t.audience.clone(), t.expiration_seconds))
        .collect()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;
    use vnest_crds::meta::ANNOTATION_TOKEN_RENEW_AT;

    use super::super::super::test_support::*;
    use super::super::fixture::*;
    use super::super::{PodEnv, host_pod};
    use super::*;

    /// Without a minted token the projected host token is dropped, never passed through.
    #[test]
    fn projected_token_is_dropped_without_a_minted_token() {
        let spec = host(&env());
        let sources = projected_sources(spec);
        assert_eq!(sources.len(), 2);
        assert!(sources.iter().all(|s| s.service_account_token.is_none()));
    }

    /// With a minted token in a Secret, the Secret is projected at the path the pod asked for.
    #[test]
    fn projected_token_comes_from_the_minted_secret() {
        let spec = host(&PodEnv {
            token: Some(TokenDelivery::Secret("web-0-x-shop-x-vc-sa-token".into())),
            ..env()
        });
        let sources = projected_sources(spec);
        let secret = sources[0].secret.as_ref().unwrap();
        assert_eq!(secret.name, "web-0-x-shop-x-vc-sa-token");
        let item = &secret.items.as_ref().unwrap()[0];
        assert_eq!(
            (item.key.as_str(), item.path.as_str()),
            (TOKEN_KEY, "token")
        );
        let pod: Pod = from_yaml(POD);
        assert_eq!(
            requested_tokens(pod.spec.as_ref().unwrap()),
            vec![(None, Some(3607))]
        );
    }

    /// With a minted token in an annotation, the host pod carries it (and when it is due)
    /// and projects it through the downward API at the path the pod asked for; a tenant
    /// annotation of the same key never reaches the host.
    #[test]
    fn projected_token_comes_from_the_host_pod_annotation() {
        let mut virt: Pod = from_yaml(POD);
        virt.metadata.annotations =
            Some([(ANNOTATION_TOKEN.to_string(), "forged".to_string())].into());
        let env = PodEnv {
            token: Some(TokenDelivery::Annotation {
                token: "jwt".into(),
                renew_at: 42,
            }),
            ..env()
        };
        let pod = host_pod(&virt, &target(), &env);
        let annotations = pod.metadata.annotations.unwrap();
        assert_eq!(annotations[ANNOTATION_TOKEN], "jwt");
        assert_eq!(annotations[ANNOTATION_TOKEN_RENEW_AT], "42");
        let sources = projected_sources(pod.spec.unwrap());
        assert!(sources.iter().all(|s| s.secret.is_none()));
        let item = first_downward_file(&sources[0]);
        assert_eq!(item.path, "token");
        assert_eq!(
            item.field_ref.as_ref().unwrap().field_path,
            "metadata.annotations['vcluster.loft.sh/token']"
        );
    }

    /// Without an annotation delivery the host pod carries no token annotation.
    #[test]
    fn no_token_annotation_without_annotation_delivery() {
        let pod = host_pod(&from_yaml(POD), &target(), &env());
        assert!(
            !pod.metadata
                .annotations
                .unwrap()
                .contains_key(ANNOTATION_TOKEN)
        );
    }
}
