//! Best-effort rollback of a tenant write the host did not take: a created object is
//! deleted (and its host mirror, when one with its uid exists), an updated one is put back
//! as it was. A concurrent write can beat it; after [`ATTEMPTS`] conflicts it gives up, and
//! it is never retried later. Each failure is logged with the text vCluster's
//! troubleshooting guide matches on and counted in
//! `vcluster_writethrough_rollback_failures_total{resource,reason}`.

use std::sync::atomic::{AtomicBool, Ordering};

use kube::{
    Api, ResourceExt,
    api::{DeleteParams, DynamicObject, PostParams, Preconditions},
};
use vnest_crds::meta::ANNOTATION_OBJECT_UID;

use super::faults::Faults;
use crate::{
    custom::{Resolved, object, sync::api},
    engine::{Ctx, is_not_found},
};

/// Conflicting attempts before a rollback gives up.
pub const ATTEMPTS: usize = 3;

/// The tenant's object before the write, as far as it is known.
pub enum Before {
    /// It did not exist: the write created it.
    Absent,
    Present(Box<DynamicObject>),
    /// It could not be read.
    Unknown,
}

/// What a rollback could not do; its [`RollbackFailure::category`] is the `reason` label of
/// `vcluster_writethrough_rollback_failures_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RollbackFailure {
    #[error("failed to identify the written object or its state before the write")]
    Unidentified,
    #[error("failed to tell whether the written object reached the host")]
    HostLookup,
    #[error("failed to delete the host mirror of the written object")]
    HostDelete,
    #[error("failed to delete the created object")]
    VirtualDelete,
    #[error("failed to delete the created object: conflicting writes every attempt")]
    VirtualDeleteConflict,
    #[error("failed to put the updated object back")]
    VirtualUpdate,
    #[error("failed to put the updated object back: conflicting writes every attempt")]
    VirtualUpdateConflict,
}

impl RollbackFailure {
    pub fn category(self) -> &'static str {
        match self {
            RollbackFailure::Unidentified => "unidentified",
            RollbackFailure::HostLookup => "host_lookup",
            RollbackFailure::HostDelete => "host_delete",
            RollbackFailure::VirtualDelete => "virtual_delete",
            RollbackFailure::VirtualDeleteConflict => "virtual_delete_conflict",
            RollbackFailure::VirtualUpdate => "virtual_update",
            RollbackFailure::VirtualUpdateConflict => "virtual_update_conflict",
        }
    }
}

fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

pub struct Rollback<'a> {
    ctx: &'a Ctx,
    res: &'a Resolved,
    faults: &'a Faults,
    /// Whether any step failed (what the write left may still need the to-host sync).
    failed_any: AtomicBool,
}

impl<'a> Rollback<'a> {
    pub fn new(ctx: &'a Ctx, res: &'a Resolved, faults: &'a Faults) -> Self {
        Rollback {
            ctx,
            res,
            faults,
            failed_any: AtomicBool::new(false),
        }
    }

    /// Whether the rollback failed or gave up anywhere.
    pub fn failed_any(&self) -> bool {
        self.failed_any.load(Ordering::Relaxed)
    }

    fn failed(&self, failure: RollbackFailure) {
        self.failed_any.store(true, Ordering::Relaxed);
        self.ctx
            .metrics
            .rollback_failures
            .with_label_values(&[&self.res.name(), failure.category()])
            .inc();
    }

    /// Undoes the tenant write that left `written` (absent when its answer could not be read).
    pub async fn run(&self, before: Before, written: Option<&DynamicObject>) {
        let resource = self.res.name();
        let Some(written) =
            written.filter(|w| w.metadata.uid.is_some() && w.metadata.name.is_some())
        else {
            tracing::error!(%resource, "write-through: the written object cannot be identified; it was not rolled back");
            return self.failed(RollbackFailure::Unidentified);
        };
        if self.faults.hits("unidentified", &written.name_any()) {
            tracing::error!(%resource, name = %written.name_any(), "write-through: the written object cannot be identified; it was not rolled back");
            return self.failed(RollbackFailure::Unidentified);
        }
        match before {
            Before::Absent => self.undo_create(written).await,
            Before::Present(before) => self.undo_update(&before, written).await,
            Before::Unknown => {
                tracing::error!(%resource, name = %written.name_any(), "write-through: cannot find the object as it was before the write; it was not rolled back");
                self.failed(RollbackFailure::Unidentified);
            }
        }
    }

