//! Pods: the host copy of a virtual pod, every reference inside it renamed into the host
//! namespace, and the host pod's status as the virtual pod shows it. The renaming of
//! references ([`references`]), the service-account token ([`token`]), projected
//! ClusterTrustBundles ([`trust_bundles`]), what the pod's environment tells it about itself
//! ([`env`]), its `/etc/hosts` ([`hosts`]) and the fields a created pod may still change
//! ([`mutable`]) have their own modules.

mod env;
pub mod hosts;
mod mutable;
mod references;
pub mod service_env;
mod status;
mod token;
mod trust_bundles;

use k8s_openapi::api::core::v1::{
    EnvVar, EphemeralContainer, Pod, PodDNSConfig, PodDNSConfigOption, PodSpec,
};
use vnest_crds::meta::ANNOTATION_TOKEN_RENEW_AT;
use vnest_crds::patch::PodPatches;

pub use mutable::{mutable_hash, updated_spec};
pub use references::{References, references};
pub use status::{ended_status, virtual_status};
pub use token::{ANNOTATION_TOKEN, TOKEN_KEY, TokenDelivery, requested_tokens};
pub use trust_bundles::{bundle_data, config_map_name, trust_bundle_sources};

use super::{Target, TranslateError};
use env::{add_service_links, point_at_virtual_api, rewrite_downward_api};
use references::{containers_mut, walk_references};
use token::replace_tokens;
use trust_bundles::replace_trust_bundles;

/// What the host pod needs besides the virtual pod itself.
#[derive(Clone, Debug, Default, PartialEq)]
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
    /// The variables of the Services of the pod's virtual namespace
    /// ([`service_env::from_services`]), unless the pod turned `enableServiceLinks` off.
    pub service_links: Vec<EnvVar>,
    /// The image of the init container that gives a pod with a `subdomain` its virtual
    /// `/etc/hosts` (`sync.toHost.pods.rewriteHosts`); `None` when that is off.
    pub hosts_image: Option<String>,
}

