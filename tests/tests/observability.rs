//! The chart's alert rules and Grafana dashboard ask only for series that exist: every vnest_*
//! and vcluster_* metric they use is one the running binaries export, and every other one
//! comes from the exporters the chart README names (kube-state-metrics, cAdvisor, kubelet).

use std::{collections::BTreeSet, process::Command, time::Duration};

use serde_json::{Value, json};
use vnest_tests::{
    bed,
    bed::{repo_root, run},
    fixtures::{free_port, ready_virtual_cluster, setup},
    syncer::{SyncerProcess, SyncerWiring},
    wait,
};

/// Series prefixes of the exporters a vnest monitoring setup runs beside Prometheus.
const EXTERNAL_PREFIXES: &[&str] = &["kube_", "container_", "kubelet_"];

/// Metric names in a PromQL expression: identifiers outside label matchers, range selectors,
/// strings and `by`/`on`/`without`/`ignoring` lists, and not followed by `(` (functions).
fn metric_names(expr: &str) -> BTreeSet<String> {
    const KEYWORDS: &[&str] = &["and", "or", "unless", "bool", "group_left", "group_right"];
    let chars: Vec<char> = expr.chars().collect();
    let mut names = BTreeSet::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '{' || c == '[' || c == '"' {
            let close = match c {
                '{' => '}',
                '[' => ']',
                _ => '"',
            };
            i += 1;
            while i < chars.len() && chars[i] != close {
                i += 1;
            }
            i += 1;
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let mut next = i;
            while next < chars.len() && chars[next] == ' ' {
                next += 1;
            }
            let rest: String = chars[next..].iter().collect();
            // `f(...)`, and aggregations written `sum by (...) (...)`.
            let is_call = rest.starts_with('(')
                || rest.starts_with("by (")
                || rest.starts_with("by(")
                || rest.starts_with("without");
            if ["by", "on", "without", "ignoring"].contains(&word.as_str()) && is_call {
                while i < chars.len() && chars[i] != ')' {
                    i += 1;
                }
            } else if !is_call && !KEYWORDS.contains(&word.as_str()) {
                names.insert(word);
            }
        } else if c.is_ascii_digit() {
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                i += 1;
            }
        } else {
            i += 1;
        }
    }
    names
}

/// The PromQL scanner finds metric names and skips functions, labels and durations.
#[test]
fn promql_names_are_found_and_functions_labels_and_durations_are_not() {
    let names = metric_names(
        r#"histogram_quantile(0.99, sum by (le) (rate(vnest_x_bucket{a="b_c"}[5m]))) and on (namespace) kube_y > 0.85"#,
    );
    assert_eq!(
        names,
        BTreeSet::from(["vnest_x_bucket".to_string(), "kube_y".to_string()])
    );
}

fn helm_template(sets: &[&str]) -> Vec<Value> {
    let chart = repo_root().join("charts/vnest");
    let mut cmd = Command::new(bed().bin("helm"));
    cmd.args(["template", "rel"]).arg(chart);
    for set in sets {
        cmd.args(["--set", set]);
    }
    serde_yaml::Deserializer::from_str(&run(&mut cmd))
        .map(|doc| serde::Deserialize::deserialize(doc).unwrap())
        .filter(|doc: &Value| !doc.is_null())
        .collect()
}

/// Every PromQL expression of the rendered alert rules and dashboard.
fn chart_expressions() -> Vec<String> {
    let docs = helm_template(&[
        "prometheusRule.enabled=true",
        "grafanaDashboard.enabled=true",
    ]);
    let mut exprs = Vec::new();
    let rule = docs
        .iter()
        .find(|d| d["kind"] == "PrometheusRule")
        .expect("a PrometheusRule");
    for group in rule["spec"]["groups"].as_array().unwrap() {
        for r in group["rules"].as_array().unwrap() {
            exprs.push(r["expr"].as_str().unwrap().to_string());
        }
    }
    let dashboard = docs
        .iter()
        .find(|d| {
            d["kind"] == "ConfigMap" && d["metadata"]["name"] == "rel-vnest-operator-dashboard"
        })
        .expect("the dashboard ConfigMap");
    let dashboard: Value =
        serde_json::from_str(dashboard["data"]["vnest.json"].as_str().unwrap()).unwrap();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            exprs.push(target["expr"].as_str().unwrap().to_string());
        }
    }
    exprs
}

/// Names of the series in a Prometheus text exposition.
fn exposed(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| l.split(['{', ' ']).next())
        .map(String::from)
        .collect()
}

/// The operator's and the syncer's series once a VirtualCluster is Ready and synced.
async fn exported_series() -> BTreeSet<String> {
    let (client, ns, operator) = setup("obs").await;
    ready_virtual_cluster(&client, &ns.name, "vc", json!({})).await;
    let mut series = exposed(&operator.metrics().await.expect("operator metrics"));
    let virtual_ns = format!("{}-virtual", ns.name);
    let wiring = SyncerWiring::from_operator(&client, &ns.name, "vc", &virtual_ns).await;
    let syncer = SyncerProcess::start(&wiring, free_port());
    let text = wait::until("syncer metrics", Duration::from_secs(30), || async {
        let text = syncer.get("/metrics").await?;
        if text.contains("vcluster_syncer_reconcile_errors_total{") {
            Ok(text)
        } else {
            Err("no error series yet".to_string())
        }
    })
    .await;
    series.extend(exposed(&text));
    ns.delete(&client).await;
    series
}

/// Every metric an alert rule or dashboard panel uses is exported by the operator or syncer.
#[tokio::test]
async fn every_metric_an_alert_or_panel_uses_is_exported() {
    let exprs = chart_expressions();
    assert!(exprs.len() >= 10, "{exprs:?}");
    let exported = exported_series().await;
    let mut missing = Vec::new();
    for expr in &exprs {
        for name in metric_names(expr) {
            let ours = name.starts_with("vnest_") || name.starts_with("vcluster_");
            if ours && !exported.contains(&name) {
                missing.push(format!("{name} (in {expr})"));
            } else if !ours && !EXTERNAL_PREFIXES.iter().any(|p| name.starts_with(p)) {
                missing.push(format!("{name}: from no exporter the chart README names"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "not exported: {missing:#?}\nexported: {exported:?}"
    );
}
