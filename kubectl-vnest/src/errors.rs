//! Kubernetes API errors turned into what a user should do next.

/// `err` from `action` (e.g. "get VirtualCluster team-a/dev"), explained.
pub fn explain(err: kube::Error, action: &str, namespace: &str) -> anyhow::Error {
    match &err {
        kube::Error::Api(status) if status.code == 404 => {
            anyhow::anyhow!("{action}: not found (see `kubectl vnest list -n {namespace}`)")
        }
        kube::Error::Api(status) if status.code == 403 => anyhow::anyhow!(
            "{action}: no permission ({}); ask your platform team, or check with \
             `kubectl auth can-i --list -n {namespace}`",
            status.message
        ),
        _ => anyhow::anyhow!("{action}: {err}"),
    }
}
