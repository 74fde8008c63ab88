//! `pods/log`, `exec`, `attach` and `portforward` of a virtual pod, served by its host pod.
//!
//! Where the virtual API server reaches its "kubelets" through the syncer ([`super::kubelet`],
//! distro `k8s`), it has authenticated, authorized and admitted the request already and only
//! [`host_pod_of`] and [`forward`] run here. Elsewhere (k3s, k0s) the tenant's request comes
//! straight here and the virtual API server never sees it, so the proxy asks it: the caller
//! is identified (certificate, or the virtual API server's TokenReview of a bearer token) and
//! a SubjectAccessReview decides, with the verb and subresource the API server itself would
//! check; its admission (webhooks, policies on `pods/exec`) is not run on that path. Only a
//! host pod that carries the virtual pod's uid in its `object-uid` annotation is ever
//! reached, so a tenant reaches nothing but its own pods.

use std::collections::BTreeMap;

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::{BodyExt, Full};
use k8s_openapi::api::{
    authentication::v1::{TokenReview, TokenReviewSpec},
    authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec},
    core::v1::Pod,
};
use kube::{Api, Client, api::PostParams};
use vnest_crds::meta::ANNOTATION_OBJECT_UID;

use crate::engine::Ctx;

use super::{
    Caller, Proxy,
    forward::{Outgoing, ProxyBody, status},
    identity,
    route::PodSubresource,
};

/// Who asks, as a SubjectAccessReview names them.
#[derive(Debug, Default, PartialEq)]
struct Requester {
    user: String,
    groups: Vec<String>,
    uid: Option<String>,
    extra: Option<BTreeMap<String, Vec<String>>>,
}

async fn requester(virt: &Client, caller: Caller) -> Result<Requester, Response<ProxyBody>> {
    match caller {
        Caller::Certificate(id) => Ok(Requester {
            user: id.user,
            groups: id.groups,
            ..Requester::default()
        }),
        Caller::Anonymous => Ok(Requester {
            user: "system:anonymous".into(),
            groups: vec!["system:unauthenticated".into()],
            ..Requester::default()
        }),
        Caller::Bearer(token) => {
            let review = TokenReview {
                spec: TokenReviewSpec {
                    token,
                    ..TokenReviewSpec::default()
                },
                ..TokenReview::default()
            };
            let reviewed = ask(virt, &review, "reviewing the bearer token").await?;
            let status = reviewed.status.unwrap_or_default();
            match (status.authenticated, status.user) {
                (Some(true), Some(user)) => Ok(Requester {
                    user: user.username.unwrap_or_default(),
                    groups: user.groups.unwrap_or_default(),
                    uid: user.uid,
                    extra: user.extra,
                }),
                _ => Err(status_unauthorized(status.error)),
            }
        }
    }
}

fn status_unauthorized(error: Option<String>) -> Response<ProxyBody> {
    let detail = error.map(|e| format!(": {e}")).unwrap_or_default();
    status(
        StatusCode::UNAUTHORIZED,
        "Unauthorized",
        &format!("Unauthorized{detail}"),
    )
}

/// Creates `review` (a TokenReview or SubjectAccessReview) on the virtual API server and
/// returns it with its status; a failure is the proxy's 503 naming `what` it was doing.
async fn ask<K>(virt: &Client, review: &K, what: &str) -> Result<K, Response<ProxyBody>>
where
    K: kube::Resource<Scope = kube::core::ClusterResourceScope, DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::Serialize
        + serde::de::DeserializeOwned,
{
    Api::<K>::all(virt.clone())
        .create(&PostParams::default(), review)
        .await
        .map_err(|e| unavailable(what, &e))
}

fn unavailable(what: &str, e: &kube::Error) -> Response<ProxyBody> {
    status(
        StatusCode::SERVICE_UNAVAILABLE,
        "ServiceUnavailable",
        &format!("vnest proxy: {what} failed: {e}"),
    )
}

/// The API server's own wording for a denied subresource request.
fn forbidden_message(who: &str, sub: PodSubresource, namespace: &str, name: &str) -> String {
    format!(
        "pods \"{name}\" is forbidden: User \"{who}\" cannot {verb} resource \"pods/{sub}\" in API group \"\" in the namespace \"{namespace}\"",
        verb = sub.verb(),
        sub = sub.name(),
    )
}

async fn authorize(
    virt: &Client,
    who: Requester,
    sub: PodSubresource,
    namespace: &str,
    name: &str,
) -> Result<(), Response<ProxyBody>> {
    let user = who.user.clone();
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(who.user),
            groups: Some(who.groups),
            uid: who.uid,
            extra: who.extra,
            resource_attributes: Some(ResourceAttributes {
                namespace: Some(namespace.into()),
                verb: Some(sub.verb().into()),
                resource: Some("pods".into()),
                subresource: Some(sub.name().into()),
                name: Some(name.into()),
                ..ResourceAttributes::default()
            }),
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    };
    let reviewed = ask(virt, &review, "authorizing the request").await?;
    if reviewed.status.is_some_and(|s| s.allowed) {
        Ok(())
    } else {
        Err(status(
            StatusCode::FORBIDDEN,
            "Forbidden",
            &forbidden_message(&user, sub, namespace, name),
        ))
    }
}

