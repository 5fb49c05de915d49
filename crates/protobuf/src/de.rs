//! A serde [`Deserializer`] over protobuf bytes, driven by the generated [`Message`] tables.
//!
//! It presents a message to serde exactly as the JSON form of the same object would look: keys
//! are JSON names, repeated fields are sequences, `map<…>` entries are maps, inlined structs are
//! flattened, and Kubernetes' special types (`Time`, `Quantity`, `IntOrString`, `FieldsV1`...)
//! arrive in their JSON shape. So any `Deserialize` type that reads the JSON form, a
//! k8s-openapi struct or a user's slim projection, reads protobuf too, and fields the type does
//! not name are skipped without being decoded.
//!
//! It reads every input as protobuf (and Go's generated decoders) do: a repeated or map field's
//! entries are joined wherever in the message they appear, a non-repeated message that appears
//! twice is merged, and a scalar's last occurrence wins, so each field reaches serde once. Go
//! writes every field once, in one run, and such a message streams to serde as it is read; a
//! message whose fields come in any other order is first gathered field by field.

mod entries;
mod fields;

use std::borrow::Cow;

use serde::de::{
    self, Deserialize, Deserializer, IntoDeserializer, Visitor, value::BorrowedStrDeserializer,
};

use self::{entries::RepeatedAccess, fields::FieldAccess};
use crate::{
    Error, quantity,
    schema::{Message, Ty},
    time,
    wire::{Reader, WireValue, go_text},
};

/// Choices that change what a decode keeps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DecodeOptions {
    /// Skip `metadata.managedFields` on the wire.
    pub(crate) drop_managed_fields: bool,
    /// `(apiVersion, kind)` to present as the outermost message's first two fields.
    pub(crate) type_meta: Option<(&'static str, &'static str)>,
}

impl DecodeOptions {
    /// Skips `metadata.managedFields` on the wire: never decoded, never allocated. The
    /// server-side-apply bookkeeping is often the largest part of an object and few controllers
    /// read it.
    #[must_use]
    pub fn drop_managed_fields(mut self) -> Self {
        self.drop_managed_fields = true;
        self
    }

    /// Presents `api_version` and `kind` to the type as the outermost message's first two
    /// fields. A protobuf message never carries its own type (the envelope does), but the JSON
    /// items of some lists do: a metadata-only list's items each say `meta.k8s.io/v1`
    /// `PartialObjectMetadata`, and a type that keeps them (kube's `PartialObjectMeta`) should
    /// read the same from either format.
    #[must_use]
    pub fn with_type_meta(mut self, api_version: &'static str, kind: &'static str) -> Self {
        self.type_meta = Some((api_version, kind));
        self
    }
}

/// Decodes `bytes`, one `message` (without the `k8s\0` envelope), into `T`.
///
/// # Errors
///
/// [`Error`] when the bytes are not valid protobuf or `T` refuses what they hold.
pub fn from_message<'de, T>(
    bytes: &'de [u8],
    message: &'static Message,
    options: DecodeOptions,
) -> Result<T, Error>
where
    T: de::Deserialize<'de>,
{
    T::deserialize(ValueDeserializer {
        ty: Ty::Message(message),
        value: WireValue::Bytes(bytes),
        options,
    })
    .map_err(|error| error.located(bytes, message))
}

/// What `$read` makes of the embedded JSON document `$json` (bound to `$de`, a serde_json
/// deserializer), which must be one document with nothing after it but whitespace, as Go's JSON
/// encoder requires when it writes the object. A document that is not UTF-8 is read as Go's
/// JSON shows it ([`go_text`]), through a `serde_json::Value`.
macro_rules! read_embedded {
    ($json:expr, |$de:ident| $read:expr) => {{
        let json: &[u8] = $json;
        let error =
            |error: serde_json::Error| Error::custom(format_args!("embedded JSON: {error}"));
        match go_text(json) {
            Cow::Borrowed(_) => {
                let mut deserializer = serde_json::Deserializer::from_slice(json);
                let value = {
                    let $de = &mut deserializer;
                    $read.map_err(error)?
                };
                deserializer.end().map_err(error)?;
                Ok(value)
            }
            Cow::Owned(text) => {
                let $de: serde_json::Value = serde_json::from_str(&text).map_err(error)?;
                $read.map_err(error)
            }
        }
    }};
}

