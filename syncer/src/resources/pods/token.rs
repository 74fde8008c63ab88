//! Virtual service-account tokens of synced pods: minted by TokenRequest in the virtual
//! cluster (bound to the virtual pod), renewed at 80% of their lifetime as the kubelet
//! does, and delivered either in an annotation of the host pod (written with the pod, so no
//! extra host write) or in a host Secret owned by the host pod (`useSecretsForSATokens`).

use std::{collections::HashMap, sync::Mutex, time::Duration};

use k8s_openapi::api::{
    authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec},
    core::v1::{Pod, Secret, ServiceAccount},
};
use k8s_openapi::{ByteString, apimachinery::pkg::apis::meta::v1::ObjectMeta};
use kube::{Api, ResourceExt, api::PostParams};
use vnest_crds::{
    meta::{ANNOTATION_OBJECT_UID, ANNOTATION_TOKEN_RENEW_AT},
    translate::safe_concat_name,
};

use crate::{
    engine::{self, Ctx, Queue},
    translate::pod::{ANNOTATION_TOKEN, TOKEN_KEY, TokenDelivery, requested_tokens},
};

/// Token lifetime when the projection does not ask for one.
const DEFAULT_TOKEN_SECONDS: i64 = 3600;

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Host Secret carrying the virtual token of the pod whose host name is `host_pod`.
pub fn secret_name(host_pod: &str) -> String {
    safe_concat_name(&[host_pod, "sa-token"])
}

/// A token for a pod and when (Unix seconds) it is renewed.
struct Minted {
    token: String,
    renew_at: u64,
}

/// The token host pod `host` carries for the virtual pod `uid`, while it is not due.
fn carried_token(host: Option<&Pod>, uid: &str) -> Option<Minted> {
    let annotations = host?.annotations();
    if annotations.get(ANNOTATION_OBJECT_UID).map(String::as_str) != Some(uid) {
        return None;
    }
    let renew_at: u64 = annotations.get(ANNOTATION_TOKEN_RENEW_AT)?.parse().ok()?;
    let token = annotations.get(ANNOTATION_TOKEN)?.clone();
    (renew_at > unix_now()).then_some(Minted { token, renew_at })
}

pub struct Tokens {
    /// The pod queue: a pod is reconciled again when its token is due.
    queue: Queue,
    /// Virtual pod uid → when its current token is renewed. The tokens themselves are held
    /// only by the host pods (or Secrets) that carry them. Due entries are dropped on every
    /// insert, so deleted pods do not pile up.
    renewals: Mutex<HashMap<String, u64>>,
}

impl Tokens {
    pub fn new(queue: Queue) -> Self {
        Tokens {
            queue,
            renewals: Mutex::default(),
        }
    }

    /// When the pod's current token is renewed, while it is not due.
    fn current(&self, uid: &str) -> Option<u64> {
        let renewals = self.renewals.lock().unwrap_or_else(|e| e.into_inner());
        renewals.get(uid).copied().filter(|at| *at > unix_now())
    }

    /// Notes when the pod's token is due and queues the pod for then.
    fn remember(&self, virt: &Pod, renew_at: u64) {
        let left = renew_at.saturating_sub(unix_now());
        let mut all = self.renewals.lock().unwrap_or_else(|e| e.into_inner());
        let now = unix_now();
        all.retain(|_, at| *at > now);
        all.insert(virt.uid().unwrap_or_default(), renew_at);
        drop(all);
        let key = (virt.namespace().unwrap_or_default(), virt.name_any());
        self.queue.push_after(key, Duration::from_secs(left));
    }

    /// Mints a token for `virt` per its first projected token; `None` if it asks for none.
    async fn mint(&self, ctx: &Ctx, virt: &Pod) -> anyhow::Result<Option<Minted>> {
        let spec = virt.spec.as_ref();
        let Some((audience, expiry)) = spec.and_then(|s| requested_tokens(s).into_iter().next())
        else {
            return Ok(None);
        };
        let ns = virt.namespace().unwrap_or_default();
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
                    uid: virt.uid(),
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let sa_api: Api<ServiceAccount> = Api::namespaced(ctx.virt.clone(), &ns);
        let params = PostParams::default();
        let minted: TokenRequest = ctx
            .metrics
            .timed(
                "token_request",
                sa_api.create_subresource("token", &sa, &params, &request),
            )
            .await
            .map_err(|e| {
                anyhow::anyhow!("failed to mint a token for virtual service account {ns}/{sa}: {e}")
            })?;
        let token = minted
            .status
            .and_then(|s| s.token)
            .ok_or_else(|| anyhow::anyhow!("token request for {ns}/{sa} returned no token"))?;
        // Renew at 80% of the lifetime, as the kubelet does.
        let renew_at = unix_now() + (seconds.max(60) as u64) * 4 / 5;
        Ok(Some(Minted { token, renew_at }))
    }

