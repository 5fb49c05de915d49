//! Lists: the parameters apiserver accepts and checks, continue tokens, and list bodies in
//! JSON, as tables and in protobuf.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use bytes::{BufMut, Bytes, BytesMut};
use kinformer_protobuf::{LIST_TAIL, Message, encode_list_head, encode_message, messages};
use serde_json::{Map, Value, json};

use crate::object::Obj;
use crate::resources::ResourceType;
use crate::response::{self, ListBody, ListItems, Reply, list_item};
use crate::selector::{FieldSelector, Selectors, parse_labels, parse_shard};
use crate::shared::Shared;
use crate::status::ApiError;
use crate::store::ListQuery;
use crate::wire::{Encoding, Shape, to_bytes};

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
    /// The parameters of a list or watch; `shardSelector` is read only when `shards` (the
    /// server honours it).
    pub(crate) fn parse(
        query: &HashMap<String, String>,
        resource: &ResourceType,
        shards: bool,
    ) -> Result<Self, ApiError> {
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
                labels: parse_labels(&get("labelSelector"))?,
                fields: FieldSelector::parse(&get("fieldSelector"), resource)?,
                shard: parse_shard(query.get("shardSelector").map(String::as_str), shards)?,
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

pub(crate) async fn list(
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
    // kube-apiserver echoes the shard it applied, except where the list type it answers with
    // has no `shardInfo`: a metadata-only list and a custom resource's (unstructured) list.
    if let Some(shard) = &params.selectors.shard
        && shape == Shape::Full
        && !resource.unstructured
    {
        metadata.insert("shardInfo".into(), json!({ "selector": shard.to_string() }));
    }
    list_response(
        resource,
        shape,
        encoding,
        &Value::Object(metadata),
        &page.items,
    )
}

/// A list of `items` with `metadata`, in the shape and encoding a request negotiated, written
/// as it is sent ([`ListBody`]).
pub(crate) fn list_response(
    resource: &ResourceType,
    shape: Shape,
    encoding: Encoding,
    metadata: &Value,
    items: &[Arc<Obj>],
) -> Reply {
    let (kind, api_version) = shape.list_type(resource);
    let body = match encoding {
        Encoding::Json => json_list_body(&kind, &api_version, metadata, resource, shape, items),
        Encoding::Protobuf(message) => {
            protobuf_list_body(&kind, &api_version, metadata, items, message)?
        }
    };
    Ok(response::list_response(encoding.content_type(), body))
}

/// A protobuf list: the `ListMeta`, then each item's cached message.
fn protobuf_list_body(
    kind: &str,
    api_version: &str,
    metadata: &Value,
    items: &[Arc<Obj>],
    message: &'static Message,
) -> Result<ListBody, ApiError> {
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
    let head = encode_list_head(api_version, kind, &list_meta, items.iter().map(Bytes::len));
    Ok(ListBody::new(
        Bytes::from(head),
        ListItems::Protobuf(items),
        LIST_TAIL,
    ))
}

/// A JSON list: its kind, apiVersion and metadata, then each item's cached bytes.
fn json_list_body(
    kind: &str,
    api_version: &str,
    metadata: &Value,
    resource: &ResourceType,
    shape: Shape,
    items: &[Arc<Obj>],
) -> ListBody {
    let items = items
        .iter()
        .map(|obj| list_item(obj, resource, shape))
        .collect();
    let mut head = BytesMut::with_capacity(256);
    head.put_slice(br#"{"kind":"#);
    head.put_slice(&to_bytes(&json!(kind)));
    head.put_slice(br#","apiVersion":"#);
    head.put_slice(&to_bytes(&json!(api_version)));
    head.put_slice(br#","metadata":"#);
    head.put_slice(&to_bytes(metadata));
    head.put_slice(br#","items":["#);
    ListBody::new(head.freeze(), ListItems::Json(items), b"]}")
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
}
