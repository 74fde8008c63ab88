//! The control-plane containers of each distribution, the scratch volumes they write to, and
//! the files they read from `vc-config-<name>`. Every path they write is a mounted volume, so
//! all run with a read-only root filesystem as uid 65532 (see `workload`).

use k8s_openapi::api::core::v1::EnvVar;
use serde_json::{Value, json};
use vnest_crds::{DistroConfig, DistroKind, StoreKind};

use super::{CERTS_DIR, CONFIG_DIR, DATA_DIR, Input, egress};
use crate::certs;

/// Port of the virtual API server, on loopback; the syncer's proxy fronts it.
const APISERVER_PORT: u16 = 6443;
/// The store's client URL, on loopback (kine speaks etcd's protocol).
const STORE_URL: &str = "http://127.0.0.1:2379";
const ETCD_PEER_URL: &str = "http://127.0.0.1:2380";
const TMP_DIR: &str = "/tmp";

/// Key of `vc-config-<name>` with the k8s controller manager's and syncer's kubeconfig.
const ADMIN_KUBECONFIG_KEY: &str = "admin.kubeconfig";
/// Key of `vc-config-<name>` with the public key service-account tokens are verified with
/// (public: it belongs in no Secret, but the pod already mounts this one).
const SA_PUBLIC_KEY_KEY: &str = "sa.pub";
/// Key of `vc-config-<name>` with k0s's configuration.
const K0S_CONFIG_KEY: &str = "k0s.yaml";

/// Controllers that manage nodes, volumes or clouds: the host does that for the virtual
/// cluster. vCluster v0.19's list, for the v1.31 controller managers k3s and k0s embed.
const CONTROLLERS: &str = "*,-nodeipam,-nodelifecycle,-persistentvolume-binder,-attachdetach,-persistentvolume-expander,-cloud-node-lifecycle,-ttl";
/// The same for kube-controller-manager v1.37, which refuses controller names it does not
/// know and has no `cloud-node-lifecycle` any more (it lives in cloud-controller-manager).
const K8S_CONTROLLERS: &str = "*,-nodeipam,-nodelifecycle,-persistentvolume-binder,-attachdetach,-persistentvolume-expander,-ttl";

/// What the distribution contributes to the pod.
pub struct ControlPlane {
    pub containers: Vec<Value>,
    /// Scratch `emptyDir` volumes its containers mount.
    pub volumes: Vec<Value>,
}

pub fn control_plane(input: &Input) -> ControlPlane {
    let (kind, config) = input.spec.control_plane.distro.selected();
    let store = input.spec.control_plane.backing_store.selected(kind);
    let mut plane = match kind {
        DistroKind::K3s => k3s(input, &config, store),
        DistroKind::K0s => k0s(input, &config),
        DistroKind::K8s => k8s(input, &config, store),
    };
    if !config.env.is_empty() {
        for container in &mut plane.containers {
            if container["name"] == "control-plane" {
                with_env(container, &config.env);
            }
        }
    }
    plane
}

/// Adds `extra` to `container`'s environment; a name already there takes the new value.
fn with_env(container: &mut Value, extra: &[EnvVar]) {
    let mut env: Vec<Value> = container["env"].as_array().cloned().unwrap_or_default();
    for var in extra {
        env.retain(|e| e["name"] != var.name.as_str());
        env.push(serde_json::to_value(var).unwrap_or_default());
    }
    container["env"] = Value::Array(env);
}

/// Files of `vc-config-<name>` beside the syncer's configuration, by key.
pub fn config_files(input: &Input) -> Vec<(&'static str, String)> {
    match input.spec.control_plane.distro.selected().0 {
        DistroKind::K3s => Vec::new(),
        DistroKind::K0s => vec![(K0S_CONFIG_KEY, k0s_config(input))],
        DistroKind::K8s => vec![
            (ADMIN_KUBECONFIG_KEY, admin_kubeconfig()),
            (SA_PUBLIC_KEY_KEY, input.certs.ca_public_key.clone()),
            (egress::EGRESS_CONFIG_KEY, egress::egress_config()),
        ],
    }
}

/// The admin kubeconfig the syncer reads: where each distribution has one.
pub fn virtual_kubeconfig(kind: DistroKind) -> String {
    match kind {
        DistroKind::K3s => format!("{DATA_DIR}/k3s-config/kube-config.yaml"),
        DistroKind::K0s => format!("{DATA_DIR}/k0s/pki/admin.conf"),
        DistroKind::K8s => format!("{CONFIG_DIR}/{ADMIN_KUBECONFIG_KEY}"),
    }
}

