//! Durations as users write them: whole seconds (`1800`, the form vCluster's values files use)
//! or a duration string made of `<number><unit>` parts (`30m`, `72h`, `1h30m`, `7d`).

use std::{fmt, time::Duration};

use serde::{Deserialize, Serialize};

use crate::schema::inline_schema;

/// A non-negative duration from the spec, kept in the form it was written so that a read-back
/// object serializes exactly as applied.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum DurationSpec {
    /// Whole seconds, e.g. `1800`.
    Seconds(u64),
    /// A duration string, e.g. `"30m"`, `"1h30m"`, `"7d"`; a string of digits means seconds.
    Text(String),
}

/// Why a duration string does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{input:?} is not a duration: use whole seconds (1800) or <number><unit> parts with units d, h, m, s (30m, 72h, 1h30m)"
)]
pub struct DurationError {
    input: String,
}

/// The CEL rule the API server applies to every duration field; it accepts exactly what
/// [`DurationSpec::to_std`] parses.
const DURATION_RULE: &str =
    "type(self) == int ? self >= 0 : self.matches('^([0-9]+|([0-9]+[dhms])+)$')";
const DURATION_MESSAGE: &str = "must be whole seconds (1800) or a duration such as 30m, 72h or 1h30m (units d, h, m, s); negative durations are not allowed";

impl DurationSpec {
    /// The duration this value means.
    pub fn to_std(&self) -> Result<Duration, DurationError> {
        match self {
            DurationSpec::Seconds(s) => Ok(Duration::from_secs(*s)),
            DurationSpec::Text(text) => parse_duration(text),
        }
    }
}

impl fmt::Display for DurationSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DurationSpec::Seconds(s) => write!(f, "{s}s"),
            DurationSpec::Text(t) => f.write_str(t),
        }
    }
}

fn parse_duration(input: &str) -> Result<Duration, DurationError> {
    let err = || DurationError {
        input: input.to_string(),
    };
    if input.is_empty() {
        return Err(err());
    }
    if input.bytes().all(|b| b.is_ascii_digit()) {
        return input.parse().map(Duration::from_secs).map_err(|_| err());
    }
    let mut total: u64 = 0;
    let mut digits = String::new();
    for c in input.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let unit = match c {
            'd' => 86_400,
            'h' => 3_600,
            'm' => 60,
            's' => 1,
            _ => return Err(err()),
        };
        let n: u64 = digits.parse().map_err(|_| err())?;
        digits.clear();
        total = n
            .checked_mul(unit)
            .and_then(|part| total.checked_add(part))
            .ok_or_else(err)?;
    }
    if !digits.is_empty() {
        return Err(err());
    }
    Ok(Duration::from_secs(total))
}

inline_schema!(DurationSpec, {
    "description": "Whole seconds (1800) or a duration string (30m, 72h, 1h30m, 7d).",
    "x-kubernetes-int-or-string": true,
    "x-kubernetes-validations": [{ "rule": DURATION_RULE, "message": DURATION_MESSAGE }],
});

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(d: &str) -> u64 {
        DurationSpec::Text(d.into()).to_std().unwrap().as_secs()
    }

    /// The seed's form: an integer is seconds.
    #[test]
    fn integer_seconds_are_seconds() {
        let d: DurationSpec = serde_json::from_str("1800").unwrap();
        assert_eq!(d.to_std().unwrap(), Duration::from_secs(1800));
    }

    #[test]
    fn a_string_of_digits_is_seconds() {
        assert_eq!(secs("1800"), 1800);
    }

    #[test]
    fn units_combine() {
        assert_eq!(secs("30m"), 1800);
        assert_eq!(secs("72h"), 259_200);
        assert_eq!(secs("1h30m"), 5400);
        assert_eq!(secs("7d"), 604_800);
        assert_eq!(secs("1d2h3m4s"), 93_784);
    }

    #[test]
    fn malformed_strings_are_refused_with_the_input_named() {
        for bad in ["", "-30m", "m", "30x", "1.5h", "h30", "30m "] {
            let err = DurationSpec::Text(bad.into()).to_std().unwrap_err();
            assert!(err.to_string().contains(&format!("{bad:?}")), "{err}");
        }
    }

    #[test]
    fn overflow_is_an_error_not_a_wrap() {
        assert!(
            DurationSpec::Text("99999999999999999999d".into())
                .to_std()
                .is_err()
        );
        assert!(
            DurationSpec::Text("213503982334602d".into())
                .to_std()
                .is_err()
        );
        assert!(
            DurationSpec::Text("213503982334601d".into())
                .to_std()
                .is_ok()
        );
    }

    /// Read-back objects serialize as they were written.
    #[test]
    fn serialization_keeps_the_written_form() {
        for src in ["1800", "\"30m\""] {
            let d: DurationSpec = serde_json::from_str(src).unwrap();
            assert_eq!(serde_json::to_string(&d).unwrap(), src);
        }
    }

    #[test]
    fn negative_integers_do_not_deserialize() {
        assert!(serde_json::from_str::<DurationSpec>("-5").is_err());
    }
}
