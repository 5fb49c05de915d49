//! CustomResourceDefinitions: a created CRD is served at once, as unstructured JSON.

use serde_json::{Value, json};

use crate::resources::ResourceType;
use crate::shared::Shared;

/// The CRDs' own group resource: writes to it change what the server serves.
pub(crate) const CRD_GROUP_RESOURCE: &str = "customresourcedefinitions.apiextensions.k8s.io";

/// The resource types a CRD object declares, one per served version.
pub(crate) fn types_of(crd: &Value) -> Vec<ResourceType> {
    let spec = &crd["spec"];
    let group = spec["group"].as_str().unwrap_or_default();
    let names = &spec["names"];
    let plural = names["plural"].as_str().unwrap_or_default();
    let kind = names["kind"].as_str().unwrap_or_default();
    if group.is_empty() || plural.is_empty() || kind.is_empty() {
        return Vec::new();
    }
    let namespaced = spec["scope"].as_str() != Some("Cluster");
    let short_names: Vec<&str> = names["shortNames"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    spec["versions"]
        .as_array()
        .map(|versions| {
            versions
                .iter()
                .filter(|v| v["served"].as_bool().unwrap_or(true))
                .filter_map(|v| {
                    let version = v["name"].as_str()?;
                    let mut resource =
                        ResourceType::custom(group, version, kind, plural, namespaced)
                            .with_short_names(&short_names);
                    if let Some(singular) = names["singular"].as_str().filter(|s| !s.is_empty()) {
                        resource.singular = singular.to_owned();
                    }
                    if v.pointer("/subresources/status").is_some() {
                        resource = resource.with_status_subresource();
                    }
                    Some(resource)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Fills the status a CRD gets once apiextensions-apiserver accepts its names.
pub(crate) fn established(crd: &mut Value) {
    let now = jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let storage = crd["spec"]["versions"]
        .as_array()
        .and_then(|vs| vs.iter().find(|v| v["storage"].as_bool() == Some(true)))
        .and_then(|v| v["name"].as_str())
        .unwrap_or_default()
        .to_owned();
    crd["status"] = json!({
        "acceptedNames": crd["spec"]["names"].clone(),
        "conditions": [
            { "type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
              "message": "no conflicts found", "lastTransitionTime": now },
            { "type": "Established", "status": "True", "reason": "InitialNamesAccepted",
              "message": "the initial names have been accepted", "lastTransitionTime": now },
        ],
        "storedVersions": [storage],
    });
}

pub(crate) fn apply(shared: &Shared, crd: &Value) {
    let types = types_of(crd);
    let mut registry = shared.registry.write();
    if let Some(first) = types.first() {
        registry.unregister_group_resource(&first.group, &first.plural);
    }
    for resource in types {
        registry.register(resource);
    }
}

pub(crate) fn remove(shared: &Shared, crd: &Value) {
    let types = types_of(crd);
    if let Some(first) = types.first() {
        shared
            .registry
            .write()
            .unregister_group_resource(&first.group, &first.plural);
        shared.store.lock().drop_resource(&first.group_resource());
    }
}
