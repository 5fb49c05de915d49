//! `metav1.Status` failures shaped exactly as kube-apiserver writes them.

use serde_json::{Map, Value, json};

/// A request failure, rendered as a `metav1.Status` body with its HTTP code.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ApiError {
    pub(crate) code: u16,
    pub(crate) reason: &'static str,
    pub(crate) message: String,
    pub(crate) details: Option<Value>,
    pub(crate) retry_after_seconds: Option<u64>,
    /// Set on an expired continue token: the token that reads the rest inconsistently.
    pub(crate) continue_token: Option<String>,
}

/// Names the object a Status is about, the way `StatusDetails` does.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Target<'a> {
    pub(crate) group: &'a str,
    /// The resource plural (what apiserver puts in `details.kind` for most errors).
    pub(crate) resource: &'a str,
    pub(crate) name: &'a str,
}

impl Target<'_> {
    /// `pods` or `deployments.apps`, as apiserver prints a group resource.
    fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.resource.to_owned()
        } else {
            format!("{}.{}", self.resource, self.group)
        }
    }

    fn details(&self) -> Value {
        let mut details = Map::new();
        if !self.name.is_empty() {
            details.insert("name".into(), json!(self.name));
        }
        if !self.group.is_empty() {
            details.insert("group".into(), json!(self.group));
        }
        details.insert("kind".into(), json!(self.resource));
        Value::Object(details)
    }
}