/// The syncer's argument that makes it the virtual API server's kubelet, where the distro's
/// API server is configured to reach it (k8s only: k3s and k0s run their own egress setup).
pub fn syncer_kubelet_arg(kind: DistroKind) -> Option<String> {
    (kind == DistroKind::K8s).then(egress::syncer_arg)
}

/// The virtual cluster's DNS domain. kube-apiserver and kube-controller-manager (distro k8s)
/// take none: only the kubelet and the DNS server need it, and vnest runs neither inside the
/// control plane (the syncer writes pods' DNS and deploys the virtual cluster's DNS).
fn cluster_domain<'a>(input: &Input<'a>) -> &'a str {
    &input.spec.networking.advanced.cluster_domain
}

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

fn mount(name: &str, path: &str) -> Value {
    json!({ "name": name, "mountPath": path })
}

fn read_only(name: &str, path: &str) -> Value {
    json!({ "name": name, "mountPath": path, "readOnly": true })
}

fn empty_dir(name: &str) -> Value {
    json!({ "name": name, "emptyDir": {} })
}

/// Requests and limits (limits so a ResourceQuota on `limits.*` admits the pod).
fn resources(cpu: &str, memory: &str, cpu_limit: &str, memory_limit: &str) -> Value {
    json!({
        "requests": { "cpu": cpu, "memory": memory },
        "limits": { "cpu": cpu_limit, "memory": memory_limit },
    })
}

/// The API server's (or the whole distribution's) resources: the spec's, or the defaults.
fn control_plane_resources(input: &Input) -> Value {
    input
        .spec
        .control_plane
        .stateful_set
        .resources
        .as_ref()
        .map_or_else(
            || {
                let (cpu, memory) = super::DEFAULT_CONTROL_PLANE_REQUESTS;
                let (cpu_limit, memory_limit) = super::DEFAULT_CONTROL_PLANE_LIMITS;
                resources(cpu, memory, cpu_limit, memory_limit)
            },
            |r| serde_json::to_value(r).unwrap_or_default(),
        )
}

/// k3s as vCluster v0.19's chart runs it (its k3s StatefulSet's args): API server and
/// controllers only, no agent, scheduler or add-ons.
fn k3s(input: &Input, config: &DistroConfig, store: StoreKind) -> ControlPlane {
    let mut args = vec![
        "server".to_string(),
        format!("--data-dir={DATA_DIR}/k3s"),
        format!("--write-kubeconfig={DATA_DIR}/k3s-config/kube-config.yaml"),
        // The syncer runs as the same uid in this pod.
        "--write-kubeconfig-mode=0600".to_string(),
        format!("--service-cidr={}", input.settings.service_cidr),
        format!("--cluster-domain={}", cluster_domain(input)),
        "--disable=traefik,servicelb,metrics-server,local-storage,coredns".to_string(),
        "--disable-agent".to_string(),
        "--disable-scheduler".to_string(),
        "--disable-cloud-controller".to_string(),
        "--disable-network-policy".to_string(),
        "--flannel-backend=none".to_string(),
        "--egress-selector-mode=disabled".to_string(),
        "--kube-apiserver-arg=bind-address=127.0.0.1".to_string(),
        "--kube-apiserver-arg=endpoint-reconciler-type=none".to_string(),
        format!("--kube-controller-manager-arg=controllers={CONTROLLERS}"),
        // Tenant pods' kube-root-ca.crt must be the CA of the syncer's proxy, not k3s's own.
        format!(
            "--kube-controller-manager-arg=root-ca-file={CERTS_DIR}/{}",
            certs::CA_CERT
        ),
    ];
    if store == StoreKind::Etcd {
        args.push("--cluster-init".to_string());
    }
    let binary = Binary {
        default_image: &input.settings.images.k3s,
        command: "/bin/k3s",
        reads_config: false,
        scratch: ("etc-rancher", "/etc/rancher"),
    };
    single_binary(input, config, binary, args)
}

/// A distro that is one binary: its image unless the spec names one, the command, whether
/// it reads the config Secret, and the emptyDir (name, path) it writes scratch files to.
struct Binary<'a> {
    default_image: &'a str,
    command: &'a str,
    reads_config: bool,
    scratch: (&'a str, &'a str),
}

