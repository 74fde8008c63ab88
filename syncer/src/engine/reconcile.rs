//! The reconcile of one key: the host copy made to match the virtual object, or deleted,
//! read from the two caches and written only when something differs.

use std::{
    collections::HashSet,
    sync::{Arc, Mutex},
};

use anyhow::Context as _;
use kube::{Api, Resource, ResourceExt, api::DeleteParams, runtime::reflector::ObjectRef};
use vnest_crds::meta::ANNOTATION_OBJECT_UID;

use super::{
    Ctx, Decision, HostGone, Key, Queue, Syncer, conflict_note, is_not_found, key_of,
    name_conflict, runner::push_every_key,
};

use crate::cache::Cache;

pub(super) struct Engine<S: Syncer> {
    pub(super) syncer: S,
    pub(super) ctx: Arc<Ctx>,
    pub(super) virt: Cache<S::K>,
    pub(super) host: Cache<S::K>,
    pub(super) queue: Queue,
    /// Refusals already reported, so a level-triggered loop does not repeat its event.
    pub(super) reported: Mutex<HashSet<(String, String)>>,
}

/// Event reason on a virtual object whose host copy the host API server will not take.
const HOST_REFUSED: &str = "HostRefused";

/// Whether the host turned a create down for what the object is or what the host's policy
/// allows (invalid; forbidden by admission, such as a quota or a missing RuntimeClass), which
/// the tenant should hear of. Not a conflict or a server error, and not the syncer's own
/// missing rights (the authorizer's "User … cannot create resource …"): those are the
/// operator's to fix, and their message names the host namespace and account.
fn refused_by_host(e: &kube::core::Status) -> bool {
    let unauthorized = e.message.contains(" cannot ") && e.message.contains(" resource ");
    matches!(e.code, 400 | 422) || (e.code == 403 && !unauthorized)
}

/// The context of a failed host apply of `body`.
fn failed_apply<S: Syncer>(body: &S::K) -> String {
    format!("failed to apply host {} {}", S::KIND, body.name_any())
}

impl<S: Syncer> Engine<S> {
    pub(super) fn push_all(&self) {
        push_every_key(&self.virt, &self.host, &self.queue);
    }

    fn host_api(&self) -> Api<S::K> {
        Api::namespaced(self.ctx.host.clone(), &self.ctx.target.host_namespace)
    }

    fn count_write(&self) {
        self.ctx.metrics.count_host_write(S::KIND);
    }

    async fn delete_host(&self, name: &str, virt: Option<&S::K>) -> anyhow::Result<()> {
        self.count_write();
        match self
            .host_api()
            .delete(name, &self.syncer.delete_params(virt))
            .await
        {
            Ok(_) => {
                tracing::info!(kind = S::KIND, host = name, "deleted host copy");
                Ok(())
            }
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(e).with_context(|| format!("failed to delete host {} {name}", S::KIND)),
        }
    }

