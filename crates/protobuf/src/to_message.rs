//! Any `Serialize` value in its JSON shape to protobuf, with no JSON tree in between: what a
//! compact cache encodes each object with.
//!
//! [`encode_message`](crate::encode_message) walks a `serde_json::Value`; building that tree
//! costs more than the encoding itself. Here serde's calls are followed straight onto the wire:
//! a struct's fields are looked up by JSON name in the message table, and nested messages are
//! written in place with their length filled in afterwards.

mod serializers;

use std::fmt;

use serde::{Serialize, ser};

use crate::{
    Error,
    schema::{Field, Message, Shape, Ty},
    time,
    wire::Writer,
};

impl ser::Error for Error {
    fn custom<T: fmt::Display>(message: T) -> Self {
        Error::Custom(message.to_string())
    }
}

/// Encodes `value`, which serializes in its JSON shape (a k8s-openapi struct, a
/// `serde_json::Value`), as the protobuf message `message`: the fields its JSON holds, as
/// [`encode_message`](crate::encode_message) writes them, without building the JSON.
///
/// Keys the table does not name are dropped; `None` and `null` mean absent. Unlike
/// `encode_message`, which writes what kube-apiserver writes, a field JSON leaves out is not
/// written as its zero value: what a cache keeps is only what the object holds.
///
/// # Errors
///
/// [`Error::Custom`] naming the field when a value does not fit its type.
pub fn to_message<T: Serialize + ?Sized>(
    value: &T,
    message: &'static Message,
) -> Result<Vec<u8>, Error> {
    let mut writer = Writer::default();
    value.serialize(MessageSer {
        writer: &mut writer,
        message,
    })?;
    Ok(writer.buf)
}

/// Writes field `number` as a nested message that `write` fills in, in place: a one-byte
/// length is reserved and widened afterwards when the message is longer.
fn nested(
    writer: &mut Writer,
    number: u32,
    write: impl FnOnce(&mut Writer) -> Result<(), Error>,
) -> Result<(), Error> {
    let at = open(writer, number);
    write(writer)?;
    close(writer, at);
    Ok(())
}

/// Starts field `number` as a nested message: its tag and a one-byte length to fill in by
/// [`close`]; returns where that length is.
fn open(writer: &mut Writer, number: u32) -> usize {
    writer.tag(number, 2);
    writer.buf.push(0);
    writer.buf.len() - 1
}

/// Writes one value of type `ty` as field `number`.
fn write_one<T: Serialize + ?Sized>(
    writer: &mut Writer,
    number: u32,
    ty: Ty,
    value: &T,
) -> Result<(), Error> {
    match ty {
        // Raw JSON on the wire: the value's own JSON.
        Ty::FieldsV1 | Ty::RawExtension => {
            let bytes = serde_json::to_vec(value).map_err(Error::custom)?;
            if bytes == b"null" {
                return Ok(());
            }
            nested(writer, number, |raw| {
                raw.bytes_field(1, &bytes);
                Ok(())
            })
        }
        _ => value.serialize(ValueSer { writer, number, ty }),
    }
}

/// Where a JSON key of `message` goes: the field, and the inlined fields on the way to it.
fn find(message: &'static Message, key: &str, path: &mut Vec<u32>) -> Option<&'static Field> {
    let fields: &'static [Field] = message.fields;
    if let Some(field) = fields
        .iter()
        .find(|field| !matches!(field.shape, Shape::Inline) && field.name == key)
    {
        return Some(field);
    }
    for field in fields {
        if let (Shape::Inline, Ty::Message(inner)) = (field.shape, field.ty) {
            path.push(field.number);
            if let Some(found) = find(inner, key, path) {
                return Some(found);
            }
            path.pop();
        }
    }
    None
}

/// Writes `value` under `key` of `message`; a key the table does not name is dropped. A key of
/// an inlined struct is written as an occurrence of the inlined message holding that key alone,
/// which a decoder merges into the same struct.
fn write_key<T: Serialize + ?Sized>(
    writer: &mut Writer,
    message: &'static Message,
    key: &str,
    value: &T,
) -> Result<(), Error> {
    let mut path = Vec::new();
    let Some(field) = find(message, key, &mut path) else {
        return Ok(());
    };
    write_path(writer, &path, field, value)
        .map_err(|error| Error::custom(format_args!("{}.{key}: {error}", message.name)))
}

fn write_path<T: Serialize + ?Sized>(
    writer: &mut Writer,
    path: &[u32],
    field: &'static Field,
    value: &T,
) -> Result<(), Error> {
    match path.split_first() {
        Some((first, rest)) => nested(writer, *first, |inner| {
            write_path(inner, rest, field, value)
        }),
        None => match field.shape {
            Shape::Single | Shape::Inline => write_one(writer, field.number, field.ty, value),
            Shape::Repeated => value.serialize(SeqSer {
                writer,
                number: field.number,
                ty: field.ty,
            }),
            Shape::Map(key_ty) => value.serialize(MapFieldSer {
                writer,
                number: field.number,
                key_ty,
                ty: field.ty,
            }),
        },
    }
}

/// Serializes a struct or map as the fields of `message`.
struct MessageSer<'w> {
    writer: &'w mut Writer,
    message: &'static Message,
}

