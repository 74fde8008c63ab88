//! Custom resources through the syncer as a real process on the operator's ServiceAccount:
//! CRD-backed resources (a CRD installed on the host per test run) synced both ways with
//! their schema copied, and the aggregated `flunders` of the bed's k8s.io/sample-apiserver
//! written through synchronously, with each rollback failure provoked and counted.
//!
//! The flunder tests share the virtual cluster's one generated `flunders` CRD, so they take
//! turns ([`WARDLE`]).

use std::time::Duration;

use kube::{
    Api,
    api::{DeleteParams, DynamicObject, Patch, PatchParams, PostParams},
    discovery::ApiResource,
};
use serde_json::{Value, json};
use vnest_tests::{
    SyncerProcess, bed,
    fixtures::free_port,
    scrape,
    tenant::{TIMEOUT, Tenant, absent, delete, merge_patch_status, present, setup},
    wait,
};

/// Turns of the tests that use `flunders.wardle.example.com`.
static WARDLE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const FLUNDERS: &str = "flunders.wardle.example.com";

fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: format!("{group}/{version}"),
        kind: kind.into(),
        plural: plural.into(),
    }
}

fn flunders(version: &str) -> ApiResource {
    resource("wardle.example.com", version, "Flunder", "flunders")
}

/// A VirtualCluster spec that syncs the tenant's flunders of `version` to the host.
fn flunders_to_host(version: &str) -> Value {
    json!({ "sync": { "toHost": { "customResources": {
        format!("{FLUNDERS}/{version}"): { "enabled": true },
    } } } })
}

fn object(value: Value) -> DynamicObject {
    serde_json::from_value(value).expect("object JSON")
}

async fn ready(syncer: &SyncerProcess) {
    wait::until("syncer ready", TIMEOUT, || async {
        let body = syncer.get("/readyz").await?;
        (body == "ok").then_some(()).ok_or(body)
    })
    .await;
}

/// Applies `yaml` to the host with the bed's kubectl.
fn host_apply(yaml: &str) {
    let file = std::env::temp_dir().join(format!(
        "vnest-cr-{}-{}.yaml",
        std::process::id(),
        free_port()
    ));
    std::fs::write(&file, yaml).expect("write manifest");
    bed()
        .kubectl(&["apply", "-f", file.to_str().unwrap()])
        .expect("kubectl apply");
}

fn crd_yaml(group: &str, plural: &str, kind: &str, scope: &str, spec_properties: &str) -> String {
    format!(
        r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: {plural}.{group}}}
spec:
  group: {group}
  names: {{plural: {plural}, singular: {singular}, kind: {kind}}}
  scope: {scope}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {{status: {{}}}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {{type: object, properties: {{{spec_properties}}}}}
          status: {{type: object, x-kubernetes-preserve-unknown-fields: true}}
"#,
        singular = plural.trim_end_matches('s'),
    )
}

async fn established(name: &str) {
    wait::until(&format!("CRD {name} Established"), TIMEOUT, || async {
        let out = bed().kubectl(&[
            "get",
            "crd",
            name,
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Established\")].status}",
        ])?;
        (out == "True").then_some(()).ok_or(out)
    })
    .await;
}

/// The value of `vcluster_writethrough_rollback_failures_total` for `reason`.
async fn rollback_failures(syncer: &SyncerProcess, reason: &str) -> f64 {
    let text = syncer.get("/metrics").await.unwrap_or_default();
    let series: String = text
        .lines()
        .filter(|l| l.contains(&format!("reason=\"{reason}\"")))
        .collect::<Vec<_>>()
        .join("\n");
    scrape::counter(&series, "vcluster_writethrough_rollback_failures_total")
}

fn log_of(syncer: &SyncerProcess) -> String {
    std::fs::read_to_string(&syncer.log).unwrap_or_default()
}

/// Merges `spec` into object `name`'s spec.
async fn merge_spec(api: &Api<DynamicObject>, name: &str, spec: Value) {
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({ "spec": spec })),
    )
    .await
    .unwrap_or_else(|e| panic!("patch {name}: {e}"));
}

