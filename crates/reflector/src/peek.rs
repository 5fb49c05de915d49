//! What undecodable bytes say they are, read as loosely as possible: the kind and name an
//! [`Error::Decode`](crate::Error::Decode) reports instead of the bytes themselves.

use kinformer_protobuf::{DecodeOptions, Envelope, WatchFrame};
use serde::Deserialize;

/// The fields of an object, or of a JSON watch event, that identify it.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Peek {
    #[serde(rename = "apiVersion")]
    api_version: Option<String>,
    kind: Option<String>,
    metadata: Option<PeekMeta>,
    /// A watch event's object.
    object: Option<Box<Peek>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct PeekMeta {
    name: Option<String>,
    namespace: Option<String>,
}

impl Peek {
    fn describe(&self) -> Option<String> {
        if let Some(object) = &self.object {
            return object.describe();
        }
        let kind = self.kind.as_deref()?;
        let mut description = match self.api_version.as_deref() {
            Some(api_version) if !api_version.is_empty() => format!("{api_version}/{kind}"),
            _ => kind.to_owned(),
        };
        if let Some(name) = self.metadata.as_ref().and_then(|meta| meta.name.as_deref()) {
            description.push(' ');
            if let Some(namespace) = self.metadata.as_ref().and_then(|m| m.namespace.as_deref()) {
                description.push_str(namespace);
                description.push('/');
            }
            description.push_str(name);
        }
        Some(description)
    }
}

/// `v1/Secret prod/db` for bytes holding that Secret (JSON, a protobuf envelope, or a JSON or
/// protobuf watch event around it), `None` when they do not say.
pub(crate) fn describe(bytes: &[u8]) -> Option<String> {
    let trimmed = bytes.trim_ascii_start();
    if trimmed.first() == Some(&b'{') {
        return serde_json::from_slice::<Peek>(trimmed).ok()?.describe();
    }
    if let Ok(envelope) = Envelope::parse(bytes) {
        return Some(describe_envelope(&envelope));
    }
    let frame = WatchFrame::parse(bytes).ok()?;
    Some(describe_envelope(&Envelope::parse(frame.object).ok()?))
}

fn describe_envelope(envelope: &Envelope<'_>) -> String {
    let mut peek = Peek {
        api_version: Some(envelope.api_version.to_owned()),
        kind: Some(envelope.kind.to_owned()),
        ..Peek::default()
    };
    // Only metadata is asked for; every other field is skipped on the wire.
    if let Ok(named) = envelope.decode::<Peek>(DecodeOptions::default().drop_managed_fields()) {
        peek.metadata = named.metadata;
    }
    peek.describe().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Secret;
    use kinformer_protobuf::{encode_object, encode_watch_frame};
    use kube_core::ObjectMeta;

    use super::describe;

    #[test]
    fn json_objects_and_events_name_their_object() {
        let secret =
            br#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"db","namespace":"prod"}}"#;
        assert_eq!(describe(secret).as_deref(), Some("v1/Secret prod/db"));
        let event = br#"{"type":"ADDED","object":{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1"}}}"#;
        assert_eq!(describe(event).as_deref(), Some("v1/Node n1"));
        assert_eq!(describe(b"{not json"), None);
        assert_eq!(describe(b"plain text"), None);
    }

    #[test]
    fn protobuf_objects_and_frames_name_their_object() {
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some("db".into()),
                namespace: Some("prod".into()),
                ..ObjectMeta::default()
            },
            ..Secret::default()
        };
        let value = serde_json::to_value(&secret).expect("json");
        let body = encode_object(&value).expect("encodes");
        assert_eq!(describe(&body).as_deref(), Some("v1/Secret prod/db"));
        let frame = encode_watch_frame("ADDED", &body)[4..].to_vec();
        assert_eq!(describe(&frame).as_deref(), Some("v1/Secret prod/db"));
    }
}
