//! The kubelet API paths the virtual API server calls for a pod's streams and logs, and the
//! host API server's pod subresource request each one becomes.
//!
//! kube-apiserver (`pkg/registry/core/pod/strategy.go`) sends `/exec|attach/{ns}/{pod}/{container}`
//! with `input`, `output`, `error`, `tty` (`1`) and `command` parameters,
//! `/portForward/{ns}/{pod}` with `port`, and `/containerLogs/{ns}/{pod}/{container}` with the
//! log options under their API names. The container it sends is the one it already resolved.

use super::super::route::PodSubresource;

/// A kubelet request, as the host API server's subresource request of the same pod.
#[derive(Debug, PartialEq, Eq)]
pub struct KubeletRequest {
    /// The virtual pod's namespace and name.
    pub namespace: String,
    pub pod: String,
    pub subresource: PodSubresource,
    /// The query of the host request (encoded, without `?`).
    pub query: String,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PathError {
    #[error(
        "vnest kubelet proxy: {0} is not a pod stream it serves (only /exec, /attach and \
         /containerLogs/{{namespace}}/{{pod}}/{{container}} and /portForward/{{namespace}}/{{pod}})"
    )]
    Unknown(String),
}

/// Log options the host API server takes under the names the kubelet API uses.
const LOG_PARAMETERS: [&str; 8] = [
    "follow",
    "previous",
    "timestamps",
    "sinceSeconds",
    "sinceTime",
    "tailLines",
    "limitBytes",
    "stream",
];

/// The host query parameter for kubelet stream parameter `key` of `sub`, if it has one.
fn host_parameter(sub: PodSubresource, key: &str) -> Option<&str> {
    match (sub, key) {
        (PodSubresource::Exec | PodSubresource::Attach, "input") => Some("stdin"),
        (PodSubresource::Exec | PodSubresource::Attach, "output") => Some("stdout"),
        (PodSubresource::Exec | PodSubresource::Attach, "error") => Some("stderr"),
        (PodSubresource::Exec | PodSubresource::Attach, "tty") => Some("tty"),
        (PodSubresource::Exec, "command") => Some("command"),
        (PodSubresource::PortForward, "port") => Some("ports"),
        (PodSubresource::Log, key) => LOG_PARAMETERS.iter().copied().find(|k| *k == key),
        _ => None,
    }
}

/// The host query for `sub` from the kubelet query: parameters renamed (values kept as
/// encoded; the kubelet API's `1` becomes `true`), unknown ones dropped, `container` added.
fn host_query(sub: PodSubresource, kubelet_query: &str, container: Option<&str>) -> String {
    let mut pairs: Vec<String> = kubelet_query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .filter_map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let host_key = host_parameter(sub, key)?;
            let flag = matches!(key, "input" | "output" | "error" | "tty");
            let value = if flag && value == "1" { "true" } else { value };
            Some(format!("{host_key}={value}"))
        })
        .collect();
    if let Some(container) = container {
        pairs.push(format!("container={container}"));
    }
    pairs.join("&")
}

/// The request the virtual API server's `path` and `query` ask the kubelet for.
pub fn parse(path: &str, query: Option<&str>) -> Result<KubeletRequest, PathError> {
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let (sub, namespace, pod, container) = match segments[..] {
        ["exec", ns, pod, container] => (PodSubresource::Exec, ns, pod, Some(container)),
        ["attach", ns, pod, container] => (PodSubresource::Attach, ns, pod, Some(container)),
        ["containerLogs", ns, pod, container] => (PodSubresource::Log, ns, pod, Some(container)),
        ["portForward", ns, pod] => (PodSubresource::PortForward, ns, pod, None),
        _ => return Err(PathError::Unknown(path.to_string())),
    };
    if [namespace, pod]
        .iter()
        .chain(&container)
        .any(|s| s.is_empty())
    {
        return Err(PathError::Unknown(path.to_string()));
    }
    Ok(KubeletRequest {
        namespace: namespace.to_string(),
        pod: pod.to_string(),
        subresource: sub,
        query: host_query(sub, query.unwrap_or_default(), container),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(namespace: &str, pod: &str, sub: PodSubresource, query: &str) -> KubeletRequest {
        KubeletRequest {
            namespace: namespace.into(),
            pod: pod.into(),
            subresource: sub,
            query: query.into(),
        }
    }

    /// Exec's stream flags take the API's names and values, each command word stays in order
    /// and encoded, and the container from the path becomes the `container` parameter.
    #[test]
    fn exec_becomes_the_pods_exec_subresource() {
        assert_eq!(
            parse(
                "/exec/app/web-0/main",
                Some("command=sh&command=-c&command=echo%20hi&error=1&input=1&output=1&tty=1")
            ),
            Ok(request(
                "app",
                "web-0",
                PodSubresource::Exec,
                "command=sh&command=-c&command=echo%20hi&stderr=true&stdin=true&stdout=true&tty=true&container=main"
            ))
        );
    }

    /// Attach has the same flags but no command: a `command` sent to it is dropped.
    #[test]
    fn attach_keeps_its_flags_and_drops_a_command() {
        assert_eq!(
            parse("/attach/app/web-0/main", Some("output=1&command=ls")),
            Ok(request(
                "app",
                "web-0",
                PodSubresource::Attach,
                "stdout=true&container=main"
            ))
        );
    }

    /// Port-forward names no container; its `port` list is the API's `ports`.
    #[test]
    fn port_forward_takes_its_ports() {
        assert_eq!(
            parse("/portForward/app/web-0", Some("port=8080%2C9090")),
            Ok(request(
                "app",
                "web-0",
                PodSubresource::PortForward,
                "ports=8080%2C9090"
            ))
        );
        assert_eq!(
            parse("/portForward/app/web-0", None),
            Ok(request("app", "web-0", PodSubresource::PortForward, ""))
        );
    }

    /// Log options keep their names; anything else is not passed on.
    #[test]
    fn container_logs_become_the_pods_log_with_their_options() {
        assert_eq!(
            parse(
                "/containerLogs/app/web-0/main",
                Some(
                    "follow=true&tailLines=10&sinceTime=2026-12-06T10%3A00%3A00Z&stream=All&limitBytes=5&evil=1"
                )
            ),
            Ok(request(
                "app",
                "web-0",
                PodSubresource::Log,
                "follow=true&tailLines=10&sinceTime=2026-12-06T10%3A00%3A00Z&stream=All&limitBytes=5&container=main"
            ))
        );
    }

    /// Paths the virtual API server does not send for pods (other kubelet endpoints, the uid
    /// form, missing or empty segments) are refused with the path named.
    #[test]
    fn other_kubelet_paths_are_refused() {
        for path in [
            "/",
            "/pods",
            "/stats/summary",
            "/run/app/web-0/main",
            "/exec/app/web-0",
            "/exec/app/web-0/uid-1/main",
            "/exec//web-0/main",
            "/containerLogs/app/web-0/",
            "/portForward/app/web-0/extra",
            "/portForward/app/",
        ] {
            let error = parse(path, None).unwrap_err();
            assert_eq!(error, PathError::Unknown(path.into()));
            assert!(error.to_string().contains(path), "{error}");
        }
    }
}
