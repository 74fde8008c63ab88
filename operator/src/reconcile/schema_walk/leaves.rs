//! The walk itself: the leaves of a CRD schema (objects' properties, list items, map values),
//! values a leaf may take, and making the way to one leaf inside a JSON document.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use serde_json::{Map, Value, json};

/// One step from a schema node to a node under it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    Field(String),
    /// Every item of a list, written `[*]`; the walk uses the first.
    Item,
    /// Every value of a map, written `.*`; the walk uses one key.
    Entry,
}

/// A field with no fields, items or entries under it: a value a user writes.
pub struct Leaf<'a> {
    pub steps: Vec<Step>,
    /// `nodes[i]` is the schema of what `steps[..i]` reaches: the root first, the leaf last.
    pub nodes: Vec<&'a JSONSchemaProps>,
}

impl Leaf<'_> {
    pub fn path(&self) -> String {
        display(&self.steps)
    }

    pub fn schema(&self) -> &JSONSchemaProps {
        self.nodes[self.nodes.len() - 1]
    }
}

/// `spec.a.b[*].c.*`: how paths are written in messages and in the test's tables.
pub fn display(steps: &[Step]) -> String {
    let mut out = String::from("spec");
    for step in steps {
        match step {
            Step::Field(name) => {
                out.push('.');
                out.push_str(name);
            }
            Step::Item => out.push_str("[*]"),
            Step::Entry => out.push_str(".*"),
        }
    }
    out
}

/// Every leaf under `root`, in schema order.
pub fn leaves(root: &JSONSchemaProps) -> Vec<Leaf<'_>> {
    fn walk<'a>(
        steps: &mut Vec<Step>,
        nodes: &mut Vec<&'a JSONSchemaProps>,
        out: &mut Vec<Leaf<'a>>,
    ) {
        let node = nodes[nodes.len() - 1];
        let below = children(node);
        if below.is_empty() {
            out.push(Leaf {
                steps: steps.clone(),
                nodes: nodes.clone(),
            });
        }
        for (step, child) in below {
            steps.push(step);
            nodes.push(child);
            walk(steps, nodes, out);
            steps.pop();
            nodes.pop();
        }
    }
    let mut out = Vec::new();
    walk(&mut Vec::new(), &mut vec![root], &mut out);
    out
}

fn children(node: &JSONSchemaProps) -> Vec<(Step, &JSONSchemaProps)> {
    if let Some(properties) = node.properties.as_ref().filter(|p| !p.is_empty()) {
        return properties
            .iter()
            .map(|(name, schema)| (Step::Field(name.clone()), schema))
            .collect();
    }
    if let Some(JSONSchemaPropsOrArray::Schema(items)) = &node.items {
        return vec![(Step::Item, items.as_ref())];
    }
    if let Some(JSONSchemaPropsOrBool::Schema(values)) = &node.additional_properties {
        return vec![(Step::Entry, values.as_ref())];
    }
    Vec::new()
}

fn is_int_or_string(node: &JSONSchemaProps) -> bool {
    node.x_kubernetes_int_or_string == Some(true)
}

fn default(node: &JSONSchemaProps) -> Option<Value> {
    node.default.as_ref().map(|d| d.0.clone())
}

/// A new value for `node` where the walk must make it: an object with the fields the
/// schema requires, an empty list, or a filler scalar.
pub fn fresh(node: &JSONSchemaProps) -> Value {
    if let Some(value) = default(node) {
        return value;
    }
    if let Some(first) = node.enum_.iter().flatten().find(|v| !v.0.is_null()) {
        return first.0.clone();
    }
    if is_int_or_string(node) {
        return json!(1);
    }
    match node.type_.as_deref() {
        Some("object") => {
            let properties = node.properties.clone().unwrap_or_default();
            let required = node.required.iter().flatten();
            let fields: Map<String, Value> = required
                .filter_map(|name| Some((name.clone(), fresh(properties.get(name)?))))
                .collect();
            Value::Object(fields)
        }
        Some("array") => json!([]),
        Some("boolean") => json!(false),
        Some("integer") => json!(node.minimum.map_or(1, |m| m as i64)),
        _ => json!("filler"),
    }
}

/// A value the schema accepts for `node` other than `current` (the schema default when
/// `None`); `None` when no generic value is known to pass: the schema has rules (CEL, a
/// pattern) this walk cannot evaluate, or a type it does not know.
pub fn probe(node: &JSONSchemaProps, current: Option<&Value>) -> Option<Value> {
    let current = current.cloned().or_else(|| default(node));
    let differs = |v: &Value| Some(v) != current.as_ref();
    if node.x_kubernetes_validations.is_some() || node.pattern.is_some() {
        return None;
    }
    if let Some(values) = &node.enum_ {
        return values
            .iter()
            .map(|v| &v.0)
            .filter(|v| !v.is_null())
            .find(|v| differs(v))
            .cloned();
    }
    if is_int_or_string(node) {
        return [json!(3), json!(4)].into_iter().find(differs);
    }
    match node.type_.as_deref() {
        Some("boolean") => {
            let on = current.as_ref().and_then(Value::as_bool).unwrap_or(false);
            Some(json!(!on))
        }
        Some("integer") => {
            let min = node.minimum.map_or(i64::MIN, |m| m as i64);
            let max = node.maximum.map_or(i64::MAX, |m| m as i64);
            let from = current.as_ref().and_then(Value::as_i64);
            [from.map(|c| c + 1), from.map(|c| c - 1), Some(7), Some(min)]
                .into_iter()
                .flatten()
                .filter(|n| (min..=max).contains(n))
                .map(|n| json!(n))
                .find(differs)
        }
        Some("string") => [json!("probe"), json!("probe-2")].into_iter().find(differs),
        _ => None,
    }
}

