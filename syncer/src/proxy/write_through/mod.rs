//! Synchronous write-through of to-host resources an extension API server serves: the
//! tenant's create, update or patch is sent to the virtual API server, then its result to
//! the host before the tenant gets an answer. A host rejection reaches the tenant as the
//! host's error with names translated back — never as a success — and the tenant write is
//! rolled back ([`rollback`]). Deletes are left to the asynchronous sync.

pub mod faults;
pub mod rollback;
pub mod target;

use std::sync::Arc;

use bytes::Bytes;
use http::{Response, StatusCode, header};
use http_body_util::BodyExt;
use kube::{ResourceExt, api::DynamicObject};

use super::{
    Caller, Proxy,
    forward::{Outgoing, ProxyBody, full, status},
    host_pod::rename_in_error,
};
use crate::{
    custom::{Resolved, object, sync::api},
    engine::FIELD_MANAGER,
};
use rollback::{Before, Rollback};
use target::{Verb, Write};

/// Why a tenant write was not taken by the host; its [`Rejection::category`] is the `reason`
/// of the log line and of the tenant's error.
#[derive(Debug, thiserror::Error)]
enum Rejection {
    /// The host API answered with an error of the client's making (validation, admission).
    #[error("{}", .0.message)]
    HostRejected(Box<kube::core::Status>),
    /// The host could not be reached or failed itself.
    #[error("{0}")]
    ResponseError(String),
    /// The tenant's object could not be turned into a host object.
    #[error("{0}")]
    TranslateError(String),
    /// The virtual API server's answer was not the written object.
    #[error("{0}")]
    UnparseableResponse(String),
}

impl Rejection {
    fn category(&self) -> &'static str {
        match self {
            Rejection::HostRejected(_) => "host_rejected",
            Rejection::ResponseError(_) => "response_error",
            Rejection::TranslateError(_) => "translate_error",
            Rejection::UnparseableResponse(_) => "unparseable_response",
        }
    }
}

/// Serves `write`: the answer the tenant gets.
pub async fn serve(
    proxy: &Proxy,
    write: Write,
    caller: Caller,
    outgoing: Outgoing,
) -> Response<ProxyBody> {
    let res = &write.resource;
    let ctx = &proxy.ctx;
    let virt_api = api(res, &ctx.virt, write.namespace.as_deref());
    let before = match (&write.verb, &write.name) {
        (Verb::Create, _) | (_, None) => Before::Absent,
        (_, Some(name)) => match virt_api.get_opt(name).await {
            Ok(Some(o)) => Before::Present(Box::new(o)),
            Ok(None) => Before::Absent,
            Err(e) => {
                tracing::warn!(resource = %res.name(), %name, error = %e, "write-through: reading the object before the write failed");
                Before::Unknown
            }
        },
    };
    let mut writing = WritingThrough::register(proxy, &write, &outgoing);
    let response = proxy.send_virtual(caller, outgoing).await;
    if !response.status().is_success() {
        return response;
    }
    let (parts, body) = response.into_parts();
    let bytes = match body.collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) => {
            return status(
                StatusCode::BAD_GATEWAY,
                "ServiceUnavailable",
                &format!("vnest proxy: reading the virtual API server's answer failed: {e}"),
            );
        }
    };
    let written = serde_json::from_slice::<DynamicObject>(&bytes);
    let outcome = match &written {
        Ok(obj) => write_to_host(proxy, &write, obj).await,
        Err(e) => Err(Rejection::UnparseableResponse(format!(
            "the virtual API server's answer is not a {}: {e}",
            res.resource.kind
        ))),
    };
    let Err(rejection) = outcome else {
        let mut response = Response::from_parts(parts, full(bytes));
        response.headers_mut().remove(header::CONTENT_LENGTH);
        return response;
    };
    let written = written.ok();
    let name = written
        .as_ref()
        .map(ResourceExt::name_any)
        .unwrap_or_default();
    let namespace = written
        .as_ref()
        .and_then(ResourceExt::namespace)
        .unwrap_or_default();
    tracing::warn!(
        resource = %res.name(), %namespace, %name,
        reason = rejection.category(), error = %rejection,
        "write-through: rejecting write, rolling back"
    );
    let rollback = Rollback::new(ctx, res, &proxy.faults);
    rollback.run(before, written.as_ref()).await;
    // A tenant write fully undone brings its own delete event; one left behind is the
    // to-host sync's to retry.
    writing.hand_back = rollback.failed_any();
    answer(proxy, &write, rejection, &name, &namespace).await
}

/// Writes the host mirror of `written`: created, or replaced over the host's current object
/// (keeping its status), with strict field validation so the extension API server judges
/// every field the tenant set. Retried on a conflict with a concurrent host write.
/// Marks the object a write names as being written through ([`crate::engine::Ctx`]'s
/// `writing_through`) until dropped, then hands it back to the to-host sync, which retries
/// whatever the write left. A create names it in its body; one that only gives
/// `generateName` is not marked (the to-host sync may then write it too, harmlessly).
struct WritingThrough<'a> {
    proxy: &'a Proxy,
    resource: Arc<Resolved>,
    key: Option<(String, String, String)>,
    /// Whether to queue the object for the to-host sync when done.
    hand_back: bool,
}

