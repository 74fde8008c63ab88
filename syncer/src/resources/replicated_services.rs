//! `networking.replicateServices`, both ways ([`crate::translate::replicated_service`] says
//! what a replica is). One key per entry, reconciled from live reads of its two Services
//! whenever a watch on either of them (by name, so the syncer needs read access to no other
//! host Service) says something changed; at start, replicas whose entry went are deleted.
//! Only replicas the syncer marked are ever written or deleted.

use std::sync::Arc;

use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::Service;
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, ListParams},
    runtime::{WatchStreamExt, watcher},
};
use vnest_crds::containment::covers;
use vnest_crds::{
    ReplicateServices,
    meta::{LABEL_REPLICATED_TO_HOST, LABEL_SYNCER_MANAGED_BY},
    split_service_ref,
};

use crate::{
    engine::{self, Ctx, Queue, is_not_found},
    translate::{
        from_host::{LABEL_FROM_HOST, is_from_host},
        replicated_service::{
            ServiceRef, from_host_replica, needs_recreate, stale, to_host_replica,
        },
    },
};

const KIND: &str = "ReplicatedService";
/// Every entry is reconciled again this often, whatever the watches say.
const RESYNC: std::time::Duration = std::time::Duration::from_secs(300);
/// Wait between attempts of the start-up clean-up.
const CLEAN_UP_RETRY: std::time::Duration = std::time::Duration::from_secs(5);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Direction {
    /// Host `from` shown in the virtual cluster as `to`.
    FromHost,
    /// Virtual `from` exposed in the host namespace as `to`.
    ToHost,
}

/// One configured replication.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Entry {
    direction: Direction,
    from: ServiceRef,
    to: ServiceRef,
}

fn owned(pair: (&str, &str)) -> ServiceRef {
    (pair.0.to_string(), pair.1.to_string())
}

/// The configured entries with their namespaces filled in: a host `from` without one is in
/// the host namespace, a virtual side without one in `default`, and a host `to` is always
/// in the host namespace (the syncer may write nowhere else; the operator refuses others).
fn entries(config: &ReplicateServices, host_namespace: &str) -> Vec<Entry> {
    let from_host = config.from_host.iter().map(|m| Entry {
        direction: Direction::FromHost,
        from: owned(split_service_ref(&m.from, host_namespace)),
        to: owned(split_service_ref(&m.to, "default")),
    });
    let to_host = config.to_host.iter().map(|m| Entry {
        direction: Direction::ToHost,
        from: owned(split_service_ref(&m.from, "default")),
        to: (
            host_namespace.to_string(),
            split_service_ref(&m.to, host_namespace).1.to_string(),
        ),
    });
    from_host.chain(to_host).collect()
}

struct Replicator {
    ctx: Arc<Ctx>,
    entries: Vec<Entry>,
}

/// Runs the replication of every entry that concerns the synced virtual namespaces.
pub async fn run(ctx: Arc<Ctx>) {
    ctx.metrics.reconcile_errors.with_label_values(&[KIND]);
    let all = entries(
        &ctx.config.networking.replicate_services,
        &ctx.target.host_namespace,
    );
    let (entries, skipped): (Vec<Entry>, Vec<Entry>) = all
        .into_iter()
        .partition(|e| ctx.namespace_synced(&virtual_side(e).0));
    for e in skipped {
        tracing::info!(from = ?e.from, to = ?e.to, "replicated service outside the synced virtual namespaces; skipped");
    }
    let replicator = Arc::new(Replicator { ctx, entries });
    // Retried until it works: the operator's RBAC may trail the syncer's start.
    let clean_up = tokio::spawn({
        let replicator = replicator.clone();
        async move {
            while let Err(e) = replicator.clean_up().await {
                tracing::warn!(
                    error = format!("{e:#}"),
                    "failed to delete replicas whose entry went; retrying"
                );
                tokio::time::sleep(CLEAN_UP_RETRY).await;
            }
        }
    });
    let queue = Queue::default();
    let watches = replicator.entries.iter().enumerate().flat_map(|(i, e)| {
        let (source, target) = replicator.apis(e);
        [(source, e.from.1.clone()), (target, e.to.1.clone())].map(|(api, name)| {
            watcher(
                api,
                watcher::Config::default().fields(&format!("metadata.name={name}")),
            )
            .default_backoff()
            .map(move |ev| (i, ev))
            .boxed()
        })
    });
    let events = stream::select_all(watches).for_each({
        let queue = queue.clone();
        move |(i, event)| {
            match event {
                Ok(_) => queue.push((String::new(), i.to_string())),
                Err(e) => tracing::warn!(kind = KIND, error = %e, "watch failed; retrying"),
            }
            futures::future::ready(())
        }
    });
    let watch_task = tokio::spawn(events);
    let resync = tokio::spawn({
        let (queue, n) = (queue.clone(), replicator.entries.len());
        async move {
            loop {
                (0..n).for_each(|i| queue.push((String::new(), i.to_string())));
                tokio::time::sleep(RESYNC).await;
            }
        }
    });
    engine::work(&replicator.ctx, &queue, KIND, |key| {
        let replicator = replicator.clone();
        async move {
            let entry = key
                .1
                .parse()
                .ok()
                .and_then(|i: usize| replicator.entries.get(i));
            match entry {
                Some(entry) => replicator.reconcile(entry).await,
                None => Ok(()),
            }
        }
    })
    .await;
    resync.abort();
    watch_task.abort();
    clean_up.abort();
}