/// The container at each step's place in a document: the key of a field or map entry, or
/// the first list item.
enum Place {
    Key(String),
    First,
}

fn place(step: &Step, key: &str) -> Place {
    match step {
        Step::Field(name) => Place::Key(name.clone()),
        Step::Entry => Place::Key(key.to_string()),
        Step::Item => Place::First,
    }
}

/// Makes, in `doc`, the containers on the way to `leaf` that are missing (see [`fresh`]), with
/// `key(map path)` naming the entry taken in each map, and calls `visit(path, schema, object)`
/// on every object on the way, outermost first, before going into it. Returns the leaf's
/// container.
pub fn make_way<'d>(
    doc: &'d mut Value,
    leaf: &Leaf,
    key: &dyn Fn(&str) -> String,
    visit: &mut dyn FnMut(&str, &JSONSchemaProps, &mut Value),
) -> &'d mut Value {
    let mut cursor = doc;
    let last = leaf.steps.len() - 1;
    for (i, step) in leaf.steps.iter().enumerate() {
        let prefix = display(&leaf.steps[..i]);
        if cursor.is_object() {
            visit(&prefix, leaf.nodes[i], cursor);
        }
        if i == last {
            break;
        }
        let made = fresh(leaf.nodes[i + 1]);
        cursor = match (place(step, &key(&prefix)), cursor) {
            (Place::Key(name), Value::Object(object)) => {
                let slot = object.entry(name).or_insert(Value::Null);
                if slot.is_null() {
                    *slot = made;
                }
                slot
            }
            (Place::First, Value::Array(items)) => {
                if items.is_empty() {
                    items.push(made);
                }
                &mut items[0]
            }
            (_, other) => panic!("{}: expected a container, found {other}", leaf.path()),
        };
    }
    cursor
}

/// The leaf's value in `doc`, when it is there and not null.
pub fn get<'d>(doc: &'d Value, leaf: &Leaf, key: &dyn Fn(&str) -> String) -> Option<&'d Value> {
    let mut cursor = doc;
    for (i, step) in leaf.steps.iter().enumerate() {
        cursor = match place(step, &key(&display(&leaf.steps[..i]))) {
            Place::Key(name) => cursor.get(name)?,
            Place::First => cursor.get(0)?,
        };
    }
    Some(cursor).filter(|v| !v.is_null())
}

/// Sets the leaf in `doc` to `value`, making its way first.
pub fn set(doc: &mut Value, leaf: &Leaf, key: &dyn Fn(&str) -> String, value: Value) {
    let last = leaf.steps.len() - 1;
    let entry_key = key(&display(&leaf.steps[..last]));
    match (
        place(&leaf.steps[last], &entry_key),
        make_way(doc, leaf, key, &mut |_, _, _| {}),
    ) {
        (Place::Key(name), Value::Object(object)) => {
            object.insert(name.to_string(), value);
        }
        (Place::First, Value::Array(items)) if items.is_empty() => items.push(value),
        (Place::First, Value::Array(items)) => items[0] = value,
        (_, other) => panic!("{}: expected a container, found {other}", leaf.path()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema(value: Value) -> JSONSchemaProps {
        serde_json::from_value(value).unwrap()
    }

    fn no_key(_: &str) -> String {
        "k".to_string()
    }

    /// Lists, maps and nested objects are walked through to the values a user writes.
    #[test]
    fn leaves_go_through_objects_lists_and_maps() {
        let root = schema(json!({ "type": "object", "properties": {
            "a": { "type": "array", "items": { "type": "object", "properties": {
                "b": { "type": "string" } } } },
            "m": { "type": "object", "additionalProperties": { "type": "string" } },
            "n": { "type": "integer" },
        }}));
        let paths: Vec<String> = leaves(&root).iter().map(Leaf::path).collect();
        assert_eq!(paths, ["spec.a[*].b", "spec.m.*", "spec.n"]);
    }

    /// A made object gets its required fields; the leaf is then set in the first item.
    #[test]
    fn setting_a_leaf_makes_its_way_with_required_fields() {
        let root = schema(json!({ "type": "object", "properties": {
            "a": { "type": "array", "items": { "type": "object", "required": ["r"], "properties": {
                "r": { "type": "string" }, "b": { "type": "integer", "minimum": 2 } } } },
        }}));
        let all = leaves(&root);
        let b = all.iter().find(|l| l.path() == "spec.a[*].b").unwrap();
        let mut doc = json!({});
        set(&mut doc, b, &no_key, json!(5));
        assert_eq!(doc, json!({ "a": [{ "r": "filler", "b": 5 }] }));
        assert_eq!(get(&doc, b, &no_key), Some(&json!(5)));
    }

    /// Probes differ from the current value, stay within bounds and enums, and give up on CEL.
    #[test]
    fn probes_differ_from_the_current_value_within_the_schema() {
        let bounded =
            schema(json!({ "type": "integer", "default": 10, "minimum": 0, "maximum": 10 }));
        assert_eq!(probe(&bounded, None), Some(json!(9)));
        let flag = schema(json!({ "type": "boolean", "default": true }));
        assert_eq!(probe(&flag, None), Some(json!(false)));
        assert_eq!(probe(&flag, Some(&json!(false))), Some(json!(true)));
        let choice = schema(json!({ "type": "string", "enum": ["a", "b", null], "default": "a" }));
        assert_eq!(probe(&choice, None), Some(json!("b")));
        let ruled = schema(
            json!({ "type": "string", "x-kubernetes-validations": [{ "rule": "self == 'x'" }] }),
        );
        assert_eq!(probe(&ruled, None), None);
    }
}
