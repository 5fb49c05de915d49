//! A serde [`Deserializer`] over protobuf bytes, driven by the generated [`Message`] tables.
//!
//! It presents a message to serde exactly as the JSON form of the same object would look: keys
//! are JSON names, repeated fields are sequences, `map<…>` entries are maps, inlined structs are
//! flattened, and Kubernetes' special types (`Time`, `Quantity`, `IntOrString`, `FieldsV1`...)
//! arrive in their JSON shape. So any `Deserialize` type that reads the JSON form, a
//! k8s-openapi struct or a user's slim projection, reads protobuf too, and fields the type does
//! not name are skipped without being decoded.

use std::ptr;

use serde::de::{
    self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor,
    value::BorrowedStrDeserializer,
};

use crate::{
    Error,
    generated::META_V1_OBJECT_META,
    schema::{Field, Message, Shape, Ty},
    time,
    wire::{Reader, WireValue},
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
}

/// One wire value, typed by the schema.
struct ValueDeserializer<'de> {
    ty: Ty,
    value: WireValue<'de>,
    options: DecodeOptions,
}

impl<'de> ValueDeserializer<'de> {
    fn bytes(&self) -> Result<&'de [u8], Error> {
        self.value.bytes("length-delimited")
    }

    fn str(&self) -> Result<&'de str, Error> {
        std::str::from_utf8(self.bytes()?).map_err(|_| Error::Utf8)
    }

    /// Whether JSON would hold `null` here: a zero `Time` (protobuf writes it empty) or an
    /// embedded JSON document that is absent.
    fn is_null(&self) -> bool {
        matches!(
            self.ty,
            Ty::Time | Ty::MicroTime | Ty::FieldsV1 | Ty::RawExtension
        ) && self.value.is_zero()
    }

    /// The raw JSON inside a `FieldsV1` or `RawExtension`.
    fn embedded_json(&self) -> Result<&'de [u8], Error> {
        Ok(single_field(self.bytes()?, 1)?
            .map(|value| value.bytes("raw JSON"))
            .transpose()?
            .unwrap_or(b"null"))
    }
}

/// The last value of field `number` in the message `bytes` (protobuf's "last one wins").
pub(crate) fn single_field(bytes: &[u8], number: u32) -> Result<Option<WireValue<'_>>, Error> {
    let mut reader = Reader::new(bytes);
    let mut found = None;
    while let Some((field, value)) = reader.field()? {
        if field == number {
            found = Some(value);
        }
    }
    Ok(found)
}

