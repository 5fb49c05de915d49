//! Request routing and the REST verbs: discovery, get, list, create, update, patch, delete.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use bytes::{BufMut, Bytes, BytesMut};
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use kinformer_protobuf::{Message, encode_list, encode_message, messages};
use serde_json::{Map, Value, json};

use crate::faults::{Faults, Verb};
use crate::patch;
use crate::resources::ResourceType;
use crate::selector::{FieldSelector, LabelSelector, Selectors};
use crate::server::{ResponseBody, Shared};
use crate::status::{self, ApiError, Target};
use crate::store::{ListQuery, Obj, Store, object_key, valid_dns_subdomain};
use crate::watch;
use crate::wire::{self, Encoding};

const JSON: &str = "application/json";
const AGGREGATED_DISCOVERY: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
const CRD_GROUP_RESOURCE: &str = "customresourcedefinitions.apiextensions.k8s.io";

type Reply = Result<Response<ResponseBody>, ApiError>;

pub(crate) async fn handle(
    shared: Arc<Shared>,
    request: Request<Incoming>,
) -> Response<ResponseBody> {
    if let Some(delay) = shared.faults.delay() {
        tokio::time::sleep(delay).await;
    }
    // Requests on a served resource answer their errors themselves; this is for the rest.
    let status_encoding = Encoding::for_status(
        request
            .headers()
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .unwrap_or(JSON),
    );
    match route(&shared, request).await {
        Ok(response) => response,
        Err(error) => status_response(&error, status_encoding),
    }
}

/// A whole response: `body`, sent as `content_type`.
pub(crate) fn body_response(code: u16, content_type: &str, body: Bytes) -> Response<ResponseBody> {
    let mut response = Response::new(ResponseBody::Full(Some(body)));
    *response.status_mut() =
        StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if let Ok(value) = HeaderValue::from_str(content_type) {
        response.headers_mut().insert(header::CONTENT_TYPE, value);
    }
    response
}

fn value_response(code: u16, value: &Value) -> Response<ResponseBody> {
    body_response(code, JSON, to_bytes(value))
}

pub(crate) fn to_bytes(value: &Value) -> Bytes {
    serde_json::to_vec(value)
        .map(Bytes::from)
        .unwrap_or_default()
}

/// A failure as its `Status`, in `encoding`.
pub(crate) fn status_response(error: &ApiError, encoding: Encoding) -> Response<ResponseBody> {
    let (content_type, body) = encoding.status(&error.to_status());
    let mut response = body_response(error.code, content_type, body);
    if let Some(seconds) = error.retry_after_seconds {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    }
    response
}

/// The representation a client asked for in `Accept`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    Full,
    /// `as=PartialObjectMetadata[List];g=meta.k8s.io;v=v1`: metadata only.
    Metadata,
}

impl Shape {
    /// `(kind, apiVersion)` of one object of `resource` in this shape.
    pub(crate) fn object_type(self, resource: &ResourceType) -> (String, String) {
        match self {
            Shape::Metadata => (
                "PartialObjectMetadata".to_owned(),
                "meta.k8s.io/v1".to_owned(),
            ),
            Shape::Full => (resource.kind.clone(), resource.api_version()),
        }
    }

    /// `(kind, apiVersion)` of a list of `resource` in this shape.
    pub(crate) fn list_type(self, resource: &ResourceType) -> (String, String) {
        match self {
            Shape::Metadata => (
                "PartialObjectMetadataList".to_owned(),
                "meta.k8s.io/v1".to_owned(),
            ),
            Shape::Full => (resource.list_kind(), resource.api_version()),
        }
    }
}

fn shape_of(accept: &str) -> Shape {
    if accept.contains("as=PartialObjectMetadata") {
        Shape::Metadata
    } else {
        Shape::Full
    }
}

/// The bytes of one object as this resource version and shape present it.
pub(crate) fn wire_json(obj: &Obj, resource: &ResourceType, shape: Shape) -> Bytes {
    match shape {
        Shape::Metadata => obj.metadata_json(),
        Shape::Full => {
            if obj.api_version == resource.api_version() || resource.group.is_empty() {
                obj.json.clone()
            } else {
                // A CRD served at several versions without conversion: only apiVersion differs.
                let mut value = obj.value();
                value["apiVersion"] = json!(resource.api_version());
                to_bytes(&value)
            }
        }
    }
}

