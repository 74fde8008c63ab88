//! Which part of the proxy answers a request, from its path alone.

/// Pod subresources a kubelet serves: the host pod's, reached by the virtual API server
/// through [`super::kubelet`] or, where it cannot be (k3s, k0s), by the proxy directly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PodSubresource {
    Log,
    Exec,
    Attach,
    PortForward,
}

impl PodSubresource {
    fn parse(segment: &str) -> Option<Self> {
        Some(match segment {
            "log" => Self::Log,
            "exec" => Self::Exec,
            "attach" => Self::Attach,
            "portforward" => Self::PortForward,
            _ => return None,
        })
    }

    /// The subresource as RBAC names it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Log => "log",
            Self::Exec => "exec",
            Self::Attach => "attach",
            Self::PortForward => "portforward",
        }
    }

    /// The RBAC verb the API server checks: reading logs is `get`, opening a stream `create`.
    pub fn verb(self) -> &'static str {
        match self {
            Self::Log => "get",
            _ => "create",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    /// The proxy's own liveness.
    Healthz,
    /// Ready once the syncer's caches are synced.
    Readyz,
    /// The syncer's Prometheus metrics.
    Metrics,
    /// A virtual pod's subresource the proxy serves from its host pod itself.
    Pod {
        namespace: String,
        name: String,
        subresource: PodSubresource,
    },
    /// Everything else goes to the virtual API server.
    Virtual,
}

impl Route {
    pub fn of(path: &str) -> Route {
        match path {
            "/healthz" | "/livez" => return Route::Healthz,
            "/readyz" => return Route::Readyz,
            "/metrics" => return Route::Metrics,
            _ => {}
        }
        let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        if let [
            "api",
            "v1",
            "namespaces",
            namespace,
            "pods",
            name,
            subresource,
        ] = segments[..]
            && let Some(subresource) = PodSubresource::parse(subresource)
            && !namespace.is_empty()
            && !name.is_empty()
        {
            return Route::Pod {
                namespace: namespace.to_string(),
                name: name.to_string(),
                subresource,
            };
        }
        Route::Virtual
    }

    /// Whether a request on this route is tenant activity (probes and scrapes are not).
    pub fn is_activity(&self) -> bool {
        matches!(self, Route::Pod { .. } | Route::Virtual)
    }

    /// Metric label of the route.
    pub fn label(&self) -> &'static str {
        match self {
            Route::Healthz | Route::Readyz | Route::Metrics => "local",
            Route::Pod { .. } => "host_pod",
            Route::Virtual => "virtual",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(namespace: &str, name: &str, subresource: PodSubresource) -> Route {
        Route::Pod {
            namespace: namespace.into(),
            name: name.into(),
            subresource,
        }
    }

    #[test]
    fn pod_streams_and_logs_go_to_the_host_pod() {
        for (path, subresource) in [
            ("log", PodSubresource::Log),
            ("exec", PodSubresource::Exec),
            ("attach", PodSubresource::Attach),
            ("portforward", PodSubresource::PortForward),
        ] {
            assert_eq!(
                Route::of(&format!("/api/v1/namespaces/app/pods/web-0/{path}")),
                pod("app", "web-0", subresource)
            );
        }
    }

    #[test]
    fn other_pod_paths_go_to_the_virtual_api_server() {
        for path in [
            "/api/v1/namespaces/app/pods/web-0",
            "/api/v1/namespaces/app/pods/web-0/status",
            "/api/v1/namespaces/app/pods/web-0/eviction",
            "/api/v1/namespaces/app/pods",
            "/api/v1/pods",
            "/apis/apps/v1/namespaces/app/deployments/web/log",
            "/api/v1/namespaces//pods/x/log",
            "/api/v1/namespaces/app/pods/web-0/log/extra",
        ] {
            assert_eq!(Route::of(path), Route::Virtual, "{path}");
        }
    }

    #[test]
    fn health_and_metrics_are_local_and_not_activity() {
        for (path, route) in [
            ("/healthz", Route::Healthz),
            ("/livez", Route::Healthz),
            ("/readyz", Route::Readyz),
            ("/metrics", Route::Metrics),
        ] {
            assert_eq!(Route::of(path), route);
            assert!(!route.is_activity());
            assert_eq!(route.label(), "local");
        }
        assert!(Route::of("/api").is_activity());
        assert!(pod("a", "b", PodSubresource::Log).is_activity());
    }

    #[test]
    fn rbac_verbs_match_the_api_server() {
        assert_eq!(PodSubresource::Log.verb(), "get");
        assert_eq!(PodSubresource::Exec.verb(), "create");
        assert_eq!(PodSubresource::PortForward.name(), "portforward");
    }
}
