//! Ingresses: copied with host backend and TLS Secret names; the load-balancer status comes
//! back. The Secrets they serve are synced by [`super::secrets`].

use k8s_openapi::api::networking::v1::Ingress;

use super::{keys_beside, sync_status};
use crate::{
    engine::{Ctx, Decision, Key, Syncer},
    translate::ingress::{host_ingress, tls_secrets, virtual_status},
};

pub struct Ingresses;

/// The Secrets an Ingress serves, as keys for the Secret queue.
pub fn secrets_of(ingress: &Ingress) -> Vec<Key> {
    keys_beside(ingress, tls_secrets(ingress))
}

impl Syncer for Ingresses {
    type K = Ingress;
    const KIND: &'static str = "Ingress";

    async fn desired(&self, ctx: &Ctx, virt: &Ingress) -> anyhow::Result<Decision<Ingress>> {
        Ok(Decision::Sync(host_ingress(virt, &ctx.target)))
    }

    async fn back(&self, ctx: &Ctx, virt: &Ingress, host: &Ingress) -> anyhow::Result<()> {
        sync_status(ctx, virt, virt.status.as_ref(), virtual_status(host)).await
    }
}
