//! Why a reconcile failed. Each message says what failed and names the object; `category`
//! is the `reason` label of `vnest_reconcile_errors_total`.

use crate::{certs::CertError, error::ApiError};

/// Why applying the desired state failed: reported in `ControlPlaneReady` and retried.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error(transparent)]
    Api(#[from] ApiError),
    #[error("failed to prepare the certificates in Secret {secret}: {source}")]
    Certs {
        secret: String,
        #[source]
        source: CertError,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Api(#[from] ApiError),
    #[error(transparent)]
    Apply(#[from] ApplyError),
    /// The cleanup waits for the syncer to stop before removing what it made.
    #[error(
        "failed to remove the syncer's objects yet: waiting for pod {namespace}/{pod} (the syncer) to stop"
    )]
    SyncerRunning { namespace: String, pod: String },
    #[error("failed to update the finalizer of VirtualCluster {object}: {message}")]
    Finalizer { object: String, message: String },
}

impl Error {
    /// One of `metrics::ERROR_REASONS`.
    pub fn category(&self) -> &'static str {
        match self {
            Error::Api(e) if e.is_conflict() => "conflict",
            Error::Api(_) => "api",
            Error::Apply(ApplyError::Certs { .. }) => "certificates",
            Error::Apply(ApplyError::Api(_)) => "apply",
            Error::SyncerRunning { .. } | Error::Finalizer { .. } => "finalizer",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{error::Request, metrics::ERROR_REASONS};

    fn api(code: u16) -> ApiError {
        let status = kube::core::Status::failure("refused", "Conflict").with_code(code);
        Err::<(), _>(kube::Error::Api(Box::new(status)))
            .request("apply", || "StatefulSet demo".into())
            .unwrap_err()
    }

    #[test]
    fn categories_are_metric_reasons_and_messages_name_the_object() {
        let errors = [
            Error::Api(api(409)),
            Error::Api(api(500)),
            Error::Apply(ApplyError::Api(api(403))),
            Error::SyncerRunning {
                namespace: "ns".into(),
                pod: "demo-0".into(),
            },
        ];
        let categories: Vec<&str> = errors.iter().map(Error::category).collect();
        assert_eq!(categories, ["conflict", "api", "apply", "finalizer"]);
        assert!(categories.iter().all(|c| ERROR_REASONS.contains(c)));
        assert!(
            errors[0]
                .to_string()
                .starts_with("failed to apply StatefulSet demo: "),
            "{}",
            errors[0]
        );
    }
}
