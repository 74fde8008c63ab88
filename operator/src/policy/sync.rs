//! What a VirtualClusterPolicy's `sync` bounds refuse: enabled resources, in either
//! direction, that the policy does not list.

use serde::Serialize;
use vnest_crds::{CustomResources, VirtualClusterSpec, policy::SyncBounds};

/// A refused sync field: the field, what is wrong, and what would fit.
pub struct Refusal {
    pub field: String,
    pub what: &'static str,
    pub fix: String,
}

/// Every enabled `spec.sync` resource `bounds` does not allow; a direction it leaves out is
/// not restricted.
pub fn refused(spec: &VirtualClusterSpec, bounds: &SyncBounds) -> Vec<Refusal> {
    let (to, from) = (&spec.sync.to_host, &spec.sync.from_host);
    let mut refusals = Vec::new();
    if let Some(allowed) = &bounds.to_host {
        refusals.extend(direction(
            "toHost",
            to,
            &to.custom_resources,
            &allowed.kinds,
            &allowed.custom_resources,
        ));
    }
    if let Some(allowed) = &bounds.from_host {
        refusals.extend(direction(
            "fromHost",
            from,
            &from.custom_resources,
            &allowed.kinds,
            &allowed.custom_resources,
        ));
    }
    refusals
}

/// The refusals in `spec.sync.<name>` (`sync`, whose fields are `<kind>: {enabled}`).
fn direction(
    name: &str,
    sync: &impl Serialize,
    custom: &CustomResources,
    kinds: &[impl Serialize],
    allowed_custom: &[String],
) -> Vec<Refusal> {
    let kinds: Vec<String> = kinds
        .iter()
        .filter_map(|k| serde_json::to_value(k).ok()?.as_str().map(String::from))
        .collect();
    let mut refusals = Vec::new();
    let enabled = serde_json::to_value(sync).unwrap_or_default();
    for (kind, value) in enabled.as_object().into_iter().flatten() {
        let on = value.get("enabled").and_then(serde_json::Value::as_bool) == Some(true);
        if kind != "customResources" && on && !kinds.contains(kind) {
            refusals.push(Refusal {
                field: format!("spec.sync.{name}.{kind}.enabled"),
                what: "true (enabled, perhaps by default)",
                fix: format!(
                    "set it to false; sync.{name}.kinds allows only: {}",
                    listed(&kinds)
                ),
            });
        }
    }
    for (key, _) in custom.iter().filter(|(_, s)| s.enabled) {
        if !allowed_custom.iter().any(|a| a == resource_key(key)) {
            refusals.push(Refusal {
                field: format!("spec.sync.{name}.customResources[{key}]"),
                what: "is not an allowed custom resource",
                fix: format!(
                    "remove it or disable it; sync.{name}.customResources allows only: {}",
                    listed(allowed_custom)
                ),
            });
        }
    }
    refusals
}

fn listed(allowed: &[String]) -> String {
    if allowed.is_empty() {
        "none".to_string()
    } else {
        allowed.join(", ")
    }
}

/// A `sync.*.customResources` key without its version: `flunders.wardle.example.com/v1` →
/// `flunders.wardle.example.com`.
fn resource_key(key: &str) -> &str {
    key.split_once('/').map_or(key, |(k, _)| k)
}
