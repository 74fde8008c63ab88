//! Gateway API objects to the host (pure). Tenants' Gateways, HTTPRoutes, GRPCRoutes and
//! TLSRoutes are mirrored by the custom-resource machinery ([`crate::custom`]); this rewrites the references
//! in their spec to the host copies (as Ingresses get theirs), refuses the references a host
//! copy cannot keep, and brings route status back with the tenant's own parentRefs.
//!
//! All host copies share one host namespace, so a Gateway's `allowedRoutes.namespaces` becomes
//! `from: Same` there: only this virtual cluster's routes can attach to its Gateways. Whether
//! a route may attach across virtual namespaces is decided in the virtual cluster first
//! ([`attachment_refused`]). ReferenceGrants are not synced, so a reference into another
//! namespace (a backend, a certificate) is refused rather than silently granted on the host.

use serde_json::{Value, json};

use super::{Target, TranslateError};

/// The Gateway API group.
pub const GROUP: &str = "gateway.networking.k8s.io";

/// A Gateway API kind synced to the host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Gateway,
    HttpRoute,
    GrpcRoute,
    TlsRoute,
}

impl Kind {
    /// The kind whose references are translated, for resource `plural` of `group` (whether
    /// a `sync.toHost` field or a `customResources` entry asks for it).
    pub fn of(group: &str, plural: &str) -> Option<Kind> {
        match (group, plural) {
            (GROUP, "gateways") => Some(Kind::Gateway),
            (GROUP, "httproutes") => Some(Kind::HttpRoute),
            (GROUP, "grpcroutes") => Some(Kind::GrpcRoute),
            (GROUP, "tlsroutes") => Some(Kind::TlsRoute),
            _ => None,
        }
    }
}

/// A core object a translated object names in its own namespace (a Service a route sends
/// traffic to, a Secret a Gateway serves): its kind, the field naming it, and its virtual
/// namespace and name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalRef {
    pub kind: &'static str,
    pub field: String,
    pub namespace: String,
    pub name: String,
}

/// A Gateway a route attaches to: the field, and the Gateway's virtual namespace and name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParentRef {
    pub field: String,
    pub namespace: String,
    pub name: String,
    pub section: Option<String>,
}

fn refused(field: &str, why: impl Into<String>) -> TranslateError {
    TranslateError::RefNotPermitted {
        field: field.to_string(),
        why: why.into(),
    }
}

fn text<'a>(r: &'a Value, key: &str) -> Option<&'a str> {
    r.get(key).and_then(Value::as_str)
}

/// The elements of the list at `key` of `parent`, with their index.
fn items<'a>(parent: &'a mut Value, key: &str) -> impl Iterator<Item = (usize, &'a mut Value)> {
    parent
        .get_mut(key)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .enumerate()
}

/// The core-group `kind` (Secret, Service) object in `namespace` reference `r` names;
/// refuses other kinds and other namespaces.
fn local_name(
    r: &Value,
    field: &str,
    kind: &'static str,
    namespace: &str,
) -> Result<LocalRef, TranslateError> {
    let (group, actual) = (
        text(r, "group").unwrap_or(""),
        text(r, "kind").unwrap_or(kind),
    );
    if !group.is_empty() || actual != kind {
        return Err(refused(
            field,
            format!(
                "names a {actual} of group {group:?}; only core {kind}s can be translated to the host, so name a {kind}"
            ),
        ));
    }
    let name = text(r, "name")
        .ok_or_else(|| refused(field, "has no name"))?
        .to_string();
    if let Some(other) = text(r, "namespace").filter(|n| *n != namespace) {
        return Err(refused(
            field,
            format!(
                "names {kind} {other}/{name} in another namespace; ReferenceGrants are not synced, so use a {kind} in {namespace}"
            ),
        ));
    }
    Ok(LocalRef {
        kind,
        field: field.to_string(),
        namespace: namespace.to_string(),
        name,
    })
}

/// Rewrites a reference to a core-group `kind` object in `namespace` to its host copy and
/// returns what it names; refuses as [`local_name`] does.
fn local_ref(
    r: &mut Value,
    field: &str,
    kind: &'static str,
    namespace: &str,
    target: &Target,
) -> Result<LocalRef, TranslateError> {
    let named = local_name(r, field, kind, namespace)?;
    if let Some(obj) = r.as_object_mut() {
        obj.remove("namespace");
        obj.insert(
            "name".into(),
            json!(target.host_name(&named.name, namespace)),
        );
    }
    Ok(named)
}

