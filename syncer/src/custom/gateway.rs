//! Gateway API mirrors: the reference rewrite of [`crate::translate::gateway`] plus the
//! checks only the virtual cluster can answer. A route whose parent Gateway does not admit
//! its namespace is refused; a route naming a Service that does not exist is still mirrored
//! (the Service may come later, and the host's controller then reports the backend
//! unresolved), with a Warning event naming the reference; so is a Gateway naming a
//! certificate Secret that does not exist. The Secrets a Gateway serves are synced by
//! [`crate::resources::secrets`] ([`certificate_keys`], [`serves`]).

use k8s_openapi::{
    api::core::v1::{Namespace, Secret, Service},
    apimachinery::pkg::apis::meta::v1::LabelSelector,
};
use kube::{
    Api, Resource, ResourceExt,
    api::DynamicObject,
    core::{Selector, SelectorExt},
    discovery::ApiResource,
};
use serde_json::Value;

use super::resolve::Resolved;
use crate::{
    engine::{Ctx, Key},
    translate::{
        TranslateError,
        gateway::{self, Kind, LocalRef, ParentRef},
    },
};

/// The virtual cluster's Gateways (served there when their sync is on).
fn gateways() -> ApiResource {
    ApiResource {
        group: gateway::GROUP.into(),
        version: vnest_crds::GATEWAY_API_VERSION.into(),
        api_version: format!("{}/{}", gateway::GROUP, vnest_crds::GATEWAY_API_VERSION),
        kind: "Gateway".into(),
        plural: "gateways".into(),
    }
}

/// Why `parent` (a Gateway in the virtual cluster) does not admit a route of `route_ns`;
/// `None` when it does, or when there is no such Gateway to ask.
async fn refused_by_parent(
    ctx: &Ctx,
    parent: &ParentRef,
    route_ns: &str,
) -> anyhow::Result<Option<TranslateError>> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(ctx.virt.clone(), &parent.namespace, &gateways());
    let Some(gateway) = api.get_opt(&parent.name).await? else {
        return Ok(None);
    };
    let namespace = Api::<Namespace>::all(ctx.virt.clone())
        .get_opt(route_ns)
        .await?;
    let labels = namespace.map(|n| n.labels().clone()).unwrap_or_default();
    let labels_match = |selector: &Value| {
        serde_json::from_value::<LabelSelector>(selector.clone())
            .ok()
            .and_then(|s| Selector::try_from(s).ok())
            .is_some_and(|s| s.matches(&labels))
    };
    let spec = gateway.data.get("spec").cloned().unwrap_or_default();
    Ok(gateway::attachment_refused(
        &spec,
        parent,
        route_ns,
        labels_match,
    ))
}

/// Rewrites the spec of `desired` (the host mirror of `virt`, a `kind` object) for the host.
/// `Ok(Err(_))` is a refusal, for a Warning event and no mirror; `Err(_)` a failed read.
pub async fn host_spec(
    ctx: &Ctx,
    res: &Resolved,
    kind: Kind,
    virt: &DynamicObject,
    desired: &mut Value,
) -> anyhow::Result<Result<(), TranslateError>> {
    let namespace = virt.namespace().unwrap_or_default();
    let virt_spec = virt.data.get("spec").cloned().unwrap_or_default();
    if kind != Kind::Gateway {
        let parents = match gateway::parents(&virt_spec, &namespace) {
            Ok(p) => p,
            Err(e) => return Ok(Err(e)),
        };
        for parent in &parents {
            if let Some(e) = refused_by_parent(ctx, parent, &namespace).await? {
                return Ok(Err(e));
            }
        }
    }
    let Some(spec) = desired.get_mut("spec") else {
        return Ok(Ok(()));
    };
    let named = match gateway::host_spec(kind, spec, &namespace, &ctx.target) {
        Ok(n) => n,
        Err(e) => return Ok(Err(e)),
    };
    for r in named {
        if let Some((reason, note)) = missing(ctx, &r).await? {
            ctx.warn_on(virt.object_ref(&res.resource), reason, note)
                .await;
        }
    }
    Ok(Ok(()))
}

/// Why object `r` names will not serve the host copy, as an event reason and note: it does
/// not exist in the virtual cluster, or (a Secret) Secrets are not synced at all. The object
/// is still mirrored: the Service or Secret may come later.
async fn missing(ctx: &Ctx, r: &LocalRef) -> anyhow::Result<Option<(&'static str, String)>> {
    let LocalRef {
        kind,
        field,
        namespace,
        name,
    } = r;
    if *kind == "Secret" && !ctx.config.sync.to_host.secrets.enabled {
        let note = format!(
            "{field} names Secret {namespace}/{name}, which reaches the host only with sync.toHost.secrets.enabled; until then the listener has no certificate"
        );
        return Ok(Some(("CertificateNotSynced", note)));
    }
    let exists = match *kind {
        "Secret" => Api::<Secret>::namespaced(ctx.virt.clone(), namespace)
            .get_metadata_opt(name)
            .await?
            .is_some(),
        _ => Api::<Service>::namespaced(ctx.virt.clone(), namespace)
            .get_metadata_opt(name)
            .await?
            .is_some(),
    };
    Ok((!exists).then(|| match *kind {
        "Secret" => ("CertificateNotFound", format!(
            "{field} names Secret {namespace}/{name}, which does not exist in the virtual cluster; the Gateway is synced, and the listener has no certificate until the Secret exists"
        )),
        _ => ("BackendNotFound", format!(
            "{field} names Service {namespace}/{name}, which does not exist in the virtual cluster; the route is synced, and its backend stays unresolved until the Service exists"
        )),
    }))
}

/// The Secrets virtual Gateway `gateway` names, as keys for the Secret queue (including
/// those of a Gateway refused for another reference: their host copies must go).
pub fn certificate_keys(gateway: &DynamicObject) -> Vec<Key> {
    let spec = gateway.data.get("spec").cloned().unwrap_or_default();
    let namespace = gateway.namespace().unwrap_or_default();
    gateway::certificates(&spec, &namespace)
        .into_iter()
        .map(|r| (r.namespace, r.name))
        .collect()
}

/// Whether virtual Gateway `gateway` serves Secret `secret`: it names it, and its host
/// mirror is not refused.
pub fn serves(ctx: &Ctx, gateway: &DynamicObject, secret: &Key) -> bool {
    let mut spec = gateway.data.get("spec").cloned().unwrap_or_default();
    let namespace = gateway.namespace().unwrap_or_default();
    gateway::host_spec(Kind::Gateway, &mut spec, &namespace, &ctx.target).is_ok_and(|refs| {
        refs.iter()
            .any(|r| r.namespace == secret.0 && r.name == secret.1)
    })
}

/// The status the virtual object shows for its host mirror's `status`.
pub fn virtual_status(ctx: &Ctx, kind: Kind, virt: &DynamicObject, status: &Value) -> Value {
    let spec = virt.data.get("spec").cloned().unwrap_or_default();
    let namespace = virt.namespace().unwrap_or_default();
    gateway::virtual_status(kind, status, &spec, &namespace, &ctx.target)
}
