//! Sends a tenant's request on to an API server and streams the answer back: response
//! bodies (watches, followed logs) flow frame by frame, and a protocol upgrade (exec, attach,
//! port-forward; SPDY or WebSocket) is spliced byte for byte once both sides switched.

use bytes::Bytes;
use http::{
    HeaderMap, HeaderValue, Request, Response, StatusCode,
    header::{self, HeaderName},
    request::Parts,
};
use http_body_util::{BodyExt, Full, Limited, combinators::UnsyncBoxBody};
use hyper::{body::Incoming, upgrade::OnUpgrade};
use hyper_util::rt::TokioIo;
use kube::Client;
use serde_json::json;

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
pub type ProxyBody = UnsyncBoxBody<Bytes, BoxError>;

/// Largest request body the proxy buffers (the API server's own limit is 3 MiB).
const MAX_REQUEST_BODY: usize = 16 * 1024 * 1024;

/// Headers that describe one connection, not the request (RFC 9110 §7.6.1).
const HOP_BY_HOP: [HeaderName; 6] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
];

fn is_upgrade(headers: &HeaderMap) -> bool {
    headers.contains_key(header::UPGRADE)
}

/// Drops hop-by-hop headers, except the two an upgrade needs on both of its hops.
fn strip_hop_by_hop(headers: &mut HeaderMap, upgrade: bool) {
    for name in &HOP_BY_HOP {
        if !(upgrade && name == header::CONNECTION) {
            headers.remove(name);
        }
    }
    if !upgrade {
        headers.remove(header::UPGRADE);
    }
    headers.remove(header::HOST);
    headers.remove(header::CONTENT_LENGTH);
}

/// A request read from the tenant, ready to be adjusted and sent on.
pub struct Outgoing {
    pub parts: Parts,
    body: Bytes,
    upgrade: Option<OnUpgrade>,
}

impl Outgoing {
    /// Reads the body (bounded) and takes the pending upgrade of the tenant's connection.
    pub async fn read(mut request: Request<Incoming>) -> Result<Self, Response<ProxyBody>> {
        let upgrade = is_upgrade(request.headers()).then(|| hyper::upgrade::on(&mut request));
        let (mut parts, body) = request.into_parts();
        let body = Limited::new(body, MAX_REQUEST_BODY)
            .collect()
            .await
            .map_err(|e| {
                status(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "RequestEntityTooLarge",
                    &format!("reading the request body: {e}"),
                )
            })?
            .to_bytes();
        strip_hop_by_hop(&mut parts.headers, upgrade.is_some());
        Ok(Outgoing {
            parts,
            body,
            upgrade,
        })
    }

    /// The request body, as read.
    pub fn body(&self) -> &Bytes {
        &self.body
    }

    /// Points the request at another path, keeping the query.
    pub fn set_path(&mut self, path: &str) {
        let query = self.parts.uri.query().map(str::to_string);
        self.set_uri(path, query.as_deref());
    }

    /// Replaces the query, keeping the path (`query` is already encoded).
    pub fn set_query(&mut self, query: &str) {
        let path = self.parts.uri.path().to_string();
        self.set_uri(&path, Some(query).filter(|q| !q.is_empty()));
    }

    fn set_uri(&mut self, path: &str, query: Option<&str>) {
        let uri = match query {
            Some(query) => format!("{path}?{query}"),
            None => path.to_string(),
        };
        self.parts.uri = uri
            .parse()
            .expect("a path and query built from valid URI parts stay valid");
    }