/// One object as the request negotiated it: [`wire_json`] or its enveloped protobuf.
fn object_response(
    code: u16,
    obj: &Obj,
    resource: &ResourceType,
    shape: Shape,
    encoding: Encoding,
) -> Reply {
    let body = match encoding {
        Encoding::Json => wire_json(obj, resource, shape),
        Encoding::Protobuf(message) => wire::envelope(resource, shape, &obj.protobuf(message)?),
    };
    Ok(body_response(code, encoding.content_type(), body))
}

/// One list item, in two pieces written one after the other: kube-apiserver leaves
/// `apiVersion` and `kind` out of the items of a typed list (the list's own kind names them),
/// while unstructured lists (custom resources) and metadata-only lists keep them per item.
pub(crate) fn list_item(
    obj: &Obj,
    resource: &ResourceType,
    shape: Shape,
) -> (&'static [u8], Bytes) {
    if shape == Shape::Full && !resource.unstructured {
        obj.untyped_json()
    } else {
        (b"", wire_json(obj, resource, shape))
    }
}

async fn route(shared: &Arc<Shared>, request: Request<Incoming>) -> Reply {
    let (parts, body) = request.into_parts();
    let path = parts.uri.path().to_owned();
    let query: HashMap<String, String> = parts
        .uri
        .query()
        .map(|q| form_urlencoded::parse(q.as_bytes()).into_owned().collect())
        .unwrap_or_default();
    let accept = parts
        .headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or(JSON)
        .to_owned();
    let content_type = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or(JSON)
        .to_owned();
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let is_get = parts.method == Method::GET;
    match segments.as_slice() {
        ["healthz" | "livez" | "readyz"] => {
            Ok(body_response(200, "text/plain", Bytes::from_static(b"ok")))
        }
        ["version"] if is_get => Ok(value_response(200, &version_info())),
        ["api"] if is_get => Ok(core_versions(shared, &accept)),
        ["apis"] if is_get => Ok(api_groups(shared, &accept)),
        ["api", "v1"] if is_get => resource_list(shared, "", "v1"),
        ["apis", group] if is_get => api_group(shared, group),
        ["apis", group, version] if is_get => resource_list(shared, group, version),
        ["admin", rest @ ..] if shared.config.admin_endpoints => {
            let body = read_body(body).await?;
            crate::admin::handle(shared, rest, &query, &body).await
        }
        ["api", "v1", rest @ ..] => {
            let call = Call {
                method: parts.method,
                query,
                accept,
                content_type,
                body,
            };
            resource_request(shared, "", "v1", rest, call).await
        }
        ["apis", group, version, rest @ ..] => {
            let call = Call {
                method: parts.method,
                query,
                accept,
                content_type,
                body,
            };
            resource_request(shared, group, version, rest, call).await
        }
        _ => Err(ApiError::unknown_path()),
    }
}

async fn read_body(body: Incoming) -> Result<Bytes, ApiError> {
    body.collect()
        .await
        .map(|collected| collected.to_bytes())
        .map_err(|e| ApiError::bad_request(format!("unable to read the request body: {e}")))
}

