//! Pods: refused when they break the Pod Security Standard; otherwise copied to the host,
//! their status copied back, the virtual pod bound to the node its host copy landed on, a
//! virtual service-account token minted for them ([`token`]) and the ClusterTrustBundles they
//! project delivered in a host ConfigMap ([`trust_bundles`]).

mod token;
pub mod trust_bundles;

use k8s_openapi::api::core::v1::{
    Binding, EnvVar, EphemeralContainer, ObjectReference, Pod, PodSpec, Service,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, Patch, PatchParams, PostParams},
    runtime::reflector::ObjectRef,
};
use tokio::sync::OnceCell;
use vnest_crds::{
    PodsToHost, meta::ANNOTATION_APPLIED_HASH, patch::PodPatches, translate::host_name,
};

use super::{metadata_covers, sync_status};
use crate::{
    cache::Cache,
    engine::{Ctx, Decision, HostGone, PodReference, Queue, Syncer, conflicted_reference},
    translate::{
        api_service::is_api_service,
        placement::Placement,
        pod::{
            PodEnv, TokenDelivery, ended_status, host_ephemeral_containers, host_pod, mutable_hash,
            patch_host_pod, requested_node, requested_tokens, service_env::from_services,
            updated_spec, virtual_status,
        },
        pod_security,
    },
};
use token::Tokens;
use trust_bundles::TrustBundles;

/// What the syncs read of a cached host pod: its metadata (which records the hash of its
/// mutable fields, [`ANNOTATION_APPLIED_HASH`]) and status, and of its spec the node and
/// the names of its ephemeral containers. A container alone weighs over 2 KiB in memory, so
/// the rest of the spec is most of a cached pod's weight; an update reads the whole pod.
fn trim_host(pod: &mut Pod) {
    if let Some(spec) = pod.spec.take() {
        pod.spec = Some(PodSpec {
            node_name: spec.node_name,
            ephemeral_containers: spec.ephemeral_containers.map(|all| {
                all.into_iter()
                    .map(|e| EphemeralContainer {
                        name: e.name,
                        ..Default::default()
                    })
                    .collect()
            }),
            ..Default::default()
        });
    }
}

/// `pod` recording the hash of its mutable fields, so a cached copy without its containers
/// still shows when they must change.
fn with_mutable_hash(mut pod: Pod) -> Pod {
    let hash = mutable_hash(pod.spec.as_ref().unwrap_or(&PodSpec::default()));
    pod.annotations_mut()
        .insert(ANNOTATION_APPLIED_HASH.into(), hash);
    pod
}

/// Whether host pod `actual` (cached, trimmed) falls short of `desired`: a label, an annotation
/// or the mutable fields' hash differs.
fn host_pod_outdated(actual: &Pod, desired: &Pod) -> bool {
    !metadata_covers(actual, desired)
}

/// The image of the init container rewriting `/etc/hosts`, when `rewriteHosts` is on and the
/// operator named one (it fills in its syncer image).
fn rewrite_hosts_image(pods: &PodsToHost) -> Option<String> {
    let rewrite = &pods.rewrite_hosts;
    if !rewrite.enabled {
        return None;
    }
    rewrite.init_container.image.clone()
}

/// The host pod `host` as the owner of the Secret and ConfigMap made for it, which go with it.
fn owned_by(host: &Pod) -> OwnerReference {
    OwnerReference {
        api_version: "v1".into(),
        kind: "Pod".into(),
        name: host.name_any(),
        uid: host.uid().unwrap_or_default(),
        ..Default::default()
    }
}

/// Turns a host API error of a write made for virtual pod `virt` into "failed to `what` of pod
/// <namespace>/<name>: <error>".
fn failed_for(virt: &Pod, what: &'static str) -> impl FnOnce(kube::Error) -> anyhow::Error {
    let pod = format!(
        "{}/{}",
        virt.namespace().unwrap_or_default(),
        virt.name_any()
    );
    move |e| anyhow::anyhow!("failed to {what} of pod {pod}: {e}")
}