/// Waits until `spec.<field>` of object `name` is `want`.
async fn until_spec(what: &str, api: &Api<DynamicObject>, name: &str, field: &str, want: Value) {
    wait::until(what, TIMEOUT, || async {
        let o = present(api, name).await?;
        (o.data["spec"][field] == want)
            .then_some(())
            .ok_or(o.data.to_string())
    })
    .await;
}

/// (name, served, storage) of each version of CRD `name` in the virtual cluster.
fn virtual_crd_versions(name: &str) -> Vec<(String, bool, bool)> {
    let out = bed()
        .kubectl_with(
            &bed().virtual_kubeconfig(),
            &["get", "crd", name, "-o", "json"],
        )
        .expect("virtual CRD");
    let crd: Value = serde_json::from_str(&out).expect("CRD JSON");
    crd["spec"]["versions"]
        .as_array()
        .expect("versions")
        .iter()
        .map(|v| {
            (
                v["name"].as_str().unwrap_or_default().to_string(),
                v["served"] == true,
                v["storage"] == true,
            )
        })
        .collect()
}

/// A host CRD's schema reaches the virtual cluster; its objects sync to and from the host, tenant edits kept until the host changes that field.
#[tokio::test]
async fn crd_backed_resources_copy_their_schema_and_sync_both_ways() {
    let group = format!("t{}-{}.vnest-tests.dev", std::process::id(), free_port());
    host_apply(&crd_yaml(
        &group,
        "widgets",
        "Widget",
        "Namespaced",
        "size: {type: integer}",
    ));
    host_apply(&crd_yaml(
        &group,
        "gadgets",
        "Gadget",
        "Cluster",
        "color: {type: string}, shape: {type: string}",
    ));
    established(&format!("widgets.{group}")).await;
    established(&format!("gadgets.{group}")).await;
    let widgets_key = format!("widgets.{group}");
    let gadgets_key = format!("gadgets.{group}/v1");
    let spec = json!({ "sync": {
        "toHost": { "customResources": { widgets_key.clone(): { "enabled": true } } },
        "fromHost": { "customResources": { gadgets_key: { "enabled": true, "scope": "Cluster" } } },
    } });
    let s = setup("cr-crd", spec).await;
    let widgets = resource(&group, "v1", "Widget", "widgets");
    let gadgets = resource(&group, "v1", "Gadget", "gadgets");
    let host_gadgets: Api<DynamicObject> = Api::all_with(s.host.clone(), &gadgets);
    let gadget = format!("g-{}", s.ns.name);
    host_gadgets
        .create(
            &PostParams::default(),
            &object(json!({
                "apiVersion": gadgets.api_version, "kind": "Gadget",
                "metadata": { "name": gadget, "labels": { "tier": "shared" } },
                "spec": { "color": "red", "shape": "round" },
            })),
        )
        .await
        .unwrap();
    let mut syncer = s.start_syncer();
    ready(&syncer).await;

    // The tenant's API server validates against the copied schema.
    let virt_widgets: Api<DynamicObject> =
        Api::namespaced_with(s.virt.clone(), &s.vns.name, &widgets);
    let invalid = virt_widgets
        .create(
            &PostParams::default(),
            &object(json!({ "apiVersion": widgets.api_version, "kind": "Widget",
                "metadata": { "name": "bad" }, "spec": { "size": "big" } })),
        )
        .await
        .unwrap_err();
    assert!(invalid.to_string().contains("spec.size"), "{invalid}");

    // To host: mirrored under the translated name; updates follow; host status comes back.
    virt_widgets
        .create(
            &PostParams::default(),
            &object(json!({ "apiVersion": widgets.api_version, "kind": "Widget",
                "metadata": { "name": "w" }, "spec": { "size": 3, "extra": "x" } })),
        )
        .await
        .unwrap();
    let host_widgets: Api<DynamicObject> =
        Api::namespaced_with(s.host.clone(), &s.ns.name, &widgets);
    let mirror = s.host_copy(&host_widgets, "w").await;
    let annotations = mirror.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(annotations["vcluster.loft.sh/object-name"], "w");
    assert_eq!(annotations["vcluster.loft.sh/object-namespace"], s.vns.name);
    let uid = virt_widgets.get("w").await.unwrap().metadata.uid.unwrap();
    assert_eq!(annotations["vcluster.loft.sh/object-uid"], uid);
    assert_eq!(mirror.data["spec"]["size"], 3);
    // Fields the copied schema does not know are pruned, as on the host.
    assert_eq!(mirror.data["spec"].get("extra"), None);
    merge_spec(&virt_widgets, "w", json!({ "size": 5 })).await;
    let host_w = s.host_name("w");
    until_spec(
        "host mirror follows the update",
        &host_widgets,
        &host_w,
        "size",
        json!(5),
    )
    .await;
    merge_patch_status(
        &host_widgets,
        &s.host_name("w"),
        json!({ "status": { "ready": true } }),
    )
    .await;
    wait::until(
        "host status back on the tenant's widget",
        TIMEOUT,
        || async {
            let w = present(&virt_widgets, "w").await?;
            (w.data["status"]["ready"] == true)
                .then_some(())
                .ok_or(w.data.to_string())
        },
    )
    .await;

    // From host: a read-only copy whose tenant edit stays until the host changes that field.
    let virt_gadgets: Api<DynamicObject> = Api::all_with(s.virt.clone(), &gadgets);
    let copy = wait::until("virtual copy of the host gadget", TIMEOUT, || {
        present(&virt_gadgets, &gadget)
    })
    .await;
    assert_eq!(copy.data["spec"]["color"], "red");
    assert_eq!(
        copy.metadata.labels.as_ref().unwrap()["vnest.dev/from-host"],
        "true"
    );
    assert_eq!(copy.metadata.labels.as_ref().unwrap()["tier"], "shared");
    merge_spec(&virt_gadgets, &gadget, json!({ "color": "blue" })).await;

    // A restarted syncer writes nothing back over the tenant's edit: its first pass over the
    // gadgets has run, and the edit is still there.
    syncer.kill();
    let syncer = s.start_syncer();
    ready(&syncer).await;
    wait::until(
        "the restarted syncer's first gadget reconcile",
        TIMEOUT,
        || async {
            let done = syncer.reconciles("gadgets.").await?;
            (done >= 1.0)
                .then_some(())
                .ok_or(format!("{done} reconciles"))
        },
    )
    .await;
    assert_eq!(
        virt_gadgets.get(&gadget).await.unwrap().data["spec"]["color"],
        "blue"
    );
    assert!(present(&host_widgets, s.host_name("w")).await.is_ok());

    merge_spec(&host_gadgets, &gadget, json!({ "shape": "square" })).await;
    until_spec(
        "host change of another field arrives",
        &virt_gadgets,
        &gadget,
        "shape",
        json!("square"),
    )
    .await;
    assert_eq!(
        virt_gadgets.get(&gadget).await.unwrap().data["spec"]["color"],
        "blue",
        "the tenant's edit stays"
    );
    merge_spec(&host_gadgets, &gadget, json!({ "color": "green" })).await;
    until_spec(
        "the host wins the field it changed",
        &virt_gadgets,
        &gadget,
        "color",
        json!("green"),
    )
    .await;

    // Deletes: the tenant's widget takes its mirror; the host's gadget takes the copy.
    delete(&virt_widgets, "w").await;
    wait::until("host mirror deleted", TIMEOUT, || {
        absent(&host_widgets, s.host_name("w"))
    })
    .await;
    delete(&host_gadgets, &gadget).await;
    wait::until("copy deleted", TIMEOUT, || absent(&virt_gadgets, &gadget)).await;

    // The host serves a new storage version v2 (the key names no version, so the host's
    // preferred one is synced): after a restart the virtual CRD stores v2 and keeps serving v1.
    let patch = json!([
        { "op": "replace", "path": "/spec/versions/0/storage", "value": false },
        { "op": "add", "path": "/spec/versions/-", "value": {
            "name": "v2", "served": true, "storage": true, "subresources": { "status": {} },
            "schema": { "openAPIV3Schema": { "type": "object", "x-kubernetes-preserve-unknown-fields": true } },
        } },
    ]);
    bed()
        .kubectl(&[
            "patch",
            "crd",
            &widgets_key,
            "--type=json",
            "-p",
            &patch.to_string(),
        ])
        .expect("add v2 to the host CRD");
    // The API server's discovery follows a CRD change asynchronously; the restarted syncer
    // resolves the version from discovery, so wait until the host prefers v2 there.
    wait::until("host discovery prefers v2", TIMEOUT, || async {
        let groups = s.host.list_api_groups().await.map_err(|e| e.to_string())?;
        let preferred = groups
            .groups
            .iter()
            .find(|g| g.name == group)
            .and_then(|g| g.preferred_version.as_ref())
            .map(|v| v.version.clone());
        (preferred.as_deref() == Some("v2"))
            .then_some(())
            .ok_or(format!("preferred version {preferred:?}"))
    })
    .await;
    drop(syncer);
    let syncer = s.start_syncer();
    ready(&syncer).await;
    let versions = virtual_crd_versions(&widgets_key);
    assert_eq!(
        versions,
        vec![
            ("v1".to_string(), true, false),
            ("v2".to_string(), true, true)
        ]
    );
    let widgets_v2 = resource(&group, "v2", "Widget", "widgets");
    let virt_v2: Api<DynamicObject> =
        Api::namespaced_with(s.virt.clone(), &s.vns.name, &widgets_v2);
    virt_v2
        .create(
            &PostParams::default(),
            &object(
                json!({ "apiVersion": widgets_v2.api_version, "kind": "Widget",
                "metadata": { "name": "w2" }, "spec": { "anything": true } }),
            ),
        )
        .await
        .unwrap();
    let host_v2: Api<DynamicObject> = Api::namespaced_with(s.host.clone(), &s.ns.name, &widgets_v2);
    s.host_copy(&host_v2, "w2").await;

    drop(syncer);
    s.teardown().await;
    for crd in [format!("widgets.{group}"), format!("gadgets.{group}")] {
        let _ = bed().kubectl(&["delete", "crd", &crd, "--wait=false"]);
        let _ = bed().kubectl_with(
            &bed().virtual_kubeconfig(),
            &["delete", "crd", &crd, "--wait=false"],
        );
    }
}