/// One wire value, typed by the schema.
struct ValueDeserializer<'de> {
    ty: Ty,
    value: WireValue<'de>,
    options: DecodeOptions,
}

impl<'de> ValueDeserializer<'de> {
    fn bytes(&self) -> Result<&'de [u8], Error> {
        self.value.bytes(self.ty.name())
    }

    /// Whether JSON would hold `null` here: a zero `Time` (protobuf writes it empty) or an
    /// embedded JSON document that is absent.
    fn is_null(&self) -> bool {
        matches!(
            self.ty,
            Ty::Time | Ty::MicroTime | Ty::FieldsV1 | Ty::RawExtension
        ) && is_empty_message(self.value)
    }

    /// What `read` makes of this value of a type that [`merges`], as its one occurrence.
    fn special<T>(
        &self,
        read: impl FnOnce(MergedValue<'_, 'de>) -> Result<T, Error>,
    ) -> Result<T, Error> {
        read(MergedValue {
            ty: self.ty,
            segments: &[self.bytes()?],
            options: self.options,
        })
    }
}

/// The raw JSON inside a `FieldsV1` or `RawExtension`, merged from `segments`.
fn embedded_json<'de>(segments: &[&'de [u8]]) -> Result<&'de [u8], Error> {
    Ok(last_field(segments, 1)?
        .map(|value| value.bytes("raw JSON"))
        .transpose()?
        .unwrap_or(b"null"))
}

/// A value of one of the types Go decodes as a message and merges when it comes more than
/// once (every special type but `Time`, whose decoder replaces), from its occurrences.
fn visit_special<'de, V: Visitor<'de>>(
    ty: Ty,
    segments: &[&'de [u8]],
    options: DecodeOptions,
    visitor: V,
) -> Result<V::Value, Error> {
    match ty {
        Ty::Duration => {
            let nanos = last_field(segments, 1)?
                .map(|value| value.integer("duration"))
                .transpose()?
                .unwrap_or(0) as i64;
            visitor.visit_string(time::format_go_duration(nanos))
        }
        Ty::Quantity => match quantity::from_segments(segments)? {
            Cow::Borrowed(text) => visitor.visit_borrowed_str(text),
            Cow::Owned(text) => visitor.visit_string(text),
        },
        Ty::IntOrString => match int_or_string_parts_of(segments)? {
            IntOrStringParts::String(text) => visit_text(visitor, text),
            IntOrStringParts::Int(int) => visitor.visit_i32(int),
        },
        Ty::FieldsV1 | Ty::RawExtension => {
            read_embedded!(embedded_json(segments)?, |json| json
                .deserialize_any(visitor))
        }
        Ty::StringList => {
            // `{repeated items = 1}`: every item, wherever it appears.
            let mut items = Vec::new();
            for segment in segments {
                let mut reader = Reader::new(segment);
                while let Some((number, value)) = reader.field()? {
                    if number == 1 {
                        items.push(value);
                    }
                }
            }
            visitor.visit_seq(RepeatedAccess::gathered(items, Ty::String, options))
        }
        _ => Err(Error::Malformed(
            "a merged value of a type that is not merged",
        )),
    }
}

/// Whether Go decodes a single field of `ty` as a message that merges with an earlier
/// occurrence: the special types but `Time` and `MicroTime`, whose decoder replaces.
pub(crate) fn merges(ty: Ty) -> bool {
    matches!(
        ty,
        Ty::Duration
            | Ty::Quantity
            | Ty::IntOrString
            | Ty::FieldsV1
            | Ty::RawExtension
            | Ty::StringList
    )
}

/// A value of a type that [`merges`], from its occurrences: one, or several merged.
pub(super) struct MergedValue<'a, 'de> {
    pub(super) ty: Ty,
    pub(super) segments: &'a [&'de [u8]],
    pub(super) options: DecodeOptions,
}

impl<'de> Deserializer<'de> for MergedValue<'_, 'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visit_special(self.ty, self.segments, self.options, visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let embedded = matches!(self.ty, Ty::FieldsV1 | Ty::RawExtension);
        if embedded && self.segments.iter().all(|segment| segment.is_empty()) {
            visitor.visit_none()
        } else {
            visitor.visit_some(self)
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self.ty {
            Ty::FieldsV1 | Ty::RawExtension => {
                read_embedded!(embedded_json(self.segments)?, |json| {
                    json.deserialize_newtype_struct(name, visitor)
                })
            }
            _ => visitor.visit_newtype_struct(self),
        }
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct seq tuple tuple_struct map struct enum identifier
    }
}

