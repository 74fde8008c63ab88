//! Maps of resource name to quantity (`requests.cpu: "8"`, `pods: 50`), as ResourceQuota and
//! LimitRange take them. Users write numbers or strings; both are kept as Kubernetes quantities.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde::{Deserialize, Deserializer, Serialize};

use crate::schema::inline_schema;

/// Resource name → quantity. The schema makes the API server refuse a value that is not a
/// quantity, naming the key (`spec.policies.resourceQuota.quota[requests.cpu]`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct QuantityMap(pub BTreeMap<String, Quantity>);

impl QuantityMap {
    /// Builds a map from `(name, quantity)` pairs.
    pub fn of<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        QuantityMap(
            pairs
                .into_iter()
                .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
                .collect(),
        )
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The numeric value of a Kubernetes quantity (`500m` → 0.5, `16Gi` → 17179869184), or `None`
/// when `text` is not one. Used to check specs and to compare a quantity with the API server's
/// canonical spelling of it (`0.5` is stored as `500m`).
pub fn quantity_value(text: &str) -> Option<f64> {
    const SUFFIXES: [(&str, f64); 15] = [
        ("Ki", 1024.0),
        ("Mi", 1048576.0),
        ("Gi", 1073741824.0),
        ("Ti", 1099511627776.0),
        ("Pi", 1125899906842624.0),
        ("Ei", 1152921504606846976.0),
        ("n", 1e-9),
        ("u", 1e-6),
        ("m", 1e-3),
        ("k", 1e3),
        ("M", 1e6),
        ("G", 1e9),
        ("T", 1e12),
        ("P", 1e15),
        ("E", 1e18),
    ];
    let (number, multiplier) = SUFFIXES
        .iter()
        .find_map(|(suffix, m)| text.strip_suffix(suffix).map(|n| (n, *m)))
        .unwrap_or((text, 1.0));
    let (mantissa, exponent) = match number.find(['e', 'E']) {
        Some(i) if multiplier == 1.0 => (&number[..i], number[i + 1..].parse::<i32>().ok()?),
        _ => (number, 0),
    };
    let digits = mantissa.strip_prefix(['+', '-']).unwrap_or(mantissa);
    let valid = !digits.is_empty()
        && digits != "."
        && digits.chars().all(|c| c.is_ascii_digit() || c == '.')
        && digits.matches('.').count() <= 1;
    if !valid {
        return None;
    }
    Some(mantissa.parse::<f64>().ok()? * multiplier * 10f64.powi(exponent))
}

#[derive(Deserialize)]
#[serde(untagged)]
enum IntOrString {
    Int(i64),
    String(String),
}

impl<'de> Deserialize<'de> for QuantityMap {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = BTreeMap::<String, IntOrString>::deserialize(deserializer)?;
        Ok(QuantityMap(
            raw.into_iter()
                .map(|(k, v)| {
                    let q = match v {
                        IntOrString::Int(i) => i.to_string(),
                        IntOrString::String(s) => s,
                    };
                    (k, Quantity(q))
                })
                .collect(),
        ))
    }
}

inline_schema!(QuantityMap, {
    "type": "object",
    "maxProperties": 32,
    "additionalProperties": {
        "x-kubernetes-int-or-string": true,
        "maxLength": 64,
        "x-kubernetes-validations": [{
            "rule": "isQuantity(string(self))",
            "message": "must be a Kubernetes quantity such as 8, 500m or 16Gi",
        }],
    },
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantity_values_follow_the_kubernetes_grammar() {
        assert_eq!(quantity_value("500m"), Some(0.5));
        assert_eq!(quantity_value("0.5"), Some(0.5));
        assert_eq!(quantity_value("16Gi"), Some(17179869184.0));
        assert_eq!(quantity_value("1k"), Some(1000.0));
        assert_eq!(quantity_value("1e3"), Some(1000.0));
        assert_eq!(quantity_value("8"), Some(8.0));
        for bad in ["", "lots", "1.2.3", "Gi", "1GB", "1 Gi", ".", "1e"] {
            assert_eq!(quantity_value(bad), None, "{bad}");
        }
    }

    /// `pods: 50` and `pods: "50"` mean the same quota.
    #[test]
    fn numbers_and_strings_both_become_quantities() {
        let m: QuantityMap =
            serde_json::from_str(r#"{"pods": 50, "requests.memory": "16Gi"}"#).unwrap();
        assert_eq!(
            m,
            QuantityMap::of([("pods", "50"), ("requests.memory", "16Gi")])
        );
    }

    #[test]
    fn quantities_serialize_as_strings() {
        let m = QuantityMap::of([("pods", "50")]);
        assert_eq!(serde_json::to_string(&m).unwrap(), r#"{"pods":"50"}"#);
    }
}
