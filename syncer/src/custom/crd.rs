//! The CustomResourceDefinition a synced custom resource gets in the virtual cluster (pure):
//! a copy of the host's CRD for CRD-backed resources, a schemaless generated one for
//! resources an extension API server serves, and how either rolls forward to a new version.

use std::collections::BTreeMap;

use k8s_openapi::{
    apiextensions_apiserver::pkg::apis::apiextensions::v1::{
        CustomResourceDefinition, CustomResourceDefinitionNames, CustomResourceDefinitionSpec,
        CustomResourceDefinitionVersion, CustomResourceSubresourceStatus,
        CustomResourceSubresources, CustomResourceValidation, JSONSchemaProps,
    },
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};

/// Marks a virtual CRD vnest generated for an aggregated API; the value names the host
/// APIService. A same-named CRD without it is never adopted.
pub const ANNOTATION_GENERATED: &str = "vnest.dev/generated-from-apiservice";
/// The API review annotation `*.k8s.io` groups need; copied with the schema.
const ANNOTATION_API_APPROVED: &str = "api-approved.kubernetes.io";

/// What discovery says about an aggregated resource; enough to generate its CRD.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Names {
    pub group: String,
    pub version: String,
    pub plural: String,
    pub singular: String,
    pub kind: String,
    pub short_names: Vec<String>,
    pub namespaced: bool,
}

/// Why a CRD cannot be shown in the virtual cluster (until the configuration or the virtual
/// cluster changes).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CrdError {
    #[error(
        "host CRD {name} has no version {version} (it serves {served:?}); fix the /<version> of its customResources key"
    )]
    NoVersion {
        name: String,
        version: String,
        served: Vec<String>,
    },
    #[error(
        "host CRD {name} does not serve version {version}; fix the /<version> of its customResources key"
    )]
    NotServed { name: String, version: String },
    #[error(
        "the virtual cluster already has a CRD {name} that vnest did not generate (no {} annotation); \
         delete it there, or remove the resource from customResources",
        ANNOTATION_GENERATED
    )]
    NotGenerated { name: String },
}

/// The host's CRD reduced to the synced `version`, served and stored, with its schema and
/// subresources. Other versions and conversion (a webhook on the host) are left out.
pub fn copied(
    host: &CustomResourceDefinition,
    version: &str,
) -> Result<CustomResourceDefinition, CrdError> {
    let name = host.metadata.name.clone().unwrap_or_default();
    let mut synced = host
        .spec
        .versions
        .iter()
        .find(|v| v.name == version)
        .cloned()
        .ok_or_else(|| CrdError::NoVersion {
            name: name.clone(),
            version: version.to_string(),
            served: host
                .spec
                .versions
                .iter()
                .filter(|v| v.served)
                .map(|v| v.name.clone())
                .collect(),
        })?;
    if !synced.served {
        return Err(CrdError::NotServed {
            name,
            version: version.to_string(),
        });
    }
    synced.served = true;
    synced.storage = true;
    synced.deprecated = None;
    synced.deprecation_warning = None;
    let annotations: BTreeMap<String, String> = host
        .metadata
        .annotations
        .iter()
        .flatten()
        .filter(|(k, _)| k.as_str() == ANNOTATION_API_APPROVED)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    Ok(CustomResourceDefinition {
        metadata: ObjectMeta {
            name: Some(name),
            annotations: (!annotations.is_empty()).then_some(annotations),
            ..Default::default()
        },
        spec: CustomResourceDefinitionSpec {
            group: host.spec.group.clone(),
            names: host.spec.names.clone(),
            scope: host.spec.scope.clone(),
            preserve_unknown_fields: None,
            conversion: None,
            versions: vec![synced],
        },
        status: None,
    })
}

