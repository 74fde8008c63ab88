//! VirtualClusterTemplates: checking a VirtualCluster's parameter values against the
//! template's declarations, rendering the template body, and laying the VirtualCluster's own
//! fields over the rendered spec (its fields win, except values equal to a schema default,
//! which the API server stores whether or not anyone wrote them).

use std::collections::BTreeMap;

use handlebars::Handlebars;
use std::sync::LazyLock;

use kube::{CustomResourceExt, ResourceExt};
use serde_json::{Map, Value};
use vnest_crds::{FieldError, VirtualCluster, VirtualClusterSpec, VirtualClusterTemplate};

/// The rendered template's spec, as JSON (before the user's fields are laid over it).
pub fn render(
    template: &VirtualClusterTemplate,
    vc_name: &str,
    vc_namespace: &str,
    values: &BTreeMap<String, String>,
) -> Result<Value, FieldError> {
    let template_name = template.name_any();
    let declared = &template.spec.parameters;
    for given in values.keys() {
        if !declared.iter().any(|p| &p.name == given) {
            let names: Vec<&str> = declared.iter().map(|p| p.name.as_str()).collect();
            return Err(FieldError::new(
                format!("spec.template.parameters.{given}"),
                format!(
                    "template {template_name} declares no such parameter (it has: {})",
                    names.join(", ")
                ),
            ));
        }
    }
    let mut context = Map::new();
    context.insert("name".into(), vc_name.into());
    context.insert("namespace".into(), vc_namespace.into());
    for parameter in declared {
        let value = match (values.get(&parameter.name), &parameter.default) {
            (Some(value), _) => value.clone(),
            (None, Some(default)) => default.clone(),
            (None, None) => {
                return Err(FieldError::new(
                    format!("spec.template.parameters.{}", parameter.name),
                    format!(
                        "required by template {template_name}{}",
                        parameter
                            .description
                            .as_ref()
                            .map(|d| format!(" ({d})"))
                            .unwrap_or_default()
                    ),
                ));
            }
        };
        if !parameter.allowed_values.is_empty() && !parameter.allowed_values.contains(&value) {
            return Err(FieldError::new(
                format!("spec.template.parameters.{}", parameter.name),
                format!(
                    "{value:?} is not one of {:?} (template {template_name})",
                    parameter.allowed_values
                ),
            ));
        }
        context.insert(parameter.name.clone(), value.into());
    }
    // The template itself is at fault: named through the field that chose it.
    let broken = |problem: String| {
        FieldError::new(
            "spec.template.name",
            format!("VirtualClusterTemplate {template_name}: {problem}"),
        )
    };
    let mut engine = Handlebars::new();
    engine.set_strict_mode(true);
    engine.register_escape_fn(handlebars::no_escape);
    let text = engine
        .render_template(&template.spec.template, &Value::Object(context))
        .map_err(|e| broken(format!("spec.template does not render: {e}")))?;
    let rendered: Value = serde_yaml::from_str(&text)
        .map_err(|e| broken(format!("spec.template renders invalid YAML: {e}")))?;
    match rendered {
        Value::Object(ref spec) if spec.contains_key("template") => {
            Err(broken("a template may not name another template".into()))
        }
        Value::Object(_) => Ok(rendered),
        Value::Null => Ok(Value::Object(Map::new())),
        _ => Err(broken(
            "spec.template must render a mapping (a VirtualCluster spec)".into(),
        )),
    }
}

/// The schema of `VirtualCluster.spec`, with the defaults the API server fills in.
fn spec_schema() -> &'static Value {
    static SCHEMA: LazyLock<Value> = LazyLock::new(|| {
        let crd = VirtualCluster::crd();
        let schema = crd.spec.versions[0]
            .schema
            .as_ref()
            .and_then(|s| s.open_api_v3_schema.as_ref());
        serde_json::to_value(schema).unwrap_or_default()["properties"]["spec"].clone()
    });
    &SCHEMA
}

/// The parts of `vc.spec` that say something: the API server stores every schema default in
/// the object, and a value equal to its default cannot be told from one left unset, so only
/// values that differ from their defaults override the template.
pub fn user_fields(vc: &VirtualCluster) -> Value {
    set_fields(&vc.spec)
}

/// The parts of `spec` whose values differ from their schema defaults (see [`user_fields`]).
pub fn set_fields(spec: &VirtualClusterSpec) -> Value {
    let spec = serde_json::to_value(spec).unwrap_or(Value::Null);
    non_default(&spec, spec_schema()).unwrap_or_else(|| Value::Object(Map::new()))
}