/// The fields of one message, as serde hands them over.
struct MessageFields<'w> {
    writer: &'w mut Writer,
    message: &'static Message,
    key: Option<String>,
}

impl ser::SerializeStruct for MessageFields<'_> {
    type Ok = ();
    type Error = Error;

    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        write_key(self.writer, self.message, key, value)
    }

    fn end(self) -> Result<(), Error> {
        Ok(())
    }
}

impl ser::SerializeMap for MessageFields<'_> {
    type Ok = ();
    type Error = Error;

    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Error> {
        self.key = Some(key.serialize(KeySer)?);
        Ok(())
    }

    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        let key = take_key(&mut self.key)?;
        write_key(self.writer, self.message, &key, value)
    }

    fn end(self) -> Result<(), Error> {
        Ok(())
    }
}

/// A repeated field: one entry per element.
struct SeqSer<'w> {
    writer: &'w mut Writer,
    number: u32,
    ty: Ty,
}

impl ser::SerializeSeq for SeqSer<'_> {
    type Ok = ();
    type Error = Error;

    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        write_one(self.writer, self.number, self.ty, value)
    }

    fn end(self) -> Result<(), Error> {
        Ok(())
    }
}

/// A map field: one `{key = 1, value = 2}` entry per pair.
struct MapFieldSer<'w> {
    writer: &'w mut Writer,
    number: u32,
    key_ty: Ty,
    ty: Ty,
}

impl MapFieldSer<'_> {
    /// Writes one `{key = 1, value = 2}` entry.
    fn entry<K: Serialize + ?Sized, V: Serialize + ?Sized>(
        &mut self,
        key: &K,
        value: &V,
    ) -> Result<(), Error> {
        let (number, key_ty, ty) = (self.number, self.key_ty, self.ty);
        nested(self.writer, number, |entry| {
            write_one(entry, 1, key_ty, key)?;
            write_one(entry, 2, ty, value)
        })
    }
}

struct MapEntries<'w> {
    field: MapFieldSer<'w>,
    key: Option<String>,
}

/// The key `serialize_key` kept for `serialize_value`.
fn take_key(key: &mut Option<String>) -> Result<String, Error> {
    key.take()
        .ok_or_else(|| Error::custom("a map value without its key"))
}

impl ser::SerializeMap for MapEntries<'_> {
    type Ok = ();
    type Error = Error;

    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Error> {
        self.key = Some(key.serialize(KeySer)?);
        Ok(())
    }

    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        let key = take_key(&mut self.key)?;
        self.field.entry(key.as_str(), value)
    }

    /// Both halves at once (how maps serialize themselves): the key goes to the wire without
    /// being copied into a `String` first.
    fn serialize_entry<K: Serialize + ?Sized, V: Serialize + ?Sized>(
        &mut self,
        key: &K,
        value: &V,
    ) -> Result<(), Error> {
        self.field.entry(key, value)
    }

    fn end(self) -> Result<(), Error> {
        Ok(())
    }
}

/// A map key: a string.
struct KeySer;

/// A `StringList` value: `{repeated items = 1}`.
struct StringItems<'w> {
    writer: &'w mut Writer,
}

impl ser::SerializeSeq for StringItems<'_> {
    type Ok = ();
    type Error = Error;

    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        let text = value.serialize(KeySer)?;
        self.writer.bytes_field(1, text.as_bytes());
        Ok(())
    }

    fn end(self) -> Result<(), Error> {
        Ok(())
    }
}

