use super::*;
use crate::desired::test_support::*;

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

fn args(container: &Value) -> Vec<&str> {
    container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect()
}

/// Every one of `want` is among `args`.
fn assert_has_all(args: &[&str], want: &[&str]) {
    for want in want {
        assert!(args.contains(want), "{want}: {args:?}");
    }
}

fn names(sts: &Value) -> Vec<&str> {
    sts["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect()
}

fn mounts(container: &Value) -> Vec<(&str, &str)> {
    container["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["name"].as_str().unwrap(),
                m["mountPath"].as_str().unwrap(),
            )
        })
        .collect()
}

/// Distro k8s by default: kine on SQLite in the data claim, kube-apiserver and
/// kube-controller-manager, all three from the one kubernetes image.
#[test]
fn k8s_runs_kine_apiserver_and_controller_manager_from_one_image() {
    let sts = sts(K8S);
    assert_eq!(
        names(&sts),
        ["kine", "control-plane", "controller-manager", "syncer"]
    );
    for name in ["kine", "control-plane", "controller-manager"] {
        assert_eq!(
            container(&sts, name)["image"],
            "ghcr.io/vnest-dev/kubernetes:v1.37.2"
        );
    }
    let kine = container(&sts, "kine");
    assert_eq!(kine["command"], json!(["/usr/local/bin/kine"]));
    assert_eq!(
        args(kine),
        [
            "--listen-address=127.0.0.1:2379",
            "--metrics-bind-address=0"
        ]
    );
    assert_eq!(kine["workingDir"], "/data");
    assert!(mounts(kine).contains(&("data", "/data")));

    let apiserver = container(&sts, "control-plane");
    assert_eq!(
        apiserver["command"],
        json!(["/usr/local/bin/kube-apiserver"])
    );
    assert_has_all(
        &args(apiserver),
        &[
            "--etcd-servers=http://127.0.0.1:2379",
            "--service-cluster-ip-range=10.96.0.0/12",
            "--endpoint-reconciler-type=none",
            "--allow-privileged=true",
            "--profiling=false",
            "--tls-cert-file=/etc/vnest/certs/tls.crt",
            "--service-account-key-file=/etc/vnest/config/sa.pub",
            "--service-account-signing-key-file=/etc/vnest/certs/ca.key",
        ],
    );

    let cm = container(&sts, "controller-manager");
    assert_eq!(
        cm["command"],
        json!(["/usr/local/bin/kube-controller-manager"])
    );
    assert_has_all(
        &args(cm),
        &[
            "--kubeconfig=/etc/vnest/config/admin.kubeconfig",
            "--authentication-kubeconfig=/etc/vnest/config/admin.kubeconfig",
            "--authorization-kubeconfig=/etc/vnest/config/admin.kubeconfig",
            "--use-service-account-credentials=true",
            "--leader-elect=false",
            "--secure-port=0",
            "--service-account-private-key-file=/etc/vnest/certs/ca.key",
            "--root-ca-file=/etc/vnest/certs/ca.crt",
            // v1.37 refuses unknown controller names, and cloud-node-lifecycle is gone.
            "--controllers=*,-nodeipam,-nodelifecycle,-persistentvolume-binder,-attachdetach,-persistentvolume-expander,-ttl",
        ],
    );
    assert!(mounts(cm).contains(&("config", "/etc/vnest/config")));
    assert!(
        args(container(&sts, "syncer"))
            .contains(&"--virtual-kubeconfig=/etc/vnest/config/admin.kubeconfig")
    );
}

/// `distro.k8s.image` moves kine, the API server and the controller manager together.
#[test]
fn the_k8s_image_override_applies_to_all_three_binaries() {
    let sts = sts(
        "controlPlane: {distro: {k8s: {enabled: true, image: {repository: registry.local/k8s, tag: v1.37.3}}}}",
    );
    for name in ["kine", "control-plane", "controller-manager"] {
        assert_eq!(container(&sts, name)["image"], "registry.local/k8s:v1.37.3");
    }
}

/// Distro k8s's API server reaches its kubelets through the syncer: the egress config from
/// `vc-config-<name>`, the admin certificate as kubelet client certificate, and the socket's
/// volume mounted in the API server and the syncer only; the syncer is told to serve it.
#[test]
fn k8s_sends_kubelet_traffic_to_the_syncer_over_a_shared_socket() {
    let sts = sts(K8S);
    let apiserver = args(container(&sts, "control-plane"));
    assert_has_all(
        &apiserver,
        &[
            "--egress-selector-config-file=/etc/vnest/config/egress-selector.yaml",
            "--kubelet-client-certificate=/etc/vnest/certs/client.crt",
            "--kubelet-client-key=/etc/vnest/certs/client.key",
        ],
    );
    assert!(
        !apiserver
            .iter()
            .any(|a| a.starts_with("--kubelet-certificate-authority")),
        "{apiserver:?}"
    );
    assert!(
        args(container(&sts, "syncer"))
            .contains(&"--kubelet-socket=/run/vnest-kubelet/kubelet.sock")
    );
    let socket_mount = ("kubelet-proxy", "/run/vnest-kubelet");
    for (name, mounted) in [
        ("control-plane", true),
        ("syncer", true),
        ("kine", false),
        ("controller-manager", false),
    ] {
        assert_eq!(
            mounts(container(&sts, name)).contains(&socket_mount),
            mounted,
            "{name}"
        );
    }
    let keys: Vec<&str> = super::super::distro::config_files(&input(&spec_from_yaml(K8S)))
        .into_iter()
        .map(|(key, _)| key)
        .collect();
    assert!(keys.contains(&"egress-selector.yaml"), "{keys:?}");
}

