//! Starts one engine per enabled resource type, wiring the caches one type's decisions read
//! from another (ConfigMaps and Secrets follow the pods that use them, Endpoints follow
//! their Services and those of selector Services come back from the host, pods find the
//! virtual DNS among the host Services, virtual Nodes follow the pods bound to them, host
//! events are matched to synced pods through both pod caches, pods follow the
//! ClusterTrustBundles they project, Secrets follow the Ingresses
//! and Gateways serving them, PersistentVolumes follow the claims bound to them,
//! NetworkPolicies follow the virtual Namespaces).

use std::sync::{Arc, atomic::Ordering};

use futures::future::BoxFuture;
use k8s_openapi::api::{
    core::v1::{ConfigMap, Endpoints, PersistentVolumeClaim, Pod, Secret, Service, ServiceAccount},
    networking::v1::{Ingress, IngressClass, NetworkPolicy},
    policy::v1::PodDisruptionBudget,
    scheduling::v1::PriorityClass,
    storage::v1::{CSIDriver, CSINode, CSIStorageCapacity, StorageClass},
};
use kube::{api::DynamicObject, discovery::ApiResource};

use vnest_crds::patch::PodPatches;

use crate::{
    cache,
    custom::{self, Resolved},
    dns,
    engine::{self, Ctx, Key, PodReference, Queue, Referrals, Syncer, Watches},
    resources::{
        api_service,
        configmaps::{self, ConfigMaps},
        endpoints::{self, EndpointsSyncer},
        events,
        from_host::{self, Copies, Mirror},
        ingresses::{self, Ingresses},
        network_policies::{self, NetworkPolicies},
        nodes,
        pdbs::Pdbs,
        pods::{Pods, trust_bundles},
        priority_classes,
        pvcs::{self, Pvcs},
        pvs::Pvs,
        real_nodes, replicated_services,
        secrets::{self, Secrets},
        selector_endpoints,
        service_accounts::{self, ServiceAccounts},
        services::Services,
    },
    translate::{self, gateway},
};

