//! The proxy's TLS: the serving certificate from `<name>-certs` (mounted as a folder) and
//! client certificates verified against the vnest CA in the same Secret (optional for the
//! tenant-facing proxy, required where the virtual API server calls its "kubelet").
//!
//! The operator reissues the serving certificate when the names it covers change, and the
//! kubelet swaps the mounted files; a changed `tls.crt` is picked up by the next connection.

use std::{
    path::{Path, PathBuf},
    sync::{Arc, RwLock},
    time::SystemTime,
};

use anyhow::Context as _;
use rustls::{
    RootCertStore, ServerConfig,
    pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject},
    server::WebPkiClientVerifier,
};

const SERVER_CERT: &str = "tls.crt";
const SERVER_KEY: &str = "tls.key";
const CA_CERT: &str = "ca.crt";

/// Whether a connection must present a client certificate signed by the vnest CA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientCerts {
    Optional,
    Required,
}

/// Reads a rustls config from a certificate folder, reloading it when `tls.crt` changes.
pub struct TlsFiles {
    dir: PathBuf,
    clients: ClientCerts,
    current: RwLock<(Option<SystemTime>, Arc<ServerConfig>)>,
}

fn modified(dir: &Path) -> Option<SystemTime> {
    std::fs::metadata(dir.join(SERVER_CERT))
        .and_then(|m| m.modified())
        .ok()
}

fn read(dir: &Path, name: &str) -> anyhow::Result<Vec<u8>> {
    let path = dir.join(name);
    std::fs::read(&path).with_context(|| format!("failed to read {}", path.display()))
}

/// The server config for the files in `dir`: HTTP/1.1 only (upgrades and watches are
/// spliced or streamed as they come).
pub fn server_config(dir: &Path, clients: ClientCerts) -> anyhow::Result<ServerConfig> {
    let chain = CertificateDer::pem_slice_iter(&read(dir, SERVER_CERT)?)
        .collect::<Result<Vec<_>, _>>()
        .context("serving certificate tls.crt is not PEM")?;
    let key = PrivateKeyDer::from_pem_slice(&read(dir, SERVER_KEY)?)
        .context("tls.key is not a PEM key")?;
    let mut roots = RootCertStore::empty();
    for ca in CertificateDer::pem_slice_iter(&read(dir, CA_CERT)?) {
        roots
            .add(ca.context("ca.crt is not PEM")?)
            .context("ca.crt is not a usable CA certificate")?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone());
    let verifier = match clients {
        ClientCerts::Optional => verifier.allow_unauthenticated(),
        ClientCerts::Required => verifier,
    }
    .build()
    .context("client certificate verifier")?;
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .context("tls.crt and tls.key do not form a usable pair")?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

impl TlsFiles {
    pub fn load(dir: &Path, clients: ClientCerts) -> anyhow::Result<Self> {
        let config = server_config(dir, clients)?;
        Ok(TlsFiles {
            dir: dir.to_path_buf(),
            clients,
            current: RwLock::new((modified(dir), Arc::new(config))),
        })
    }

    /// The config for a new connection; a reload that fails keeps the last good one.
    pub fn config(&self) -> Arc<ServerConfig> {
        let now = modified(&self.dir);
        {
            let current = self.current.read().unwrap_or_else(|e| e.into_inner());
            if current.0 == now {
                return current.1.clone();
            }
        }
        let mut current = self.current.write().unwrap_or_else(|e| e.into_inner());
        match server_config(&self.dir, self.clients) {
            Ok(config) => {
                tracing::info!(dir = %self.dir.display(), "serving certificate reloaded");
                *current = (now, Arc::new(config));
            }
            Err(e) => {
                tracing::warn!(
                    error = format!("{e:#}"),
                    "keeping the previous serving certificate"
                );
                current.0 = now;
            }
        }
        current.1.clone()
    }
}
