//! ServiceAccounts (when `sync.toHost.serviceaccounts` is on): every virtual one is copied,
//! so a host pod can always run as the copy of its account.

use k8s_openapi::api::core::v1::{Pod, ServiceAccount};

use super::same_whole;
use crate::{
    engine::{Ctx, Decision, Key, Syncer},
    translate::service_account::host_service_account,
};

pub struct ServiceAccounts;

/// The account a pod runs as (`default` when it names none), as a key in its namespace.
pub fn used_by(pod: &Pod) -> Vec<Key> {
    let spec = pod.spec.as_ref();
    let name = spec
        .and_then(|s| s.service_account_name.clone().or(s.service_account.clone()))
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "default".to_string());
    vec![(pod.metadata.namespace.clone().unwrap_or_default(), name)]
}

impl Syncer for ServiceAccounts {
    type K = ServiceAccount;
    const KIND: &'static str = "ServiceAccount";

    /// Annotations are compared whole: a role annotation the tenant removes must leave the
    /// host copy too, or a host webhook keeps granting the role.
    fn needs_update(&self, actual: &ServiceAccount, desired: &ServiceAccount) -> bool {
        !same_whole(&actual.metadata.annotations, &desired.metadata.annotations)
            || actual.automount_service_account_token != desired.automount_service_account_token
    }

    async fn desired(
        &self,
        ctx: &Ctx,
        virt: &ServiceAccount,
    ) -> anyhow::Result<Decision<ServiceAccount>> {
        Ok(Decision::Sync(host_service_account(virt, &ctx.target)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pod_uses_its_named_account_or_default() {
        let pod = |spec: serde_json::Value| -> Pod {
            serde_json::from_value(serde_json::json!({
                "metadata": { "name": "p", "namespace": "ns" }, "spec": spec,
            }))
            .unwrap()
        };
        let key = |n: &str| vec![("ns".to_string(), n.to_string())];
        assert_eq!(
            used_by(&pod(serde_json::json!({ "containers": [] }))),
            key("default")
        );
        let named = serde_json::json!({ "containers": [], "serviceAccountName": "build" });
        assert_eq!(used_by(&pod(named)), key("build"));
    }
}
