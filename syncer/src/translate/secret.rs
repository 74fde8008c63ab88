//! Secrets: the host copy carries the data under the translated name.

use k8s_openapi::api::core::v1::Secret;

use super::Target;

/// Secret types the host would treat specially (bind to a host service account); their host
/// copies are plain Opaque Secrets holding the same data.
const HOST_SPECIAL_TYPES: &[&str] = &["kubernetes.io/service-account-token"];

/// The host copy of virtual Secret `virt`.
pub fn host_secret(virt: &Secret, target: &Target) -> Secret {
    let type_ = match virt.type_.as_deref() {
        Some(t) if HOST_SPECIAL_TYPES.contains(&t) => Some("Opaque".to_string()),
        other => other.map(String::from),
    };
    Secret {
        metadata: target.host_meta("Secret", &virt.metadata),
        data: virt.data.clone(),
        string_data: virt.string_data.clone(),
        immutable: virt.immutable,
        type_,
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::*;

    /// Data and type reach the host under the new name.
    #[test]
    fn data_and_type_are_copied() {
        let virt: Secret = from_yaml(
            "metadata: {name: tls, namespace: shop, uid: u}\ntype: kubernetes.io/tls\ndata: {tls.crt: AAE=}",
        );
        let host = host_secret(&virt, &target());
        assert_eq!(host.metadata.name.as_deref(), Some("tls-x-shop-x-vc"));
        assert_eq!(host.type_.as_deref(), Some("kubernetes.io/tls"));
        assert_eq!(host.data, virt.data);
    }

    /// A virtual service-account token must not become a host service-account token.
    #[test]
    fn service_account_tokens_become_opaque() {
        let virt: Secret = from_yaml(
            "metadata: {name: t, namespace: shop}\ntype: kubernetes.io/service-account-token",
        );
        assert_eq!(
            host_secret(&virt, &target()).type_.as_deref(),
            Some("Opaque")
        );
    }
}
