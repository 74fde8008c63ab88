//! Custom resources (`sync.toHost.customResources`, `sync.fromHost.customResources`):
//! resolved against the host at start ([`resolve`]), given a CRD in the virtual cluster
//! ([`crd`]), then synced ([`sync`]). To-host writes of resources an extension API server
//! serves are also written through by the proxy (`proxy::write_through`).

pub mod crd;
pub mod gateway;
pub mod key;
pub mod merge;
pub mod object;
pub mod resolve;
pub mod sync;

use std::sync::Arc;

use anyhow::Context as _;
use kube::Client;
use vnest_crds::Sync;

pub use key::{Direction, ResourceKey};
pub use resolve::{Backing, Final, Resolved};

/// Resolves every enabled custom resource; the first that cannot be resolved is the error.
/// A [`Final`] one means the syncer cannot sync before its next start; any other is worth
/// retrying.
pub async fn resolve_all(
    host: &Client,
    virt: &Client,
    sync: &Sync,
) -> anyhow::Result<Vec<Arc<Resolved>>> {
    let mut resolved = Vec::new();
    for (key, direction) in key::enabled(sync).map_err(Final)? {
        let name = key.resource();
        let declared = key::declared_scope(sync, &key, direction);
        let r = resolve::resolve(host, virt, key, direction, declared)
            .await
            .with_context(|| format!("custom resource {name}"))?;
        tracing::info!(resource = %name, version = %r.resource.version, direction = ?r.direction, backing = ?r.backing, "custom resource resolved");
        resolved.push(Arc::new(r));
    }
    Ok(resolved)
}
