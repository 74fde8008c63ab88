//! ServiceAccounts (when `sync.toHost.serviceaccounts` is on): every virtual one is copied,
//! so a host pod can always run as the copy of its account.

use k8s_openapi::api::core::v1::ServiceAccount;

use crate::{
    engine::{Ctx, Decision, Syncer},
    translate::service_account::host_service_account,
};

pub struct ServiceAccounts;

impl Syncer for ServiceAccounts {
    type K = ServiceAccount;
    const KIND: &'static str = "ServiceAccount";

    /// Annotations are compared whole: a role annotation the tenant removes must leave the
    /// host copy too, or a host webhook keeps granting the role.
    fn needs_update(&self, actual: &ServiceAccount, desired: &ServiceAccount) -> bool {
        actual.metadata.annotations.clone().unwrap_or_default()
            != desired.metadata.annotations.clone().unwrap_or_default()
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