/// `value` without what `schema` would have defaulted it to; `None` when nothing is left.
fn non_default(value: &Value, schema: &Value) -> Option<Value> {
    if schema.get("default") == Some(value) {
        return None;
    }
    let Value::Object(object) = value else {
        return Some(value.clone());
    };
    let properties = schema.get("properties");
    let entries = schema.get("additionalProperties").filter(|a| a.is_object());
    if properties.is_none() && entries.is_none() {
        // An object the schema does not describe: it is all the user's.
        return Some(value.clone());
    }
    let defaults = schema.get("default").and_then(Value::as_object);
    let kept: Map<String, Value> = object
        .iter()
        .filter(|(key, v)| defaults.and_then(|d| d.get(*key)) != Some(*v))
        .filter_map(|(key, v)| {
            let sub = properties.and_then(|p| p.get(key)).or(entries);
            let kept = match sub {
                Some(sub) => non_default(v, sub)?,
                None => v.clone(),
            };
            Some((key.clone(), kept))
        })
        .collect();
    (!kept.is_empty()).then_some(Value::Object(kept))
}

/// Lays `over` onto `base`: maps merge key by key, anything else in `over` replaces.
pub fn merge_over(base: &mut Value, over: Value) {
    match (base, over) {
        (Value::Object(base), Value::Object(over)) => {
            for (key, value) in over {
                match base.get_mut(&key) {
                    Some(existing) => merge_over(existing, value),
                    None => {
                        base.insert(key, value);
                    }
                }
            }
        }
        (base, over) => *base = over,
    }
}

