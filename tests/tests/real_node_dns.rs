//! DNS in a virtual cluster, for real on the bed's node: the CoreDNS vnest keeps in the virtual
//! cluster's `kube-system` runs as a synced pod, and tenant pods find each other's Services by
//! name in the cluster domain the spec sets — and of the host's only what
//! `networking.resolveDNS` maps in. The bed's host runs no DNS server, so the test starts one
//! (CoreDNS answering two names from its `hosts` plugin) and names it with `--host-dns`.

use std::{process::Command, time::Duration};

use k8s_openapi::api::core::v1::{Pod, Service};
use kube::{Api, api::PostParams};
use serde_json::json;
use vnest_crds::VirtualCluster;
use vnest_tests::{
    bed,
    bed::repo_root,
    fixtures::{create_virtual_cluster, free_port, host_namespace, wait_condition},
    node::{
        RealNode, START, all_containers_ready, delete_data_volume, echo_pod_spec, echo_workload,
        local_image, ready_echo_pods, tenant_kubeconfig_through_service, tenant_kubectl as tenant,
    },
    operator::OperatorProcess,
    wait,
};

const VC: &str = "vc";
/// Not `cluster.local`: the search path and the DNS server follow the spec.
const DOMAIN: &str = "tenant.test";
const CONVERGE: Duration = Duration::from_secs(120);

/// This workspace's syncer, imported under a tag of its own: the shared tag is re-imported by
/// every worktree that runs real-node tests on the bed, and the control-plane pod would start
/// whichever build came last.
fn private_syncer_image() -> String {
    let reference = format!(
        "ghcr.io/vnest-dev/vnest-syncer:{}-dns-test",
        env!("CARGO_PKG_VERSION")
    );
    let script = repo_root().join("tests/testbed/images.sh");
    // Only this image and CoreDNS's: the shared tags stay whatever the bed's owner imported.
    let out = Command::new("bash")
        .arg(&script)
        .args(["only", &reference, &local_image("coredns")])
        .env("VNEST_TESTBED_DIR", bed().var("VNEST_TESTBED_DIR"))
        .env("VNEST_SYNCER_IMAGE", &reference)
        .output()
        .expect("run images.sh");
    assert!(
        out.status.success(),
        "images.sh failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    reference
}

/// Whether `vc` still has the spec's DNS fields (a CRD without them prunes them).
fn keeps_dns_fields(vc: &VirtualCluster) -> Result<(), String> {
    let spec = &vc.spec;
    if spec.networking.advanced.cluster_domain == DOMAIN
        && spec.networking.resolve_dns.len() == 5
        && !spec
            .control_plane
            .coredns
            .deployment
            .node_selector
            .is_empty()
    {
        Ok(())
    } else {
        Err(format!(
            "the host's CRD pruned the DNS fields (another worktree's CRD?): {:?} {:?}",
            spec.networking, spec.control_plane.coredns
        ))
    }
}

/// What the host's DNS server answers: two names outside any cluster.
const HOST_NAMES: [(&str, &str); 2] = [
    ("api.corp.internal", "10.77.0.5"),
    ("db.corp.internal", "10.77.0.6"),
];

/// A host DNS server on the real node (CoreDNS from the bed's image, answering [`HOST_NAMES`])
/// behind Service `host-dns` port 53, and host Service `postgres` (no pods: only its ClusterIP
/// is mapped), in host namespace `ns`.
fn host_objects(ns: &str, placement: &serde_json::Value) -> String {
    let hosts: String = HOST_NAMES
        .iter()
        .map(|(name, ip)| format!("        {ip} {name}\n"))
        .collect();
    let corefile = format!(".:1053 {{\n    errors\n    hosts {{\n{hosts}    }}\n}}\n");
    let labels = json!({ "app": "host-dns" });
    let doc = json!({
        "apiVersion": "v1", "kind": "List", "items": [
            {
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": { "name": "host-dns", "namespace": ns },
                "data": { "Corefile": corefile },
            },
            {
                "apiVersion": "v1", "kind": "Pod",
                "metadata": { "name": "host-dns", "namespace": ns, "labels": labels },
                "spec": {
                    "nodeSelector": placement["nodeSelector"],
                    "tolerations": placement["tolerations"],
                    "terminationGracePeriodSeconds": 1,
                    "dnsPolicy": "Default",
                    "securityContext": { "runAsNonRoot": true, "runAsUser": 65532, "seccompProfile": { "type": "RuntimeDefault" } },
                    "containers": [{
                        "name": "coredns", "image": local_image("coredns"), "imagePullPolicy": "Never",
                        "args": ["-conf", "/etc/coredns/Corefile"],
                        "securityContext": { "allowPrivilegeEscalation": false, "capabilities": { "drop": ["ALL"] } },
                        "volumeMounts": [{ "name": "config", "mountPath": "/etc/coredns" }],
                    }],
                    "volumes": [{ "name": "config", "configMap": { "name": "host-dns" } }],
                },
            },
            {
                "apiVersion": "v1", "kind": "Service",
                "metadata": { "name": "host-dns", "namespace": ns },
                "spec": { "selector": labels, "ports": [
                    { "name": "dns", "port": 53, "targetPort": 1053, "protocol": "UDP" },
                    { "name": "dns-tcp", "port": 53, "targetPort": 1053, "protocol": "TCP" },
                ] },
            },
            {
                "apiVersion": "v1", "kind": "Service",
                "metadata": { "name": "postgres", "namespace": ns },
                "spec": { "ports": [{ "port": 5432 }] },
            },
        ]
    });
    serde_json::to_string(&doc).unwrap()
}

/// Two vnest-echo pods on the real node behind Service `echo` and headless Service
/// `echo-headless`, in virtual namespace `default`.
fn workload(placement: &serde_json::Value) -> String {
    let mut items = echo_workload(placement);
    items.push(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": { "name": "echo-headless", "namespace": "default" },
        "spec": { "clusterIP": "None", "selector": { "app": "echo" }, "ports": [{ "port": 8080 }] },
    }));
    // A pod with a subdomain, whose `/etc/hosts` must name it in the virtual cluster.
    let mut querier = echo_pod_spec(placement);
    querier["hostname"] = json!("querier");
    querier["subdomain"] = json!("echo-headless");
    items.push(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": "querier", "namespace": "default", "labels": { "app": "querier" } },
        "spec": querier,
    }));
    json!({ "apiVersion": "v1", "kind": "List", "items": items }).to_string()
}

