//! Which tenant requests are written through (pure): create, update and patch of a to-host
//! resource an extension API server serves. Dry runs and subresources are not.

use std::sync::Arc;

use http::Method;

use crate::custom::{Backing, Direction, Resolved};

/// What a request writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verb {
    Create,
    Update,
    Patch,
}

/// A request to write through.
#[derive(Clone)]
pub struct Write {
    pub resource: Arc<Resolved>,
    pub verb: Verb,
    pub namespace: Option<String>,
    /// Absent for a create (the name is in the body).
    pub name: Option<String>,
}

/// The resources written through: to-host, aggregated.
#[derive(Default)]
pub struct Targets(Vec<Arc<Resolved>>);

impl Targets {
    pub fn new(resolved: Vec<Arc<Resolved>>) -> Self {
        Targets(
            resolved
                .into_iter()
                .filter(|r| {
                    r.direction == Direction::ToHost
                        && matches!(r.backing, Backing::Aggregated { .. })
                })
                .collect(),
        )
    }

    /// The write `method` on `path?query` makes, if it is one to write through.
    pub fn of(&self, method: &Method, path: &str, query: Option<&str>) -> Option<Write> {
        if self.0.is_empty() || is_dry_run(query) {
            return None;
        }
        let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
        let (group, rest) = match segments.as_slice() {
            ["apis", group, _version, rest @ ..] => (*group, rest),
            _ => return None,
        };
        let (namespace, plural, name) = match rest {
            ["namespaces", ns, plural] => (Some(*ns), *plural, None),
            ["namespaces", ns, plural, name] => (Some(*ns), *plural, Some(*name)),
            [plural] => (None, *plural, None),
            [plural, name] if *plural != "namespaces" => (None, *plural, Some(*name)),
            _ => return None,
        };
        let resource = self.0.iter().find(|r| {
            r.key.group == group && r.key.plural == plural && r.namespaced == namespace.is_some()
        })?;
        let verb = match (method, name) {
            (&Method::POST, None) => Verb::Create,
            (&Method::PUT, Some(_)) => Verb::Update,
            (&Method::PATCH, Some(_)) => Verb::Patch,
            _ => return None,
        };
        Some(Write {
            resource: resource.clone(),
            verb,
            namespace: namespace.map(str::to_string),
            name: name.map(str::to_string),
        })
    }
}

fn is_dry_run(query: Option<&str>) -> bool {
    query
        .into_iter()
        .flat_map(|q| q.split('&'))
        .any(|pair| pair.split('=').next() == Some("dryRun"))
}

#[cfg(test)]
mod tests {
    use kube::discovery::ApiResource;

    use super::*;
    use crate::custom::ResourceKey;

    fn resolved(direction: Direction, backing: Backing, namespaced: bool) -> Arc<Resolved> {
        Arc::new(Resolved {
            key: ResourceKey::parse("flunders.wardle.example.com").unwrap(),
            direction,
            resource: ApiResource {
                group: "wardle.example.com".into(),
                version: "v1beta1".into(),
                api_version: "wardle.example.com/v1beta1".into(),
                kind: "Flunder".into(),
                plural: "flunders".into(),
            },
            namespaced,
            virtual_status: true,
            backing,
            queue: Default::default(),
            gateway: None,
        })
    }

    fn aggregated() -> Backing {
        Backing::Aggregated {
            api_service: "v1beta1.wardle.example.com".into(),
        }
    }

    fn targets() -> Targets {
        Targets::new(vec![resolved(Direction::ToHost, aggregated(), true)])
    }

    const COLLECTION: &str = "/apis/wardle.example.com/v1beta1/namespaces/team/flunders";
    const ONE: &str = "/apis/wardle.example.com/v1beta1/namespaces/team/flunders/f";

    #[test]
    fn create_update_and_patch_are_written_through() {
        let t = targets();
        let w = t.of(&Method::POST, COLLECTION, None).unwrap();
        assert_eq!(
            (w.verb, w.namespace.as_deref(), w.name),
            (Verb::Create, Some("team"), None)
        );
        let w = t
            .of(&Method::PUT, ONE, Some("fieldManager=kubectl"))
            .unwrap();
        assert_eq!((w.verb, w.name.as_deref()), (Verb::Update, Some("f")));
        assert_eq!(t.of(&Method::PATCH, ONE, None).unwrap().verb, Verb::Patch);
    }

    #[test]
    fn an_old_version_of_the_group_is_written_through_too() {
        let path = "/apis/wardle.example.com/v1alpha1/namespaces/team/flunders";
        assert!(targets().of(&Method::POST, path, None).is_some());
    }

    #[test]
    fn reads_deletes_dry_runs_and_subresources_are_not() {
        let t = targets();
        assert!(t.of(&Method::GET, ONE, None).is_none());
        assert!(t.of(&Method::DELETE, ONE, None).is_none());
        assert!(
            t.of(&Method::POST, COLLECTION, Some("dryRun=All"))
                .is_none()
        );
        assert!(t.of(&Method::PUT, &format!("{ONE}/status"), None).is_none());
        assert!(
            t.of(&Method::POST, ONE, None).is_none(),
            "a POST names no object"
        );
    }

    #[test]
    fn other_resources_and_directions_are_not() {
        let t = targets();
        assert!(
            t.of(
                &Method::POST,
                "/apis/wardle.example.com/v1beta1/namespaces/team/fischers",
                None
            )
            .is_none()
        );
        assert!(
            t.of(&Method::POST, "/api/v1/namespaces/team/pods", None)
                .is_none()
        );
        let from_host = Targets::new(vec![resolved(Direction::FromHost, aggregated(), true)]);
        assert!(from_host.of(&Method::POST, COLLECTION, None).is_none());
        let crd_backed = Targets::new(vec![resolved(Direction::ToHost, Backing::Crd, true)]);
        assert!(crd_backed.of(&Method::POST, COLLECTION, None).is_none());
    }

    #[test]
    fn cluster_scoped_resources_have_no_namespace_segment() {
        let t = Targets::new(vec![resolved(Direction::ToHost, aggregated(), false)]);
        let w = t
            .of(
                &Method::POST,
                "/apis/wardle.example.com/v1beta1/flunders",
                None,
            )
            .unwrap();
        assert_eq!(w.namespace, None);
        let w = t
            .of(
                &Method::PATCH,
                "/apis/wardle.example.com/v1beta1/flunders/f",
                None,
            )
            .unwrap();
        assert_eq!(w.name.as_deref(), Some("f"));
        assert!(
            t.of(&Method::POST, COLLECTION, None).is_none(),
            "scope must match"
        );
    }
}