fn version_info() -> Value {
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

fn core_versions(shared: &Shared, accept: &str) -> Response<ResponseBody> {
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

fn api_groups(shared: &Shared, accept: &str) -> Response<ResponseBody> {
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

fn api_group(shared: &Shared, group: &str) -> Reply {
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

fn resource_list(shared: &Shared, group: &str, version: &str) -> Reply {
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

struct Call {
    method: Method,
    query: HashMap<String, String>,
    accept: String,
    content_type: String,
    body: Incoming,
}

async fn resource_request(
    shared: &Arc<Shared>,
    group: &str,
    version: &str,
    rest: &[&str],
    call: Call,
) -> Reply {
    let find = |plural: &str| shared.registry.read().find(group, version, plural);
    let (namespace, resource, name, subresource) = match rest {
        ["namespaces", ns, plural, tail @ ..]
            if tail.len() <= 2 && find(plural).is_some_and(|r| r.namespaced) =>
        {
            (
                Some(*ns),
                find(plural),
                tail.first().copied(),
                tail.get(1).copied(),
            )
        }
        [plural] => (None, find(plural), None, None),
        [plural, name] => (None, find(plural), Some(*name), None),
        [plural, name, sub] => (None, find(plural), Some(*name), Some(*sub)),
        _ => return Err(ApiError::unknown_path()),
    };
    let resource = resource.ok_or_else(ApiError::unknown_path)?;
    if namespace.is_some() != resource.namespaced && name.is_some() {
        return Err(ApiError::unknown_path());
    }
    if namespace.is_some() && !resource.namespaced {
        return Err(ApiError::unknown_path());
    }
    if let Some(sub) = subresource
        && !(sub == "status" && resource.status_subresource)
    {
        return Err(ApiError::unknown_path());
    }
    let watching = call
        .query
        .get("watch")
        .is_some_and(|w| w == "true" || w == "1");
    let verb = match (&call.method, name.is_some()) {
        (&Method::GET, true) => Verb::Get,
        (&Method::GET, false) if watching => Verb::Watch,
        (&Method::GET, false) => Verb::List,
        (&Method::POST, false) => Verb::Create,
        (&Method::PUT, true) => Verb::Update,
        (&Method::PATCH, true) => Verb::Patch,
        (&Method::DELETE, true) => Verb::Delete,
        (&Method::DELETE, false) => Verb::DeleteCollection,
        _ => {
            return Err(ApiError::method_not_allowed(
                "the server does not allow this method on the requested resource",
            ));
        }
    };
    let shape = shape_of(&call.accept);
    let encoding = Encoding::negotiate(&call.accept, &resource, shape);
    let targeted = Targeted {
        resource,
        namespace,
        name,
        subresource,
        shape,
        encoding,
    };
    let reply = serve_verb(shared, verb, targeted, call).await;
    let response = reply.unwrap_or_else(|error| status_response(&error, encoding));
    // Failures are counted too: a client sees their Content-Type as well.
    if matches!(verb, Verb::Get | Verb::List | Verb::Watch) {
        shared.count_content_type(&response);
    }
    Ok(response)
}

/// What a resource request names, once its path has been resolved, and how it is answered.
struct Targeted<'a> {
    resource: Arc<ResourceType>,
    namespace: Option<&'a str>,
    name: Option<&'a str>,
    subresource: Option<&'a str>,
    /// The representation the client asked for.
    shape: Shape,
    /// The encoding of every body the request answers, errors included.
    encoding: Encoding,
}

async fn serve_verb(shared: &Arc<Shared>, verb: Verb, targeted: Targeted<'_>, call: Call) -> Reply {
    let Targeted {
        resource,
        namespace,
        name,
        subresource,
        shape,
        encoding,
    } = targeted;
    let label = match subresource {
        Some(sub) => format!("{}/{sub}", resource.plural),
        None => resource.plural.clone(),
    };
    if let Some(fault) = shared.faults.on_request(verb, &label, &call.query) {
        return Err(ApiError::injected(
            fault.code(),
            verb.as_str(),
            &resource.plural,
            Faults::retry_after(&fault),
        ));
    }
    if resource.namespaced
        && namespace.is_none()
        && matches!(verb, Verb::Create | Verb::DeleteCollection)
    {
        return Err(ApiError::method_not_allowed(
            "the server does not allow this method on the requested resource",
        ));
    }
    let namespace = namespace.map(str::to_owned);
    let update_kind = if subresource.is_some() {
        UpdateKind::Status
    } else {
        UpdateKind::Main
    };
    match verb {
        Verb::Get => {
            let name = name.unwrap_or_default();
            let key = key_for(&resource, namespace.as_deref(), name);
            let obj = shared
                .store
                .lock()
                .get(&resource.group_resource(), &key)
                .ok_or_else(|| ApiError::not_found(target(&resource, name)))?;
            object_response(200, &obj, &resource, shape, encoding)
        }
        Verb::List => {
            let params = ListParams::parse(&call.query, &resource)?;
            list(
                shared,
                &resource,
                namespace.as_deref(),
                &params,
                shape,
                encoding,
            )
            .await
        }
        Verb::Watch => {
            let params = ListParams::parse(&call.query, &resource)?;
            watch::serve(shared.clone(), resource, namespace, params, shape, encoding).await
        }
        Verb::Create => {
            let body = parse_json(&read_body(call.body).await?)?;
            let obj = create(shared, &resource, namespace.as_deref(), body)?;
            object_response(201, &obj, &resource, shape, encoding)
        }
        Verb::Update => {
            let body = parse_json(&read_body(call.body).await?)?;
            let name = name.unwrap_or_default();
            let obj = update(
                shared,
                &resource,
                namespace.as_deref(),
                name,
                body,
                update_kind,
            )?;
            object_response(200, &obj, &resource, shape, encoding)
        }
        Verb::Patch => {
            let body = parse_json(&read_body(call.body).await?)?;
            let name = name.unwrap_or_default();
            let obj = patch(
                shared,
                &resource,
                namespace.as_deref(),
                name,
                &call.content_type,
                &body,
                update_kind,
            )?;
            object_response(200, &obj, &resource, shape, encoding)
        }
        Verb::Delete => {
            let raw = read_body(call.body).await?;
            let options = if raw.is_empty() {
                Value::Null
            } else {
                parse_json(&raw)?
            };
            let name = name.unwrap_or_default();
            let outcome = delete(shared, &resource, namespace.as_deref(), name, &options)?;
            match outcome {
                Deleted::Pending(obj) => object_response(200, &obj, &resource, shape, encoding),
                Deleted::Gone(obj) if resource.returns_deleted_object => {
                    object_response(200, &obj, &resource, shape, encoding)
                }
                Deleted::Gone(obj) => {
                    let value = obj.value();
                    let uid = meta_str(&value, "uid");
                    let success = status::delete_success(target(&resource, name), uid);
                    let (content_type, body) = encoding.status(&success);
                    Ok(body_response(200, content_type, body))
                }
            }
        }
        Verb::DeleteCollection => {
            let params = ListParams::parse(&call.query, &resource)?;
            // Answered with whole objects whatever the shape asked (as the JSON body is).
            let encoding = Encoding::negotiate(&call.accept, &resource, Shape::Full);
            delete_collection(shared, &resource, namespace.as_deref(), &params, encoding)
        }
    }
}

/// The storage key of a named object; a namespaced object without a namespace is in `default`,
/// as kubectl and kube-client assume.
pub(crate) fn key_for(resource: &ResourceType, namespace: Option<&str>, name: &str) -> String {
    if resource.namespaced {
        object_key(Some(namespace.unwrap_or("default")), name)
    } else {
        object_key(None, name)
    }
}

fn parse_json(body: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
    })
}

fn target<'a>(resource: &'a ResourceType, name: &'a str) -> Target<'a> {
    Target {
        group: &resource.group,
        resource: &resource.plural,
        name,
    }
}

/// The list and watch query parameters, validated as apiserver's `ValidateListOptions` does.
#[derive(Debug)]
pub(crate) struct ListParams {
    pub(crate) resource_version: String,
    pub(crate) resource_version_match: String,
    pub(crate) limit: Option<usize>,
    pub(crate) continue_token: String,
    pub(crate) selectors: Selectors,
    pub(crate) allow_bookmarks: bool,
    pub(crate) send_initial_events: Option<bool>,
    pub(crate) timeout: Option<Duration>,
}

fn parse_bool(query: &HashMap<String, String>, name: &str) -> Result<Option<bool>, ApiError> {
    match query.get(name).map(String::as_str) {
        None | Some("") => Ok(None),
        Some("true" | "1") => Ok(Some(true)),
        Some("false" | "0") => Ok(Some(false)),
        Some(other) => Err(ApiError::bad_request(format!(
            "strconv.ParseBool: parsing \"{other}\": invalid syntax"
        ))),
    }
}

fn list_options_invalid(field: &str, reason: &str, detail: &str) -> ApiError {
    ApiError::invalid("meta.k8s.io", "ListOptions", "", field, reason, detail)
}

fn forbidden(field: &str, detail: &str) -> ApiError {
    list_options_invalid(
        field,
        "FieldValueForbidden",
        &format!("Forbidden: {detail}"),
    )
}

impl ListParams {
    fn parse(query: &HashMap<String, String>, resource: &ResourceType) -> Result<Self, ApiError> {
        let get = |name: &str| query.get(name).cloned().unwrap_or_default();
        let limit = match query.get("limit").map(String::as_str) {
            None | Some("") => None,
            Some(raw) => {
                let parsed: i64 = raw.parse().map_err(|_| {
                    ApiError::bad_request(format!(
                        "strconv.ParseInt: parsing \"{raw}\": invalid syntax"
                    ))
                })?;
                usize::try_from(parsed).ok().filter(|l| *l > 0)
            }
        };
        let timeout = match query.get("timeoutSeconds").map(String::as_str) {
            None | Some("") => None,
            Some(raw) => Some(Duration::from_secs(raw.parse().map_err(|_| {
                ApiError::bad_request(format!(
                    "strconv.ParseInt: parsing \"{raw}\": invalid syntax"
                ))
            })?)),
        };
        let params = Self {
            resource_version: get("resourceVersion"),
            resource_version_match: get("resourceVersionMatch"),
            limit,
            continue_token: get("continue"),
            selectors: Selectors {
                labels: LabelSelector::parse(&get("labelSelector"))?,
                fields: FieldSelector::parse(&get("fieldSelector"), resource)?,
            },
            allow_bookmarks: parse_bool(query, "allowWatchBookmarks")?.unwrap_or(false),
            send_initial_events: parse_bool(query, "sendInitialEvents")?,
            timeout,
        };
        if !params.resource_version.is_empty() && params.resource_version.parse::<u64>().is_err() {
            return Err(ApiError::bad_request(format!(
                "invalid resource version \"{}\": strconv.ParseUint: parsing \"{}\": invalid syntax",
                params.resource_version, params.resource_version
            )));
        }
        let watching = query.get("watch").is_some_and(|w| w == "true" || w == "1");
        params.validate(watching)?;
        Ok(params)
    }

    fn validate(&self, watching: bool) -> Result<(), ApiError> {
        let rv_match = self.resource_version_match.as_str();
        if watching {
            if self.send_initial_events.is_some() && rv_match != "NotOlderThan" {
                return Err(forbidden(
                    "resourceVersionMatch",
                    "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                ));
            }
            if !rv_match.is_empty() {
                if self.send_initial_events.is_none() {
                    return Err(forbidden(
                        "resourceVersionMatch",
                        "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
                    ));
                }
                if !self.continue_token.is_empty() {
                    return Err(forbidden(
                        "resourceVersionMatch",
                        "resourceVersionMatch is forbidden when continue is provided",
                    ));
                }
            }
            if self.send_initial_events == Some(true) && !self.allow_bookmarks {
                return Err(forbidden(
                    "allowWatchBookmarks",
                    "sendInitialEvents requires setting allowWatchBookmarks to true",
                ));
            }
            return Ok(());
        }
        if !rv_match.is_empty() {
            if self.resource_version.is_empty() {
                return Err(forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden unless resourceVersion is provided",
                ));
            }
            if !self.continue_token.is_empty() {
                return Err(forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden when continue is provided",
                ));
            }
            match rv_match {
                "Exact" if self.resource_version == "0" => {
                    return Err(forbidden(
                        "resourceVersionMatch",
                        "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
                    ));
                }
                "Exact" | "NotOlderThan" => {}
                other => {
                    return Err(list_options_invalid(
                        "resourceVersionMatch",
                        "FieldValueNotSupported",
                        &format!(
                            "Unsupported value: \"{other}\": supported values: \"Exact\", \"NotOlderThan\", \"\""
                        ),
                    ));
                }
            }
        }
        if self.send_initial_events.is_some() {
            return Err(forbidden(
                "sendInitialEvents",
                "sendInitialEvents is forbidden for list",
            ));
        }
        Ok(())
    }

    pub(crate) fn numeric_resource_version(&self) -> u64 {
        self.resource_version.parse().unwrap_or(0)
    }
}

/// Waits (bounded) until the store reaches `rv`, as the watch cache does for a future version.
pub(crate) async fn wait_for_revision(shared: &Shared, rv: u64) -> Result<(), ApiError> {
    let mut revisions = shared.revision.subscribe();
    let reached = tokio::time::timeout(
        shared.config.too_large_rv_wait,
        revisions.wait_for(|current| *current >= rv),
    )
    .await;
    match reached {
        Ok(Ok(_)) => Ok(()),
        _ => {
            let current = shared.store.lock().resource_version();
            Err(ApiError::too_large_resource_version(rv, current))
        }
    }
}

#[derive(serde::Serialize, serde::Deserialize)]
struct ContinueToken {
    v: String,
    rv: i64,
    start: String,
    /// Items returned so far: our addition to apiserver's token, for a free remainingItemCount.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    n: Option<usize>,
}

fn encode_continue(rv: i64, last_key: &str, returned: Option<usize>) -> String {
    let token = ContinueToken {
        v: "meta.k8s.io/v1".to_owned(),
        rv,
        start: format!("{last_key}\u{0}"),
        n: returned,
    };
    let json = serde_json::to_vec(&token).unwrap_or_default();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json)
}

fn decode_continue(token: &str) -> Result<(i64, String, usize), ApiError> {
    let invalid = |detail: &str| ApiError::bad_request(format!("invalid continue token: {detail}"));
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token.trim_end_matches('='))
        .map_err(|e| invalid(&e.to_string()))?;
    let token: ContinueToken = serde_json::from_slice(&raw).map_err(|e| invalid(&e.to_string()))?;
    if token.v != "meta.k8s.io/v1" {
        return Err(invalid(
            "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
        ));
    }
    let start = token
        .start
        .strip_suffix('\u{0}')
        .unwrap_or(&token.start)
        .to_owned();
    Ok((token.rv, start, token.n.unwrap_or(0)))
}

