//! The writes: create, update, patch, delete and delete-collection, with apiserver's identity,
//! generation and status rules.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::crd::CRD_GROUP_RESOURCE;
use crate::list::{ListParams, list_response};
use crate::object::{Obj, object_key};
use crate::patch;
use crate::resources::ResourceType;
use crate::response::Reply;
use crate::shared::Shared;
use crate::status::ApiError;
use crate::store::{ListQuery, Store};
use crate::wire::{Encoding, Shape};

fn metadata_mut(object: &mut Value) -> &mut Map<String, Value> {
    if !object.get("metadata").is_some_and(Value::is_object) {
        object["metadata"] = json!({});
    }
    match object.get_mut("metadata") {
        Some(Value::Object(map)) => map,
        // Just made an object above.
        _ => unreachable!("metadata was set to an object"),
    }
}

pub(crate) fn meta_str<'a>(object: &'a Value, field: &str) -> &'a str {
    object
        .get("metadata")
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn now_rfc3339() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

fn new_uid() -> String {
    let hex = |n: usize| -> String {
        (0..n)
            .map(|_| char::from_digit(fastrand::u32(0..16), 16).unwrap_or('0'))
            .collect()
    };
    format!("{}-{}-4{}-{}-{}", hex(8), hex(4), hex(3), hex(4), hex(12))
}

fn generated_suffix() -> String {
    // apiserver's alphabet: no vowels, no easily confused characters.
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    (0..5)
        .map(|_| char::from(ALPHABET[fastrand::usize(..ALPHABET.len())]))
        .collect()
}

const NAME_RULE: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, \
'-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for \
validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

/// Checks what the URL and the body say about identity; fills apiVersion and kind.
fn check_identity(
    resource: &ResourceType,
    namespace: Option<&str>,
    object: &mut Value,
) -> Result<(), ApiError> {
    if !object.is_object() {
        return Err(ApiError::bad_request(
            "the body of the request must be a JSON object",
        ));
    }
    let kind = object["kind"].as_str().unwrap_or_default();
    if !kind.is_empty() && kind != resource.kind {
        return Err(ApiError::bad_request(format!(
            "the kind of the object ({kind}) does not match the kind served at this path ({})",
            resource.kind
        )));
    }
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    if !api_version.is_empty() && api_version != resource.api_version() {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({api_version}) does not match the expected API version ({})",
            resource.api_version()
        )));
    }
    object["kind"] = json!(resource.kind);
    object["apiVersion"] = json!(resource.api_version());
    let body_namespace = meta_str(object, "namespace").to_owned();
    let metadata = metadata_mut(object);
    if resource.namespaced {
        let namespace = namespace.unwrap_or("default");
        if !body_namespace.is_empty() && body_namespace != namespace {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        metadata.insert("namespace".into(), json!(namespace));
    } else {
        metadata.remove("namespace");
    }
    Ok(())
}

/// Drops or resets status on create, as the strategies of resources with a status subresource do.
fn reset_status_for_create(resource: &ResourceType, object: &mut Value) {
    if !resource.status_subresource {
        return;
    }
    let Some(map) = object.as_object_mut() else {
        return;
    };
    if resource.group.is_empty() && resource.plural == "pods" {
        map.insert("status".into(), json!({ "phase": "Pending" }));
    } else if resource.group_resource() == CRD_GROUP_RESOURCE {
        // The CRD's own status is filled in by `crd::established`.
    } else {
        map.remove("status");
    }
}

pub(crate) fn create(
    shared: &Shared,
    resource: &ResourceType,
    namespace: Option<&str>,
    object: Value,
) -> Result<Arc<Obj>, ApiError> {
    let prepared = prepare_create(resource, namespace, object)?;
    let stored = {
        let mut store = shared.store.lock();
        let stored = create_locked(&mut store, resource, prepared)?;
        shared.publish_revision(store.resource_version());
        stored
    };
    if resource.group_resource() == CRD_GROUP_RESOURCE {
        crate::crd::apply(shared, &stored.value());
    }
    Ok(stored)
}

