//! The fault suite's tenant side: a burst of tenant objects of every synced kind, and the
//! invariant check run after a fault — every virtual object has exactly one host copy with
//! its current content (nothing lost, nothing duplicated), no host object made by the syncer
//! lacks a live source (no orphans), and every virtual pod has its status back.

use std::{collections::HashSet, fmt, time::Duration};

use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::{
    NamespaceResourceScope,
    api::core::v1::{ConfigMap, PersistentVolumeClaim, Pod, Secret, Service},
};
use kube::{
    Api, Client, Resource, ResourceExt,
    api::{DeleteParams, ListParams, PostParams},
};
use serde::{Serialize, de::DeserializeOwned};
use serde_json::{Value, json};
use vnest_crds::meta::{
    ANNOTATION_OBJECT_NAME, ANNOTATION_OBJECT_NAMESPACE, ANNOTATION_OBJECT_UID,
    LABEL_SYNCER_MANAGED_BY,
};

use crate::{
    tenant::{Namespaced, TIMEOUT, Tenant, VC},
    wait,
};

/// Objects one group of the burst holds: a ConfigMap and a Secret (copied because the pod
/// uses them), a Service, a PersistentVolumeClaim and the pod.
pub const KINDS_PER_GROUP: usize = 5;

/// The two sides the invariants compare: a virtual cluster named [`VC`] and its host namespace.
pub trait Sides {
    fn host(&self) -> &Client;
    fn virt(&self) -> &Client;
    fn host_namespace(&self) -> &str;
}

impl Sides for Tenant {
    fn host(&self) -> &Client {
        &self.host
    }
    fn virt(&self) -> &Client {
        &self.virt
    }
    fn host_namespace(&self) -> &str {
        &self.ns.name
    }
}

/// A virtual cluster whose control plane runs for real (its own API server, reached through the
/// tenant kubeconfig) and its host namespace.
pub struct Clusters {
    pub host: Client,
    pub virt: Client,
    pub host_namespace: String,
}

impl Sides for Clusters {
    fn host(&self) -> &Client {
        &self.host
    }
    fn virt(&self) -> &Client {
        &self.virt
    }
    fn host_namespace(&self) -> &str {
        &self.host_namespace
    }
}

/// The namespaces a virtual cluster makes for itself: what the syncer copies from them (CoreDNS,
/// the `kubernetes` Service's endpoints) is the cluster's own, not a tenant's burst.
const SYSTEM_NAMESPACES: [&str; 4] = ["kube-system", "kube-public", "kube-node-lease", "default"];

fn from_system_namespace(host_copy: &Value) -> bool {
    host_copy["metadata"]["annotations"][ANNOTATION_OBJECT_NAMESPACE]
        .as_str()
        .is_some_and(|ns| SYSTEM_NAMESPACES.contains(&ns))
}

/// Creates one object retrying this long while the API server cannot answer: a restarted
/// virtual control plane takes up to a few minutes on a busy machine.
const CREATE_RETRY: Duration = Duration::from_secs(180);

/// Creates (or deletes) this many objects at a time, as a busy tenant would.
const CONCURRENCY: usize = 16;

/// The objects of group `i`, the ConfigMap and Secret carrying `content`.
fn group(i: usize, content: &str) -> [(&'static str, Value); KINDS_PER_GROUP] {
    let name = format!("g{i}");
    [
        (
            "ConfigMap",
            json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": name },
                "data": { "content": content } }),
        ),
        (
            "Secret",
            json!({ "apiVersion": "v1", "kind": "Secret", "metadata": { "name": name },
                "stringData": { "content": content } }),
        ),
        (
            "Service",
            json!({ "apiVersion": "v1", "kind": "Service", "metadata": { "name": name },
                "spec": { "selector": { "group": name }, "ports": [{ "port": 80 }] } }),
        ),
        (
            "PersistentVolumeClaim",
            json!({ "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": { "name": name },
                "spec": { "accessModes": ["ReadWriteOnce"], "storageClassName": "",
                    "resources": { "requests": { "storage": "1Gi" } } } }),
        ),
        (
            "Pod",
            json!({ "apiVersion": "v1", "kind": "Pod",
                "metadata": { "name": name, "labels": { "group": name } },
                "spec": {
                    "containers": [{ "name": "app", "image": "nginx",
                        "envFrom": [{ "configMapRef": { "name": name } }],
                        "volumeMounts": [{ "name": "secret", "mountPath": "/secret" }] }],
                    "volumes": [{ "name": "secret", "secret": { "secretName": name } }],
                } }),
        ),
    ]
}