/// The Gateway a parentRef names, as the tenant wrote it; refuses parents that are not
/// Gateways (mesh Services are not synced).
fn parent_of(r: &Value, field: &str, namespace: &str) -> Result<ParentRef, TranslateError> {
    let (group, kind) = (
        text(r, "group").unwrap_or(GROUP),
        text(r, "kind").unwrap_or("Gateway"),
    );
    if group != GROUP || kind != "Gateway" {
        return Err(refused(
            field,
            format!(
                "names a {kind} of group {group:?}; only Gateways can be parents of a synced route"
            ),
        ));
    }
    Ok(ParentRef {
        field: field.to_string(),
        namespace: text(r, "namespace").unwrap_or(namespace).to_string(),
        name: text(r, "name")
            .ok_or_else(|| refused(field, "has no name"))?
            .to_string(),
        section: text(r, "sectionName").map(String::from),
    })
}

/// The host form of one parentRef: the host Gateway's name, and the host namespace where the
/// tenant named a namespace.
fn host_parent_ref(r: &Value, parent: &ParentRef, target: &Target) -> Value {
    let mut host = r.clone();
    host["name"] = json!(target.host_name(&parent.name, &parent.namespace));
    if r.get("namespace").is_some() {
        host["namespace"] = json!(target.host_namespace);
    }
    host
}

/// The Gateways route `spec` (in `namespace`) attaches to.
pub fn parents(spec: &Value, namespace: &str) -> Result<Vec<ParentRef>, TranslateError> {
    spec.get("parentRefs")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, r)| parent_of(r, &format!("spec.parentRefs[{i}]"), namespace))
        .collect()
}

/// Rewrites the Service references of a route's filters (request mirrors); refuses
/// extension filters, whose objects have no host copy.
fn host_filters(
    holder: &mut Value,
    field: &str,
    namespace: &str,
    target: &Target,
    services: &mut Vec<LocalRef>,
) -> Result<(), TranslateError> {
    for (k, filter) in items(holder, "filters") {
        let field = format!("{field}.filters[{k}]");
        if filter.get("extensionRef").is_some() {
            return Err(refused(
                &format!("{field}.extensionRef"),
                "names an implementation object that has no host copy; remove the filter",
            ));
        }
        if let Some(r) = filter.pointer_mut("/requestMirror/backendRef") {
            let field = format!("{field}.requestMirror.backendRef");
            services.push(local_ref(r, &field, "Service", namespace, target)?);
        }
    }
    Ok(())
}

/// Rewrites route `spec` (HTTPRoute, GRPCRoute or TLSRoute, in `namespace`) for the host and
/// returns
/// the Services it sends to.
fn host_route(
    spec: &mut Value,
    namespace: &str,
    target: &Target,
) -> Result<Vec<LocalRef>, TranslateError> {
    let parents = parents(spec, namespace)?;
    for ((_, r), parent) in items(spec, "parentRefs").zip(&parents) {
        *r = host_parent_ref(r, parent, target);
    }
    let mut services = Vec::new();
    for (i, rule) in items(spec, "rules") {
        let field = format!("spec.rules[{i}]");
        host_filters(rule, &field, namespace, target, &mut services)?;
        for (j, backend) in items(rule, "backendRefs") {
            let field = format!("{field}.backendRefs[{j}]");
            let service = local_ref(backend, &field, "Service", namespace, target)?;
            host_filters(backend, &field, namespace, target, &mut services)?;
            services.push(service);
        }
    }
    Ok(services)
}

/// The fields of Gateway `spec` that name a certificate Secret, each with its JSON pointer
/// in `spec`: listener `certificateRefs`, then `tls.backend.clientCertificateRef`.
fn certificate_fields(spec: &Value) -> Vec<(String, String)> {
    let listeners = spec.get("listeners").and_then(Value::as_array);
    let mut fields: Vec<(String, String)> = listeners
        .into_iter()
        .flatten()
        .enumerate()
        .flat_map(|(i, l)| {
            let refs = l.pointer("/tls/certificateRefs").and_then(Value::as_array);
            (0..refs.map_or(0, Vec::len)).map(move |j| {
                (
                    format!("spec.listeners[{i}].tls.certificateRefs[{j}]"),
                    format!("/listeners/{i}/tls/certificateRefs/{j}"),
                )
            })
        })
        .collect();
    if spec.pointer("/tls/backend/clientCertificateRef").is_some() {
        fields.push((
            "spec.tls.backend.clientCertificateRef".into(),
            "/tls/backend/clientCertificateRef".into(),
        ));
    }
    fields
}