impl ApiError {
    pub(crate) fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            details: None,
            retry_after_seconds: None,
            continue_token: None,
        }
    }

    pub(crate) fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    /// The 404 for a path no resource serves.
    pub(crate) fn unknown_path() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
        .with_details(json!({}))
    }

    pub(crate) fn not_found(target: Target<'_>) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} \"{}\" not found", target.qualified(), target.name),
        )
        .with_details(target.details())
    }

    pub(crate) fn already_exists(target: Target<'_>) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{}\" already exists", target.qualified(), target.name),
        )
        .with_details(target.details())
    }

    pub(crate) fn conflict(target: Target<'_>) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{}\": the object has been modified; \
                 please apply your changes to the latest version and try again",
                target.qualified(),
                target.name
            ),
        )
        .with_details(target.details())
    }

    /// A 422 with one field cause; `kind` is the object's Kind, as apiserver reports it.
    pub(crate) fn invalid(
        group: &str,
        kind: &str,
        name: &str,
        field: &str,
        cause_reason: &str,
        detail: &str,
    ) -> Self {
        let qualified_kind = if group.is_empty() {
            kind.to_owned()
        } else {
            format!("{kind}.{group}")
        };
        let mut details = Map::new();
        details.insert("name".into(), json!(name));
        if !group.is_empty() {
            details.insert("group".into(), json!(group));
        }
        details.insert("kind".into(), json!(kind));
        details.insert(
            "causes".into(),
            json!([{ "reason": cause_reason, "message": detail, "field": field }]),
        );
        Self::new(
            422,
            "Invalid",
            format!("{qualified_kind} \"{name}\" is invalid: {field}: {detail}"),
        )
        .with_details(Value::Object(details))
    }

    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    pub(crate) fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(405, "MethodNotAllowed", message)
    }

    pub(crate) fn unsupported_media_type(content_type: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: \
                 application/json-patch+json, application/merge-patch+json, \
                 application/strategic-merge-patch+json (received {content_type})"
            ),
        )
    }

    /// apiserver's `NewResourceExpired`: 410 with reason Expired.
    pub(crate) fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    pub(crate) fn too_old_resource_version(requested: u64, oldest: u64) -> Self {
        Self::expired(format!("too old resource version: {requested} ({oldest})"))
    }

    pub(crate) fn expired_continue(inconsistent_continue: String) -> Self {
        let mut error = Self::expired(
            "The provided continue parameter is too old to display a consistent list result. \
             You can start a new list without the continue parameter, or use the continue token \
             in this response to retrieve the remainder of the results. Continuing with the \
             provided token results in an inconsistent list - objects that were created, \
             modified, or deleted between the time the first chunk was returned and now may \
             show up in the list.",
        );
        error.continue_token = Some(inconsistent_continue);
        error
    }

    /// apiserver's `NewTooLargeResourceVersionError`: a 504 the client may retry.
    pub(crate) fn too_large_resource_version(requested: u64, current: u64) -> Self {
        let mut error = Self::new(
            504,
            "Timeout",
            format!("Timeout: Too large resource version: {requested}, current: {current}"),
        )
        .with_details(json!({
            "causes": [{ "reason": "ResourceVersionTooLarge", "message": "Too large resource version" }],
            "retryAfterSeconds": 1
        }));
        error.retry_after_seconds = Some(1);
        error
    }

    /// A Status for an injected HTTP code, with the reason apiserver pairs with it.
    pub(crate) fn injected(
        code: u16,
        verb: &str,
        resource: &str,
        retry_after: Option<u64>,
    ) -> Self {
        let (reason, message) = match code {
            400 => ("BadRequest", "injected fault: bad request".to_owned()),
            401 => ("Unauthorized", "Unauthorized".to_owned()),
            403 => (
                "Forbidden",
                format!(
                    "{resource} is forbidden: User \"system:anonymous\" cannot {verb} resource \
                     \"{resource}\" (injected fault)"
                ),
            ),
            404 => ("NotFound", "injected fault: not found".to_owned()),
            409 => ("Conflict", "injected fault: conflict".to_owned()),
            410 => (
                "Expired",
                "injected fault: the requested resource version has expired".to_owned(),
            ),
            429 => (
                "TooManyRequests",
                "Too many requests, please try again later. (injected fault)".to_owned(),
            ),
            500 => (
                "InternalError",
                "Internal error occurred: injected fault".to_owned(),
            ),
            503 => (
                "ServiceUnavailable",
                "injected fault: service unavailable".to_owned(),
            ),
            504 => (
                "Timeout",
                "Timeout: request did not complete within the allowed duration (injected fault)"
                    .to_owned(),
            ),
            _ => ("", format!("injected fault: HTTP {code}")),
        };
        let mut error = Self::new(code, reason, message);
        let mut details = Map::new();
        details.insert("kind".into(), json!(resource));
        if let Some(seconds) = retry_after {
            details.insert("retryAfterSeconds".into(), json!(seconds));
        }
        if code == 500 {
            details.insert("causes".into(), json!([{ "message": "injected fault" }]));
        }
        error.details = Some(Value::Object(details));
        error.retry_after_seconds = retry_after;
        error
    }

    /// The Status object itself, as it travels in a response body or an ERROR watch event.
    pub(crate) fn to_status(&self) -> Value {
        let mut metadata = Map::new();
        if let Some(token) = &self.continue_token {
            metadata.insert("continue".into(), json!(token));
        }
        let mut status = Map::new();
        status.insert("kind".into(), json!("Status"));
        status.insert("apiVersion".into(), json!("v1"));
        status.insert("metadata".into(), Value::Object(metadata));
        status.insert("status".into(), json!("Failure"));
        status.insert("message".into(), json!(self.message));
        if !self.reason.is_empty() {
            status.insert("reason".into(), json!(self.reason));
        }
        if let Some(details) = &self.details {
            status.insert("details".into(), details.clone());
        }
        status.insert("code".into(), json!(self.code));
        Value::Object(status)
    }
}

/// The Status apiserver returns for a successful delete of a resource that does not echo the object.
pub(crate) fn delete_success(target: Target<'_>, uid: &str) -> Value {
    let mut details = match target.details() {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    if !uid.is_empty() {
        details.insert("uid".into(), json!(uid));
    }
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": Value::Object(details),
    })
}