/// An object ready to be stored by [`create_locked`]: validated, with server-set fields.
#[derive(Debug)]
pub(crate) struct PreparedCreate {
    key: String,
    name: String,
    object: Value,
}

impl PreparedCreate {
    /// Sets one annotation, for a value that must be taken as late as possible.
    #[cfg(feature = "bench")]
    pub(crate) fn set_annotation(&mut self, key: &str, value: &str) {
        let metadata = metadata_mut(&mut self.object);
        let annotations = metadata.entry("annotations").or_insert_with(|| json!({}));
        if !annotations.is_object() {
            *annotations = json!({});
        }
        annotations[key] = json!(value);
    }
}

/// Everything a create does before it needs the store: validation and server-set fields.
pub(crate) fn prepare_create(
    resource: &ResourceType,
    namespace: Option<&str>,
    mut object: Value,
) -> Result<PreparedCreate, ApiError> {
    check_identity(resource, namespace, &mut object)?;
    let metadata = metadata_mut(&mut object);
    let mut name = metadata
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let generate_name = metadata
        .get("generateName")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    if name.is_empty() && !generate_name.is_empty() {
        name = format!("{generate_name}{}", generated_suffix());
        metadata.insert("name".into(), json!(name));
    }
    if name.is_empty() {
        return Err(ApiError::invalid(
            &resource.group,
            &resource.kind,
            "",
            "metadata.name",
            "FieldValueRequired",
            "Required value: name or generateName is required",
        ));
    }
    if !valid_dns_subdomain(&name) {
        return Err(ApiError::invalid(
            &resource.group,
            &resource.kind,
            &name,
            "metadata.name",
            "FieldValueInvalid",
            &format!("Invalid value: \"{name}\": {NAME_RULE}"),
        ));
    }
    if metadata
        .get("resourceVersion")
        .and_then(Value::as_str)
        .is_some_and(|rv| !rv.is_empty())
    {
        return Err(ApiError::new(
            500,
            "InternalError",
            "Internal error occurred: resourceVersion should not be set on objects to be created",
        )
        .with_details(json!({ "causes": [{ "message": "resourceVersion should not be set on objects to be created" }] })));
    }
    metadata.insert("uid".into(), json!(new_uid()));
    metadata.insert("creationTimestamp".into(), json!(now_rfc3339()));
    // Kinds whose strategy ignores generation keep whatever the client sent, as BeforeCreate does.
    if resource.tracks_generation {
        metadata.insert("generation".into(), json!(1));
    }
    metadata.remove("deletionTimestamp");
    metadata.remove("deletionGracePeriodSeconds");
    reset_status_for_create(resource, &mut object);
    let group_resource = resource.group_resource();
    if group_resource == CRD_GROUP_RESOURCE {
        crate::crd::established(&mut object);
    }
    let key = resource.key(Some(meta_str(&object, "namespace")), &name);
    Ok(PreparedCreate { key, name, object })
}

/// Stores a prepared object unless its name is taken; the caller holds the store's lock and
/// publishes the revision. A CRD's effects on the registry are the caller's to apply.
pub(crate) fn create_locked(
    store: &mut Store,
    resource: &ResourceType,
    prepared: PreparedCreate,
) -> Result<Arc<Obj>, ApiError> {
    let PreparedCreate { key, name, object } = prepared;
    let group_resource = resource.group_resource();
    if store.get(&group_resource, &key).is_some() {
        return Err(ApiError::already_exists(resource.target(&name)));
    }
    Ok(store.commit(&group_resource, &key, Some(object)))
}

/// Which part of an object a write may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UpdateKind {
    /// The main resource: everything but status (when a status subresource exists).
    Main,
    /// The `/status` subresource: status only.
    Status,
}

/// Whether anything but metadata and status differs: what bumps `metadata.generation`.
fn spec_changed(old: &Value, new: &Value) -> bool {
    let (Some(old), Some(new)) = (old.as_object(), new.as_object()) else {
        return old != new;
    };
    let counted = |key: &&String| key.as_str() != "metadata" && key.as_str() != "status";
    old.keys().filter(counted).count() != new.keys().filter(counted).count()
        || old
            .iter()
            .filter(|(key, _)| counted(key))
            .any(|(key, value)| new.get(key) != Some(value))
}

