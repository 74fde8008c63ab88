//! Services: the host copy asks for the virtual Service's ClusterIP where the host can give
//! it; otherwise the host allocates one and the virtual Service is recreated with it
//! (ClusterIPs are immutable). The virtual Service takes the host's node ports and shows its
//! load-balancer status.

use k8s_openapi::api::core::v1::Service;
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, Patch, PatchParams, PostParams},
};
use serde_json::json;
use vnest_crds::meta::ANNOTATION_OBJECT_UID;

use super::sync_status;
use crate::{
    engine::{Ctx, Decision, FIELD_MANAGER, Syncer},
    translate::api_service::is_api_service,
    translate::from_host::is_from_host,
    translate::service::{
        asking_for_virtual_addresses, cluster_ip_to_adopt, has_address, host_service, recreatable,
        virtual_status, with_cluster_ip, with_host_node_ports,
    },
};

pub struct Services;

/// On the host copy while its virtual Service is being recreated with the host's ClusterIP:
/// the Service to create, so a syncer killed between the delete and the create puts it back
/// on restart instead of losing the tenant's Service.
const ANNOTATION_RECREATING: &str = "vnest.dev/recreating-virtual-service";
/// Event reason when a virtual Service cannot take its host copy's node ports.
const NODE_PORT_TAKEN: &str = "NodePortTaken";

impl Services {
    /// Recreates the virtual Service with the host's ClusterIP, and points the host copy at
    /// the new virtual uid so it is not mistaken for an orphan.
    async fn adopt_cluster_ip(
        &self,
        ctx: &Ctx,
        virt: &Service,
        host: &Service,
        ip: &str,
    ) -> anyhow::Result<()> {
        let ns = virt.namespace().unwrap_or_default();
        let name = virt.name_any();
        let api: Api<Service> = Api::namespaced(ctx.virt.clone(), &ns);
        let host_api: Api<Service> = Api::namespaced(ctx.host.clone(), &ctx.target.host_namespace);
        let replacement = serde_json::to_string(&with_cluster_ip(virt, ip))?;
        ctx.metrics.count_host_write("Service");
        host_api
            .patch_metadata(
                &host.name_any(),
                &PatchParams::default(),
                &Patch::Merge(json!({ "metadata": { "annotations": { ANNOTATION_RECREATING: replacement } } })),
            )
            .await
            .map_err(|e| anyhow::anyhow!("failed to record the virtual service {ns}/{name} on its host copy: {e}"))?;
        api.delete(&name, &DeleteParams::default())
            .await
            .map_err(|e| {
                anyhow::anyhow!("failed to delete virtual service {ns}/{name} to adopt {ip}: {e}")
            })?;
        let created = create_with_cluster_ip(&api, virt, ip).await.map_err(|e| {
            anyhow::anyhow!("failed to recreate virtual service {ns}/{name} with {ip}: {e}")
        })?;
        reown(ctx, &host.name_any(), &created).await?;
        tracing::info!(namespace = %ns, name = %name, ip, manager = FIELD_MANAGER, "virtual service took over the host ClusterIP");
        Ok(())
    }
}

/// Creates deleted virtual Service `virt` anew with address `ip`. If the API server refuses,
/// puts `virt` back as it was (with a fresh address), so the tenant never loses its Service,
/// and returns the refusal.
pub(super) async fn create_with_cluster_ip(
    api: &Api<Service>,
    virt: &Service,
    ip: &str,
) -> kube::Result<Service> {
    let created = api
        .create(&PostParams::default(), &with_cluster_ip(virt, ip))
        .await;
    if created.is_err() {
        api.create(&PostParams::default(), &recreatable(virt))
            .await
            .ok();
    }
    created
}

/// Points host copy `host_name` at virtual Service `created` and drops the recreation record.
async fn reown(ctx: &Ctx, host_name: &str, created: &Service) -> anyhow::Result<()> {
    let host_api: Api<Service> = Api::namespaced(ctx.host.clone(), &ctx.target.host_namespace);
    ctx.metrics.count_host_write("Service");
    let annotations = json!({ ANNOTATION_OBJECT_UID: created.uid(), ANNOTATION_RECREATING: null });
    host_api
        .patch_metadata(
            host_name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "metadata": { "annotations": annotations } })),
        )
        .await
        .map_err(|e| anyhow::anyhow!("failed to re-own host service {host_name}: {e}"))?;
    Ok(())
}