/// Creates one object, retrying (for [`CREATE_RETRY`]) while the API server cannot
/// answer, as a tenant's client would; an object the server had made before an answer was
/// lost counts as made.
async fn create_one(
    client: &Client,
    namespace: &str,
    kind: &str,
    obj: Value,
) -> Result<(), String> {
    wait::until(
        &format!("create {kind} {}", obj["metadata"]["name"]),
        CREATE_RETRY,
        || async {
            let result = match kind {
                "ConfigMap" => create_as::<ConfigMap>(client, namespace, &obj).await,
                "Secret" => create_as::<Secret>(client, namespace, &obj).await,
                "Service" => create_as::<Service>(client, namespace, &obj).await,
                "PersistentVolumeClaim" => {
                    create_as::<PersistentVolumeClaim>(client, namespace, &obj).await
                }
                "Pod" => create_as::<Pod>(client, namespace, &obj).await,
                other => unreachable!("no such burst kind {other}"),
            };
            match result {
                Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
                other => other.map_err(|e| e.to_string()),
            }
        },
    )
    .await;
    Ok(())
}

/// One create of `obj` as a `K` in `namespace`.
async fn create_as<K>(client: &Client, namespace: &str, obj: &Value) -> Result<(), kube::Error>
where
    K: Namespaced,
{
    let typed: K = serde_json::from_value(obj.clone()).expect("object JSON");
    api::<K>(client, namespace)
        .create(&PostParams::default(), &typed)
        .await
        .map(drop)
}

fn api<K>(client: &Client, namespace: &str) -> Api<K>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>,
{
    Api::namespaced(client.clone(), namespace)
}

/// Creates `groups` groups of tenant objects in virtual namespace `namespace`, up to
/// [`CONCURRENCY`] requests at a time.
pub async fn create_burst(client: &Client, namespace: &str, groups: usize, content: &str) {
    let objects: Vec<_> = (0..groups).flat_map(|i| group(i, content)).collect();
    stream::iter(objects)
        .map(|(kind, obj)| create_one(client, namespace, kind, obj))
        .buffer_unordered(CONCURRENCY)
        .try_collect::<Vec<()>>()
        .await
        .expect("burst of tenant objects");
}

