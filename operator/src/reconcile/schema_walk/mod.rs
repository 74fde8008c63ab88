//! No field that is accepted and ignored: walks every leaf of the VirtualCluster CRD's `spec`
//! schema (the schema `crdgen` writes into the chart) and, for each, plans a VirtualCluster
//! with only that leaf changed from a valid spec. The plan's outcome — every child object the
//! operator would apply, the namespace labels, the lifecycle decision, the certificate names,
//! the endpoint — must change; a leaf that changes nothing fails the test, named by its path.
//! A change seen only in the syncer's config proves nothing by itself (the config carries whole
//! sections of the spec): such a leaf must be in [`READ_BY_SYNCER`].
//!
//! Each leaf is judged in a spec that makes it matter: the way to it is made (objects with
//! their required fields, one list item, one map entry), a feature switch (`enabled`) on the
//! way is turned on, and [`CONTEXT`] adds what else the leaf needs. The leaf then gets a value
//! other than its current one ([`leaves::probe`], or [`PROBES`] where the schema has rules the
//! walk cannot evaluate). Both specs must be valid: a value the operator refuses would change
//! the outcome without proving the field read. A required field with one allowed value has
//! nothing to vary and is passed over; [`DEFAULT_SWITCHES`] are judged apart.

mod leaves;

use std::sync::LazyLock;

use chrono::{DateTime, Utc};
use k8s_openapi::{
    apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps,
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};
use kube::CustomResourceExt;
use serde_json::{Value, json};
use vnest_crds::{VirtualCluster, VirtualClusterSpec, VirtualClusterTemplate, meta};

use self::leaves::Leaf;
use super::{
    plan::{self, Step},
    read::Observation,
};
use crate::{
    certs::Certs,
    lifecycle::facts,
    settings::{Settings, WakeEndpoint},
    template::merge_over,
};

