//! `spec.sync`: which resources the syncer copies, in which direction. Key spellings follow
//! the vcluster.yaml examples users already have (`toHost.persistentvolumeclaims`,
//! `fromHost.storageClasses`), and the defaults follow vCluster's resource sync table.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Toleration;
use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

fn on() -> bool {
    true
}

/// One resource type syncs in one direction only; the API server refuses a spec that enables
/// the same resource both ways.
#[derive(KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new(
        "!has(self.toHost) || !has(self.fromHost) || !has(self.toHost.customResources) || !has(self.fromHost.customResources) || self.toHost.customResources.all(k, !(k in self.fromHost.customResources) || !self.toHost.customResources[k].enabled || !self.fromHost.customResources[k].enabled)"
    ).message("a custom resource is enabled in both sync.toHost.customResources and sync.fromHost.customResources; a resource syncs in one direction only, so disable or remove one of the two entries"),
    validation = Rule::new(
        "!has(self.toHost) || !has(self.fromHost) || !has(self.toHost.priorityclasses) || !has(self.fromHost.priorityClasses) || !(self.toHost.priorityclasses.enabled && self.fromHost.priorityClasses.enabled)"
    ).message("priority classes are enabled in both sync.toHost.priorityclasses and sync.fromHost.priorityClasses; a resource syncs in one direction only, so disable one of the two")
)]
pub struct Sync {
    /// Resources created in the virtual cluster and copied to the host namespace.
    #[serde(default)]
    pub to_host: ToHost,
    /// Resources owned by the host and shown inside the virtual cluster.
    #[serde(default)]
    pub from_host: FromHost,
    /// How fast the syncer's controllers may call the host API server (the seed's
    /// large-scale advice: throttle the syncers, not the API server). Tenants' requests
    /// through the proxy are not counted.
    #[serde(default)]
    pub host_rate_limit: HostRateLimit,
}

/// The syncer's host client sends at most `burst` requests per `burst / qps` seconds, so
/// `qps` per second on average. The defaults are generous (a syncer creating pods as fast
/// as a direct client does stays below them); lower them to share one host API server
/// between many busy virtual clusters, at the price of slower syncs while a burst lasts.
#[derive(KubeSchema, Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct HostRateLimit {
    #[serde(default = "HostRateLimit::default_qps")]
    #[schemars(range(min = 1, max = 10000))]
    pub qps: u32,
    #[serde(default = "HostRateLimit::default_burst")]
    #[schemars(range(min = 1, max = 20000))]
    pub burst: u32,
}

impl HostRateLimit {
    fn default_qps() -> u32 {
        200
    }
    fn default_burst() -> u32 {
        400
    }
}

impl Default for HostRateLimit {
    fn default() -> Self {
        HostRateLimit {
            qps: Self::default_qps(),
            burst: Self::default_burst(),
        }
    }
}

impl Sync {
    /// The Gateway API resources switched on by their own fields, as `<plural>` of group
    /// `gateway.networking.k8s.io` (version v1), to the host and from the host.
    pub fn gateway_api(&self) -> (Vec<&'static str>, Vec<&'static str>) {
        let (to, from) = (&self.to_host, &self.from_host);
        let on = |pairs: &[(bool, &'static str)]| -> Vec<&'static str> {
            pairs
                .iter()
                .filter(|(on, _)| *on)
                .map(|(_, p)| *p)
                .collect()
        };
        (
            on(&[
                (to.gateways.enabled, "gateways"),
                (to.http_routes.enabled, "httproutes"),
                (to.grpc_routes.enabled, "grpcroutes"),
                (to.tls_routes.enabled, "tlsroutes"),
            ]),
            on(&[(from.gateway_classes.enabled, "gatewayclasses")]),
        )
    }
}

/// The Gateway API group the `gateways`, `*Routes` and `gatewayClasses`
/// fields sync, and the version they sync.
pub const GATEWAY_API_GROUP: &str = "gateway.networking.k8s.io";
pub const GATEWAY_API_VERSION: &str = "v1";

/// A resource sync that is on or off.
#[derive(KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Toggle {
    pub enabled: bool,
}

impl Toggle {
    fn on() -> Self {
        Toggle { enabled: true }
    }
    fn off() -> Self {
        Toggle { enabled: false }
    }
}

/// Virtual → host. Field names are the lowercase plurals of the seed's vcluster.yaml.
#[derive(KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToHost {
    #[serde(default)]
    pub pods: PodsToHost,
    #[serde(default = "Toggle::on")]
    pub services: Toggle,
    #[serde(default = "Toggle::on")]
    pub endpoints: Toggle,
    /// Only those a synced pod uses, unless `all`.
    #[serde(default)]
    pub configmaps: ReferencedResource,
    /// Only those a synced pod uses, unless `all`.
    #[serde(default)]
    pub secrets: ReferencedResource,
    #[serde(default = "Toggle::on")]
    pub persistentvolumeclaims: Toggle,
    #[serde(default = "Toggle::off")]
    pub ingresses: Toggle,
    #[serde(default = "Toggle::off")]
    pub serviceaccounts: Toggle,
    #[serde(default = "Toggle::off")]
    pub networkpolicies: Toggle,
    #[serde(default = "Toggle::off")]
    pub poddisruptionbudgets: Toggle,
    #[serde(default = "Toggle::off")]
    pub priorityclasses: Toggle,
    /// Gateway API Gateways (`gateway.networking.k8s.io`; the host needs its CRDs).
    #[serde(default = "Toggle::off")]
    pub gateways: Toggle,
    /// Gateway API HTTPRoutes.
    #[serde(default = "Toggle::off", rename = "httpRoutes")]
    pub http_routes: Toggle,
    /// Gateway API GRPCRoutes.
    #[serde(default = "Toggle::off", rename = "grpcRoutes")]
    pub grpc_routes: Toggle,
    /// Gateway API TLSRoutes (TLS passed through to a backend chosen by SNI host name).
    #[serde(default = "Toggle::off", rename = "tlsRoutes")]
    pub tls_routes: Toggle,
    /// Keyed `<plural>.<group>` (optionally `/<version>`), e.g. `certificates.cert-manager.io`.
    #[serde(default)]
    #[schemars(extend("maxProperties" = 64))]
    #[x_kube(validation = Rule::new(CUSTOM_RESOURCE_KEY_RULE).message(CUSTOM_RESOURCE_KEY_MESSAGE))]
    pub custom_resources: CustomResources,
}

