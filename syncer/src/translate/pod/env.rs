//! What the pod's environment tells it about itself: its virtual identity through the
//! downward API, and the virtual API server as its Kubernetes service.

use k8s_openapi::api::core::v1::{Container, EnvVar, PodSpec};
use vnest_crds::meta::{
    ANNOTATION_OBJECT_NAME, ANNOTATION_OBJECT_NAMESPACE, ANNOTATION_OBJECT_UID,
};

use super::references::containers_mut;

/// Downward-API paths that would tell the pod its host identity, and the annotations that
/// carry its virtual one instead.
const DOWNWARD_REWRITES: [(&str, &str); 3] = [
    ("metadata.name", ANNOTATION_OBJECT_NAME),
    ("metadata.namespace", ANNOTATION_OBJECT_NAMESPACE),
    ("metadata.uid", ANNOTATION_OBJECT_UID),
];

fn rewrite_field_path(path: &mut String) {
    if let Some((_, annotation)) = DOWNWARD_REWRITES.iter().find(|(p, _)| p == path) {
        *path = format!("metadata.annotations['{annotation}']");
    }
}

/// Points every downward-API field reference (env, volumes, projections) at the virtual
/// name, namespace and uid, so the pod sees itself as the tenant created it.
pub(super) fn rewrite_downward_api(spec: &mut PodSpec) {
    for v in spec.volumes.iter_mut().flatten() {
        let projected = v
            .projected
            .iter_mut()
            .flat_map(|p| p.sources.iter_mut().flatten())
            .filter_map(|s| s.downward_api.as_mut())
            .flat_map(|d| d.items.iter_mut().flatten());
        let plain = v
            .downward_api
            .iter_mut()
            .flat_map(|d| d.items.iter_mut().flatten());
        for item in projected.chain(plain) {
            if let Some(f) = &mut item.field_ref {
                rewrite_field_path(&mut f.field_path);
            }
        }
    }
    let containers = containers_mut(spec);
    for env in containers.flat_map(|c| c.env.iter_mut().flatten()) {
        if let Some(f) = env.value_from.as_mut().and_then(|v| v.field_ref.as_mut()) {
            rewrite_field_path(&mut f.field_path);
        }
    }
}

/// The API server's variables (`KUBERNETES_SERVICE_*`, `KUBERNETES_PORT*`, from
/// [`super::service_env::api_server`]) pointing at the virtual API server, replacing the tenant's own.
pub(super) fn point_at_virtual_api(container: &mut Container, api_vars: &[EnvVar]) {
    let mut env = api_vars.to_vec();
    env.extend(
        container
            .env
            .take()
            .into_iter()
            .flatten()
            .filter(|e| !api_vars.iter().any(|v| v.name == e.name)),
    );
    container.env = Some(env);
}

/// The variables of the Services of the pod's namespace (`service_links`) before the
/// container's own, as the kubelet provides them: a variable the container sets itself wins,
/// and the container's `$(VAR)` references can name the others.
pub(super) fn add_service_links(container: &mut Container, service_links: &[EnvVar]) {
    if service_links.is_empty() {
        return;
    }
    let own = container.env.take().unwrap_or_default();
    let mut env: Vec<EnvVar> = service_links
        .iter()
        .filter(|v| !own.iter().any(|e| e.name == v.name))
        .cloned()
        .collect();
    env.extend(own);
    container.env = Some(env);
}

#[cfg(test)]
mod tests {
    use super::super::fixture::*;
    use super::EnvVar;

    /// In-cluster clients in the host pod talk to the virtual API server, not the host's.
    #[test]
    fn kubernetes_service_env_points_at_the_virtual_api() {
        let spec = host(&env());
        for c in spec
            .containers
            .iter()
            .chain(spec.init_containers.iter().flatten())
        {
            let env = c.env.as_ref().unwrap();
            let host_vars: Vec<_> = env
                .iter()
                .filter(|e| e.name == "KUBERNETES_SERVICE_HOST")
                .collect();
            assert_eq!(host_vars.len(), 1, "{}", c.name);
            assert_eq!(host_vars[0].value.as_deref(), Some("10.96.0.10"));
            let port = env
                .iter()
                .find(|e| e.name == "KUBERNETES_SERVICE_PORT")
                .unwrap();
            assert_eq!(port.value.as_deref(), Some("443"));
        }
    }

    /// The pod reads its virtual name and namespace through the downward API, not the host's.
    #[test]
    fn downward_api_reports_the_virtual_identity() {
        let spec = host(&env());
        let env = spec.containers[0].env.clone().unwrap();
        let ns = env.iter().find(|e| e.name == "MY_NS").unwrap();
        let path = &ns
            .value_from
            .as_ref()
            .unwrap()
            .field_ref
            .as_ref()
            .unwrap()
            .field_path;
        assert_eq!(
            path,
            "metadata.annotations['vcluster.loft.sh/object-namespace']"
        );
        let sources = projected_sources(spec);
        let item = first_downward_file(&sources[1]);
        assert_eq!(
            item.field_ref.as_ref().unwrap().field_path,
            "metadata.annotations['vcluster.loft.sh/object-namespace']"
        );
    }

    /// Every variable of the API server's Service points at the virtual API server, so none
    /// of the host kubelet's (the host API server's address) shows through.
    #[test]
    fn every_kubernetes_variable_points_at_the_virtual_api() {
        let spec = host(&env());
        let vars = spec.containers[0].env.as_ref().unwrap();
        for name in [
            "KUBERNETES_SERVICE_PORT_HTTPS",
            "KUBERNETES_PORT_443_TCP",
            "KUBERNETES_PORT_443_TCP_ADDR",
        ] {
            let var = vars.iter().find(|e| e.name == name);
            assert!(
                var.and_then(|v| v.value.as_deref())
                    .is_some_and(|v| v.contains("10.96.0.10") || v == "443"),
                "{name}: {var:?}"
            );
        }
    }

    /// The namespace's service links come before the container's own variables (so `$(VAR)`
    /// can name them), and a variable the container sets itself wins.
    #[test]
    fn service_links_come_first_and_lose_to_the_containers_own() {
        let mut links_env = env();
        links_env.service_links = vec![
            EnvVar {
                name: "DB_SERVICE_HOST".into(),
                value: Some("10.96.3.3".into()),
                value_from: None,
            },
            EnvVar {
                name: "MY_NS".into(),
                value: Some("from a service".into()),
                value_from: None,
            },
        ];
        let spec = host(&links_env);
        let vars = spec.containers[0].env.as_ref().unwrap();
        let names: Vec<&str> = vars.iter().map(|e| e.name.as_str()).collect();
        let db = names.iter().position(|n| *n == "DB_SERVICE_HOST").unwrap();
        let own = names.iter().position(|n| *n == "MY_NS").unwrap();
        assert!(db < own, "{names:?}");
        assert_eq!(names.iter().filter(|n| **n == "MY_NS").count(), 1);
        assert!(vars[own].value_from.is_some(), "the container's own MY_NS");
        assert!(
            host(&env()).containers[0]
                .env
                .as_ref()
                .unwrap()
                .iter()
                .all(|e| e.name != "DB_SERVICE_HOST")
        );
    }
}
