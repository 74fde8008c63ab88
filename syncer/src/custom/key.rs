//! Which custom resources a syncer syncs, in which direction: the configured
//! `<plural>.<group>[/<version>]` keys, parsed.

use vnest_crds::{CustomResources, GATEWAY_API_GROUP, GATEWAY_API_VERSION, ResourceScope, Sync};

/// One configured custom resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceKey {
    pub plural: String,
    pub group: String,
    /// The version to sync; the host's preferred version when absent.
    pub version: Option<String>,
}

impl ResourceKey {
    /// Parses `<plural>.<group>` or `<plural>.<group>/<version>` (the CRD's CEL rule already
    /// refuses other shapes; this names the key when one slips through).
    pub fn parse(key: &str) -> Result<Self, String> {
        let (resource, version) = match key.split_once('/') {
            Some((resource, version)) => (resource, Some(version.to_string())),
            None => (key, None),
        };
        let (plural, group) = resource.split_once('.').ok_or_else(|| {
            format!("customResources key {key:?}: must be <plural>.<group>[/<version>], e.g. flunders.wardle.example.com")
        })?;
        if plural.is_empty() || group.is_empty() || version.as_deref() == Some("") {
            return Err(format!(
                "customResources key {key:?}: plural, group and version must not be empty"
            ));
        }
        Ok(ResourceKey {
            plural: plural.to_string(),
            group: group.to_string(),
            version,
        })
    }

    /// `<plural>.<group>`: the CRD name, and the `resource` label of metrics and logs.
    pub fn resource(&self) -> String {
        format!("{}.{}", self.plural, self.group)
    }
}

/// Direction of a custom resource's sync.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// The tenant owns the objects; they are mirrored to the host namespace.
    ToHost,
    /// The host owns the objects; the tenant gets read-only copies.
    FromHost,
}

/// The Gateway API resources their own `sync` fields switch on, as keys (version v1).
fn gateway_api(plurals: Vec<&str>) -> Vec<ResourceKey> {
    plurals
        .into_iter()
        .map(|plural| ResourceKey {
            plural: plural.to_string(),
            group: GATEWAY_API_GROUP.to_string(),
            version: Some(GATEWAY_API_VERSION.to_string()),
        })
        .collect()
}

/// The enabled keys of both directions, the Gateway API fields' included (a resource also
/// listed in `customResources` is synced once, as that entry asks). A resource enabled in
/// both directions is synced to the host only (the operator refuses such a spec; this is the
/// syncer's own guard).
pub fn enabled(sync: &Sync) -> Result<Vec<(ResourceKey, Direction)>, String> {
    let parse_enabled = |resources: &CustomResources| -> Result<Vec<ResourceKey>, String> {
        resources
            .iter()
            .filter(|(_, entry)| entry.enabled)
            .map(|(key, _)| ResourceKey::parse(key))
            .collect()
    };
    let (gateway_to_host, gateway_from_host) = sync.gateway_api();
    let mut to_host = parse_enabled(&sync.to_host.custom_resources)?;
    to_host.extend(gateway_api(gateway_to_host));
    let mut from_host = parse_enabled(&sync.from_host.custom_resources)?;
    from_host.extend(gateway_api(gateway_from_host));
    let mut keys: Vec<(ResourceKey, Direction)> = Vec::new();
    let listed = |keys: &[(ResourceKey, Direction)], key: &ResourceKey| {
        keys.iter()
            .find(|(k, _)| k.resource() == key.resource())
            .map(|(_, d)| *d)
    };
    for key in to_host {
        if listed(&keys, &key).is_none() {
            keys.push((key, Direction::ToHost));
        }
    }
    for key in from_host {
        match listed(&keys, &key) {
            None => keys.push((key, Direction::FromHost)),
            Some(Direction::ToHost) => tracing::warn!(
                resource = key.resource(),
                "also configured for to-host sync; skipping its from-host sync"
            ),
            Some(Direction::FromHost) => {}
        }
    }
    Ok(keys)
}

/// The scope the `customResources` entry of `key` in `direction` declares, if any (the
/// Gateway API fields declare none).
pub fn declared_scope(
    sync: &Sync,
    key: &ResourceKey,
    direction: Direction,
) -> Option<ResourceScope> {
    let entries = match direction {
        Direction::ToHost => &sync.to_host.custom_resources,
        Direction::FromHost => &sync.from_host.custom_resources,
    };
    entries
        .iter()
        .find(|(k, _)| ResourceKey::parse(k).is_ok_and(|k| k.resource() == key.resource()))
        .and_then(|(_, entry)| entry.scope)
}

