//! The Kubernetes conformance suite's own client against a vnest virtual cluster: `e2e.test`,
//! built from `k8s.io/kubernetes` at the bed's version, run by `hack/conformance.sh` as the
//! tenant of a `k8s` virtual cluster on the real node. CI runs the subset below (specs that
//! finish in seconds and need no image but agnhost and the busybox stand-in); `bash
//! hack/conformance.sh` runs the whole `[Conformance]` set, with the host bed as baseline.

use std::{path::Path, process::Command};

use vnest_tests::{bed, bed::repo_root, node::real_node};

/// `[Conformance]` specs CI runs, by a unique part of their names: discovery, watches, field
/// validation, chunked lists, garbage collection, quota and CRDs through vnest's proxy, and
/// admission and conversion webhooks served by agnhost pods the syncer runs on the real node and
/// the virtual API server reaches through their synced Services (over its egress to the syncer),
/// one of them denying `kubectl attach`, which reaches the webhook only because pod streams pass
/// the virtual API server; a Service deleted right after its creation (it keeps the address its
/// virtual API server gave it), the virtual `kubernetes` Service's Endpoints and EndpointSlice
/// (the control-plane pod, written by the syncer), a pod's service-link variables, ephemeral
/// containers added to a running pod, a Job whose evicted pods end Failed with their eviction's
/// condition (busybox stand-in pods), and DNS as the DNS specs' probe pods see it through vnest's
/// CoreDNS (the cluster's and a namespace's Services, an ExternalName Service changed twice,
/// and a pod's own name in its `/etc/hosts`; dig and getent stand-ins).
const SUBSET: &[&str] = &[
    "AggregatedDiscovery should support aggregated discovery interface [Conformance]",
    "Discovery should validate PreferredVersion for each APIGroup [Conformance]",
    "server version should find the server version [Conformance]",
    "FieldValidation should detect unknown and duplicate fields of a typed object [Conformance]",
    "Watchers should be able to restart watching from the last resource version observed by the previous watch [Conformance]",
    "Watchers should observe add, update, and delete watch notifications on configmaps [Conformance]",
    "Servers with support for API chunking should return chunks of results for list calls [Conformance]",
    "Garbage collector should delete RS created by deployment when not orphaning [Conformance]",
    "Garbage collector should delete pods created by rc when not orphaning [Conformance]",
    "Simple CustomResourceDefinition creating/deleting custom resource definition objects works [Conformance]",
    "ResourceQuota should create a ResourceQuota and capture the life of a pod. [Conformance]",
    "ResourceQuota should create a ResourceQuota and capture the life of a replica set. [Conformance]",
    "ResourceQuota should create a ResourceQuota and capture the life of a service. [Conformance]",
    "API Server should have Endpoints and EndpointSlices pointing to API Server [Conformance]",
    "Pods should contain environment variables for services [Conformance]",
    "Ephemeral Containers will start an ephemeral container in an existing pod [Conformance]",
    "Ephemeral Containers should update the ephemeral containers in an existing pod [Conformance]",
    "Job should allow to use a pod failure policy to ignore failure matching on DisruptionTarget condition [Conformance]",
    "API priority and fairness should support FlowSchema API operations [Conformance]",
    "AdmissionWebhook [Privileged:ClusterAdmin] should mutate configmap [Conformance]",
    "AdmissionWebhook [Privileged:ClusterAdmin] should be able to deny pod and configmap creation [Conformance]",
    "AdmissionWebhook [Privileged:ClusterAdmin] should be able to deny attaching pod [Conformance]",
    "CustomResourceConversionWebhook [Privileged:ClusterAdmin] should be able to convert from CR v1 to CR v2 [Conformance]",
    "DNS should provide DNS for the cluster [Conformance]",
    "DNS should provide DNS for services [Conformance]",
    "DNS should provide /etc/hosts entries for the cluster [Conformance]",
    "DNS should provide DNS for ExternalName services [Conformance]",
];

/// Escapes regular-expression metacharacters, so a spec name matches only itself in the focus.
fn escaped(name: &str) -> String {
    name.chars()
        .flat_map(|c| {
            let meta = "\\.+*?()|[]{}^$".contains(c);
            meta.then_some('\\').into_iter().chain([c])
        })
        .collect()
}

/// `(name, status)` of every `<testcase>` in a ginkgo JUnit report.
fn testcases(report: &str) -> Vec<(String, String)> {
    fn attribute(tag: &str, name: &str) -> String {
        let key = format!(" {name}=\"");
        tag.find(&key)
            .map(|at| &tag[at + key.len()..])
            .and_then(|rest| rest.split('"').next())
            .unwrap_or_default()
            .replace("&#39;", "'")
            .replace("&quot;", "\"")
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&amp;", "&")
    }
    report
        .split("<testcase")
        .skip(1)
        .filter_map(|rest| rest.split('>').next())
        .map(|tag| (attribute(tag, "name"), attribute(tag, "status")))
        .collect()
}

/// Every spec of the CI subset passes when the upstream e2e binary runs it as a vnest tenant.
#[tokio::test]
async fn conformance_subset_passes_in_a_virtual_cluster() {
    real_node();
    let out = std::env::temp_dir().join(format!("vnest-conformance-{}", std::process::id()));
    let focus = SUBSET
        .iter()
        .map(|name| escaped(name))
        .collect::<Vec<_>>()
        .join("|");
    let script = repo_root().join("hack/conformance.sh");
    let status = Command::new("bash")
        .arg(&script)
        .args([
            "--focus", &focus, "--nodes", "4", "--name", "ci", "--clean", "--out",
        ])
        .arg(&out)
        .env(
            "VNEST_TESTBED_ENV",
            Path::new(bed().var("VNEST_TESTBED_DIR")).join("env"),
        )
        .status()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    assert!(status.success(), "{} failed", script.display());

    let report = std::fs::read_to_string(out.join("virtual/junit_01.xml"))
        .expect("e2e.test wrote its JUnit report");
    let cases = testcases(&report);
    let log = out.join("virtual/e2e.log");
    for name in SUBSET {
        let outcome: Vec<&str> = cases
            .iter()
            .filter(|(case, _)| case.contains(name))
            .map(|(_, status)| status.as_str())
            .collect();
        assert_eq!(
            outcome,
            ["passed"],
            "spec {name:?}: {outcome:?} (log {})",
            log.display()
        );
    }
    let _ = std::fs::remove_dir_all(&out);
}

/// Spec names are escaped so the focus regex matches exactly that spec.
#[test]
fn spec_names_are_escaped_for_the_focus() {
    assert_eq!(
        escaped("[sig-apps] Job should run a job to completion [Conformance]"),
        r"\[sig-apps\] Job should run a job to completion \[Conformance\]"
    );
}

/// The JUnit report's test cases are read with their names unescaped and their pass/fail status.
#[test]
fn junit_testcases_are_read_with_their_status() {
    let report = r#"<testsuite><testcase name="[It] [sig-x] it&#39;s fine [Conformance]" status="passed" time="1"></testcase>
<testcase name="[It] [sig-x] broken" classname="k" status="failed" time="2"><failure/></testcase></testsuite>"#;
    assert_eq!(
        testcases(report),
        [
            (
                "[It] [sig-x] it's fine [Conformance]".to_string(),
                "passed".to_string()
            ),
            ("[It] [sig-x] broken".to_string(), "failed".to_string()),
        ]
    );
}