/// The virtual Service of an entry: its `to` fromHost, its `from` toHost.
fn virtual_side(e: &Entry) -> &ServiceRef {
    match e.direction {
        Direction::FromHost => &e.to,
        Direction::ToHost => &e.from,
    }
}

impl Replicator {
    /// The APIs of an entry's source and target Service.
    fn apis(&self, e: &Entry) -> (Api<Service>, Api<Service>) {
        let (host, virt) = (self.ctx.host.clone(), self.ctx.virt.clone());
        match e.direction {
            Direction::FromHost => (
                Api::namespaced(host, &e.from.0),
                Api::namespaced(virt, &e.to.0),
            ),
            Direction::ToHost => (
                Api::namespaced(virt, &e.from.0),
                Api::namespaced(host, &e.to.0),
            ),
        }
    }

    /// Whether target `svc` is a replica this syncer made in `direction`.
    fn ours(&self, direction: Direction, svc: &Service) -> bool {
        match direction {
            Direction::FromHost => is_from_host(svc),
            Direction::ToHost => {
                let labels = svc.labels();
                labels.contains_key(LABEL_REPLICATED_TO_HOST)
                    && labels.get(LABEL_SYNCER_MANAGED_BY) == Some(&self.ctx.target.vc)
            }
        }
    }

    fn count_host_write(&self, direction: Direction) {
        if direction == Direction::ToHost {
            self.ctx.metrics.count_host_write("Service");
        }
    }