/// Why a declared scope contradicts the host's (`namespaced`), if it does: the operator grants
/// the syncer its to-host rights by the declared scope, and a wrong one in either direction
/// is a spec mistake better named than synced around.
pub fn scope_mismatch(
    key: &ResourceKey,
    direction: Direction,
    declared: Option<ResourceScope>,
    namespaced: bool,
) -> Option<String> {
    let served = if namespaced {
        ResourceScope::Namespaced
    } else {
        ResourceScope::Cluster
    };
    let declared = declared.filter(|d| *d != served)?;
    let field = match direction {
        Direction::ToHost => "toHost",
        Direction::FromHost => "fromHost",
    };
    Some(format!(
        "spec.sync.{field}.customResources[{}].scope: {declared:?}, but the host serves {} \
         {served:?}; set scope: {served:?} or remove it (the host's discovery decides then)",
        key.resource(),
        key.resource(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sync(yaml: &str) -> Sync {
        serde_yaml::from_str(yaml).unwrap()
    }

    #[test]
    fn a_key_names_plural_group_and_maybe_version() {
        let k = ResourceKey::parse("flunders.wardle.example.com/v1beta1").unwrap();
        assert_eq!(k.plural, "flunders");
        assert_eq!(k.group, "wardle.example.com");
        assert_eq!(k.version.as_deref(), Some("v1beta1"));
        assert_eq!(k.resource(), "flunders.wardle.example.com");
        let k = ResourceKey::parse("certificates.cert-manager.io").unwrap();
        assert_eq!(k.version, None);
    }

    #[test]
    fn a_key_without_a_group_or_with_an_empty_version_is_refused_by_name() {
        let e = ResourceKey::parse("flunders").unwrap_err();
        assert!(
            e.contains("\"flunders\"") && e.contains("<plural>.<group>"),
            "{e}"
        );
        let e = ResourceKey::parse("flunders.wardle.example.com/").unwrap_err();
        assert!(e.contains("must not be empty"), "{e}");
    }

    #[test]
    fn disabled_entries_are_not_synced() {
        let s = sync(
            "toHost: {customResources: {a.example.com: {enabled: false}, b.example.com: {enabled: true}}}",
        );
        let keys = enabled(&s).unwrap();
        assert_eq!(keys.len(), 1);
        assert_eq!(keys[0].0.resource(), "b.example.com");
        assert_eq!(keys[0].1, Direction::ToHost);
    }

    /// The Gateway API fields become v1 keys of their group; one also listed in
    /// customResources is synced once, as that entry asks.
    #[test]
    fn gateway_api_fields_are_keys_of_their_group() {
        let s = sync(
            "{toHost: {gateways: {enabled: true}, grpcRoutes: {enabled: true}, tlsRoutes: {enabled: true}, customResources: {gateways.gateway.networking.k8s.io/v1beta1: {enabled: true}}}, fromHost: {gatewayClasses: {enabled: true}}}",
        );
        let got: Vec<(String, Option<String>, Direction)> = enabled(&s)
            .unwrap()
            .into_iter()
            .map(|(k, d)| (k.resource(), k.version, d))
            .collect();
        let key = |p: &str, v: &str, d| {
            (
                format!("{p}.gateway.networking.k8s.io"),
                Some(v.to_string()),
                d,
            )
        };
        assert_eq!(
            got,
            vec![
                key("gateways", "v1beta1", Direction::ToHost),
                key("grpcroutes", "v1", Direction::ToHost),
                key("tlsroutes", "v1", Direction::ToHost),
                key("gatewayclasses", "v1", Direction::FromHost),
            ]
        );
    }

    #[test]
    fn a_resource_in_both_directions_syncs_to_the_host_only() {
        let s = sync(
            "{toHost: {customResources: {a.example.com: {enabled: true}}}, fromHost: {customResources: {a.example.com/v1: {enabled: true}, c.example.com: {enabled: true}}}}",
        );
        let keys = enabled(&s).unwrap();
        let got: Vec<(String, Direction)> = keys.iter().map(|(k, d)| (k.resource(), *d)).collect();
        assert_eq!(
            got,
            vec![
                ("a.example.com".to_string(), Direction::ToHost),
                ("c.example.com".to_string(), Direction::FromHost)
            ]
        );
    }

    /// A declared scope is read: one that contradicts the host names the entry and the fix;
    /// one that agrees, or none, passes.
    #[test]
    fn a_declared_scope_must_match_the_hosts() {
        let s = sync("fromHost: {customResources: {gadgets.example.com/v1: {scope: Cluster}}}");
        let key = ResourceKey::parse("gadgets.example.com").unwrap();
        let declared = declared_scope(&s, &key, Direction::FromHost);
        assert_eq!(declared, Some(ResourceScope::Cluster));
        assert_eq!(declared_scope(&s, &key, Direction::ToHost), None);
        let e = scope_mismatch(&key, Direction::FromHost, declared, true).unwrap();
        assert!(
            e.starts_with("spec.sync.fromHost.customResources[gadgets.example.com].scope: Cluster")
                && e.contains("set scope: Namespaced"),
            "{e}"
        );
        assert_eq!(
            scope_mismatch(&key, Direction::FromHost, declared, false),
            None
        );
        assert_eq!(scope_mismatch(&key, Direction::ToHost, None, true), None);
    }
}