    async fn undo_create(&self, written: &DynamicObject) {
        let (resource, name) = (self.res.name(), written.name_any());
        let namespace = written.namespace();
        let host_name = object::host_name(
            &self.ctx.target,
            self.res.namespaced,
            &name,
            namespace.as_deref().unwrap_or_default(),
        );
        let host_api = api(
            self.res,
            &self.ctx.host,
            Some(&self.ctx.target.host_namespace),
        );
        let uid = written.metadata.uid.clone().unwrap_or_default();
        // A host object of that name may be this write's mirror, or a later valid write's.
        let lookup = match self.faults.hits("host-lookup", &name) {
            true => Err(kube::Error::Service("injected fault: host lookup".into())),
            false => host_api.get_opt(&host_name).await,
        };
        let host = match lookup {
            Ok(host) => host,
            Err(e) => {
                tracing::error!(%resource, %name, host = %host_name, error = %e, "write-through: cannot tell whether the object reached the host; leaving the tenant object in place");
                return self.failed(RollbackFailure::HostLookup);
            }
        };
        if let Some(host) =
            host.filter(|h| h.annotations().get(ANNOTATION_OBJECT_UID) == Some(&uid))
        {
            let params = DeleteParams::default().preconditions(Preconditions {
                uid: host.metadata.uid.clone(),
                resource_version: None,
            });
            let deleted = match self.faults.hits("host-delete", &name) {
                true => Err(kube::Error::Service("injected fault: host delete".into())),
                false => host_api.delete(&host_name, &params).await.map(|_| ()),
            };
            match deleted {
                Err(e) if !is_not_found(&e) => {
                    tracing::error!(%resource, %name, host = %host_name, error = %e, "write-through: rollback host delete failed");
                    self.failed(RollbackFailure::HostDelete);
                }
                _ => {
                    tracing::info!(%resource, %name, host = %host_name, "write-through: deleted the host mirror of the rejected write")
                }
            }
        }
        let virt_api = api(self.res, &self.ctx.virt, namespace.as_deref());
        let mut resource_version = written.metadata.resource_version.clone();
        for _ in 0..ATTEMPTS {
            let params = DeleteParams::default().preconditions(Preconditions {
                uid: Some(uid.clone()),
                resource_version: resource_version.clone(),
            });
            let deleted = match (
                self.faults.hits("virtual-delete-conflict", &name),
                self.faults.hits("virtual-delete", &name),
            ) {
                (true, _) => Err(conflict("injected fault: virtual delete conflict")),
                (_, true) => Err(kube::Error::Service(
                    "injected fault: virtual delete".into(),
                )),
                _ => virt_api.delete(&name, &params).await.map(|_| ()),
            };
            match deleted {
                Ok(()) => {
                    tracing::info!(%resource, %name, "write-through: rolled back the create");
                    return;
                }
                Err(e) if is_not_found(&e) => return,
                Err(e) if is_conflict(&e) => match self.current(&virt_api, &name, &uid).await {
                    Some(rv) => resource_version = Some(rv),
                    None => return,
                },
                Err(e) => {
                    tracing::error!(%resource, %name, error = %e, "write-through: rollback delete failed");
                    return self.failed(RollbackFailure::VirtualDelete);
                }
            }
        }
        tracing::error!(%resource, %name, attempts = ATTEMPTS, "write-through: rollback delete gave up after conflicting writes");
        self.failed(RollbackFailure::VirtualDeleteConflict);
    }

    async fn undo_update(&self, before: &DynamicObject, written: &DynamicObject) {
        let (resource, name) = (self.res.name(), written.name_any());
        let uid = written.metadata.uid.clone().unwrap_or_default();
        let virt_api = api(self.res, &self.ctx.virt, written.namespace().as_deref());
        let mut restore = before.clone();
        restore.metadata.managed_fields = None;
        restore.metadata.resource_version = written.metadata.resource_version.clone();
        for _ in 0..ATTEMPTS {
            let replaced = match (
                self.faults.hits("virtual-update-conflict", &name),
                self.faults.hits("virtual-update", &name),
            ) {
                (true, _) => Err(conflict("injected fault: virtual update conflict")),
                (_, true) => Err(kube::Error::Service(
                    "injected fault: virtual update".into(),
                )),
                _ => virt_api
                    .replace(&name, &PostParams::default(), &restore)
                    .await
                    .map(|_| ()),
            };
            match replaced {
                Ok(()) => {
                    tracing::info!(%resource, %name, "write-through: rolled back the update");
                    return;
                }
                Err(e) if is_conflict(&e) => match self.current(&virt_api, &name, &uid).await {
                    Some(rv) => restore.metadata.resource_version = Some(rv),
                    None => return,
                },
                Err(e) => {
                    tracing::error!(%resource, %name, error = %e, "write-through: rollback update failed");
                    return self.failed(RollbackFailure::VirtualUpdate);
                }
            }
        }
        tracing::error!(%resource, %name, attempts = ATTEMPTS, "write-through: rollback update gave up after conflicting writes");
        self.failed(RollbackFailure::VirtualUpdateConflict);
    }

    /// The resourceVersion of the tenant object now, if it is still the one written.
    async fn current(&self, api: &Api<DynamicObject>, name: &str, uid: &str) -> Option<String> {
        match api.get_opt(name).await {
            Ok(Some(o)) if o.metadata.uid.as_deref() == Some(uid) => o.metadata.resource_version,
            // Gone, or replaced by another object: nothing of this write is left to undo.
            Ok(_) => None,
            Err(e) => {
                tracing::warn!(resource = %self.res.name(), %name, error = %e, "write-through: re-reading the tenant object failed");
                None
            }
        }
    }
}

fn conflict(message: &str) -> kube::Error {
    kube::Error::Api(Box::new(
        kube::core::Status::failure(message, "Conflict").with_code(409),
    ))
}

#[cfg(test)]
mod tests {
    use super::RollbackFailure::*;

    /// The `reason` labels dashboards and alerts select on stay as they were.
    #[test]
    fn failure_categories_are_the_metric_reasons() {
        let reasons = [
            Unidentified,
            HostLookup,
            HostDelete,
            VirtualDelete,
            VirtualDeleteConflict,
            VirtualUpdate,
            VirtualUpdateConflict,
        ]
        .map(|f| f.category());
        assert_eq!(
            reasons,
            [
                "unidentified",
                "host_lookup",
                "host_delete",
                "virtual_delete",
                "virtual_delete_conflict",
                "virtual_update",
                "virtual_update_conflict"
            ]
        );
    }
}
