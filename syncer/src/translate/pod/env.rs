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

/// `KUBERNETES_SERVICE_*` pointing at the virtual API server, replacing the tenant's own.
pub(super) fn point_at_virtual_api(container: &mut Container, ip: &str, port: i32) {
    const KEYS: [&str; 3] = [
        "KUBERNETES_SERVICE_HOST",
        "KUBERNETES_SERVICE_PORT",
        "KUBERNETES_PORT",
    ];
    let values = [
        ip.to_string(),
        port.to_string(),
        format!("tcp://{ip}:{port}"),
    ];
    let mut env: Vec<EnvVar> = KEYS
        .iter()
        .zip(values)
        .map(|(k, v)| EnvVar {
            name: k.to_string(),
            value: Some(v),
            ..Default::default()
        })
        .collect();
    env.extend(
        container
            .env
            .take()
            .into_iter()
            .flatten()
            .filter(|e| !KEYS.contains(&e.name.as_str())),
    );
    container.env = Some(env);
}

#[cfg(test)]
mod tests {
    use super::super::fixture::*;

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
}
