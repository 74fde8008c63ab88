//! The virtual cluster's DNS server (`controlPlane.coredns`): a CoreDNS Deployment, its
//! ConfigMap, ServiceAccount and RBAC, and the `kube-dns` Service, kept in the virtual
//! cluster's `kube-system` ([`deploy`]). They are ordinary tenant objects from then on: the pod
//! and the Service are synced to the host like any other, the pod reads the *virtual* API
//! server through its ServiceAccount, and tenant pods get the host copy of `kube-dns` as their
//! nameserver ([`crate::translate::pod`]). A tenant that edits or deletes them gets them back.
//! The Corefile ([`corefile`]) also serves the `networking.resolveDNS` entries
//! ([`resolve_dns`]), re-rendered when what they depend on changes.

mod corefile;
mod deploy;
mod resolve_dns;

use std::{sync::Arc, time::Duration};

use futures::stream;
use k8s_openapi::api::{
    apps::v1::Deployment,
    core::v1::{ConfigMap, ObjectReference, Service, ServiceAccount},
    rbac::v1::{ClusterRole, ClusterRoleBinding},
};
use vnest_crds::CoreDns;

use crate::{change, engine::Ctx};
use resolve_dns::Problem;

/// Namespace of the DNS objects, where Kubernetes clients expect `kube-dns`.
pub const NAMESPACE: &str = "kube-system";
/// Name of the DNS Service; its host copy's ClusterIP is every tenant pod's nameserver.
pub const SERVICE: &str = "kube-dns";
/// Name of the Deployment, ConfigMap and ServiceAccount.
const NAME: &str = "coredns";
/// Name of the ClusterRole and its binding (cluster-scoped, so prefixed).
const CLUSTER_ROLE: &str = "vnest:coredns";
/// `app.kubernetes.io/managed-by` on every DNS object, telling them from a tenant's own.
const MANAGED_BY: &str = "vnest-syncer";
/// Port CoreDNS listens on inside its pod: above 1024, so it needs no capability and runs
/// under the `restricted` Pod Security Standard; the Service maps 53 to it.
const DNS_PORT: i32 = 1053;
const HEALTH_PORT: i32 = 8080;
const READY_PORT: i32 = 8181;
const METRICS_PORT: i32 = 9153;
/// How long after a change to the DNS objects they are re-applied.
const SETTLE: Duration = Duration::from_secs(5);
/// Re-applied this often even when no watch event says so (a missed event heals).
const RESYNC: Duration = Duration::from_secs(300);
/// Re-applied this soon after a failure.
const RETRY: Duration = Duration::from_secs(5);

/// Renders the Corefile from what the entries depend on and applies every DNS object; the
/// problems of the entries left out.
async fn apply(ctx: &Ctx) -> anyhow::Result<(ObjectReference, Vec<Problem>)> {
    let networking = &ctx.config.networking;
    let domain = &networking.advanced.cluster_domain;
    let facts = resolve_dns::read(ctx, &networking.resolve_dns, domain).await?;
    let (blocks, problems) = resolve_dns::plan(&networking.resolve_dns, domain, &facts);
    let config_map = deploy::apply(ctx, &corefile::render(domain, &blocks)).await?;
    Ok((config_map, problems))
}

/// Keeps the DNS objects as the configuration says until the process ends: applied at start,
/// again whenever one of them, a virtual Service or a host Service an entry maps changes,
/// and every [`RESYNC`]; removed when disabled. Each entry left out gets a Warning event on
/// the `coredns` ConfigMap when its problem first shows.
pub async fn run(ctx: Arc<Ctx>) {
    let CoreDns { enabled, .. } = ctx.config.coredns;
    if !enabled {
        loop {
            match deploy::remove(&ctx).await {
                Ok(()) => return futures::future::pending().await,
                Err(e) => tracing::warn!(error = format!("{e:#}"), "removing DNS failed; retrying"),
            }
            tokio::time::sleep(Duration::from_secs(10)).await;
        }
    }
    let networking = &ctx.config.networking;
    let mut changed = stream::select_all(
        [
            deploy::changes::<ServiceAccount>(&ctx),
            deploy::changes::<ConfigMap>(&ctx),
            deploy::changes::<Deployment>(&ctx),
            deploy::changes::<Service>(&ctx),
            deploy::changes::<ClusterRole>(&ctx),
            deploy::changes::<ClusterRoleBinding>(&ctx),
        ]
        .into_iter()
        .chain(resolve_dns::changes(
            &ctx,
            &networking.resolve_dns,
            &networking.advanced.cluster_domain,
        )),
    );
    let mut reported: Vec<Problem> = Vec::new();
    loop {
        let wait = match apply(&ctx).await {
            Ok((config_map, problems)) => {
                for problem in problems.iter().filter(|p| !reported.contains(p)) {
                    tracing::warn!(%problem, "resolveDNS entry not served");
                    ctx.warn_on(config_map.clone(), problem.reason, problem.message.clone())
                        .await;
                }
                // A host Service that could not be read (the operator's RBAC may trail the
                // syncer's start) is tried again soon, not at the next resync.
                let retry = problems.iter().any(|p| p.reason == resolve_dns::UNREADABLE);
                reported = problems;
                if retry { RETRY } else { RESYNC }
            }
            Err(e) => {
                tracing::warn!(error = format!("{e:#}"), "applying DNS failed; retrying");
                RETRY
            }
        };
        // After a change, let the burst settle, and never race the Service sync: adopting the
        // host ClusterIP deletes and recreates the virtual kube-dns, and an apply in between
        // would take the name with a fresh virtual IP.
        change::next_or_after(&mut changed, wait, SETTLE).await;
    }
}
