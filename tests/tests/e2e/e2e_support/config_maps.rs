//! The ConfigMaps the informer and restart tests create: a name, one `key` with a value, and
//! optional labels. Included with `#[path]` by the tests that use it, so the binaries that do not
//! carry no unused code.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use kube_client::core::ObjectMeta;

pub(crate) fn config_map(name: &str, value: &str, labels: &[(&str, &str)]) -> ConfigMap {
    let labels: BTreeMap<String, String> = labels
        .iter()
        .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
        .collect();
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: (!labels.is_empty()).then_some(labels),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([("key".to_owned(), value.to_owned())])),
        ..ConfigMap::default()
    }
}

pub(crate) fn value_of(config_map: &ConfigMap) -> String {
    config_map
        .data
        .as_ref()
        .and_then(|data| data.get("key").cloned())
        .unwrap_or_default()
}
