//! The `restricted` Pod Security Standard for the control plane pod, so a VirtualCluster can
//! live in a namespace that enforces it.

use serde_json::{Value, json};

/// The uid and gid every container runs as (distroless's `nonroot`).
const RUN_AS: i64 = 65532;

/// The pod half of the `restricted` Pod Security Standard; `fsGroup` makes the data claim
/// and the Secret volumes readable and writable by [`RUN_AS`].
pub fn pod_security_context() -> Value {
    json!({
        "runAsNonRoot": true,
        "runAsUser": RUN_AS,
        "runAsGroup": RUN_AS,
        "fsGroup": RUN_AS,
        "seccompProfile": { "type": "RuntimeDefault" },
    })
}

/// The container half of `restricted`. Every container writes only to mounted volumes.
pub fn container_security_context() -> Value {
    json!({
        "allowPrivilegeEscalation": false,
        "capabilities": { "drop": ["ALL"] },
        "readOnlyRootFilesystem": true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::desired::test_support::*;
    use vnest_crds::PodSecurityStandard;

    /// Violations of the `restricted` Pod Security Standard (v1.37's checks that a pod
    /// template can fail), as the admission plugin words them.
    fn restricted_violations(pod: &Value) -> Vec<String> {
        let mut out = Vec::new();
        let pod_sc = &pod["securityContext"];
        for host in ["hostNetwork", "hostPID", "hostIPC"] {
            if pod[host] == true {
                out.push(format!("{host}=true"));
            }
        }
        if pod_sc.get("sysctls").is_some() {
            out.push("sysctls".into());
        }
        for volume in pod["volumes"].as_array().into_iter().flatten() {
            for key in volume.as_object().unwrap().keys() {
                if key != "name" && !PodSecurityStandard::RESTRICTED_VOLUMES.contains(&key.as_str())
                {
                    out.push(format!("volume {} of type {key}", volume["name"]));
                }
            }
        }
        let seccomp_ok = |sc: &Value| {
            matches!(
                sc["seccompProfile"]["type"].as_str(),
                Some("RuntimeDefault" | "Localhost")
            )
        };
        if pod_sc["runAsUser"] == 0 {
            out.push("pod runAsUser=0".into());
        }
        let containers = ["initContainers", "containers"]
            .iter()
            .flat_map(|k| pod[*k].as_array().into_iter().flatten());
        for c in containers {
            let name = &c["name"];
            let sc = &c["securityContext"];
            if sc["privileged"] == true {
                out.push(format!("{name}: privileged"));
            }
            if sc["allowPrivilegeEscalation"] != false {
                out.push(format!("{name}: allowPrivilegeEscalation != false"));
            }
            let drop = sc["capabilities"]["drop"].as_array();
            if !drop.is_some_and(|d| d.contains(&json!("ALL"))) {
                out.push(format!("{name}: capabilities.drop lacks ALL"));
            }
            for add in sc["capabilities"]["add"].as_array().into_iter().flatten() {
                if add != "NET_BIND_SERVICE" {
                    out.push(format!("{name}: adds capability {add}"));
                }
            }
            let non_root = sc["runAsNonRoot"] == true
                || (pod_sc["runAsNonRoot"] == true && sc["runAsNonRoot"] != false);
            if !non_root {
                out.push(format!("{name}: runAsNonRoot != true"));
            }
            if sc["runAsUser"] == 0 {
                out.push(format!("{name}: runAsUser=0"));
            }
            let seccomp = if sc.get("seccompProfile").is_some() {
                seccomp_ok(sc)
            } else {
                seccomp_ok(pod_sc)
            };
            if !seccomp {
                out.push(format!(
                    "{name}: seccompProfile not RuntimeDefault or Localhost"
                ));
            }
            for port in c["ports"].as_array().into_iter().flatten() {
                if port["hostPort"].as_i64().unwrap_or(0) != 0 {
                    out.push(format!("{name}: hostPort"));
                }
            }
        }
        out
    }

    /// The whole pod passes `restricted`, whatever the distribution and store, so a
    /// VirtualCluster can live in a namespace that enforces it.
    #[test]
    fn the_pod_passes_the_restricted_pod_security_standard() {
        for spec in ["{}", K3S_ETCD, K0S, K8S, K8S_ETCD] {
            let sts = sts(spec);
            let pod = &sts["spec"]["template"]["spec"];
            assert_eq!(restricted_violations(pod), Vec::<String>::new(), "{spec}");
            assert_eq!(pod["securityContext"]["runAsUser"], 65532);
            assert_eq!(pod["securityContext"]["fsGroup"], 65532);
            for c in pod["containers"].as_array().unwrap() {
                assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
            }
        }
        // The checker itself catches what it is for.
        let bad = json!({
            "hostNetwork": true,
            "volumes": [{ "name": "h", "hostPath": { "path": "/" } }],
            "containers": [{ "name": "c", "securityContext": { "privileged": true } }],
        });
        assert_eq!(
            restricted_violations(&bad).len(),
            7,
            "{:?}",
            restricted_violations(&bad)
        );
    }
}
