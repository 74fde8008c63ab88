//! Events (`fromHost.events`): a host event about a synced host object, as the tenant sees
//! it on the virtual object: named after the virtual object, pointing at it, the host
//! object's name in the message replaced by the virtual one.

use k8s_openapi::api::core::v1::{Event, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The component name of every event the syncer itself writes (its Recorder's controller).
pub const REPORTER: &str = "vnest-syncer";

/// The virtual object a host object stands for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VirtualObject {
    pub kind: String,
    pub api_version: String,
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

/// Whether the syncer wrote `event` itself: such events are never copied, so no copy can
/// ever feed another.
pub fn is_own(event: &Event) -> bool {
    let source = event.source.as_ref().and_then(|s| s.component.as_deref());
    event.reporting_component.as_deref() == Some(REPORTER) || source == Some(REPORTER)
}

/// Name of the virtual copy of host event `host_event` about host object `host_object`:
/// the host's `<object>.<suffix>` becomes `<virtual object>.<suffix>`, so each host event
/// has exactly one copy, updated in place as its count grows.
pub fn virtual_event_name(host_event: &str, host_object: &str, virtual_object: &str) -> String {
    match host_event.strip_prefix(host_object) {
        Some(suffix) if suffix.starts_with('.') => format!("{virtual_object}{suffix}"),
        _ => {
            format!(
                "{virtual_object}.{}",
                vnest_crds::digest::short_hash(host_event.as_bytes())
            )
        }
    }
}

/// The virtual copy of `host` (about host object `host_object` in `host_namespace`) shown
/// on `virt`. Related objects are dropped: they are host objects.
pub fn virtual_event(
    host: &Event,
    host_namespace: &str,
    host_object: &str,
    virt: &VirtualObject,
) -> Event {
    let name = host.metadata.name.as_deref().unwrap_or_default();
    let message = host.message.as_ref().map(|m| {
        m.replace(
            &format!("{host_namespace}/{host_object}"),
            &format!("{}/{}", virt.namespace, virt.name),
        )
        .replace(host_object, &virt.name)
    });
    Event {
        metadata: ObjectMeta {
            name: Some(virtual_event_name(name, host_object, &virt.name)),
            namespace: Some(virt.namespace.clone()),
            ..Default::default()
        },
        involved_object: ObjectReference {
            api_version: Some(virt.api_version.clone()),
            kind: Some(virt.kind.clone()),
            namespace: Some(virt.namespace.clone()),
            name: Some(virt.name.clone()),
            uid: Some(virt.uid.clone()),
            field_path: host.involved_object.field_path.clone(),
            ..Default::default()
        },
        message,
        related: None,
        ..host.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::*;

    const HOST: &str = r#"
metadata: { name: web-0-x-shop-x-vc.17f0a1b2c3d4, namespace: host-ns, uid: h, resourceVersion: "5" }
involvedObject: { kind: Pod, apiVersion: v1, name: web-0-x-shop-x-vc, namespace: host-ns, uid: host-pod-uid, fieldPath: "spec.containers{app}" }
related: { kind: Node, name: kwok-node-0 }
reason: Scheduled
message: Successfully assigned host-ns/web-0-x-shop-x-vc to kwok-node-0
type: Normal
count: 3
source: { component: default-scheduler }
"#;

    fn virt() -> VirtualObject {
        VirtualObject {
            kind: "Pod".into(),
            api_version: "v1".into(),
            namespace: "shop".into(),
            name: "web-0".into(),
            uid: "virtual-uid".into(),
        }
    }

    /// The copy points at the virtual pod, speaks of it by its virtual name, and keeps the
    /// host's reason, type and count.
    #[test]
    fn the_copy_is_about_the_virtual_object() {
        let host: Event = from_yaml(HOST);
        let copy = virtual_event(&host, "host-ns", "web-0-x-shop-x-vc", &virt());
        assert_eq!(copy.metadata.name.as_deref(), Some("web-0.17f0a1b2c3d4"));
        assert_eq!(copy.metadata.namespace.as_deref(), Some("shop"));
        assert!(copy.metadata.uid.is_none() && copy.metadata.resource_version.is_none());
        let about = &copy.involved_object;
        assert_eq!(about.name.as_deref(), Some("web-0"));
        assert_eq!(about.namespace.as_deref(), Some("shop"));
        assert_eq!(about.uid.as_deref(), Some("virtual-uid"));
        assert_eq!(about.field_path.as_deref(), Some("spec.containers{app}"));
        assert_eq!(
            copy.message.as_deref(),
            Some("Successfully assigned shop/web-0 to kwok-node-0")
        );
        assert_eq!(copy.reason.as_deref(), Some("Scheduled"));
        assert_eq!(copy.count, Some(3));
        assert!(copy.related.is_none());
    }

    /// One host event, one stable virtual name, also when the host name has another shape.
    #[test]
    fn names_are_stable_per_host_event() {
        assert_eq!(
            virtual_event_name("p-x-a-x-vc.abc", "p-x-a-x-vc", "p"),
            "p.abc"
        );
        let odd = virtual_event_name("other-name", "p-x-a-x-vc", "p");
        assert!(odd.starts_with("p.") && odd.len() == 2 + 16, "{odd}");
        assert_eq!(odd, virtual_event_name("other-name", "p-x-a-x-vc", "p"));
    }

    /// Events the syncer wrote (by either field) are recognised, others are not.
    #[test]
    fn own_events_are_recognised() {
        let mut host: Event = from_yaml(HOST);
        assert!(!is_own(&host));
        host.reporting_component = Some(REPORTER.into());
        assert!(is_own(&host));
        let mut legacy: Event = from_yaml(HOST);
        legacy.source.as_mut().unwrap().component = Some(REPORTER.into());
        assert!(is_own(&legacy));
    }
}
