//! The wake listener: TLS on `--wake-address`, each connection in its own task (at most
//! [`MAX_CONCURRENT`] at once), answered once and closed.

use std::{sync::Arc, time::Duration};

use k8s_openapi::api::{coordination::v1::Lease, core::v1::Secret};
use kube::{
    Api, Client,
    api::{Patch, PatchParams},
};
use rustls::{
    ServerConfig,
    pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject},
    server::Acceptor,
};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};
use tokio_rustls::LazyConfigAcceptor;
use tracing::{debug, info, warn};
use vnest_crds::{VirtualCluster, activity, meta::ChildNames};

use super::{Answer, response, should_renew, target};
use crate::{
    certs::Certs,
    conditions::{self, SLEEPING},
    error::{ApiError, Request},
    lifecycle::facts,
    metrics::Metrics,
};

/// Field manager of the Lease renewals a wake connection makes.
pub const FIELD_MANAGER: &str = "vnest-operator/wake";

/// A connection gets this long to say what it wants and be answered.
const CONNECTION_TIMEOUT: Duration = Duration::from_secs(10);
/// Request heads longer than this are not read further (the answer does not depend on them).
const MAX_REQUEST_HEAD: usize = 16 * 1024;

/// What the listener needs to answer connections.
#[derive(Clone)]
pub struct Wake {
    pub client: Client,
    pub metrics: Metrics,
    pub cluster_domain: String,
    /// Namespaces the operator watches; empty: all.
    pub namespaces: Vec<String>,
}

/// Connections answered at once; further ones wait in the listen backlog, so a flood of
/// tenants retrying costs a bounded number of API reads at a time.
const MAX_CONCURRENT: usize = 64;

/// Accepts connections on `listener` until the process ends.
pub async fn serve(listener: TcpListener, wake: Wake) {
    let wake = Arc::new(wake);
    let permits = Arc::new(tokio::sync::Semaphore::new(MAX_CONCURRENT));
    loop {
        let Ok(permit) = permits.clone().acquire_owned().await else {
            return;
        };
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(err) => {
                warn!(error = %err, "wake listener: accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let wake = wake.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let outcome = tokio::time::timeout(CONNECTION_TIMEOUT, handle(stream, &wake)).await;
            let outcome = match outcome {
                Ok(Ok(answer)) => format!("{answer:?}"),
                Ok(Err(reason)) => {
                    debug!(%peer, %reason, "wake connection refused");
                    "Refused".to_string()
                }
                Err(_) => "Timeout".to_string(),
            };
            wake.metrics
                .wake_connections
                .with_label_values(&[outcome.as_str()])
                .inc();
        });
    }
}