fn not_found(namespace: &str, name: &str, why: &str) -> Response<ProxyBody> {
    status(
        StatusCode::NOT_FOUND,
        "NotFound",
        &format!("pods \"{name}\" not found in namespace \"{namespace}\"{why}"),
    )
}

/// The host pod's name, once it is known to be the copy of this virtual pod.
pub(super) async fn host_pod_of(
    ctx: &Ctx,
    namespace: &str,
    name: &str,
) -> Result<String, Response<ProxyBody>> {
    let virtual_pod = Api::<Pod>::namespaced(ctx.virt.clone(), namespace)
        .get_opt(name)
        .await
        .map_err(|e| unavailable("reading the virtual pod", &e))?
        .ok_or_else(|| not_found(namespace, name, ""))?;
    let host_name = ctx.target.host_name(name, namespace);
    let host_pod = Api::<Pod>::namespaced(ctx.host.clone(), &ctx.target.host_namespace)
        .get_opt(&host_name)
        .await
        .map_err(|e| unavailable("reading the host pod", &e))?;
    let virtual_uid = virtual_pod.metadata.uid;
    let host_uid = host_pod.and_then(|h| h.metadata.annotations?.remove(ANNOTATION_OBJECT_UID));
    if host_uid.is_some() && host_uid == virtual_uid {
        Ok(host_name)
    } else {
        Err(not_found(namespace, name, " on the host yet (not synced)"))
    }
}

/// The host pod to serve `caller`'s request from, once the virtual API server allowed it.
async fn allowed_host_pod(
    proxy: &Proxy,
    caller: Caller,
    namespace: &str,
    name: &str,
    sub: PodSubresource,
) -> Result<String, Response<ProxyBody>> {
    let virt = &proxy.ctx.virt;
    let who = requester(virt, caller).await?;
    authorize(virt, who, sub, namespace, name).await?;
    host_pod_of(&proxy.ctx, namespace, name).await
}

/// Serves a pod subresource request for `caller` from the host pod.
pub async fn serve(
    proxy: &Proxy,
    caller: Caller,
    outgoing: Outgoing,
    namespace: &str,
    name: &str,
    sub: PodSubresource,
) -> Response<ProxyBody> {
    match allowed_host_pod(proxy, caller, namespace, name, sub).await {
        Ok(host_name) => forward(proxy, outgoing, name, &host_name, sub).await,
        Err(denied) => denied,
    }
}

/// Sends `outgoing` (its query in the API server's form) as the syncer to host pod
/// `host_name`'s subresource `sub`; errors name the virtual pod `name` instead.
pub(super) async fn forward(
    proxy: &Proxy,
    mut outgoing: Outgoing,
    name: &str,
    host_name: &str,
    sub: PodSubresource,
) -> Response<ProxyBody> {
    identity::strip_credentials(&mut outgoing.parts.headers);
    outgoing.set_path(&format!(
        "/api/v1/namespaces/{}/pods/{host_name}/{}",
        proxy.ctx.target.host_namespace,
        sub.name()
    ));
    let response = outgoing.send(&proxy.upstreams.host).await;
    if response.status().is_client_error() || response.status().is_server_error() {
        return rename_in_error(response, &[(host_name, name)]).await;
    }
    response
}

/// An error from the host names host objects; the tenant knows them by their virtual names
/// (`renames` are (host, virtual) pairs, replaced in order).
pub(super) async fn rename_in_error(
    response: Response<ProxyBody>,
    renames: &[(&str, &str)],
) -> Response<ProxyBody> {
    let (mut parts, body) = response.into_parts();
    // Errors are short `Status` objects from the host API server, which is trusted.
    let bytes = match body.collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) => Bytes::from(format!("vnest proxy: reading the host's error failed: {e}")),
    };
    let renamed = renames.iter().fold(
        String::from_utf8_lossy(&bytes).into_owned(),
        |text, (host, virt)| text.replace(host, virt),
    );
    parts.headers.remove(http::header::CONTENT_LENGTH);
    let body = Full::new(Bytes::from(renamed))
        .map_err(|never| match never {})
        .boxed_unsync();
    Response::from_parts(parts, body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn denials_read_like_the_api_servers() {
        assert_eq!(
            forbidden_message("bob", PodSubresource::Exec, "app", "web-0"),
            "pods \"web-0\" is forbidden: User \"bob\" cannot create resource \"pods/exec\" in API group \"\" in the namespace \"app\""
        );
        assert!(
            forbidden_message("bob", PodSubresource::Log, "app", "web-0")
                .contains("cannot get resource \"pods/log\"")
        );
    }

    #[tokio::test]
    async fn host_names_in_errors_become_virtual_names() {
        let body = Full::new(Bytes::from_static(
            br#"{"message":"container \"x\" in pod \"web-0-x-app-x-vc\" is not valid"}"#,
        ))
        .map_err(|never| match never {})
        .boxed_unsync();
        let mut response = Response::new(body);
        *response.status_mut() = StatusCode::BAD_REQUEST;
        let renamed = rename_in_error(response, &[("web-0-x-app-x-vc", "web-0")]).await;
        assert_eq!(renamed.status(), StatusCode::BAD_REQUEST);
        let text = renamed.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(
            String::from_utf8_lossy(&text),
            r#"{"message":"container \"x\" in pod \"web-0\" is not valid"}"#
        );
    }
}