/// The live host pod's spec with `desired`'s changes to its mutable fields, if any.
fn spec_update(actual: &Pod, desired: &Pod) -> Option<PodSpec> {
    updated_spec(actual.spec.as_ref()?, desired.spec.as_ref()?)
}

/// Port of the virtual API server's host Service (443 → the proxy's 8443).
const API_SERVICE_PORT: i32 = 443;

pub struct Pods {
    /// Host Services the syncer made, to find the virtual cluster's DNS.
    host_services: Cache<Service>,
    /// Host pods, to pick up the token a host copy already carries after a restart.
    host_pods: Cache<Pod>,
    api_service: OnceCell<(String, i32)>,
    tokens: Tokens,
    trust_bundles: TrustBundles,
    /// `toHost.pods.patches` and `translatePatches`, parsed once.
    patches: PodPatches,
    /// Kinds whose host copies a pod mounts: a pod using a conflicted name is refused.
    pub references: Vec<PodReference>,
    /// Virtual Services, for the service-link variables of a pod's namespace; none when
    /// Services are not synced (their addresses would lead nowhere).
    pub virtual_services: Option<Cache<Service>>,
}

impl Pods {
    /// `queue` is the pod queue: pods are queued again when their token is due.
    pub fn new(
        host_services: Cache<Service>,
        host_pods: Cache<Pod>,
        queue: Queue,
        trust_bundles: TrustBundles,
        patches: PodPatches,
    ) -> Self {
        Pods {
            host_services,
            host_pods,
            api_service: OnceCell::new(),
            tokens: Tokens::new(queue),
            trust_bundles,
            patches,
            references: Vec::new(),
            virtual_services: None,
        }
    }