fn json_error(error: &serde_json::Error) -> Error {
    Error::custom(format_args!("embedded JSON: {error}"))
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
            Ty::Double => visitor.visit_f64(f64::from_bits(self.value.integer("double")?)),
            Ty::Float => visitor.visit_f32(f32::from_bits(self.value.integer("float")? as u32)),
            Ty::String => visitor.visit_borrowed_str(self.str()?),
            Ty::Bytes => visitor.visit_string(base64::Engine::encode(
                &base64::engine::general_purpose::STANDARD,
                self.bytes()?,
            )),
            Ty::Message(message) => {
                visitor.visit_map(FieldAccess::new(self.bytes()?, message, self.options))
            }
            Ty::Time | Ty::MicroTime => {
                if self.value.is_zero() {
                    return visitor.visit_unit();
                }
                let bytes = self.bytes()?;
                let seconds = single_field(bytes, 1)?
                    .map(|value| value.integer("seconds"))
                    .transpose()?
                    .unwrap_or(0) as i64;
                let nanos = single_field(bytes, 2)?
                    .map(|value| value.integer("nanos"))
                    .transpose()?
                    .unwrap_or(0) as i32;
                let mut buffer = [0; 32];
                let micros = matches!(self.ty, Ty::MicroTime).then_some(nanos);
                let len = time::write_rfc3339(&mut buffer, seconds, micros);
                let text = std::str::from_utf8(&buffer[..len]).map_err(|_| Error::Utf8)?;
                visitor.visit_str(text)
            }
            Ty::Duration => {
                let nanos = single_field(self.bytes()?, 1)?
                    .map(|value| value.integer("duration"))
                    .transpose()?
                    .unwrap_or(0) as i64;
                visitor.visit_string(time::format_go_duration(nanos))
            }
            Ty::Quantity => {
                let text = match single_field(self.bytes()?, 1)? {
                    Some(value) => {
                        std::str::from_utf8(value.bytes("quantity")?).map_err(|_| Error::Utf8)?
                    }
                    None => "0",
                };
                visitor.visit_borrowed_str(text)
            }
            Ty::IntOrString => {
                let bytes = self.bytes()?;
                let is_string = single_field(bytes, 1)?
                    .map(|value| value.integer("type"))
                    .transpose()?
                    .unwrap_or(0)
                    == 1;
                if is_string {
                    let text = match single_field(bytes, 3)? {
                        Some(value) => {
                            std::str::from_utf8(value.bytes("strVal")?).map_err(|_| Error::Utf8)?
                        }
                        None => "",
                    };
                    visitor.visit_borrowed_str(text)
                } else {
                    let int = single_field(bytes, 2)?
                        .map(|value| value.integer("intVal"))
                        .transpose()?
                        .unwrap_or(0);
                    visitor.visit_i32(int as i32)
                }
            }
            Ty::FieldsV1 | Ty::RawExtension => {
                serde_json::Deserializer::from_slice(self.embedded_json()?)
                    .deserialize_any(visitor)
                    .map_err(|error| json_error(&error))
            }
            Ty::StringList => visitor.visit_seq(RepeatedAccess {
                reader: &mut Reader::new(self.bytes()?),
                number: 1,
                first: None,
                packed: None,
                ty: Ty::String,
                options: self.options,
            }),
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
                serde_json::Deserializer::from_slice(self.embedded_json()?)
                    .deserialize_newtype_struct(name, visitor)
                    .map_err(|error| json_error(&error))
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
            Ty::String => visitor.visit_enum(BorrowedStrDeserializer::new(self.str()?)),
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

/// The fields of one message, as a serde map keyed by JSON names.
struct FieldAccess<'de> {
    reader: Reader<'de>,
    message: &'static Message,
    /// The messages an inlined field was entered from, innermost last.
    outer: Vec<(Reader<'de>, &'static Message)>,
    pending: Option<(&'static Field, WireValue<'de>)>,
    /// `apiVersion` and `kind` still to present before the message's own fields; the
    /// `apiVersion` is emptied once presented.
    type_meta: Option<(&'static str, &'static str)>,
    options: DecodeOptions,
}

/// The fields [`DecodeOptions::type_meta`] presents; no message numbers them.
static API_VERSION: Field = Field {
    number: 0,
    name: "apiVersion",
    ty: Ty::String,
    shape: Shape::Single,
    omit_zero: false,
};
static KIND: Field = Field {
    number: 0,
    name: "kind",
    ty: Ty::String,
    shape: Shape::Single,
    omit_zero: false,
};

impl<'de> FieldAccess<'de> {
    fn new(bytes: &'de [u8], message: &'static Message, mut options: DecodeOptions) -> Self {
        // Taken out of the options, so messages nested in this one present nothing.
        let type_meta = options.type_meta.take();
        Self {
            reader: Reader::new(bytes),
            message,
            outer: Vec::new(),
            pending: None,
            type_meta,
            options,
        }
    }

    /// The next `apiVersion` or `kind` entry still to present, `apiVersion` first.
    #[inline]
    fn next_type_meta(&mut self) -> Option<(&'static Field, &'static str)> {
        let (api_version, kind) = self.type_meta?;
        if api_version.is_empty() {
            self.type_meta = None;
            Some((&KIND, kind))
        } else {
            self.type_meta = Some(("", kind));
            Some((&API_VERSION, api_version))
        }
    }

    fn skip_entries_of(&mut self, number: u32) -> Result<(), Error> {
        while self.reader.peek_number() == Some(number) {
            self.reader.field()?;
        }
        Ok(())
    }

    fn is_dropped(&self, field: &Field) -> bool {
        self.options.drop_managed_fields
            && ptr::eq(self.message, &META_V1_OBJECT_META)
            && field.name == "managedFields"
    }
}