/// The `control-plane` container of a distro that is one binary: `args`, then the spec's
/// extra ones; the data claim, the certificates and `/tmp` mounted beside its own volumes.
fn single_binary(
    input: &Input,
    config: &DistroConfig,
    binary: Binary,
    mut args: Vec<String>,
) -> ControlPlane {
    args.extend(config.extra_args.iter().cloned());
    let (scratch, scratch_path) = binary.scratch;
    let mut mounts = vec![mount("data", DATA_DIR)];
    if binary.reads_config {
        mounts.push(read_only("config", CONFIG_DIR));
    }
    mounts.extend([
        read_only("certs", CERTS_DIR),
        mount(scratch, scratch_path),
        mount("tmp", TMP_DIR),
    ]);
    ControlPlane {
        containers: vec![json!({
            "name": "control-plane",
            "image": image(config, binary.default_image),
            "command": [binary.command],
            "args": args,
            "resources": control_plane_resources(input),
            "volumeMounts": mounts,
        })],
        volumes: vec![empty_dir(scratch)],
    }
}

/// k0s's `ClusterConfig`: API server on loopback, the operator's CA for tenant pods, etcd.
fn k0s_config(input: &Input) -> String {
    let config = json!({
        "apiVersion": "k0s.k0sproject.io/v1beta1",
        "kind": "ClusterConfig",
        "metadata": { "name": "k0s" },
        "spec": {
            "api": {
                "address": "127.0.0.1",
                "port": APISERVER_PORT,
                "sans": ["127.0.0.1", "localhost"],
                "extraArgs": {
                    "bind-address": "127.0.0.1",
                    "endpoint-reconciler-type": "none",
                },
            },
            "controllerManager": { "extraArgs": {
                "controllers": CONTROLLERS,
                "root-ca-file": format!("{CERTS_DIR}/{}", certs::CA_CERT),
            }},
            "network": {
                "serviceCIDR": input.settings.service_cidr.to_string(),
                "clusterDomain": cluster_domain(input),
                "provider": "custom",
                "kubeProxy": { "disabled": true },
            },
            "storage": { "type": "etcd", "etcd": { "peerAddress": "127.0.0.1" } },
            "telemetry": { "enabled": false },
        },
    });
    serde_yaml::to_string(&config).unwrap_or_default()
}

fn k0s(input: &Input, config: &DistroConfig) -> ControlPlane {
    let args = vec![
        "controller".to_string(),
        format!("--config={CONFIG_DIR}/{K0S_CONFIG_KEY}"),
        format!("--data-dir={DATA_DIR}/k0s"),
        "--disable-components=konnectivity-server,kube-scheduler,csr-approver,kube-proxy,coredns,network-provider,helm,metrics-server,worker-config".to_string(),
        "--status-socket=/run/k0s/status.sock".to_string(),
    ];
    let binary = Binary {
        default_image: &input.settings.images.k0s,
        command: "k0s",
        reads_config: true,
        scratch: ("run-k0s", "/run/k0s"),
    };
    single_binary(input, config, binary, args)
}

/// The admin kubeconfig of distro k8s. It holds no secret: it names the mounted PKI files
/// (the operator's admin client certificate, in `system:masters`).
fn admin_kubeconfig() -> String {
    let config = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{ "name": "vnest", "cluster": {
            "server": format!("https://127.0.0.1:{APISERVER_PORT}"),
            "certificate-authority": format!("{CERTS_DIR}/{}", certs::CA_CERT),
        }}],
        "users": [{ "name": "vnest-admin", "user": {
            "client-certificate": format!("{CERTS_DIR}/{}", certs::CLIENT_CERT),
            "client-key": format!("{CERTS_DIR}/{}", certs::CLIENT_KEY),
        }}],
        "contexts": [{ "name": "vnest", "context": { "cluster": "vnest", "user": "vnest-admin" } }],
        "current-context": "vnest",
    });
    serde_yaml::to_string(&config).unwrap_or_default()
}