    async fn delete(
        &self,
        direction: Direction,
        api: &Api<Service>,
        name: &str,
    ) -> anyhow::Result<()> {
        self.count_host_write(direction);
        match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => {
                tracing::info!(
                    namespace = api.namespace().unwrap_or_default(),
                    name,
                    "deleted replicated service"
                );
                Ok(())
            }
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(anyhow::anyhow!(
                "failed to delete replicated Service {name}: {e}"
            )),
        }
    }

    async fn reconcile(&self, e: &Entry) -> anyhow::Result<()> {
        let (source_api, target_api) = self.apis(e);
        let source = source_api.get_opt(&e.from.1).await.map_err(|err| {
            anyhow::anyhow!("failed to read Service {}/{}: {err}", e.from.0, e.from.1)
        })?;
        let actual = target_api.get_opt(&e.to.1).await.map_err(|err| {
            anyhow::anyhow!("failed to read Service {}/{}: {err}", e.to.0, e.to.1)
        })?;
        if let Some(a) = &actual
            && !self.ours(e.direction, a)
        {
            tracing::debug!(to = ?e.to, "a Service of the replica's name is not ours; left alone");
            return Ok(());
        }
        let desired = source.as_ref().map(|s| match e.direction {
            Direction::FromHost => from_host_replica(s, &e.to),
            Direction::ToHost => to_host_replica(s, &e.to.1, &self.ctx.target),
        });
        let desired = match desired {
            Some(Ok(d)) => d,
            other => {
                if let Some(Err(reason)) = other {
                    tracing::info!(from = ?e.from, %reason, "not replicated");
                }
                if actual.is_some() {
                    self.delete(e.direction, &target_api, &e.to.1).await?;
                }
                return Ok(());
            }
        };
        if let Some(a) = &actual {
            if needs_recreate(a, &desired) {
                // The watch sees the deletion and queues the entry to make it anew.
                return self.delete(e.direction, &target_api, &e.to.1).await;
            }
            if covers(&serde_json::to_value(a)?, &serde_json::to_value(&desired)?) {
                return Ok(());
            }
        }
        self.count_host_write(e.direction);
        engine::apply(&target_api, &e.to.1, &desired)
            .await
            .map_err(|err| {
                anyhow::anyhow!(
                    "failed to apply replicated Service {}/{}: {err}",
                    e.to.0,
                    e.to.1
                )
            })?;
        tracing::info!(from = ?e.from, to = ?e.to, "replicated service up to date");
        Ok(())
    }

    /// Deletes the replicas, on both sides, that no entry asks for any more.
    async fn clean_up(&self) -> anyhow::Result<()> {
        let wanted = |d: Direction| -> Vec<ServiceRef> {
            self.entries
                .iter()
                .filter(|e| e.direction == d)
                .map(|e| e.to.clone())
                .collect()
        };
        let host_ns = &self.ctx.target.host_namespace;
        let sides = [
            (
                Direction::FromHost,
                Api::<Service>::all(self.ctx.virt.clone()),
                LABEL_FROM_HOST.to_string(),
            ),
            (
                Direction::ToHost,
                Api::<Service>::namespaced(self.ctx.host.clone(), host_ns),
                format!(
                    "{LABEL_REPLICATED_TO_HOST},{LABEL_SYNCER_MANAGED_BY}={}",
                    self.ctx.target.vc
                ),
            ),
        ];
        for (direction, api, labels) in sides {
            let list = api.list(&ListParams::default().labels(&labels)).await?;
            let existing: Vec<ServiceRef> = list
                .items
                .iter()
                .map(|s| (s.namespace().unwrap_or_default(), s.name_any()))
                .filter(|r| direction == Direction::ToHost || self.ctx.namespace_synced(&r.0))
                .collect();
            for (ns, name) in stale(&existing, &wanted(direction)) {
                let api = match direction {
                    Direction::FromHost => Api::namespaced(self.ctx.virt.clone(), ns),
                    Direction::ToHost => Api::namespaced(self.ctx.host.clone(), ns),
                };
                self.delete(direction, &api, name).await?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(ns: &str, name: &str) -> ServiceRef {
        (ns.to_string(), name.to_string())
    }

    /// Namespaces are filled in per side; a host `to` always lands in the host namespace.
    #[test]
    fn entries_fill_in_the_namespaces() {
        let config: ReplicateServices = serde_yaml::from_str(
            r#"
fromHost:
- {from: kube-system/aws-load-balancer-webhook-service, to: kube-system/aws-load-balancer-webhook-service}
- {from: shared-db, to: db}
toHost:
- {from: shop/api, to: shop-api}
- {from: web, to: team-alpha/web}
"#,
        )
        .unwrap();
        let got = entries(&config, "team-alpha");
        assert_eq!(got.len(), 4);
        assert_eq!(got[0].direction, Direction::FromHost);
        assert_eq!(
            got[0].from,
            r("kube-system", "aws-load-balancer-webhook-service")
        );
        assert_eq!(
            got[0].to,
            r("kube-system", "aws-load-balancer-webhook-service")
        );
        assert_eq!(
            (got[1].from.clone(), got[1].to.clone()),
            (r("team-alpha", "shared-db"), r("default", "db"))
        );
        assert_eq!(got[2].direction, Direction::ToHost);
        assert_eq!(
            (got[2].from.clone(), got[2].to.clone()),
            (r("shop", "api"), r("team-alpha", "shop-api"))
        );
        assert_eq!(
            (got[3].from.clone(), got[3].to.clone()),
            (r("default", "web"), r("team-alpha", "web"))
        );
        assert_eq!(virtual_side(&got[0]), &got[0].to);
        assert_eq!(virtual_side(&got[2]), &got[2].from);
    }
}