/// Merges a requested new state into the stored one; the write rules of apiserver's strategies.
fn next_state(resource: &ResourceType, old: &Value, mut new: Value, kind: UpdateKind) -> Value {
    if kind == UpdateKind::Status {
        let mut next = old.clone();
        match new.get_mut("status").map(Value::take) {
            Some(status) => next["status"] = status,
            None => {
                if let Some(map) = next.as_object_mut() {
                    map.remove("status");
                }
            }
        }
        return next;
    }
    if resource.status_subresource
        && let Some(map) = new.as_object_mut()
    {
        match old.get("status") {
            Some(status) => {
                map.insert("status".into(), status.clone());
            }
            None => {
                map.remove("status");
            }
        }
    }
    let old_meta = old.get("metadata").cloned().unwrap_or_else(|| json!({}));
    // Deployments also count annotation changes: they are copied into the ReplicaSets.
    let bumps_generation = spec_changed(old, &new)
        || (resource.group == "apps"
            && resource.kind == "Deployment"
            && old_meta.get("annotations") != new.pointer("/metadata/annotations"));
    let metadata = metadata_mut(&mut new);
    for preserved in [
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "namespace",
        "generateName",
    ] {
        match old_meta.get(preserved) {
            Some(value) => {
                metadata.insert(preserved.into(), value.clone());
            }
            None => {
                metadata.remove(preserved);
            }
        }
    }
    // BeforeUpdate: a request never sets generation itself; only the kind's strategy bumps it.
    let old_generation = old_meta.get("generation").and_then(Value::as_i64);
    let generation = match old_generation {
        Some(generation) if resource.tracks_generation && bumps_generation => Some(generation + 1),
        Some(generation) => Some(generation),
        None if resource.tracks_generation && bumps_generation => Some(1),
        None => None,
    };
    match generation {
        Some(generation) => {
            metadata.insert("generation".into(), json!(generation));
        }
        None => {
            metadata.remove("generation");
        }
    }
    new
}

fn update_locked(
    store: &mut Store,
    resource: &ResourceType,
    key: &str,
    name: &str,
    new: Value,
    kind: UpdateKind,
) -> Result<(Arc<Obj>, bool), ApiError> {
    let group_resource = resource.group_resource();
    let old = store
        .get(&group_resource, key)
        .ok_or_else(|| ApiError::not_found(resource.target(name)))?;
    let old_rv = old.rv.to_string();
    let requested_rv = meta_str(&new, "resourceVersion");
    if !requested_rv.is_empty() && requested_rv != old_rv {
        return Err(ApiError::conflict(resource.target(name)));
    }
    let old_value = old.value();
    let mut next = next_state(resource, &old_value, new, kind);
    metadata_mut(&mut next).insert("resourceVersion".into(), json!(old_rv));
    if next == old_value {
        // apiserver skips writes that change nothing: no new revision, no event.
        return Ok((old, false));
    }
    let finalizers_done = next
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null())
        && next
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty);
    let stored = store.commit(&group_resource, key, Some(next));
    if finalizers_done {
        store.commit(&group_resource, key, None);
    }
    Ok((stored, finalizers_done))
}

pub(crate) fn update(
    shared: &Shared,
    resource: &ResourceType,
    namespace: Option<&str>,
    name: &str,
    mut object: Value,
    kind: UpdateKind,
) -> Result<Arc<Obj>, ApiError> {
    check_identity(resource, namespace, &mut object)?;
    let body_name = meta_str(&object, "name");
    if body_name != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        )));
    }
    let key = resource.key(Some(meta_str(&object, "namespace")), name);
    let (stored, gone) = {
        let mut store = shared.store.lock();
        let outcome = update_locked(&mut store, resource, &key, name, object, kind)?;
        shared.publish_revision(store.resource_version());
        outcome
    };
    after_crd_write(shared, resource, &stored, gone);
    Ok(stored)
}

