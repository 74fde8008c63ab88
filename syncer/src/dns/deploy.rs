//! The DNS objects in the virtual cluster's `kube-system` ([`objects`]), applied and removed
//! here, and the watch that tells when a tenant changed one of them.

use futures::stream;
use k8s_openapi::api::{
    apps::v1::Deployment,
    core::v1::{ConfigMap, ObjectReference, Service, ServiceAccount},
    rbac::v1::{ClusterRole, ClusterRoleBinding},
};
use kube::{
    Api, Resource,
    api::{ApiResource, DeleteParams, DynamicObject},
    runtime::watcher,
};
use serde_json::{Value, json};
use vnest_crds::{SyncerConfig, meta::LABEL_MANAGED_BY};

use super::{
    CLUSTER_ROLE, DNS_PORT, HEALTH_PORT, MANAGED_BY, METRICS_PORT, NAME, NAMESPACE, READY_PORT,
    SERVICE,
};
use crate::change;
use crate::engine::{self, Ctx, is_not_found};

fn labels() -> Value {
    json!({ LABEL_MANAGED_BY: MANAGED_BY })
}

fn pod_labels() -> Value {
    json!({ "k8s-app": SERVICE })
}

/// The DNS objects, in the order they are applied (the ServiceAccount before the Deployment
/// whose pods name it), the ConfigMap holding `corefile`.
pub fn objects(config: &SyncerConfig, corefile: &str) -> Vec<(ApiResource, Value)> {
    let deployment = &config.coredns.deployment;
    let meta = |name: &str| json!({ "name": name, "namespace": NAMESPACE, "labels": labels() });
    let cluster_meta = |name: &str| json!({ "name": name, "labels": labels() });
    vec![
        (
            ApiResource::erase::<ServiceAccount>(&()),
            json!({ "apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(NAME) }),
        ),
        (
            ApiResource::erase::<ClusterRole>(&()),
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": cluster_meta(CLUSTER_ROLE),
                "rules": [
                    { "apiGroups": [""], "resources": ["endpoints", "services", "pods", "namespaces"], "verbs": ["list", "watch"] },
                    { "apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list", "watch"] },
                ],
            }),
        ),
        (
            ApiResource::erase::<ClusterRoleBinding>(&()),
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": cluster_meta(CLUSTER_ROLE),
                "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": CLUSTER_ROLE },
                "subjects": [{ "kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE }],
            }),
        ),
        (
            ApiResource::erase::<ConfigMap>(&()),
            json!({
                "apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(NAME),
                "data": { "Corefile": corefile },
            }),
        ),
        (
            ApiResource::erase::<Deployment>(&()),
            json!({
                "apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta(NAME),
                "spec": {
                    "replicas": deployment.replicas,
                    "selector": { "matchLabels": pod_labels() },
                    "strategy": { "type": "RollingUpdate", "rollingUpdate": { "maxUnavailable": 1 } },
                    "template": {
                        "metadata": { "labels": pod_labels() },
                        "spec": {
                            "serviceAccountName": NAME,
                            // Upstream lookups go to the node's resolver, not to itself.
                            "dnsPolicy": "Default",
                            "nodeSelector": deployment.node_selector,
                            "tolerations": deployment.tolerations,
                            "securityContext": {
                                "runAsNonRoot": true, "runAsUser": 65532, "runAsGroup": 65532,
                                "seccompProfile": { "type": "RuntimeDefault" },
                            },
                            "containers": [{
                                "name": NAME,
                                "image": deployment.image(),
                                "imagePullPolicy": "IfNotPresent",
                                "args": ["-conf", "/etc/coredns/Corefile"],
                                "ports": [
                                    { "name": "dns", "containerPort": DNS_PORT, "protocol": "UDP" },
                                    { "name": "dns-tcp", "containerPort": DNS_PORT, "protocol": "TCP" },
                                    { "name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP" },
                                ],
                                "livenessProbe": {
                                    "httpGet": { "path": "/health", "port": HEALTH_PORT },
                                    "initialDelaySeconds": 60, "timeoutSeconds": 5, "failureThreshold": 5,
                                },
                                "readinessProbe": {
                                    "httpGet": { "path": "/ready", "port": READY_PORT },
                                    "periodSeconds": 2,
                                },
                                "resources": {
                                    "requests": { "cpu": "20m", "memory": "32Mi" },
                                    "limits": { "cpu": "500m", "memory": "170Mi" },
                                },
                                "securityContext": {
                                    "allowPrivilegeEscalation": false,
                                    "readOnlyRootFilesystem": true,
                                    "capabilities": { "drop": ["ALL"] },
                                },
                                "volumeMounts": [{ "name": "config", "mountPath": "/etc/coredns", "readOnly": true }],
                            }],
                            "volumes": [{
                                "name": "config",
                                "configMap": { "name": NAME, "items": [{ "key": "Corefile", "path": "Corefile" }] },
                            }],
                        },
                    },
                },
            }),
        ),
        (
            ApiResource::erase::<Service>(&()),
            json!({
                "apiVersion": "v1", "kind": "Service",
                "metadata": {
                    "name": SERVICE, "namespace": NAMESPACE,
                    "labels": { LABEL_MANAGED_BY: MANAGED_BY, "k8s-app": SERVICE, "kubernetes.io/name": "CoreDNS" },
                },
                "spec": {
                    "selector": pod_labels(),
                    "ports": [
                        { "name": "dns", "port": 53, "targetPort": DNS_PORT, "protocol": "UDP" },
                        { "name": "dns-tcp", "port": 53, "targetPort": DNS_PORT, "protocol": "TCP" },
                        { "name": "metrics", "port": METRICS_PORT, "targetPort": METRICS_PORT, "protocol": "TCP" },
                    ],
                },
            }),
        ),
    ]
}

