//! NetworkPolicies: copied with selectors on the syncer's labels. Namespace selectors are
//! resolved against the virtual Namespaces' labels, so a label change requeues every policy.

use futures::{StreamExt, future::BoxFuture};
use k8s_openapi::api::{core::v1::Namespace, networking::v1::NetworkPolicy};
use kube::{
    Api, ResourceExt,
    runtime::{
        reflector::{self},
        watcher,
    },
};

use crate::{
    cache,
    cache::Cache,
    engine::{Ctx, Decision, Queue, Syncer},
    translate::network_policy::{NamespaceLabels, host_network_policy},
};

pub struct NetworkPolicies {
    /// Virtual Namespaces, to resolve namespace selectors.
    pub namespaces: Cache<Namespace>,
}

/// A cache of the virtual Namespaces and the task filling it; every namespace change queues
/// every virtual policy in `policies` again.
pub fn watch_namespaces(
    ctx: &Ctx,
    policies: Cache<NetworkPolicy>,
    queue: Queue,
) -> (Cache<Namespace>, BoxFuture<'static, ()>) {
    let (store, writer) = crate::cache::store();
    let events = cache::watch(
        Api::<Namespace>::all(ctx.virt.clone()),
        watcher::Config::default(),
    );
    let task = reflector::reflector(writer, events).for_each(move |event| {
        if event.is_ok() {
            for policy in policies.state() {
                queue.push((policy.namespace().unwrap_or_default(), policy.name_any()));
            }
        }
        futures::future::ready(())
    });
    (store, Box::pin(task))
}

impl Syncer for NetworkPolicies {
    type K = NetworkPolicy;
    const KIND: &'static str = "NetworkPolicy";

    async fn desired(
        &self,
        ctx: &Ctx,
        virt: &NetworkPolicy,
    ) -> anyhow::Result<Decision<NetworkPolicy>> {
        self.namespaces.wait_until_ready().await?;
        let labels: NamespaceLabels = self
            .namespaces
            .state()
            .iter()
            .map(|n| (n.name_any(), n.labels().clone()))
            .collect();
        Ok(Decision::Sync(host_network_policy(
            virt,
            &ctx.target,
            &labels,
        )))
    }
}
