//! Pod streams of a `k8s` virtual cluster on the bed's real node pass the virtual API server:
//! `kubectl exec`, `attach`, `port-forward` and `logs` through the tenant kubeconfig reach the
//! real containers by way of the virtual API server's egress to the syncer (its "kubelet"),
//! so the tenant's own admission policies on `pods/exec` decide.

use std::{
    io::{BufRead, BufReader, Read, Write},
    net::TcpStream,
    path::Path,
    process::{Child, Command, Stdio},
    sync::{Arc, Mutex},
    time::Duration,
};

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use serde_json::{Value, json};
use vnest_tests::{
    bed,
    fixtures::{self, create_virtual_cluster, wait_condition},
    node::{
        START, all_containers_ready, delete_virtual_cluster, echo_pod_spec,
        ready_tenant_kubeconfig, real_node, tenant_kubectl as tenant,
    },
    wait,
};

const VC: &str = "vc";
const CONVERGE: Duration = Duration::from_secs(90);
/// What the tenant's policy answers when it refuses an exec.
const POLICY_MESSAGE: &str = "no exec into production pods";

/// A long-running kubectl as the tenant, its stdout collected as it comes.
struct Streaming {
    child: Child,
    out: Arc<Mutex<String>>,
}

impl Streaming {
    fn start(kubeconfig: &Path, args: &[&str]) -> Streaming {
        let mut child = Command::new(bed().bin("kubectl"))
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start kubectl");
        let out = Arc::new(Mutex::new(String::new()));
        for pipe in [
            Box::new(child.stdout.take().unwrap()) as Box<dyn Read + Send>,
            Box::new(child.stderr.take().unwrap()),
        ] {
            let out = out.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                    out.lock().unwrap().push_str(&(line + "\n"));
                }
            });
        }
        Streaming { child, out }
    }

    fn output(&self) -> String {
        self.out.lock().unwrap().clone()
    }
}

impl Drop for Streaming {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A bare vnest-echo pod on the real node that passes the `restricted` standard.
fn echo_pod(name: &str, placement: &Value) -> String {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": name, "namespace": "default" },
        "spec": echo_pod_spec(placement),
    })
    .to_string()
}

/// The tenant's ValidatingAdmissionPolicy (in-tree CEL, no webhook server) and its binding:
/// no `pods/exec` into a pod named `prod-*`.
fn no_exec_into_production() -> String {
    json!({
        "apiVersion": "v1", "kind": "List", "items": [
            {
                "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
                "metadata": { "name": "no-exec-into-production" },
                "spec": {
                    "failurePolicy": "Fail",
                    "matchConstraints": { "resourceRules": [{
                        "apiGroups": [""], "apiVersions": ["v1"],
                        "operations": ["CONNECT"], "resources": ["pods/exec"],
                    }]},
                    "validations": [{
                        "expression": "!request.name.startsWith('prod-')",
                        "message": POLICY_MESSAGE,
                    }],
                },
            },
            {
                "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
                "metadata": { "name": "no-exec-into-production" },
                "spec": { "policyName": "no-exec-into-production", "validationActions": ["Deny"] },
            },
        ]
    })
    .to_string()
}

/// Runs `vnest-echo get` inside `pod` against its own server: the answer echoes `path`.
fn exec_get(kubeconfig: &Path, pod: &str, path: &str) -> Result<String, String> {
    let url = format!("http://127.0.0.1:8080{path}");
    let answer = tenant(kubeconfig, &["exec", pod, "--", "vnest-echo", "get", &url])?;
    if answer.contains(&format!("GET {path}")) {
        Ok(answer)
    } else {
        Err(answer)
    }
}

/// `GET path` over plain HTTP/1.0 to a local port; the whole answer.
fn http_get(port: u16, path: &str) -> Result<String, String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").map_err(|e| e.to_string())?;
    let mut answer = String::new();
    stream
        .read_to_string(&mut answer)
        .map_err(|e| e.to_string())?;
    Ok(answer)
}