/// Changes the content of every ConfigMap and Secret of the burst to `content`.
pub async fn rewrite_burst(client: &Client, namespace: &str, groups: usize, content: &str) {
    use kube::api::{Patch, PatchParams};
    stream::iter(0..groups)
        .map(|i| async move {
            let name = format!("g{i}");
            let pp = PatchParams::default();
            let patch = |key: &str| Patch::Merge(json!({ key: { "content": content } }));
            wait::until(&format!("rewrite {name}"), TIMEOUT, || async {
                api::<ConfigMap>(client, namespace)
                    .patch(&name, &pp, &patch("data"))
                    .await
                    .map_err(|e| e.to_string())?;
                api::<Secret>(client, namespace)
                    .patch(&name, &pp, &patch("stringData"))
                    .await
                    .map_err(|e| e.to_string())
            })
            .await;
            Ok::<(), String>(())
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<Vec<()>>()
        .await
        .expect("rewrite the burst's content");
}

/// Deletes every object of the burst kinds in virtual namespace `namespace` (pods at once:
/// no kubelet finishes a virtual pod's deletion once its host copy is gone).
pub async fn delete_burst(client: &Client, namespace: &str) {
    let all = ListParams::default();
    let now = DeleteParams::default().grace_period(0);
    let dp = DeleteParams::default();
    api::<Pod>(client, namespace)
        .delete_collection(&now, &all)
        .await
        .expect("delete pods");
    api::<ConfigMap>(client, namespace)
        .delete_collection(&dp, &all.clone().fields("metadata.name!=kube-root-ca.crt"))
        .await
        .expect("delete ConfigMaps");
    api::<Secret>(client, namespace)
        .delete_collection(&dp, &all)
        .await
        .expect("delete Secrets");
    let services = api::<Service>(client, namespace);
    for svc in services.list(&all).await.expect("list Services") {
        services
            .delete(&svc.name_any(), &dp)
            .await
            .expect("delete Service");
    }
    api::<PersistentVolumeClaim>(client, namespace)
        .delete_collection(&dp, &all)
        .await
        .expect("delete claims");
}

/// What the invariant check found.
#[derive(Debug, Default)]
pub struct Tally {
    /// Virtual objects checked.
    pub checked: usize,
    /// Virtual objects without a host copy.
    pub lost: Vec<String>,
    /// Virtual objects with more than one host copy.
    pub duplicated: Vec<String>,
    /// Host objects of this virtual cluster whose source is gone.
    pub orphaned: Vec<String>,
    /// Host copies whose content differs from the virtual object's.
    pub stale: Vec<String>,
    /// Virtual pods whose status did not come back (not Running).
    pub without_status: Vec<String>,
    /// Per kind: virtual objects expected on the host, and host objects of this cluster.
    pub counts: Vec<(&'static str, usize, usize)>,
}

impl Tally {
    pub fn clean(&self) -> bool {
        self.lost.is_empty()
            && self.duplicated.is_empty()
            && self.orphaned.is_empty()
            && self.stale.is_empty()
            && self.without_status.is_empty()
    }
}

impl fmt::Display for Tally {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn first(v: &[String]) -> String {
            v.iter().take(3).cloned().collect::<Vec<_>>().join(", ")
        }
        write!(
            f,
            "{} checked {:?}; lost {} [{}], duplicated {} [{}], orphaned {} [{}], stale {} [{}], without status {} [{}]",
            self.checked,
            self.counts,
            self.lost.len(),
            first(&self.lost),
            self.duplicated.len(),
            first(&self.duplicated),
            self.orphaned.len(),
            first(&self.orphaned),
            self.stale.len(),
            first(&self.stale),
            self.without_status.len(),
            first(&self.without_status),
        )
    }
}

/// What of an object its host copy must carry over.
fn content(kind: &str, obj: &Value) -> Value {
    match kind {
        "ConfigMap" | "Secret" => obj["data"].clone(),
        "Service" => obj["spec"]["ports"]
            .as_array()
            .map(|ports| ports.iter().map(|p| p["port"].clone()).collect())
            .unwrap_or_default(),
        "PersistentVolumeClaim" => obj["spec"]["resources"].clone(),
        "Pod" => obj["spec"]["containers"][0]["image"].clone(),
        _ => Value::Null,
    }
}

async fn list_json<K>(api: &Api<K>, lp: &ListParams) -> Result<Vec<Value>, String>
where
    K: Resource + Clone + DeserializeOwned + Serialize + fmt::Debug,
{
    let list = api.list(lp).await.map_err(|e| e.to_string())?;
    Ok(list
        .items
        .iter()
        .map(|o| serde_json::to_value(o).expect("object serializes"))
        .collect())
}

/// Virtual and host objects of one kind: (virtual, host) as JSON.
/// Host objects copied from the virtual cluster's [`SYSTEM_NAMESPACES`] are left out.
async fn both_sides<K>(
    s: &impl Sides,
    namespaces: &[&str],
) -> Result<(Vec<Value>, Vec<Value>), String>
where
    K: Namespaced,
{
    let mut virt = Vec::new();
    for ns in namespaces {
        virt.extend(list_json(&api::<K>(s.virt(), ns), &ListParams::default()).await?);
    }
    let ours = ListParams::default().labels(&format!("{LABEL_SYNCER_MANAGED_BY}={VC}"));
    let mut host = list_json(&api::<K>(s.host(), s.host_namespace()), &ours).await?;
    host.retain(|h| !from_system_namespace(h));
    Ok((virt, host))
}

fn uid(obj: &Value) -> &str {
    obj["metadata"]["uid"].as_str().unwrap_or_default()
}

fn source_uid(obj: &Value) -> &str {
    obj["metadata"]["annotations"][ANNOTATION_OBJECT_UID]
        .as_str()
        .unwrap_or_default()
}

fn label(kind: &str, obj: &Value) -> String {
    format!(
        "{kind} {}/{}",
        obj["metadata"]["namespace"].as_str().unwrap_or_default(),
        obj["metadata"]["name"].as_str().unwrap_or_default()
    )
}

/// Whether a virtual object of `kind` is expected on the host at all: the API server's own
/// `kube-root-ca.crt` and ServiceAccount token Secrets are not the tenant's.
fn synced(kind: &str, obj: &Value) -> bool {
    match kind {
        "ConfigMap" => obj["metadata"]["name"] != "kube-root-ca.crt",
        "Secret" => obj["type"] != "kubernetes.io/service-account-token",
        _ => true,
    }
}

/// Checks the invariants over the burst kinds in virtual `namespaces` against the host
/// namespace of tenant `s`.
pub async fn tally(s: &impl Sides, namespaces: &[&str]) -> Result<Tally, String> {
    let sides = [
        ("ConfigMap", both_sides::<ConfigMap>(s, namespaces).await?),
        ("Secret", both_sides::<Secret>(s, namespaces).await?),
        ("Service", both_sides::<Service>(s, namespaces).await?),
        (
            "PersistentVolumeClaim",
            both_sides::<PersistentVolumeClaim>(s, namespaces).await?,
        ),
        ("Pod", both_sides::<Pod>(s, namespaces).await?),
    ];
    let live: HashSet<&str> = sides
        .iter()
        .flat_map(|(_, (virt, _))| virt.iter().map(uid))
        .collect();
    let mut t = Tally::default();
    for (kind, (virt, host)) in &sides {
        let expected = virt.iter().filter(|v| synced(kind, v)).count();
        t.counts.push((kind, expected, host.len()));
        for v in virt.iter().filter(|v| synced(kind, v)) {
            t.checked += 1;
            let copies: Vec<&Value> = host.iter().filter(|h| source_uid(h) == uid(v)).collect();
            match copies.as_slice() {
                [] => t.lost.push(label(kind, v)),
                [copy] if content(kind, copy) != content(kind, v) => t.stale.push(label(kind, v)),
                [_] => {}
                _ => t.duplicated.push(label(kind, v)),
            }
            if *kind == "Pod" && v["status"]["phase"] != "Running" {
                t.without_status.push(label(kind, v));
            }
        }
        for h in host {
            if !live.contains(source_uid(h)) {
                t.orphaned.push(label(kind, h));
            }
        }
    }
    Ok(t)
}

/// Host copies the syncer made of tenant `s`'s burst objects (not of the virtual cluster's
/// own `kube-root-ca.crt`, which it copies for every synced namespace).
pub async fn host_copies(s: &impl Sides) -> Result<usize, String> {
    let mut host = both_sides::<ConfigMap>(s, &[]).await?.1;
    host.extend(both_sides::<Secret>(s, &[]).await?.1);
    host.extend(both_sides::<Service>(s, &[]).await?.1);
    host.extend(both_sides::<PersistentVolumeClaim>(s, &[]).await?.1);
    host.extend(both_sides::<Pod>(s, &[]).await?.1);
    Ok(host
        .iter()
        .filter(|h| h["metadata"]["annotations"][ANNOTATION_OBJECT_NAME] != "kube-root-ca.crt")
        .count())
}

/// One row of the fault table: printed by the tests and the fault benchmark.
pub struct Row<'a> {
    pub fault: &'a str,
    pub in_flight: usize,
    pub tally: &'a Tally,
    pub converged: Duration,
    pub writes: f64,
}

impl fmt::Display for Row<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "| {} | {} | {} | {} / {} / {} | {:.1} s | {} |",
            self.fault,
            self.in_flight,
            self.tally.checked,
            self.tally.lost.len(),
            self.tally.duplicated.len(),
            self.tally.orphaned.len(),
            self.converged.as_secs_f64(),
            self.writes,
        )
    }
}