    /// Whether the tenant is shown host node `node` because a synced pod of this virtual
    /// cluster runs there (a minimal or real virtual Node of that name); nodes only a
    /// `fromHost.nodes` selector shows are not counted (refused, the safe side).
    fn node_shown(&self, node: &str) -> bool {
        self.host_pods
            .state()
            .iter()
            .any(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node))
    }

    /// The service-link variables of `virt`'s namespace, unless the pod turned them off: the
    /// Services there when it is created, as the kubelet would give them (it never updates a
    /// running container's environment either).
    async fn service_links(&self, virt: &Pod) -> anyhow::Result<Vec<EnvVar>> {
        let wanted = virt.spec.as_ref().and_then(|s| s.enable_service_links) != Some(false);
        let Some(services) = self.virtual_services.as_ref().filter(|_| wanted) else {
            return Ok(Vec::new());
        };
        services.wait_until_ready().await?;
        let namespace = virt.namespace().unwrap_or_default();
        let mut in_namespace: Vec<_> = services
            .state()
            .into_iter()
            .filter(|s| s.namespace().as_deref() == Some(namespace.as_str()))
            .filter(|s| !is_api_service(&namespace, &s.name_any()))
            .collect();
        in_namespace.sort_by_key(|s| s.name_any());
        Ok(from_services(in_namespace.iter().map(|s| s.as_ref())))
    }

    /// What translating `virt` needs besides the pod, its token delivered as `token`. The
    /// service links are read only when `with_links` (a host copy's environment is fixed
    /// once it is created, so they are not worth a scan of every virtual Service then).
    async fn pod_env(
        &self,
        ctx: &Ctx,
        virt: &Pod,
        token: Option<TokenDelivery>,
        with_links: bool,
    ) -> anyhow::Result<PodEnv> {
        let service_links = if with_links {
            self.service_links(virt).await?
        } else {
            Vec::new()
        };
        Ok(PodEnv {
            api_service: self.api_service(ctx).await,
            dns_ip: self.dns_ip(ctx),
            cluster_domain: ctx.config.networking.advanced.cluster_domain.clone(),
            sync_service_accounts: ctx.config.sync.to_host.serviceaccounts.enabled,
            token,
            sync_priority_classes: ctx.config.sync.to_host.priorityclasses.enabled,
            service_links,
            hosts_image: rewrite_hosts_image(&ctx.config.sync.to_host.pods),
        })
    }

    /// Adds to host pod `host` the ephemeral containers a tenant added to `virt` since (they
    /// can only be added, through the `ephemeralcontainers` subresource).
    async fn add_ephemeral_containers(
        &self,
        ctx: &Ctx,
        virt: &Pod,
        host: &Pod,
    ) -> anyhow::Result<()> {
        let on_host = |name: &str| {
            host.spec
                .as_ref()
                .and_then(|s| s.ephemeral_containers.as_ref())
                .is_some_and(|all| all.iter().any(|e| e.name == name))
        };
        let wanted = virt
            .spec
            .as_ref()
            .and_then(|s| s.ephemeral_containers.as_ref());
        if wanted.is_none_or(|all| all.iter().all(|e| on_host(&e.name))) {
            return Ok(());
        }
        let env = self.pod_env(ctx, virt, None, true).await?;
        let missing: Vec<_> = host_ephemeral_containers(virt, &ctx.target, &env)
            .into_iter()
            .filter(|e| !on_host(&e.name))
            .collect();
        let api: Api<Pod> = Api::namespaced(ctx.host.clone(), &ctx.target.host_namespace);
        ctx.metrics.count_host_write("Pod");
        let patch = serde_json::json!({ "spec": { "ephemeralContainers": missing } });
        api.patch_ephemeral_containers(
            &host.name_any(),
            &PatchParams::default(),
            &Patch::Strategic(patch),
        )
        .await
        .map_err(|e| {
            anyhow::anyhow!(
                "failed to add ephemeral containers to host pod {}: {e}",
                host.name_any()
            )
        })?;
        Ok(())
    }

    /// ClusterIP of the operator's Service in front of the virtual API server.
    async fn api_service(&self, ctx: &Ctx) -> Option<(String, i32)> {
        let found = self
            .api_service
            .get_or_try_init(|| async {
                let api: Api<Service> =
                    Api::namespaced(ctx.host.clone(), &ctx.target.host_namespace);
                let svc = api.get(&ctx.config.service_name).await?;
                let ip = svc
                    .spec
                    .and_then(|s| s.cluster_ip)
                    .filter(|ip| !ip.is_empty() && ip != "None");
                ip.map(|ip| (ip, API_SERVICE_PORT))
                    .ok_or_else(|| anyhow::anyhow!("service has no ClusterIP"))
            })
            .await;
        match found {
            Ok(found) => Some(found.clone()),
            Err(e) => {
                tracing::warn!(service = %ctx.config.service_name, error = %e, "virtual API service not found; pods get no KUBERNETES_SERVICE_HOST");
                None
            }
        }
    }

    /// ClusterIP of the host copy of the virtual cluster's `kube-system/kube-dns`.
    fn dns_ip(&self, ctx: &Ctx) -> Option<String> {
        let name = host_name("kube-dns", "kube-system", &ctx.target.vc);
        let svc = self
            .host_services
            .get(&ObjectRef::new(&name).within(&ctx.target.host_namespace))?;
        svc.spec
            .as_ref()?
            .cluster_ip
            .clone()
            .filter(|ip| !ip.is_empty() && ip != "None")
    }

    /// Binds the virtual pod to the node its host copy was scheduled to.
    async fn bind(&self, ctx: &Ctx, virt: &Pod, node: &str) -> anyhow::Result<()> {
        let ns = virt.namespace().unwrap_or_default();
        let binding = Binding {
            metadata: ObjectMeta {
                name: virt.metadata.name.clone(),
                namespace: Some(ns.clone()),
                ..Default::default()
            },
            target: ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Node".into()),
                name: Some(node.into()),
                ..Default::default()
            },
        };
        let api: Api<Pod> = Api::namespaced(ctx.virt.clone(), &ns);
        let (name, params) = (virt.name_any(), PostParams::default());
        let bound: Result<serde_json::Value, _> = ctx
            .metrics
            .timed(
                "bind",
                api.create_subresource("binding", &name, &params, &binding),
            )
            .await;
        match bound {
            Ok(_) => Ok(()),
            // A cache trailing our own earlier binding sees the pod unbound: bound is done.
            Err(kube::Error::Api(s)) if s.is_conflict() => Ok(()),
            Err(e) => Err(anyhow::anyhow!(
                "failed to bind virtual pod {ns}/{} to {node}: {e}",
                virt.name_any()
            )),
        }
    }
}

