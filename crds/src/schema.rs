//! Hand-written JSON schemas, for the value types whose wire form no derive can describe
//! (an int-or-string duration, a map of quantities, a string-or-object target).

/// Implements `JsonSchema` for `$ty` as the literal schema `$schema`, inlined where the type
/// is used (the API server's structural schemas take no `$ref`).
macro_rules! inline_schema {
    ($ty:ident, $schema:tt) => {
        impl schemars::JsonSchema for $ty {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($ty).into()
            }

            fn inline_schema() -> bool {
                true
            }

            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                schemars::json_schema!($schema)
            }
        }
    };
}

pub(crate) use inline_schema;

#[cfg(test)]
mod tests {
    use schemars::JsonSchema;
    use serde_json::json;

    struct Probe;
    inline_schema!(Probe, { "type": "string", "maxLength": 3 });

    #[derive(JsonSchema)]
    #[allow(dead_code)]
    struct Holder {
        probe: Probe,
    }

    /// The macro names the type after itself and puts its schema where it is used, not
    /// behind a `$ref`.
    #[test]
    fn an_inline_schema_stands_where_the_type_is_used() {
        assert_eq!(Probe::schema_name(), "Probe");
        let holder = serde_json::to_value(schemars::schema_for!(Holder)).unwrap();
        assert_eq!(
            holder["properties"]["probe"],
            json!({ "type": "string", "maxLength": 3 })
        );
        assert!(holder.get("$defs").is_none(), "{holder}");
    }
}