/// exec, attach, port-forward and logs work through the virtual API server, and a tenant's
/// ValidatingAdmissionPolicy on `pods/exec` refuses an exec with its message while another
/// pod still execs: the virtual cluster's admission sees every pod stream.
#[tokio::test]
async fn pod_streams_pass_the_virtual_clusters_admission() {
    let node = real_node();
    let (client, ns, _operator) = fixtures::setup("streams").await;
    node.provide_data_volume(&client, &ns.name, VC).await;
    let placement = node.placement();
    let mut control_plane = node.control_plane();
    control_plane["coredns"] = json!({ "enabled": false });
    let spec = json!({
        "controlPlane": control_plane,
        "policies": { "podSecurityStandard": "restricted" },
    });
    create_virtual_cluster(&client, &ns.name, VC, spec).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns.name);
    all_containers_ready(&pods, "vc-0", &node.name, START).await;
    wait_condition(&client, &ns.name, VC, "Ready", "True", CONVERGE).await;
    let kubeconfig = ready_tenant_kubeconfig(&client, &ns.name, VC, CONVERGE).await;

    for name in ["prod-0", "dev-0"] {
        let manifest = std::env::temp_dir().join(format!("vnest-streams-{}-{name}.json", ns.name));
        std::fs::write(&manifest, echo_pod(name, &placement)).unwrap();
        // Refused until the controller manager made the namespace's default ServiceAccount.
        wait::until(&format!("virtual pod {name} created"), CONVERGE, || async {
            tenant(&kubeconfig, &["apply", "-f", manifest.to_str().unwrap()])
        })
        .await;
    }
    for name in ["prod-0", "dev-0"] {
        wait::until(&format!("virtual pod {name} ready"), START, || async {
            let ready = tenant(
                &kubeconfig,
                &[
                    "get",
                    "pod",
                    name,
                    "-o",
                    r#"jsonpath={.status.conditions[?(@.type=="Ready")].status}"#,
                ],
            )?;
            if ready == "True" { Ok(()) } else { Err(ready) }
        })
        .await;
    }

    // exec runs inside the real container: its server answers a request made from within.
    exec_get(&kubeconfig, "prod-0", "/exec-before-the-policy").unwrap();

    // attach streams the running container's output: a request made after attaching shows up.
    let attach = Streaming::start(&kubeconfig, &["attach", "dev-0", "-c", "echo"]);
    wait::until("the attached output", CONVERGE, || async {
        exec_get(&kubeconfig, "dev-0", "/while-attached")?;
        let out = attach.output();
        if out.contains("GET /while-attached") {
            Ok(())
        } else {
            Err(out)
        }
    })
    .await;
    drop(attach);

    // port-forward reaches the container's port from this machine's loopback.
    let forward = Streaming::start(&kubeconfig, &["port-forward", "pod/dev-0", ":8080"]);
    let port: u16 = wait::until("port-forward's local port", CONVERGE, || async {
        let out = forward.output();
        out.lines()
            .find_map(|l| l.strip_prefix("Forwarding from 127.0.0.1:"))
            .and_then(|rest| rest.split(' ').next()?.parse().ok())
            .ok_or(out)
    })
    .await;
    let answer = wait::until("an answer through the port-forward", CONVERGE, || async {
        http_get(port, "/through-port-forward")
    })
    .await;
    assert!(answer.contains("GET /through-port-forward"), "{answer}");
    drop(forward);

    // logs come from the real container, through the same road.
    let logs = tenant(&kubeconfig, &["logs", "dev-0"]).unwrap();
    assert!(logs.contains("GET /through-port-forward"), "{logs}");

    // The tenant's policy refuses exec into prod-0, with its own message ...
    let policy = std::env::temp_dir().join(format!("vnest-streams-{}-policy.json", ns.name));
    std::fs::write(&policy, no_exec_into_production()).unwrap();
    tenant(&kubeconfig, &["apply", "-f", policy.to_str().unwrap()]).unwrap();
    // (Execs may still pass until the policy reaches the API server's admission.)
    wait::until("the policy refusing exec into prod-0", CONVERGE, || async {
        match exec_get(&kubeconfig, "prod-0", "/exec-while-the-policy-loads") {
            Err(e) if e.contains(POLICY_MESSAGE) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let refusal = exec_get(&kubeconfig, "prod-0", "/exec-refused").unwrap_err();
    assert!(refusal.contains(POLICY_MESSAGE), "{refusal}");
    assert!(refusal.contains("no-exec-into-production"), "{refusal}");
    // ... and the refused exec never reached the container.
    let prod_logs = tenant(&kubeconfig, &["logs", "prod-0"]).unwrap();
    assert!(
        prod_logs.contains("GET /exec-before-the-policy"),
        "{prod_logs}"
    );
    assert!(!prod_logs.contains("/exec-refused"), "{prod_logs}");
    // ... while another pod still execs.
    exec_get(&kubeconfig, "dev-0", "/exec-beside-the-policy").unwrap();

    delete_virtual_cluster(&client, &ns.name, VC).await;
    ns.delete(&client).await;
}
