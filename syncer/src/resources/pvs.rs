//! PersistentVolumes from the host: a host volume bound to one of our host claims appears
//! under its own name, bound to the virtual claim; once the claim is gone it stays as the
//! host keeps it (Released under `Retain`) and goes when the host volume goes.

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::{ResourceExt, runtime::reflector::ObjectRef};
use vnest_crds::meta::{
    ANNOTATION_OBJECT_NAME, ANNOTATION_OBJECT_NAMESPACE, ANNOTATION_OBJECT_UID,
};

use super::from_host::Mirror;
use crate::{
    cache::Cache,
    engine::Ctx,
    translate::pv::{VirtualClaim, bound_claim, claim_ref, virtual_pv},
};

pub struct Pvs {
    /// Our host claims, to map a volume's claim back to the virtual one.
    pub host_claims: Cache<PersistentVolumeClaim>,
    /// Virtual claims, for the uid the virtual binding names.
    pub virtual_claims: Cache<PersistentVolumeClaim>,
}

impl Pvs {
    /// The live virtual claim host claim `name` was copied from.
    fn virtual_claim(&self, ctx: &Ctx, name: &str) -> Option<VirtualClaim> {
        let host = self
            .host_claims
            .get(&ObjectRef::new(name).within(&ctx.target.host_namespace))?;
        let a = host.annotations();
        let (namespace, name) = (
            a.get(ANNOTATION_OBJECT_NAMESPACE)?,
            a.get(ANNOTATION_OBJECT_NAME)?,
        );
        let virt = self
            .virtual_claims
            .get(&ObjectRef::new(name).within(namespace))?;
        let uid = virt.uid()?;
        (a.get(ANNOTATION_OBJECT_UID) == Some(&uid)).then(|| VirtualClaim {
            namespace: namespace.clone(),
            name: name.clone(),
            uid,
        })
    }
}

impl Mirror for Pvs {
    type K = PersistentVolume;
    const KIND: &'static str = "PersistentVolume";

    fn owns(&self, ctx: &Ctx, virt: &PersistentVolume) -> bool {
        let claim = virt.spec.as_ref().and_then(|s| s.claim_ref.as_ref());
        claim
            .and_then(|c| c.namespace.as_deref())
            .is_some_and(|ns| ctx.namespace_synced(ns))
    }

    fn desired(
        &self,
        ctx: &Ctx,
        host: &PersistentVolume,
        virt: Option<&PersistentVolume>,
    ) -> Option<PersistentVolume> {
        let claim = bound_claim(host, &ctx.target.host_namespace)?;
        match self.virtual_claim(ctx, claim) {
            Some(claim) => Some(virtual_pv(host, Some(claim_ref(&claim)))),
            // Released: keep showing it bound to the claim it had, as the host does.
            None => {
                virt.map(|v| virtual_pv(host, v.spec.as_ref().and_then(|s| s.claim_ref.clone())))
            }
        }
    }
}