/// Whether `value` is an empty message: what Go writes for a zero `Time` or an absent embedded
/// JSON document, which JSON shows as `null`.
fn is_empty_message(value: WireValue<'_>) -> bool {
    matches!(value, WireValue::Bytes(bytes) if bytes.is_empty())
}

/// The last value of field `number` in the message `bytes` (protobuf's "last one wins").
pub(crate) fn single_field(bytes: &[u8], number: u32) -> Result<Option<WireValue<'_>>, Error> {
    last_field(&[bytes], number)
}

/// The last value of field `number` across `segments`: the occurrences of one message field
/// that came more than once, which protobuf and Go merge, each field's last value winning.
pub(crate) fn last_field<'de>(
    segments: &[&'de [u8]],
    number: u32,
) -> Result<Option<WireValue<'de>>, Error> {
    let mut found = None;
    for segment in segments {
        let mut reader = Reader::new(segment);
        while let Some((field, value)) = reader.field()? {
            if field == number {
                found = Some(value);
            }
        }
    }
    Ok(found)
}

/// `bytes` as text for `visitor`: borrowed when they are UTF-8, else as Go's JSON shows them
/// ([`go_text`]).
fn visit_text<'de, V: Visitor<'de>>(visitor: V, bytes: &'de [u8]) -> Result<V::Value, Error> {
    match go_text(bytes) {
        Cow::Borrowed(text) => visitor.visit_borrowed_str(text),
        Cow::Owned(text) => visitor.visit_string(text),
    }
}

/// What an `IntOrString` holds.
pub(crate) enum IntOrStringParts<'de> {
    Int(i32),
    String(&'de [u8]),
}

/// The `IntOrString` message `{type = 1, intVal = 2, strVal = 3}` as Go's generated decoder
/// reads it: each field's last occurrence wins, and every occurrence of either arm must have
/// its field's wire type, whichever arm `type` picks. A `type` other than 0 (int) or 1
/// (string) is an error, as Go's JSON encoder makes it.
pub(crate) fn int_or_string_parts(bytes: &[u8]) -> Result<IntOrStringParts<'_>, Error> {
    int_or_string_parts_of(&[bytes])
}

/// [`int_or_string_parts`] of an `IntOrString` that came more than once: its occurrences
/// merged, as Go merges them, each of its fields' last value winning.
pub(crate) fn int_or_string_parts_of<'de>(
    segments: &[&'de [u8]],
) -> Result<IntOrStringParts<'de>, Error> {
    let (mut kind, mut int, mut text): (u64, i32, &[u8]) = (0, 0, b"");
    for segment in segments {
        let mut reader = Reader::new(segment);
        while let Some((number, value)) = reader.field()? {
            match number {
                1 => kind = value.integer("type")?,
                // An int32 on the wire: a negative one is sign-extended, truncation decodes it.
                2 => int = value.integer("intVal")? as i32,
                3 => text = value.bytes("strVal")?,
                _ => {}
            }
        }
    }
    match kind {
        0 => Ok(IntOrStringParts::Int(int)),
        1 => Ok(IntOrStringParts::String(text)),
        _ => Err(Error::Malformed(
            "an IntOrString whose type is neither 0 (int) nor 1 (string)",
        )),
    }
}

