//! A failed request to the API server, named: what it was to do, and to which object.

/// A request to the API server that failed, with what it was for.
#[derive(Debug, thiserror::Error)]
#[error("failed to {verb} {object}: {source}")]
pub struct ApiError {
    /// What the request was to do: `read`, `apply`, `delete`, ...
    pub verb: &'static str,
    /// The object, as `<Kind> <name>`.
    pub object: String,
    #[source]
    pub source: kube::Error,
}

impl ApiError {
    /// Whether the API server refused the request because a newer version exists.
    pub fn is_conflict(&self) -> bool {
        matches!(&self.source, kube::Error::Api(s) if s.code == 409)
    }
}

/// Names the request behind a [`kube::Error`].
pub trait Request<T> {
    fn request(self, verb: &'static str, object: impl FnOnce() -> String) -> Result<T, ApiError>;
}

impl<T> Request<T> for Result<T, kube::Error> {
    fn request(self, verb: &'static str, object: impl FnOnce() -> String) -> Result<T, ApiError> {
        self.map_err(|source| ApiError {
            verb,
            object: object(),
            source,
        })
    }
}