/// The host node a tenant's `spec.nodeName` places the pod on: none asked, none; a node the
/// virtual cluster shows from a real host node (`shown`), that node (virtual nodes carry their
/// host node's name); any other, why the pod is refused.
pub fn requested_node(
    spec: &PodSpec,
    shown: impl Fn(&str) -> bool,
) -> Result<Option<String>, TranslateError> {
    match spec.node_name.as_deref().filter(|n| !n.is_empty()) {
        None => Ok(None),
        Some(node) if shown(node) => Ok(Some(node.to_string())),
        Some(node) => Err(TranslateError::NodeNotShown {
            node: node.to_string(),
        }),
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
    let metadata = target.host_meta("Pod", &virt.metadata);
    replace_trust_bundles(
        spec.volumes.as_deref_mut().unwrap_or_default(),
        &config_map_name(metadata.name.as_deref().unwrap_or_default()),
    );

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
    let api_vars = env
        .api_service
        .as_ref()
        .map(|(ip, port)| service_env::api_server(ip, *port))
        .unwrap_or_default();
    for c in containers_mut(&mut spec) {
        add_service_links(c, &env.service_links);
        if !api_vars.is_empty() {
            point_at_virtual_api(c, &api_vars);
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
    let subdomain = spec.subdomain.clone().filter(|s| !s.is_empty());
    if let (Some(image), Some(subdomain)) = (&env.hosts_image, subdomain) {
        let hostname = spec.hostname.clone().unwrap_or_default();
        let fqdn = hosts::pod_fqdn(&hostname, &subdomain, namespace, &env.cluster_domain);
        hosts::rewrite_hosts(&mut spec, image, &hostname, &fqdn);
    }
    let mut metadata = metadata;
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

/// The host copies of `virt`'s ephemeral containers, translated as its containers are
/// (references, environment, downward API) by running them through [`host_pod`] as regular
/// containers of a copy of the pod; each keeps its `targetContainerName`.
pub fn host_ephemeral_containers(
    virt: &Pod,
    target: &Target,
    env: &PodEnv,
) -> Vec<EphemeralContainer> {
    let ephemeral = virt
        .spec
        .as_ref()
        .and_then(|s| s.ephemeral_containers.clone())
        .unwrap_or_default();
    if ephemeral.is_empty() {
        return Vec::new();
    }
    // The two types share every field but `targetContainerName`, which a Container ignores.
    fn convert<From: serde::Serialize, To: serde::de::DeserializeOwned>(from: &From) -> To {
        serde_json::from_value(serde_json::to_value(from).expect("serializable"))
            .expect("the same fields")
    }
    let mut as_regular = virt.clone();
    if let Some(spec) = as_regular.spec.as_mut() {
        spec.containers = ephemeral.iter().map(convert).collect();
        spec.init_containers = None;
        spec.ephemeral_containers = None;
    }
    // An ephemeral container keeps the kubelet's `/etc/hosts`: the pod's rewritten copy
    // may not exist (the pod can predate `rewriteHosts`).
    let env = PodEnv {
        hosts_image: None,
        ..env.clone()
    };
    let translated = host_pod(&as_regular, target, &env)
        .spec
        .map(|s| s.containers)
        .unwrap_or_default();
    translated
        .into_iter()
        .zip(ephemeral)
        .map(|(container, original)| EphemeralContainer {
            target_container_name: original.target_container_name,
            ..convert(&container)
        })
        .collect()
}

/// Host pod `pod` with the `toHost.pods` patches applied, or why they cannot be.
pub fn patch_host_pod(pod: Pod, patches: &PodPatches) -> Result<Pod, TranslateError> {
    if patches.is_empty() {
        return Ok(pod);
    }
    let invalid = |e: serde_json::Error| TranslateError::PatchedPodInvalid(e.to_string());
    let mut value = serde_json::to_value(pod).map_err(invalid)?;
    patches.apply(&mut value)?;
    serde_json::from_value(value).map_err(invalid)
}

/// The pod every test translates, and the environment it is translated in.
#[cfg(test)]
mod fixture {
    use k8s_openapi::api::core::v1::{DownwardAPIVolumeFile, PodSpec, VolumeProjection};

    use super::super::test_support::*;
    use super::{PodEnv, host_pod};

    pub const POD: &str = r#"
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

    pub fn env() -> PodEnv {
        PodEnv {
            api_service: Some(("10.96.0.10".into(), 443)),
            dns_ip: Some("10.96.0.53".into()),
            cluster_domain: "cluster.local".into(),
            sync_service_accounts: false,
            token: None,
            sync_priority_classes: false,
            service_links: vec![],
            hosts_image: Some("syncer:1".into()),
        }
    }

    pub fn host(env: &PodEnv) -> PodSpec {
        host_pod(&from_yaml(POD), &target(), env).spec.unwrap()
    }

    /// The sources of the host copy of `kube-api-access-abcde`, [`POD`]'s projected volume.
    pub fn projected_sources(spec: PodSpec) -> Vec<VolumeProjection> {
        spec.volumes.unwrap()[4]
            .projected
            .clone()
            .unwrap()
            .sources
            .unwrap()
    }

    /// The first file of a projected downward-API source.
    pub fn first_downward_file(source: &VolumeProjection) -> &DownwardAPIVolumeFile {
        &source
            .downward_api
            .as_ref()
            .unwrap()
            .items
            .as_ref()
            .unwrap()[0]
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::fixture::*;
    use super::*;

    /// An ephemeral container is translated as a container would be (references to host
    /// copies, the virtual API server's variables, the downward API's virtual identity) and
    /// keeps the container it targets.
    #[test]
    fn ephemeral_containers_are_translated_like_containers() {
        let mut virt: Pod = from_yaml(POD);
        let debug: EphemeralContainer = serde_yaml::from_str(
            r#"
name: debugger
image: busybox
targetContainerName: app
env:
- { name: A, valueFrom: { configMapKeyRef: { name: settings, key: a } } }
- { name: MY_NS, valueFrom: { fieldRef: { fieldPath: metadata.namespace } } }
"#,
        )
        .unwrap();
        virt.spec.as_mut().unwrap().ephemeral_containers = Some(vec![debug]);
        let host = host_ephemeral_containers(&virt, &target(), &env());
        assert_eq!(host.len(), 1);
        let debug = &host[0];
        assert_eq!(debug.name, "debugger");
        assert_eq!(debug.target_container_name.as_deref(), Some("app"));
        let vars = debug.env.as_ref().unwrap();
        let var = |name: &str| vars.iter().find(|e| e.name == name).unwrap();
        let config_map = var("A")
            .value_from
            .as_ref()
            .unwrap()
            .config_map_key_ref
            .as_ref();
        assert_eq!(
            config_map.unwrap().name,
            target().host_name("settings", "shop")
        );
        assert_eq!(
            var("KUBERNETES_SERVICE_HOST").value.as_deref(),
            Some("10.96.0.10")
        );
        let field = var("MY_NS")
            .value_from
            .as_ref()
            .unwrap()
            .field_ref
            .as_ref()
            .unwrap();
        assert_ne!(
            field.field_path, "metadata.namespace",
            "the virtual namespace, not the host's"
        );
        // A pod without any has none.
        assert!(host_ephemeral_containers(&from_yaml(POD), &target(), &env()).is_empty());
    }

    /// A pod with a subdomain is given the virtual cluster's `/etc/hosts` by the rewrite
    /// init container; one without, or with `rewriteHosts` off, keeps the kubelet's.
    #[test]
    fn pods_with_a_subdomain_get_their_virtual_hosts_file() {
        let init_names = |spec: &PodSpec| -> Vec<String> {
            spec.init_containers
                .iter()
                .flatten()
                .map(|c| c.name.clone())
                .collect()
        };
        let mut virt: Pod = from_yaml(POD);
        let spec = virt.spec.as_mut().unwrap();
        spec.hostname = Some("querier".into());
        spec.subdomain = Some("db".into());
        let host = host_pod(&virt, &target(), &env()).spec.unwrap();
        assert_eq!(init_names(&host), [hosts::REWRITE_HOSTS, "init"]);
        let args = host.init_containers.as_ref().unwrap()[0].args.clone();
        assert!(
            args.unwrap()
                .contains(&"querier.db.shop.svc.cluster.local".to_string()),
            "the virtual namespace and domain"
        );
        let off = PodEnv {
            hosts_image: None,
            ..env()
        };
        let kept = host_pod(&virt, &target(), &off).spec.unwrap();
        assert_eq!(init_names(&kept), ["init"]);
        let plain = host_pod(&from_yaml(POD), &target(), &env()).spec.unwrap();
        assert_eq!(init_names(&plain), ["init"]);
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
        let err = patch_host_pod(host_pod(&virt, &target(), &env()), &p)
            .unwrap_err()
            .to_string();
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
        let why = requested_node(&spec(Some("control-plane")), shown)
            .unwrap_err()
            .to_string();
        assert!(why.contains("spec.nodeName control-plane"), "{why}");
        assert!(
            why.contains("not one of the virtual cluster's nodes"),
            "{why}"
        );
    }
}
