//! Field paths of pod patches: dotted field names, `[*]` for every element of a list, `[N]`
//! for one element, and `['key']` for a map key with dots or slashes in it
//! (`metadata.labels['app.kubernetes.io/name']`). A path names zero or more places in an
//! object; missing fields simply name nothing.

use std::fmt;

use serde_json::Value;

/// One step down an object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// A field of an object, or a key of a map.
    Key(String),
    /// Every element of a list.
    Each,
    /// One element of a list.
    Index(usize),
}

/// A parsed field path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldPath {
    steps: Vec<Step>,
}

/// Characters of a bare field name (`hostPath`, `app`, `my-label_1`).
fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

impl FieldPath {
    /// Parses `text`; the error says where and what was expected.
    pub fn parse(text: &str) -> Result<FieldPath, String> {
        let chars: Vec<char> = text.chars().collect();
        let mut steps = Vec::new();
        let mut i = 0;
        let name = |i: &mut usize| {
            let start = *i;
            while *i < chars.len() && is_name_char(chars[*i]) {
                *i += 1;
            }
            (start < *i).then(|| chars[start..*i].iter().collect::<String>())
        };
        let Some(first) = name(&mut i) else {
            return Err(format!(
                "{text:?} must start with a field name, e.g. spec.volumes[*].hostPath"
            ));
        };
        steps.push(Step::Key(first));
        while i < chars.len() {
            let at = i + 1;
            match chars[i] {
                '.' => {
                    i += 1;
                    let key = name(&mut i).ok_or_else(|| {
                        format!("{text:?}: expected a field name after '.' at character {at} (quote keys with dots or slashes: ['app.kubernetes.io/name'])")
                    })?;
                    steps.push(Step::Key(key));
                }
                '[' => {
                    let close = chars[i..]
                        .iter()
                        .position(|&c| c == ']')
                        .map(|p| i + p)
                        .ok_or_else(|| {
                            format!("{text:?}: '[' at character {at} is never closed")
                        })?;
                    let inner: String = chars[i + 1..close].iter().collect();
                    steps.push(bracket_step(&inner).ok_or_else(|| {
                        format!("{text:?}: [{inner}] at character {at} must be [*], a list index such as [0], or a quoted key such as ['app.kubernetes.io/name']")
                    })?);
                    i = close + 1;
                }
                c => {
                    return Err(format!(
                        "{text:?}: unexpected {c:?} at character {at}; expected '.' or '['"
                    ));
                }
            }
        }
        Ok(FieldPath { steps })
    }

    pub fn steps(&self) -> &[Step] {
        &self.steps
    }

    /// Every value the path names in `root`.
    pub fn select<'a>(&self, root: &'a mut Value) -> Vec<&'a mut Value> {
        let mut out = Vec::new();
        select(root, &self.steps, &mut out);
        out
    }

    /// Deletes every value the path names from `root` (`[*]` last empties the list).
    pub fn remove(&self, root: &mut Value) {
        let Some((last, parents)) = self.steps.split_last() else {
            return;
        };
        let mut containers = Vec::new();
        select(root, parents, &mut containers);
        for container in containers {
            match (last, container) {
                (Step::Key(k), Value::Object(map)) => {
                    map.remove(k);
                }
                (Step::Index(i), Value::Array(list)) if *i < list.len() => {
                    list.remove(*i);
                }
                (Step::Each, Value::Array(list)) => list.clear(),
                _ => {}
            }
        }
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (n, step) in self.steps.iter().enumerate() {
            match step {
                Step::Key(k) if k.chars().all(is_name_char) => {
                    if n > 0 {
                        f.write_str(".")?;
                    }
                    f.write_str(k)?;
                }
                Step::Key(k) => write!(f, "['{k}']")?,
                Step::Each => f.write_str("[*]")?,
                Step::Index(i) => write!(f, "[{i}]")?,
            }
        }
        Ok(())
    }
}

/// The step of a `[...]` with `inner` between the brackets.
fn bracket_step(inner: &str) -> Option<Step> {
    if inner == "*" {
        return Some(Step::Each);
    }
    if let Ok(i) = inner.parse::<usize>() {
        return Some(Step::Index(i));
    }
    let quoted = ['\'', '"']
        .iter()
        .find_map(|&q| inner.strip_prefix(q)?.strip_suffix(q))?;
    (!quoted.is_empty() && !quoted.contains(['\'', '"'])).then(|| Step::Key(quoted.to_string()))
}