/// Rewrites Gateway `spec` (in `namespace`) for the host and returns the Secrets it serves:
/// certificate Secrets are the host copies, routes may attach from the host namespace only.
fn host_gateway(
    spec: &mut Value,
    namespace: &str,
    target: &Target,
) -> Result<Vec<LocalRef>, TranslateError> {
    for (field, pointer) in [
        (
            "spec.infrastructure.parametersRef",
            "/infrastructure/parametersRef",
        ),
        ("spec.tls.frontend", "/tls/frontend"),
    ] {
        if spec.pointer(pointer).is_some() {
            return Err(refused(
                field,
                "names objects (implementation parameters, CA ConfigMaps) that have no host copy; remove it",
            ));
        }
    }
    let mut secrets = Vec::new();
    for (field, pointer) in certificate_fields(spec) {
        if let Some(r) = spec.pointer_mut(&pointer) {
            secrets.push(local_ref(r, &field, "Secret", namespace, target)?);
        }
    }
    for (_, listener) in items(spec, "listeners") {
        if let Some(namespaces) = listener.pointer_mut("/allowedRoutes/namespaces") {
            *namespaces = json!({ "from": "Same" });
        }
    }
    Ok(secrets)
}

/// Rewrites the spec of `kind` object in virtual `namespace` for its host copy; returns the
/// objects it names in its namespace: the Services a route sends traffic to, the Secrets a
/// Gateway serves.
pub fn host_spec(
    kind: Kind,
    spec: &mut Value,
    namespace: &str,
    target: &Target,
) -> Result<Vec<LocalRef>, TranslateError> {
    match kind {
        Kind::Gateway => host_gateway(spec, namespace, target),
        Kind::HttpRoute | Kind::GrpcRoute | Kind::TlsRoute => host_route(spec, namespace, target),
    }
}

/// The Secrets Gateway `spec` (in `namespace`) names that could have a host copy (core
/// Secrets in its namespace), whether or not the rest of the Gateway is refused: the keys
/// the Secret sync reconciles when the Gateway changes.
pub fn certificates(spec: &Value, namespace: &str) -> Vec<LocalRef> {
    certificate_fields(spec)
        .into_iter()
        .filter_map(|(field, pointer)| {
            let r = spec.pointer(&pointer)?;
            local_name(r, &field, "Secret", namespace).ok()
        })
        .collect()
}

/// The status the virtual object shows, from its host copy's `status`: a Gateway's as it is;
/// a route's parents with the parentRefs the tenant wrote (`virt_spec`), leaving out parents
/// the tenant did not name.
pub fn virtual_status(
    kind: Kind,
    status: &Value,
    virt_spec: &Value,
    namespace: &str,
    target: &Target,
) -> Value {
    if kind == Kind::Gateway {
        return status.clone();
    }
    let virtual_refs: Vec<&Value> = virt_spec
        .get("parentRefs")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .collect();
    let back = |host_ref: &Value| -> Option<Value> {
        virtual_refs.iter().enumerate().find_map(|(i, r)| {
            let parent = parent_of(r, &format!("spec.parentRefs[{i}]"), namespace).ok()?;
            (&host_parent_ref(r, &parent, target) == host_ref).then(|| (*r).clone())
        })
    };
    let mut status = status.clone();
    if let Some(list) = status.get_mut("parents").and_then(Value::as_array_mut) {
        list.retain_mut(|p| match p.get("parentRef").and_then(back) {
            Some(r) => {
                p["parentRef"] = r;
                true
            }
            None => false,
        });
    }
    status
}

/// Why route namespace `route_ns` may not attach to Gateway `gateway` (its virtual spec, in
/// `parent.namespace`) through `parent`, per the listeners' `allowedRoutes.namespaces`;
/// `labels_match` says whether the route's namespace matches a listener's selector.
pub fn attachment_refused(
    gateway: &Value,
    parent: &ParentRef,
    route_ns: &str,
    labels_match: impl Fn(&Value) -> bool,
) -> Option<TranslateError> {
    let listeners = gateway.get("listeners").and_then(Value::as_array);
    let allowed = listeners
        .into_iter()
        .flatten()
        .filter(|l| {
            parent
                .section
                .as_deref()
                .is_none_or(|s| text(l, "name") == Some(s))
        })
        .any(|l| {
            let namespaces = l.pointer("/allowedRoutes/namespaces");
            match namespaces.and_then(|n| text(n, "from")).unwrap_or("Same") {
                "All" => true,
                "Selector" => namespaces
                    .and_then(|n| n.get("selector"))
                    .is_some_and(&labels_match),
                _ => route_ns == parent.namespace,
            }
        });
    (!allowed).then(|| {
        refused(
            &parent.field,
            format!(
                "names Gateway {}/{}, whose listeners{} do not allow routes from namespace {route_ns} (allowedRoutes.namespaces); allow it there, or move the route",
                parent.namespace,
                parent.name,
                parent.section.as_ref().map(|s| format!(" ({s})")).unwrap_or_default(),
            ),
        )
    })
}

#[cfg(test)]
#[path = "gateway_tests.rs"]
mod tests;
