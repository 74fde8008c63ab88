//! `sync.toHost.pods.patches` (`op: remove`) and `translatePatches` (a field rewritten by an
//! [`Expression`]), parsed once into [`PodPatches`]. The operator compiles them to refuse a
//! spec it could not run, the syncer to apply them to every host pod, so both read one
//! grammar.
//!
//! Patches act on the host pod the syncer built, after names and references were
//! translated: `metadata.labels.<key>`, `metadata.annotations.<key>` and anything under
//! `spec`. Keys under `vcluster.loft.sh/` and `vnest.dev/` and the rest of the metadata are
//! vnest's own bookkeeping (the control plane's Services select on `vnest.dev/control-plane`)
//! and cannot be patched.

pub mod expression;
pub mod path;

use serde_json::Value;

use crate::{FieldError, PodsToHost, meta::RESERVED_LABEL_PREFIXES};
pub use expression::Expression;
pub use path::{FieldPath, Step};

/// Where the entries live in a VirtualCluster, for error messages.
const PATCHES: &str = "spec.sync.toHost.pods.patches";
const TRANSLATE_PATCHES: &str = "spec.sync.toHost.pods.translatePatches";

/// One `translatePatches` entry, parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Rewrite {
    index: usize,
    path: FieldPath,
    expression: Expression,
    /// The path names a label, whose new value must be a valid label value.
    label: bool,
}

/// A pod's patches, parsed: rewrites in order, then removals in order (a removal always
/// wins, so a hardening patch cannot be undone by a rewrite).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodPatches {
    rewrites: Vec<Rewrite>,
    removals: Vec<FieldPath>,
}

/// Why `path` may not be patched, if it may not.
fn check_target(path: &FieldPath) -> Result<(), String> {
    let allowed = "only metadata.labels.<key>, metadata.annotations.<key> and fields under spec can be patched";
    match path.steps() {
        [Step::Key(spec), _, ..] if spec == "spec" => Ok(()),
        [Step::Key(m), Step::Key(map), Step::Key(key)]
            if m == "metadata" && (map == "labels" || map == "annotations") =>
        {
            if let Some(prefix) = RESERVED_LABEL_PREFIXES.iter().find(|p| key.starts_with(*p)) {
                Err(format!(
                    "{path}: keys under {prefix} are vnest's own and cannot be patched"
                ))
            } else {
                Ok(())
            }
        }
        _ => Err(format!("{path}: {allowed}")),
    }
}

