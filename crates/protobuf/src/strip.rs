//! [`without_managed_fields`]: a message's bytes with `metadata.managedFields` cut out, for
//! keeping what a decode that dropped them made without encoding the object again.

use crate::{
    Error, Message, messages,
    wire::{Reader, WireValue, Writer},
};

/// `message`, a protobuf message of type `table`, with every `metadata.managedFields` entry cut
/// out and the rest byte for byte as it was (each `metadata` written again with its new
/// length).
///
/// Decoding the result with [`DecodeOptions::default`](crate::DecodeOptions::default) gives
/// what decoding `message` with
/// [`drop_managed_fields`](crate::DecodeOptions::drop_managed_fields) gives: a cache that holds
/// objects encoded can keep these bytes for an object decoded that way.
///
/// `Ok(None)` when `table` has no `metadata` field of type `ObjectMeta`.
///
/// # Errors
///
/// When `message` is not well-formed protobuf.
///
/// ```
/// use kinformer_protobuf::{DecodeOptions, encode_message, without_managed_fields};
/// use serde_json::json;
///
/// let pod = json!({
///     "metadata": { "name": "web-0", "managedFields": [{ "manager": "kubectl" }] },
///     "spec": { "containers": [{ "name": "web", "image": "nginx" }] },
/// });
/// let table = kinformer_protobuf::message_for("v1", "Pod").expect("Pod has a message");
/// let bytes = encode_message(&pod, table)?;
/// let cut = without_managed_fields(&bytes, table)?.expect("Pod has metadata");
/// assert!(cut.len() < bytes.len());
/// let read: serde_json::Value =
///     kinformer_protobuf::from_message(&cut, table, DecodeOptions::default())?;
/// // Go writes a zero creationTimestamp, which reads as JSON's null.
/// assert_eq!(read["metadata"], json!({ "name": "web-0", "creationTimestamp": null }));
/// # Ok::<(), kinformer_protobuf::Error>(())
/// ```
pub fn without_managed_fields(
    message: &[u8],
    table: &'static Message,
) -> Result<Option<Vec<u8>>, Error> {
    let Some(metadata) = table.field_number("metadata") else {
        return Ok(None);
    };
    let object_meta = &messages::OBJECT_META;
    if !table
        .field_message("metadata")
        .is_some_and(|meta| std::ptr::eq(meta, object_meta))
    {
        return Ok(None);
    }
    let managed_fields = object_meta
        .field_number("managedFields")
        .ok_or(Error::Malformed("ObjectMeta without managedFields"))?;
    let mut out = Writer {
        buf: Vec::with_capacity(message.len()),
    };
    copy_fields(message, &mut out, |number, value, out| {
        if number != metadata {
            return Ok(false);
        }
        let mut meta = Writer {
            buf: Vec::with_capacity(value.len()),
        };
        copy_fields(
            value,
            &mut meta,
            |number, _, _| Ok(number == managed_fields),
        )?;
        out.bytes_field(metadata, &meta.buf);
        Ok(true)
    })?;
    Ok(Some(out.buf))
}

/// Copies each field of `message` to `out` as it is, except those `handle` takes (returning
/// `true`), which it writes itself or leaves out. `handle` is given the bytes of a
/// length-delimited field, and is not called for other fields.
fn copy_fields<'de>(
    message: &'de [u8],
    out: &mut Writer,
    mut handle: impl FnMut(u32, &'de [u8], &mut Writer) -> Result<bool, Error>,
) -> Result<(), Error> {
    let mut reader = Reader::new(message);
    loop {
        let start = message.len() - reader.remaining().len();
        let Some((number, value)) = reader.field()? else {
            return Ok(());
        };
        let end = message.len() - reader.remaining().len();
        let taken = match value {
            WireValue::Bytes(bytes) => handle(number, bytes, out)?,
            _ => false,
        };
        if !taken {
            out.buf.extend_from_slice(&message[start..end]);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::{DecodeOptions, encode_message, from_message, message_for};

    fn pod() -> Value {
        json!({
            "metadata": {
                "name": "web-0", "namespace": "prod", "resourceVersion": "7",
                "labels": { "app": "web" },
                "managedFields": [
                    { "manager": "kubectl", "operation": "Apply", "fieldsType": "FieldsV1",
                      "fieldsV1": { "f:metadata": { "f:labels": { "f:app": {} } } } },
                    { "manager": "kubelet", "operation": "Update", "subresource": "status" },
                ],
                "finalizers": ["example.com/keep"],
            },
            "spec": { "containers": [{ "name": "web", "image": "nginx:1.27" }] },
            "status": { "phase": "Running" },
        })
    }

    #[test]
    fn the_cut_reads_as_a_decode_that_drops_managed_fields() {
        let table = message_for("v1", "Pod").expect("Pod");
        let bytes = encode_message(&pod(), table).expect("encodes");
        let cut = without_managed_fields(&bytes, table)
            .expect("well-formed")
            .expect("Pod has metadata");
        let dropped: Value = from_message(
            &bytes,
            table,
            DecodeOptions::default().drop_managed_fields(),
        )
        .expect("decodes");
        let read: Value = from_message(&cut, table, DecodeOptions::default()).expect("decodes");
        assert_eq!(read, dropped);
        assert!(read["metadata"].get("managedFields").is_none());
        assert_eq!(read["metadata"]["finalizers"], json!(["example.com/keep"]));
        // Nothing else moved: without managedFields to cut, the bytes come back as they were.
        assert_eq!(
            without_managed_fields(&cut, table).expect("well-formed"),
            Some(cut.clone())
        );
    }

    #[test]
    fn a_message_without_object_meta_is_left_alone_and_a_broken_one_refused() {
        let status: Value = json!({ "status": "Failure", "message": "gone", "code": 410 });
        let bytes = encode_message(&status, &messages::STATUS).expect("encodes");
        assert_eq!(
            without_managed_fields(&bytes, &messages::STATUS).expect("well-formed"),
            None
        );
        let table = message_for("v1", "Pod").expect("Pod");
        let bytes = encode_message(&pod(), table).expect("encodes");
        assert!(without_managed_fields(&bytes[..bytes.len() - 3], table).is_err());
    }
}
