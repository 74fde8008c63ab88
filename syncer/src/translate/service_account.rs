//! ServiceAccounts (`sync.toHost.serviceaccounts`): the host copy exists so host pods can run
//! as it and host webhooks keyed on it (the seed's IRSA case) see the tenant's annotations;
//! it never carries credentials of its own.

use k8s_openapi::api::core::v1::ServiceAccount;

use super::Target;

/// The host copy of virtual ServiceAccount `virt`: translated metadata (annotations such as
/// `eks.amazonaws.com/role-arn` pass through), no token Secrets, no image pull Secrets (they
/// name virtual Secrets; pods carry their own, translated), and no automounted host token.
pub fn host_service_account(virt: &ServiceAccount, target: &Target) -> ServiceAccount {
    ServiceAccount {
        metadata: target.host_meta("ServiceAccount", &virt.metadata),
        automount_service_account_token: Some(false),
        image_pull_secrets: None,
        secrets: None,
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::*;

    /// The IRSA role annotation reaches the host copy under vCluster's name, which is what
    /// the seed's trust policy (`s3-reader-x-default-x-team-alpha`) matches.
    #[test]
    fn annotations_flow_to_the_translated_name() {
        let virt: ServiceAccount = from_yaml(
            r#"
metadata:
  name: s3-reader
  namespace: default
  uid: u-1
  annotations: { eks.amazonaws.com/role-arn: "arn:aws:iam::123456789012:role/s3-reader" }
"#,
        );
        let host = host_service_account(&virt, &Target::new("team-alpha", "team-alpha"));
        assert_eq!(
            host.metadata.name.as_deref(),
            Some("s3-reader-x-default-x-team-alpha")
        );
        assert_eq!(
            host.metadata.annotations.unwrap()["eks.amazonaws.com/role-arn"],
            "arn:aws:iam::123456789012:role/s3-reader"
        );
    }

    /// No virtual credential reference reaches the host, and no host token is mounted.
    #[test]
    fn no_credentials_are_copied() {
        let virt: ServiceAccount = from_yaml(
            "metadata: {name: builder, namespace: shop}\nsecrets: [{name: builder-token}]\nimagePullSecrets: [{name: regcred}]\nautomountServiceAccountToken: true",
        );
        let host = host_service_account(&virt, &target());
        assert_eq!(host.secrets, None);
        assert_eq!(host.image_pull_secrets, None);
        assert_eq!(host.automount_service_account_token, Some(false));
    }
}