impl<'a> WritingThrough<'a> {
    fn register(proxy: &'a Proxy, write: &Write, outgoing: &Outgoing) -> Self {
        let name = write.name.clone().or_else(|| {
            let body: serde_json::Value = serde_json::from_slice(outgoing.body()).ok()?;
            body["metadata"]["name"].as_str().map(str::to_string)
        });
        let key = name.map(|name| {
            (
                write.resource.name(),
                write.namespace.clone().unwrap_or_default(),
                name,
            )
        });
        if let Some(key) = &key {
            proxy
                .ctx
                .writing_through
                .lock()
                .expect("not poisoned")
                .insert(key.clone());
        }
        WritingThrough {
            proxy,
            resource: write.resource.clone(),
            key,
            hand_back: true,
        }
    }
}

impl Drop for WritingThrough<'_> {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            self.proxy
                .ctx
                .writing_through
                .lock()
                .expect("not poisoned")
                .remove(&key);
            if self.hand_back {
                let (_, namespace, name) = key;
                self.resource.queue.push((namespace, name));
            }
        }
    }
}

async fn write_to_host(
    proxy: &Proxy,
    write: &Write,
    written: &DynamicObject,
) -> Result<(), Rejection> {
    let (ctx, res) = (&proxy.ctx, &write.resource);
    let mut desired = object::to_host(&ctx.target, &res.resource, res.namespaced, written)
        .map_err(|e| Rejection::TranslateError(e.to_string()))?;
    let host_name = desired["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let host_api = api(res, &ctx.host, Some(&ctx.target.host_namespace));
    let lost_answer = ["host-write", "host-delete"]
        .iter()
        .any(|step| proxy.faults.hits(step, &written.name_any()));
    let query = format!("fieldManager={FIELD_MANAGER}&fieldValidation=Strict");
    let mut result = Ok(());
    for _ in 0..rollback::ATTEMPTS {
        let current = host_api.get_opt(&host_name).await.map_err(|e| {
            Rejection::ResponseError(format!("reading the host object failed: {e}"))
        })?;
        let request = match &current {
            None => http::Request::post(format!("{}?{query}", host_api.resource_url())),
            Some(host) => {
                desired["metadata"]["resourceVersion"] =
                    host.metadata.resource_version.clone().into();
                if let Some(status) = object::status(host) {
                    desired["status"] = status.clone();
                }
                http::Request::put(format!("{}/{host_name}?{query}", host_api.resource_url()))
            }
        };
        let request = request
            .header(header::CONTENT_TYPE, "application/json")
            .body(serde_json::to_vec(&desired).unwrap_or_default())
            .map_err(|e| Rejection::TranslateError(e.to_string()))?;
        ctx.metrics.count_host_write(&res.name());
        result = ctx.host.request::<DynamicObject>(request).await.map(|_| ());
        match &result {
            Err(kube::Error::Api(s)) if s.code == 409 => continue,
            _ => break,
        }
    }
    match result {
        Ok(()) if lost_answer => Err(Rejection::ResponseError(
            "injected fault: the host's answer was lost".into(),
        )),
        Ok(()) => {
            tracing::info!(resource = %res.name(), host = %host_name, "write-through: written to the host");
            Ok(())
        }
        Err(kube::Error::Api(s)) if (400..500).contains(&s.code) && s.code != 429 => {
            Err(Rejection::HostRejected(s))
        }
        Err(e) => Err(Rejection::ResponseError(format!(
            "writing to the host failed: {e}"
        ))),
    }
}

/// The tenant's answer to a rejected write: the host's own error (its names translated
/// back), or an internal error naming what failed.
async fn answer(
    proxy: &Proxy,
    write: &Write,
    rejection: Rejection,
    name: &str,
    namespace: &str,
) -> Response<ProxyBody> {
    match rejection {
        Rejection::HostRejected(s) => {
            let code = StatusCode::from_u16(s.code).unwrap_or(StatusCode::BAD_REQUEST);
            let body = serde_json::to_vec(&s).unwrap_or_default();
            let mut response = Response::new(full(Bytes::from(body)));
            *response.status_mut() = code;
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                http::HeaderValue::from_static("application/json"),
            );
            let res = &write.resource;
            let host_name = object::host_name(&proxy.ctx.target, res.namespaced, name, namespace);
            rename_in_error(response, &[(&host_name, name)]).await
        }
        other => status(
            StatusCode::INTERNAL_SERVER_ERROR,
            "InternalError",
            &format!(
                "vnest write-through: {} could not be written to the host ({}): {}; the write was rolled back",
                write.resource.name(),
                other.category(),
                other
            ),
        ),
    }
}
