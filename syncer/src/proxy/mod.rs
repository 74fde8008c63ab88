//! The API proxy (`:8443`) the tenant's kubeconfig points at.
//!
//! - A client certificate signed by the vnest CA is the caller's identity (CN user, O
//!   groups), forwarded to the virtual API server by impersonation through its admin.
//! - A bearer token (the virtual cluster's service-account tokens, used by pods) and an
//!   anonymous request pass through unchanged, on a connection without credentials, for the
//!   virtual API server to judge.
//! - `pods/{log,exec,attach,portforward}` go to the virtual API server like everything else
//!   when it reaches its kubelets through the syncer ([`kubelet`], distro `k8s`), so its
//!   admission sees them; otherwise (k3s, k0s) the proxy serves them from the host pod after a
//!   SubjectAccessReview ([`host_pod`]).
//! - `/healthz`, `/livez`, `/readyz`, `/metrics` are the syncer's own.
//!
//! - Writes of to-host resources an extension API server serves are written through to the
//!   host before the tenant gets an answer ([`write_through`]).
//!
//! Every other request is tenant activity and renews the activity Lease ([`activity`]).

mod activity;
mod forward;
mod host_pod;
mod identity;
mod kubelet;
mod route;
mod tls;
mod write_through;

use std::{
    convert::Infallible,
    net::SocketAddr,
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use anyhow::Context as _;
use http::{Request, Response, StatusCode, header::AUTHORIZATION};
use hyper::{body::Incoming, server::conn::http1, service::service_fn};
use hyper_util::rt::TokioIo;
use kube::Client;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::{custom::Resolved, engine::Ctx};
use activity::Activity;
use forward::{Outgoing, ProxyBody, status, text};
use identity::{Identity, IdentityError};
use route::Route;

/// Who is calling, as far as the proxy can tell.
pub enum Caller {
    Certificate(Identity),
    Bearer(String),
    Anonymous,
}

/// The proxy's upstream clients; built without kube's retries, since the tenant's own
/// client decides whether to retry.
pub struct Upstreams {
    /// The virtual API server as its admin: impersonates certificate callers.
    pub admin: Client,
    /// The virtual API server without credentials: bearer tokens pass through.
    pub anonymous: Client,
    /// The host API server as the syncer: pod subresources.
    pub host: Client,
}

pub struct Proxy {
    ctx: Arc<Ctx>,
    upstreams: Upstreams,
    activity: Activity,
    write_through: write_through::target::Targets,
    faults: write_through::faults::Faults,
    /// The virtual API server reaches its kubelets through [`kubelet`]: pod streams go to it.
    kubelet_served: bool,
}

/// Serves the proxy on `address` with the certificates in `certs_dir` until the listener
/// fails; writes of the `custom` resources that need it are written through to the host.
/// With `kubelet_socket`, the virtual API server's kubelet traffic is served there too.
pub async fn serve(
    address: SocketAddr,
    certs_dir: &Path,
    ctx: Arc<Ctx>,
    upstreams: Upstreams,
    custom: Vec<Arc<Resolved>>,
    kubelet_socket: Option<PathBuf>,
) -> anyhow::Result<()> {
    let tls = tls::TlsFiles::load(certs_dir, tls::ClientCerts::Optional)?;
    let kubelet_tls = match &kubelet_socket {
        Some(_) => Some(tls::TlsFiles::load(certs_dir, tls::ClientCerts::Required)?),
        None => None,
    };
    let listener = TcpListener::bind(address)
        .await
        .with_context(|| format!("failed to listen on {address}"))?;
    let activity = Activity::start(ctx.host.clone(), &ctx.target.host_namespace, &ctx.target.vc);
    let proxy = Arc::new(Proxy {
        ctx,
        upstreams,
        activity,
        write_through: write_through::target::Targets::new(custom),
        faults: write_through::faults::Faults::from_env(),
        kubelet_served: kubelet_socket.is_some(),
    });
    if let (Some(socket), Some(kubelet_tls)) = (kubelet_socket, kubelet_tls) {
        let proxy = proxy.clone();
        tokio::spawn(async move {
            if let Err(e) = kubelet::serve(socket, kubelet_tls, proxy).await {
                tracing::error!(error = format!("{e:#}"), "kubelet proxy stopped");
            }
        });
    }
    tracing::info!(%address, "API proxy listening");
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                tracing::warn!(error = %e, "proxy: accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let acceptor = TlsAcceptor::from(tls.config());
        let proxy = proxy.clone();
        tokio::spawn(async move {
            let stream = match acceptor.accept(stream).await {
                Ok(stream) => stream,
                Err(e) => {
                    tracing::debug!(%peer, error = %e, "proxy: TLS handshake failed");
                    return;
                }
            };
            let certificate = stream
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|chain| chain.first())
                .map(|der| Identity::from_certificate(der));
            let certificate = Arc::new(certificate);
            let service = service_fn(move |request| {
                let (proxy, certificate) = (proxy.clone(), certificate.clone());
                async move { Ok::<_, Infallible>(proxy.handle(&certificate, request).await) }
            });
            if let Err(e) = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .with_upgrades()
                .await
            {
                tracing::debug!(%peer, error = %e, "proxy: connection ended");
            }
        });
    }
}

