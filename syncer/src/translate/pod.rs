//! Pods: the host copy of a virtual pod, every reference inside it renamed into the host
//! namespace, and the host pod's status as the virtual pod shows it.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{
    Container, DownwardAPIProjection, DownwardAPIVolumeFile, EnvVar, KeyToPath,
    ObjectFieldSelector, Pod, PodDNSConfig, PodDNSConfigOption, PodSpec, PodStatus,
    SecretProjection, Volume, VolumeProjection,
};

use vnest_crds::meta::{
    ANNOTATION_OBJECT_NAME, ANNOTATION_OBJECT_NAMESPACE, ANNOTATION_OBJECT_UID,
    ANNOTATION_TOKEN_RENEW_AT,
};
use vnest_crds::patch::PodPatches;

use super::Target;

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

/// What the host pod needs besides the virtual pod itself.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodEnv {
    /// ClusterIP and port of the host Service fronting the virtual API server; pods reach
    /// "their" Kubernetes API there.
    pub api_service: Option<(String, i32)>,
    /// ClusterIP of the host copy of the virtual cluster's DNS Service, when it has one.
    pub dns_ip: Option<String>,
    /// The virtual cluster's DNS domain (`networking.advanced.clusterDomain`), searched by
    /// tenant pods.
    pub cluster_domain: String,
    /// `sync.toHost.serviceaccounts`: host copies of service accounts exist.
    pub sync_service_accounts: bool,
    /// Where the pod's minted virtual token is; without one, projected tokens are dropped.
    pub token: Option<TokenDelivery>,
    /// `sync.toHost.priorityclasses`: pods name the host copies of their classes.
    pub sync_priority_classes: bool,
}

/// ConfigMaps and Secrets (virtual names, in the pod's namespace) a pod uses.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct References {
    pub configmaps: BTreeSet<String>,
    pub secrets: BTreeSet<String>,
}

/// Every ConfigMap and Secret `spec` refers to: volumes, projections, env and envFrom of all
/// containers, image pull secrets.
pub fn references(spec: &PodSpec) -> References {
    let (mut configmaps, mut secrets) = (BTreeSet::new(), BTreeSet::new());
    // The renaming walk with recording visitors, so the two can never disagree.
    walk_references(
        &mut spec.clone(),
        &mut |name| {
            configmaps.insert(name.clone());
        },
        &mut |name| {
            secrets.insert(name.clone());
        },
        &mut |_| {},
    );
    References {
        configmaps,
        secrets,
    }
}

/// Init containers, then containers.
fn containers_mut(spec: &mut PodSpec) -> impl Iterator<Item = &mut Container> {
    spec.init_containers
        .iter_mut()
        .flatten()
        .chain(spec.containers.iter_mut())
}

