//! Maps of resource name to quantity (`requests.cpu: "8"`, `pods: 50`), as ResourceQuota and
//! LimitRange take them. Users write numbers or strings; both are kept as Kubernetes quantities.

use std::{borrow::Cow, collections::BTreeMap};

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize};

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

impl JsonSchema for QuantityMap {
    fn schema_name() -> Cow<'static, str> {
        "QuantityMap".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
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
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `pods: 50` and `pods: "50"` mean the same quota.
    #[test]
    fn numbers_and_strings_both_become_quantities() {
        let m: QuantityMap =
            serde_json::from_str(r#"{"pods": 50, "requests.memory": "16Gi"}"#).unwrap();
        assert_eq!(m, QuantityMap::of([("pods", "50"), ("requests.memory", "16Gi")]));
    }

    #[test]
    fn quantities_serialize_as_strings() {
        let m = QuantityMap::of([("pods", "50")]);
        assert_eq!(serde_json::to_string(&m).unwrap(), r#"{"pods":"50"}"#);
    }
}
