//! The virtual API endpoint's PKI: a CA, a serving certificate for the Service names, and an
//! admin client certificate. Generated once per VirtualCluster and kept in `<name>-certs`;
//! only the serving certificate is reissued (by the same CA) when the names it must cover change.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};

pub const CA_CERT: &str = "ca.crt";
pub const CA_KEY: &str = "ca.key";
pub const SERVER_CERT: &str = "tls.crt";
pub const SERVER_KEY: &str = "tls.key";
pub const CLIENT_CERT: &str = "client.crt";
pub const CLIENT_KEY: &str = "client.key";
/// Comma-separated names the serving certificate was issued for.
pub const SERVER_SANS: &str = "tls.sans";

/// Common name of the admin client certificate; in group `system:masters` of the virtual cluster.
const ADMIN_USER: &str = "vnest-admin";
const ADMIN_GROUP: &str = "system:masters";

#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error("generating certificates: {0}")]
    Rcgen(#[from] rcgen::Error),
    #[error("Secret {secret} is missing key {key}")]
    MissingKey { secret: String, key: &'static str },
}

/// PEM-encoded certificates and keys of one virtual cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Certs {
    pub ca_cert: String,
    pub ca_key: String,
    pub server_cert: String,
    pub server_key: String,
    pub client_cert: String,
    pub client_key: String,
    pub server_sans: Vec<String>,
    /// The CA key's public half (PKIX `PUBLIC KEY` PEM), derived, not stored: the key
    /// service-account tokens are verified with. kube-apiserver's `--service-account-key-file`
    /// reads PKCS#1/SEC1 private keys or public keys, not the PKCS#8 key in `ca.key`.
    pub ca_public_key: String,
}

fn ca_params(cluster: &str) -> CertificateParams {
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, format!("vnest-ca@{cluster}"));
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params.not_before = rcgen::date_time_ymd(2025, 1, 1);
    params.not_after = rcgen::date_time_ymd(2035, 1, 1);
    params
}

fn leaf_params(
    sans: Vec<String>,
    common_name: &str,
    usage: ExtendedKeyUsagePurpose,
) -> Result<CertificateParams, CertError> {
    let mut params = CertificateParams::new(sans)?;
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![usage];
    params.use_authority_key_identifier_extension = true;
    params.not_before = rcgen::date_time_ymd(2025, 1, 1);
    params.not_after = rcgen::date_time_ymd(2035, 1, 1);
    Ok(params)
}

fn issue_server(
    cluster: &str,
    ca_key: &KeyPair,
    sans: &[String],
) -> Result<(String, String), CertError> {
    let issuer = Issuer::new(ca_params(cluster), ca_key);
    let key = KeyPair::generate()?;
    let cert = leaf_params(sans.to_vec(), cluster, ExtendedKeyUsagePurpose::ServerAuth)?
        .signed_by(&key, &issuer)?;
    Ok((cert.pem(), key.serialize_pem()))
}

impl Certs {
    /// A fresh CA with serving and admin certificates. `cluster` is `<namespace>/<name>`.
    pub fn generate(cluster: &str, sans: &[String]) -> Result<Self, CertError> {
        let ca_key = KeyPair::generate()?;
        let ca_cert = ca_params(cluster).self_signed(&ca_key)?;
        let (server_cert, server_key) = issue_server(cluster, &ca_key, sans)?;

        let issuer = Issuer::new(ca_params(cluster), &ca_key);
        let client_key = KeyPair::generate()?;
        let mut client = leaf_params(Vec::new(), ADMIN_USER, ExtendedKeyUsagePurpose::ClientAuth)?;
        client
            .distinguished_name
            .push(DnType::OrganizationName, ADMIN_GROUP);
        let client_cert = client.signed_by(&client_key, &issuer)?;

        Ok(Certs {
            ca_cert: ca_cert.pem(),
            ca_public_key: ca_key.public_key_pem(),
            ca_key: ca_key.serialize_pem(),
            server_cert,
            server_key,
            client_cert: client_cert.pem(),
            client_key: client_key.serialize_pem(),
            server_sans: sans.to_vec(),
        })
    }

