//! The control plane StatefulSet: the distro container(s) beside the syncer, one replica
//! (zero while asleep), data on the `data` claim template (PVC `data-<name>-0`).

use serde_json::{Value, json};
use vnest_crds::meta::{self, ChildNames};

use super::{
    CERTS_DIR, CONFIG_DIR, Child, ChildKind, DATA_DIR, Input, distro, egress,
    network::{PROXY_PORT, SYNCER_METRICS_PORT},
    secrets,
    security::{container_security_context, pod_security_context},
};

use super::DEFAULT_PERSISTENCE_SIZE;
fn syncer(input: &Input) -> Value {
    let kind = input.spec.control_plane.distro.selected().0;
    let mut args = vec![
        format!("--config={CONFIG_DIR}/{}", meta::SYNCER_CONFIG_KEY),
        format!("--certs-dir={CERTS_DIR}"),
        format!("--virtual-kubeconfig={}", distro::virtual_kubeconfig(kind)),
        format!("--metrics-address=$(POD_IP):{SYNCER_METRICS_PORT}"),
        // All addresses: the Service reaches the pod IP, port-forwarding reaches loopback.
        format!("--proxy-address=0.0.0.0:{PROXY_PORT}"),
    ];
    let mut mounts = vec![
        json!({ "name": "data", "mountPath": DATA_DIR, "readOnly": true }),
        json!({ "name": "config", "mountPath": CONFIG_DIR, "readOnly": true }),
        json!({ "name": "certs", "mountPath": CERTS_DIR, "readOnly": true }),
    ];
    if let Some(arg) = distro::syncer_kubelet_arg(kind) {
        args.push(arg);
        mounts.push(egress::mount());
    }
    let env = |name: &str, path: &str| json!({ "name": name, "valueFrom": { "fieldRef": { "fieldPath": path } } });
    let probe = |path: &str| json!({ "httpGet": { "path": path, "port": "health" }, "periodSeconds": 10, "failureThreshold": 6 });
    json!({
        "name": "syncer",
        "image": input.settings.images.syncer,
        "args": args,
        "ports": [
            { "name": "https", "containerPort": PROXY_PORT, "protocol": "TCP" },
            { "name": "health", "containerPort": SYNCER_METRICS_PORT, "protocol": "TCP" },
        ],
        "env": [env("POD_NAME", "metadata.name"), env("POD_NAMESPACE", "metadata.namespace"), env("POD_IP", "status.podIP")],
        "readinessProbe": probe("/readyz"),
        "livenessProbe": probe("/healthz"),
        "resources": { "requests": { "cpu": "20m", "memory": "64Mi" }, "limits": { "cpu": "500m", "memory": "256Mi" } },
        "volumeMounts": mounts,
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
    let control_plane = distro::control_plane(input);
    let mut containers = control_plane.containers;
    containers.push(syncer(input));
    for container in &mut containers {
        container["securityContext"] = container_security_context();
    }
    let mut volumes = vec![
        json!({ "name": "config", "secret": { "secretName": names.config_secret } }),
        json!({ "name": "certs", "secret": { "secretName": names.certs_secret } }),
        json!({ "name": "tmp", "emptyDir": {} }),
    ];
    volumes.extend(control_plane.volumes);

    let mut pod_labels = config.labels.clone();
    pod_labels.extend(input.labels("control-plane"));
    pod_labels.extend(input.runbook_labels());
    pod_labels.extend(input.control_plane_selector());
    let scheduling = &config.scheduling;
    let mut pod_spec = json!({
        "serviceAccountName": names.service_account,
        "terminationGracePeriodSeconds": 10,
        "enableServiceLinks": false,
        "securityContext": pod_security_context(),
        "containers": containers,
        "volumes": volumes,
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
    let mut pod_annotations = config.annotations.clone();
    pod_annotations.insert(
        meta::ANNOTATION_CONFIG_HASH.to_string(),
        secrets::config_hash(input),
    );
    let template_metadata = json!({ "labels": pod_labels, "annotations": pod_annotations });

    let mut child = input.child(
        ChildKind::StatefulSet,
        &names.statefulset,
        "control-plane",
        json!({ "spec": {
            "replicas": input.replicas,
            "serviceName": names.headless_service,
            "podManagementPolicy": "Parallel",
            // Still `app=vcluster,release=<name>`: a StatefulSet's selector is immutable, so
            // a new one would be refused on every existing cluster. It routes no traffic: it
            // tells the StatefulSet controller which pods are its own, and that controller
            // also wants the name `<name>-<ordinal>`, which a synced pod's `…-x-<name>` is not.
            "selector": { "matchLabels": input.runbook_labels() },
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
#[path = "workload_tests.rs"]
mod tests;
