//! A tenant's world for syncer tests: a host namespace with a VirtualCluster the operator
//! reconciled, the syncer's wiring from what the operator made, and a fresh namespace in the
//! bed's virtual API server; plus the small reads the tests poll with.

use std::time::Duration;

use k8s_openapi::{
    NamespaceResourceScope,
    api::core::v1::{Event, Pod, Secret, ServiceAccount},
};
use kube::{
    Api, Client, Resource,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams},
};
use serde::{Serialize, de::DeserializeOwned};
use serde_json::{Value, json};
use vnest_crds::{SyncerConfig, meta::SYNCER_CONFIG_KEY, translate::host_name};

use crate::{
    OperatorProcess, SyncerProcess, TestNamespace, bed, crd,
    fixtures::{create_virtual_cluster, free_port, patch_spec},
    syncer::SyncerWiring,
    wait,
};

/// A namespaced object kind the tests create from JSON, read and list.
pub trait Namespaced:
    Resource<Scope = NamespaceResourceScope, DynamicType = ()>
    + Clone
    + DeserializeOwned
    + Serialize
    + std::fmt::Debug
{
}

impl<K> Namespaced for K where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + Clone
        + DeserializeOwned
        + Serialize
        + std::fmt::Debug
{
}

/// How long the tests wait for the syncer to converge.
pub const TIMEOUT: Duration = Duration::from_secs(60);
/// The VirtualCluster's name in every tenant.
pub const VC: &str = "vc";

pub struct Tenant {
    pub host: Client,
    pub virt: Client,
    pub ns: TestNamespace,
    pub vns: TestNamespace,
    pub wiring: SyncerWiring,
    _operator: OperatorProcess,
}

/// A VirtualCluster spec that syncs `kind` (as `spec.sync.toHost` spells it) to the host.
pub fn syncing_to_host(kind: &str) -> Value {
    json!({ "sync": { "toHost": { kind: { "enabled": true } } } })
}

/// A tenant for a test named by `prefix`, its VirtualCluster made from `spec`.
pub async fn setup(prefix: &str, spec: Value) -> Tenant {
    let host = bed().host().await;
    crd::install(&host).await;
    let ns = TestNamespace::create(&host, prefix).await;
    let operator = OperatorProcess::start(bed(), &ns.name, "op", free_port());
    create_virtual_cluster(&host, &ns.name, VC, spec).await;

    let virt = bed().virtual_cluster().await;
    let vns = TestNamespace::create(&virt, prefix).await;
    // The virtual ServiceAccount admission refuses pods until `default` exists.
    let accounts: Api<ServiceAccount> = Api::namespaced(virt.clone(), &vns.name);
    wait::until("virtual default ServiceAccount", TIMEOUT, || async {
        accounts.get("default").await.map_err(|e| e.to_string())
    })
    .await;
    Tenant {
        wiring: SyncerWiring::from_operator(&host, &ns.name, VC, &vns.name).await,
        host,
        virt,
        ns,
        vns,
        _operator: operator,
    }
}

impl Tenant {
    /// The host name of virtual object `name` of this tenant's virtual namespace.
    pub fn host_name(&self, name: &str) -> String {
        host_name(name, &self.vns.name, VC)
    }

    pub fn host_api<K>(&self) -> Api<K>
    where
        K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>,
    {
        Api::namespaced(self.host.clone(), &self.ns.name)
    }

    pub fn virt_api<K>(&self) -> Api<K>
    where
        K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>,
    {
        Api::namespaced(self.virt.clone(), &self.vns.name)
    }

    /// Merge-patches the spec of this tenant's VirtualCluster with `patch`.
    pub async fn patch_spec(&self, patch: Value) {
        patch_spec(&self.host, &self.ns.name, VC, patch).await;
    }

    /// After a spec change: waits until the operator's syncer config satisfies `done`
    /// (described by `what`), then re-reads the wiring (keeping its extra environment).
    pub async fn rewire(&mut self, what: &str, done: impl Fn(&SyncerConfig) -> bool) {
        let secrets: Api<Secret> = Api::namespaced(self.host.clone(), &self.ns.name);
        let name = format!("vc-config-{VC}");
        wait::until(&format!("syncer config {what}"), TIMEOUT, || async {
            let text = secrets
                .get(&name)
                .await
                .map_err(|e| e.to_string())?
                .data
                .and_then(|d| d.get(SYNCER_CONFIG_KEY).cloned())
                .map(|b| String::from_utf8_lossy(&b.0).into_owned())
                .unwrap_or_default();
            let config: SyncerConfig = serde_yaml::from_str(&text).map_err(|e| e.to_string())?;
            done(&config).then_some(()).ok_or(text)
        })
        .await;
        let env = std::mem::take(&mut self.wiring.env);
        self.wiring =
            SyncerWiring::from_operator(&self.host, &self.ns.name, VC, &self.vns.name).await;
        self.wiring.env = env;
    }

    pub fn start_syncer(&self) -> SyncerProcess {
        SyncerProcess::start(&self.wiring, free_port())
    }