impl Default for ToHost {
    fn default() -> Self {
        ToHost {
            pods: PodsToHost::default(),
            services: Toggle::on(),
            endpoints: Toggle::on(),
            configmaps: ReferencedResource::default(),
            secrets: ReferencedResource::default(),
            persistentvolumeclaims: Toggle::on(),
            ingresses: Toggle::off(),
            serviceaccounts: Toggle::off(),
            networkpolicies: Toggle::off(),
            poddisruptionbudgets: Toggle::off(),
            priorityclasses: Toggle::off(),
            gateways: Toggle::off(),
            http_routes: Toggle::off(),
            grpc_routes: Toggle::off(),
            tls_routes: Toggle::off(),
            custom_resources: CustomResources::default(),
        }
    }
}

#[derive(KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodsToHost {
    #[serde(default = "on")]
    pub enabled: bool,
    /// Rewrites of pod fields on the way to the host (the seed's `metadata.labels.app` example).
    #[serde(default)]
    #[schemars(length(max = 32))]
    pub translate_patches: Vec<TranslatePatch>,
    /// Fixed operations on host pods, e.g. removing `spec.volumes[*].hostPath`.
    #[serde(default)]
    #[schemars(length(max = 32))]
    pub patches: Vec<PodPatch>,
    /// Deliver each pod's virtual service-account token through a host Secret
    /// `<host-pod>-sa-token` instead of an annotation on the host pod (vCluster's option of
    /// the same name). Off: one host write per pod, but whoever may read pods in the host
    /// namespace (e.g. the `view` role, log shippers that copy annotations) can read the
    /// tokens. On: only those who may read Secrets can, at a second write per pod.
    #[serde(default, rename = "useSecretsForSATokens")]
    pub use_secrets_for_sa_tokens: bool,
    /// Tolerations added to every host pod (vCluster's option of the same name, as objects):
    /// the host admin's way to send a virtual cluster's pods to tainted nodes. The virtual
    /// nodes shown from host nodes drop the taints these tolerate, so the tenant sees the
    /// nodes its pods may use as untainted.
    #[serde(default)]
    #[schemars(length(max = 16))]
    pub enforce_tolerations: Vec<Toleration>,
    /// A host pod with a `subdomain` gets the `/etc/hosts` the virtual cluster would give it
    /// (vCluster's option of the same name): the host kubelet names the pod there by the host
    /// namespace and cluster domain, so an init container writes the file again with the
    /// virtual ones and every container mounts that copy.
    #[serde(default)]
    pub rewrite_hosts: RewriteHosts,
}

impl Default for PodsToHost {
    fn default() -> Self {
        PodsToHost {
            enabled: true,
            translate_patches: Vec::new(),
            patches: Vec::new(),
            use_secrets_for_sa_tokens: false,
            enforce_tolerations: Vec::new(),
            rewrite_hosts: RewriteHosts::default(),
        }
    }
}

#[derive(KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RewriteHosts {
    #[serde(default = "on")]
    pub enabled: bool,
    #[serde(default)]
    pub init_container: RewriteHostsInitContainer,
}

impl Default for RewriteHosts {
    fn default() -> Self {
        RewriteHosts {
            enabled: true,
            init_container: RewriteHostsInitContainer::default(),
        }
    }
}

#[derive(KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RewriteHostsInitContainer {
    /// Image of the init container, which runs `vnest-syncer rewrite-hosts`; the syncer's
    /// own image (the operator's) when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512))]
    pub image: Option<String>,
}

