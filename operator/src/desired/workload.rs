//! The control plane StatefulSet: the distro container(s) beside the syncer, one replica
//! (zero while asleep), data on the `data` claim template (PVC `data-<name>-0`).

use serde_json::{Value, json};
use vnest_crds::{
    DistroConfig, DistroKind,
    meta::{self, ChildNames},
};

use super::{
    Child, ChildKind, Input,
    network::{PROXY_PORT, SYNCER_METRICS_PORT},
};
use crate::certs;

const DATA_DIR: &str = "/data";
const CONFIG_DIR: &str = "/etc/vnest/config";
const CERTS_DIR: &str = "/etc/vnest/certs";
const DEFAULT_PERSISTENCE_SIZE: &str = "5Gi";

/// `repository:tag` from the spec, falling back to the operator's default image.
fn image(config: &DistroConfig, default: &str) -> String {
    let (default_repo, default_tag) = default.rsplit_once(':').unwrap_or((default, "latest"));
    let image = config.image.as_ref();
    let repo = image
        .and_then(|i| i.repository.as_deref())
        .unwrap_or(default_repo);
    let tag = image.and_then(|i| i.tag.as_deref()).unwrap_or(default_tag);
    format!("{repo}:{tag}")
}

fn mounts(with_certs: bool) -> Value {
    let mut mounts = vec![json!({ "name": "data", "mountPath": DATA_DIR })];
    if with_certs {
        mounts.push(json!({ "name": "certs", "mountPath": CERTS_DIR, "readOnly": true }));
    }
    json!(mounts)
}

/// k3s, as vCluster runs it: API server and controllers only, no agent or add-ons.
fn k3s(input: &Input, config: &DistroConfig) -> Vec<Value> {
    let mut args = vec![
        "server".to_string(),
        format!("--data-dir={DATA_DIR}/k3s"),
        format!("--write-kubeconfig={DATA_DIR}/k3s-config/kube-config.yaml"),
        "--disable=traefik,servicelb,metrics-server,local-storage,coredns".to_string(),
        "--disable-agent".to_string(),
        "--disable-cloud-controller".to_string(),
        "--disable-network-policy".to_string(),
        "--flannel-backend=none".to_string(),
        "--egress-selector-mode=disabled".to_string(),
        "--kube-apiserver-arg=bind-address=127.0.0.1".to_string(),
        "--kube-controller-manager-arg=controllers=*,-nodeipam,-nodelifecycle,-persistentvolume-binder,-attachdetach,-persistentvolume-expander,-cloud-node-lifecycle,-ttl".to_string(),
    ];
    args.extend(config.extra_args.iter().cloned());
    vec![json!({
        "name": "control-plane",
        "image": image(config, &input.settings.images.k3s),
        "command": ["/bin/k3s"],
        "args": args,
        "resources": control_plane_resources(input),
        "volumeMounts": mounts(false),
    })]
}

fn k0s(input: &Input, config: &DistroConfig) -> Vec<Value> {
    let mut args = vec![
        "controller".to_string(),
        format!("--data-dir={DATA_DIR}/k0s"),
        "--disable-components=konnectivity-server,kube-scheduler,csr-approver,kube-proxy,coredns,network-provider,helm,metrics-server,worker-config".to_string(),
        "--status-socket=/run/k0s/status.sock".to_string(),
    ];
    args.extend(config.extra_args.iter().cloned());
    vec![json!({
        "name": "control-plane",
        "image": image(config, &input.settings.images.k0s),
        "command": ["k0s"],
        "args": args,
        "resources": control_plane_resources(input),
        "volumeMounts": mounts(false),
    })]
}

