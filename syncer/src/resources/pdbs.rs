//! PodDisruptionBudgets: copied with translated selectors; the host's status comes back.

use k8s_openapi::api::policy::v1::PodDisruptionBudget;

use super::sync_status;
use crate::{
    engine::{Ctx, Decision, Syncer},
    translate::pdb::{host_pdb, virtual_status},
};

pub struct Pdbs;

impl Syncer for Pdbs {
    type K = PodDisruptionBudget;
    const KIND: &'static str = "PodDisruptionBudget";

    async fn desired(
        &self,
        ctx: &Ctx,
        virt: &PodDisruptionBudget,
    ) -> anyhow::Result<Decision<PodDisruptionBudget>> {
        Ok(Decision::Sync(host_pdb(virt, &ctx.target)))
    }

    async fn back(
        &self,
        ctx: &Ctx,
        virt: &PodDisruptionBudget,
        host: &PodDisruptionBudget,
    ) -> anyhow::Result<()> {
        sync_status(ctx, virt, virt.status.as_ref(), virtual_status(host)).await
    }
}
