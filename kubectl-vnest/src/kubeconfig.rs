//! The tenant kubeconfig from a VirtualCluster's Secret, and merging it into a local file.

use anyhow::{Context, Result, bail};
use kube::config::{Kubeconfig, NamedCluster};

/// Parses the kubeconfig the operator stored under `config` in the `vc-<name>` Secret.
pub fn parse(yaml: &str) -> Result<Kubeconfig> {
    Kubeconfig::from_yaml(yaml).context("the kubeconfig secret does not hold a valid kubeconfig")
}

/// Points every cluster of `config` at `server` (for a port-forward or an ingress address).
pub fn with_server(mut config: Kubeconfig, server: &str) -> Result<Kubeconfig> {
    if !server.starts_with("https://") {
        bail!("--server {server:?}: the virtual cluster only speaks TLS; use https://host[:port]");
    }
    for NamedCluster { cluster, .. } in &mut config.clusters {
        if let Some(cluster) = cluster {
            cluster.server = Some(server.to_string());
        }
    }
    Ok(config)
}

/// Renames the single context (and its cluster and user) of `config` to `name`.
pub fn renamed(mut config: Kubeconfig, name: &str) -> Kubeconfig {
    for cluster in &mut config.clusters {
        cluster.name = name.to_string();
    }
    for user in &mut config.auth_infos {
        user.name = name.to_string();
    }
    for named in &mut config.contexts {
        named.name = name.to_string();
        if let Some(context) = &mut named.context {
            context.cluster = name.to_string();
            context.user = Some(name.to_string());
        }
    }
    config.current_context = Some(name.to_string());
    config
}

/// `existing` with every cluster, user and context of `new` added, replacing same-named
/// entries, and `new`'s current context made current.
pub fn merge(mut existing: Kubeconfig, new: Kubeconfig) -> Kubeconfig {
    for cluster in new.clusters {
        existing.clusters.retain(|c| c.name != cluster.name);
        existing.clusters.push(cluster);
    }
    for user in new.auth_infos {
        existing.auth_infos.retain(|u| u.name != user.name);
        existing.auth_infos.push(user);
    }
    for context in new.contexts {
        existing.contexts.retain(|c| c.name != context.name);
        existing.contexts.push(context);
    }
    if new.current_context.is_some() {
        existing.current_context = new.current_context;
    }
    existing.api_version.get_or_insert_with(|| "v1".into());
    existing.kind.get_or_insert_with(|| "Config".into());
    existing
}

#[cfg(test)]
mod tests {
    use super::*;

    const TENANT: &str = r#"
apiVersion: v1
kind: Config
clusters: [{ name: vnest_demo_demo, cluster: { server: "https://demo.demo.svc:443", certificate-authority-data: Q0E= } }]
users: [{ name: vnest_demo_demo, user: { client-certificate-data: Q0VSVA==, client-key-data: S0VZ } }]
contexts: [{ name: vnest_demo_demo, context: { cluster: vnest_demo_demo, user: vnest_demo_demo } }]
current-context: vnest_demo_demo
"#;

    const MINE: &str = r#"
apiVersion: v1
kind: Config
clusters: [{ name: host, cluster: { server: "https://127.0.0.1:6443" } }, { name: vnest_demo_demo, cluster: { server: "https://stale" } }]
users: [{ name: host, user: { token: abc } }]
contexts: [{ name: host, context: { cluster: host, user: host } }]
current-context: host
"#;

    #[test]
    fn merge_replaces_same_named_entries_and_switches_context() {
        let merged = merge(parse(MINE).unwrap(), parse(TENANT).unwrap());
        assert_eq!(merged.current_context.as_deref(), Some("vnest_demo_demo"));
        let names: Vec<_> = merged.clusters.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["host", "vnest_demo_demo"]);
        let server = merged.clusters[1]
            .cluster
            .as_ref()
            .unwrap()
            .server
            .as_deref();
        assert_eq!(
            server,
            Some("https://demo.demo.svc:443"),
            "the stale entry is gone"
        );
        assert_eq!(merged.auth_infos.len(), 2);
        assert_eq!(merged.contexts.len(), 2);
    }

    #[test]
    fn merge_into_an_empty_file_makes_a_complete_kubeconfig() {
        let merged = merge(Kubeconfig::default(), parse(TENANT).unwrap());
        assert_eq!(merged.kind.as_deref(), Some("Config"));
        assert_eq!(merged.api_version.as_deref(), Some("v1"));
        assert_eq!(merged.contexts.len(), 1);
    }

    #[test]
    fn server_override_needs_https_and_reaches_every_cluster() {
        let config = with_server(parse(TENANT).unwrap(), "https://127.0.0.1:8443").unwrap();
        let server = config.clusters[0]
            .cluster
            .as_ref()
            .unwrap()
            .server
            .as_deref();
        assert_eq!(server, Some("https://127.0.0.1:8443"));
        let err = with_server(parse(TENANT).unwrap(), "http://x").unwrap_err();
        assert!(err.to_string().contains("--server"), "{err}");
    }

    #[test]
    fn rename_keeps_context_cluster_and_user_together() {
        let config = renamed(parse(TENANT).unwrap(), "team-a");
        let context = config.contexts[0].context.as_ref().unwrap();
        assert_eq!(config.contexts[0].name, "team-a");
        assert_eq!(context.cluster, "team-a");
        assert_eq!(context.user.as_deref(), Some("team-a"));
        assert_eq!(config.clusters[0].name, "team-a");
        assert_eq!(config.auth_infos[0].name, "team-a");
        assert_eq!(config.current_context.as_deref(), Some("team-a"));
    }

    #[test]
    fn garbage_is_refused_with_a_reason() {
        let err = parse("{{{").unwrap_err();
        assert!(err.to_string().contains("valid kubeconfig"), "{err}");
    }
}