/// Calls the visitors on every ConfigMap, Secret and PVC name in `spec`, letting them rewrite.
fn walk_references(
    spec: &mut PodSpec,
    configmap: &mut dyn FnMut(&mut String),
    secret: &mut dyn FnMut(&mut String),
    claim: &mut dyn FnMut(&mut String),
) {
    for v in spec.volumes.iter_mut().flatten() {
        if let Some(cm) = &mut v.config_map {
            configmap(&mut cm.name);
        }
        if let Some(name) = v.secret.as_mut().and_then(|s| s.secret_name.as_mut()) {
            secret(name);
        }
        if let Some(pvc) = &mut v.persistent_volume_claim {
            claim(&mut pvc.claim_name);
        }
        if let Some(azure) = &mut v.azure_file {
            secret(&mut azure.secret_name);
        }
        let secret_refs = [
            v.csi
                .as_mut()
                .and_then(|c| c.node_publish_secret_ref.as_mut()),
            v.cephfs.as_mut().and_then(|c| c.secret_ref.as_mut()),
            v.cinder.as_mut().and_then(|c| c.secret_ref.as_mut()),
            v.flex_volume.as_mut().and_then(|c| c.secret_ref.as_mut()),
            v.iscsi.as_mut().and_then(|c| c.secret_ref.as_mut()),
            v.rbd.as_mut().and_then(|c| c.secret_ref.as_mut()),
            v.storageos.as_mut().and_then(|c| c.secret_ref.as_mut()),
        ];
        for r in secret_refs.into_iter().flatten() {
            secret(&mut r.name);
        }
        if let Some(r) = v.scale_io.as_mut().map(|c| &mut c.secret_ref) {
            secret(&mut r.name);
        }
        for source in v
            .projected
            .iter_mut()
            .flat_map(|p| p.sources.iter_mut().flatten())
        {
            if let Some(cm) = &mut source.config_map {
                configmap(&mut cm.name);
            }
            if let Some(s) = &mut source.secret {
                secret(&mut s.name);
            }
        }
    }
    let containers = containers_mut(spec);
    for c in containers {
        for env in c.env.iter_mut().flatten() {
            if let Some(from) = &mut env.value_from {
                if let Some(k) = &mut from.config_map_key_ref {
                    configmap(&mut k.name);
                }
                if let Some(k) = &mut from.secret_key_ref {
                    secret(&mut k.name);
                }
            }
        }
        for from in c.env_from.iter_mut().flatten() {
            if let Some(r) = &mut from.config_map_ref {
                configmap(&mut r.name);
            }
            if let Some(r) = &mut from.secret_ref {
                secret(&mut r.name);
            }
        }
    }
    for r in spec.image_pull_secrets.iter_mut().flatten() {
        secret(&mut r.name);
    }
}

/// Downward-API paths that would tell the pod its host identity, and the annotations that
/// carry its virtual one instead.
const DOWNWARD_REWRITES: [(&str, &str); 3] = [
    ("metadata.name", ANNOTATION_OBJECT_NAME),
    ("metadata.namespace", ANNOTATION_OBJECT_NAMESPACE),
    ("metadata.uid", ANNOTATION_OBJECT_UID),
];

fn rewrite_field_path(path: &mut String) {
    if let Some((_, annotation)) = DOWNWARD_REWRITES.iter().find(|(p, _)| p == path) {
        *path = format!("metadata.annotations['{annotation}']");
    }
}