/// Upstream Kubernetes: etcd, kube-apiserver and kube-controller-manager side by side,
/// using the virtual cluster's own CA.
fn k8s(input: &Input, config: &DistroConfig) -> Vec<Value> {
    let images = &input.settings.images;
    let mut apiserver_args = vec![
        "--bind-address=127.0.0.1".to_string(),
        "--secure-port=6443".to_string(),
        "--etcd-servers=http://127.0.0.1:2379".to_string(),
        format!("--client-ca-file={CERTS_DIR}/{}", certs::CA_CERT),
        format!("--tls-cert-file={CERTS_DIR}/{}", certs::SERVER_CERT),
        format!("--tls-private-key-file={CERTS_DIR}/{}", certs::SERVER_KEY),
        format!("--service-account-key-file={CERTS_DIR}/{}", certs::CA_KEY),
        format!(
            "--service-account-signing-key-file={CERTS_DIR}/{}",
            certs::CA_KEY
        ),
        "--service-account-issuer=https://kubernetes.default.svc".to_string(),
        "--authorization-mode=RBAC".to_string(),
    ];
    apiserver_args.extend(config.extra_args.iter().cloned());
    vec![
        json!({
            "name": "etcd",
            "image": images.etcd,
            "command": ["etcd"],
            "args": [
                format!("--data-dir={DATA_DIR}/etcd"),
                "--listen-client-urls=http://127.0.0.1:2379",
                "--advertise-client-urls=http://127.0.0.1:2379",
            ],
            "volumeMounts": mounts(false),
        }),
        json!({
            "name": "control-plane",
            "image": image(config, &images.kube_apiserver),
            "command": ["kube-apiserver"],
            "args": apiserver_args,
            "resources": control_plane_resources(input),
            "volumeMounts": mounts(true),
        }),
        json!({
            "name": "controller-manager",
            "image": images.kube_controller_manager,
            "command": ["kube-controller-manager"],
            "args": [
                format!("--kubeconfig={DATA_DIR}/admin.kubeconfig"),
                format!("--service-account-private-key-file={CERTS_DIR}/{}", certs::CA_KEY),
                format!("--root-ca-file={CERTS_DIR}/{}", certs::CA_CERT),
                "--controllers=*,-nodeipam,-nodelifecycle,-persistentvolume-binder,-attachdetach,-persistentvolume-expander,-cloud-node-lifecycle,-ttl",
            ],
            "volumeMounts": mounts(true),
        }),
    ]
}

fn control_plane_resources(input: &Input) -> Value {
    input
        .spec
        .control_plane
        .stateful_set
        .resources
        .as_ref()
        .map_or_else(
            // With limits, so a ResourceQuota on limits.* admits the pod even without a LimitRange.
        || json!({ "requests": { "cpu": "200m", "memory": "256Mi" }, "limits": { "cpu": "1", "memory": "1Gi" } }),
            |r| serde_json::to_value(r).unwrap_or_default(),
        )
}

/// Where each distro writes the admin kubeconfig the syncer uses on the shared data volume.
fn virtual_kubeconfig(kind: DistroKind) -> String {
    match kind {
        DistroKind::K3s => format!("{DATA_DIR}/k3s-config/kube-config.yaml"),
        DistroKind::K0s => format!("{DATA_DIR}/k0s/pki/admin.conf"),
        DistroKind::K8s => format!("{DATA_DIR}/admin.kubeconfig"),
    }
}

fn syncer(input: &Input, kind: DistroKind) -> Value {
    let env = |name: &str, path: &str| json!({ "name": name, "valueFrom": { "fieldRef": { "fieldPath": path } } });
    let probe = |path: &str| json!({ "httpGet": { "path": path, "port": "health" }, "periodSeconds": 10, "failureThreshold": 6 });
    json!({
        "name": "syncer",
        "image": input.settings.images.syncer,
        "args": [
            format!("--config={CONFIG_DIR}/{}", meta::SYNCER_CONFIG_KEY),
            format!("--certs-dir={CERTS_DIR}"),
            format!("--virtual-kubeconfig={}", virtual_kubeconfig(kind)),
            format!("--metrics-address=$(POD_IP):{SYNCER_METRICS_PORT}"),
            // All addresses: the Service reaches the pod IP, port-forwarding reaches loopback.
            format!("--proxy-address=0.0.0.0:{PROXY_PORT}"),
        ],
        "ports": [
            { "name": "https", "containerPort": PROXY_PORT, "protocol": "TCP" },
            { "name": "health", "containerPort": SYNCER_METRICS_PORT, "protocol": "TCP" },
        ],
        "env": [env("POD_NAME", "metadata.name"), env("POD_NAMESPACE", "metadata.namespace"), env("POD_IP", "status.podIP")],
        "readinessProbe": probe("/readyz"),
        "livenessProbe": probe("/healthz"),
        "resources": { "requests": { "cpu": "20m", "memory": "64Mi" }, "limits": { "cpu": "500m", "memory": "256Mi" } },
        "volumeMounts": [
            { "name": "data", "mountPath": DATA_DIR, "readOnly": true },
            { "name": "config", "mountPath": CONFIG_DIR, "readOnly": true },
            { "name": "certs", "mountPath": CERTS_DIR, "readOnly": true },
        ],
    })
}