/// The caller of a request on a connection that presented `certificate` (if any).
// The error is the refusal sent to the client, built once per refused request.
#[allow(clippy::result_large_err)]
fn caller(
    certificate: &Option<Result<Identity, IdentityError>>,
    request: &Request<Incoming>,
) -> Result<Caller, Response<ProxyBody>> {
    match certificate {
        Some(Ok(identity)) => Ok(Caller::Certificate(identity.clone())),
        Some(Err(why)) => Err(status(
            StatusCode::UNAUTHORIZED,
            "Unauthorized",
            &why.to_string(),
        )),
        None => Ok(request
            .headers()
            .get(AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map_or(Caller::Anonymous, |token| {
                Caller::Bearer(token.trim().to_string())
            })),
    }
}

impl Proxy {
    async fn handle(
        &self,
        certificate: &Option<Result<Identity, IdentityError>>,
        request: Request<Incoming>,
    ) -> Response<ProxyBody> {
        let route = match Route::of(request.uri().path()) {
            Route::Pod { .. } if self.kubelet_served => Route::Virtual,
            route => route,
        };
        if route.is_activity() {
            self.activity.record();
        }
        let label = route.label();
        let response = match route {
            Route::Healthz => text(StatusCode::OK, "ok".into()),
            Route::Readyz => match self.ctx.readiness() {
                Ok(()) => text(StatusCode::OK, "ok".into()),
                Err(why) => text(StatusCode::SERVICE_UNAVAILABLE, why.to_string()),
            },
            Route::Metrics => text(StatusCode::OK, self.ctx.metrics.render()),
            Route::Pod {
                namespace,
                name,
                subresource,
            } => match self.read(certificate, request).await {
                Ok((caller, outgoing)) => {
                    host_pod::serve(self, caller, outgoing, &namespace, &name, subresource).await
                }
                Err(refused) => refused,
            },
            Route::Virtual => match self.read(certificate, request).await {
                Ok((caller, outgoing)) => self.to_virtual(caller, outgoing).await,
                Err(refused) => refused,
            },
        };
        self.ctx
            .metrics
            .proxy_requests
            .with_label_values(&[label, response.status().as_str()])
            .inc();
        response
    }

    async fn read(
        &self,
        certificate: &Option<Result<Identity, IdentityError>>,
        request: Request<Incoming>,
    ) -> Result<(Caller, Outgoing), Response<ProxyBody>> {
        let caller = caller(certificate, &request)?;
        if matches!(caller, Caller::Certificate(_))
            && identity::asks_to_impersonate(request.headers())
        {
            return Err(status(
                StatusCode::FORBIDDEN,
                "Forbidden",
                "vnest proxy: impersonation (--as) is not supported with client certificates; \
                 use a kubeconfig for the user instead",
            ));
        }
        Ok((caller, Outgoing::read(request).await?))
    }

    async fn to_virtual(&self, caller: Caller, outgoing: Outgoing) -> Response<ProxyBody> {
        let parts = &outgoing.parts;
        match self
            .write_through
            .of(&parts.method, parts.uri.path(), parts.uri.query())
        {
            // Namespaces this syncer does not sync are not mirrored, so not written through.
            Some(write)
                if write
                    .namespace
                    .as_deref()
                    .is_none_or(|ns| self.ctx.namespace_synced(ns)) =>
            {
                write_through::serve(self, write, caller, outgoing).await
            }
            _ => self.send_virtual(caller, outgoing).await,
        }
    }

    /// Sends a request to the virtual API server as the caller.
    async fn send_virtual(&self, caller: Caller, mut outgoing: Outgoing) -> Response<ProxyBody> {
        match caller {
            Caller::Certificate(identity) => {
                if let Err(why) = identity.impersonate(&mut outgoing.parts.headers) {
                    return status(StatusCode::BAD_REQUEST, "BadRequest", &why.to_string());
                }
                outgoing.send(&self.upstreams.admin).await
            }
            Caller::Bearer(_) | Caller::Anonymous => outgoing.send(&self.upstreams.anonymous).await,
        }
    }
}
