//! Pods: refused when they break the Pod Security Standard; otherwise copied to the host,
//! their status copied back, the virtual pod bound to the node its host copy landed on, and
//! a virtual service-account token minted for them and delivered through a host Secret.

use std::{
    collections::HashMap,
    sync::Mutex,
    time::{Duration, Instant},
};

use k8s_openapi::api::{
    authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec},
    core::v1::{Binding, ObjectReference, Pod, Secret, Service, ServiceAccount},
};
use k8s_openapi::{
    ByteString,
    apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference},
};
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, Patch, PatchParams, PostParams},
    runtime::reflector::{ObjectRef, Store},
};
use tokio::sync::OnceCell;
use vnest_crds::{
    meta::ANNOTATION_TOKEN_RENEW_AT,
    translate::{host_name, safe_concat_name},
};

use super::{metadata_covers, sync_status};
use crate::{
    engine::{Ctx, Decision, FIELD_MANAGER, HostGone, Queue, Syncer},
    translate::{
        pod::{PodEnv, TOKEN_KEY, host_pod, requested_tokens, virtual_status},
        pod_security,
    },
};

/// Port of the virtual API server's host Service (443 → the proxy's 8443).
const API_SERVICE_PORT: i32 = 443;
/// Token lifetime when the projection does not ask for one.
const DEFAULT_TOKEN_SECONDS: i64 = 3600;

