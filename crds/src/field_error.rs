//! A problem with one field of a spec: what the operator reports in `SpecValid=False`, and
//! what the syncer names when it refuses a pod or a configuration.

use std::fmt;

/// One field and what is wrong with it, shown as `field: message`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// JSON path of the field, e.g. `spec.sleepMode.sleepSchedule`.
    pub field: String,
    pub message: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}