#[derive(KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TranslatePatch {
    /// Dotted path of the field, e.g. `metadata.labels.app`.
    #[x_kube(validation = Rule::new("size(self) > 0 && size(self) <= 256").message("must be a dotted field path such as metadata.labels.app"))]
    pub path: String,
    /// Expression computing the new value from `value`, e.g. `'vcluster-' + value`.
    #[x_kube(validation = Rule::new("size(self) > 0 && size(self) <= 1024").message("must be a non-empty expression of at most 1024 characters"))]
    pub expression: String,
}

#[derive(KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PodPatch {
    /// Field path with `[*]` for every list element, e.g. `spec.volumes[*].hostPath`.
    #[x_kube(validation = Rule::new("size(self) > 0 && size(self) <= 256").message("must be a field path such as spec.volumes[*].hostPath"))]
    pub path: String,
    pub op: PatchOp,
}

#[derive(JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum PatchOp {
    /// Delete the field from the host object.
    Remove,
}

/// ConfigMaps and Secrets: synced when a synced pod references them, or all with `all`.
#[derive(KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReferencedResource {
    #[serde(default = "on")]
    pub enabled: bool,
    /// Sync every object, not only those a synced pod uses.
    #[serde(default)]
    pub all: bool,
}

impl Default for ReferencedResource {
    fn default() -> Self {
        ReferencedResource {
            enabled: true,
            all: false,
        }
    }
}

/// Host → virtual.
#[derive(KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FromHost {
    /// Off: each host node running a synced pod appears as a minimal virtual Node.
    /// On: real node objects matching `selector`.
    #[serde(default)]
    pub nodes: NodesFromHost,
    #[serde(default = "Toggle::on")]
    pub storage_classes: Toggle,
    #[serde(default = "Toggle::off")]
    pub ingress_classes: Toggle,
    #[serde(default = "Toggle::on")]
    pub csi_drivers: Toggle,
    #[serde(default = "Toggle::on")]
    pub csi_nodes: Toggle,
    #[serde(default = "Toggle::on")]
    pub csi_storage_capacities: Toggle,
    #[serde(default = "Toggle::off")]
    pub priority_classes: Toggle,
    /// Gateway API GatewayClasses: every host class, so tenant Gateways can name one.
    #[serde(default = "Toggle::off")]
    pub gateway_classes: Toggle,
    /// Host events about synced objects, shown on the virtual objects.
    #[serde(default = "Toggle::on")]
    pub events: Toggle,
    /// Keyed `<plural>.<group>` (optionally `/<version>`), e.g. `clusterissuers.cert-manager.io`.
    #[serde(default)]
    #[schemars(extend("maxProperties" = 64))]
    #[x_kube(validation = Rule::new(CUSTOM_RESOURCE_KEY_RULE).message(CUSTOM_RESOURCE_KEY_MESSAGE))]
    pub custom_resources: CustomResources,
}

impl Default for FromHost {
    fn default() -> Self {
        FromHost {
            nodes: NodesFromHost::default(),
            storage_classes: Toggle::on(),
            ingress_classes: Toggle::off(),
            csi_drivers: Toggle::on(),
            csi_nodes: Toggle::on(),
            csi_storage_capacities: Toggle::on(),
            priority_classes: Toggle::off(),
            gateway_classes: Toggle::off(),
            events: Toggle::on(),
            custom_resources: CustomResources::default(),
        }
    }
}

#[derive(KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodesFromHost {
    #[serde(default)]
    pub enabled: bool,
    /// Which host nodes the virtual cluster shows. Its `labels` also become every host pod's
    /// node selector (as in vCluster), so pods run only on the nodes the tenant sees.
    #[serde(default)]
    pub selector: NodeSelector,
    /// Drop `status.images` from synced nodes to hide what the host has pulled.
    #[serde(default)]
    pub clear_image_status: bool,
}

#[derive(KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[x_kube(validation = Rule::new("!(self.all && size(self.labels) > 0)").message("set either all: true or labels, not both"))]
pub struct NodeSelector {
    /// Sync only nodes carrying all these labels.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Sync every host node.
    #[serde(default)]
    pub all: bool,
}

/// Custom resources to sync, keyed `<plural>.<group>` or `<plural>.<group>/<version>`.
pub type CustomResources = BTreeMap<String, CustomResourceSync>;

const CUSTOM_RESOURCE_KEY_RULE: &str = "self.all(k, k.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+(/v[0-9]+((alpha|beta)[0-9]+)?)?$'))";
const CUSTOM_RESOURCE_KEY_MESSAGE: &str = "keys must be <plural>.<group> or <plural>.<group>/<version>, e.g. certificates.cert-manager.io or flunders.wardle.example.com/v1beta1";

#[derive(KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CustomResourceSync {
    #[serde(default = "on")]
    pub enabled: bool,
    /// Resolved from the host's API discovery when absent; the syncer refuses a scope the
    /// host contradicts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<ResourceScope>,
}

#[derive(JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ResourceScope {
    Cluster,
    Namespaced,
}