/// Why a connection was refused (logged, and counted as `Refused`).
#[derive(Debug, thiserror::Error)]
enum Refused {
    #[error("failed to read the TLS ClientHello: {0}")]
    ClientHello(#[source] std::io::Error),
    #[error("failed to route the connection: no TLS server name (SNI)")]
    NoServerName,
    #[error("failed to route the connection: server name {0} names no watched virtual cluster")]
    UnknownServerName(String),
    #[error(transparent)]
    Api(#[from] ApiError),
    #[error("failed to wake VirtualCluster {0}: it does not exist")]
    NoVirtualCluster(String),
    #[error("failed to wake VirtualCluster {0}: it has no sleepMode.autoWakeup")]
    NoAutoWakeup(String),
    #[error("failed to serve the certificate of Secret {secret}: {source}")]
    Certificate {
        secret: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("failed to complete the TLS handshake for {server_name}: {source}")]
    Handshake {
        server_name: String,
        #[source]
        source: std::io::Error,
    },
}

/// The rustls config serving the cluster's own certificate from `secret`.
fn server_config(secret: &str, certs: &Certs) -> Result<ServerConfig, Refused> {
    let invalid = |source: Box<dyn std::error::Error + Send + Sync>| Refused::Certificate {
        secret: secret.to_string(),
        source,
    };
    let chain = CertificateDer::pem_slice_iter(certs.server_cert.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(e.into()))?;
    let key = PrivateKeyDer::from_pem_slice(certs.server_key.as_bytes())
        .map_err(|e| invalid(e.into()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| invalid(e.into()))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| invalid(e.into()))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

async fn handle(stream: TcpStream, wake: &Wake) -> Result<Answer, Refused> {
    let start = LazyConfigAcceptor::new(Acceptor::default(), stream)
        .await
        .map_err(Refused::ClientHello)?;
    let server_name = start
        .client_hello()
        .server_name()
        .ok_or(Refused::NoServerName)?
        .to_string();
    let (namespace, name) = target(&server_name, &wake.cluster_domain, &wake.namespaces)
        .ok_or_else(|| Refused::UnknownServerName(server_name.clone()))?;
    let cluster = format!("{namespace}/{name}");
    let vc = Api::<VirtualCluster>::namespaced(wake.client.clone(), &namespace)
        .get_opt(&name)
        .await
        .request("read", || format!("VirtualCluster {cluster}"))?
        .ok_or_else(|| Refused::NoVirtualCluster(cluster.clone()))?;
    // Only clusters that asked for it: a connection must not count as activity for others.
    if !vc.spec.sleep_mode.as_ref().is_some_and(|s| s.auto_wakeup) {
        return Err(Refused::NoAutoWakeup(cluster));
    }
    let secret_name = ChildNames::new(&namespace, &name, None).certs_secret;
    let secret = Api::<Secret>::namespaced(wake.client.clone(), &namespace)
        .get(&secret_name)
        .await
        .request("read", || format!("Secret {namespace}/{secret_name}"))?;
    let certs =
        Certs::from_secret_data(&secret_name, &secret.data.unwrap_or_default()).map_err(|e| {
            Refused::Certificate {
                secret: secret_name.clone(),
                source: e.into(),
            }
        })?;
    let config = server_config(&secret_name, &certs)?;
    let mut tls = start
        .into_stream(Arc::new(config))
        .await
        .map_err(|source| Refused::Handshake {
            server_name: server_name.clone(),
            source,
        })?;
    read_request_head(&mut tls).await;
    let answer = if vc.spec.paused {
        Answer::Paused
    } else {
        request_wake(wake, &vc, &namespace, &name)
            .await
            .request("renew", || {
                format!("the activity Lease of VirtualCluster {cluster}")
            })?;
        Answer::Waking
    };
    // The client may already be gone; nothing to do about it.
    let _ = tls.write_all(&response(answer, &namespace, &name)).await;
    let _ = tls.shutdown().await;
    Ok(answer)
}

/// Reads until the end of the HTTP request head (or EOF, or the size limit).
async fn read_request_head(tls: &mut (impl AsyncReadExt + Unpin)) {
    let mut head = Vec::new();
    let mut buf = [0u8; 2048];
    while head.len() < MAX_REQUEST_HEAD && !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match tls.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
}

/// Records the connection as tenant activity on the cluster's Lease, when [`should_renew`]
/// says so: the first one after the sleep is the wake request.
async fn request_wake(
    wake: &Wake,
    vc: &VirtualCluster,
    namespace: &str,
    name: &str,
) -> Result<(), kube::Error> {
    let leases: Api<Lease> = Api::namespaced(wake.client.clone(), namespace);
    let lease_name = activity::lease_name(name);
    let last = leases
        .get_opt(&lease_name)
        .await?
        .as_ref()
        .and_then(activity::last_activity)
        .map(|t| {
            chrono::DateTime::from_timestamp(t.as_second(), t.subsec_nanosecond().unsigned_abs())
                .unwrap_or_default()
        });
    let asleep_since = conditions::find(vc.status.as_ref(), SLEEPING)
        .filter(|c| c.status == "True")
        .map(|c| facts::to_utc(c.last_transition_time.0));
    let now = chrono::Utc::now();
    if !should_renew(last, asleep_since, now) {
        return Ok(());
    }
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..Default::default()
    };
    let at = k8s_openapi::jiff::Timestamp::now();
    leases
        .patch(&lease_name, &params, &Patch::Merge(activity::renewal(at)))
        .await?;
    wake.metrics.write("Lease", "patch");
    info!(%namespace, %name, "wake requested by a connection to the wake endpoint");
    Ok(())
}

#[cfg(test)]
mod tests {
    use rustls::{ClientConfig, ClientConnection, RootCertStore, pki_types::ServerName};

    use super::*;

    /// Moves what `from` has to send into `to`; whether anything moved.
    fn pump(
        from: &mut impl std::ops::DerefMut<Target = rustls::ConnectionCommon<impl Sized>>,
        to: &mut impl std::ops::DerefMut<Target = rustls::ConnectionCommon<impl Sized>>,
    ) -> bool {
        let mut bytes = Vec::new();
        from.write_tls(&mut bytes).unwrap();
        if bytes.is_empty() {
            return false;
        }
        to.read_tls(&mut bytes.as_slice()).unwrap();
        to.process_new_packets().unwrap();
        true
    }

    /// A real ClientHello, as a tenant's kubeconfig sends it: the server name picks the
    /// cluster, and a client trusting only that cluster's CA accepts the certificate served.
    #[test]
    fn the_sni_of_a_real_client_hello_picks_the_cluster_whose_ca_the_client_trusts() {
        let spec = vnest_crds::VirtualClusterSpec::default();
        let sans = crate::desired::server_sans("team-a", "dev", &spec, "cluster.local", None);
        let certs = Certs::generate("team-a/dev", &sans).unwrap();
        let mut roots = RootCertStore::empty();
        for ca in CertificateDer::pem_slice_iter(certs.ca_cert.as_bytes()) {
            roots.add(ca.unwrap()).unwrap();
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let client_config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let name = ServerName::try_from("dev.team-a.svc").unwrap();
        let mut client = ClientConnection::new(Arc::new(client_config), name).unwrap();

        let mut hello = Vec::new();
        client.write_tls(&mut hello).unwrap();
        let mut acceptor = Acceptor::default();
        acceptor.read_tls(&mut hello.as_slice()).unwrap();
        let accepted = acceptor.accept().map_err(|(e, _)| e).unwrap().unwrap();
        let sni = accepted.client_hello().server_name().unwrap().to_string();
        assert_eq!(
            target(&sni, "cluster.local", &[]),
            Some(("team-a".to_string(), "dev".to_string()))
        );

        let config = Arc::new(server_config("vc-certs", &certs).unwrap());
        let mut server = accepted
            .into_connection(config)
            .map_err(|(e, _)| e)
            .unwrap();
        for _ in 0..10 {
            let moved = pump(&mut server, &mut client) | pump(&mut client, &mut server);
            if !moved {
                break;
            }
        }
        assert!(!client.is_handshaking() && !server.is_handshaking());
        assert_eq!(server.server_name(), Some("dev.team-a.svc"));
    }
}