/// Updates virtual Service `adopted` to the node ports of its host copy. A port the virtual
/// API server has given another Service is refused with a Warning event and tried again on
/// the next reconcile (that Service, taking its own host port, frees it).
async fn adopt_node_ports(ctx: &Ctx, adopted: &Service) -> anyhow::Result<()> {
    let ns = adopted.namespace().unwrap_or_default();
    let name = adopted.name_any();
    let api: Api<Service> = Api::namespaced(ctx.virt.clone(), &ns);
    match api.replace(&name, &PostParams::default(), adopted).await {
        Ok(_) => {
            tracing::info!(namespace = %ns, name = %name, "virtual service took the host node ports");
            Ok(())
        }
        Err(kube::Error::Api(e)) if e.code == 422 => {
            let note = format!(
                "the node ports of host Service {} are not free in the virtual cluster: {}",
                ctx.target.host_name(&name, &ns),
                e.message
            );
            ctx.warn(adopted, NODE_PORT_TAKEN, note).await;
            anyhow::bail!("virtual service {ns}/{name} cannot take its host node ports: {e}")
        }
        Err(e) => {
            anyhow::bail!("failed to give virtual service {ns}/{name} its host node ports: {e}")
        }
    }
}

impl Syncer for Services {
    type K = Service;
    const KIND: &'static str = "Service";

    async fn desired(&self, ctx: &Ctx, virt: &Service) -> anyhow::Result<Decision<Service>> {
        // A replica of a host Service already has the host's address, and the API server's
        // own is the control plane's host Service ([`super::api_service`]): no copy needed.
        let own = is_api_service(&virt.namespace().unwrap_or_default(), &virt.name_any());
        if is_from_host(virt) || own {
            return Ok(Decision::Skip);
        }
        Ok(Decision::Sync(host_service(virt, &ctx.target)))
    }

    /// Asks the host for the virtual Service's own address whenever the host copy gets one
    /// (created, or turned from ExternalName into a Service with an address), which spares
    /// the virtual Service's recreation.
    fn preferred_body(
        &self,
        ctx: &Ctx,
        virt: &Service,
        desired: &Service,
        actual: Option<&Service>,
    ) -> Option<Service> {
        if actual.is_some_and(has_address) {
            return None;
        }
        asking_for_virtual_addresses(desired, virt, &ctx.config.host_service_cidrs)
    }

    async fn restore_virtual(&self, ctx: &Ctx, host: &Service) -> anyhow::Result<bool> {
        let Some(record) = host.annotations().get(ANNOTATION_RECREATING) else {
            return Ok(false);
        };
        let service: Service = serde_json::from_str(record).map_err(|e| {
            anyhow::anyhow!(
                "unreadable {ANNOTATION_RECREATING} on {}: {e}",
                host.name_any()
            )
        })?;
        let ns = service.namespace().unwrap_or_default();
        let api: Api<Service> = Api::namespaced(ctx.virt.clone(), &ns);
        let created = match api.create(&PostParams::default(), &service).await {
            Ok(created) => created,
            Err(kube::Error::Api(e)) if e.code == 409 => api.get(&service.name_any()).await?,
            Err(e) => anyhow::bail!(
                "failed to put back virtual service {ns}/{}: {e}",
                service.name_any()
            ),
        };
        reown(ctx, &host.name_any(), &created).await?;
        tracing::info!(namespace = %ns, name = %service.name_any(), "virtual service put back after an interrupted recreation");
        Ok(true)
    }

    async fn back(&self, ctx: &Ctx, virt: &Service, host: &Service) -> anyhow::Result<()> {
        if let Some(ip) = cluster_ip_to_adopt(virt, host) {
            return self.adopt_cluster_ip(ctx, virt, host, &ip).await;
        }
        if let Some(adopted) = with_host_node_ports(virt, host) {
            return adopt_node_ports(ctx, &adopted).await;
        }
        sync_status(ctx, virt, virt.status.as_ref(), virtual_status(host)).await
    }
}