fn api(ctx: &Ctx, resource: &ApiResource, namespaced: bool) -> Api<DynamicObject> {
    if namespaced {
        Api::namespaced_with(ctx.virt.clone(), NAMESPACE, resource)
    } else {
        Api::all_with(ctx.virt.clone(), resource)
    }
}

/// Applies every DNS object (server-side, forced: vnest owns these fields); returns the
/// ConfigMap's reference, which the entries' events are about.
pub async fn apply(ctx: &Ctx, corefile: &str) -> anyhow::Result<ObjectReference> {
    let mut config_map = ObjectReference::default();
    for (resource, object) in objects(&ctx.config, corefile) {
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        let namespaced = object["metadata"].get("namespace").is_some();
        let object: DynamicObject = serde_json::from_value(object.clone())?;
        let applied = engine::apply(&api(ctx, &resource, namespaced), name, &object)
            .await
            .map_err(|e| {
                anyhow::anyhow!("failed to apply virtual {} {name}: {e}", resource.kind)
            })?;
        if resource.kind == "ConfigMap" {
            config_map = applied.object_ref(&resource);
        }
    }
    Ok(config_map)
}

/// Deletes the DNS objects vnest made (`controlPlane.coredns.enabled: false`); a tenant's own
/// object of the same name is left alone.
pub async fn remove(ctx: &Ctx) -> anyhow::Result<()> {
    for (resource, object) in objects(&ctx.config, "").into_iter().rev() {
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        let api = api(
            ctx,
            &resource,
            object["metadata"].get("namespace").is_some(),
        );
        let ours = api.get_opt(name).await?.is_some_and(|o| {
            o.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(LABEL_MANAGED_BY))
                .is_some_and(|m| m == MANAGED_BY)
        });
        if ours {
            match api.delete(name, &DeleteParams::default()).await {
                Ok(_) => tracing::info!(kind = %resource.kind, name, "deleted virtual DNS object"),
                Err(e) if is_not_found(&e) => {}
                Err(e) => anyhow::bail!("failed to delete virtual {} {name}: {e}", resource.kind),
            }
        }
    }
    Ok(())
}

/// A watch of every `K` carrying the DNS objects' label (cluster-wide: one code path for
/// namespaced and cluster-scoped kinds; only vnest's objects carry it), as a stream of
/// "something changed".
pub fn changes<K>(ctx: &Ctx) -> stream::BoxStream<'static, ()>
where
    K: Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + 'static,
{
    let config = watcher::Config::default().labels(&format!("{LABEL_MANAGED_BY}={MANAGED_BY}"));
    change::changes(Api::<K>::all(ctx.virt.clone()), config, "DNS")
}

