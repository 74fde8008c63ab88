//! Resolution of each configured custom resource against the host, once at start: which
//! version, which scope, and whether a CRD or an extension API server (APIService) serves
//! it; then the matching CRD in the virtual cluster. A resource the host does not serve
//! stops the syncer from becoming ready until a later start finds it.

use std::time::Duration;

use anyhow::{Context as _, anyhow, bail};
use k8s_openapi::{
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    kube_aggregator::pkg::apis::apiregistration::v1::APIService,
};
use kube::{Api, Client, discovery::ApiResource};
use vnest_crds::{ResourceScope, containment::covers};

use super::{
    crd::{self, Names},
    key::{self, Direction, ResourceKey},
};
use crate::{
    engine::{self, Queue},
    translate::gateway,
};

/// How the host serves a resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Backing {
    /// A CustomResourceDefinition: its schema is copied into the virtual cluster.
    Crd,
    /// An extension API server behind this APIService: a schemaless CRD is generated, and
    /// to-host writes are written through synchronously.
    Aggregated { api_service: String },
    /// A kind both API servers serve themselves (CSIStorageCapacities): nothing to resolve.
    BuiltIn,
}

/// A resolution that cannot succeed before the next start: the host does not serve the
/// resource, or the virtual cluster has a CRD of that name vnest may not adopt. Any other
/// failure (RBAC not granted yet, an API server restarting) is worth retrying.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Final(pub String);

/// A configured custom resource, resolved.
#[derive(Clone)]
pub struct Resolved {
    pub key: ResourceKey,
    pub direction: Direction,
    /// Group, version, kind and plural, the same on both sides.
    pub resource: ApiResource,
    pub namespaced: bool,
    /// Whether the virtual CRD serves `/status` (status is then copied through it).
    pub virtual_status: bool,
    pub backing: Backing,
    /// The work queue of its sync; the proxy hands back objects it wrote through.
    pub queue: Queue,
    /// A Gateway API kind whose references are translated on the way to the host.
    pub gateway: Option<gateway::Kind>,
}

impl Resolved {
    /// A built-in namespaced kind copied from the host with the custom-resource machinery.
    pub fn built_in_from_host(resource: ApiResource) -> Self {
        Resolved {
            key: ResourceKey {
                plural: resource.plural.clone(),
                group: resource.group.clone(),
                version: Some(resource.version.clone()),
            },
            direction: Direction::FromHost,
            resource,
            namespaced: true,
            virtual_status: false,
            backing: Backing::BuiltIn,
            queue: Queue::default(),
            gateway: None,
        }
    }

    /// `<plural>.<group>`, as metrics and logs name it.
    pub fn name(&self) -> String {
        self.key.resource()
    }
}

/// The version to sync: the key's, else the host's preferred version of the group.
async fn version(host: &Client, key: &ResourceKey) -> anyhow::Result<String> {
    if let Some(v) = &key.version {
        return Ok(v.clone());
    }
    let groups = host
        .list_api_groups()
        .await
        .context("failed to list the host's API groups")?;
    groups
        .groups
        .iter()
        .find(|g| g.name == key.group)
        .and_then(|g| g.preferred_version.as_ref().or(g.versions.first()))
        .map(|v| v.version.clone())
        .ok_or_else(|| {
            Final(format!(
                "the host does not serve API group {} (yet)",
                key.group
            ))
            .into()
        })
}

/// What the host's discovery says about the resource.
async fn discover(host: &Client, key: &ResourceKey, version: &str) -> anyhow::Result<Names> {
    let group_version = format!("{}/{version}", key.group);
    let list = host
        .list_api_group_resources(&group_version)
        .await
        .map_err(|e| match &e {
            kube::Error::Api(s) if s.code == 404 || s.code == 503 => Final(format!(
                "the host does not serve {group_version} (yet): {e}"
            ))
            .into(),
            _ => anyhow!("failed to read the host's discovery of {group_version}: {e}"),
        })?;
    let found = list
        .resources
        .iter()
        .find(|r| r.name == key.plural)
        .ok_or_else(|| {
            Final(format!(
                "the host serves {group_version} but not its resource {} (yet)",
                key.plural
            ))
        })?;
    Ok(Names {
        group: key.group.clone(),
        version: version.to_string(),
        plural: key.plural.clone(),
        singular: found.singular_name.clone(),
        kind: found.kind.clone(),
        short_names: found.short_names.clone().unwrap_or_default(),
        namespaced: found.namespaced,
    })
}