    /// The token annotation for the host copy of `virt`: the one a live host copy of this
    /// same virtual pod carries, else a new one. No token is held here: a new one lives in
    /// the host pod written with it (if that write fails, or the host cache has not seen it
    /// yet, the next reconcile mints another; both are valid).
    pub async fn for_annotation(
        &self,
        ctx: &Ctx,
        virt: &Pod,
        host: Option<&Pod>,
    ) -> anyhow::Result<Option<TokenDelivery>> {
        let uid = virt.uid().unwrap_or_default();
        let minted = match carried_token(host, &uid) {
            Some(carried) => carried,
            None => match self.mint(ctx, virt).await? {
                Some(minted) => minted,
                None => return Ok(None),
            },
        };
        if self.current(&uid) != Some(minted.renew_at) {
            self.remember(virt, minted.renew_at);
        }
        Ok(Some(TokenDelivery::Annotation {
            token: minted.token,
            renew_at: minted.renew_at,
        }))
    }

    /// Makes sure the host Secret of `host` (the copy of `virt`) holds a current token.
    pub async fn ensure_secret(&self, ctx: &Ctx, virt: &Pod, host: &Pod) -> anyhow::Result<()> {
        let uid = virt.uid().unwrap_or_default();
        if self.current(&uid).is_some() {
            return Ok(());
        }
        // First look since this syncer started: a stored token may still be good.
        if let Some(renew_at) = self.stored_renew_at(ctx, host).await?
            && renew_at > unix_now()
        {
            self.remember(virt, renew_at);
            return Ok(());
        }
        let Some(minted) = self.mint(ctx, virt).await? else {
            return Ok(());
        };
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some(secret_name(&host.name_any())),
                annotations: Some(
                    [(
                        ANNOTATION_TOKEN_RENEW_AT.to_string(),
                        minted.renew_at.to_string(),
                    )]
                    .into(),
                ),
                namespace: Some(ctx.target.host_namespace.clone()),
                owner_references: Some(vec![super::owned_by(host)]),
                ..Default::default()
            },
            data: Some([(TOKEN_KEY.to_string(), ByteString(minted.token.into_bytes()))].into()),
            ..Default::default()
        };
        let secrets: Api<Secret> = Api::namespaced(ctx.host.clone(), &ctx.target.host_namespace);
        ctx.metrics.count_host_write("Secret");
        ctx.metrics
            .timed(
                "token_secret",
                engine::apply(&secrets, &secret.name_any(), &secret),
            )
            .await
            .map_err(super::failed_for(virt, "store the token"))?;
        self.remember(virt, minted.renew_at);
        Ok(())
    }

    /// When the token already stored for `host` is due, if one is stored.
    async fn stored_renew_at(&self, ctx: &Ctx, host: &Pod) -> anyhow::Result<Option<u64>> {
        let secrets: Api<Secret> = Api::namespaced(ctx.host.clone(), &ctx.target.host_namespace);
        let name = secret_name(&host.name_any());
        let stored = secrets
            .get_opt(&name)
            .await
            .map_err(|e| anyhow::anyhow!("failed to read token secret {name}: {e}"))?;
        Ok(stored
            .as_ref()
            .and_then(|s| s.annotations().get(ANNOTATION_TOKEN_RENEW_AT))
            .and_then(|v| v.parse::<u64>().ok()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host_pod(uid: &str, renew_at: u64) -> Pod {
        let mut pod = Pod::default();
        pod.metadata.annotations = Some(
            [
                (ANNOTATION_OBJECT_UID.to_string(), uid.to_string()),
                (ANNOTATION_TOKEN_RENEW_AT.to_string(), renew_at.to_string()),
                (ANNOTATION_TOKEN.to_string(), "jwt".to_string()),
            ]
            .into(),
        );
        pod
    }

    /// A host copy's token is used while it is not due, and only for the virtual pod it was
    /// made for (a host pod of an earlier pod of the same name carries another pod's token).
    #[test]
    fn a_host_copy_carries_its_own_pods_token_until_due() {
        let later = unix_now() + 600;
        let carried = carried_token(Some(&host_pod("u-1", later)), "u-1").unwrap();
        assert_eq!((carried.token.as_str(), carried.renew_at), ("jwt", later));
        assert!(carried_token(Some(&host_pod("u-2", later)), "u-1").is_none());
        assert!(carried_token(Some(&host_pod("u-1", unix_now() - 1)), "u-1").is_none());
        assert!(carried_token(None, "u-1").is_none());
    }
}