/// A schemaless CRD for a resource an extension API server serves: every field is kept,
/// only object metadata is validated; the resource and its status are served.
pub fn generated(names: &Names, api_service: &str) -> CustomResourceDefinition {
    let schema = JSONSchemaProps {
        type_: Some("object".into()),
        x_kubernetes_preserve_unknown_fields: Some(true),
        ..Default::default()
    };
    CustomResourceDefinition {
        metadata: ObjectMeta {
            name: Some(format!("{}.{}", names.plural, names.group)),
            annotations: Some(BTreeMap::from([(
                ANNOTATION_GENERATED.to_string(),
                api_service.to_string(),
            )])),
            ..Default::default()
        },
        spec: CustomResourceDefinitionSpec {
            group: names.group.clone(),
            names: CustomResourceDefinitionNames {
                plural: names.plural.clone(),
                singular: Some(names.singular.clone()).filter(|s| !s.is_empty()),
                kind: names.kind.clone(),
                list_kind: Some(format!("{}List", names.kind)),
                short_names: Some(names.short_names.clone()).filter(|s| !s.is_empty()),
                categories: None,
            },
            scope: if names.namespaced {
                "Namespaced"
            } else {
                "Cluster"
            }
            .into(),
            preserve_unknown_fields: None,
            conversion: None,
            versions: vec![CustomResourceDefinitionVersion {
                name: names.version.clone(),
                served: true,
                storage: true,
                schema: Some(CustomResourceValidation {
                    open_api_v3_schema: Some(schema),
                }),
                subresources: Some(CustomResourceSubresources {
                    status: Some(CustomResourceSubresourceStatus(serde_json::json!({}))),
                    scale: None,
                }),
                ..Default::default()
            }],
        },
        status: None,
    }
}

/// Whether `crd` is one vnest generated (and may therefore roll forward).
pub fn is_generated(crd: &CustomResourceDefinition) -> bool {
    crd.metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(ANNOTATION_GENERATED))
}