async fn list(
    shared: &Shared,
    resource: &ResourceType,
    namespace: Option<&str>,
    params: &ListParams,
    shape: Shape,
    encoding: Encoding,
) -> Reply {
    let rv = params.numeric_resource_version();
    let mut limit = params.limit;
    let mut at = None;
    let mut after_key = None;
    let mut offset = 0;
    if !params.continue_token.is_empty() {
        if !params.resource_version.is_empty() && params.resource_version != "0" {
            return Err(ApiError::bad_request(
                "specifying resource version is not allowed when using continue",
            ));
        }
        let (token_rv, start, returned) = decode_continue(&params.continue_token)?;
        if token_rv > 0 {
            at = Some(token_rv as u64);
        }
        after_key = Some(start);
        offset = returned;
    } else {
        match (
            params.resource_version.as_str(),
            params.resource_version_match.as_str(),
        ) {
            ("", _) => {}
            // The watch cache serves "any" from memory and ignores the limit.
            ("0", _) => limit = None,
            (_, "Exact") => at = Some(rv),
            (_, "") if limit.is_some() => at = Some(rv),
            _ => {
                if rv > shared.store.lock().resource_version() {
                    wait_for_revision(shared, rv).await?;
                }
            }
        }
    }
    if let Some(at) = at
        && at > shared.store.lock().resource_version()
    {
        wait_for_revision(shared, at).await?;
    }
    let group_resource = resource.group_resource();
    let page = {
        let store = shared.store.lock();
        if let Some(at) = at
            && at < store.compacted_revision()
        {
            return Err(match &after_key {
                Some(start) => ApiError::expired_continue(encode_continue(-1, start, None)),
                None => ApiError::too_old_resource_version(at, store.compacted_revision()),
            });
        }
        store.list(&ListQuery {
            group_resource: &group_resource,
            namespace,
            at,
            after_key: after_key.as_deref(),
            offset,
            limit,
            selectors: &params.selectors,
        })
    };
    let mut metadata = Map::new();
    metadata.insert("resourceVersion".into(), json!(page.rv.to_string()));
    if let Some(last) = &page.next_key {
        let returned = offset + page.items.len();
        metadata.insert(
            "continue".into(),
            json!(encode_continue(page.rv as i64, last, Some(returned))),
        );
        if let Some(remaining) = page.remaining {
            metadata.insert("remainingItemCount".into(), json!(remaining));
        }
    }
    let (kind, api_version) = shape.list_type(resource);
    let metadata = Value::Object(metadata);
    let body = match encoding {
        Encoding::Json => {
            let items: Vec<_> = page
                .items
                .iter()
                .map(|o| list_item(o, resource, shape))
                .collect();
            list_body(&kind, &api_version, &metadata, &items)
        }
        Encoding::Protobuf(message) => {
            protobuf_list_body(&kind, &api_version, &metadata, &page.items, message)?
        }
    };
    Ok(body_response(200, encoding.content_type(), body))
}