impl<'de> MapAccess<'de> for FieldAccess<'de> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        if let Some((field, text)) = self.next_type_meta() {
            self.pending = Some((field, WireValue::Bytes(text.as_bytes())));
            return seed
                .deserialize(BorrowedStrDeserializer::new(field.name))
                .map(Some);
        }
        loop {
            let Some((number, value)) = self.reader.field()? else {
                match self.outer.pop() {
                    Some((reader, message)) => {
                        self.reader = reader;
                        self.message = message;
                        continue;
                    }
                    None => return Ok(None),
                }
            };
            // A field this schema does not know (a newer server) is skipped, as protobuf does.
            let Some(field) = self.message.field(number) else {
                continue;
            };
            match field.shape {
                Shape::Inline => {
                    let Ty::Message(inner) = field.ty else {
                        return Err(Error::Malformed("an inlined field that is not a message"));
                    };
                    let bytes = value.bytes("inlined message")?;
                    self.outer.push((self.reader, self.message));
                    self.reader = Reader::new(bytes);
                    self.message = inner;
                    continue;
                }
                Shape::Single if field.omit_zero && value.is_zero() => continue,
                _ if self.is_dropped(field) => {
                    self.skip_entries_of(number)?;
                    continue;
                }
                _ => {}
            }
            self.pending = Some((field, value));
            return seed
                .deserialize(BorrowedStrDeserializer::new(field.name))
                .map(Some);
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        let Some((field, value)) = self.pending.take() else {
            return Err(Error::Malformed("a value asked for before its key"));
        };
        match field.shape {
            Shape::Single | Shape::Inline => seed.deserialize(ValueDeserializer {
                ty: field.ty,
                value,
                options: self.options,
            }),
            Shape::Repeated => {
                let decoded = seed.deserialize(RepeatedDeserializer(RepeatedAccess {
                    reader: &mut self.reader,
                    number: field.number,
                    first: Some(value),
                    packed: None,
                    ty: field.ty,
                    options: self.options,
                }))?;
                self.skip_entries_of(field.number)?;
                Ok(decoded)
            }
            Shape::Map(key) => {
                let decoded = seed.deserialize(MapDeserializer(MapEntries {
                    reader: &mut self.reader,
                    number: field.number,
                    first: Some(value),
                    key,
                    ty: field.ty,
                    value: None,
                    options: self.options,
                }))?;
                self.skip_entries_of(field.number)?;
                Ok(decoded)
            }
        }
    }
}

/// The consecutive entries of one repeated field.
struct RepeatedAccess<'a, 'de> {
    reader: &'a mut Reader<'de>,
    number: u32,
    first: Option<WireValue<'de>>,
    /// The rest of a packed run of numbers.
    packed: Option<Reader<'de>>,
    ty: Ty,
    options: DecodeOptions,
}

impl<'de> RepeatedAccess<'_, 'de> {
    fn next_value(&mut self) -> Result<Option<WireValue<'de>>, Error> {
        loop {
            if let Some(packed) = &mut self.packed {
                if !packed.is_empty() {
                    return packed_element(packed, self.ty).map(Some);
                }
                self.packed = None;
            }
            let value = match self.first.take() {
                Some(value) => value,
                None if self.reader.peek_number() == Some(self.number) => {
                    match self.reader.field()? {
                        Some((_, value)) => value,
                        None => return Ok(None),
                    }
                }
                None => return Ok(None),
            };
            match value {
                WireValue::Bytes(bytes) if is_packable(self.ty) => {
                    self.packed = Some(Reader::new(bytes));
                }
                value => return Ok(Some(value)),
            }
        }
    }
}

fn is_packable(ty: Ty) -> bool {
    matches!(
        ty,
        Ty::Bool | Ty::Int32 | Ty::Int64 | Ty::Uint32 | Ty::Uint64 | Ty::Double | Ty::Float
    )
}

fn packed_element<'de>(packed: &mut Reader<'de>, ty: Ty) -> Result<WireValue<'de>, Error> {
    match ty {
        Ty::Double => {
            let bytes = packed.take_fixed::<8>()?;
            Ok(WireValue::Fixed64(u64::from_le_bytes(bytes)))
        }
        Ty::Float => {
            let bytes = packed.take_fixed::<4>()?;
            Ok(WireValue::Fixed32(u32::from_le_bytes(bytes)))
        }
        _ => Ok(WireValue::Varint(packed.varint()?)),
    }
}