/// A host Fischer banning the host names of `names` of tenant `s`; returns its name once
/// the sample-apiserver's admission enforces it.
async fn ban(s: &Tenant, names: &[&str]) -> String {
    let fischer = format!("ban-{}", s.ns.name);
    let probe = format!("probe-{}", s.ns.name);
    let mut banned: Vec<String> = names.iter().map(|n| s.host_name(n)).collect();
    banned.push(probe.clone());
    let fischers: Api<DynamicObject> = Api::all_with(
        s.host.clone(),
        &resource("wardle.example.com", "v1alpha1", "Fischer", "fischers"),
    );
    fischers
        .create(
            &PostParams::default(),
            &object(
                json!({ "apiVersion": "wardle.example.com/v1alpha1", "kind": "Fischer",
                "metadata": { "name": fischer }, "disallowedFlunders": banned }),
            ),
        )
        .await
        .unwrap();
    // Admission reads Fischers from a cache: wait until it refuses the probe (a dry run).
    let host_flunders: Api<DynamicObject> =
        Api::namespaced_with(s.host.clone(), &s.ns.name, &flunders("v1beta1"));
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };
    wait::until("the ban enforced", TIMEOUT, || async {
        let probe = object(
            json!({ "apiVersion": "wardle.example.com/v1beta1", "kind": "Flunder",
            "metadata": { "name": probe } }),
        );
        match host_flunders.create(&dry, &probe).await {
            Err(kube::Error::Api(e)) if e.code == 403 => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    fischer
}

fn flunder(name: &str, spec: Value) -> DynamicObject {
    object(
        json!({ "apiVersion": "wardle.example.com/v1beta1", "kind": "Flunder",
        "metadata": { "name": name }, "spec": spec }),
    )
}

/// Tenant writes of an aggregated resource reach the host before the answer; a host rejection rolls the virtual write back.
#[tokio::test]
async fn aggregated_writes_are_written_through_and_rejections_roll_back() {
    let _turn = WARDLE.lock().await;
    let mut s = setup("cr-wt", flunders_to_host("v1beta1")).await;
    s.wiring
        .env
        .push(("VNEST_SYNCER_WRITE_THROUGH_FAULTS".into(), "1".into()));
    let syncer = s.start_syncer();
    ready(&syncer).await;
    let crd = bed()
        .kubectl_with(
            &bed().virtual_kubeconfig(),
            &["get", "crd", FLUNDERS, "-o", "json"],
        )
        .unwrap();
    let crd: Value = serde_json::from_str(&crd).unwrap();
    assert_eq!(
        crd["metadata"]["annotations"]["vnest.dev/generated-from-apiservice"],
        "v1beta1.wardle.example.com"
    );
    let rejected_names = [
        "banned",
        "wt-fault-host-lookup.1",
        "wt-fault-virtual-delete.1",
        "wt-fault-virtual-delete-conflict.1",
        "wt-fault-unidentified.1",
    ];
    let fischer = ban(&s, &rejected_names).await;
    let tenant = syncer.tenant_client().await;
    let res = flunders("v1beta1");
    let virt: Api<DynamicObject> = Api::namespaced_with(tenant, &s.vns.name, &res);
    let admin_virt: Api<DynamicObject> = Api::namespaced_with(s.virt.clone(), &s.vns.name, &res);
    let host: Api<DynamicObject> = Api::namespaced_with(s.host.clone(), &s.ns.name, &res);
    let pp = PostParams::default();

    // A valid create is on the host when the tenant's answer arrives.
    virt.create(
        &pp,
        &flunder(
            "good",
            json!({ "flunderReference": "x", "referenceType": "Flunder" }),
        ),
    )
    .await
    .unwrap();
    let mirror = present(&host, s.host_name("good"))
        .await
        .expect("host mirror written before the answer");
    assert_eq!(mirror.data["spec"]["flunderReference"], "x");

    // A banned name fails with the host's message in the tenant's names; nothing is left.
    let e = virt
        .create(&pp, &flunder("banned", json!({})))
        .await
        .unwrap_err();
    let kube::Error::Api(status) = &e else {
        panic!("{e}")
    };
    assert_eq!(status.code, 403, "{status:?}");
    assert!(
        status.message.contains("this name may not be used"),
        "{}",
        status.message
    );
    assert!(status.message.contains("\"banned\""), "{}", status.message);
    assert!(
        !status.message.contains(&s.host_name("banned")),
        "{}",
        status.message
    );
    assert!(
        absent(&admin_virt, "banned").await.is_ok(),
        "rolled back in the virtual cluster"
    );
    assert!(absent(&host, s.host_name("banned")).await.is_ok());
    let log = log_of(&syncer);
    assert!(
        log.lines().any(
            |l| l.contains("write-through: rejecting write, rolling back")
                && l.contains("reason=\"host_rejected\"")
        ),
        "{log}"
    );

    // A dry run skips write-through: the schemaless tenant CRD takes it, nothing is stored.
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };
    virt.create(&dry, &flunder("banned", json!({})))
        .await
        .expect("dry run answered by the virtual API server");
    assert!(absent(&admin_virt, "banned").await.is_ok());

    // An update the host refuses (its strict schema has no spec.bogus) is put back.
    let e = virt
        .patch(
            "good",
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "bogus": 1 } })),
        )
        .await
        .unwrap_err();
    assert!(e.to_string().contains("bogus"), "{e}");
    let good = admin_virt.get("good").await.unwrap();
    assert_eq!(good.data["spec"].get("bogus"), None, "update rolled back");
    assert_eq!(good.data["spec"]["flunderReference"], "x");

    // Each rollback failure, provoked at its step, is counted under its reason.
    for (name, reason, left_in_virtual) in [
        ("wt-fault-host-lookup.1", "host_lookup", true),
        ("wt-fault-virtual-delete.1", "virtual_delete", true),
        (
            "wt-fault-virtual-delete-conflict.1",
            "virtual_delete_conflict",
            true,
        ),
        ("wt-fault-unidentified.1", "unidentified", true),
        ("wt-fault-host-delete.1", "host_delete", false),
    ] {
        assert!(
            virt.create(&pp, &flunder(name, json!({}))).await.is_err(),
            "{name} must fail"
        );
        assert_eq!(rollback_failures(&syncer, reason).await, 1.0, "{reason}");
        assert_eq!(
            present(&admin_virt, name).await.is_ok(),
            left_in_virtual,
            "{name} in the virtual cluster"
        );
    }
    // The rollback's host delete failed; the asynchronous sync removes that orphaned mirror,
    // as its tenant object is gone. A lost answer alone is cleaned up at once.
    wait::until("orphaned mirror removed by the sync", TIMEOUT, || {
        absent(&host, s.host_name("wt-fault-host-delete.1"))
    })
    .await;
    let e = virt
        .create(&pp, &flunder("wt-fault-host-write.1", json!({})))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("response_error"), "{e}");
    assert!(absent(&admin_virt, "wt-fault-host-write.1").await.is_ok());
    // The rollback deleted the mirror; the asynchronous sync may have applied it again from
    // the tenant object it saw before the rollback, and removes it once it sees it gone.
    let lost = s.host_name("wt-fault-host-write.1");
    wait::until("mirror of the lost answer gone", TIMEOUT, || {
        absent(&host, &lost)
    })
    .await;
    for (name, reason) in [
        ("wt-fault-virtual-update.1", "virtual_update"),
        (
            "wt-fault-virtual-update-conflict.1",
            "virtual_update_conflict",
        ),
    ] {
        virt.create(&pp, &flunder(name, json!({}))).await.unwrap();
        let patched = virt
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "spec": { "bogus": 1 } })),
            )
            .await;
        assert!(patched.is_err(), "{name}: the host refuses spec.bogus");
        assert_eq!(rollback_failures(&syncer, reason).await, 1.0, "{reason}");
        assert_eq!(
            admin_virt.get(name).await.unwrap().data["spec"]["bogus"],
            1,
            "left as written"
        );
    }
    let log = log_of(&syncer);
    for text in [
        "rollback delete failed",
        "rollback update failed",
        "gave up",
        "cannot be identified",
        "cannot tell whether the object reached the host",
        "rollback host delete failed",
    ] {
        assert!(
            log.lines()
                .any(|l| l.contains("write-through:") && l.contains(text)),
            "log lacks {text:?}:\n{log}"
        );
    }

    // Deletion is asynchronous: the mirror follows the tenant's delete.
    virt.delete("good", &DeleteParams::default()).await.unwrap();
    wait::until("host mirror of good deleted", TIMEOUT, || {
        absent(&host, s.host_name("good"))
    })
    .await;

    drop(syncer);
    let _ = bed().kubectl(&["delete", "fischer", &fischer]);
    s.teardown().await;
}