/// The virtual CRD to apply, given the one already there (if any) and `wanted` (one version,
/// served and stored). The wanted version becomes the storage version; the other versions
/// already on the CRD are kept (objects stored in them stay readable) and:
/// - of a copied CRD keep the served setting they had;
/// - of a generated CRD stop being served.
///
/// A generated CRD never adopts a same-named CRD vnest did not generate.
pub fn roll_forward(
    existing: Option<&CustomResourceDefinition>,
    wanted: CustomResourceDefinition,
) -> Result<CustomResourceDefinition, CrdError> {
    let Some(existing) = existing else {
        return Ok(wanted);
    };
    let generated = is_generated(&wanted);
    let name = wanted.metadata.name.clone().unwrap_or_default();
    if generated && !is_generated(existing) {
        return Err(CrdError::NotGenerated { name });
    }
    let new_version = wanted.spec.versions[0].clone();
    let mut versions: Vec<CustomResourceDefinitionVersion> = existing
        .spec
        .versions
        .iter()
        .filter(|v| v.name != new_version.name)
        .cloned()
        .map(|mut v| {
            v.storage = false;
            if generated {
                v.served = false;
            }
            v
        })
        .collect();
    versions.push(new_version);
    let mut rolled = wanted;
    rolled.spec.versions = versions;
    Ok(rolled)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The OpenAPI schema of a CRD version, which every test CRD has.
    fn schema_of(version: &CustomResourceDefinitionVersion) -> &JSONSchemaProps {
        version
            .schema
            .as_ref()
            .unwrap()
            .open_api_v3_schema
            .as_ref()
            .unwrap()
    }

    fn host_crd() -> CustomResourceDefinition {
        serde_yaml::from_str(
            r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
  uid: 1234
  resourceVersion: "42"
  annotations: {api-approved.kubernetes.io: unapproved, other: x}
spec:
  group: example.com
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}
  scope: Namespaced
  conversion: {strategy: Webhook, webhook: {conversionReviewVersions: [v1], clientConfig: {service: {namespace: x, name: y}}}}
  versions:
  - name: v1
    served: true
    storage: false
    deprecated: true
    schema: {openAPIV3Schema: {type: object, properties: {spec: {type: object, properties: {size: {type: integer}}}}}}
    subresources: {status: {}}
  - name: v2
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
  - name: v0
    served: false
    storage: false
    schema: {openAPIV3Schema: {type: object}}
"#,
        )
        .unwrap()
    }

    /// (name, served, storage) of each version.
    fn served_stored(crd: &CustomResourceDefinition) -> Vec<(&str, bool, bool)> {
        crd.spec
            .versions
            .iter()
            .map(|v| (v.name.as_str(), v.served, v.storage))
            .collect()
    }

    fn names() -> Names {
        Names {
            group: "wardle.example.com".into(),
            version: "v1beta1".into(),
            plural: "flunders".into(),
            singular: "flunder".into(),
            kind: "Flunder".into(),
            short_names: vec![],
            namespaced: true,
        }
    }

    #[test]
    fn a_copied_crd_serves_and_stores_the_synced_version_with_its_schema_and_status() {
        let crd = copied(&host_crd(), "v1").unwrap();
        assert_eq!(crd.metadata.name.as_deref(), Some("widgets.example.com"));
        assert_eq!(crd.metadata.uid, None);
        assert_eq!(crd.metadata.resource_version, None);
        let annotations = crd.metadata.annotations.unwrap();
        assert_eq!(annotations.len(), 1, "only the API review annotation");
        assert_eq!(annotations[ANNOTATION_API_APPROVED], "unapproved");
        assert_eq!(crd.spec.conversion, None, "no host conversion webhook");
        assert_eq!(crd.spec.versions.len(), 1);
        let v = &crd.spec.versions[0];
        assert_eq!(v.name, "v1");
        assert!(v.served && v.storage);
        assert_eq!(v.deprecated, None);
        assert!(v.subresources.as_ref().unwrap().status.is_some());
        let schema = schema_of(v);
        assert!(schema.properties.as_ref().unwrap().contains_key("spec"));
    }

    #[test]
    fn copying_a_version_the_host_lacks_or_does_not_serve_names_the_fix() {
        let e = copied(&host_crd(), "v3").unwrap_err().to_string();
        assert!(
            e.contains("no version v3") && e.contains("[\"v1\", \"v2\"]"),
            "{e}"
        );
        let e = copied(&host_crd(), "v0").unwrap_err().to_string();
        assert!(e.contains("does not serve version v0"), "{e}");
    }

    #[test]
    fn a_generated_crd_keeps_every_field_and_serves_status() {
        let crd = generated(&names(), "v1beta1.wardle.example.com");
        assert_eq!(
            crd.metadata.name.as_deref(),
            Some("flunders.wardle.example.com")
        );
        assert!(is_generated(&crd));
        assert_eq!(crd.spec.scope, "Namespaced");
        assert_eq!(crd.spec.names.list_kind.as_deref(), Some("FlunderList"));
        assert_eq!(crd.spec.names.short_names, None);
        let v = &crd.spec.versions[0];
        let schema = schema_of(v);
        assert_eq!(schema.x_kubernetes_preserve_unknown_fields, Some(true));
        assert!(v.subresources.as_ref().unwrap().status.is_some());
        assert!(v.subresources.as_ref().unwrap().scale.is_none());
    }

    #[test]
    fn a_first_sync_applies_the_wanted_crd_as_is() {
        let wanted = generated(&names(), "v1beta1.wardle.example.com");
        assert_eq!(roll_forward(None, wanted.clone()).unwrap(), wanted);
    }

    #[test]
    fn a_generated_crd_never_adopts_one_it_did_not_generate() {
        let mut foreign = generated(&names(), "x");
        foreign.metadata.annotations = None;
        let e = roll_forward(
            Some(&foreign),
            generated(&names(), "v1beta1.wardle.example.com"),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("did not generate") && e.contains(ANNOTATION_GENERATED),
            "{e}"
        );
    }

    #[test]
    fn upgrading_a_generated_crd_stops_serving_the_old_version_but_keeps_it() {
        let mut old_names = names();
        old_names.version = "v1alpha1".into();
        let old = generated(&old_names, "v1alpha1.wardle.example.com");
        let rolled = roll_forward(
            Some(&old),
            generated(&names(), "v1beta1.wardle.example.com"),
        )
        .unwrap();
        let v = served_stored(&rolled);
        assert_eq!(v, vec![("v1alpha1", false, false), ("v1beta1", true, true)]);
    }

    #[test]
    fn upgrading_a_copied_crd_switches_storage_and_keeps_served_settings() {
        let mut existing = copied(&host_crd(), "v1").unwrap();
        let mut unserved = existing.spec.versions[0].clone();
        unserved.name = "v0".into();
        unserved.served = false;
        unserved.storage = false;
        existing.spec.versions.push(unserved);
        let rolled = roll_forward(Some(&existing), copied(&host_crd(), "v2").unwrap()).unwrap();
        let v = served_stored(&rolled);
        assert_eq!(
            v,
            vec![
                ("v1", true, false),
                ("v0", false, false),
                ("v2", true, true)
            ]
        );
    }

    #[test]
    fn resyncing_the_same_version_updates_its_schema_in_place() {
        let existing = copied(&host_crd(), "v2").unwrap();
        let mut host = host_crd();
        host.spec.versions[1].schema = host.spec.versions[0].schema.clone();
        let rolled = roll_forward(Some(&existing), copied(&host, "v2").unwrap()).unwrap();
        assert_eq!(rolled.spec.versions.len(), 1);
        assert_eq!(rolled.spec.versions[0].schema, host.spec.versions[0].schema);
    }
}