fn claim_template(input: &Input) -> Value {
    let persistence = &input.spec.control_plane.stateful_set.persistence;
    let size = persistence
        .size
        .as_ref()
        .map_or(DEFAULT_PERSISTENCE_SIZE, |q| q.0.as_str());
    let mut spec = json!({ "accessModes": ["ReadWriteOnce"], "resources": { "requests": { "storage": size } } });
    if let Some(class) = &persistence.storage_class {
        spec["storageClassName"] = json!(class);
    }
    json!({ "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": { "name": "data" }, "spec": spec })
}

pub fn statefulset(input: &Input, names: &ChildNames) -> Child {
    let config = &input.spec.control_plane.stateful_set;
    let (kind, distro) = input.spec.control_plane.distro.selected();
    let mut containers = match kind {
        DistroKind::K3s => k3s(input, &distro),
        DistroKind::K0s => k0s(input, &distro),
        DistroKind::K8s => k8s(input, &distro),
    };
    containers.push(syncer(input, kind));

    let mut pod_labels = config.labels.clone();
    pod_labels.extend(input.labels("control-plane"));
    pod_labels.extend(input.pod_selector());
    let scheduling = &config.scheduling;
    let mut pod_spec = json!({
        "serviceAccountName": names.service_account,
        "terminationGracePeriodSeconds": 10,
        "enableServiceLinks": false,
        "containers": containers,
        "volumes": [
            { "name": "config", "secret": { "secretName": names.config_secret } },
            { "name": "certs", "secret": { "secretName": names.certs_secret } },
        ],
    });
    if !scheduling.node_selector.is_empty() {
        pod_spec["nodeSelector"] = json!(scheduling.node_selector);
    }
    if !scheduling.tolerations.is_empty() {
        pod_spec["tolerations"] = json!(scheduling.tolerations);
    }
    if let Some(affinity) = &scheduling.affinity {
        pod_spec["affinity"] = json!(affinity);
    }
    if let Some(class) = &scheduling.priority_class_name {
        pod_spec["priorityClassName"] = json!(class);
    }
    let mut template_metadata = json!({ "labels": pod_labels });
    if !config.annotations.is_empty() {
        template_metadata["annotations"] = json!(config.annotations);
    }

    let mut child = input.child(
        ChildKind::StatefulSet,
        &names.statefulset,
        "control-plane",
        json!({ "spec": {
            "replicas": input.replicas,
            "serviceName": names.headless_service,
            "podManagementPolicy": "Parallel",
            "selector": { "matchLabels": input.pod_selector() },
            "template": { "metadata": template_metadata, "spec": pod_spec },
            "volumeClaimTemplates": [claim_template(input)],
            "persistentVolumeClaimRetentionPolicy": { "whenDeleted": "Delete", "whenScaled": "Retain" },
        }}),
    );
    if let Some(labels) = child.object["metadata"]["labels"].as_object_mut() {
        for (k, v) in &config.labels {
            labels.entry(k.clone()).or_insert_with(|| json!(v));
        }
    }
    if !config.annotations.is_empty() {
        child.object["metadata"]["annotations"] = json!(config.annotations);
    }
    child
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::desired::test_support::*;

    fn sts(yaml: &str) -> Value {
        let spec = spec_from_yaml(yaml);
        let i = input(&spec);
        statefulset(&i, &i.names()).object
    }

    fn container<'a>(sts: &'a Value, name: &str) -> &'a Value {
        sts["spec"]["template"]["spec"]["containers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("no container {name}"))
    }

    #[test]
    fn defaults_run_pinned_k3s_beside_the_syncer() {
        let sts = sts("{}");
        let cp = container(&sts, "control-plane");
        assert_eq!(cp["image"], "rancher/k3s:v1.31.2-k3s1");
        assert_eq!(cp["args"][0], "server");
        let syncer = container(&sts, "syncer");
        assert_eq!(
            syncer["image"],
            format!(
                "ghcr.io/vnest-dev/vnest-syncer:{}",
                env!("CARGO_PKG_VERSION")
            )
        );
        assert_eq!(syncer["readinessProbe"]["httpGet"]["port"], "health");
        assert!(
            syncer["args"].as_array().unwrap().contains(&json!(
                "--virtual-kubeconfig=/data/k3s-config/kube-config.yaml"
            )),
            "{syncer}"
        );
        // The proxy on every pod address: the Service targets 8443 on the pod IP, and
        // port-forwarding (`kubectl vnest connect`) reaches it on loopback.
        assert!(
            syncer["args"]
                .as_array()
                .unwrap()
                .contains(&json!("--proxy-address=0.0.0.0:8443")),
            "{syncer}"
        );
        assert_eq!(sts["spec"]["replicas"], 1);
        assert_eq!(sts["spec"]["serviceName"], "team-alpha-headless");
        assert_eq!(
            sts["spec"]["volumeClaimTemplates"][0]["metadata"]["name"],
            "data"
        );
        assert_eq!(
            sts["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"],
            "5Gi"
        );
        let labels = &sts["spec"]["template"]["metadata"]["labels"];
        assert_eq!(labels["app"], "vcluster");
        assert_eq!(labels["release"], "team-alpha");
    }

    /// Sleeping scales to zero and keeps the data claim: waking finds the same volume.
    #[test]
    fn asleep_means_zero_replicas_and_the_claim_retained() {
        let spec = spec_from_yaml("{paused: true}");
        let mut asleep = input(&spec);
        asleep.replicas = 0;
        let sts = statefulset(&asleep, &asleep.names()).object;
        assert_eq!(sts["spec"]["replicas"], 0);
        assert_eq!(
            sts["spec"]["persistentVolumeClaimRetentionPolicy"]["whenScaled"],
            "Retain"
        );
    }

    #[test]
    fn seed_production_settings_are_carried_over() {
        let sts = sts(r#"
controlPlane:
  distro: {k3s: {enabled: true, image: {tag: v1.30.0-k3s1}, extraArgs: ["--disable=traefik"]}}
  statefulSet:
    resources: {requests: {cpu: 200m, memory: 256Mi}, limits: {cpu: "1", memory: 1Gi}}
    persistence: {size: 10Gi, storageClass: gp3}
    labels: {team: platform}
    scheduling:
      nodeSelector: {node.kubernetes.io/instance-type: m6i.large}
      tolerations: [{key: dedicated, operator: Equal, value: vcluster, effect: NoSchedule}]
"#);
        let cp = container(&sts, "control-plane");
        assert_eq!(cp["image"], "rancher/k3s:v1.30.0-k3s1");
        assert_eq!(
            cp["args"].as_array().unwrap().last().unwrap(),
            "--disable=traefik"
        );
        assert_eq!(cp["resources"]["limits"]["memory"], "1Gi");
        let claim = &sts["spec"]["volumeClaimTemplates"][0]["spec"];
        assert_eq!(claim["resources"]["requests"]["storage"], "10Gi");
        assert_eq!(claim["storageClassName"], "gp3");
        let pod = &sts["spec"]["template"]["spec"];
        assert_eq!(
            pod["nodeSelector"]["node.kubernetes.io/instance-type"],
            "m6i.large"
        );
        assert_eq!(pod["tolerations"][0]["key"], "dedicated");
        assert_eq!(
            sts["spec"]["template"]["metadata"]["labels"]["team"],
            "platform"
        );
        assert_eq!(sts["metadata"]["labels"]["team"], "platform");
    }

    #[test]
    fn k0s_and_k8s_replace_the_control_plane_container() {
        let k0s = sts("controlPlane: {distro: {k0s: {enabled: true}}}");
        assert_eq!(
            container(&k0s, "control-plane")["image"],
            "k0sproject/k0s:v1.31.2-k0s.0"
        );
        let k8s = sts("controlPlane: {distro: {k8s: {enabled: true}}}");
        assert_eq!(
            container(&k8s, "control-plane")["command"][0],
            "kube-apiserver"
        );
        container(&k8s, "etcd");
        container(&k8s, "controller-manager");
    }

    #[test]
    fn managed_labels_cannot_be_overridden_by_spec_labels() {
        let sts = sts("controlPlane: {statefulSet: {labels: {app: other, release: x}}}");
        let labels = &sts["spec"]["template"]["metadata"]["labels"];
        assert_eq!(labels["app"], "vcluster");
        assert_eq!(labels["release"], "team-alpha");
    }
}
