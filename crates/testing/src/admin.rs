//! `/admin/...` endpoints: the fault-injection handle over HTTP and, with the `bench` feature,
//! the bench endpoints (see `crate::bench`), for the standalone binary.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::Response;
use serde_json::json;

use crate::faults::{Fault, Verb};
use crate::listener::{restart_listener, stop_listener};
use crate::response::{ResponseBody, body_response};
use crate::shared::Shared;
use crate::status::ApiError;
use crate::wire::to_bytes;

fn verb_named(name: &str) -> Option<Verb> {
    [
        Verb::Get,
        Verb::List,
        Verb::Watch,
        Verb::Create,
        Verb::Update,
        Verb::Patch,
        Verb::Delete,
        Verb::DeleteCollection,
    ]
    .into_iter()
    .find(|v| v.as_str() == name)
}

fn number(query: &HashMap<String, String>, name: &str) -> Result<Option<u64>, ApiError> {
    query
        .get(name)
        .map(|raw| {
            raw.parse().map_err(|_| {
                ApiError::bad_request(format!("{name} must be a non-negative integer"))
            })
        })
        .transpose()
}

fn done() -> Response<ResponseBody> {
    body_response(
        200,
        "application/json",
        Bytes::from_static(b"{\"ok\":true}"),
    )
}

/// Serves one admin request.
pub(crate) async fn handle(
    shared: &Arc<Shared>,
    path: &[&str],
    query: &HashMap<String, String>,
    body: &Bytes,
) -> Result<Response<ResponseBody>, ApiError> {
    let faults = &shared.faults;
    match path {
        ["requests"] => {
            let counts: Vec<_> = faults
                .request_counts()
                .into_iter()
                .map(|(verb, resource, count)| json!({ "verb": verb.as_str(), "resource": resource, "count": count }))
                .collect();
            Ok(body_response(
                200,
                "application/json",
                to_bytes(&json!(counts)),
            ))
        }
        #[cfg(feature = "bench")]
        ["bench", "update"] => crate::bench::update(shared, query),
        #[cfg(feature = "bench")]
        ["bench", "relist"] => crate::bench::relist(shared, query).await,
        #[cfg(feature = "bench")]
        ["bench", "checksum"] => crate::bench::server_checksum(shared, query),
        #[cfg(feature = "bench")]
        ["content-types"] => Ok(crate::bench::content_types(shared)),
        ["compact"] => {
            shared.store.lock().compact_all();
            Ok(done())
        }
        ["faults", "clear"] => {
            faults.clear();
            Ok(done())
        }
        ["faults", "close-watches"] => {
            faults.close_watches();
            Ok(done())
        }
        ["faults", "unknown-event"] => {
            faults.inject_watch_line(
                r#"{"type":"SURPRISE","object":{"kind":"Status","apiVersion":"v1","metadata":{}}}"#,
            );
            Ok(done())
        }
        ["faults", "watch-line"] => {
            faults.inject_watch_line(String::from_utf8_lossy(body).trim_end().to_owned());
            Ok(done())
        }
        ["faults", "delay"] => {
            let ms = number(query, "ms")?.unwrap_or(0);
            faults.set_delay((ms > 0).then(|| Duration::from_millis(ms)));
            Ok(done())
        }
        ["faults", "status"] => {
            let code = number(query, "code")?
                .and_then(|c| u16::try_from(c).ok())
                .ok_or_else(|| ApiError::bad_request("code is required"))?;
            let mut fault = Fault::status(code);
            if let Some(verb) = query.get("verb") {
                fault =
                    fault
                        .verb(verb_named(verb).ok_or_else(|| {
                            ApiError::bad_request(format!("unknown verb {verb}"))
                        })?);
            }
            if let Some(resource) = query.get("resource") {
                fault = fault.resource(resource);
            }
            if let Some(times) = number(query, "times")? {
                fault = fault.times(usize::try_from(times).unwrap_or(usize::MAX));
            }
            if let Some(seconds) = number(query, "retryAfter")? {
                fault = fault.retry_after(seconds);
            }
            faults.inject(fault);
            Ok(done())
        }
        ["faults", "outage"] => {
            let ms = number(query, "ms")?.unwrap_or(1000);
            let shared = shared.clone();
            tokio::spawn(async move {
                // Let this response reach the caller before its own connection is cut.
                tokio::time::sleep(Duration::from_millis(50)).await;
                stop_listener(&shared).await;
                tokio::time::sleep(Duration::from_millis(ms)).await;
                if let Err(error) = restart_listener(&shared).await {
                    tracing::error!(%error, "could not listen again after an outage");
                }
            });
            Ok(done())
        }
        _ => Err(ApiError::unknown_path()),
    }
}