fn after_crd_write(shared: &Shared, resource: &ResourceType, stored: &Obj, gone: bool) {
    if resource.group_resource() == CRD_GROUP_RESOURCE {
        if gone {
            crate::crd::remove(shared, &stored.value());
        } else {
            crate::crd::apply(shared, &stored.value());
        }
    }
}

pub(crate) fn patch(
    shared: &Shared,
    resource: &ResourceType,
    namespace: Option<&str>,
    name: &str,
    content_type: &str,
    body: &Value,
    kind: UpdateKind,
) -> Result<Arc<Obj>, ApiError> {
    let media_type = content_type.split(';').next().unwrap_or("").trim();
    let key = resource.key(namespace, name);
    let (stored, gone) = {
        let mut store = shared.store.lock();
        let old = store
            .get(&resource.group_resource(), &key)
            .ok_or_else(|| ApiError::not_found(resource.target(name)))?;
        let mut patched = old.value();
        match media_type {
            "application/merge-patch+json" | "application/strategic-merge-patch+json" => {
                patch::merge_patch(&mut patched, body);
            }
            "application/json-patch+json" => {
                patch::json_patch(&mut patched, body)
                    .map_err(|detail| ApiError::new(422, "Invalid", detail))?;
            }
            other => return Err(ApiError::unsupported_media_type(other)),
        }
        if !patched.is_object() {
            return Err(ApiError::new(
                422,
                "Invalid",
                "the patch must leave a JSON object",
            ));
        }
        if meta_str(&patched, "name") != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({}) does not match the name on the URL ({name})",
                meta_str(&patched, "name")
            )));
        }
        let outcome = update_locked(&mut store, resource, &key, name, patched, kind)?;
        shared.publish_revision(store.resource_version());
        outcome
    };
    after_crd_write(shared, resource, &stored, gone);
    Ok(stored)
}

/// What a delete did.
pub(crate) enum Deleted {
    /// Finalizers remain: the object now carries a deletionTimestamp.
    Pending(Arc<Obj>),
    /// The object is gone; this is its last state.
    Gone(Arc<Obj>),
}

pub(crate) fn delete(
    shared: &Shared,
    resource: &ResourceType,
    namespace: Option<&str>,
    name: &str,
    options: &Value,
) -> Result<Deleted, ApiError> {
    let key = resource.key(namespace, name);
    let group_resource = resource.group_resource();
    let outcome = {
        let mut store = shared.store.lock();
        let outcome = delete_locked(&mut store, resource, &group_resource, &key, name, options)?;
        shared.publish_revision(store.resource_version());
        outcome
    };
    if let Deleted::Gone(obj) = &outcome
        && group_resource == CRD_GROUP_RESOURCE
    {
        crate::crd::remove(shared, &obj.value());
    }
    Ok(outcome)
}

fn delete_locked(
    store: &mut Store,
    resource: &ResourceType,
    group_resource: &str,
    key: &str,
    name: &str,
    options: &Value,
) -> Result<Deleted, ApiError> {
    let old = store
        .get(group_resource, key)
        .ok_or_else(|| ApiError::not_found(resource.target(name)))?;
    let old_value = old.value();
    for (field, label) in [("uid", "UID"), ("resourceVersion", "ResourceVersion")] {
        if let Some(wanted) = options
            .pointer(&format!("/preconditions/{field}"))
            .and_then(Value::as_str)
        {
            let actual = meta_str(&old_value, field);
            if wanted != actual {
                let mut error = ApiError::conflict(resource.target(name));
                error.message = format!(
                    "Operation cannot be fulfilled on {} \"{name}\": Precondition failed: {label} in precondition: {wanted}, {label} in object meta: {actual}",
                    resource.group_resource()
                );
                return Err(error);
            }
        }
    }
    let has_finalizers = old_value
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|f| !f.is_empty());
    if has_finalizers {
        if old_value
            .pointer("/metadata/deletionTimestamp")
            .is_some_and(|t| !t.is_null())
        {
            return Ok(Deleted::Pending(old));
        }
        let mut next = old_value;
        let metadata = metadata_mut(&mut next);
        metadata.insert("deletionTimestamp".into(), json!(now_rfc3339()));
        metadata.insert("deletionGracePeriodSeconds".into(), json!(0));
        return Ok(Deleted::Pending(store.commit(
            group_resource,
            key,
            Some(next),
        )));
    }
    store.commit(group_resource, key, None);
    Ok(Deleted::Gone(old))
}