/// Unserved resources and contradicted scopes keep the syncer unready; a version upgrade and a disable behave as the seed describes.
#[tokio::test]
async fn resolution_upgrade_and_disable_follow_the_seed() {
    let _turn = WARDLE.lock().await;
    let mut s = setup("cr-life", flunders_to_host("v1alpha1")).await;
    let mut syncer = s.start_syncer();
    ready(&syncer).await;
    let versions = || virtual_crd_versions(FLUNDERS);
    assert!(
        versions().contains(&("v1alpha1".into(), true, true)),
        "{:?}",
        versions()
    );
    let old: Api<DynamicObject> =
        Api::namespaced_with(s.virt.clone(), &s.vns.name, &flunders("v1alpha1"));
    old.create(
        &PostParams::default(),
        &object(json!({ "apiVersion": "wardle.example.com/v1alpha1", "kind": "Flunder", "metadata": { "name": "old" } })),
    )
    .await
    .unwrap();
    let host: Api<DynamicObject> =
        Api::namespaced_with(s.host.clone(), &s.ns.name, &flunders("v1beta1"));
    s.host_copy(&host, "old").await;

    // Upgrade: the new version is served and stored; the old one kept but no longer served.
    syncer.kill();
    s.patch_spec(json!({ "sync": { "toHost": { "customResources": {
        format!("{FLUNDERS}/v1alpha1"): null,
        format!("{FLUNDERS}/v1beta1"): { "enabled": true },
    } } } }))
    .await;
    let v1beta1 = format!("{FLUNDERS}/v1beta1");
    s.rewire("with v1beta1", |c| {
        c.sync
            .to_host
            .custom_resources
            .get(&v1beta1)
            .is_some_and(|e| e.enabled)
    })
    .await;
    syncer = s.start_syncer();
    ready(&syncer).await;
    let v = versions();
    assert!(v.contains(&("v1beta1".into(), true, true)), "{v:?}");
    assert!(v.contains(&("v1alpha1".into(), false, false)), "{v:?}");
    let new: Api<DynamicObject> =
        Api::namespaced_with(s.virt.clone(), &s.vns.name, &flunders("v1beta1"));
    assert!(present(&new, "old").await.is_ok(), "objects stay readable");

    // Disable: the syncer stops; the CRD, the tenant's object and the host mirror stay, and
    // tenant writes are no longer validated by the host.
    syncer.kill();
    s.patch_spec(json!({ "sync": { "toHost": { "customResources": {
        format!("{FLUNDERS}/v1beta1"): { "enabled": false },
    } } } }))
    .await;
    s.rewire("with flunders disabled", |c| {
        c.sync.to_host.custom_resources.values().all(|e| !e.enabled)
    })
    .await;
    syncer = s.start_syncer();
    ready(&syncer).await;
    assert!(!versions().is_empty(), "the CRD stays");
    assert!(present(&new, "old").await.is_ok());
    assert!(
        present(&host, s.host_name("old")).await.is_ok(),
        "host objects stay"
    );
    new.create(
        &PostParams::default(),
        &flunder("unchecked", json!({ "bogus": 1 })),
    )
    .await
    .expect("no write-through once disabled");
    let unchecked = new.get("unchecked").await.unwrap();
    assert_eq!(
        unchecked.data["spec"]["bogus"], 1,
        "a generated CRD keeps unknown fields"
    );
    // Disabled means no flunder engine at all: none of its reconciles ever runs, and the
    // object stays local for as long as we look.
    wait::holds(
        "nothing synced once disabled",
        Duration::from_secs(5),
        || async {
            absent(&host, s.host_name("unchecked")).await?;
            let reconciles = syncer.reconciles("flunders.").await?;
            (reconciles == 0.0)
                .then_some(())
                .ok_or(format!("{reconciles} flunder reconciles"))
        },
    )
    .await;

    // A resource the host does not serve keeps the syncer from becoming ready, saying why.
    syncer.kill();
    let missing = format!("nothings.t{}.vnest-tests.dev", std::process::id());
    s.patch_spec(json!({ "sync": { "toHost": { "customResources": {
        missing.clone(): { "enabled": true },
    } } } }))
    .await;
    s.rewire("with the missing resource", |c| {
        c.sync.to_host.custom_resources.contains_key(&missing)
    })
    .await;
    let syncer = s.start_syncer();
    let why = syncer.unready_because(&missing).await;
    assert!(why.contains("does not serve"), "{why}");
    assert!(why.contains("again when it restarts"), "{why}");

    // So does a declared scope the host contradicts (flunders are namespaced), naming the field.
    drop(syncer);
    s.patch_spec(
        json!({ "sync": {
            "toHost": { "customResources": { missing.clone(): null } },
            "fromHost": { "customResources": { FLUNDERS: { "enabled": true, "scope": "Cluster" } } },
        } }),
    )
    .await;
    s.rewire("with the contradicted scope", |c| {
        !c.sync.to_host.custom_resources.contains_key(&missing)
            && c.sync.from_host.custom_resources.contains_key(FLUNDERS)
    })
    .await;
    let syncer = s.start_syncer();
    let field = format!("spec.sync.fromHost.customResources[{FLUNDERS}].scope: Cluster");
    let why = syncer.unready_because(&field).await;
    assert!(why.contains("set scope: Namespaced or remove it"), "{why}");

    drop(syncer);
    s.teardown().await;
}
