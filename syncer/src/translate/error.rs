//! Why the translate layer gives no host (or virtual) copy of an object. Each is the note of
//! the Warning event or log line that says so; [`TranslateError::category`] is the event's
//! reason.

use vnest_crds::FieldError;

/// A translation that cannot be made.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TranslateError {
    /// A pod asks for a node the virtual cluster does not show.
    #[error(
        "not synced to the host: spec.nodeName {node} is not one of the virtual cluster's nodes \
         (those shown from host nodes its pods run on); leave spec.nodeName empty or name one of them"
    )]
    NodeNotShown { node: String },
    /// A `toHost.pods` patch could not act on the host pod.
    #[error(transparent)]
    PodPatch(#[from] FieldError),
    /// The patches left something that is not a pod.
    #[error("the patched pod is not a valid pod: {0}")]
    PatchedPodInvalid(String),
    /// A replicated host Service has no ClusterIP to share.
    #[error("host Service {service} is headless: there is no ClusterIP to share")]
    Headless { service: String },
    /// A Service replicated to the host has no pods to select.
    #[error("virtual Service {service} has no selector: there are no pods to select")]
    NoSelector { service: String },
    /// An object without a name has no host name either.
    #[error("failed to mirror a {kind}: it has no metadata.name")]
    Unnamed { kind: String },
    /// A Gateway API reference the host copy cannot keep (field path, why, and the fix).
    #[error("not synced to the host: {field} {why}")]
    RefNotPermitted { field: String, why: String },
}

impl TranslateError {
    /// The reason of the Warning event on the object (CamelCase, as Kubernetes reasons are).
    pub fn category(&self) -> &'static str {
        match self {
            TranslateError::NodeNotShown { .. } => "NodeNotAllowed",
            TranslateError::PodPatch(_) | TranslateError::PatchedPodInvalid(_) => "PodPatchFailed",
            TranslateError::Headless { .. } | TranslateError::NoSelector { .. } => "NotReplicated",
            TranslateError::Unnamed { .. } => "Unnamed",
            TranslateError::RefNotPermitted { .. } => "RefNotPermitted",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The notes are what tenants read in their events: the typed errors keep the wording.
    #[test]
    fn notes_and_reasons_keep_their_wording() {
        let node = TranslateError::NodeNotShown { node: "cp".into() };
        assert_eq!(
            node.to_string(),
            "not synced to the host: spec.nodeName cp is not one of the virtual cluster's nodes \
             (those shown from host nodes its pods run on); leave spec.nodeName empty or name one of them"
        );
        assert_eq!(node.category(), "NodeNotAllowed");
        let patch = TranslateError::PodPatch(FieldError::new("translatePatches[0]", "bad"));
        assert_eq!(patch.to_string(), "translatePatches[0]: bad");
        assert_eq!(patch.category(), "PodPatchFailed");
        let headless = TranslateError::Headless {
            service: "data/db".into(),
        };
        assert_eq!(
            headless.to_string(),
            "host Service data/db is headless: there is no ClusterIP to share"
        );
    }
}
