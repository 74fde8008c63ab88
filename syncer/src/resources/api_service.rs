//! Keeps the virtual `default/kubernetes` Service pointing at the control plane
//! ([`crate::translate::api_service`]): the host Service's ClusterIP, so
//! `kubernetes.default.svc` reaches the API server as `KUBERNETES_SERVICE_HOST` does, and
//! Endpoints and an EndpointSlice naming the control-plane pods.

use std::{sync::Arc, time::Duration};

use futures::stream;
use k8s_openapi::api::{
    core::v1::{Endpoints, Service},
    discovery::v1::EndpointSlice,
};
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, Preconditions},
    runtime::watcher,
};

use super::services::create_with_cluster_ip;
use crate::{
    change::{changes, next_or_after},
    engine::{self, Ctx, FIELD_MANAGER},
    translate::api_service::{
        NAME, NAMESPACE, address_to_adopt, virtual_endpoint_slice, virtual_endpoints,
    },
};

/// Event reason when the virtual API server cannot give its Service the host's address.
const ADDRESS_REFUSED: &str = "APIServiceAddressRefused";
/// How long after a change the objects are brought up to date: the API server recreates its
/// Service within 10 s of it going, so a burst settles first.
const SETTLE: Duration = Duration::from_secs(1);
const RESYNC: Duration = Duration::from_secs(300);
const RETRY: Duration = Duration::from_secs(5);

/// Changes to one named object: `name` in `namespace` of `client`.
fn changes_of<K>(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> stream::BoxStream<'static, ()>
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + 'static,
{
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    changes(
        Api::<K>::namespaced(client.clone(), namespace),
        config,
        "API Service",
    )
}

/// Recreates virtual Service `virt` with address `ip`; on a refusal (the address lies outside
/// the virtual Service range) puts it back as it was and returns `Ok(false)`.
async fn adopt(ctx: &Ctx, virt: &Service, ip: &str) -> anyhow::Result<bool> {
    let api: Api<Service> = Api::namespaced(ctx.virt.clone(), NAMESPACE);
    let only_this = DeleteParams {
        preconditions: Some(Preconditions {
            uid: virt.uid(),
            resource_version: None,
        }),
        ..Default::default()
    };
    api.delete(NAME, &only_this).await?;
    match create_with_cluster_ip(&api, virt, ip).await {
        Ok(_) => {
            tracing::info!(
                ip,
                "virtual kubernetes Service took the host Service's address"
            );
            Ok(true)
        }
        // The API server put its own back first; the next pass tries again.
        Err(kube::Error::Api(e)) if e.code == 409 => {
            anyhow::bail!("the API server recreated the kubernetes Service first")
        }
        Err(kube::Error::Api(e)) if e.code == 422 => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// One pass: the virtual Service's address, then its Endpoints and EndpointSlice. Returns the
/// address the virtual API server refused, if it did; `refused`, refused before, is not asked
/// for again.
async fn apply(ctx: &Ctx, refused: Option<String>) -> anyhow::Result<Option<String>> {
    let host_namespace = &ctx.target.host_namespace;
    let service_name = &ctx.config.service_name;
    let control_plane: Service = Api::namespaced(ctx.host.clone(), host_namespace)
        .get(service_name)
        .await?;
    let host_endpoints: Endpoints = Api::namespaced(ctx.host.clone(), host_namespace)
        .get(service_name)
        .await?;
    // The API server creates its Service soon after it starts and within 10 s of it going;
    // the watch on it brings the next pass.
    let Some(virt) = Api::<Service>::namespaced(ctx.virt.clone(), NAMESPACE)
        .get_opt(NAME)
        .await?
    else {
        tracing::debug!("the virtual API server has not made its kubernetes Service yet");
        return Ok(refused);
    };
    let mut refused_now = None;
    if let Some(ip) = address_to_adopt(&virt, &control_plane) {
        let refused_before = refused.as_ref() == Some(&ip);
        if refused_before || !adopt(ctx, &virt, &ip).await? {
            if !refused_before {
                let note = format!(
                    "the virtual API server refused address {ip}, the ClusterIP of host Service \
                     {host_namespace}/{service_name} that tenant pods reach the API at, so \
                     kubernetes.default.svc does not reach it; run the operator with \
                     --service-cidr set to the host's Service range"
                );
                tracing::warn!("{note}");
                ctx.warn(&virt, ADDRESS_REFUSED, note).await;
            }
            refused_now = Some(ip);
        }
    }
    let endpoints = virtual_endpoints(&host_endpoints, &virt);
    let slice = virtual_endpoint_slice(&endpoints, FIELD_MANAGER);
    // Read before writing, so a pass with nothing to change writes nothing.
    let endpoints_api: Api<Endpoints> = Api::namespaced(ctx.virt.clone(), NAMESPACE);
    let actual = endpoints_api.get_opt(NAME).await?;
    if actual.is_none_or(|a| a.subsets != endpoints.subsets || a.labels() != endpoints.labels()) {
        engine::apply(&endpoints_api, NAME, &endpoints).await?;
    }
    let slices: Api<EndpointSlice> = Api::namespaced(ctx.virt.clone(), NAMESPACE);
    let actual = slices.get_opt(NAME).await?;
    if actual.is_none_or(|a| {
        a.endpoints != slice.endpoints
            || a.ports != slice.ports
            || a.address_type != slice.address_type
            || a.labels() != slice.labels()
    }) {
        engine::apply(&slices, NAME, &slice).await?;
    }
    Ok(refused_now)
}

/// Keeps the virtual `kubernetes` Service, its Endpoints and EndpointSlice pointing at the
/// control plane until the process ends: at start, whenever one of them or the host Service
/// and Endpoints of the control plane change, and every [`RESYNC`].
pub async fn run(ctx: Arc<Ctx>) {
    let host_namespace = &ctx.target.host_namespace;
    let service_name = &ctx.config.service_name;
    let mut changed = stream::select_all([
        changes_of::<Service>(&ctx.host, host_namespace, service_name),
        changes_of::<Endpoints>(&ctx.host, host_namespace, service_name),
        changes_of::<Service>(&ctx.virt, NAMESPACE, NAME),
        changes_of::<Endpoints>(&ctx.virt, NAMESPACE, NAME),
        changes_of::<EndpointSlice>(&ctx.virt, NAMESPACE, NAME),
    ]);
    let mut refused = None;
    loop {
        let wait = match apply(&ctx, refused.clone()).await {
            Ok(now) => {
                refused = now;
                RESYNC
            }
            Err(e) => {
                tracing::warn!(
                    error = format!("{e:#}"),
                    "pointing the virtual kubernetes Service at the control plane failed; retrying"
                );
                RETRY
            }
        };
        next_or_after(&mut changed, wait, SETTLE).await;
    }
}