/// k3s and k0s keep their own egress setup: their syncer serves pod streams itself.
#[test]
fn k3s_and_k0s_syncers_serve_no_kubelet_socket() {
    for spec in ["{}", K0S] {
        let sts = sts(spec);
        let syncer = container(&sts, "syncer");
        assert!(
            !args(syncer)
                .iter()
                .any(|a| a.starts_with("--kubelet-socket")),
            "{spec}"
        );
        assert!(
            sts["spec"]["template"]["spec"]["volumes"]
                .as_array()
                .unwrap()
                .iter()
                .all(|v| v["name"] != "kubelet-proxy"),
            "{spec}"
        );
    }
}

/// `distro.<name>.env` reaches the distribution's main container only, and a name the
/// spec gives replaces the operator's default of that name.
#[test]
fn distro_env_reaches_the_main_container_and_overrides_defaults() {
    let env = |sts: &Value, name: &str| {
        container(sts, name)["env"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    let k8s = sts(
        "controlPlane: {distro: {k8s: {enabled: true, env: [{name: GOMEMLIMIT, value: 300MiB}, {name: EXTRA, value: '1'}]}}}",
    );
    let apiserver = env(&k8s, "control-plane");
    let limits: Vec<_> = apiserver
        .iter()
        .filter(|e| e["name"] == "GOMEMLIMIT")
        .collect();
    assert_eq!(limits.len(), 1, "{apiserver:?}");
    assert_eq!(limits[0]["value"], "300MiB");
    assert!(
        apiserver
            .iter()
            .any(|e| e["name"] == "EXTRA" && e["value"] == "1")
    );
    assert!(
        !env(&k8s, "controller-manager")
            .iter()
            .any(|e| e["name"] == "EXTRA")
    );
    let k3s =
        sts("controlPlane: {distro: {k3s: {enabled: true, env: [{name: EXTRA, value: '2'}]}}}");
    assert!(
        env(&k3s, "control-plane")
            .iter()
            .any(|e| e["name"] == "EXTRA" && e["value"] == "2")
    );
}

#[test]
fn k8s_with_the_etcd_backing_store_runs_etcd_instead_of_kine() {
    let sts = sts(K8S_ETCD);
    assert_eq!(
        names(&sts),
        ["etcd", "control-plane", "controller-manager", "syncer"]
    );
    let etcd = container(&sts, "etcd");
    assert_eq!(etcd["image"], "registry.k8s.io/etcd:3.7.0-0");
    assert_eq!(etcd["command"], json!(["/usr/local/bin/etcd"]));
    let etcd_args = args(etcd);
    assert_has_all(
        &etcd_args,
        &[
            "--data-dir=/data/etcd",
            "--listen-client-urls=http://127.0.0.1:2379",
            "--advertise-client-urls=http://127.0.0.1:2379",
            "--listen-peer-urls=http://127.0.0.1:2380",
        ],
    );
    assert!(
        !etcd_args
            .iter()
            .any(|a| a.starts_with("--listen-metrics-urls"))
    );
}

/// vCluster v0.19's k3s arguments, plus the operator's CA for tenant pods' kube-root-ca.crt.
#[test]
fn k3s_runs_without_scheduler_on_the_host_service_range_and_the_operator_ca() {
    let k3s = sts("{}");
    let cp = container(&k3s, "control-plane");
    let cp_args = args(cp);
    assert_has_all(
        &cp_args,
        &[
            "--disable-scheduler",
            "--service-cidr=10.96.0.0/12",
            "--kube-apiserver-arg=endpoint-reconciler-type=none",
            "--write-kubeconfig-mode=0600",
            "--kube-controller-manager-arg=root-ca-file=/etc/vnest/certs/ca.crt",
        ],
    );
    assert!(!cp_args.contains(&"--cluster-init"));
    assert!(mounts(cp).contains(&("certs", "/etc/vnest/certs")));
    let etcd = sts(K3S_ETCD);
    assert!(args(container(&etcd, "control-plane")).contains(&"--cluster-init"));
    assert_eq!(names(&etcd), ["control-plane", "syncer"]);
}

/// k3s and k0s take the spec's cluster domain (`networking.advanced.clusterDomain`), not a
/// constant; the default is `cluster.local`.
#[test]
fn k3s_and_k0s_take_the_cluster_domain_from_the_spec() {
    assert!(
        args(container(&sts("{}"), "control-plane")).contains(&"--cluster-domain=cluster.local")
    );
    let custom = "networking: {advanced: {clusterDomain: tenant.example}}";
    let k3s = sts(custom);
    assert!(args(container(&k3s, "control-plane")).contains(&"--cluster-domain=tenant.example"));
    let spec = spec_from_yaml(&format!("{K0S}\n{custom}"));
    let config = super::super::distro::config_files(&input(&spec));
    let k0s: Value = serde_yaml::from_str(&config[0].1).unwrap();
    assert_eq!(k0s["spec"]["network"]["clusterDomain"], "tenant.example");
}

#[test]
fn k0s_reads_its_config_from_the_config_secret() {
    let sts = sts(K0S);
    let cp = container(&sts, "control-plane");
    assert_eq!(cp["image"], "k0sproject/k0s:v1.31.2-k0s.0");
    assert!(args(cp).contains(&"--config=/etc/vnest/config/k0s.yaml"));
    assert!(mounts(cp).contains(&("config", "/etc/vnest/config")));
    assert!(mounts(cp).contains(&("certs", "/etc/vnest/certs")));
}

/// A ResourceQuota on `limits.*` admits the pod only if every container has limits.
#[test]
fn every_container_has_requests_and_limits() {
    for spec in ["{}", K3S_ETCD, K0S, K8S, K8S_ETCD] {
        let sts = sts(spec);
        for c in sts["spec"]["template"]["spec"]["containers"]
            .as_array()
            .unwrap()
        {
            for key in ["requests", "limits"] {
                for resource in ["cpu", "memory"] {
                    assert!(
                        c["resources"][key][resource].is_string(),
                        "{spec}: {} has no {key}.{resource}",
                        c["name"]
                    );
                }
            }
        }
    }
}

/// Every path a container writes is a volume, so a read-only root filesystem holds.
#[test]
fn writable_paths_are_mounted_volumes() {
    let k3s = sts("{}");
    let cp = mounts(container(&k3s, "control-plane"));
    assert!(cp.contains(&("etc-rancher", "/etc/rancher")) && cp.contains(&("tmp", "/tmp")));
    let k0s = sts(K0S);
    assert!(mounts(container(&k0s, "control-plane")).contains(&("run-k0s", "/run/k0s")));
    for set in [&k3s, &k0s, &sts(K8S)] {
        let pod = &set["spec"]["template"]["spec"];
        let volumes: Vec<&str> = pod["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["name"].as_str().unwrap())
            .collect();
        for c in pod["containers"].as_array().unwrap() {
            for (name, _) in mounts(c) {
                assert!(name == "data" || volumes.contains(&name), "{name}");
            }
        }
    }
}

/// A `spec.sync` edit changes `vc-config-<name>`, so the pod rolls and the syncer reads it;
/// an unchanged spec leaves the pod alone.
#[test]
fn the_config_hash_follows_the_config_secret() {
    let hash = |yaml: &str| {
        sts(yaml)["spec"]["template"]["metadata"]["annotations"]["vnest.dev/config-hash"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let before = hash("{}");
    assert_eq!(before.len(), 16);
    assert_eq!(hash("{}"), before);
    assert_ne!(hash("sync: {toHost: {ingresses: {enabled: true}}}"), before);
    assert_ne!(hash(K8S), before);
    let annotated = sts("controlPlane: {statefulSet: {annotations: {a: b}}}");
    let annotations = &annotated["spec"]["template"]["metadata"]["annotations"];
    assert_eq!(annotations["a"], "b");
    assert_eq!(annotations["vnest.dev/config-hash"], before);
}

#[test]
fn managed_labels_cannot_be_overridden_by_spec_labels() {
    let sts = sts(
        "controlPlane: {statefulSet: {labels: {app: other, release: x, vnest.dev/control-plane: y}}}",
    );
    let labels = &sts["spec"]["template"]["metadata"]["labels"];
    assert_eq!(labels["app"], "vcluster");
    assert_eq!(labels["release"], "team-alpha");
    assert_eq!(labels["vnest.dev/control-plane"], "team-alpha");
}

/// The pod carries the key the Services select on; the StatefulSet's own selector stays
/// the one existing StatefulSets were created with (a selector cannot change), and still
/// matches the pod.
#[test]
fn the_pod_carries_the_control_plane_key_and_the_selector_is_unchanged() {
    let sts = sts("{}");
    let labels = &sts["spec"]["template"]["metadata"]["labels"];
    assert_eq!(labels["vnest.dev/control-plane"], "team-alpha");
    assert_eq!(
        sts["spec"]["selector"],
        json!({ "matchLabels": { "app": "vcluster", "release": "team-alpha" } })
    );
    for (k, v) in sts["spec"]["selector"]["matchLabels"].as_object().unwrap() {
        assert_eq!(&labels[k], v, "{k}");
    }
}