/// Resolves `key` on the host and makes sure the virtual cluster serves it; a `declared`
/// scope the host contradicts is refused.
pub async fn resolve(
    host: &Client,
    virt: &Client,
    key: ResourceKey,
    direction: Direction,
    declared: Option<ResourceScope>,
) -> anyhow::Result<Resolved> {
    let resource_name = key.resource();
    let version = version(host, &key).await?;
    let names = discover(host, &key, &version).await?;
    if let Some(mismatch) = key::scope_mismatch(&key, direction, declared, names.namespaced) {
        return Err(Final(mismatch).into());
    }
    let host_crds: Api<CustomResourceDefinition> = Api::all(host.clone());
    let (wanted, backing) = match host_crds
        .get_opt(&resource_name)
        .await
        .with_context(|| format!("failed to read the host's CRD {resource_name}"))?
    {
        Some(host_crd) => (
            crd::copied(&host_crd, &version).map_err(|e| Final(e.to_string()))?,
            Backing::Crd,
        ),
        None => {
            let api_service = format!("{version}.{}", key.group);
            let found = Api::<APIService>::all(host.clone())
                .get_opt(&api_service)
                .await
                .with_context(|| format!("failed to read the host's APIService {api_service}"))?;
            match found {
                Some(s) if s.spec.as_ref().is_some_and(|spec| spec.service.is_some()) => (
                    crd::generated(&names, &api_service),
                    Backing::Aggregated { api_service },
                ),
                _ => return Err(Final(format!(
                    "the host serves {resource_name} but neither a CRD nor an extension API server's APIService backs it"
                ))
                .into()),
            }
        }
    };
    let virtual_status = wanted.spec.versions[0]
        .subresources
        .as_ref()
        .is_some_and(|s| s.status.is_some());
    ensure_virtual_crd(virt, wanted).await?;
    let gateway = (direction == Direction::ToHost)
        .then(|| gateway::Kind::of(&key.group, &key.plural))
        .flatten();
    Ok(Resolved {
        gateway,
        resource: ApiResource {
            group: key.group.clone(),
            version: version.clone(),
            api_version: format!("{}/{version}", key.group),
            kind: names.kind.clone(),
            plural: key.plural.clone(),
        },
        key,
        direction,
        namespaced: names.namespaced,
        virtual_status,
        backing,
        queue: Queue::default(),
    })
}

/// Applies the virtual CRD rolled forward from the one there, when it differs, and waits
/// until the virtual API server serves it.
async fn ensure_virtual_crd(virt: &Client, wanted: CustomResourceDefinition) -> anyhow::Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(virt.clone());
    let name = wanted.metadata.name.clone().unwrap_or_default();
    let existing = api
        .get_opt(&name)
        .await
        .with_context(|| format!("failed to read the virtual CRD {name}"))?;
    let desired = crd::roll_forward(existing.as_ref(), wanted).map_err(|e| Final(e.to_string()))?;
    let current = existing.as_ref().is_some_and(|e| {
        covers(
            &serde_json::to_value(e).unwrap_or_default(),
            &serde_json::to_value(&desired).unwrap_or_default(),
        )
    });
    if !current {
        let mut body = serde_json::to_value(&desired)?;
        body["apiVersion"] = "apiextensions.k8s.io/v1".into();
        body["kind"] = "CustomResourceDefinition".into();
        engine::apply(&api, &name, &body)
            .await
            .with_context(|| format!("failed to apply the virtual CRD {name}"))?;
        tracing::info!(crd = %name, "applied the virtual CRD");
    }
    for _ in 0..60 {
        let crd = api.get(&name).await?;
        let established = crd
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| {
                c.iter()
                    .any(|c| c.type_ == "Established" && c.status == "True")
            });
        if established {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    bail!("the virtual CRD {name} did not become Established within 30 s")
}
