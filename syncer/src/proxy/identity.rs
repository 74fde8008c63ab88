//! Who a request is from, and how that is told to the virtual API server.
//!
//! A client certificate (already verified against the vnest CA by TLS) names the user in its
//! CN and the groups in its O entries, as Kubernetes reads certificates; the proxy forwards
//! that identity by impersonation. A bearer token passes through untouched for the virtual
//! API server to judge.

use http::{HeaderMap, HeaderValue, header::AUTHORIZATION};
use x509_parser::prelude::{FromDer, X509Certificate};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    pub user: String,
    pub groups: Vec<String>,
}

/// Headers a client uses to ask for impersonation itself.
fn is_impersonation_header(name: &str) -> bool {
    name.to_ascii_lowercase().starts_with("impersonate-")
}

/// Why a client certificate names no usable identity.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum IdentityError {
    #[error("unreadable client certificate: {0}")]
    Unreadable(String),
    #[error("client certificate subject: {0}")]
    Subject(String),
    #[error("client certificate has no common name (CN)")]
    NoCommonName,
    #[error("identity {0:?} is not a valid header")]
    InvalidHeader(String),
}

impl Identity {
    /// The identity in a DER-encoded client certificate.
    pub fn from_certificate(der: &[u8]) -> Result<Identity, IdentityError> {
        let (_, cert) =
            X509Certificate::from_der(der).map_err(|e| IdentityError::Unreadable(e.to_string()))?;
        let subject = cert.subject();
        let text = |attr: &x509_parser::x509::AttributeTypeAndValue| {
            attr.as_str()
                .map(str::to_string)
                .map_err(|e| IdentityError::Subject(e.to_string()))
        };
        let user = match subject.iter_common_name().next() {
            Some(cn) => text(cn)?,
            None => return Err(IdentityError::NoCommonName),
        };
        let groups = subject
            .iter_organization()
            .map(text)
            .collect::<Result<_, _>>()?;
        Ok(Identity { user, groups })
    }

    /// Rewrites `headers` to act as this identity through a privileged client: the client's
    /// own credentials and impersonation requests are dropped, ours are set.
    ///
    /// A certificate user asking to impersonate someone else is refused by the caller
    /// (see [`asks_to_impersonate`]); impersonation cannot be nested.
    pub fn impersonate(&self, headers: &mut HeaderMap) -> Result<(), IdentityError> {
        strip_credentials(headers);
        let value = |v: &str| {
            HeaderValue::from_str(v).map_err(|_| IdentityError::InvalidHeader(v.to_string()))
        };
        headers.insert("impersonate-user", value(&self.user)?);
        for group in &self.groups {
            headers.append("impersonate-group", value(group)?);
        }
        Ok(())
    }
}

/// Drops the client's credentials and impersonation requests, before a request is sent
/// with the proxy's own.
pub fn strip_credentials(headers: &mut HeaderMap) {
    headers.remove(AUTHORIZATION);
    let own: Vec<_> = headers
        .keys()
        .filter(|k| is_impersonation_header(k.as_str()))
        .cloned()
        .collect();
    for name in own {
        headers.remove(name);
    }
}

/// Whether the client asks for impersonation (`kubectl --as`).
pub fn asks_to_impersonate(headers: &HeaderMap) -> bool {
    headers.keys().any(|k| is_impersonation_header(k.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{CertificateParams, DnType, KeyPair};

    fn certificate(cn: Option<&str>, orgs: &[&str]) -> Vec<u8> {
        let mut params = CertificateParams::default();
        params.distinguished_name = rcgen::DistinguishedName::new();
        if let Some(cn) = cn {
            params.distinguished_name.push(DnType::CommonName, cn);
        }
        for org in orgs {
            params
                .distinguished_name
                .push(DnType::OrganizationName, *org);
        }
        let key = KeyPair::generate().unwrap();
        params.self_signed(&key).unwrap().der().to_vec()
    }

    #[test]
    fn common_name_is_the_user_and_organization_the_group() {
        let der = certificate(Some("vnest-admin"), &["system:masters"]);
        assert_eq!(
            Identity::from_certificate(&der).unwrap(),
            Identity {
                user: "vnest-admin".into(),
                groups: vec!["system:masters".into()],
            }
        );
    }

    #[test]
    fn a_certificate_without_organization_has_no_groups() {
        let der = certificate(Some("alice"), &[]);
        assert_eq!(
            Identity::from_certificate(&der).unwrap().groups,
            Vec::<String>::new()
        );
    }

    #[test]
    fn a_certificate_without_common_name_is_refused() {
        let err = Identity::from_certificate(&certificate(None, &["team-a"])).unwrap_err();
        assert_eq!(err, IdentityError::NoCommonName);
        assert!(Identity::from_certificate(b"not der").is_err());
    }

    #[test]
    fn impersonation_replaces_the_clients_credentials() {
        let mut headers = HeaderMap::new();
        headers.insert(AUTHORIZATION, HeaderValue::from_static("Bearer stolen"));
        headers.insert("Impersonate-User", HeaderValue::from_static("root"));
        headers.insert("impersonate-extra-x", HeaderValue::from_static("y"));
        headers.insert("accept", HeaderValue::from_static("application/json"));
        let id = Identity {
            user: "alice".into(),
            groups: vec!["g1".into(), "g2".into()],
        };
        id.impersonate(&mut headers).unwrap();
        assert!(headers.get(AUTHORIZATION).is_none());
        assert!(headers.get("impersonate-extra-x").is_none());
        assert_eq!(headers["impersonate-user"], "alice");
        let groups: Vec<_> = headers.get_all("impersonate-group").iter().collect();
        assert_eq!(groups, ["g1", "g2"]);
        assert_eq!(headers["accept"], "application/json");
    }

    #[test]
    fn asking_to_impersonate_is_seen_in_any_case() {
        let mut headers = HeaderMap::new();
        assert!(!asks_to_impersonate(&headers));
        headers.insert("Impersonate-Group", HeaderValue::from_static("x"));
        assert!(asks_to_impersonate(&headers));
    }
}
