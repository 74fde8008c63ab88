//! Endpoints of selector-less virtual Services (the tenant maintains them) go to the host;
//! those of selector Services are the host's endpoints controller's business.

use k8s_openapi::api::core::v1::{Endpoints, Service};
use kube::{ResourceExt, runtime::reflector::ObjectRef};

use crate::{
    cache::Cache,
    engine::{Ctx, Decision, Key, Syncer},
    translate::{api_service::is_api_service, endpoints::host_endpoints},
};

pub struct EndpointsSyncer {
    /// Virtual Services, to tell selector-less ones.
    pub services: Cache<Service>,
}

/// A Service change may change whether its Endpoints sync.
pub fn of_service(svc: &Service) -> Vec<Key> {
    vec![(svc.namespace().unwrap_or_default(), svc.name_any())]
}

impl Syncer for EndpointsSyncer {
    type K = Endpoints;
    const KIND: &'static str = "Endpoints";

    async fn desired(&self, ctx: &Ctx, virt: &Endpoints) -> anyhow::Result<Decision<Endpoints>> {
        self.services.wait_until_ready().await?;
        let svc = self
            .services
            .get(&ObjectRef::new(&virt.name_any()).within(&virt.namespace().unwrap_or_default()));
        let selectorless = svc.is_some_and(|s| {
            s.spec
                .as_ref()
                .and_then(|s| s.selector.as_ref())
                .is_none_or(|sel| sel.is_empty())
        });
        // The API server's own are the syncer's, pointing at the control plane.
        let own = is_api_service(&virt.namespace().unwrap_or_default(), &virt.name_any());
        Ok(if selectorless && !own {
            Decision::Sync(host_endpoints(virt, &ctx.target))
        } else {
            Decision::Skip
        })
    }
}
