//! A problem with one field of a spec: what the operator reports in `SpecValid=False`, and
//! what the syncer names when it refuses a pod or a configuration.

use std::fmt;

/// One field and what is wrong with it, shown as `field: message`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct FieldError {
    /// JSON path of the field, e.g. `spec.sleepMode.sleepSchedule`.
    pub field: String,
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        FieldError {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// Every problem found in one spec, shown one after another (`a: …; b: …`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldErrors(pub Vec<FieldError>);

impl fmt::Display for FieldErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, error) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{error}")?;
        }
        Ok(())
    }
}

impl std::error::Error for FieldErrors {}

impl From<FieldError> for FieldErrors {
    fn from(error: FieldError) -> Self {
        FieldErrors(vec![error])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_read_field_first_one_after_another() {
        let errors = FieldErrors(vec![
            FieldError::new("spec.a", "is wrong"),
            FieldError::new("spec.b", "is missing; set it"),
        ]);
        assert_eq!(
            errors.to_string(),
            "spec.a: is wrong; spec.b: is missing; set it"
        );
        assert_eq!(FieldErrors::default().to_string(), "");
    }
}