impl Syncer for Pods {
    type K = Pod;
    const KIND: &'static str = "Pod";
    const TRIM_HOST: Option<fn(&mut Pod)> = Some(trim_host);

    async fn desired(&self, ctx: &Ctx, virt: &Pod) -> anyhow::Result<Decision<Pod>> {
        let spec = virt.spec.clone().unwrap_or_default();
        if let Some(level) = ctx.config.pod_security_standard
            && let Err(v) = pod_security::check(&spec, level)
        {
            return Ok(Decision::Refuse {
                reason: "PodSecurityViolation",
                note: format!(
                    "not synced to the host: violates the {} pod security standard: {v}",
                    level.as_str()
                ),
            });
        }
        for r in &self.references {
            if let Some((used, owner)) = conflicted_reference(&(r.used_by)(virt), &r.owner_of) {
                let name = ctx.target.host_name(&used.1, &used.0);
                return Ok(Decision::Refuse {
                    reason: "NameConflict",
                    note: format!(
                        "not synced to the host: it uses {} {}/{}, whose host name {name} belongs to {}/{} \
                         (a name conflict); rename one of them",
                        r.kind, used.0, used.1, owner.0, owner.1
                    ),
                });
            }
        }
        let host = ctx
            .target
            .host_name(&virt.name_any(), &virt.namespace().unwrap_or_default());
        let host_copy = self
            .host_pods
            .get(&ObjectRef::new(&host).within(&ctx.target.host_namespace));
        // A pod that ran and whose host copy is gone is ended by the engine, never recreated:
        // its node (bound by us) need not be shown any more.
        let ended = self.host_gone(virt) == HostGone::DeleteVirtual && host_copy.is_none();
        let node = match requested_node(&spec, |n| ended || self.node_shown(n)) {
            Ok(node) => node,
            Err(e) => {
                return Ok(Decision::Refuse {
                    reason: e.category(),
                    note: e.to_string(),
                });
            }
        };
        let token = if requested_tokens(&spec).is_empty() {
            None
        } else if ctx.config.sync.to_host.pods.use_secrets_for_sa_tokens {
            Some(TokenDelivery::Secret(token::secret_name(&host)))
        } else {
            self.tokens
                .for_annotation(ctx, virt, host_copy.as_deref())
                .await?
        };
        // Only a pod about to be created takes its namespace's service links.
        let env = self.pod_env(ctx, virt, token, host_copy.is_none()).await?;
        let mut pod = host_pod(virt, &ctx.target, &env);
        if let Some(spec) = pod.spec.as_mut() {
            spec.node_name = node;
            Placement::from_sync(&ctx.config.sync).apply(spec);
        }
        Ok(match patch_host_pod(pod, &self.patches) {
            Ok(pod) => Decision::Sync(with_mutable_hash(pod)),
            Err(e) => Decision::Refuse {
                reason: e.category(),
                note: format!("not synced to the host: {e}"),
            },
        })
    }

    /// A created pod's spec is immutable but for a few fields ([`updated_spec`]): those, its
    /// labels and its annotations follow.
    fn needs_update(&self, actual: &Pod, desired: &Pod) -> bool {
        host_pod_outdated(actual, desired)
    }

    fn update_body(&self, actual: &Pod, desired: Pod) -> Pod {
        Pod {
            spec: spec_update(actual, &desired).or_else(|| actual.spec.clone()),
            metadata: desired.metadata,
            status: None,
        }
    }