/// One value of type `ty`, written as field `number`.
struct ValueSer<'w> {
    writer: &'w mut Writer,
    number: u32,
    ty: Ty,
}

impl ValueSer<'_> {
    fn integer(self, value: u64) -> Result<(), Error> {
        match self.ty {
            // Negative numbers travel sign-extended to 64 bits, as Go writes them.
            Ty::Int32 | Ty::Int64 | Ty::Uint32 | Ty::Uint64 => {
                self.writer.varint_field(self.number, value);
                Ok(())
            }
            Ty::Double | Ty::Float => self.float(value as i64 as f64),
            Ty::Quantity => self.text(&(value as i64).to_string()),
            Ty::IntOrString => nested(self.writer, self.number, |nested| {
                nested.varint_field(1, 0);
                nested.varint_field(2, value);
                nested.bytes_field(3, b"");
                Ok(())
            }),
            _ => Err(self.mismatch("an integer")),
        }
    }

    fn float(self, value: f64) -> Result<(), Error> {
        match self.ty {
            Ty::Double => {
                self.writer.tag(self.number, 1);
                self.writer
                    .buf
                    .extend_from_slice(&value.to_bits().to_le_bytes());
                Ok(())
            }
            Ty::Float => {
                self.writer.tag(self.number, 5);
                self.writer
                    .buf
                    .extend_from_slice(&(value as f32).to_bits().to_le_bytes());
                Ok(())
            }
            Ty::Int32 | Ty::Int64 | Ty::Uint32 | Ty::Uint64 if value.fract() == 0.0 => {
                self.writer.varint_field(self.number, value as i64 as u64);
                Ok(())
            }
            Ty::Quantity => {
                let number = serde_json::Number::from_f64(value)
                    .ok_or_else(|| Error::custom("a quantity that is not a finite number"))?;
                self.text(&number.to_string())
            }
            _ => Err(self.mismatch("a number")),
        }
    }

    fn text(self, text: &str) -> Result<(), Error> {
        write_text(self.writer, self.number, self.ty, text)
    }

    fn mismatch(&self, found: &str) -> Error {
        Error::custom(format_args!("expected {:?}, found {found}", self.ty))
    }
}

/// Writes `text`, a JSON string, as field `number` of type `ty`: a string, base64 bytes, a time,
/// a Go duration, a quantity or the string side of an int-or-string.
pub(crate) fn write_text(
    writer: &mut Writer,
    number: u32,
    ty: Ty,
    text: &str,
) -> Result<(), Error> {
    match ty {
        Ty::String => writer.bytes_field(number, text.as_bytes()),
        Ty::Bytes => {
            let bytes = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, text)
                .map_err(|error| Error::custom(format_args!("invalid base64: {error}")))?;
            writer.bytes_field(number, &bytes);
        }
        Ty::Time | Ty::MicroTime => {
            let (seconds, nanos) = time::parse_rfc3339(text)?;
            nested(writer, number, |timestamp| {
                // Go's Timestamp is a message of two value fields: both always written.
                timestamp.varint_field(1, seconds as u64);
                timestamp.varint_field(2, nanos as u64);
                Ok(())
            })?;
        }
        Ty::Duration => {
            let nanos = time::parse_go_duration(text)?;
            nested(writer, number, |duration| {
                duration.varint_field(1, nanos as u64);
                Ok(())
            })?;
        }
        Ty::Quantity => nested(writer, number, |quantity| {
            quantity.bytes_field(1, text.as_bytes());
            Ok(())
        })?,
        Ty::IntOrString => nested(writer, number, |nested| {
            nested.varint_field(1, 1);
            nested.varint_field(2, 0);
            nested.bytes_field(3, text.as_bytes());
            Ok(())
        })?,
        _ => {
            return Err(Error::custom(format_args!(
                "expected {ty:?}, found a string"
            )));
        }
    }
    Ok(())
}

/// Fills in the one-byte length reserved at `at` once the nested message is written, widening
/// it when the message is longer.
fn close(writer: &mut Writer, at: usize) {
    let len = writer.buf.len() - at - 1;
    if len < 0x80 {
        writer.buf[at] = len as u8;
    } else {
        let mut prefix = Writer::default();
        prefix.varint(len as u64);
        writer.buf.splice(at..=at, prefix.buf);
    }
}

/// A nested message's fields, its length filled in at the end.
struct NestedFields<'w> {
    fields: MessageFields<'w>,
    at: usize,
}