/// Values for leaves the generic probe cannot choose: fields with CEL rules, and fields whose
/// value must fit something else. `(path, value as JSON)`.
#[rustfmt::skip]
const PROBES: &[(&str, &str)] = &[
    ("spec.autoDelete.afterCreation", r#""72h""#),
    ("spec.autoDelete.afterInactivity", r#""48h""#),
    ("spec.controlPlane.distro.k0s.image.repository", r#""example.com/k0s""#),
    ("spec.controlPlane.distro.k0s.image.tag", r#""v9.9.9""#),
    ("spec.controlPlane.distro.k3s.image.repository", r#""example.com/k3s""#),
    ("spec.controlPlane.distro.k3s.image.tag", r#""v9.9.9""#),
    ("spec.controlPlane.distro.k8s.image.repository", r#""example.com/kubernetes""#),
    ("spec.controlPlane.distro.k8s.image.tag", r#""v9.9.9""#),
    ("spec.controlPlane.ingress.host", r#""team-alpha.example.com""#),
    ("spec.controlPlane.ingress.ingressClassName", r#""haproxy""#),
    ("spec.controlPlane.statefulSet.persistence.size", r#""7Gi""#),
    ("spec.exportKubeconfig.context", r#""probe-context""#),
    ("spec.exportKubeconfig.secret.name", r#""probe-kubeconfig""#),
    ("spec.exportKubeconfig.server", r#""https://vc.example.com:443""#),
    ("spec.networking.advanced.clusterDomain", r#""tenant.test""#),
    ("spec.networking.replicateServices.fromHost[*].from", r#""kube-system/probe""#),
    ("spec.networking.resolveDNS[*].hostname", r#""b.example.com""#),
    ("spec.networking.resolveDNS[*].namespace", r#""other""#),
    ("spec.networking.resolveDNS[*].service", r#""default/b""#),
    ("spec.networking.resolveDNS[*].target", r#"{"hostService": "data/other"}"#),
    ("spec.networking.replicateServices.fromHost[*].to", r#""default/probe""#),
    ("spec.networking.replicateServices.toHost[*].from", r#""default/probe""#),
    ("spec.networking.replicateServices.toHost[*].to", r#""probe""#),
    ("spec.policies.limitRange.default.*", r#""300m""#),
    ("spec.policies.limitRange.defaultRequest.*", r#""300m""#),
    ("spec.policies.limitRange.max.*", r#""300m""#),
    ("spec.policies.limitRange.min.*", r#""300m""#),
    ("spec.policies.limitRange.persistentVolumeClaimMax.*", r#""3Gi""#),
    ("spec.policies.networkPolicy.outgoingConnections.ipBlock.cidr", r#""10.0.0.0/8""#),
    ("spec.policies.networkPolicy.outgoingConnections.ipBlock.except[*]", r#""10.1.0.0/16""#),
    ("spec.policies.resourceQuota.quota.*", r#""30""#),
    ("spec.sleepMode.afterInactivity", r#""2h""#),
    ("spec.sleepMode.sleepSchedule", r#""30 21 * * *""#),
    ("spec.sleepMode.timezone", r#""Europe/Berlin""#),
    ("spec.sleepMode.wakeSchedule", r#""0 7 * * *""#),
    ("spec.sync.toHost.pods.patches[*].path", r#""spec.volumes[*].emptyDir""#),
    ("spec.sync.toHost.pods.translatePatches[*].expression", r#""'vcluster-' + value""#),
    ("spec.sync.toHost.pods.translatePatches[*].path", r#""metadata.labels.tier""#),
    ("spec.template.name", r#""large""#),
];

/// What a leaf under `path` needs besides its own value, merged into the object at `path`
/// when the way to the leaf is made; an entry naming a leaf is merged into the object holding
/// it (for fields valid only one at a time, such as resolveDNS's sources). `(path, object as
/// JSON)`.
#[rustfmt::skip]
const CONTEXT: &[(&str, &str)] = &[
    // An enabled Ingress needs a host.
    ("spec.controlPlane.ingress", r#"{"host": "vc.example.com"}"#),
    // A resolveDNS entry has exactly one source, and its target must suit it.
    ("spec.networking.resolveDNS[*].hostname", r#"{"hostname": "a.example.com", "target": "host"}"#),
    ("spec.networking.resolveDNS[*].namespace", r#"{"namespace": "shared", "target": {"hostNamespace": "platform"}}"#),
    ("spec.networking.resolveDNS[*].service", r#"{"service": "default/a", "target": {"hostService": "data/postgres"}}"#),
    ("spec.networking.resolveDNS[*].target", r#"{"service": "default/a", "target": {"hostService": "data/postgres"}}"#),
    // Schedules, so that the time zone has a say, and auto-wakeup may be off.
    ("spec.sleepMode", r#"{"sleepSchedule": "0 20 * * *", "wakeSchedule": "0 6 * * *"}"#),
    ("spec.sync.toHost.pods.patches[*]", r#"{"path": "spec.volumes[*].hostPath"}"#),
    ("spec.sync.toHost.pods.translatePatches[*]", r#"{"path": "metadata.labels.app", "expression": "value"}"#),
    ("spec.template", r#"{"name": "small"}"#),
];

/// Switches that name the default in vCluster's spelling: on, they plan what the default does,
/// so each is judged by what it does change, the refusal of a choice it conflicts with.
/// `(path, the conflicting choice as a spec, the field the refusal names)`.
#[rustfmt::skip]
const DEFAULT_SWITCHES: &[(&str, &str, &str)] = &[
    ("spec.controlPlane.distro.k3s.enabled", r#"{"controlPlane": {"distro": {"k8s": {"enabled": true}}}}"#, "spec.controlPlane.distro"),
    ("spec.controlPlane.backingStore.database.embedded.enabled", r#"{"controlPlane": {"distro": {"k0s": {"enabled": true}}}}"#, "spec.controlPlane.backingStore.database"),
];

/// The key the walk gives the entry it makes in the map at `path` (`probe` elsewhere).
#[rustfmt::skip]
const KEYS: &[(&str, &str)] = &[
    ("spec.policies.limitRange.default", "cpu"),
    ("spec.policies.limitRange.defaultRequest", "cpu"),
    ("spec.policies.limitRange.max", "cpu"),
    ("spec.policies.limitRange.min", "cpu"),
    ("spec.policies.limitRange.persistentVolumeClaimMax", "storage"),
    ("spec.policies.resourceQuota.quota", "pods"),
    ("spec.sync.fromHost.customResources", "widgets.example.com"),
    ("spec.sync.toHost.customResources", "widgets.example.com"),
    ("spec.template.parameters", "size"),
];

/// Fields only the syncer reads. The operator copies `spec.sync`, `spec.networking` and
/// `spec.controlPlane.coredns` whole into the syncer's config, so a change there shows in it
/// whether or not the syncer reads the field: a field whose change shows nowhere else must be
/// listed here with the file that reads it and the expression it is read by (the test checks
/// the file holds it). An entry covers the leaves under it: only for a Kubernetes type the
/// syncer passes on whole. `(path, file from the workspace root, expression)`.
#[rustfmt::skip]
const READ_BY_SYNCER: &[(&str, &str, &str)] = &[
    ("spec.controlPlane.coredns.enabled", "syncer/src/dns/mod.rs", "CoreDns { enabled, .. } = ctx.config.coredns"),
    ("spec.controlPlane.coredns.deployment.image", "syncer/src/dns/deploy.rs", "deployment.image()"),
    ("spec.controlPlane.coredns.deployment.nodeSelector.*", "syncer/src/dns/deploy.rs", "deployment.node_selector"),
    ("spec.controlPlane.coredns.deployment.replicas", "syncer/src/dns/deploy.rs", "deployment.replicas"),
    ("spec.controlPlane.coredns.deployment.tolerations", "syncer/src/dns/deploy.rs", "deployment.tolerations"),
    ("spec.networking.replicateServices.fromHost[*].to", "syncer/src/resources/replicated_services.rs", "split_service_ref(&m.to, \"default\")"),
    ("spec.networking.replicateServices.toHost[*].from", "syncer/src/resources/replicated_services.rs", "split_service_ref(&m.from, \"default\")"),
    ("spec.networking.replicateServices.toHost[*].to", "syncer/src/resources/replicated_services.rs", "split_service_ref(&m.to, host_namespace)"),
    // The syncer's CoreDNS renders each entry from `ResolveDnsEntry::mapping` (syncer/src/dns/).
    ("spec.networking.resolveDNS[*].hostname", "crds/src/virtual_cluster/resolve_dns.rs", "strip_wildcard(&self.hostname)"),
    ("spec.networking.resolveDNS[*].namespace", "crds/src/virtual_cluster/resolve_dns.rs", "DnsSource::Namespace(self.namespace.clone())"),
    ("spec.networking.resolveDNS[*].service", "crds/src/virtual_cluster/resolve_dns.rs", "self.service.split_once('/')"),
    ("spec.sync.fromHost.customResources.*.scope", "syncer/src/custom/key.rs", "entry.scope"),
    ("spec.sync.fromHost.nodes.clearImageStatus", "syncer/src/resources/real_nodes.rs", "nodes.clear_image_status"),
    ("spec.sync.fromHost.nodes.selector.all", "syncer/src/translate/placement.rs", "nodes.selector.all"),
    ("spec.sync.fromHost.nodes.selector.labels.*", "syncer/src/translate/placement.rs", "nodes.selector.labels"),
    ("spec.sync.hostRateLimit.burst", "syncer/src/host_client.rs", "limit.burst"),
    ("spec.sync.hostRateLimit.qps", "syncer/src/host_client.rs", "limit.qps"),
    ("spec.sync.toHost.configmaps.all", "syncer/src/resources/configmaps.rs", "to_host.configmaps.all"),
    ("spec.sync.toHost.pods.enforceTolerations", "syncer/src/translate/placement.rs", "pods.enforce_tolerations"),
    ("spec.sync.toHost.pods.patches[*].path", "crds/src/patch/mod.rs", "target(&p.path)"),
    ("spec.sync.toHost.pods.translatePatches[*].expression", "crds/src/patch/mod.rs", "Expression::parse(&p.expression)"),
    ("spec.sync.toHost.pods.translatePatches[*].path", "crds/src/patch/mod.rs", "target(&p.path)"),
    ("spec.sync.toHost.pods.rewriteHosts.enabled", "syncer/src/resources/pods/mod.rs", "!rewrite.enabled"),
    ("spec.sync.toHost.pods.rewriteHosts.initContainer.image", "syncer/src/resources/pods/mod.rs", "rewrite.init_container.image"),
    ("spec.sync.toHost.pods.useSecretsForSATokens", "syncer/src/resources/pods/mod.rs", "pods.use_secrets_for_sa_tokens"),
    ("spec.sync.toHost.secrets.all", "syncer/src/resources/secrets.rs", "to_host.secrets.all"),
];

/// Whether `path` is a READ_BY_SYNCER entry or under one.
fn read_by_syncer(path: &str) -> bool {
    READ_BY_SYNCER.iter().any(|(entry, _, _)| {
        path.strip_prefix(entry)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
    })
}

fn lookup<'t>(table: &[(&str, &'t str)], path: &str) -> Option<&'t str> {
    table.iter().find(|(p, _)| *p == path).map(|(_, v)| *v)
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("bad JSON {text}: {e}"))
}

fn key(map: &str) -> String {
    lookup(KEYS, map).unwrap_or("probe").to_string()
}

/// The fixed moment plans are made at, and the VirtualCluster's creation a day earlier.
static NOW: LazyLock<DateTime<Utc>> =
    LazyLock::new(|| "2026-12-02T12:00:00Z".parse().expect("a valid time"));

static SETTINGS: LazyLock<Settings> = LazyLock::new(|| Settings {
    // Auto-wakeup routes the Service to the wake endpoint only when there is one.
    wake: Some(WakeEndpoint {
        ip: "10.0.0.9".parse().expect("an IP"),
        port: 9443,
    }),
    // Extra rules are refused without it.
    allow_extra_rules: true,
    ..Settings::default()
});

static CERTS: LazyLock<Certs> = LazyLock::new(|| {
    Certs::generate("team-alpha/team-alpha", &["team-alpha".to_string()]).expect("certificates")
});

/// Two templates, so that `spec.template.name` can name another, each using parameter `size`.
static TEMPLATES: LazyLock<Vec<VirtualClusterTemplate>> = LazyLock::new(|| {
    ["small", "large"]
        .map(|name| {
            serde_json::from_value(json!({
                "apiVersion": "vnest.dev/v1alpha1", "kind": "VirtualClusterTemplate",
                "metadata": { "name": name, "generation": 1 },
                "spec": {
                    "parameters": [{ "name": "size", "default": "s" }],
                    "template": format!("controlPlane: {{statefulSet: {{labels: {{tier: {name}, size: \"{{{{size}}}}\"}}}}}}"),
                },
            }))
            .expect("a template")
        })
        .to_vec()
});

/// The `spec` schema of the VirtualCluster CRD.
fn spec_schema() -> JSONSchemaProps {
    let crd = VirtualCluster::crd();
    let root = crd.spec.versions[0]
        .schema
        .clone()
        .and_then(|s| s.open_api_v3_schema);
    root.and_then(|r| r.properties)
        .and_then(|p| p.get("spec").cloned())
        .expect("the CRD has a spec schema")
}

/// The spec as the API server stores `{}`: every default written out.
fn baseline() -> Value {
    let spec: VirtualClusterSpec = serde_json::from_value(json!({})).expect("the empty spec");
    serde_json::to_value(spec).expect("a spec serializes")
}

/// What the operator plans for one spec, written out so that two plans compare.
#[derive(Debug, PartialEq)]
struct Outcome {
    /// Everything but the syncer's config file and its hash on the pod template.
    operator: String,
    /// The syncer's config file (`vc-config-<name>`'s [`meta::SYNCER_CONFIG_KEY`]).
    syncer_config: Value,
}

/// What the operator plans for `spec`; `Err` with the operator's message when it refuses it.
fn outcome(spec: &Value) -> Result<Outcome, String> {
    let spec: VirtualClusterSpec =
        serde_json::from_value(spec.clone()).map_err(|e| format!("not a valid spec: {e}"))?;
    let template = spec.template.as_ref().and_then(|t| {
        TEMPLATES
            .iter()
            .find(|candidate| candidate.metadata.name.as_deref() == Some(&t.name))
    });
    let observed = Observation {
        template: template.cloned().map(std::sync::Arc::new),
        namespace: None,
        policies: Vec::new(),
        lease_activity: None,
        statefulset: None,
        cluster_ip: Some("10.96.0.10".to_string()),
    };
    let vc = VirtualCluster {
        metadata: ObjectMeta {
            name: Some("team-alpha".into()),
            namespace: Some("team-alpha".into()),
            uid: Some("uid-1".into()),
            creation_timestamp: Some(facts::to_time(*NOW - chrono::Duration::days(1))),
            ..ObjectMeta::default()
        },
        spec,
        status: None,
    };
    let plan = plan::plan(&SETTINGS, &vc, observed, *NOW);
    match &plan.step {
        Step::Invalid(errors) => Err(errors.to_string()),
        Step::Delete { reason, at } => Ok(Outcome {
            operator: format!("delete ({reason:?}) at {at}"),
            syncer_config: Value::Null,
        }),
        Step::Enact(enact) => {
            let mut target = plan.target(&SETTINGS, enact, &CERTS);
            let mut syncer_config = Value::Null;
            for child in &mut target.state.children {
                if child.name == plan.names.config_secret {
                    syncer_config = child.object["data"][meta::SYNCER_CONFIG_KEY].take();
                }
                let pod = &mut child.object["spec"]["template"]["metadata"];
                if let Some(annotations) = pod["annotations"].as_object_mut() {
                    annotations.remove(meta::ANNOTATION_CONFIG_HASH);
                }
            }
            let operator = format!(
                "{:#?}\n{:?}\n{:?} {:?} {:?}\n{} {:?}\n{:?} {:?}",
                target.state,
                target.namespace_labels,
                enact.decision,
                enact.wake,
                enact.sans,
                target.endpoint,
                plan.names,
                plan.template,
                plan.policy,
            );
            Ok(Outcome {
                operator,
                syncer_config,
            })
        }
    }
}

/// Whether `leaf` is a field its object requires and whose schema allows one value only:
/// there is nothing to vary (`op: remove`).
fn fixed(leaf: &Leaf) -> bool {
    let parent = leaf.nodes[leaf.nodes.len() - 2];
    let Some(leaves::Step::Field(name)) = leaf.steps.last() else {
        return false;
    };
    let values = leaf
        .schema()
        .enum_
        .iter()
        .flatten()
        .filter(|v| !v.0.is_null());
    parent.required.iter().flatten().any(|r| r == name) && values.count() == 1
}

/// The spec `leaf` is judged in: `base` with the way to it made, switches on the way on and
/// [`CONTEXT`] merged in.
fn context(base: &Value, leaf: &Leaf) -> Value {
    let mut doc = base.clone();
    let path = leaf.path();
    leaves::make_way(&mut doc, leaf, &key, &mut |prefix, node, object| {
        if let Some(extra) = lookup(CONTEXT, prefix) {
            merge_over(object, json(extra));
        }
        if path
            .rsplit_once('.')
            .is_some_and(|(parent, _)| parent == prefix)
            && let Some(extra) = lookup(CONTEXT, &path)
        {
            merge_over(object, json(extra));
        }
        let switch = format!("{prefix}.enabled");
        let has_switch = node
            .properties
            .as_ref()
            .and_then(|p| p.get("enabled"))
            .is_some_and(|s| s.type_.as_deref() == Some("boolean"));
        if has_switch && path != switch {
            object["enabled"] = json!(true);
        }
    });
    doc
}

/// Why default switch `leaf` is not shown to be read, if it is not (see [`DEFAULT_SWITCHES`]).
fn check_switch(base: &Value, leaf: &Leaf, conflict: &str, named: &str) -> Result<(), String> {
    let path = leaf.path();
    let switched = |doc: &Value| {
        let mut doc = doc.clone();
        leaves::set(&mut doc, leaf, &key, json!(true));
        doc
    };
    if outcome(&switched(base)) != outcome(base) {
        return Err(format!(
            "{path}: no longer plans what the default does; remove it from DEFAULT_SWITCHES"
        ));
    }
    let mut chosen = base.clone();
    merge_over(&mut chosen, json(conflict));
    outcome(&chosen).map_err(|e| format!("{path}: its conflicting choice is refused: {e}"))?;
    match outcome(&switched(&chosen)) {
        Err(message) if message.contains(named) => Ok(()),
        other => Err(format!(
            "{path}: accepted and ignored: on, beside {conflict}, it is not refused naming \
             {named} ({other:?}). Read it, or remove it from the schema"
        )),
    }
}

/// Why `leaf` is not shown to be read, if it is not.
fn check(base: &Value, leaf: &Leaf) -> Result<(), String> {
    let path = leaf.path();
    if fixed(leaf) {
        return Ok(());
    }
    if let Some((_, conflict, named)) = DEFAULT_SWITCHES.iter().find(|s| s.0 == path) {
        return check_switch(base, leaf, conflict, named);
    }
    let before = context(base, leaf);
    let current = leaves::get(&before, leaf, &key).cloned();
    let probe = match lookup(PROBES, &path) {
        Some(text) => json(text),
        None => leaves::probe(leaf.schema(), current.as_ref()).ok_or_else(|| {
            format!("{path}: the walk knows no valid value for it; add one to PROBES")
        })?,
    };
    if Some(&probe) == current.as_ref() {
        return Err(format!(
            "{path}: its probe {probe} is the value it already has; change PROBES or CONTEXT"
        ));
    }
    let mut after = before.clone();
    leaves::set(&mut after, leaf, &key, probe.clone());
    let planned = outcome(&before)
        .map_err(|e| format!("{path}: the spec it is judged in is refused ({e}); fix CONTEXT"))?;
    let changed = outcome(&after)
        .map_err(|e| format!("{path}: {probe} is refused ({e}); give a valid value in PROBES"))?;
    let listed = read_by_syncer(&path);
    if planned.operator != changed.operator {
        return match listed {
            true => Err(format!(
                "{path}: the operator reads it; remove it from READ_BY_SYNCER"
            )),
            false => Ok(()),
        };
    }
    match (planned.syncer_config != changed.syncer_config, listed) {
        (true, true) => Ok(()),
        (true, false) => Err(format!(
            "{path}: setting it to {probe} changes only the syncer's config, which carries it \
             whole; list it in READ_BY_SYNCER with the file that reads it, or remove it from \
             the schema"
        )),
        (false, _) => Err(format!(
            "{path}: accepted and ignored: setting it to {probe} changes nothing the operator \
             plans (children, syncer config, namespace labels, lifecycle). Read it, or remove \
             it from the schema"
        )),
    }
}

/// Every leaf of the VirtualCluster spec schema changes what the operator plans: no field is
/// accepted and ignored.
#[test]
fn every_spec_field_changes_what_the_operator_plans() {
    let schema = spec_schema();
    let all = leaves::leaves(&schema);
    let base = baseline();
    assert!(outcome(&base).is_ok(), "{:?}", outcome(&base));
    let problems: Vec<String> = all.iter().filter_map(|l| check(&base, l).err()).collect();
    assert!(
        problems.is_empty(),
        "{} of {} spec fields:\n{}",
        problems.len(),
        all.len(),
        problems.join("\n")
    );
}

/// Every path the tables name is in the schema, so no entry outlives its field.
#[test]
fn the_tables_name_only_paths_in_the_schema() {
    let schema = spec_schema();
    let all = leaves::leaves(&schema);
    let prefixes: Vec<String> = all
        .iter()
        .flat_map(|l| (0..=l.steps.len()).map(|i| leaves::display(&l.steps[..i])))
        .collect();
    let leaf_paths: Vec<String> = all.iter().map(Leaf::path).collect();
    let switches = DEFAULT_SWITCHES.iter().map(|(path, _, _)| path);
    for path in PROBES.iter().map(|(path, _)| path).chain(switches) {
        assert!(leaf_paths.iter().any(|p| p == path), "no leaf {path}");
    }
    let syncer = READ_BY_SYNCER.iter().map(|(path, _, _)| path);
    for path in CONTEXT
        .iter()
        .chain(KEYS)
        .map(|(path, _)| path)
        .chain(syncer)
    {
        assert!(prefixes.iter().any(|p| p == path), "no field {path}");
    }
}

/// Every READ_BY_SYNCER file holds the expression the field is read by.
#[test]
fn the_syncer_files_listed_read_their_fields() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for (path, file, expression) in READ_BY_SYNCER {
        let text = std::fs::read_to_string(root.join(file))
            .unwrap_or_else(|e| panic!("{path}: cannot read {file}: {e}"));
        assert!(
            text.contains(expression),
            "{path}: {file} no longer holds `{expression}`; name the file and expression that read it"
        );
    }
}
