//! Starts one engine per enabled resource type, wiring the caches one type's decisions read
//! from another (ConfigMaps and Secrets follow the pods that use them, Endpoints follow
//! their Services and those of selector Services come back from the host, pods find the
//! virtual DNS among the host Services, virtual Nodes follow the pods bound to them, host
//! events are matched to synced pods through both pod caches).

use std::sync::{Arc, atomic::Ordering};

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{ConfigMap, Endpoints, Pod, Secret, Service, ServiceAccount};

use crate::{
    engine::{self, Ctx, Follower, Queue, Watches},
    resources::{
        configmaps::{self, ConfigMaps},
        endpoints::{self, EndpointsSyncer},
        events, nodes,
        pods::Pods,
        real_nodes,
        secrets::{self, Secrets},
        selector_endpoints,
        service_accounts::ServiceAccounts,
        services::Services,
    },
};

/// Runs every enabled engine until one ends (they only end when their watches do).
pub async fn run(ctx: Arc<Ctx>) {
    let to_host = ctx.config.sync.to_host.clone();
    let pods = Watches::<Pod>::default();
    let services = Watches::<Service>::default();
    let (virtual_pods, virtual_services, host_services) = (
        pods.virt.clone(),
        services.virt.clone(),
        services.host.clone(),
    );
    let mut engines: Vec<BoxFuture<'static, ()>> = Vec::new();
    let mut pod_followers: Vec<Follower<Pod>> = Vec::new();
    let mut service_followers: Vec<Follower<Service>> = Vec::new();
    // Without synced pods, "used by a pod" never holds: only `all` makes these useful.
    let referenced = |enabled: bool, all: bool| enabled && (to_host.pods.enabled || all);

    if referenced(to_host.configmaps.enabled, to_host.configmaps.all) {
        let queue = Queue::default();
        pod_followers.push((queue.clone(), configmaps::used_by));
        let syncer = ConfigMaps {
            pods: virtual_pods.clone(),
        };
        engines.push(Box::pin(engine::run(
            syncer,
            ctx.clone(),
            Watches::<ConfigMap>::default(),
            queue,
            vec![],
        )));
    }
    if referenced(to_host.secrets.enabled, to_host.secrets.all) {
        let queue = Queue::default();
        pod_followers.push((queue.clone(), secrets::used_by));
        let syncer = Secrets { pods: virtual_pods };
        engines.push(Box::pin(engine::run(
            syncer,
            ctx.clone(),
            Watches::<Secret>::default(),
            queue,
            vec![],
        )));
    }
    if to_host.endpoints.enabled && to_host.services.enabled {
        let queue = Queue::default();
        service_followers.push((queue.clone(), endpoints::of_service));
        let syncer = EndpointsSyncer {
            services: virtual_services,
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
        service_followers.push((queue.clone(), endpoints::of_service));
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
        engines.push(Box::pin(engine::run(
            ServiceAccounts,
            ctx.clone(),
            Watches::<ServiceAccount>::default(),
            Queue::default(),
            vec![],
        )));
    }
    // Minimal virtual Nodes, unless real ones are synced from the host.
    let mut node_task: Option<BoxFuture<'static, ()>> = None;
    if ctx.config.sync.from_host.nodes.enabled {
        let queue = Queue::default();
        pod_followers.push((queue.clone(), nodes::node_of));
        let pods = to_host.pods.enabled.then(|| pods.virt.clone());
        node_task = Some(Box::pin(real_nodes::run(ctx.clone(), pods, queue)));
    } else if to_host.pods.enabled {
        let queue = Queue::default();
        pod_followers.push((queue.clone(), nodes::node_of));
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
    if to_host.pods.enabled {
        let queue = Queue::default();
        let syncer = Pods::new(host_services, pods.host.clone(), queue.clone());
        engines.push(Box::pin(engine::run(
            syncer,
            ctx.clone(),
            pods,
            queue,
            pod_followers,
        )));
    }
    ctx.unsynced.store(engines.len(), Ordering::SeqCst);
    engines.extend(node_task);
    engines.extend(event_task);
    engines.extend(selector_endpoints_task);
    if !engines.is_empty() {
        futures::future::select_all(engines).await;
    }
}