    /// Creates `obj` in the virtual namespace, retrying until the API server takes it.
    pub async fn create<K>(&self, obj: Value) -> K
    where
        K: Namespaced,
    {
        let obj: K = serde_json::from_value(obj).expect("object JSON");
        let api = self.virt_api::<K>();
        wait::until("virtual create", TIMEOUT, || async {
            api.create(&PostParams::default(), &obj)
                .await
                .map_err(|e| e.to_string())
        })
        .await
    }

    /// The host copy of virtual pod `name` once KWOK runs it.
    pub async fn running_host_pod(&self, name: &str) -> Pod {
        let api: Api<Pod> = self.host_api();
        wait::until(&format!("host pod of {name} Running"), TIMEOUT, || async {
            let p = present(&api, self.host_name(name)).await?;
            (phase(&p) == Some("Running"))
                .then_some(p)
                .ok_or("not Running".to_string())
        })
        .await
    }

    /// The host copy of virtual object `name`, read through `host_api`, once the syncer has
    /// made it.
    pub async fn host_copy<K>(&self, host_api: &Api<K>, name: &str) -> K
    where
        K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
    {
        wait::until(&format!("host copy of {name}"), TIMEOUT, || {
            present(host_api, self.host_name(name))
        })
        .await
    }

    /// Holds for 5 s that virtual pod `name` (refused, say) has no host copy.
    pub async fn never_on_host(&self, name: &str) {
        let api: Api<Pod> = self.host_api();
        let host = self.host_name(name);
        wait::holds(
            &format!("no host pod for {name}"),
            Duration::from_secs(5),
            || absent(&api, &host),
        )
        .await;
    }

    pub async fn teardown(self) {
        // Bound virtual pods wait for a kubelet to finish their deletion; none will once the
        // syncer is gone, so end them now or the virtual namespace never goes.
        let _ = self
            .virt_api::<Pod>()
            .delete_collection(
                &DeleteParams::default().grace_period(0),
                &ListParams::default(),
            )
            .await;
        self.vns.delete(&self.virt).await;
        self.ns.delete(&self.host).await;
    }
}

/// Object `name`, or why not.
pub async fn present<K>(api: &Api<K>, name: impl AsRef<str>) -> Result<K, String>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let name = name.as_ref();
    api.get_opt(name)
        .await
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("{name} not found"))
}

/// Deletes object `name` (default propagation, not waiting for it to go); panics naming it
/// when the API server refuses.
pub async fn delete<K>(api: &Api<K>, name: impl AsRef<str>)
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let name = name.as_ref();
    api.delete(name, &DeleteParams::default())
        .await
        .unwrap_or_else(|e| panic!("delete {name}: {e}"));
}

/// Object `name` with `patch` merged into it; panics naming it when the API server refuses.
pub async fn merge_patch<K>(api: &Api<K>, name: impl AsRef<str>, patch: Value) -> K
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    merge(api, None, name.as_ref(), patch).await
}

/// Object `name` with `patch` merged into its status; panics naming it when the API server
/// refuses.
pub async fn merge_patch_status<K>(api: &Api<K>, name: impl AsRef<str>, patch: Value) -> K
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    merge(api, Some("status"), name.as_ref(), patch).await
}

async fn merge<K>(api: &Api<K>, subresource: Option<&str>, name: &str, patch: Value) -> K
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let (params, patch) = (PatchParams::default(), Patch::Merge(patch));
    match subresource {
        None => api.patch(name, &params, &patch).await,
        Some(sub) => api.patch_subresource(sub, name, &params, &patch).await,
    }
    .unwrap_or_else(|e| panic!("patch {name} {}: {e}", subresource.unwrap_or_default()))
}

/// Ok once object `name` is gone.
pub async fn absent<K>(api: &Api<K>, name: impl AsRef<str>) -> Result<(), String>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let name = name.as_ref();
    match api.get_opt(name).await.map_err(|e| e.to_string())? {
        None => Ok(()),
        Some(_) => Err(format!("{name} still exists")),
    }
}

/// The first Warning event about virtual object `name`.
pub async fn warning_about(s: &Tenant, name: &str) -> Event {
    let what = format!("Warning event about {name}");
    first_warning(&s.virt_api(), &what, |e| {
        e.involved_object.name.as_deref() == Some(name)
    })
    .await
}

/// The first Warning event of `events` that `matches`, once there is one; `what` names it.
pub async fn first_warning(
    events: &Api<Event>,
    what: &str,
    matches: impl Fn(&Event) -> bool,
) -> Event {
    wait::until(what, TIMEOUT, || async {
        let list = events
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?;
        list.items
            .into_iter()
            .find(|e| e.type_.as_deref() == Some("Warning") && matches(e))
            .ok_or("no event yet".to_string())
    })
    .await
}

/// `kubectl auth whoami` against the virtual API server with `token` alone: the user name,
/// or kubectl's error.
pub fn virtual_whoami(token: &str) -> Result<String, String> {
    let bed = bed();
    bed.kubectl_with(
        std::path::Path::new("/dev/null"),
        &[
            "--server",
            bed.var("VNEST_VIRTUAL_SERVER"),
            "--certificate-authority",
            bed.var("VNEST_TESTBED_CA"),
            "--token",
            token,
            "auth",
            "whoami",
            "-o",
            "jsonpath={.status.userInfo.username}",
        ],
    )
}

pub fn phase(pod: &Pod) -> Option<&str> {
    pod.status.as_ref()?.phase.as_deref()
}