/// A protobuf list: the `ListMeta`, then each item's cached message.
fn protobuf_list_body(
    kind: &str,
    api_version: &str,
    metadata: &Value,
    items: &[Arc<Obj>],
    message: &'static Message,
) -> Result<Bytes, ApiError> {
    let list_meta = encode_message(metadata, &messages::LIST_META).map_err(|error| {
        ApiError::new(
            500,
            "InternalError",
            format!("Internal error occurred: unable to encode the list metadata: {error}"),
        )
    })?;
    let items = items
        .iter()
        .map(|obj| obj.protobuf(message))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Bytes::from(encode_list(
        api_version,
        kind,
        &list_meta,
        items.iter().map(|item| &item[..]),
    )))
}

fn list_body(
    kind: &str,
    api_version: &str,
    metadata: &Value,
    items: &[(&'static [u8], Bytes)],
) -> Bytes {
    let size = items
        .iter()
        .map(|(head, rest)| head.len() + rest.len() + 1)
        .sum::<usize>()
        + 256;
    let mut out = BytesMut::with_capacity(size);
    out.put_slice(br#"{"kind":"#);
    out.put_slice(&to_bytes(&json!(kind)));
    out.put_slice(br#","apiVersion":"#);
    out.put_slice(&to_bytes(&json!(api_version)));
    out.put_slice(br#","metadata":"#);
    out.put_slice(&to_bytes(metadata));
    out.put_slice(br#","items":["#);
    for (i, (head, rest)) in items.iter().enumerate() {
        if i > 0 {
            out.put_u8(b',');
        }
        out.put_slice(head);
        out.put_slice(rest);
    }
    out.put_slice(b"]}");
    out.freeze()
}

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

fn meta_str<'a>(object: &'a Value, field: &str) -> &'a str {
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
    let key = key_for(resource, Some(meta_str(&object, "namespace")), &name);
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
        return Err(ApiError::already_exists(target(resource, &name)));
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
        .ok_or_else(|| ApiError::not_found(target(resource, name)))?;
    let old_rv = old.rv.to_string();
    let requested_rv = meta_str(&new, "resourceVersion");
    if !requested_rv.is_empty() && requested_rv != old_rv {
        return Err(ApiError::conflict(target(resource, name)));
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
    let key = key_for(resource, Some(meta_str(&object, "namespace")), name);
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
    let key = key_for(resource, namespace, name);
    let (stored, gone) = {
        let mut store = shared.store.lock();
        let old = store
            .get(&resource.group_resource(), &key)
            .ok_or_else(|| ApiError::not_found(target(resource, name)))?;
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
    let key = key_for(resource, namespace, name);
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
        .ok_or_else(|| ApiError::not_found(target(resource, name)))?;
    let old_value = old.value();
    for (field, label) in [("uid", "UID"), ("resourceVersion", "ResourceVersion")] {
        if let Some(wanted) = options
            .pointer(&format!("/preconditions/{field}"))
            .and_then(Value::as_str)
        {
            let actual = meta_str(&old_value, field);
            if wanted != actual {
                let mut error = ApiError::conflict(target(resource, name));
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

fn delete_collection(
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
    let (kind, api_version) = (resource.list_kind(), resource.api_version());
    let metadata = json!({ "resourceVersion": rv.to_string() });
    let body = match encoding {
        Encoding::Json => {
            let items: Vec<_> = deleted
                .iter()
                .map(|o| list_item(o, resource, Shape::Full))
                .collect();
            list_body(&kind, &api_version, &metadata, &items)
        }
        Encoding::Protobuf(message) => {
            protobuf_list_body(&kind, &api_version, &metadata, &deleted, message)?
        }
    };
    Ok(body_response(200, encoding.content_type(), body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_tokens_round_trip_and_reject_garbage() {
        let token = encode_continue(42, "ns/pod-7", Some(500));
        assert_eq!(
            decode_continue(&token).expect("valid token"),
            (42, "ns/pod-7".to_owned(), 500)
        );
        let error = decode_continue("not base64!").expect_err("garbage");
        assert_eq!(error.code, 400);
    }

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
