//! Request routing: a request's path, method and parameters to a verb on a resource, and
//! the verb to the module that serves it (discovery, list, watch, the writes).

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use http::{Method, Request, Response, header};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use serde_json::Value;

use crate::discovery::{api_group, api_groups, core_versions, resource_list, version_info};
use crate::faults::{Faults, Verb};
use crate::list::{ListParams, list};
use crate::resources::ResourceType;
use crate::response::{
    JSON, Reply, ResponseBody, body_response, object_response, status_response, value_response,
};
use crate::shared::Shared;
use crate::status::{self, ApiError};
use crate::watch;
use crate::wire::{Encoding, Shape, shape_of};
use crate::write::{
    Deleted, UpdateKind, create, delete, delete_collection, meta_str, patch, update,
};

/// [`handle`], boxed: the [`Serve`](crate::shared::Serve) the server installs in [`Shared`].
pub(crate) fn serve(
    shared: Arc<Shared>,
    request: Request<Incoming>,
) -> Pin<Box<dyn Future<Output = Response<ResponseBody>> + Send>> {
    Box::pin(handle(shared, request))
}

async fn handle(shared: Arc<Shared>, request: Request<Incoming>) -> Response<ResponseBody> {
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
    if let Some(fault) = shared.faults.on_request(verb, &label) {
        return Err(ApiError::injected(
            fault.code,
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
            let key = resource.key(namespace.as_deref(), name);
            let obj = shared
                .store
                .lock()
                .get(&resource.group_resource(), &key)
                .ok_or_else(|| ApiError::not_found(resource.target(name)))?;
            object_response(200, &obj, &resource, shape, encoding)
        }
        Verb::List => {
            let params =
                ListParams::parse(&call.query, &resource, shared.config.sharded_list_and_watch)?;
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
            let params =
                ListParams::parse(&call.query, &resource, shared.config.sharded_list_and_watch)?;
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
                    let success = status::delete_success(resource.target(name), uid);
                    let (content_type, body) = encoding.status(&success);
                    Ok(body_response(200, content_type, body))
                }
            }
        }
        Verb::DeleteCollection => {
            let params =
                ListParams::parse(&call.query, &resource, shared.config.sharded_list_and_watch)?;
            // Answered with whole objects whatever the shape asked (as the JSON body is).
            let encoding = Encoding::negotiate(&call.accept, &resource, Shape::Full);
            delete_collection(shared, &resource, namespace.as_deref(), &params, encoding)
        }
    }
}

/// The storage key of a named object; a namespaced object without a namespace is in `default`,
/// as kubectl and kube-client assume.
pub(crate) fn parse_json(body: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
    })
}
