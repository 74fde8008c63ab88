//! Write-through benchmark on the real test bed (not a timed test):
//!
//! ```sh
//! cargo build -p vnest-operator && cargo build --release -p vnest-syncer
//! VNEST_SYNCER_BIN=$PWD/target/release/vnest-syncer \
//!   cargo bench -p vnest-tests --bench write_through -- 300    # N creates (default 300)
//! ```
//!
//! N flunders (the bed's k8s.io/sample-apiserver, an aggregated to-host resource) created by
//! the tenant through the syncer's proxy, each written through to the host before the
//! answer, against N created straight on the host; then N/10 creates the host rejects
//! (rolled back). Reports p50/p90/p99 of each, host writes per flunder, writes in 30 s of
//! idleness, rollback failures, and the syncer's peak RSS.

use std::time::{Duration, Instant};

use kube::{
    Api,
    api::{DynamicObject, PostParams},
    core::GroupVersionKind,
    discovery::ApiResource,
};
use serde_json::json;
use vnest_tests::{
    measure::{peak_rss_mib, report_ms},
    tenant::{TIMEOUT, setup},
    wait,
};

/// Width of the label column of the latency report.
const LABEL_WIDTH: usize = 44;

fn flunders() -> ApiResource {
    let gvk = GroupVersionKind::gvk("wardle.example.com", "v1beta1", "Flunder");
    ApiResource::from_gvk_with_plural(&gvk, "flunders")
}

fn flunder(name: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "wardle.example.com/v1beta1", "kind": "Flunder",
        "metadata": { "name": name }, "spec": { "flunderReference": "x", "referenceType": "Flunder" },
    }))
    .expect("flunder JSON")
}

async fn timed_creates(
    api: &Api<DynamicObject>,
    names: &[String],
    expect_ok: bool,
) -> Vec<Duration> {
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        let start = Instant::now();
        let result = api.create(&PostParams::default(), &flunder(name)).await;
        out.push(start.elapsed());
        assert_eq!(result.is_ok(), expect_ok, "{name}: {result:?}");
    }
    out
}

#[tokio::main]
async fn main() {
    let n: usize = vnest_tests::measure::size_arg(300);
    let spec = json!({ "sync": { "toHost": { "customResources": {
        "flunders.wardle.example.com/v1beta1": { "enabled": true },
    } } } });
    let s = setup("wt-bench", spec).await;
    let syncer = s.start_syncer();
    wait::until("syncer ready", TIMEOUT, || async {
        let body = syncer.get("/readyz").await?;
        (body == "ok").then_some(()).ok_or(body)
    })
    .await;
    let res = flunders();
    let tenant: Api<DynamicObject> =
        Api::namespaced_with(syncer.tenant_client().await, &s.vns.name, &res);
    let host: Api<DynamicObject> = Api::namespaced_with(s.host.clone(), &s.ns.name, &res);
    let writes = || async { syncer.host_writes().await.unwrap_or(0.0) };

    println!("write-through: {n} flunders");
    let before = writes().await;
    let names: Vec<String> = (0..n).map(|i| format!("f-{i}")).collect();
    let through = timed_creates(&tenant, &names, true).await;
    // Let the asynchronous sync see every object before counting.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let per_object = (writes().await - before) / n as f64;
    let direct_names: Vec<String> = (0..n).map(|i| format!("direct-{i}")).collect();
    let direct = timed_creates(&host, &direct_names, true).await;

    // Rejections: the host bans the host names of these.
    let banned: Vec<String> = (0..n / 10).map(|i| format!("banned-{i}")).collect();
    let fischers: Api<DynamicObject> = Api::all_with(
        s.host.clone(),
        &ApiResource {
            group: "wardle.example.com".into(),
            version: "v1alpha1".into(),
            api_version: "wardle.example.com/v1alpha1".into(),
            kind: "Fischer".into(),
            plural: "fischers".into(),
        },
    );
    let fischer = format!("ban-{}", s.ns.name);
    let disallowed: Vec<String> = banned.iter().map(|b| s.host_name(b)).collect();
    fischers
        .create(
            &PostParams::default(),
            &serde_json::from_value(
                json!({ "apiVersion": "wardle.example.com/v1alpha1", "kind": "Fischer",
                "metadata": { "name": fischer }, "disallowedFlunders": disallowed }),
            )
            .unwrap(),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rejected = timed_creates(&tenant, &banned, false).await;

    let idle_start = writes().await;
    tokio::time::sleep(Duration::from_secs(30)).await;
    let idle = writes().await - idle_start;
    let failures = syncer
        .counter("vcluster_writethrough_rollback_failures_total")
        .await
        .unwrap_or(-1.0);

    report_ms(
        "tenant create, written through (proxy)",
        LABEL_WIDTH,
        &through,
    );
    report_ms(
        "host create, direct (the extension server)",
        LABEL_WIDTH,
        &direct,
    );
    report_ms(
        "tenant create the host rejects (rolled back)",
        LABEL_WIDTH,
        &rejected,
    );
    println!("  host writes per written-through flunder: {per_object:.2}");
    println!("  host writes in 30 s idle: {idle}");
    println!("  rollback failures: {failures}");
    println!("  syncer peak RSS: {:.1} MiB", peak_rss_mib(syncer.pid()));
    let _ = fischers.delete(&fischer, &Default::default()).await;
    drop(syncer);
    s.teardown().await;
}