/// The fromHost engines of the cluster-scoped classes and drivers that are enabled.
fn from_host_copies(ctx: &Arc<Ctx>) -> Vec<BoxFuture<'static, ()>> {
    /// The fromHost engine copying every host object of kind `K`, when `on`.
    fn copies<K>(on: bool, ctx: &Arc<Ctx>) -> Option<BoxFuture<'static, ()>>
    where
        Copies<K>: Mirror,
    {
        let run = from_host::run(Copies::<K>::default(), ctx.clone(), Queue::default());
        on.then(|| Box::pin(run) as BoxFuture<'static, ()>)
    }
    let from_host = &ctx.config.sync.from_host;
    [
        copies::<StorageClass>(from_host.storage_classes.enabled, ctx),
        copies::<IngressClass>(from_host.ingress_classes.enabled, ctx),
        copies::<PriorityClass>(from_host.priority_classes.enabled, ctx),
        copies::<CSIDriver>(from_host.csi_drivers.enabled, ctx),
        copies::<CSINode>(from_host.csi_nodes.enabled, ctx),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// The engine of a kind pods name (ConfigMap, Secret, ServiceAccount): also tells the pod
/// engine how to find the owner of a referenced host copy, for its name-conflict check.
fn referenced_engine<S: Syncer>(
    syncer: S,
    used_by: fn(&Pod) -> Vec<Key>,
    watches: Watches<S::K>,
    queue: Queue,
    ctx: &Arc<Ctx>,
    pod_references: &mut Vec<PodReference>,
) -> BoxFuture<'static, ()> {
    pod_references.push(PodReference::new(
        S::KIND,
        used_by,
        watches.host.clone(),
        ctx.target.clone(),
    ));
    Box::pin(engine::run(syncer, ctx.clone(), watches, queue, vec![]))
}

/// Runs every enabled engine, and the sync of each resolved custom resource, until one ends
/// (they only end when their watches do); fails at once on a configuration the engines
/// cannot run.
pub async fn run(ctx: Arc<Ctx>, custom: Vec<Arc<Resolved>>) -> anyhow::Result<()> {
    let to_host = ctx.config.sync.to_host.clone();
    let pod_patches = PodPatches::compile(&to_host.pods).map_err(|errors| {
        let lines: Vec<String> = errors.iter().map(ToString::to_string).collect();
        anyhow::anyhow!("invalid pod patches: {}", lines.join("; "))
    })?;
    let pods = Watches::<Pod>::default();
    let services = Watches::<Service>::default();
    let (virtual_pods, virtual_services, host_services) = (
        pods.virt.clone(),
        services.virt.clone(),
        services.host.clone(),
    );
    let mut engines: Vec<BoxFuture<'static, ()>> = Vec::new();
    let mut pod_followers: Vec<Referrals<Pod>> = Vec::new();
    let mut pod_references: Vec<PodReference> = Vec::new();
    let mut service_followers: Vec<Referrals<Service>> = Vec::new();
    // Without synced pods, "used by a pod" never holds: only `all` makes these useful.
    let referenced = |enabled: bool, all: bool| enabled && (to_host.pods.enabled || all);
    let mut tasks: Vec<BoxFuture<'static, ()>> = Vec::new();
    let ingresses = Watches::<Ingress>::default();
    let mut ingress_followers: Vec<Referrals<Ingress>> = Vec::new();
    let virtual_ingresses = to_host.ingresses.enabled.then(|| ingresses.virt.clone());

    if referenced(to_host.configmaps.enabled, to_host.configmaps.all) {
        let queue = Queue::default();
        pod_followers.push(Referrals::new(queue.clone(), configmaps::used_by));
        let syncer = ConfigMaps {
            pods: virtual_pods.clone(),
        };
        engines.push(referenced_engine(
            syncer,
            configmaps::used_by,
            Watches::<ConfigMap>::default(),
            queue,
            &ctx,
            &mut pod_references,
        ));
    }
    // The Gateways' sync fills a virtual cache the Secret sync reads, and tells it which
    // Secrets a changed Gateway names.
    let mut gateways = custom
        .iter()
        .find(|r| r.gateway == Some(gateway::Kind::Gateway))
        .filter(|_| to_host.secrets.enabled)
        .map(|r| (r.clone(), cache::store_of(r.resource.clone())));
    let mut gateway_referrals: Vec<Referrals<DynamicObject>> = Vec::new();
    let tls = to_host.ingresses.enabled && to_host.secrets.enabled;
    if referenced(to_host.secrets.enabled, to_host.secrets.all) || tls || gateways.is_some() {
        let queue = Queue::default();
        pod_followers.push(Referrals::new(queue.clone(), secrets::used_by));
        if tls {
            ingress_followers.push(Referrals::new(queue.clone(), ingresses::secrets_of));
        }
        if gateways.is_some() {
            gateway_referrals.push(Referrals::new(
                queue.clone(),
                custom::gateway::certificate_keys,
            ));
        }
        let syncer = Secrets {
            pods: virtual_pods,
            ingresses: virtual_ingresses,
            gateways: gateways.as_ref().map(|(_, (virt, _))| virt.clone()),
        };
        engines.push(referenced_engine(
            syncer,
            secrets::used_by,
            Watches::<Secret>::default(),
            queue,
            &ctx,
            &mut pod_references,
        ));
    }
    if to_host.endpoints.enabled && to_host.services.enabled {
        let queue = Queue::default();
        service_followers.push(Referrals::new(queue.clone(), endpoints::of_service));
        let syncer = EndpointsSyncer {
            services: virtual_services.clone(),
        };
        engines.push(Box::pin(engine::run(
            syncer,
            ctx.clone(),
            Watches::<Endpoints>::default(),
            queue,
            vec![],
        )));
    }
    // Selector Services' Endpoints, host → virtual (needs both pod caches).
    let mut selector_endpoints_task: Option<BoxFuture<'static, ()>> = None;
    if to_host.endpoints.enabled && to_host.services.enabled && to_host.pods.enabled {
        let queue = Queue::default();
        service_followers.push(Referrals::new(queue.clone(), endpoints::of_service));
        let caches = selector_endpoints::Caches {
            virt_services: services.virt.clone(),
            host_services: services.host.clone(),
            virt_pods: pods.virt.clone(),
            host_pods: pods.host.clone(),
        };
        selector_endpoints_task = Some(Box::pin(selector_endpoints::run(
            ctx.clone(),
            caches,
            queue,
        )));
    }
    if to_host.services.enabled {
        engines.push(Box::pin(engine::run(
            Services,
            ctx.clone(),
            services,
            Queue::default(),
            service_followers,
        )));
    }
    if to_host.serviceaccounts.enabled {
        engines.push(referenced_engine(
            ServiceAccounts,
            service_accounts::used_by,
            Watches::<ServiceAccount>::default(),
            Queue::default(),
            &ctx,
            &mut pod_references,
        ));
    }
    // Minimal virtual Nodes, unless real ones are synced from the host.
    let mut node_task: Option<BoxFuture<'static, ()>> = None;
    if ctx.config.sync.from_host.nodes.enabled {
        let queue = Queue::default();
        pod_followers.push(Referrals::new(queue.clone(), nodes::node_of));
        let pods = to_host.pods.enabled.then(|| pods.virt.clone());
        node_task = Some(Box::pin(real_nodes::run(ctx.clone(), pods, queue)));
    } else if to_host.pods.enabled {
        let queue = Queue::default();
        pod_followers.push(Referrals::new(queue.clone(), nodes::node_of));
        node_task = Some(Box::pin(nodes::run(ctx.clone(), pods.virt.clone(), queue)));
    }
    // Host events about synced pods, shown on the virtual pods.
    let mut event_task: Option<BoxFuture<'static, ()>> = None;
    if to_host.pods.enabled && ctx.config.sync.from_host.events.enabled {
        event_task = Some(Box::pin(events::run(
            ctx.clone(),
            pods.host.clone(),
            pods.virt.clone(),
        )));
    }
    if to_host.ingresses.enabled {
        engines.push(Box::pin(engine::run(
            Ingresses,
            ctx.clone(),
            ingresses,
            Queue::default(),
            ingress_followers,
        )));
    }
    if to_host.persistentvolumeclaims.enabled {
        let claims = Watches::<PersistentVolumeClaim>::default();
        pod_references.push(PodReference::new(
            "PersistentVolumeClaim",
            pvcs::used_by,
            claims.host.clone(),
            ctx.target.clone(),
        ));
        let volumes = Queue::default();
        let pvs = Pvs {
            host_claims: claims.host.clone(),
            virtual_claims: claims.virt.clone(),
        };
        engines.push(Box::pin(engine::run(
            Pvcs,
            ctx.clone(),
            claims,
            Queue::default(),
            vec![Referrals::new(volumes.clone(), pvcs::volume_of)],
        )));
        engines.push(Box::pin(from_host::run(pvs, ctx.clone(), volumes)));
    }
    if to_host.pods.enabled {
        let queue = Queue::default();
        let (bundles, task) = trust_bundles::watch(&ctx, pods.virt.clone(), queue.clone());
        tasks.push(task);
        let mut syncer = Pods::new(
            host_services,
            pods.host.clone(),
            queue.clone(),
            bundles,
            pod_patches,
        );
        syncer.references = pod_references;
        syncer.virtual_services = to_host.services.enabled.then(|| virtual_services.clone());
        engines.push(Box::pin(engine::run(
            syncer,
            ctx.clone(),
            pods,
            queue,
            pod_followers,
        )));
    }
    if to_host.networkpolicies.enabled {
        let policies = Watches::<NetworkPolicy>::default();
        let queue = Queue::default();
        let (namespaces, task) =
            network_policies::watch_namespaces(&ctx, policies.virt.clone(), queue.clone());
        tasks.push(task);
        engines.push(Box::pin(engine::run(
            NetworkPolicies { namespaces },
            ctx.clone(),
            policies,
            queue,
            vec![],
        )));
    }
    if to_host.poddisruptionbudgets.enabled {
        engines.push(Box::pin(engine::run(
            Pdbs,
            ctx.clone(),
            Watches::<PodDisruptionBudget>::default(),
            Queue::default(),
            vec![],
        )));
    }
    if to_host.priorityclasses.enabled {
        tasks.push(Box::pin(priority_classes::run(ctx.clone())));
    }
    // The virtual cluster's DNS, where its pods can run: a syncer confined to other
    // namespaces (`--virtual-namespaces`) would deploy a server nothing runs.
    if to_host.pods.enabled && to_host.services.enabled && ctx.namespace_synced(dns::NAMESPACE) {
        tasks.push(Box::pin(dns::run(ctx.clone())));
    }
    // The API server's own Service, where a syncer confined to other namespaces would not
    // reach it.
    if ctx.namespace_synced(translate::api_service::NAMESPACE) {
        tasks.push(Box::pin(api_service::run(ctx.clone())));
    }
    engines.extend(from_host_copies(&ctx));
    // Namespaced, so not for the cluster-scoped Mirror runner: host capacities are copied
    // into the virtual namespace of the same name, as from-host custom resources are.
    if ctx.config.sync.from_host.csi_storage_capacities.enabled {
        let capacities =
            Resolved::built_in_from_host(ApiResource::erase::<CSIStorageCapacity>(&()));
        engines.push(Box::pin(custom::sync::run(
            ctx.clone(),
            Arc::new(capacities),
        )));
    }
    for resource in custom {
        let run: BoxFuture<'static, ()> = match gateways.take_if(|(r, _)| Arc::ptr_eq(r, &resource))
        {
            Some((_, virt_cache)) => Box::pin(custom::sync::run_sharing(
                ctx.clone(),
                resource,
                virt_cache,
                std::mem::take(&mut gateway_referrals),
            )),
            None => Box::pin(custom::sync::run(ctx.clone(), resource)),
        };
        engines.push(run);
    }
    ctx.unsynced.store(engines.len(), Ordering::SeqCst);
    engines.extend(node_task);
    engines.extend(event_task);
    engines.extend(selector_endpoints_task);
    engines.extend(tasks);
    // Always runs: with no entries left it still deletes the replicas of removed ones.
    engines.push(Box::pin(replicated_services::run(ctx.clone())));
    if !engines.is_empty() {
        futures::future::select_all(engines).await;
    }
    Ok(())
}