/// A VirtualCluster (distro k8s, cluster domain `tenant.test`) on the real node gets its CoreDNS
/// from vnest; a tenant pod calls another tenant Service by short name and by FQDN, a headless
/// Service resolves to its pods' addresses, each `resolveDNS` mapping (host Service, hostname,
/// forwarded zone, address) answers as mapped while an entry over a virtual Service is left out
/// with a Warning event, a mapped host Service that goes and comes back is reported and then
/// served at its new ClusterIP, neither an unmapped host Service nor the host copy of the
/// tenant's own Service resolves from inside, and a pod with a subdomain finds itself in its
/// `/etc/hosts` by its virtual name.
#[tokio::test]
async fn tenant_pods_resolve_virtual_services_and_only_the_mapped_host_names() {
    // Not `node::real_node()`: it imports every workspace image under the shared tags, which
    // other worktrees' tests on the bed run.
    let node = RealNode {
        name: bed().var("VNEST_TESTBED_NODE").to_string(),
        label: bed().var("VNEST_TESTBED_NODE_LABEL").to_string(),
    };
    assert!(
        !node.name.starts_with("absent"),
        "the bed has no real node: {}",
        node.name
    );
    let (client, ns) = host_namespace("dns").await;
    let syncer_image = private_syncer_image();
    let placement = node.placement();
    // The host's DNS server and the host Service an entry maps, before the virtual cluster.
    let host_manifest = std::env::temp_dir().join(format!("vnest-dns-{}-host.json", ns.name));
    std::fs::write(&host_manifest, host_objects(&ns.name, &placement)).unwrap();
    bed()
        .kubectl(&["apply", "-f", host_manifest.to_str().unwrap()])
        .unwrap();
    let services: Api<Service> = Api::namespaced(client.clone(), &ns.name);
    let cluster_ip = |name: &'static str| {
        let services = services.clone();
        async move {
            let service = services.get(name).await.unwrap();
            service.spec.and_then(|s| s.cluster_ip).unwrap()
        }
    };
    let host_dns = cluster_ip("host-dns").await;
    let postgres = cluster_ip("postgres").await;
    let _operator = OperatorProcess::start_with_args(
        bed(),
        &ns.name,
        "op-a",
        free_port(),
        &[
            format!("--syncer-image={syncer_image}"),
            format!("--host-dns={host_dns}"),
        ],
    );
    node.provide_data_volume(&client, &ns.name, VC).await;
    let mut control_plane = node.control_plane();
    control_plane["coredns"] = json!({ "deployment": placement });
    let spec = json!({
        "controlPlane": control_plane,
        "networking": {
            "advanced": { "clusterDomain": DOMAIN },
            "resolveDNS": [
                { "service": "default/db", "target": { "hostService": format!("{}/postgres", ns.name) } },
                { "hostname": "app.tenant.example", "target": { "hostname": HOST_NAMES[0].0 } },
                { "hostname": "*.corp.internal", "target": "host" },
                { "hostname": "legacy.example.com", "target": { "ip": "10.1.2.3" } },
                // The virtual cluster's own `kubernetes` Service has this name: not served.
                { "service": "default/kubernetes", "target": { "ip": "10.9.9.9" } },
            ],
        },
        "policies": { "podSecurityStandard": "restricted" },
    });
    // The bed's API server is shared: wait until it serves this CRD's schema (a dry run keeps
    // the new fields), and check the stored object kept them.
    wait::until(
        "the host serving this workspace's CRD",
        CONVERGE,
        || async {
            let probe: VirtualCluster = serde_json::from_value(json!({
                "apiVersion": "vnest.dev/v1alpha1", "kind": "VirtualCluster",
                "metadata": { "name": VC, "namespace": ns.name }, "spec": spec,
            }))
            .unwrap();
            let dry = Api::<VirtualCluster>::namespaced(client.clone(), &ns.name)
                .create(
                    &PostParams {
                        dry_run: true,
                        ..Default::default()
                    },
                    &probe,
                )
                .await
                .map_err(|e| e.to_string())?;
            keeps_dns_fields(&dry)
        },
    )
    .await;
    let created = create_virtual_cluster(&client, &ns.name, VC, spec).await;
    keeps_dns_fields(&created).expect("the stored VirtualCluster");
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns.name);
    all_containers_ready(&pods, "vc-0", &node.name, START).await;
    wait_condition(&client, &ns.name, VC, "Ready", "True", CONVERGE).await;
    let kubeconfig = tenant_kubeconfig_through_service(&client, &ns.name, VC).await;

    // vnest's CoreDNS runs in the virtual kube-system, as a real container on the node.
    wait::until(
        "CoreDNS ready in the virtual kube-system",
        START,
        || async {
            let ready = tenant(
                &kubeconfig,
                &[
                    "-n",
                    "kube-system",
                    "get",
                    "deployment",
                    "coredns",
                    "-o",
                    "jsonpath={.status.readyReplicas}",
                ],
            )?;
            if ready.trim() == "1" {
                Ok(())
            } else {
                Err(format!("readyReplicas {ready:?}"))
            }
        },
    )
    .await;

    // A host Service the tenant has no mapping for, in a host namespace of its own.
    let hidden = "hidden";
    let service: Service = serde_json::from_value(json!({
        "metadata": { "name": hidden },
        "spec": { "ports": [{ "port": 80 }] },
    }))
    .unwrap();
    services
        .create(&PostParams::default(), &service)
        .await
        .unwrap();

    let manifest = std::env::temp_dir().join(format!("vnest-dns-{}-workload.json", ns.name));
    std::fs::write(&manifest, workload(&placement)).unwrap();
    tenant(&kubeconfig, &["apply", "-f", manifest.to_str().unwrap()]).unwrap();
    let running = ready_echo_pods(&kubeconfig, START).await;
    let client_pod = running[0].0.clone();
    let exec = |args: &[&str]| {
        let mut all = vec!["exec", client_pod.as_str(), "--", "vnest-echo"];
        all.extend_from_slice(args);
        tenant(&kubeconfig, &all)
    };

    // By short name (the pod's search path) and by FQDN in the spec's domain.
    let fqdn = format!("echo.default.svc.{DOMAIN}");
    for (what, url) in [
        ("short name", "http://echo/short".to_string()),
        ("FQDN", format!("http://{fqdn}/fqdn")),
    ] {
        let path = url.rsplit('/').next().unwrap().to_string();
        let answer = wait::until(
            &format!("a call to the Service by {what}"),
            CONVERGE,
            || async { exec(&["get", &url]) },
        )
        .await;
        assert!(answer.contains(&format!("GET /{path}")), "{answer}");
    }
    // ... at the Service's ClusterIP as the tenant sees it.
    let cluster_ip = tenant(
        &kubeconfig,
        &["get", "service", "echo", "-o", "jsonpath={.spec.clusterIP}"],
    )
    .unwrap();
    let resolved = exec(&["resolve", &fqdn]).unwrap();
    assert_eq!(resolved.trim(), cluster_ip.trim(), "{fqdn}");

    // A headless Service resolves to its pods.
    let mut pod_ips: Vec<String> = running.iter().map(|(_, ip)| ip.clone()).collect();
    pod_ips.sort();
    wait::until(
        "the headless Service resolving to both pods",
        CONVERGE,
        || async {
            let out = exec(&["resolve", &format!("echo-headless.default.svc.{DOMAIN}")])?;
            let mut ips: Vec<String> = out.lines().map(str::to_string).collect();
            ips.sort();
            if ips == pod_ips {
                Ok(())
            } else {
                Err(format!("{ips:?}, pods {pod_ips:?}"))
            }
        },
    )
    .await;

    // A pod with a subdomain finds itself in `/etc/hosts` by its virtual name (the host
    // kubelet wrote the host namespace and domain there; the rewrite init container, within
    // the restricted standard, wrote the virtual ones).
    let own_name = format!("querier.echo-headless.default.svc.{DOMAIN}");
    let hosts = wait::until("the querier pod's /etc/hosts", START, || async {
        tenant(
            &kubeconfig,
            &["exec", "querier", "--", "vnest-echo", "cat", "/etc/hosts"],
        )
    })
    .await;
    let own_line = hosts.lines().find(|l| l.ends_with("querier"));
    assert!(
        own_line.is_some_and(|l| l.contains(&own_name) && !l.contains(&ns.name)),
        "{hosts}"
    );
    // ... and the tenant sees its pod Running with no init container it did not ask for.
    wait::until(
        "the querier pod Running as the tenant sees it",
        START,
        || async {
            let seen = tenant(
                &kubeconfig,
                &[
                    "get",
                    "pod",
                    "querier",
                    "-o",
                    "jsonpath={.status.phase}/{.status.initContainerStatuses[*].name}",
                ],
            )?;
            (seen.trim() == "Running/").then_some(()).ok_or(seen)
        },
    )
    .await;

    // resolveDNS: the mapped host Service answers with its host ClusterIP, the mapped hostname
    // with its target's address from the host's DNS server, the forwarded zone and the fixed
    // address as mapped; the entry over the virtual `kubernetes` Service is not served: that
    // name answers with the control plane's host Service, where tenant pods reach the API.
    let kubernetes = services
        .get(VC)
        .await
        .unwrap()
        .spec
        .unwrap()
        .cluster_ip
        .unwrap();
    let mapped = [
        (format!("db.default.svc.{DOMAIN}"), postgres.clone()),
        (
            "app.tenant.example".to_string(),
            HOST_NAMES[0].1.to_string(),
        ),
        (HOST_NAMES[1].0.to_string(), HOST_NAMES[1].1.to_string()),
        ("x.legacy.example.com".to_string(), "10.1.2.3".to_string()),
        (format!("kubernetes.default.svc.{DOMAIN}"), kubernetes),
    ];
    for (name, ip) in &mapped {
        wait::until(&format!("{name} resolving to {ip}"), CONVERGE, || async {
            let out = exec(&["resolve", name])?;
            if out.trim() == ip.trim() {
                Ok(())
            } else {
                Err(out)
            }
        })
        .await;
    }
    // The Warning events on the coredns ConfigMap, a `<type> <reason> <note>` line each.
    let coredns_events = || {
        tenant(
            &kubeconfig,
            &[
                "-n",
                "kube-system",
                "get",
                "events",
                "--field-selector",
                "involvedObject.kind=ConfigMap,involvedObject.name=coredns",
                "-o",
                r#"jsonpath={range .items[*]}{.type} {.reason} {.message}{"\n"}{end}"#,
            ],
        )
    };
    let event_starting = |prefix: String| async move {
        let out = coredns_events()?;
        if out.lines().any(|l| l.starts_with(&prefix)) {
            Ok(out)
        } else {
            Err(out)
        }
    };
    let in_use = wait::until(
        "a Warning event on the coredns ConfigMap naming resolveDNS[4]",
        CONVERGE,
        || event_starting("Warning DNSNameInUse spec.networking.resolveDNS[4]: ".to_string()),
    )
    .await;
    assert!(
        in_use.contains("virtual Service default/kubernetes"),
        "{in_use}"
    );

    // A mapped host Service that goes away leaves its entry out of the Corefile, with a
    // Warning event; created again, its (new) ClusterIP is served. The Corefile is checked,
    // not a lookup: CoreDNS reloads it only after the kubelet updates the mounted file.
    let corefile = || {
        tenant(
            &kubeconfig,
            &[
                "-n",
                "kube-system",
                "get",
                "configmap",
                "coredns",
                "-o",
                "jsonpath={.data.Corefile}",
            ],
        )
    };
    let db_zone = format!("db.default.svc.{DOMAIN}:1053");
    let served = corefile().unwrap();
    assert!(served.contains(&db_zone), "{served}");
    assert!(served.contains(&format!("IN A {postgres}")), "{served}");
    services
        .delete("postgres", &Default::default())
        .await
        .unwrap();
    wait::until(
        "the deleted host Service's entry left out",
        CONVERGE,
        || async {
            let text = corefile()?;
            if text.contains(&db_zone) {
                Err(text)
            } else {
                Ok(())
            }
        },
    )
    .await;
    wait::until(
        "a Warning event naming resolveDNS[0]'s missing host Service",
        CONVERGE,
        || {
            event_starting(
                "Warning HostServiceNotFound spec.networking.resolveDNS[0].target.hostService: "
                    .to_string(),
            )
        },
    )
    .await;
    let again: Service = serde_json::from_value(json!({
        "metadata": { "name": "postgres" },
        "spec": { "ports": [{ "port": 5432 }] },
    }))
    .unwrap();
    let created = services
        .create(&PostParams::default(), &again)
        .await
        .unwrap();
    let address = created.spec.and_then(|s| s.cluster_ip).unwrap();
    wait::until(
        "the re-created host Service's ClusterIP served",
        CONVERGE,
        || async {
            let text = corefile()?;
            if text.contains(&db_zone) && text.contains(&format!("IN A {address}")) {
                Ok(())
            } else {
                Err(text)
            }
        },
    )
    .await;

    // Nothing else of the host resolves: the unmapped host Service, under the host's domain or the
    // tenant's, nor the host copy of the tenant's own Service. Tenant names keep resolving
    // meanwhile, so each failure is this name's, not a broken resolver.
    let host_copy = format!("echo-x-default-x-{VC}");
    let host_names = [
        format!("{hidden}.{}.svc.cluster.local", ns.name),
        format!("{hidden}.{}.svc.{DOMAIN}", ns.name),
        format!("{hidden}.{}", ns.name),
        // Mapped under another name only.
        format!("postgres.{}.svc.cluster.local", ns.name),
        format!("{host_copy}.{}.svc.cluster.local", ns.name),
        format!("{host_copy}.{}", ns.name),
    ];
    // What the pod's resolver answers for `name`: its addresses, or its lookup error. A failed
    // exec (the stream through the proxy can drop) is tried again, never taken for an answer.
    let lookup = |name: String| {
        let exec = &exec;
        async move {
            let mut last = String::new();
            for _ in 0..3 {
                match exec(&["resolve", &name]) {
                    Ok(out) => return Ok(Ok(out)),
                    Err(e) if e.contains("lookup ") => return Ok(Err(e)),
                    Err(e) => last = e,
                }
            }
            Err(format!(
                "{name}: no answer from the resolver, exec failed: {last}"
            ))
        }
    };
    wait::holds(
        "host Services stay unresolvable",
        Duration::from_secs(10),
        || async {
            lookup("echo".to_string())
                .await?
                .map_err(|e| format!("echo: {e}"))?;
            for name in &host_names {
                if let Ok(out) = lookup(name.clone()).await? {
                    return Err(format!("{name} resolved to {out}"));
                }
            }
            Ok::<_, String>(())
        },
    )
    .await;

    Api::<VirtualCluster>::namespaced(client.clone(), &ns.name)
        .delete(VC, &Default::default())
        .await
        .unwrap();
    // Gone with its finalizer done, while this test's operator still runs.
    let virtual_clusters = Api::<VirtualCluster>::namespaced(client.clone(), &ns.name);
    wait::until(
        "the VirtualCluster and its control plane gone",
        START,
        || async {
            let vc = virtual_clusters
                .get_opt(VC)
                .await
                .map_err(|e| e.to_string())?;
            let pod = pods.get_opt("vc-0").await.map_err(|e| e.to_string())?;
            match (vc, pod) {
                (None, None) => Ok(()),
                (vc, pod) => Err(format!(
                    "VirtualCluster there: {}, vc-0 there: {}",
                    vc.is_some(),
                    pod.is_some()
                )),
            }
        },
    )
    .await;
    delete_data_volume(&client, &ns.name, VC).await;
    ns.delete(&client).await;
}