impl ser::SerializeStruct for NestedFields<'_> {
    type Ok = ();
    type Error = Error;

    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        ser::SerializeStruct::serialize_field(&mut self.fields, key, value)
    }

    fn end(self) -> Result<(), Error> {
        close(self.fields.writer, self.at);
        Ok(())
    }
}

impl ser::SerializeMap for NestedFields<'_> {
    type Ok = ();
    type Error = Error;

    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Error> {
        ser::SerializeMap::serialize_key(&mut self.fields, key)
    }

    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        ser::SerializeMap::serialize_value(&mut self.fields, value)
    }

    fn end(self) -> Result<(), Error> {
        close(self.fields.writer, self.at);
        Ok(())
    }
}

/// A `StringList`'s items, its length filled in at the end.
struct StringItemsOrNone<'w> {
    items: StringItems<'w>,
    at: usize,
}

impl ser::SerializeSeq for StringItemsOrNone<'_> {
    type Ok = ();
    type Error = Error;

    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        ser::SerializeSeq::serialize_element(&mut self.items, value)
    }

    fn end(self) -> Result<(), Error> {
        close(self.items.writer, self.at);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::{
        DecodeOptions, Envelope, encode_message, encode_object, from_message, message_for,
        ser::encode_present,
    };

    use super::to_message;

    fn pod() -> serde_json::Value {
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": { "name": "web-0", "labels": { "app": "web" },
                "creationTimestamp": "2026-01-01T00:00:01Z" },
            "spec": {
                "containers": [{ "name": "web", "image": "nginx",
                    "resources": { "limits": { "cpu": "500m" } },
                    "ports": [{ "containerPort": 80 }] }],
                "volumes": [{ "name": "config", "configMap": { "name": "web-config" } }],
            },
            "status": { "phase": "Running" },
        })
    }

    #[test]
    fn a_json_tree_encodes_to_what_encode_message_makes_of_it() {
        let message = message_for("v1", "Pod").expect("a Pod table");
        let direct = to_message(&pod(), message).expect("encodes");
        let envelope = encode_object(&pod()).expect("encodes");
        let via_tree = Envelope::parse(&envelope)
            .expect("an envelope")
            .raw
            .to_vec();
        assert_eq!(via_tree, encode_message(&pod(), message).expect("encodes"));
        let decode = |bytes: &[u8]| -> serde_json::Value {
            from_message(bytes, message, DecodeOptions::default()).expect("decodes")
        };
        assert_eq!(decode(&direct), decode(&via_tree));
        // The inlined volume source and its inlined reference travel.
        assert_eq!(
            decode(&direct)["spec"]["volumes"][0]["configMap"]["name"],
            "web-config"
        );
    }

    #[test]
    fn nested_lengths_on_either_side_of_each_varint_width_are_written_minimal() {
        let message = message_for("v1", "ConfigMap").expect("a ConfigMap table");
        // The entry's own bytes, the value's length and metadata's length each cross 128 and
        // 16,384 somewhere in these sizes; one large value nests a widened length in another.
        let sizes = [0, 1, 100]
            .into_iter()
            .chain(118..=132)
            .chain(16_360..=16_390)
            .chain([40_000, 2_100_000]);
        for size in sizes {
            let config = json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": { "name": "settings", "annotations": { "note": "n".repeat(size) } },
                "data": { "key": "v".repeat(size) },
            });
            let direct = to_message(&config, message).expect("encodes");
            // The same fields in another order: equal lengths mean no length took a byte more
            // than it needs.
            assert_eq!(
                direct.len(),
                encode_present(&config, message).expect("encodes").len(),
                "annotation and value of {size} bytes"
            );
            let back: serde_json::Value =
                from_message(&direct, message, DecodeOptions::default()).expect("decodes");
            assert_eq!(back["data"], config["data"], "{size} bytes");
            assert_eq!(
                back["metadata"]["annotations"],
                config["metadata"]["annotations"]
            );
        }
    }

    #[test]
    fn a_value_of_the_wrong_type_is_an_error_naming_its_field() {
        let message = message_for("v1", "Pod").expect("a Pod table");
        let mut bad = pod();
        bad["spec"]["containers"][0]["ports"][0]["containerPort"] = json!("eighty");
        let error = to_message(&bad, message)
            .expect_err("a string port")
            .to_string();
        assert!(error.contains("containerPort"), "{error}");
    }
}
