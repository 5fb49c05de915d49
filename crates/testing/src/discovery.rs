//! Discovery: `/version`, `/api`, `/apis` and the resource lists of every group version,
//! in the legacy shapes and as aggregated discovery.

use http::Response;
use serde_json::{Value, json};

use crate::response::{Reply, ResponseBody, body_response, value_response};
use crate::shared::Shared;
use crate::status::ApiError;
use crate::wire::to_bytes;

const AGGREGATED_DISCOVERY: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

pub(crate) fn version_info() -> Value {
    json!({
        "major": "1",
        "minor": "37",
        "gitVersion": "v1.37.0-kinformer-fake",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.25",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

pub(crate) fn core_versions(shared: &Shared, accept: &str) -> Response<ResponseBody> {
    if accept.contains("as=APIGroupDiscoveryList") {
        let registry = shared.registry.read();
        let resources: Vec<Value> = registry
            .in_group_version("", "v1")
            .iter()
            .map(|r| r.aggregated_entry())
            .collect();
        let list = json!({
            "kind": "APIGroupDiscoveryList",
            "apiVersion": "apidiscovery.k8s.io/v2",
            "metadata": {},
            "items": [{ "metadata": {}, "versions": [{ "version": "v1", "resources": resources, "freshness": "Current" }] }],
        });
        return body_response(200, AGGREGATED_DISCOVERY, to_bytes(&list));
    }
    let addr = *shared.addr.lock();
    value_response(
        200,
        &json!({
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{ "clientCIDR": "0.0.0.0/0", "serverAddress": addr.to_string() }],
        }),
    )
}

fn group_entry(group: &str, versions: &[String]) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .map(|v| json!({ "groupVersion": format!("{group}/{v}"), "version": v }))
        .collect();
    json!({ "name": group, "versions": versions, "preferredVersion": versions[0] })
}

pub(crate) fn api_groups(shared: &Shared, accept: &str) -> Response<ResponseBody> {
    let registry = shared.registry.read();
    if accept.contains("as=APIGroupDiscoveryList") {
        let items: Vec<Value> = registry
            .groups()
            .iter()
            .map(|(group, versions)| {
                let versions: Vec<Value> = versions
                    .iter()
                    .map(|version| {
                        let resources: Vec<Value> = registry
                            .in_group_version(group, version)
                            .iter()
                            .map(|r| r.aggregated_entry())
                            .collect();
                        json!({ "version": version, "resources": resources, "freshness": "Current" })
                    })
                    .collect();
                json!({ "metadata": { "name": group }, "versions": versions })
            })
            .collect();
        let list = json!({
            "kind": "APIGroupDiscoveryList",
            "apiVersion": "apidiscovery.k8s.io/v2",
            "metadata": {},
            "items": items,
        });
        return body_response(200, AGGREGATED_DISCOVERY, to_bytes(&list));
    }
    let groups: Vec<Value> = registry
        .groups()
        .iter()
        .map(|(group, versions)| group_entry(group, versions))
        .collect();
    value_response(
        200,
        &json!({ "kind": "APIGroupList", "apiVersion": "v1", "groups": groups }),
    )
}

pub(crate) fn api_group(shared: &Shared, group: &str) -> Reply {
    let registry = shared.registry.read();
    let groups = registry.groups();
    let (_, versions) = groups
        .iter()
        .find(|(g, _)| g == group)
        .ok_or_else(ApiError::unknown_path)?;
    let mut entry = group_entry(group, versions);
    entry["kind"] = json!("APIGroup");
    entry["apiVersion"] = json!("v1");
    Ok(value_response(200, &entry))
}

pub(crate) fn resource_list(shared: &Shared, group: &str, version: &str) -> Reply {
    let types = shared.registry.read().in_group_version(group, version);
    if types.is_empty() {
        return Err(ApiError::unknown_path());
    }
    let resources: Vec<Value> = types.iter().flat_map(|r| r.discovery_entry()).collect();
    let group_version = if group.is_empty() {
        version.to_owned()
    } else {
        format!("{group}/{version}")
    };
    Ok(value_response(
        200,
        &json!({
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": group_version,
            "resources": resources,
        }),
    ))
}