    /// The same PKI with the serving certificate reissued for `sans` if they changed.
    /// Returns `None` when nothing needs to change.
    pub fn with_server_sans(
        &self,
        cluster: &str,
        sans: &[String],
    ) -> Result<Option<Self>, CertError> {
        if self.server_sans == sans {
            return Ok(None);
        }
        let ca_key = KeyPair::from_pem(&self.ca_key)?;
        let (server_cert, server_key) = issue_server(cluster, &ca_key, sans)?;
        Ok(Some(Certs {
            server_cert,
            server_key,
            server_sans: sans.to_vec(),
            ..self.clone()
        }))
    }

    pub fn to_secret_data(&self) -> BTreeMap<String, ByteString> {
        let entry = |k: &str, v: &str| (k.to_string(), ByteString(v.as_bytes().to_vec()));
        BTreeMap::from([
            entry(CA_CERT, &self.ca_cert),
            entry(CA_KEY, &self.ca_key),
            entry(SERVER_CERT, &self.server_cert),
            entry(SERVER_KEY, &self.server_key),
            entry(CLIENT_CERT, &self.client_cert),
            entry(CLIENT_KEY, &self.client_key),
            entry(SERVER_SANS, &self.server_sans.join(",")),
        ])
    }

    pub fn from_secret_data(
        secret: &str,
        data: &BTreeMap<String, ByteString>,
    ) -> Result<Self, CertError> {
        let get = |key: &'static str| {
            data.get(key)
                .map(|v| String::from_utf8_lossy(&v.0).into_owned())
                .ok_or_else(|| CertError::MissingKey {
                    secret: secret.to_string(),
                    key,
                })
        };
        let ca_key = get(CA_KEY)?;
        Ok(Certs {
            ca_cert: get(CA_CERT)?,
            ca_public_key: KeyPair::from_pem(&ca_key)?.public_key_pem(),
            ca_key,
            server_cert: get(SERVER_CERT)?,
            server_key: get(SERVER_KEY)?,
            client_cert: get(CLIENT_CERT)?,
            client_key: get(CLIENT_KEY)?,
            server_sans: get(SERVER_SANS)?
                .split(',')
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sans() -> Vec<String> {
        vec![
            "team-alpha".into(),
            "team-alpha.team-alpha.svc".into(),
            "127.0.0.1".into(),
        ]
    }

    #[test]
    fn generates_pem_encoded_ca_server_and_client() {
        let certs = Certs::generate("team-alpha/team-alpha", &sans()).unwrap();
        for pem in [&certs.ca_cert, &certs.server_cert, &certs.client_cert] {
            assert!(pem.starts_with("-----BEGIN CERTIFICATE-----"), "{pem}");
        }
        for pem in [&certs.ca_key, &certs.server_key, &certs.client_key] {
            assert!(pem.starts_with("-----BEGIN PRIVATE KEY-----"), "{pem}");
        }
        assert_ne!(certs.server_key, certs.client_key);
        assert!(
            certs
                .ca_public_key
                .starts_with("-----BEGIN PUBLIC KEY-----"),
            "{}",
            certs.ca_public_key
        );
    }

    #[test]
    fn secret_data_round_trips() {
        let certs = Certs::generate("ns/vc", &sans()).unwrap();
        let back = Certs::from_secret_data("vc-certs", &certs.to_secret_data()).unwrap();
        assert_eq!(back, certs);
    }

    #[test]
    fn missing_key_is_named() {
        let mut data = Certs::generate("ns/vc", &sans()).unwrap().to_secret_data();
        data.remove(CA_KEY);
        let err = Certs::from_secret_data("vc-certs", &data).unwrap_err();
        assert_eq!(err.to_string(), "Secret vc-certs is missing key ca.key");
    }

    #[test]
    fn same_sans_keep_everything_and_new_sans_reissue_only_the_serving_cert() {
        let certs = Certs::generate("ns/vc", &sans()).unwrap();
        assert!(certs.with_server_sans("ns/vc", &sans()).unwrap().is_none());
        let mut more = sans();
        more.push("vc.example.com".into());
        let reissued = certs.with_server_sans("ns/vc", &more).unwrap().unwrap();
        assert_eq!(reissued.ca_cert, certs.ca_cert);
        assert_eq!(reissued.client_cert, certs.client_cert);
        assert_ne!(reissued.server_cert, certs.server_cert);
        assert_eq!(reissued.server_sans, more);
    }
}