/// Points every downward-API field reference (env, volumes, projections) at the virtual
/// name, namespace and uid, so the pod sees itself as the tenant created it.
fn rewrite_downward_api(spec: &mut PodSpec) {
    for v in spec.volumes.iter_mut().flatten() {
        let projected = v
            .projected
            .iter_mut()
            .flat_map(|p| p.sources.iter_mut().flatten())
            .filter_map(|s| s.downward_api.as_mut())
            .flat_map(|d| d.items.iter_mut().flatten());
        let plain = v
            .downward_api
            .iter_mut()
            .flat_map(|d| d.items.iter_mut().flatten());
        for item in projected.chain(plain) {
            if let Some(f) = &mut item.field_ref {
                rewrite_field_path(&mut f.field_path);
            }
        }
    }
    let containers = containers_mut(spec);
    for env in containers.flat_map(|c| c.env.iter_mut().flatten()) {
        if let Some(f) = env.value_from.as_mut().and_then(|v| v.field_ref.as_mut()) {
            rewrite_field_path(&mut f.field_path);
        }
    }
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
fn replace_tokens(volumes: &mut [Volume], token: Option<&TokenDelivery>) {
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

/// `KUBERNETES_SERVICE_*` pointing at the virtual API server, replacing the tenant's own.
fn point_at_virtual_api(container: &mut Container, ip: &str, port: i32) {
    const KEYS: [&str; 3] = [
        "KUBERNETES_SERVICE_HOST",
        "KUBERNETES_SERVICE_PORT",
        "KUBERNETES_PORT",
    ];
    let values = [
        ip.to_string(),
        port.to_string(),
        format!("tcp://{ip}:{port}"),
    ];
    let mut env: Vec<EnvVar> = KEYS
        .iter()
        .zip(values)
        .map(|(k, v)| EnvVar {
            name: k.to_string(),
            value: Some(v),
            ..Default::default()
        })
        .collect();
    env.extend(
        container
            .env
            .take()
            .into_iter()
            .flatten()
            .filter(|e| !KEYS.contains(&e.name.as_str())),
    );
    container.env = Some(env);
}

/// The host node a tenant's `spec.nodeName` places the pod on: none asked, none; a node the
/// virtual cluster shows from a real host node (`shown`), that node (virtual nodes carry their
/// host node's name); any other, why the pod is refused.
pub fn requested_node(
    spec: &PodSpec,
    shown: impl Fn(&str) -> bool,
) -> Result<Option<String>, String> {
    match spec.node_name.as_deref().filter(|n| !n.is_empty()) {
        None => Ok(None),
        Some(node) if shown(node) => Ok(Some(node.to_string())),
        Some(node) => Err(format!(
            "not synced to the host: spec.nodeName {node} is not one of the virtual cluster's nodes \
             (those shown from host nodes its pods run on); leave spec.nodeName empty or name one of them"
        )),
    }
}

/// The search path of a tenant pod in virtual namespace `namespace`, as the kubelet writes it
/// for `ClusterFirst` in a cluster whose domain is `domain`.
pub fn dns_searches(namespace: &str, domain: &str) -> Vec<String> {
    vec![
        format!("{namespace}.svc.{domain}"),
        format!("svc.{domain}"),
        domain.to_string(),
    ]
}

/// The host copy of virtual pod `virt`.
pub fn host_pod(virt: &Pod, target: &Target, env: &PodEnv) -> Pod {
    let namespace = virt.metadata.namespace.as_deref().unwrap_or_default();
    let name = virt.metadata.name.as_deref().unwrap_or_default();
    let mut spec = virt.spec.clone().unwrap_or_default();
    let rename = |n: &mut String| *n = target.host_name(n, namespace);
    walk_references(&mut spec, &mut { rename }, &mut { rename }, &mut { rename });
    replace_tokens(
        spec.volumes.as_deref_mut().unwrap_or_default(),
        env.token.as_ref(),
    );
    rewrite_downward_api(&mut spec);

    // The host scheduler places the pod (a checked `spec.nodeName` is set by the caller, see
    // [`requested_node`]); the host's own credentials never reach it.
    spec.node_name = None;
    spec.automount_service_account_token = Some(false);
    spec.enable_service_links = Some(false);
    let sa = spec
        .service_account_name
        .take()
        .or(spec.service_account.take());
    if env.sync_priority_classes {
        super::priority_class::translate_pod_priority(&mut spec, target);
    }
    spec.service_account = None;
    spec.service_account_name = match (env.sync_service_accounts, sa) {
        (true, Some(sa)) => Some(target.host_name(&sa, namespace)),
        _ => None,
    };
    // The host pod name is translated; the pod still sees its own name as hostname.
    if spec.hostname.is_none() {
        spec.hostname = Some(
            name.chars()
                .take(63)
                .collect::<String>()
                .trim_end_matches(['-', '.'])
                .to_string(),
        );
    }
    if let Some((ip, port)) = &env.api_service {
        for c in containers_mut(&mut spec) {
            point_at_virtual_api(c, ip, *port);
        }
    }
    let tenant_dns = spec
        .dns_policy
        .as_deref()
        .is_none_or(|p| p.starts_with("ClusterFirst"));
    if let (Some(dns_ip), true) = (&env.dns_ip, tenant_dns) {
        spec.dns_policy = Some("None".to_string());
        spec.dns_config = Some(PodDNSConfig {
            nameservers: Some(vec![dns_ip.clone()]),
            searches: Some(dns_searches(namespace, &env.cluster_domain)),
            options: Some(vec![PodDNSConfigOption {
                name: Some("ndots".to_string()),
                value: Some("5".to_string()),
            }]),
        });
    }
    let mut metadata = target.host_meta("Pod", &virt.metadata);
    if let Some(TokenDelivery::Annotation { token, renew_at }) = &env.token {
        let annotations = metadata.annotations.get_or_insert_default();
        annotations.insert(ANNOTATION_TOKEN.to_string(), token.clone());
        annotations.insert(ANNOTATION_TOKEN_RENEW_AT.to_string(), renew_at.to_string());
    }
    Pod {
        metadata,
        spec: Some(spec),
        status: None,
    }
}

/// Host pod `pod` with the `toHost.pods` patches applied, or why they cannot be.
pub fn patch_host_pod(pod: Pod, patches: &PodPatches) -> Result<Pod, String> {
    if patches.is_empty() {
        return Ok(pod);
    }
    let mut value = serde_json::to_value(pod).map_err(|e| e.to_string())?;
    patches.apply(&mut value)?;
    serde_json::from_value(value).map_err(|e| format!("the patched pod is not a valid pod: {e}"))
}

/// The status the virtual pod should show: the host pod's, as the host reports it, except
/// the QoS class, which the virtual API server fixed at creation and will not let change (a
/// host LimitRange's defaults can make the host copy Burstable where the tenant's pod is
/// BestEffort).
pub fn virtual_status(host: &Pod, virt: &Pod) -> Option<PodStatus> {
    let mut status = host.status.clone()?;
    status.qos_class = virt.status.as_ref().and_then(|s| s.qos_class.clone());
    Some(status)
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::*;

    const POD: &str = r#"
metadata:
  name: web-0
  namespace: shop
  uid: u-1
  labels: { app: web }
spec:
  nodeName: virtual-node
  serviceAccountName: builder
  imagePullSecrets: [{ name: regcred }]
  initContainers:
  - name: init
    image: busybox
    envFrom: [{ secretRef: { name: init-env } }]
  containers:
  - name: app
    image: nginx
    env:
    - { name: KUBERNETES_SERVICE_HOST, value: "10.0.0.1" }
    - { name: A, valueFrom: { configMapKeyRef: { name: settings, key: a } } }
    - { name: B, valueFrom: { secretKeyRef: { name: creds, key: b } } }
    - { name: MY_NS, valueFrom: { fieldRef: { fieldPath: metadata.namespace } } }
    envFrom: [{ configMapRef: { name: more-settings } }]
  volumes:
  - { name: cfg, configMap: { name: files } }
  - { name: sec, secret: { secretName: tls } }
  - { name: data, persistentVolumeClaim: { claimName: data-web-0 } }
  - { name: csi, csi: { driver: d, nodePublishSecretRef: { name: csi-creds } } }
  - name: kube-api-access-abcde
    projected:
      sources:
      - serviceAccountToken: { path: token, expirationSeconds: 3607 }
      - configMap: { name: kube-root-ca.crt, items: [{ key: ca.crt, path: ca.crt }] }
      - downwardAPI: { items: [{ path: namespace, fieldRef: { fieldPath: metadata.namespace } }] }
"#;

    fn env() -> PodEnv {
        PodEnv {
            api_service: Some(("10.96.0.10".into(), 443)),
            dns_ip: Some("10.96.0.53".into()),
            cluster_domain: "cluster.local".into(),
            sync_service_accounts: false,
            token: None,
            sync_priority_classes: false,
        }
    }

    fn host(env: &PodEnv) -> PodSpec {
        host_pod(&from_yaml(POD), &target(), env).spec.unwrap()
    }

    /// Every ConfigMap, Secret and PVC name resolves inside the host namespace, so a tenant
    /// can never mount a host object that was not made for it.
    #[test]
    fn every_reference_is_translated() {
        let spec = host(&env());
        let v = spec.volumes.as_ref().unwrap();
        assert_eq!(v[0].config_map.as_ref().unwrap().name, "files-x-shop-x-vc");
        assert_eq!(
            v[1].secret.as_ref().unwrap().secret_name.as_deref(),
            Some("tls-x-shop-x-vc")
        );
        assert_eq!(
            v[2].persistent_volume_claim.as_ref().unwrap().claim_name,
            "data-web-0-x-shop-x-vc"
        );
        assert_eq!(
            v[3].csi
                .as_ref()
                .unwrap()
                .node_publish_secret_ref
                .as_ref()
                .unwrap()
                .name,
            "csi-creds-x-shop-x-vc"
        );
        let projected = v[4].projected.as_ref().unwrap().sources.as_ref().unwrap();
        assert_eq!(
            projected[0].config_map.as_ref().unwrap().name,
            "kube-root-ca.crt-x-shop-x-vc"
        );
        let app = &spec.containers[0];
        let env = app.env.as_ref().unwrap();
        let by_name = |n: &str| env.iter().find(|e| e.name == n).unwrap();
        let from = |n: &str| by_name(n).value_from.clone().unwrap();
        assert_eq!(
            from("A").config_map_key_ref.unwrap().name,
            "settings-x-shop-x-vc"
        );
        assert_eq!(from("B").secret_key_ref.unwrap().name, "creds-x-shop-x-vc");
        assert_eq!(
            app.env_from.as_ref().unwrap()[0]
                .config_map_ref
                .as_ref()
                .unwrap()
                .name,
            "more-settings-x-shop-x-vc"
        );
        let init = &spec.init_containers.as_ref().unwrap()[0];
        assert_eq!(
            init.env_from.as_ref().unwrap()[0]
                .secret_ref
                .as_ref()
                .unwrap()
                .name,
            "init-env-x-shop-x-vc"
        );
        assert_eq!(
            spec.image_pull_secrets.unwrap()[0].name,
            "regcred-x-shop-x-vc"
        );
    }

    /// The list of used objects drives which ConfigMaps and Secrets are synced.
    #[test]
    fn references_lists_virtual_names() {
        let pod: Pod = from_yaml(POD);
        let refs = references(pod.spec.as_ref().unwrap());
        let cms: Vec<_> = refs.configmaps.iter().map(String::as_str).collect();
        assert_eq!(
            cms,
            ["files", "kube-root-ca.crt", "more-settings", "settings"]
        );
        let secrets: Vec<_> = refs.secrets.iter().map(String::as_str).collect();
        assert_eq!(
            secrets,
            ["creds", "csi-creds", "init-env", "regcred", "tls"]
        );
    }

    /// The host pod is named per design.md, scheduled by the host, and never mounts a host
    /// service-account token.
    #[test]
    fn host_pod_is_renamed_unscheduled_and_without_host_credentials() {
        let pod = host_pod(&from_yaml(POD), &target(), &env());
        assert_eq!(pod.metadata.name.as_deref(), Some("web-0-x-shop-x-vc"));
        let spec = pod.spec.unwrap();
        assert_eq!(spec.node_name, None);
        assert_eq!(spec.automount_service_account_token, Some(false));
        assert_eq!(spec.service_account_name, None);
        assert_eq!(spec.enable_service_links, Some(false));
        assert_eq!(spec.hostname.as_deref(), Some("web-0"));
    }

    /// With service-account sync on, the host copy of the tenant's account is used.
    #[test]
    fn service_account_is_translated_when_synced() {
        let spec = host(&PodEnv {
            sync_service_accounts: true,
            ..env()
        });
        assert_eq!(
            spec.service_account_name.as_deref(),
            Some("builder-x-shop-x-vc")
        );
    }

    /// Without a minted token the projected host token is dropped, never passed through.
    #[test]
    fn projected_token_is_dropped_without_a_minted_token() {
        let spec = host(&env());
        let sources = spec.volumes.unwrap()[4]
            .projected
            .clone()
            .unwrap()
            .sources
            .unwrap();
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
        let sources = spec.volumes.unwrap()[4]
            .projected
            .clone()
            .unwrap()
            .sources
            .unwrap();
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
        let sources = pod.spec.unwrap().volumes.unwrap()[4]
            .projected
            .clone()
            .unwrap()
            .sources
            .unwrap();
        assert!(sources.iter().all(|s| s.secret.is_none()));
        let item = &sources[0]
            .downward_api
            .as_ref()
            .unwrap()
            .items
            .as_ref()
            .unwrap()[0];
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

    /// In-cluster clients in the host pod talk to the virtual API server, not the host's.
    #[test]
    fn kubernetes_service_env_points_at_the_virtual_api() {
        let spec = host(&env());
        for c in spec
            .containers
            .iter()
            .chain(spec.init_containers.iter().flatten())
        {
            let env = c.env.as_ref().unwrap();
            let host_vars: Vec<_> = env
                .iter()
                .filter(|e| e.name == "KUBERNETES_SERVICE_HOST")
                .collect();
            assert_eq!(host_vars.len(), 1, "{}", c.name);
            assert_eq!(host_vars[0].value.as_deref(), Some("10.96.0.10"));
            let port = env
                .iter()
                .find(|e| e.name == "KUBERNETES_SERVICE_PORT")
                .unwrap();
            assert_eq!(port.value.as_deref(), Some("443"));
        }
    }

    /// Cluster DNS inside the pod is the virtual cluster's, searched from its own namespace.
    #[test]
    fn dns_points_at_the_virtual_cluster() {
        let spec = host(&env());
        assert_eq!(spec.dns_policy.as_deref(), Some("None"));
        let dns = spec.dns_config.unwrap();
        assert_eq!(dns.nameservers.unwrap(), ["10.96.0.53"]);
        assert_eq!(dns.searches.unwrap()[0], "shop.svc.cluster.local");
    }

    /// The search path follows the spec's `networking.advanced.clusterDomain`, not a constant.
    #[test]
    fn dns_searches_the_virtual_cluster_domain() {
        let spec = host(&PodEnv {
            cluster_domain: "tenant.example".into(),
            ..env()
        });
        assert_eq!(
            spec.dns_config.unwrap().searches.unwrap(),
            [
                "shop.svc.tenant.example",
                "svc.tenant.example",
                "tenant.example"
            ]
        );
    }

    /// With no virtual DNS Service known, the pod keeps its DNS policy.
    #[test]
    fn dns_is_left_alone_without_a_virtual_dns_service() {
        let spec = host(&PodEnv {
            dns_ip: None,
            ..env()
        });
        assert_eq!(spec.dns_policy, None);
        assert_eq!(spec.dns_config, None);
    }

    /// The pod reads its virtual name and namespace through the downward API, not the host's.
    #[test]
    fn downward_api_reports_the_virtual_identity() {
        let spec = host(&env());
        let env = spec.containers[0].env.clone().unwrap();
        let ns = env.iter().find(|e| e.name == "MY_NS").unwrap();
        let path = &ns
            .value_from
            .as_ref()
            .unwrap()
            .field_ref
            .as_ref()
            .unwrap()
            .field_path;
        assert_eq!(
            path,
            "metadata.annotations['vcluster.loft.sh/object-namespace']"
        );
        let sources = spec.volumes.unwrap()[4]
            .projected
            .clone()
            .unwrap()
            .sources
            .unwrap();
        let item = &sources[1]
            .downward_api
            .as_ref()
            .unwrap()
            .items
            .as_ref()
            .unwrap()[0];
        assert_eq!(
            item.field_ref.as_ref().unwrap().field_path,
            "metadata.annotations['vcluster.loft.sh/object-namespace']"
        );
    }

    /// Status flows back unchanged: phase, IPs, conditions.
    #[test]
    fn host_status_is_the_virtual_status() {
        let host: Pod = from_yaml(
            "metadata: {name: x}\nstatus: {phase: Running, podIP: 10.244.0.7, hostIP: 127.0.0.1}",
        );
        let virt: Pod = from_yaml("metadata: {name: x}\nstatus: {phase: Pending}");
        let status = virtual_status(&host, &virt).unwrap();
        assert_eq!(status.phase.as_deref(), Some("Running"));
        assert_eq!(status.pod_ip.as_deref(), Some("10.244.0.7"));
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

    fn patches(yaml: &str) -> PodPatches {
        PodPatches::compile(&from_yaml(yaml)).unwrap()
    }

    /// The seed's examples act on the translated host pod: the tenant's label value gets its
    /// prefix, no volume keeps its host path, the syncer's markers stay.
    #[test]
    fn patches_act_on_the_translated_host_pod() {
        let virt: Pod = from_yaml(
            "metadata: {name: web, namespace: shop, labels: {app: web}}
spec:
  containers: [{name: app, image: nginx}]
  volumes: [{name: root, hostPath: {path: /}}]",
        );
        let host = host_pod(&virt, &target(), &env());
        let p = patches(
            "translatePatches: [{path: metadata.labels.app, expression: \"'vcluster-' + value\"}]\npatches: [{path: 'spec.volumes[*].hostPath', op: remove}]",
        );
        let patched = patch_host_pod(host, &p).unwrap();
        let labels = patched.metadata.labels.as_ref().unwrap();
        assert_eq!(labels["app"], "vcluster-web");
        assert_eq!(labels[vnest_crds::meta::LABEL_SYNCER_MANAGED_BY], "vc");
        let volume = &patched.spec.unwrap().volumes.unwrap()[0];
        assert_eq!(volume.name, "root");
        assert!(volume.host_path.is_none());
    }

    /// A tenant pod dressed as the control plane (`app=vcluster,release=<vc>` and the
    /// operator's `vnest.dev/control-plane` key) becomes a host pod the control plane's
    /// Services and NetworkPolicy do not select: the key is rewritten, so it cannot take part
    /// in the tenants' API traffic.
    #[test]
    fn a_pod_labelled_as_the_control_plane_is_not_selected_by_its_services() {
        use vnest_crds::meta::{LABEL_CONTROL_PLANE, control_plane_selector};
        let virt: Pod = from_yaml(&format!(
            "metadata: {{name: web, namespace: shop, labels: {{app: vcluster, release: vc, {LABEL_CONTROL_PLANE}: vc}}}}
spec:
  containers: [{{name: app, image: nginx}}]",
        ));
        let host = host_pod(&virt, &target(), &env());
        let labels = host.metadata.labels.unwrap();
        let selector = control_plane_selector(&target().vc);
        assert!(
            !selector.iter().all(|(k, v)| labels.get(k) == Some(v)),
            "the control plane's selector {selector:?} matches the host pod's labels {labels:?}"
        );
        assert!(!labels.contains_key(LABEL_CONTROL_PLANE), "{labels:?}");
        assert_eq!(labels["app"], "vcluster");
    }

    /// A patch the pod cannot take is reported, not half-applied.
    #[test]
    fn a_failing_patch_is_reported() {
        let p = patches("translatePatches: [{path: spec.priority, expression: \"'1'\"}]");
        let mut virt: Pod = from_yaml(POD);
        virt.spec.as_mut().unwrap().priority = Some(5);
        let err = patch_host_pod(host_pod(&virt, &target(), &env()), &p).unwrap_err();
        assert!(
            err.contains("translatePatches[0] (spec.priority): the field is a number"),
            "{err}"
        );
    }

    #[test]
    fn a_requested_node_is_honoured_only_when_shown() {
        let spec = |n: Option<&str>| PodSpec {
            node_name: n.map(String::from),
            ..Default::default()
        };
        let shown = |n: &str| n == "worker-1";
        assert_eq!(requested_node(&spec(None), shown), Ok(None));
        assert_eq!(requested_node(&spec(Some("")), shown), Ok(None));
        assert_eq!(
            requested_node(&spec(Some("worker-1")), shown),
            Ok(Some("worker-1".to_string()))
        );
        let why = requested_node(&spec(Some("control-plane")), shown).unwrap_err();
        assert!(why.contains("spec.nodeName control-plane"), "{why}");
        assert!(
            why.contains("not one of the virtual cluster's nodes"),
            "{why}"
        );
    }
}