    /// Deletes virtual object `virt` whose host copy ended, once it records how it ended.
    async fn delete_virtual(&self, virt: &S::K) -> anyhow::Result<()> {
        self.syncer.ended(&self.ctx, virt).await?;
        let api: Api<S::K> =
            Api::namespaced(self.ctx.virt.clone(), &virt.namespace().unwrap_or_default());
        match api
            .delete(&virt.name_any(), &DeleteParams::default().grace_period(0))
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(e).with_context(|| {
                format!("failed to delete virtual {} {}", S::KIND, virt.name_any())
            }),
        }
    }

    async fn try_apply(&self, body: &S::K) -> kube::Result<()> {
        self.count_write();
        let name = body.name_any();
        let api = self.host_api();
        self.ctx
            .metrics
            .timed("host_apply", super::apply(&api, &name, body))
            .await?;
        tracing::info!(kind = S::KIND, host = %name, "applied host copy");
        Ok(())
    }

    /// Writes `desired` over the host copy `actual` (`None`: creates it), as the syncer's
    /// [`Syncer::preferred_body`] prefers if it has a preference; as `desired` when it has
    /// none or the host refuses it as invalid.
    async fn write(&self, virt: &S::K, desired: &S::K, actual: Option<&S::K>) -> kube::Result<()> {
        if let Some(preferred) = self.syncer.preferred_body(&self.ctx, virt, desired, actual) {
            match self.try_apply(&preferred).await {
                Err(kube::Error::Api(e)) if e.code == 422 => {
                    tracing::info!(kind = S::KIND, host = %desired.name_any(), reason = %e.message, "host refused the preferred copy; writing the plain one");
                }
                other => return other,
            }
        }
        self.try_apply(desired).await
    }

    /// Creates the host copy; a refusal by the host is told to the tenant.
    async fn create(&self, virt: &S::K, desired: &S::K) -> anyhow::Result<()> {
        let result = self.write(virt, desired, None).await;
        if let Err(kube::Error::Api(e)) = &result
            && refused_by_host(e)
        {
            let note = format!(
                "not synced to the host: the host refused its copy: {}",
                e.message
            );
            self.ctx.warn(virt, HOST_REFUSED, note).await;
        }
        result.with_context(|| failed_apply::<S>(desired))
    }

    fn virt_api(&self, namespace: &str) -> Api<S::K> {
        Api::namespaced(self.ctx.virt.clone(), namespace)
    }

    /// Whether the host copy belongs to a virtual object other than the live one, read live
    /// on both sides: the caches may trail a uid that was just adopted or recreated.
    async fn belongs_to_other(&self, key: &Key, host_name: &str) -> anyhow::Result<bool> {
        let virt = self
            .virt_api(&key.0)
            .get_opt(&key.1)
            .await
            .context("failed to read virtual object")?;
        let host = self
            .host_api()
            .get_opt(host_name)
            .await
            .context("failed to read host copy")?;
        Ok(match (virt, host) {
            (Some(v), Some(h)) => h.annotations().get(ANNOTATION_OBJECT_UID) != v.uid().as_ref(),
            _ => false,
        })
    }

    /// The whole host copy: `cached` itself, or read live for a kind whose cache is trimmed.
    async fn untrimmed(
        &self,
        host_name: &str,
        cached: Arc<S::K>,
    ) -> anyhow::Result<Option<Arc<S::K>>> {
        if S::TRIM_HOST.is_none() {
            return Ok(Some(cached));
        }
        let live = self
            .host_api()
            .get_opt(host_name)
            .await
            .with_context(|| format!("failed to read host {} {host_name}", S::KIND))?;
        Ok(live.map(Arc::new))
    }

    /// Whether the virtual object is really gone (not just missing from a trailing cache).
    async fn virtual_gone(&self, key: &Key) -> anyhow::Result<bool> {
        let live = self
            .virt_api(&key.0)
            .get_opt(&key.1)
            .await
            .context("failed to read virtual object")?;
        Ok(live.is_none())
    }

    /// Reports a refusal once per virtual uid and note, so a level-triggered loop does not
    /// repeat its event.
    async fn refuse(&self, virt: &S::K, uid: &str, reason: &str, note: String) {
        let first = self
            .reported
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert((uid.to_string(), note.clone()));
        if first {
            let key = key_of(virt);
            tracing::info!(kind = S::KIND, namespace = %key.0, name = %key.1, note, "refused");
            self.ctx.warn(virt, reason, note).await;
        }
    }

    pub(super) async fn reconcile(&self, key: &Key) -> anyhow::Result<()> {
        let (namespace, name) = key;
        let host_name = self.ctx.target.host_name(name, namespace);
        let virt = self.virt.get(&ObjectRef::new(name).within(namespace));
        let host = self
            .host
            .get(&ObjectRef::new(&host_name).within(&self.ctx.target.host_namespace));
        let host_terminating = host
            .as_ref()
            .is_some_and(|h| h.meta().deletion_timestamp.is_some());
        // Only copies this syncer made are ever deleted: host controllers copy Service labels
        // (and so the managed-by marker) onto objects of their own, such as Endpoints.
        // Nor a copy that another virtual object of the same host name owns (a name conflict).
        let conflict = host.as_ref().and_then(|h| name_conflict(key, h.as_ref()));
        let deletable = conflict.is_none()
            && host.as_ref().is_some_and(|h| {
                h.meta().deletion_timestamp.is_none()
                    && h.annotations().contains_key(ANNOTATION_OBJECT_UID)
            });

        let Some(virt) = virt else {
            if let Some(h) = &host
                && self.syncer.restore_virtual(&self.ctx, h).await?
            {
                return Ok(());
            }
            if deletable && self.virtual_gone(key).await? {
                self.delete_host(&host_name, None).await?;
            }
            return Ok(());
        };
        if virt.meta().deletion_timestamp.is_some() {
            return match host {
                Some(_) if deletable => self.delete_host(&host_name, Some(&virt)).await,
                Some(_) => Ok(()),
                None if self.syncer.host_gone(&virt) == HostGone::DeleteVirtual => {
                    self.delete_virtual(&virt).await
                }
                None => self.syncer.finish(&self.ctx, &virt).await,
            };
        }
        let uid = virt.uid().unwrap_or_default();
        if let Some(owner) = conflict {
            // Neither applied (it would overwrite the owner's copy) nor deleted.
            let note = conflict_note(S::KIND, key, &owner, &host_name);
            self.refuse(virt.as_ref(), &uid, "NameConflict", note).await;
            return Ok(());
        }
        if let Some(h) = &host {
            let host_uid = h
                .annotations()
                .get(ANNOTATION_OBJECT_UID)
                .map(String::as_str);
            if host_uid != Some(uid.as_str())
                && deletable
                && self.belongs_to_other(key, &host_name).await?
            {
                tracing::info!(kind = S::KIND, host = %host_name, "host copy belongs to an older virtual object; replacing");
                return self.delete_host(&host_name, None).await;
            }
        }
        match self.syncer.desired(&self.ctx, &virt).await? {
            Decision::Skip => {
                if deletable {
                    self.delete_host(&host_name, None).await?;
                }
            }
            Decision::Refuse { reason, note } => {
                self.refuse(virt.as_ref(), &uid, reason, note).await;
                if deletable {
                    self.delete_host(&host_name, None).await?;
                }
            }
            Decision::Sync(desired) => match host {
                None if self.syncer.host_gone(&virt) == HostGone::DeleteVirtual => {
                    tracing::info!(
                        kind = S::KIND,
                        namespace,
                        name,
                        "host copy is gone; deleting the virtual object"
                    );
                    self.delete_virtual(&virt).await?;
                }
                None => self.create(&virt, &desired).await?,
                Some(_) if host_terminating => {}
                Some(h) => {
                    // Labels are compared whole, so one the tenant removed goes from the host.
                    let labels_differ = h.labels() != desired.labels();
                    if labels_differ || self.syncer.needs_update(&h, &desired) {
                        let Some(actual) = self.untrimmed(&host_name, h.clone()).await? else {
                            // Gone since it was cached: its delete event queues the key again.
                            return Ok(());
                        };
                        let body = self.syncer.update_body(&actual, desired);
                        self.write(&virt, &body, Some(&actual))
                            .await
                            .with_context(|| failed_apply::<S>(&body))?;
                    }
                    self.syncer.back(&self.ctx, &virt, &h).await?;
                }
            },
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: u16, message: &str) -> kube::core::Status {
        serde_json::from_value(serde_json::json!({ "code": code, "message": message })).unwrap()
    }

    /// Admission and validation refusals reach the tenant; conflicts, server errors and the
    /// syncer's own missing rights do not.
    #[test]
    fn only_the_hosts_refusals_of_the_object_are_the_tenants_business() {
        for (code, message) in [
            (
                403,
                r#"pods "web-x-shop-x-vc" is forbidden: exceeded quota: vc, requested: pods=1"#,
            ),
            (403, r#"pod rejected: RuntimeClass "gvisor" not found"#),
            (
                422,
                r#"Pod "web-x-shop-x-vc" is invalid: spec.containers[0].image: Required value"#,
            ),
        ] {
            assert!(refused_by_host(&status(code, message)), "{message}");
        }
        for (code, message) in [
            (
                403,
                r#"pods is forbidden: User "system:serviceaccount:team-a:vc-vc" cannot create resource "pods" in API group "" in the namespace "team-a""#,
            ),
            (409, "the object has been modified"),
            (500, "etcdserver: request timed out"),
            (404, r#"namespaces "team-a" not found"#),
        ] {
            assert!(!refused_by_host(&status(code, message)), "{message}");
        }
    }
}
