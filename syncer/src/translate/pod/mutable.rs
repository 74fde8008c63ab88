//! The few fields of a created pod's spec that Kubernetes lets change (container images,
//! `activeDeadlineSeconds`, added tolerations), carried from the desired host pod to its live
//! copy, so that a tenant's `kubectl set image` or deadline takes effect on the host.

use k8s_openapi::api::core::v1::{Container, PodSpec};
use serde_json::json;
use vnest_crds::digest::short_hash;

/// `actual` with the mutable fields taken from `desired` where the API server allows the
/// change: each container's and init container's image (matched by name),
/// `activeDeadlineSeconds` when `desired` sets it or lowers it (it cannot be removed or
/// raised), and the tolerations when `desired` only adds to them. `None` when `actual`
/// already agrees, so an unchanged pod costs no write.
pub fn updated_spec(actual: &PodSpec, desired: &PodSpec) -> Option<PodSpec> {
    let mut spec = actual.clone();
    take_images(&mut spec.containers, &desired.containers);
    if let Some(init) = spec.init_containers.as_mut() {
        take_images(init, desired.init_containers.as_deref().unwrap_or_default());
    }
    if let Some(deadline) = desired.active_deadline_seconds
        && actual
            .active_deadline_seconds
            .is_none_or(|now| deadline < now)
    {
        spec.active_deadline_seconds = Some(deadline);
    }
    let have = actual.tolerations.as_deref().unwrap_or_default();
    let want = desired.tolerations.as_deref().unwrap_or_default();
    if want.len() > have.len() && have.iter().all(|t| want.contains(t)) {
        spec.tolerations = desired.tolerations.clone();
    }
    (spec != *actual).then_some(spec)
}

/// A short hash of the fields [`updated_spec`] carries, as `spec` holds them: two specs with
/// the same hash need no update of one to the other.
pub fn mutable_hash(spec: &PodSpec) -> String {
    let images = |containers: &[Container]| -> Vec<(String, Option<String>)> {
        containers
            .iter()
            .map(|c| (c.name.clone(), c.image.clone()))
            .collect()
    };
    let fields = json!([
        images(&spec.containers),
        images(spec.init_containers.as_deref().unwrap_or_default()),
        spec.active_deadline_seconds,
        spec.tolerations,
    ]);
    short_hash(fields.to_string().as_bytes())
}

fn take_images(live: &mut [Container], desired: &[Container]) {
    for container in live {
        if let Some(image) = desired
            .iter()
            .find(|d| d.name == container.name)
            .and_then(|d| d.image.as_ref())
        {
            container.image = Some(image.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Toleration;

    use super::*;

    fn container(name: &str, image: &str) -> Container {
        Container {
            name: name.into(),
            image: Some(image.into()),
            ..Default::default()
        }
    }

    fn spec(images: &[(&str, &str)]) -> PodSpec {
        PodSpec {
            containers: images.iter().map(|(n, i)| container(n, i)).collect(),
            ..Default::default()
        }
    }

    fn toleration(key: &str) -> Toleration {
        Toleration {
            key: Some(key.into()),
            operator: Some("Exists".into()),
            ..Default::default()
        }
    }

    #[test]
    fn an_unchanged_pod_needs_no_update() {
        let live = PodSpec {
            active_deadline_seconds: Some(30),
            tolerations: Some(vec![toleration("a")]),
            ..spec(&[("app", "nginx:1")])
        };
        assert_eq!(updated_spec(&live, &live.clone()), None);
    }

    #[test]
    fn a_new_image_reaches_the_container_of_the_same_name_only() {
        let live = spec(&[("app", "nginx:1"), ("side", "envoy:1")]);
        let desired = spec(&[("side", "envoy:1"), ("app", "nginx:2")]);
        let updated = updated_spec(&live, &desired).expect("the image changed");
        assert_eq!(updated.containers[0].image.as_deref(), Some("nginx:2"));
        assert_eq!(updated.containers[1].image.as_deref(), Some("envoy:1"));
        assert_eq!(updated.containers[0].name, "app", "order kept");
    }

    #[test]
    fn init_container_images_follow_too() {
        let live = PodSpec {
            init_containers: Some(vec![container("setup", "busybox:1")]),
            ..spec(&[("app", "nginx:1")])
        };
        let desired = PodSpec {
            init_containers: Some(vec![container("setup", "busybox:2")]),
            ..spec(&[("app", "nginx:1")])
        };
        let updated = updated_spec(&live, &desired).unwrap();
        assert_eq!(
            updated.init_containers.unwrap()[0].image.as_deref(),
            Some("busybox:2")
        );
    }

    #[test]
    fn the_deadline_may_be_set_or_lowered_but_not_raised_or_removed() {
        let without = spec(&[("app", "nginx")]);
        let with = |s: i64| PodSpec {
            active_deadline_seconds: Some(s),
            ..without.clone()
        };
        assert_eq!(
            updated_spec(&without, &with(60))
                .unwrap()
                .active_deadline_seconds,
            Some(60)
        );
        assert_eq!(
            updated_spec(&with(60), &with(5))
                .unwrap()
                .active_deadline_seconds,
            Some(5)
        );
        assert_eq!(
            updated_spec(&with(60), &with(90)),
            None,
            "raising is refused"
        );
        assert_eq!(
            updated_spec(&with(60), &without),
            None,
            "removing is refused"
        );
    }

    #[test]
    fn tolerations_may_only_grow() {
        let with = |keys: &[&str]| PodSpec {
            tolerations: Some(keys.iter().map(|k| toleration(k)).collect()),
            ..spec(&[("app", "nginx")])
        };
        let grown = updated_spec(&with(&["a"]), &with(&["a", "b"])).unwrap();
        assert_eq!(grown.tolerations, with(&["a", "b"]).tolerations);
        assert_eq!(updated_spec(&with(&["a", "b"]), &with(&["a"])), None);
        assert_eq!(
            updated_spec(&with(&["a"]), &with(&["b", "c"])),
            None,
            "a removal among the additions is refused whole"
        );
    }

    /// Each field an update carries changes the hash; the rest of the spec does not.
    #[test]
    fn the_mutable_hash_follows_the_fields_an_update_carries_only() {
        let base = spec(&[("app", "nginx:1")]);
        let hash = mutable_hash(&base);
        let changed = [
            spec(&[("app", "nginx:2")]),
            PodSpec {
                init_containers: Some(vec![container("init", "busybox")]),
                ..base.clone()
            },
            PodSpec {
                active_deadline_seconds: Some(30),
                ..base.clone()
            },
            PodSpec {
                tolerations: Some(vec![toleration("a")]),
                ..base.clone()
            },
        ];
        for other in &changed {
            assert_ne!(mutable_hash(other), hash, "{other:?}");
        }
        let mut same = base.clone();
        same.containers[0].args = Some(vec!["--verbose".into()]);
        same.node_name = Some("node-1".into());
        assert_eq!(mutable_hash(&same), hash);
    }
}