    /// Sends the request with `client` (whose base URL and credentials apply) and returns
    /// the answer as a streaming body; a switched protocol is spliced in the background.
    pub async fn send(self, client: &Client) -> Response<ProxyBody> {
        let Outgoing {
            mut parts,
            body,
            upgrade,
        } = self;
        parts.uri = match parts.uri.path_and_query() {
            Some(pq) => pq.as_str().parse().expect("a path and query is a URI"),
            None => http::Uri::from_static("/"),
        };
        let request = Request::from_parts(parts, kube::client::Body::from(body.to_vec()));
        let mut response = match client.send(request).await {
            Ok(response) => response,
            Err(e) => {
                return status(
                    StatusCode::BAD_GATEWAY,
                    "ServiceUnavailable",
                    &format!("vnest proxy: the API server did not answer: {e}"),
                );
            }
        };
        let switched = response.status() == StatusCode::SWITCHING_PROTOCOLS;
        match (switched, upgrade) {
            (true, Some(downstream)) => {
                let upstream = hyper::upgrade::on(&mut response);
                tokio::spawn(splice(downstream, upstream));
            }
            _ => strip_hop_by_hop(response.headers_mut(), false),
        }
        response.map(|body| body.map_err(BoxError::from).boxed_unsync())
    }
}

async fn splice(downstream: OnUpgrade, upstream: OnUpgrade) {
    let (down, up) = match tokio::try_join!(downstream, upstream) {
        Ok(pair) => pair,
        Err(e) => {
            tracing::warn!(error = %e, "proxy: upgrade did not complete");
            return;
        }
    };
    let (mut down, mut up) = (TokioIo::new(down), TokioIo::new(up));
    if let Err(e) = tokio::io::copy_bidirectional(&mut down, &mut up).await {
        tracing::debug!(error = %e, "proxy: upgraded stream ended");
    }
}

/// A `metav1.Status` failure, which kubectl prints as the message.
pub fn status(code: StatusCode, reason: &str, message: &str) -> Response<ProxyBody> {
    let body = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code.as_u16(),
    });
    let mut response = Response::new(full(Bytes::from(body.to_string())));
    *response.status_mut() = code;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// A plain-text answer of the proxy itself.
pub fn text(code: StatusCode, body: String) -> Response<ProxyBody> {
    let mut response = Response::new(full(Bytes::from(body)));
    *response.status_mut() = code;
    response
}

pub fn full(bytes: Bytes) -> ProxyBody {
    Full::new(bytes)
        .map_err(|never| match never {})
        .boxed_unsync()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        pairs
            .iter()
            .map(|(k, v)| (HeaderName::from_static(k), HeaderValue::from_static(v)))
            .collect()
    }

    #[test]
    fn plain_requests_lose_their_connection_headers() {
        let mut h = headers(&[
            ("connection", "keep-alive"),
            ("keep-alive", "timeout=5"),
            ("transfer-encoding", "chunked"),
            ("content-length", "12"),
            ("host", "127.0.0.1:8443"),
            ("accept", "application/json"),
        ]);
        strip_hop_by_hop(&mut h, false);
        assert_eq!(h.len(), 1);
        assert_eq!(h["accept"], "application/json");
    }

    #[test]
    fn upgrades_keep_connection_and_upgrade() {
        let mut h = headers(&[
            ("connection", "Upgrade"),
            ("upgrade", "websocket"),
            ("sec-websocket-protocol", "v5.channel.k8s.io"),
            ("te", "trailers"),
        ]);
        assert!(is_upgrade(&h));
        strip_hop_by_hop(&mut h, true);
        assert_eq!(h["connection"], "Upgrade");
        assert_eq!(h["upgrade"], "websocket");
        assert_eq!(h["sec-websocket-protocol"], "v5.channel.k8s.io");
        assert!(h.get("te").is_none());
    }

    #[tokio::test]
    async fn a_status_names_code_reason_and_message() {
        let response = status(StatusCode::FORBIDDEN, "Forbidden", "no");
        assert_eq!(response.status(), StatusCode::FORBIDDEN);
        let body = response.into_body().collect().await.unwrap().to_bytes();
        let status: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(status["kind"], "Status");
        assert_eq!(status["code"], 403);
        assert_eq!(status["reason"], "Forbidden");
        assert_eq!(status["message"], "no");
    }
}
