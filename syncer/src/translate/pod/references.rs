//! The ConfigMaps, Secrets and claims a pod names, found (and renamed) by one walk.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Container, PodSpec};

/// ConfigMaps and Secrets (virtual names, in the pod's namespace) a pod uses.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct References {
    pub configmaps: BTreeSet<String>,
    pub secrets: BTreeSet<String>,
}

/// Every ConfigMap and Secret `spec` refers to: volumes, projections, env and envFrom of all
/// containers, image pull secrets.
pub fn references(spec: &PodSpec) -> References {
    let (mut configmaps, mut secrets) = (BTreeSet::new(), BTreeSet::new());
    // The renaming walk with recording visitors, so the two can never disagree.
    walk_references(
        &mut spec.clone(),
        &mut |name| {
            configmaps.insert(name.clone());
        },
        &mut |name| {
            secrets.insert(name.clone());
        },
        &mut |_| {},
    );
    References {
        configmaps,
        secrets,
    }
}

/// Init containers, then containers.
pub(super) fn containers_mut(spec: &mut PodSpec) -> impl Iterator<Item = &mut Container> {
    spec.init_containers
        .iter_mut()
        .flatten()
        .chain(spec.containers.iter_mut())
}

/// Calls the visitors on every ConfigMap, Secret and PVC name in `spec`, letting them rewrite.
pub(super) fn walk_references(
    spec: &mut PodSpec,
    configmap: &mut dyn FnMut(&mut String),
    secret: &mut dyn FnMut(&mut String),
    claim: &mut dyn FnMut(&mut String),
) {
    for v in spec.volumes.iter_mut().flatten() {
        if let Some(cm) = &mut v.config_map {
            configmap(&mut cm.name);
        }
        if let Some(name) = v.secret.as_mut().and_then(|s| s.secret_name.as_mut()) {
            secret(name);
        }
        if let Some(pvc) = &mut v.persistent_volume_claim {
            claim(&mut pvc.claim_name);
        }
        if let Some(azure) = &mut v.azure_file {
            secret(&mut azure.secret_name);
        }
        let secret_refs = [
            v.csi
                .as_mut()
                .and_then(|c| c.node_publish_secret_ref.as_mut()),
            v.cephfs.as_mut().and_then(|c| c.secret_ref.as_mut()),
            v.cinder.as_mut().and_then(|c| c.secret_ref.as_mut()),
            v.flex_volume.as_mut().and_then(|c| c.secret_ref.as_mut()),
            v.iscsi.as_mut().and_then(|c| c.secret_ref.as_mut()),
            v.rbd.as_mut().and_then(|c| c.secret_ref.as_mut()),
            v.storageos.as_mut().and_then(|c| c.secret_ref.as_mut()),
        ];
        for r in secret_refs.into_iter().flatten() {
            secret(&mut r.name);
        }
        if let Some(r) = v.scale_io.as_mut().map(|c| &mut c.secret_ref) {
            secret(&mut r.name);
        }
        for source in v
            .projected
            .iter_mut()
            .flat_map(|p| p.sources.iter_mut().flatten())
        {
            if let Some(cm) = &mut source.config_map {
                configmap(&mut cm.name);
            }
            if let Some(s) = &mut source.secret {
                secret(&mut s.name);
            }
        }
    }
    let containers = containers_mut(spec);
    for c in containers {
        for env in c.env.iter_mut().flatten() {
            if let Some(from) = &mut env.value_from {
                if let Some(k) = &mut from.config_map_key_ref {
                    configmap(&mut k.name);
                }
                if let Some(k) = &mut from.secret_key_ref {
                    secret(&mut k.name);
                }
            }
        }
        for from in c.env_from.iter_mut().flatten() {
            if let Some(r) = &mut from.config_map_ref {
                configmap(&mut r.name);
            }
            if let Some(r) = &mut from.secret_ref {
                secret(&mut r.name);
            }
        }
    }
    for r in spec.image_pull_secrets.iter_mut().flatten() {
        secret(&mut r.name);
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;

    use super::super::super::test_support::*;
    use super::super::fixture::*;
    use super::*;

    /// Every ConfigMap, Secret and PVC name resolves inside the host namespace, so a tenant
    /// can never mount a host object that was not made for it.
    #[test]
    fn every_reference_is_translated() {
        let spec = host(&env());
        let v = spec.volumes.as_ref().unwrap();
        assert_eq!(v[0].config_map.as_ref().unwrap().name, "files-x-shop-x-vc");
        assert_eq!(
            v[1].secret.as_ref().unwrap().secret_name.as_deref(),
            Some("tls-x-shop-x-vc")
        );
        assert_eq!(
            v[2].persistent_volume_claim.as_ref().unwrap().claim_name,
            "data-web-0-x-shop-x-vc"
        );
        assert_eq!(
            v[3].csi
                .as_ref()
                .unwrap()
                .node_publish_secret_ref
                .as_ref()
                .unwrap()
                .name,
            "csi-creds-x-shop-x-vc"
        );
        let projected = v[4].projected.as_ref().unwrap().sources.as_ref().unwrap();
        assert_eq!(
            projected[0].config_map.as_ref().unwrap().name,
            "kube-root-ca.crt-x-shop-x-vc"
        );
        let app = &spec.containers[0];
        let env = app.env.as_ref().unwrap();
        let by_name = |n: &str| env.iter().find(|e| e.name == n).unwrap();
        let from = |n: &str| by_name(n).value_from.clone().unwrap();
        assert_eq!(
            from("A").config_map_key_ref.unwrap().name,
            "settings-x-shop-x-vc"
        );
        assert_eq!(from("B").secret_key_ref.unwrap().name, "creds-x-shop-x-vc");
        assert_eq!(
            app.env_from.as_ref().unwrap()[0]
                .config_map_ref
                .as_ref()
                .unwrap()
                .name,
            "more-settings-x-shop-x-vc"
        );
        let init = &spec.init_containers.as_ref().unwrap()[0];
        assert_eq!(
            init.env_from.as_ref().unwrap()[0]
                .secret_ref
                .as_ref()
                .unwrap()
                .name,
            "init-env-x-shop-x-vc"
        );
        assert_eq!(
            spec.image_pull_secrets.unwrap()[0].name,
            "regcred-x-shop-x-vc"
        );
    }

    /// The list of used objects drives which ConfigMaps and Secrets are synced.
    #[test]
    fn references_lists_virtual_names() {
        let pod: Pod = from_yaml(POD);
        let refs = references(pod.spec.as_ref().unwrap());
        let cms: Vec<_> = refs.configmaps.iter().map(String::as_str).collect();
        assert_eq!(
            cms,
            ["files", "kube-root-ca.crt", "more-settings", "settings"]
        );
        let secrets: Vec<_> = refs.secrets.iter().map(String::as_str).collect();
        assert_eq!(
            secrets,
            ["creds", "csi-creds", "init-env", "regcred", "tls"]
        );
    }
}
