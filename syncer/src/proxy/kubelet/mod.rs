//! The virtual API server's road to its "kubelets" (distro `k8s`).
//!
//! kube-apiserver runs with an egress selector that sends its `cluster` traffic over HTTP
//! CONNECT to this Unix socket, on an emptyDir only the control-plane and syncer containers
//! mount (no tenant pod can reach it). A CONNECT to the kubelet endpoint of a virtual node is
//! answered here: TLS with the proxy's serving certificate (kube-apiserver runs without
//! `--kubelet-certificate-authority`, so it does not verify it), where the API server must show
//! its `--kubelet-client-certificate`, signed by the vnest CA. So exec, attach, port-forward
//! and logs reach this point only after the virtual API server authenticated, authorized and
//! admitted them; each is then served by the virtual pod's host pod through the host API server
//! ([`host_pod`]). Every other CONNECT (an admission webhook's or aggregated API's Service,
//! `pods/proxy`) is dialed as kube-apiserver would have dialed it itself.

mod path;

use std::{convert::Infallible, path::PathBuf, sync::Arc};

use anyhow::Context as _;
use http::{Method, Request, Response, StatusCode, uri::Authority};
use hyper::{body::Incoming, server::conn::http1, service::service_fn, upgrade::OnUpgrade};
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::Node;
use kube::{Api, api::ListParams};
use rustls::ServerConfig;
use tokio::net::{TcpStream, UnixListener};
use tokio_rustls::TlsAcceptor;

use super::{
    Proxy,
    forward::{Outgoing, ProxyBody, status, text},
    host_pod,
    tls::TlsFiles,
};

/// kube-apiserver's `--kubelet-port` default, which it dials for nodes that report no port.
const DEFAULT_KUBELET_PORT: i32 = 10250;

/// Serves CONNECT on the Unix socket `socket`; fails only if it cannot listen there.
pub async fn serve(socket: PathBuf, tls: TlsFiles, proxy: Arc<Proxy>) -> anyhow::Result<()> {
    // The previous run of the container leaves its socket on the emptyDir.
    match std::fs::remove_file(&socket) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(e).with_context(|| format!("failed to remove {}", socket.display()));
        }
        _ => {}
    }
    let listener = UnixListener::bind(&socket)
        .with_context(|| format!("failed to listen on {}", socket.display()))?;
    tracing::info!(socket = %socket.display(), "kubelet proxy listening");
    let tls = Arc::new(tls);
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                tracing::warn!(error = %e, "kubelet proxy: accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        let (proxy, tls) = (proxy.clone(), tls.clone());
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let (proxy, tls) = (proxy.clone(), tls.clone());
                async move { Ok::<_, Infallible>(connect(proxy, &tls, request).await) }
            });
            if let Err(e) = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .with_upgrades()
                .await
            {
                tracing::debug!(error = %e, "kubelet proxy: connection ended");
            }
        });
    }
}

/// Answers one CONNECT: a kubelet endpoint is served here, anything else is dialed.
async fn connect(
    proxy: Arc<Proxy>,
    tls: &TlsFiles,
    mut request: Request<Incoming>,
) -> Response<ProxyBody> {
    if request.method() != Method::CONNECT {
        return status(
            StatusCode::METHOD_NOT_ALLOWED,
            "MethodNotAllowed",
            "vnest kubelet proxy: only CONNECT is served here",
        );
    }
    let Some(target) = request.uri().authority().cloned() else {
        return status(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            "vnest kubelet proxy: CONNECT needs a host:port target",
        );
    };
    let nodes = match Api::<Node>::all(proxy.ctx.virt.clone())
        .list(&ListParams::default())
        .await
    {
        Ok(nodes) => nodes.items,
        Err(e) => {
            return status(
                StatusCode::SERVICE_UNAVAILABLE,
                "ServiceUnavailable",
                &format!("vnest kubelet proxy: listing the virtual nodes failed: {e}"),
            );
        }
    };
    let upgrade = hyper::upgrade::on(&mut request);
    if is_kubelet(&nodes, &target) {
        tokio::spawn(serve_kubelet(proxy, tls.config(), upgrade));
    } else {
        let upstream = match TcpStream::connect(target.as_str()).await {
            Ok(upstream) => upstream,
            Err(e) => {
                return status(
                    StatusCode::BAD_GATEWAY,
                    "ServiceUnavailable",
                    &format!("vnest kubelet proxy: dialing {target} failed: {e}"),
                );
            }
        };
        tokio::spawn(tunnel(upgrade, upstream));
    }
    text(StatusCode::OK, String::new())
}

/// Whether `target` is the kubelet endpoint kube-apiserver derives from a virtual node: one of
/// its addresses, and its reported kubelet port (the default when it reports none).
fn is_kubelet(nodes: &[Node], target: &Authority) -> bool {
    let host = target.host().trim_start_matches('[').trim_end_matches(']');
    let Some(port) = target.port_u16() else {
        return false;
    };
    nodes.iter().filter_map(|n| n.status.as_ref()).any(|s| {
        let kubelet_port = s
            .daemon_endpoints
            .as_ref()
            .and_then(|d| d.kubelet_endpoint.as_ref())
            .map(|e| e.port)
            .filter(|p| *p > 0)
            .unwrap_or(DEFAULT_KUBELET_PORT);
        kubelet_port == i32::from(port)
            && s.addresses
                .iter()
                .flatten()
                .any(|address| address.address == host)
    })
}