impl RepeatedAccess<'_, '_> {
    /// How many elements remain: what is left of a packed run, the entry in hand and the
    /// consecutive entries of this field still ahead (Go writes a repeated field's entries
    /// together). Told to serde as the sequence's size, so a `Vec` is allocated once at its
    /// final length instead of doubling, which would leave up to half its slots (a
    /// `Container` is 2,336 bytes) empty in every cached object.
    fn remaining(&self) -> usize {
        let packed = self
            .packed
            .as_ref()
            .map_or(0, |run| packed_len(run.remaining(), self.ty));
        let first = match self.first {
            Some(WireValue::Bytes(bytes)) if is_packable(self.ty) => packed_len(bytes, self.ty),
            Some(_) => 1,
            None => 0,
        };
        let mut ahead = *self.reader;
        let mut entries = 0;
        while ahead.peek_number() == Some(self.number) {
            match ahead.field() {
                Ok(Some((_, WireValue::Bytes(bytes)))) if is_packable(self.ty) => {
                    entries += packed_len(bytes, self.ty);
                }
                Ok(Some(_)) => entries += 1,
                _ => break,
            }
        }
        packed + first + entries
    }
}

/// The elements in a packed run of `ty`: fixed-width ones by length, varints by their last
/// bytes (the ones under 0x80).
fn packed_len(bytes: &[u8], ty: Ty) -> usize {
    match ty {
        Ty::Double => bytes.len() / 8,
        Ty::Float => bytes.len() / 4,
        _ => bytes.iter().filter(|&&byte| byte < 0x80).count(),
    }
}

impl<'de> SeqAccess<'de> for RepeatedAccess<'_, 'de> {
    type Error = Error;

    fn size_hint(&self) -> Option<usize> {
        Some(self.remaining())
    }

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Error> {
        match self.next_value()? {
            Some(value) => seed
                .deserialize(ValueDeserializer {
                    ty: self.ty,
                    value,
                    options: self.options,
                })
                .map(Some),
            None => Ok(None),
        }
    }
}

/// A deserializer over an access type: a repeated field as a serde sequence, a map field as a
/// serde map. Present means `Some`; skipping needs no work, the entries are consumed after.
macro_rules! collection_deserializer {
    ($(#[$doc:meta])* $name:ident($access:ident) => $visit:ident) => {
        $(#[$doc])*
        struct $name<'a, 'de>($access<'a, 'de>);

        impl<'de> Deserializer<'de> for $name<'_, 'de> {
            type Error = Error;

            fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
                visitor.$visit(self.0)
            }

            fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
                visitor.visit_some(self)
            }

            fn deserialize_ignored_any<V: Visitor<'de>>(
                self,
                visitor: V,
            ) -> Result<V::Value, Error> {
                visitor.visit_unit()
            }

            serde::forward_to_deserialize_any! {
                bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
                bytes byte_buf unit unit_struct newtype_struct seq tuple tuple_struct map struct
                enum identifier
            }
        }
    };
}

collection_deserializer! {
    /// A repeated field as a serde sequence.
    RepeatedDeserializer(RepeatedAccess) => visit_seq
}

/// The consecutive entries of one `map<…>` field.
struct MapEntries<'a, 'de> {
    reader: &'a mut Reader<'de>,
    number: u32,
    first: Option<WireValue<'de>>,
    key: Ty,
    ty: Ty,
    value: Option<WireValue<'de>>,
    options: DecodeOptions,
}

fn zero_of(ty: Ty) -> WireValue<'static> {
    match ty {
        Ty::Bool | Ty::Int32 | Ty::Int64 | Ty::Uint32 | Ty::Uint64 => WireValue::Varint(0),
        Ty::Double => WireValue::Fixed64(0),
        Ty::Float => WireValue::Fixed32(0),
        _ => WireValue::Bytes(&[]),
    }
}

impl<'de> MapAccess<'de> for MapEntries<'_, 'de> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        let entry = match self.first.take() {
            Some(entry) => entry,
            None if self.reader.peek_number() == Some(self.number) => match self.reader.field()? {
                Some((_, entry)) => entry,
                None => return Ok(None),
            },
            None => return Ok(None),
        };
        let mut fields = Reader::new(entry.bytes("map entry")?);
        let (mut key, mut value) = (zero_of(self.key), zero_of(self.ty));
        while let Some((number, field)) = fields.field()? {
            match number {
                1 => key = field,
                2 => value = field,
                _ => {}
            }
        }
        self.value = Some(value);
        seed.deserialize(ValueDeserializer {
            ty: self.key,
            value: key,
            options: self.options,
        })
        .map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        let Some(value) = self.value.take() else {
            return Err(Error::Malformed("a map value asked for before its key"));
        };
        seed.deserialize(ValueDeserializer {
            ty: self.ty,
            value,
            options: self.options,
        })
    }
}

collection_deserializer! {
    /// A map field as a serde map.
    MapDeserializer(MapEntries) => visit_map
}