impl<'de> Deserializer<'de> for ValueDeserializer<'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.ty {
            Ty::Bool => visitor.visit_bool(self.value.integer("bool")? != 0),
            // Negative int32s travel as sign-extended 64-bit varints: truncation is the decoding.
            Ty::Int32 => visitor.visit_i32(self.value.integer("int32")? as i32),
            Ty::Int64 => visitor.visit_i64(self.value.integer("int64")? as i64),
            Ty::Uint32 => visitor.visit_u32(self.value.integer("uint32")? as u32),
            Ty::Uint64 => visitor.visit_u64(self.value.integer("uint64")?),
            Ty::Double => visitor.visit_f64(f64::from_bits(self.value.fixed64("double")?)),
            Ty::Float => visitor.visit_f32(f32::from_bits(self.value.fixed32("float")?)),
            Ty::String => visit_text(visitor, self.bytes()?),
            Ty::Bytes => visitor.visit_string(base64::Engine::encode(
                &base64::engine::general_purpose::STANDARD,
                self.bytes()?,
            )),
            Ty::Message(message) => {
                visitor.visit_map(FieldAccess::new(self.bytes()?, message, self.options)?)
            }
            Ty::Time | Ty::MicroTime => {
                if is_empty_message(self.value) {
                    return visitor.visit_unit();
                }
                let micro = matches!(self.ty, Ty::MicroTime);
                let (seconds, nanos) = time::from_wire(self.bytes()?, micro)?;
                let mut buffer = [0; 32];
                let len = time::write_rfc3339(&mut buffer, seconds, micro.then_some(nanos));
                let text = std::str::from_utf8(&buffer[..len]).map_err(|_| Error::Utf8)?;
                visitor.visit_str(text)
            }
            Ty::Duration
            | Ty::Quantity
            | Ty::IntOrString
            | Ty::FieldsV1
            | Ty::RawExtension
            | Ty::StringList => self.special(|value| value.deserialize_any(visitor)),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        if self.is_null() {
            visitor.visit_none()
        } else {
            visitor.visit_some(self)
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self.ty {
            Ty::FieldsV1 | Ty::RawExtension => {
                self.special(|value| value.deserialize_newtype_struct(name, visitor))
            }
            _ => visitor.visit_newtype_struct(self),
        }
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        // Skipping is free: the value's bytes are already delimited.
        visitor.visit_unit()
    }

    /// A Rust enum of unit variants over a Go string type (`StatusSummary`, a phase...).
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self.ty {
            Ty::String => match go_text(self.bytes()?) {
                Cow::Borrowed(text) => visitor.visit_enum(BorrowedStrDeserializer::new(text)),
                Cow::Owned(text) => visitor.visit_enum(text.into_deserializer()),
            },
            _ => self.deserialize_any(visitor).map_err(|error| {
                Error::custom(format_args!("{name} (one of {variants:?}): {error}"))
            }),
        }
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct seq tuple tuple_struct map struct identifier
    }
}

/// Whether `value` is one a field of `ty` can hold, read as the generated decoders read it but
/// kept nowhere: what an occurrence of a scalar that a later one replaces must still pass.
fn check(ty: Ty, value: WireValue<'_>) -> Result<(), Error> {
    match ty {
        Ty::Bool | Ty::Int32 | Ty::Int64 | Ty::Uint32 | Ty::Uint64 => {
            value.integer(ty.name()).map(drop)
        }
        Ty::Double => value.fixed64("double").map(drop),
        Ty::Float => value.fixed32("float").map(drop),
        // Any bytes make a string (`go_text`).
        Ty::String => value.bytes("string").map(drop),
        Ty::Bytes => value.bytes("bytes").map(drop),
        // Merged, never replaced: every occurrence is decoded, so only its wire type is checked.
        Ty::Message(_) => value.bytes("message").map(drop),
        Ty::Time | Ty::MicroTime if is_empty_message(value) => Ok(()),
        Ty::Time | Ty::MicroTime => {
            time::from_wire(value.bytes("time")?, matches!(ty, Ty::MicroTime)).map(drop)
        }
        Ty::Duration => single_field(value.bytes("duration")?, 1)?
            .map_or(Ok(()), |nanos| nanos.integer("duration").map(drop)),
        Ty::Quantity => quantity::from_value(value).map(drop),
        Ty::IntOrString => int_or_string_parts(value.bytes("IntOrString")?).map(drop),
        Ty::FieldsV1 | Ty::RawExtension => {
            let json = match single_field(value.bytes("embedded JSON")?, 1)? {
                Some(raw) => raw.bytes("raw JSON")?,
                None => b"null",
            };
            read_embedded!(json, |json| de::IgnoredAny::deserialize(json)).map(drop)
        }
        Ty::StringList => {
            let mut reader = Reader::new(value.bytes("string list")?);
            while let Some((number, item)) = reader.field()? {
                if number == 1 {
                    item.bytes("string")?;
                }
            }
            Ok(())
        }
    }
}
