//! Distro `k8s`'s road to its kubelets. kube-apiserver's egress selector sends its `cluster`
//! traffic (kubelets for exec, attach, port-forward and logs; Services of webhooks and
//! aggregated APIs) over HTTP CONNECT to the syncer's Unix socket, on an emptyDir only the
//! API server and the syncer mount. The syncer plays the kubelet of every virtual node and
//! dials everything else, so pod streams pass the virtual cluster's admission first.

use serde_json::{Value, json};

use super::CERTS_DIR;
use crate::certs;

/// Key of `vc-config-<name>` with kube-apiserver's `EgressSelectorConfiguration`.
pub const EGRESS_CONFIG_KEY: &str = "egress-selector.yaml";
/// The emptyDir the API server and the syncer share the socket on.
const VOLUME: &str = "kubelet-proxy";
const SOCKET_DIR: &str = "/run/vnest-kubelet";

/// The socket the syncer listens on and the API server dials.
pub fn socket() -> String {
    format!("{SOCKET_DIR}/kubelet.sock")
}

/// The `EgressSelectorConfiguration`: `cluster` traffic over HTTP CONNECT to [`socket`].
pub fn egress_config() -> String {
    let config = json!({
        "apiVersion": "apiserver.k8s.io/v1beta1",
        "kind": "EgressSelectorConfiguration",
        "egressSelections": [{
            "name": "cluster",
            "connection": {
                "proxyProtocol": "HTTPConnect",
                "transport": { "uds": { "udsName": socket() } },
            },
        }],
    });
    serde_yaml::to_string(&config).unwrap_or_default()
}

/// kube-apiserver's arguments: the egress config (in the mounted `config_dir`), and the
/// client certificate it shows kubelets (the operator's admin certificate, which the syncer
/// requires). No `--kubelet-certificate-authority`: the syncer's serving certificate is not
/// issued for node addresses, and the socket is reachable from this pod only.
pub fn apiserver_args(config_dir: &str) -> Vec<String> {
    vec![
        format!("--egress-selector-config-file={config_dir}/{EGRESS_CONFIG_KEY}"),
        format!(
            "--kubelet-client-certificate={CERTS_DIR}/{}",
            certs::CLIENT_CERT
        ),
        format!("--kubelet-client-key={CERTS_DIR}/{}", certs::CLIENT_KEY),
    ]
}

/// The syncer's argument that makes it serve the socket.
pub fn syncer_arg() -> String {
    format!("--kubelet-socket={}", socket())
}

/// The shared emptyDir, and its mount in either container.
pub fn volume() -> Value {
    json!({ "name": VOLUME, "emptyDir": {} })
}

pub fn mount() -> Value {
    json!({ "name": VOLUME, "mountPath": SOCKET_DIR })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only `cluster` traffic is redirected, over HTTP CONNECT to the syncer's socket, in the
    /// shape kube-apiserver v1.37 reads (`apiserver.k8s.io/v1beta1`).
    #[test]
    fn cluster_egress_goes_over_http_connect_to_the_syncers_socket() {
        let config: Value = serde_yaml::from_str(&egress_config()).unwrap();
        assert_eq!(config["apiVersion"], "apiserver.k8s.io/v1beta1");
        assert_eq!(config["kind"], "EgressSelectorConfiguration");
        let selections = config["egressSelections"].as_array().unwrap();
        assert_eq!(selections.len(), 1, "controlplane and etcd stay direct");
        assert_eq!(selections[0]["name"], "cluster");
        let connection = &selections[0]["connection"];
        assert_eq!(connection["proxyProtocol"], "HTTPConnect");
        assert_eq!(
            connection["transport"]["uds"]["udsName"],
            "/run/vnest-kubelet/kubelet.sock"
        );
        assert_eq!(
            syncer_arg(),
            "--kubelet-socket=/run/vnest-kubelet/kubelet.sock"
        );
    }

    /// The socket's folder is the shared volume's mount point.
    #[test]
    fn the_socket_lives_on_the_shared_volume() {
        assert!(socket().starts_with(&format!("{}/", mount()["mountPath"].as_str().unwrap())));
        assert_eq!(volume()["name"], mount()["name"]);
        assert!(volume()["emptyDir"].is_object());
    }
}