/// The store container: kine on SQLite, or etcd; both on the data claim, on loopback.
fn store(input: &Input, kubernetes_image: &str, store: StoreKind) -> Value {
    match store {
        // kine's default DSN is ./db/state.db: the working directory puts it on the claim.
        // Its metrics would listen on every address (:8080) unscraped; `0` turns them off.
        StoreKind::Database => json!({
            "name": "kine",
            "image": kubernetes_image,
            "command": ["/usr/local/bin/kine"],
            "args": ["--listen-address=127.0.0.1:2379", "--metrics-bind-address=0"],
            "workingDir": DATA_DIR,
            "resources": resources("20m", "32Mi", "500m", "256Mi"),
            "volumeMounts": [mount("data", DATA_DIR), mount("tmp", TMP_DIR)],
        }),
        StoreKind::Etcd => json!({
            "name": "etcd",
            "image": input.settings.images.etcd,
            "command": ["/usr/local/bin/etcd"],
            "args": [
                format!("--data-dir={DATA_DIR}/etcd"),
                format!("--listen-client-urls={STORE_URL}"),
                format!("--advertise-client-urls={STORE_URL}"),
                format!("--listen-peer-urls={ETCD_PEER_URL}"),
                format!("--initial-advertise-peer-urls={ETCD_PEER_URL}"),
                format!("--initial-cluster=default={ETCD_PEER_URL}"),
            ],
            "resources": resources("50m", "64Mi", "1", "512Mi"),
            "volumeMounts": [mount("data", DATA_DIR)],
        }),
    }
}

/// Upstream Kubernetes from one image: the store, kube-apiserver and kube-controller-manager
/// side by side, on the virtual cluster's own CA.
fn k8s(input: &Input, config: &DistroConfig, store_kind: StoreKind) -> ControlPlane {
    let kubernetes_image = image(config, &input.settings.images.kubernetes);
    let cert = |file: &str| format!("{CERTS_DIR}/{file}");
    let mut apiserver_args = vec![
        "--bind-address=127.0.0.1".to_string(),
        format!("--secure-port={APISERVER_PORT}"),
        format!("--etcd-servers={STORE_URL}"),
        format!("--client-ca-file={}", cert(certs::CA_CERT)),
        format!("--tls-cert-file={}", cert(certs::SERVER_CERT)),
        format!("--tls-private-key-file={}", cert(certs::SERVER_KEY)),
        format!("--service-account-key-file={CONFIG_DIR}/{SA_PUBLIC_KEY_KEY}"),
        format!("--service-account-signing-key-file={}", cert(certs::CA_KEY)),
        "--service-account-issuer=https://kubernetes.default.svc".to_string(),
        "--authorization-mode=RBAC".to_string(),
        format!("--service-cluster-ip-range={}", input.settings.service_cidr),
        // No endpoints for the `kubernetes` Service: the syncer serves it.
        "--endpoint-reconciler-type=none".to_string(),
        // Tenants may ask; the host's Pod Security Standard decides.
        "--allow-privileged=true".to_string(),
        "--profiling=false".to_string(),
    ];
    apiserver_args.extend(egress::apiserver_args(CONFIG_DIR));
    apiserver_args.extend(config.extra_args.iter().cloned());
    let kubeconfig = virtual_kubeconfig(DistroKind::K8s);
    ControlPlane {
        containers: vec![
            store(input, &kubernetes_image, store_kind),
            json!({
                "name": "control-plane",
                "image": kubernetes_image,
                "command": ["/usr/local/bin/kube-apiserver"],
                "args": apiserver_args,
                "resources": control_plane_resources(input),
                "volumeMounts": [
                    read_only("config", CONFIG_DIR),
                    read_only("certs", CERTS_DIR),
                    mount("tmp", TMP_DIR),
                    egress::mount(),
                ],
            }),
            json!({
                "name": "controller-manager",
                "image": kubernetes_image,
                "command": ["/usr/local/bin/kube-controller-manager"],
                "args": [
                    format!("--kubeconfig={kubeconfig}"),
                    format!("--authentication-kubeconfig={kubeconfig}"),
                    format!("--authorization-kubeconfig={kubeconfig}"),
                    "--use-service-account-credentials=true",
                    "--leader-elect=false",
                    // No serving endpoint (nothing scrapes it); v1.37 accepts 0 as "off".
                    "--secure-port=0",
                    format!("--service-account-private-key-file={}", cert(certs::CA_KEY)),
                    format!("--root-ca-file={}", cert(certs::CA_CERT)),
                    format!("--controllers={K8S_CONTROLLERS}"),
                ],
                "resources": resources("50m", "64Mi", "1", "512Mi"),
                "volumeMounts": [
                    read_only("config", CONFIG_DIR),
                    read_only("certs", CERTS_DIR),
                    mount("tmp", TMP_DIR),
                ],
            }),
        ],
        volumes: vec![egress::volume()],
    }
}