/// Splices a CONNECT tunnel to a target kube-apiserver would have dialed itself.
async fn tunnel(upgrade: OnUpgrade, mut upstream: TcpStream) {
    match upgrade.await {
        Ok(upgraded) => {
            let mut downstream = TokioIo::new(upgraded);
            if let Err(e) = tokio::io::copy_bidirectional(&mut downstream, &mut upstream).await {
                tracing::debug!(error = %e, "kubelet proxy: tunnel ended");
            }
        }
        Err(e) => tracing::warn!(error = %e, "kubelet proxy: CONNECT did not complete"),
    }
}

/// Plays the kubelet on a CONNECT tunnel: TLS, then the API server's pod stream requests.
async fn serve_kubelet(proxy: Arc<Proxy>, config: Arc<ServerConfig>, upgrade: OnUpgrade) {
    let upgraded = match upgrade.await {
        Ok(upgraded) => upgraded,
        Err(e) => {
            tracing::warn!(error = %e, "kubelet proxy: CONNECT did not complete");
            return;
        }
    };
    let stream = match TlsAcceptor::from(config)
        .accept(TokioIo::new(upgraded))
        .await
    {
        Ok(stream) => stream,
        Err(e) => {
            tracing::warn!(error = %e, "kubelet proxy: TLS handshake failed (the API server must present its kubelet client certificate)");
            return;
        }
    };
    let service = service_fn(move |request| {
        let proxy = proxy.clone();
        async move { Ok::<_, Infallible>(pod_stream(&proxy, request).await) }
    });
    if let Err(e) = http1::Builder::new()
        .serve_connection(TokioIo::new(stream), service)
        .with_upgrades()
        .await
    {
        tracing::debug!(error = %e, "kubelet proxy: kubelet connection ended");
    }
}

/// Serves one kubelet request of the virtual API server from the virtual pod's host pod.
async fn pod_stream(proxy: &Proxy, request: Request<Incoming>) -> Response<ProxyBody> {
    let response = match path::parse(request.uri().path(), request.uri().query()) {
        Err(e) => status(StatusCode::NOT_FOUND, "NotFound", &e.to_string()),
        Ok(wanted) => match host_pod::host_pod_of(&proxy.ctx, &wanted.namespace, &wanted.pod).await
        {
            Err(refused) => refused,
            Ok(host_name) => match Outgoing::read(request).await {
                Err(refused) => refused,
                Ok(mut outgoing) => {
                    outgoing.set_query(&wanted.query);
                    host_pod::forward(proxy, outgoing, &wanted.pod, &host_name, wanted.subresource)
                        .await
                }
            },
        },
    };
    proxy
        .ctx
        .metrics
        .proxy_requests
        .with_label_values(&["kubelet", response.status().as_str()])
        .inc();
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(addresses: &[&str], port: Option<i32>) -> Node {
        serde_json::from_value(serde_json::json!({
            "metadata": { "name": "n" },
            "status": {
                "addresses": addresses.iter().map(|a| serde_json::json!({ "type": "InternalIP", "address": a })).collect::<Vec<_>>(),
                "daemonEndpoints": port.map(|p| serde_json::json!({ "kubeletEndpoint": { "Port": p } })),
            },
        }))
        .unwrap()
    }

    fn target(text: &str) -> Authority {
        text.parse().unwrap()
    }

    /// A node's address at its reported kubelet port is a kubelet; at another port (a
    /// hostNetwork pod's, a NodePort) it is not.
    #[test]
    fn a_nodes_address_at_its_kubelet_port_is_a_kubelet() {
        let nodes = [node(&["10.89.0.1", "vnest-node-0"], Some(16350))];
        assert!(is_kubelet(&nodes, &target("10.89.0.1:16350")));
        assert!(is_kubelet(&nodes, &target("vnest-node-0:16350")));
        assert!(!is_kubelet(&nodes, &target("10.89.0.1:10250")));
        assert!(!is_kubelet(&nodes, &target("10.89.0.1:30080")));
    }

    /// A node without a reported port is dialed at kube-apiserver's default, 10250.
    #[test]
    fn a_node_without_a_port_has_the_default_kubelet_port() {
        let nodes = [node(&["10.89.0.1"], None), node(&["fd00::1"], Some(0))];
        assert!(is_kubelet(&nodes, &target("10.89.0.1:10250")));
        assert!(is_kubelet(&nodes, &target("[fd00::1]:10250")));
    }

    /// Pods' and Services' addresses (webhooks, aggregated APIs, `pods/proxy`) are not
    /// kubelets, nor is a target without a port.
    #[test]
    fn other_targets_are_not_kubelets() {
        let nodes = [node(&["10.89.0.1"], Some(16350))];
        assert!(!is_kubelet(&nodes, &target("10.89.0.7:16350")));
        assert!(!is_kubelet(&nodes, &target("10.96.12.4:443")));
        assert!(!is_kubelet(&nodes, &target("10.89.0.1")));
        assert!(!is_kubelet(&[], &target("10.89.0.1:10250")));
    }
}