#[cfg(test)]
mod tests {
    use super::*;
    use vnest_crds::VirtualClusterSpec;

    fn config(yaml: &str) -> SyncerConfig {
        let spec: VirtualClusterSpec = serde_yaml::from_str(yaml).unwrap();
        SyncerConfig::from_spec("team-a", "vc", &spec)
    }

    fn find<'a>(objects: &'a [(ApiResource, Value)], kind: &str) -> &'a Value {
        &objects.iter().find(|(r, _)| r.kind == kind).unwrap().1
    }

    /// The ConfigMap carries the Corefile it is given, which the pod mounts as its config.
    #[test]
    fn the_config_map_carries_the_corefile_the_pod_reads() {
        let objects = super::objects(&config("{}"), "example.com:1053 {}\n");
        assert_eq!(
            find(&objects, "ConfigMap")["data"]["Corefile"],
            "example.com:1053 {}\n"
        );
        let pod = &find(&objects, "Deployment")["spec"]["template"]["spec"];
        assert_eq!(pod["volumes"][0]["configMap"]["name"], "coredns");
        assert_eq!(
            pod["containers"][0]["args"],
            json!(["-conf", "/etc/coredns/Corefile"])
        );
    }

    /// `kube-dns` answers on 53 and reaches the pod on its unprivileged port.
    #[test]
    fn kube_dns_maps_port_53_to_the_pods_port() {
        let objects = super::objects(&config("{}"), "");
        let service = find(&objects, "Service");
        assert_eq!(service["metadata"]["namespace"], "kube-system");
        assert_eq!(service["metadata"]["name"], "kube-dns");
        assert_eq!(service["spec"]["ports"][0]["port"], 53);
        assert_eq!(service["spec"]["ports"][0]["targetPort"], DNS_PORT);
        assert_eq!(service["spec"]["selector"]["k8s-app"], "kube-dns");
    }

    /// The default image is the public CoreDNS image; the spec overrides it and places the
    /// pods. The pod resolves upstream through its node, never through itself.
    #[test]
    fn the_deployment_takes_image_and_placement_from_the_spec() {
        let objects = super::objects(&config("{}"), "");
        let pod = &find(&objects, "Deployment")["spec"]["template"]["spec"];
        assert_eq!(
            pod["containers"][0]["image"],
            vnest_crds::DEFAULT_COREDNS_IMAGE
        );
        assert_eq!(pod["dnsPolicy"], "Default");
        assert_eq!(pod["serviceAccountName"], "coredns");
        let objects = super::objects(
            &config(
                "controlPlane: {coredns: {deployment: {image: 'local/coredns:dev', replicas: 2, nodeSelector: {disk: ssd}, tolerations: [{key: k, operator: Exists}]}}}",
            ),
            "",
        );
        let deployment = find(&objects, "Deployment");
        let pod = &deployment["spec"]["template"]["spec"];
        assert_eq!(deployment["spec"]["replicas"], 2);
        assert_eq!(pod["containers"][0]["image"], "local/coredns:dev");
        assert_eq!(pod["nodeSelector"]["disk"], "ssd");
        assert_eq!(pod["tolerations"][0]["key"], "k");
    }

    /// Every object parses as the kind it claims (what the apply sends), and the
    /// ServiceAccount comes before the Deployment that names it.
    #[test]
    fn objects_are_valid_and_ordered() {
        let objects = super::objects(&config("{}"), "");
        let kinds: Vec<&str> = objects.iter().map(|(r, _)| r.kind.as_str()).collect();
        let position = |k: &str| kinds.iter().position(|x| *x == k).unwrap();
        assert!(position("ServiceAccount") < position("Deployment"));
        for (resource, object) in &objects {
            assert_eq!(object["kind"], resource.kind.as_str());
        }
        let _: Deployment = serde_json::from_value(find(&objects, "Deployment").clone()).unwrap();
        let _: Service = serde_json::from_value(find(&objects, "Service").clone()).unwrap();
        let _: ClusterRole = serde_json::from_value(find(&objects, "ClusterRole").clone()).unwrap();
    }
}