fn select<'a>(value: &'a mut Value, steps: &[Step], out: &mut Vec<&'a mut Value>) {
    let Some((first, rest)) = steps.split_first() else {
        out.push(value);
        return;
    };
    match (first, value) {
        (Step::Key(k), Value::Object(map)) => {
            if let Some(v) = map.get_mut(k) {
                select(v, rest, out);
            }
        }
        (Step::Index(i), Value::Array(list)) => {
            if let Some(v) = list.get_mut(*i) {
                select(v, rest, out);
            }
        }
        (Step::Each, Value::Array(list)) => {
            for v in list {
                select(v, rest, out);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn path(text: &str) -> FieldPath {
        FieldPath::parse(text).unwrap()
    }

    fn key(k: &str) -> Step {
        Step::Key(k.to_string())
    }

    /// The seed's hardening path parses into fields and "every element".
    #[test]
    fn the_seeds_paths_parse() {
        assert_eq!(
            path("spec.volumes[*].hostPath").steps(),
            [key("spec"), key("volumes"), Step::Each, key("hostPath")]
        );
        assert_eq!(
            path("metadata.labels.app").steps(),
            [key("metadata"), key("labels"), key("app")]
        );
    }

    /// Keys with dots and slashes are written quoted, in either quote.
    #[test]
    fn quoted_keys_and_indexes_parse() {
        assert_eq!(
            path("metadata.labels['app.kubernetes.io/name']").steps(),
            [
                key("metadata"),
                key("labels"),
                key("app.kubernetes.io/name")
            ]
        );
        assert_eq!(
            path("spec.containers[0].image").steps(),
            [key("spec"), key("containers"), Step::Index(0), key("image")]
        );
        assert_eq!(
            path(r#"metadata.annotations["a/b"]"#).steps()[2],
            key("a/b")
        );
    }

    /// Printing gives back a path that parses to the same steps.
    #[test]
    fn paths_print_as_written() {
        for text in [
            "spec.volumes[*].hostPath",
            "metadata.labels['app.kubernetes.io/name']",
            "spec.containers[2].env",
        ] {
            assert_eq!(path(text).to_string(), text);
        }
    }

    /// Each malformed path is refused with where it went wrong.
    #[test]
    fn malformed_paths_are_refused_with_the_position() {
        let err = |t: &str| FieldPath::parse(t).unwrap_err();
        assert!(err("").contains("must start with a field name"));
        assert!(err(".spec").contains("must start with a field name"));
        assert!(
            err("spec..volumes").contains("after '.' at character 5"),
            "{}",
            err("spec..volumes")
        );
        assert!(err("spec.volumes[*").contains("never closed"));
        assert!(err("spec.volumes[x]").contains("[x] at character 13"));
        assert!(err("spec.volumes['']").contains("quoted key"));
        assert!(err("metadata.labels.app.kubernetes.io/name").contains("unexpected '/'"));
        assert!(err("spec volumes").contains("unexpected ' '"));
    }

    /// `[*]` reaches every element; missing fields and type mismatches name nothing.
    #[test]
    fn select_follows_lists_and_skips_missing_fields() {
        let mut pod = json!({"spec": {"volumes": [
            {"name": "a", "hostPath": {"path": "/"}},
            {"name": "b", "emptyDir": {}},
            {"name": "c", "hostPath": {"path": "/etc"}},
        ]}});
        let found = path("spec.volumes[*].hostPath.path").select(&mut pod);
        assert_eq!(found.len(), 2);
        assert!(path("spec.containers[*].image").select(&mut pod).is_empty());
        assert!(path("spec.volumes.name").select(&mut pod).is_empty());
        assert!(path("spec.volumes[7]").select(&mut pod).is_empty());
    }

    /// The seed's hardening example: hostPath goes from every volume, the rest stays.
    #[test]
    fn remove_deletes_the_field_from_every_element() {
        let mut pod = json!({"spec": {"volumes": [
            {"name": "a", "hostPath": {"path": "/"}},
            {"name": "b", "emptyDir": {}},
        ]}});
        path("spec.volumes[*].hostPath").remove(&mut pod);
        assert_eq!(
            pod,
            json!({"spec": {"volumes": [{"name": "a"}, {"name": "b", "emptyDir": {}}]}})
        );
    }

    /// Removing by index, every element, or something absent.
    #[test]
    fn remove_by_index_each_and_absent() {
        let mut doc = json!({"l": [1, 2, 3], "m": {"k": 1}});
        path("l[1]").remove(&mut doc);
        assert_eq!(doc["l"], json!([1, 3]));
        path("l[9]").remove(&mut doc);
        path("m.absent").remove(&mut doc);
        path("absent.deeper").remove(&mut doc);
        assert_eq!(doc, json!({"l": [1, 3], "m": {"k": 1}}));
        path("l[*]").remove(&mut doc);
        assert_eq!(doc["l"], json!([]));
    }
}