fn is_label_value(v: &str) -> bool {
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    v.is_empty()
        || (v.len() <= 63
            && alnum(v.chars().next())
            && alnum(v.chars().last())
            && v.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

impl PodPatches {
    /// Parses every entry of `pods`; the errors name each bad entry's field.
    pub fn compile(pods: &PodsToHost) -> Result<PodPatches, Vec<FieldError>> {
        let mut errors = Vec::new();
        let mut fail = |field: String, message: String| errors.push(FieldError { field, message });
        let mut patches = PodPatches::default();
        let target = |text: &str| FieldPath::parse(text).and_then(|p| check_target(&p).map(|()| p));
        for (i, p) in pods.patches.iter().enumerate() {
            match target(&p.path) {
                Ok(path) => patches.removals.push(path),
                Err(e) => fail(format!("{PATCHES}[{i}].path"), e),
            }
        }
        for (i, p) in pods.translate_patches.iter().enumerate() {
            let path = target(&p.path)
                .map_err(|e| fail(format!("{TRANSLATE_PATCHES}[{i}].path"), e))
                .ok();
            let expression = Expression::parse(&p.expression)
                .map_err(|e| fail(format!("{TRANSLATE_PATCHES}[{i}].expression"), e))
                .ok();
            if let (Some(path), Some(expression)) = (path, expression) {
                let label = matches!(path.steps(), [_, Step::Key(m), _] if m == "labels");
                patches.rewrites.push(Rewrite {
                    index: i,
                    path,
                    expression,
                    label,
                });
            }
        }
        if errors.is_empty() {
            Ok(patches)
        } else {
            Err(errors)
        }
    }

    pub fn is_empty(&self) -> bool {
        self.rewrites.is_empty() && self.removals.is_empty()
    }

    /// Patches host pod `pod` (as JSON). A rewrite of a field that is absent does nothing;
    /// one of a field that is not a string, or giving a label an invalid value, fails with
    /// the entry named (the pod is then not synced rather than synced unpatched).
    pub fn apply(&self, pod: &mut Value) -> Result<(), FieldError> {
        for r in &self.rewrites {
            let entry = || format!("{TRANSLATE_PATCHES}[{}] ({})", r.index, r.path);
            for field in r.path.select(pod) {
                let Value::String(current) = field else {
                    return Err(FieldError::new(
                        entry(),
                        format!(
                            "the field is {}; translatePatches rewrite strings only",
                            json_type(field)
                        ),
                    ));
                };
                let new = r.expression.evaluate(current);
                if r.label && !is_label_value(&new) {
                    return Err(FieldError::new(
                        entry(),
                        format!(
                            "{new:?} is not a valid label value (at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit)"
                        ),
                    ));
                }
                *current = new;
            }
        }
        for path in &self.removals {
            path.remove(pod);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pods(yaml: &str) -> PodsToHost {
        serde_yaml::from_str(yaml).unwrap()
    }

    fn compile(yaml: &str) -> PodPatches {
        PodPatches::compile(&pods(yaml)).unwrap()
    }

    fn errors(yaml: &str) -> Vec<String> {
        PodPatches::compile(&pods(yaml))
            .unwrap_err()
            .into_iter()
            .map(|e| e.to_string())
            .collect()
    }

    fn host_pod() -> Value {
        json!({
            "metadata": {
                "name": "web-x-shop-x-vc",
                "labels": {"app": "web", "tier": "front", "vcluster.loft.sh/managed-by": "vc"},
            },
            "spec": {
                "containers": [{"name": "app", "image": "nginx", "ports": [{"containerPort": 80}]}],
                "volumes": [
                    {"name": "root", "hostPath": {"path": "/"}},
                    {"name": "cache", "emptyDir": {}},
                ],
            },
        })
    }

    /// Both seed examples at once: the label gets its prefix, no volume mounts the host.
    #[test]
    fn the_seeds_examples_patch_the_host_pod() {
        let patches = compile(
            r#"
translatePatches: [{path: metadata.labels.app, expression: "'vcluster-' + value"}]
patches: [{path: "spec.volumes[*].hostPath", op: remove}]
"#,
        );
        let mut pod = host_pod();
        patches.apply(&mut pod).unwrap();
        assert_eq!(pod["metadata"]["labels"]["app"], "vcluster-web");
        assert_eq!(pod["metadata"]["labels"]["tier"], "front");
        assert_eq!(
            pod["spec"]["volumes"],
            json!([{"name": "root"}, {"name": "cache", "emptyDir": {}}])
        );
    }

    /// No entries: nothing to do, and the pod is untouched.
    #[test]
    fn no_entries_change_nothing() {
        let patches = compile("{}");
        assert!(patches.is_empty());
        let mut pod = host_pod();
        patches.apply(&mut pod).unwrap();
        assert_eq!(pod, host_pod());
    }

    /// A rewrite of an absent field does not create it.
    #[test]
    fn absent_fields_are_not_created() {
        let patches =
            compile(r#"translatePatches: [{path: metadata.labels.missing, expression: "'x'"}]"#);
        let mut pod = host_pod();
        patches.apply(&mut pod).unwrap();
        assert_eq!(pod, host_pod());
    }

    /// Rewrites reach every element of a list.
    #[test]
    fn rewrites_follow_every_element() {
        let patches = compile(
            r#"translatePatches: [{path: "spec.containers[*].image", expression: "'mirror.example.com/' + value"}]"#,
        );
        let mut pod = host_pod();
        patches.apply(&mut pod).unwrap();
        assert_eq!(
            pod["spec"]["containers"][0]["image"],
            "mirror.example.com/nginx"
        );
    }

    /// Removals run after rewrites, so a hardening patch always wins.
    #[test]
    fn removals_win_over_rewrites() {
        let patches = compile(
            r#"
patches: [{path: metadata.labels.app, op: remove}]
translatePatches: [{path: metadata.labels.app, expression: "'x-' + value"}]
"#,
        );
        let mut pod = host_pod();
        patches.apply(&mut pod).unwrap();
        assert!(pod["metadata"]["labels"].get("app").is_none());
    }

    /// A number is not rewritten into a string; the error names the entry.
    #[test]
    fn non_string_fields_are_refused() {
        let patches = compile(
            r#"translatePatches: [{path: "spec.containers[0].ports[0].containerPort", expression: "value"}]"#,
        );
        let err = patches.apply(&mut host_pod()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "spec.sync.toHost.pods.translatePatches[0] (spec.containers[0].ports[0].containerPort): the field is a number; translatePatches rewrite strings only"
        );
    }

    /// A label value the API server would refuse is caught with the reason.
    #[test]
    fn invalid_label_values_are_refused() {
        let long = compile(&format!(
            r#"translatePatches: [{{path: metadata.labels.app, expression: "'{}' + value"}}]"#,
            "x".repeat(61)
        ));
        assert!(
            long.apply(&mut host_pod())
                .unwrap_err()
                .message
                .contains("is not a valid label value")
        );
        let slash = compile(
            r#"translatePatches: [{path: metadata.labels.app, expression: "'a/' + value"}]"#,
        );
        assert!(slash.apply(&mut host_pod()).is_err());
        let trailing = compile(
            r#"translatePatches: [{path: metadata.labels.app, expression: "value + '-'"}]"#,
        );
        assert!(trailing.apply(&mut host_pod()).is_err());
        let empty = compile(r#"translatePatches: [{path: metadata.labels.app, expression: "''"}]"#);
        let mut pod = host_pod();
        empty.apply(&mut pod).unwrap();
        assert_eq!(pod["metadata"]["labels"]["app"], "");
        // Annotations take any string.
        let annotation = compile(
            r#"translatePatches: [{path: "metadata.annotations['a.b/c']", expression: "'a/' + value"}]"#,
        );
        let mut pod = json!({"metadata": {"annotations": {"a.b/c": "v"}}});
        annotation.apply(&mut pod).unwrap();
        assert_eq!(pod["metadata"]["annotations"]["a.b/c"], "a/v");
    }

    /// Every bad entry is reported with its own field, both kinds at once.
    #[test]
    fn every_bad_entry_is_named() {
        let errs = errors(
            r#"
patches: [{path: "spec.volumes[*].hostPath", op: remove}, {path: "spec..x", op: remove}]
translatePatches:
- {path: metadata.labels.app, expression: "'vcluster-' +"}
- {path: metadata.name, expression: "value"}
"#,
        );
        assert_eq!(errs.len(), 3, "{errs:?}");
        assert!(
            errs[0].starts_with("spec.sync.toHost.pods.patches[1].path: \"spec..x\""),
            "{errs:?}"
        );
        assert!(
            errs[1].starts_with(
                "spec.sync.toHost.pods.translatePatches[0].expression: expected a 'string'"
            ),
            "{errs:?}"
        );
        assert!(errs[2].starts_with("spec.sync.toHost.pods.translatePatches[1].path: metadata.name: only metadata.labels"), "{errs:?}");
    }

    /// vnest's own metadata cannot be patched: not the syncer's markers, and not the
    /// operator's labels, or a patch could label tenant pods into the control plane's Services.
    #[test]
    fn the_syncers_bookkeeping_is_off_limits() {
        for path in [
            "metadata.labels['vcluster.loft.sh/managed-by']",
            "metadata.annotations['vcluster.loft.sh/object-uid']",
            "metadata.labels['vnest.dev/control-plane']",
        ] {
            for entry in [
                format!("patches: [{{path: \"{path}\", op: remove}}]"),
                format!("translatePatches: [{{path: \"{path}\", expression: \"'vc'\"}}]"),
            ] {
                let errs = errors(&entry);
                assert!(errs[0].contains("are vnest's own"), "{entry}: {errs:?}");
            }
        }
        for path in [
            "metadata.labels",
            "metadata",
            "status.phase",
            "spec",
            "kind",
        ] {
            let errs = errors(&format!("patches: [{{path: \"{path}\", op: remove}}]"));
            assert!(
                errs[0].contains("only metadata.labels.<key>"),
                "{path}: {errs:?}"
            );
        }
    }
}