pub(crate) fn delete_collection(
    shared: &Shared,
    resource: &ResourceType,
    namespace: Option<&str>,
    params: &ListParams,
    encoding: Encoding,
) -> Reply {
    let group_resource = resource.group_resource();
    let mut deleted = Vec::new();
    {
        let mut store = shared.store.lock();
        let page = store.list(&ListQuery {
            group_resource: &group_resource,
            namespace,
            at: None,
            after_key: None,
            offset: 0,
            limit: None,
            selectors: &params.selectors,
        });
        for obj in page.items {
            let name = obj.name.clone();
            let key = object_key(obj.namespace.as_deref(), &name);
            match delete_locked(
                &mut store,
                resource,
                &group_resource,
                &key,
                &name,
                &Value::Null,
            )? {
                Deleted::Pending(obj) | Deleted::Gone(obj) => deleted.push(obj),
            }
        }
        shared.publish_revision(store.resource_version());
    }
    if group_resource == CRD_GROUP_RESOURCE {
        for obj in &deleted {
            crate::crd::remove(shared, &obj.value());
        }
    }
    let rv = shared.store.lock().resource_version();
    let metadata = json!({ "resourceVersion": rv.to_string() });
    list_response(resource, Shape::Full, encoding, &metadata, &deleted)
}

/// RFC 1123 subdomain, what `metadata.name` must be for most resources.
fn valid_dns_subdomain(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        && name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric())
        && name
            .chars()
            .last()
            .is_some_and(|c| c.is_ascii_alphanumeric())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kind_without_generation_never_gets_one_from_an_update() {
        let config_maps = ResourceType::of::<k8s_openapi::api::core::v1::ConfigMap>();
        let old = json!({"metadata":{"name":"a","uid":"u"},"data":{"k":"1"}});
        let changed = json!({"metadata":{"name":"a","generation":7},"data":{"k":"2"}});
        let next = next_state(&config_maps, &old, changed, UpdateKind::Main);
        assert_eq!(next["metadata"].get("generation"), None);
        assert_eq!(next["data"]["k"], "2");
    }

    #[test]
    fn a_deployment_annotation_change_bumps_the_generation() {
        let deployments = ResourceType::of::<k8s_openapi::api::apps::v1::Deployment>()
            .with_status_subresource()
            .with_generation();
        let old = json!({"metadata":{"name":"a","generation":2},"spec":{"replicas":1}});
        let annotated =
            json!({"metadata":{"name":"a","annotations":{"a":"b"}},"spec":{"replicas":1}});
        let next = next_state(&deployments, &old, annotated, UpdateKind::Main);
        assert_eq!(next["metadata"]["generation"], 3);
    }

    #[test]
    fn an_update_that_changes_only_metadata_keeps_the_generation() {
        let pods = ResourceType::of::<k8s_openapi::api::core::v1::Pod>()
            .with_status_subresource()
            .with_generation();
        let old = json!({"metadata":{"name":"a","generation":3,"uid":"u"},"spec":{"x":1},"status":{"phase":"Running"}});
        let relabelled = json!({"metadata":{"name":"a","labels":{"a":"b"}},"spec":{"x":1}});
        let next = next_state(&pods, &old, relabelled, UpdateKind::Main);
        assert_eq!(next["metadata"]["generation"], 3);
        assert_eq!(next["metadata"]["uid"], "u");
        assert_eq!(next["status"]["phase"], "Running");
        let respecced = json!({"metadata":{"name":"a"},"spec":{"x":2}});
        assert_eq!(
            next_state(&pods, &old, respecced, UpdateKind::Main)["metadata"]["generation"],
            4
        );
    }
}