/// The spec to reconcile: the template's, with what the user set on the VirtualCluster on top.
pub fn effective_spec(
    vc: &VirtualCluster,
    rendered: Value,
) -> Result<VirtualClusterSpec, FieldError> {
    let mut spec = rendered;
    merge_over(&mut spec, user_fields(vc));
    serde_json::from_value(spec).map_err(|e| {
        let template = vc.spec.template.as_ref().map_or("", |t| t.name.as_str());
        FieldError::new(
            "spec",
            format!(
                "as rendered from template {template} it is not a valid VirtualCluster spec: {e}"
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn template(parameters: Value, body: &str) -> VirtualClusterTemplate {
        serde_json::from_value(json!({
            "apiVersion": "vnest.dev/v1alpha1", "kind": "VirtualClusterTemplate",
            "metadata": { "name": "small", "generation": 3 },
            "spec": { "parameters": parameters, "template": body },
        }))
        .unwrap()
    }

    fn values(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    const BODY: &str = "policies:\n  resourceQuota:\n    enabled: true\n    quota:\n      requests.cpu: \"{{cpu}}\"\ncontrolPlane:\n  statefulSet:\n    labels:\n      team: \"{{team}}\"\n      cluster: \"{{name}}.{{namespace}}\"\n";

    fn small() -> VirtualClusterTemplate {
        template(
            json!([
                { "name": "cpu", "default": "4", "allowedValues": ["4", "8", "16"] },
                { "name": "team", "description": "owning team" },
            ]),
            BODY,
        )
    }

    #[test]
    fn renders_parameters_defaults_and_the_virtual_cluster_name() {
        let spec = render(&small(), "dev", "team-a", &values(&[("team", "alpha")])).unwrap();
        assert_eq!(
            spec["policies"]["resourceQuota"]["quota"]["requests.cpu"],
            "4"
        );
        let labels = &spec["controlPlane"]["statefulSet"]["labels"];
        assert_eq!(labels["team"], "alpha");
        assert_eq!(labels["cluster"], "dev.team-a");
    }

    #[test]
    fn values_are_not_html_escaped() {
        let t = template(
            json!([{ "name": "v" }]),
            "exportKubeconfig:\n  server: \"{{v}}\"\n",
        );
        let spec = render(&t, "a", "b", &values(&[("v", "https://x/?a=1&b=2")])).unwrap();
        assert_eq!(spec["exportKubeconfig"]["server"], "https://x/?a=1&b=2");
    }

    /// Why `render` refuses `t` with these parameter values, for VirtualCluster team-a/dev.
    fn refusal(t: &VirtualClusterTemplate, pairs: &[(&str, &str)]) -> String {
        render(t, "dev", "team-a", &values(pairs))
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn a_missing_required_parameter_names_it_and_its_purpose() {
        let err = refusal(&small(), &[]);
        assert!(
            err.starts_with("spec.template.parameters.team: required"),
            "{err}"
        );
        assert!(err.contains("owning team"), "{err}");
    }

    #[test]
    fn a_value_outside_the_allowed_ones_is_refused() {
        let err = refusal(&small(), &[("team", "a"), ("cpu", "32")]);
        assert!(
            err.starts_with("spec.template.parameters.cpu: \"32\" is not one of"),
            "{err}"
        );
    }

    #[test]
    fn an_undeclared_parameter_is_refused_with_the_declared_ones() {
        let err = refusal(&small(), &[("team", "a"), ("size", "l")]);
        assert!(err.contains("parameters.size"), "{err}");
        assert!(err.contains("(it has: cpu, team)"), "{err}");
    }

    #[test]
    fn an_undeclared_variable_in_the_body_fails_to_render() {
        let err = refusal(&template(json!([]), "paused: {{sleepy}}\n"), &[]);
        assert!(err.contains("does not render"), "{err}");
    }

    #[test]
    fn a_body_that_is_not_a_mapping_or_nests_templates_is_refused() {
        let err = refusal(&template(json!([]), "- a\n- b\n"), &[]);
        assert!(err.contains("mapping"), "{err}");
        let err = refusal(&template(json!([]), "template: {name: other}\n"), &[]);
        assert!(err.contains("another template"), "{err}");
    }

    /// A VirtualCluster as the API server stores it: `spec` over every schema default.
    fn stored(spec: Value) -> VirtualCluster {
        let mut full = serde_json::to_value(VirtualClusterSpec::default()).unwrap();
        merge_over(&mut full, spec);
        serde_json::from_value(json!({
            "apiVersion": "vnest.dev/v1alpha1", "kind": "VirtualCluster",
            "metadata": { "name": "dev", "namespace": "team-a" },
            "spec": full,
        }))
        .unwrap()
    }

    #[test]
    fn defaults_are_not_user_fields() {
        let vc = stored(json!({
            "template": { "name": "small", "parameters": { "team": "a" } },
            "policies": { "resourceQuota": { "quota": { "pods": "5" } } },
        }));
        assert_eq!(
            user_fields(&vc),
            json!({
                "template": { "name": "small", "parameters": { "team": "a" } },
                "policies": { "resourceQuota": { "quota": { "pods": "5" } } },
            })
        );
    }

    #[test]
    fn an_untouched_virtual_cluster_has_no_user_fields() {
        assert_eq!(user_fields(&stored(json!({}))), json!({}));
    }

    #[test]
    fn nested_defaults_inside_a_user_object_are_left_to_the_template() {
        // The server fills sleepMode.timezone=UTC and autoWakeup=true into the user's object.
        let vc = stored(json!({
            "sleepMode": { "afterInactivity": "30m", "timezone": "UTC", "autoWakeup": true },
        }));
        assert_eq!(
            user_fields(&vc),
            json!({ "sleepMode": { "afterInactivity": "30m" } })
        );
    }

    #[test]
    fn the_users_fields_win_over_the_template_and_defaults_fill_the_rest() {
        let vc = stored(json!({
            "template": { "name": "small", "parameters": { "team": "a" } },
            "policies": { "resourceQuota": { "quota": { "pods": "5" } } },
        }));
        let rendered = render(&small(), "dev", "team-a", &values(&[("team", "a")])).unwrap();
        let spec = effective_spec(&vc, rendered).unwrap();
        let quota = &spec.policies.resource_quota;
        assert!(quota.enabled, "from the template");
        let quota = serde_json::to_value(&quota.quota).unwrap();
        assert_eq!(quota["pods"], "5", "from the user");
        assert_eq!(quota["requests.cpu"], "4", "from the template");
        assert!(!spec.paused, "a default");
        assert_eq!(spec.template.unwrap().name, "small");
    }

    #[test]
    fn a_rendered_spec_with_unknown_fields_is_refused() {
        let vc = stored(json!({ "template": { "name": "small" } }));
        let err = effective_spec(&vc, json!({ "controlPlane": { "distro": "k3s" } }))
            .unwrap_err()
            .to_string();
        assert!(err.contains("template small"), "{err}");
    }

    #[test]
    fn every_shipped_template_renders_a_valid_spec() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/templates");
        let mut seen = Vec::new();
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let template: VirtualClusterTemplate =
                serde_yaml::from_str(&std::fs::read_to_string(&path).unwrap())
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let required: BTreeMap<String, String> = template
                .spec
                .parameters
                .iter()
                .filter(|p| p.default.is_none())
                .map(|p| (p.name.clone(), "sample".to_string()))
                .collect();
            let rendered = render(&template, "dev", "team-a", &required)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let spec: VirtualClusterSpec = serde_json::from_value(rendered)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            crate::validate::validate(&spec, "team-a")
                .unwrap_or_else(|e| panic!("{}: {e:?}", path.display()));
            seen.push(template.name_any());
        }
        seen.sort();
        assert_eq!(seen, ["ci", "large", "medium", "preview", "small"]);
    }

    #[test]
    fn merge_over_replaces_lists_and_scalars_and_merges_maps() {
        let mut base = json!({ "a": { "b": 1, "c": [1, 2] }, "d": 1 });
        merge_over(&mut base, json!({ "a": { "c": [3] }, "d": 2, "e": true }));
        assert_eq!(
            base,
            json!({ "a": { "b": 1, "c": [3] }, "d": 2, "e": true })
        );
    }
}