    async fn back(&self, ctx: &Ctx, virt: &Pod, host: &Pod) -> anyhow::Result<()> {
        if ctx.config.sync.to_host.pods.use_secrets_for_sa_tokens {
            self.tokens.ensure_secret(ctx, virt, host).await?;
        }
        self.trust_bundles.ensure(ctx, virt, host).await?;
        self.add_ephemeral_containers(ctx, virt, host).await?;
        // Bind first, so a virtual pod seen Running is always on its node.
        let host_node = host.spec.as_ref().and_then(|s| s.node_name.as_deref());
        let virt_node = virt.spec.as_ref().and_then(|s| s.node_name.as_deref());
        if let (Some(node), None) = (host_node, virt_node) {
            self.bind(ctx, virt, node).await?;
        }
        sync_status(ctx, virt, virt.status.as_ref(), virtual_status(host, virt)).await?;
        Ok(())
    }

    async fn ended(&self, ctx: &Ctx, virt: &Pod) -> anyhow::Result<()> {
        sync_status(ctx, virt, virt.status.as_ref(), ended_status(virt)).await
    }

    /// A pod that ran on the host (bound, with a host IP) ends when its host copy ends, as in
    /// vCluster; its controller makes a new one.
    fn host_gone(&self, virt: &Pod) -> HostGone {
        let bound = virt.spec.as_ref().is_some_and(|s| s.node_name.is_some());
        let ran = virt.status.as_ref().is_some_and(|s| s.host_ip.is_some());
        if virt.metadata.deletion_timestamp.is_some() || (bound && ran) {
            HostGone::DeleteVirtual
        } else {
            HostGone::Recreate
        }
    }

    fn delete_params(&self, virt: Option<&Pod>) -> DeleteParams {
        match virt.and_then(|v| v.metadata.deletion_grace_period_seconds) {
            Some(grace) => DeleteParams::default().grace_period(grace.max(0) as u32),
            None => DeleteParams::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host_pod_with_image(image: &str) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": { "name": "web-x-shop-x-vc", "annotations": { "a": "b" } },
            "spec": {
                "nodeName": "node-1",
                "activeDeadlineSeconds": 30,
                "tolerations": [{ "key": "k", "operator": "Exists" }],
                "containers": [{
                    "name": "app", "image": image,
                    "env": [{ "name": "KUBERNETES_SERVICE_HOST", "value": "10.0.0.1" }],
                    "volumeMounts": [{ "name": "token", "mountPath": "/var/run/secrets" }],
                }],
                "volumes": [{ "name": "token", "emptyDir": {} }],
            },
            "status": { "phase": "Running", "podIP": "10.1.0.7" },
        }))
        .unwrap()
    }

    /// The cache keeps a host pod's metadata, status, node and ephemeral container names and
    /// drops the rest of its spec; an update is judged on the trimmed pod by the mutable
    /// fields' hash, and built from the whole pod.
    #[test]
    fn a_trimmed_host_pod_needs_an_update_exactly_when_its_mutable_fields_change() {
        let whole = with_mutable_hash(host_pod_with_image("nginx:1"));
        let mut trimmed = whole.clone();
        trim_host(&mut trimmed);
        let spec = trimmed.spec.as_ref().unwrap();
        assert_eq!(spec.node_name.as_deref(), Some("node-1"));
        assert!(spec.containers.is_empty() && spec.volumes.is_none() && spec.tolerations.is_none());
        assert_eq!(
            (&trimmed.metadata, &trimmed.status),
            (&whole.metadata, &whole.status)
        );

        let unchanged = with_mutable_hash(host_pod_with_image("nginx:1"));
        let new_image = with_mutable_hash(host_pod_with_image("nginx:2"));
        assert!(!host_pod_outdated(&trimmed, &unchanged));
        assert!(host_pod_outdated(&trimmed, &new_image));
        let update = spec_update(&whole, &new_image).expect("an image change");
        assert_eq!(update.containers[0].image.as_deref(), Some("nginx:2"));
        assert_eq!(update.volumes, whole.spec.unwrap().volumes);
    }

    /// A host pod written before it recorded the hash is updated once, to record it.
    #[test]
    fn a_host_pod_without_the_hash_is_updated_once() {
        let mut old = host_pod_with_image("nginx:1");
        trim_host(&mut old);
        let desired = with_mutable_hash(host_pod_with_image("nginx:1"));
        assert!(host_pod_outdated(&old, &desired));
    }
}