pub struct Pods {
    /// Host Services the syncer made, to find the virtual cluster's DNS.
    pub host_services: Store<Service>,
    /// The pod queue, to refresh tokens before they expire.
    pub queue: Queue,
    api_service: OnceCell<(String, i32)>,
    /// Virtual pod uid → when its minted token must be renewed.
    tokens: Mutex<HashMap<String, Instant>>,
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Host Secret carrying the virtual token of the pod whose host name is `host_pod`.
fn token_secret_name(host_pod: &str) -> String {
    safe_concat_name(&[host_pod, "sa-token"])
}

impl Pods {
    pub fn new(host_services: Store<Service>, queue: Queue) -> Self {
        Pods {
            host_services,
            queue,
            api_service: OnceCell::new(),
            tokens: Mutex::default(),
        }
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

    /// Mints the pod's virtual service-account token when it has none or it is due, and
    /// stores it in the host Secret its host copy mounts (owned by the host pod).
    async fn ensure_token(&self, ctx: &Ctx, virt: &Pod, host: &Pod) -> anyhow::Result<()> {
        let spec = virt.spec.as_ref();
        let Some((audience, expiry)) = spec.and_then(|s| requested_tokens(s).into_iter().next())
        else {
            return Ok(());
        };
        let uid = virt.uid().unwrap_or_default();
        let due = self
            .tokens
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&uid)
            .copied();
        let ns = virt.namespace().unwrap_or_default();
        let key = (ns.clone(), virt.name_any());
        match due {
            Some(due) if due > Instant::now() => return Ok(()),
            // First look since this syncer started: a stored token may still be good.
            None => {
                if let Some(left) = self.stored_token_left(ctx, host).await? {
                    self.remember(uid, key, left);
                    return Ok(());
                }
            }
            Some(_) => {}
        }
        let sa = spec
            .and_then(|s| s.service_account_name.clone())
            .unwrap_or_else(|| "default".into());
        let seconds = expiry.unwrap_or(DEFAULT_TOKEN_SECONDS);
        let request = TokenRequest {
            spec: Some(TokenRequestSpec {
                audiences: audience.map(|a| vec![a]),
                expiration_seconds: Some(seconds),
                bound_object_ref: Some(BoundObjectReference {
                    api_version: Some("v1".into()),
                    kind: Some("Pod".into()),
                    name: virt.metadata.name.clone(),
                    uid: Some(uid.clone()),
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let sa_api: Api<ServiceAccount> = Api::namespaced(ctx.virt.clone(), &ns);
        let minted: TokenRequest = sa_api
            .create_subresource("token", &sa, &PostParams::default(), &request)
            .await
            .map_err(|e| {
                anyhow::anyhow!("failed to mint a token for virtual service account {ns}/{sa}: {e}")
            })?;
        let token = minted
            .status
            .and_then(|s| s.token)
            .ok_or_else(|| anyhow::anyhow!("token request for {ns}/{sa} returned no token"))?;
        // Renew at 80% of the lifetime, as the kubelet does.
        let renew = Duration::from_secs((seconds.max(60) as u64) * 4 / 5);
        let renew_at = unix_now() + renew.as_secs();
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some(token_secret_name(&host.name_any())),
                annotations: Some(
                    [(ANNOTATION_TOKEN_RENEW_AT.to_string(), renew_at.to_string())].into(),
                ),
                namespace: Some(ctx.target.host_namespace.clone()),
                owner_references: Some(vec![OwnerReference {
                    api_version: "v1".into(),
                    kind: "Pod".into(),
                    name: host.name_any(),
                    uid: host.uid().unwrap_or_default(),
                    ..Default::default()
                }]),
                ..Default::default()
            },
            data: Some([(TOKEN_KEY.to_string(), ByteString(token.into_bytes()))].into()),
            ..Default::default()
        };
        let secrets: Api<Secret> = Api::namespaced(ctx.host.clone(), &ctx.target.host_namespace);
        ctx.metrics.host_writes.with_label_values(&["Secret"]).inc();
        secrets
            .patch(
                &secret.name_any(),
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&secret),
            )
            .await
            .map_err(|e| {
                anyhow::anyhow!(
                    "failed to store the token of pod {ns}/{}: {e}",
                    virt.name_any()
                )
            })?;
        self.remember(uid, key, renew);
        Ok(())
    }

    /// How long the token already stored for `host` stays good, if it does.
    async fn stored_token_left(&self, ctx: &Ctx, host: &Pod) -> anyhow::Result<Option<Duration>> {
        let secrets: Api<Secret> = Api::namespaced(ctx.host.clone(), &ctx.target.host_namespace);
        let name = token_secret_name(&host.name_any());
        let stored = secrets
            .get_opt(&name)
            .await
            .map_err(|e| anyhow::anyhow!("failed to read token secret {name}: {e}"))?;
        let renew_at = stored
            .as_ref()
            .and_then(|s| s.annotations().get(ANNOTATION_TOKEN_RENEW_AT))
            .and_then(|v| v.parse::<u64>().ok());
        Ok(renew_at
            .and_then(|at| at.checked_sub(unix_now()))
            .filter(|left| *left > 0)
            .map(Duration::from_secs))
    }

    /// Notes when the token of pod `uid` is due and queues the pod for then.
    fn remember(&self, uid: String, key: (String, String), left: Duration) {
        self.tokens
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(uid, Instant::now() + left);
        self.queue.push_after(key, left);
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
        let bound: Result<serde_json::Value, _> = api
            .create_subresource(
                "binding",
                &virt.name_any(),
                &PostParams::default(),
                &binding,
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
        let host = ctx
            .target
            .host_name(&virt.name_any(), &virt.namespace().unwrap_or_default());
        let env = PodEnv {
            api_service: self.api_service(ctx).await,
            dns_ip: self.dns_ip(ctx),
            sync_service_accounts: ctx.config.sync.to_host.serviceaccounts.enabled,
            token_secret: (!requested_tokens(&spec).is_empty()).then(|| token_secret_name(&host)),
        };
        Ok(Decision::Sync(host_pod(virt, &ctx.target, &env)))
    }

    /// A pod's spec is immutable once created: only its labels and annotations follow.
    fn needs_update(&self, actual: &Pod, desired: &Pod) -> bool {
        !metadata_covers(actual, desired)
    }

    fn update_body(&self, actual: &Pod, desired: Pod) -> Pod {
        Pod {
            metadata: desired.metadata,
            spec: actual.spec.clone(),
            status: None,
        }
    }

    async fn back(&self, ctx: &Ctx, virt: &Pod, host: &Pod) -> anyhow::Result<()> {
        self.ensure_token(ctx, virt, host).await?;
        // Bind first, so a virtual pod seen Running is always on its node.
        let host_node = host.spec.as_ref().and_then(|s| s.node_name.as_deref());
        let virt_node = virt.spec.as_ref().and_then(|s| s.node_name.as_deref());
        if let (Some(node), None) = (host_node, virt_node) {
            self.bind(ctx, virt, node).await?;
        }
        let api: Api<Pod> =
            Api::namespaced(ctx.virt.clone(), &virt.namespace().unwrap_or_default());
        sync_status(
            &api,
            virt,
            virt.status.as_ref(),
            virtual_status(host, virt).as_ref(),
        )
        .await?;
        Ok(())
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
