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

use std::{borrow::Cow, ptr};

use serde::de::{
    self, Deserialize, DeserializeSeed, Deserializer, IntoDeserializer, MapAccess, SeqAccess,
    Visitor, value::BorrowedStrDeserializer,
};

use crate::{
    Error,
    generated::META_V1_OBJECT_META,
    schema::{Field, Message, Shape, Ty},
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

    /// Whether JSON would hold `null` here: a zero `Time` (protobuf writes it empty) or an
    /// embedded JSON document that is absent.
    fn is_null(&self) -> bool {
        matches!(
            self.ty,
            Ty::Time | Ty::MicroTime | Ty::FieldsV1 | Ty::RawExtension
        ) && is_empty_message(self.value)
    }

    /// The raw JSON inside a `FieldsV1` or `RawExtension`.
    fn embedded_json(&self) -> Result<&'de [u8], Error> {
        Ok(single_field(self.bytes()?, 1)?
            .map(|value| value.bytes("raw JSON"))
            .transpose()?
            .unwrap_or(b"null"))
    }
}

/// Whether `value` is an empty message: what Go writes for a zero `Time` or an absent embedded
/// JSON document, which JSON shows as `null`.
fn is_empty_message(value: WireValue<'_>) -> bool {
    matches!(value, WireValue::Bytes(bytes) if bytes.is_empty())
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

/// `bytes` as text for `visitor`: borrowed when they are UTF-8, else as Go's JSON shows them
/// ([`go_text`]).
fn visit_text<'de, V: Visitor<'de>>(visitor: V, bytes: &'de [u8]) -> Result<V::Value, Error> {
    match go_text(bytes) {
        Cow::Borrowed(text) => visitor.visit_borrowed_str(text),
        Cow::Owned(text) => visitor.visit_string(text),
    }
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
    let (mut kind, mut int, mut text): (u64, i32, &[u8]) = (0, 0, b"");
    let mut reader = Reader::new(bytes);
    while let Some((number, value)) = reader.field()? {
        match number {
            1 => kind = value.integer("type")?,
            // An int32 on the wire: a negative one is sign-extended, truncation decodes it.
            2 => int = value.integer("intVal")? as i32,
            3 => text = value.bytes("strVal")?,
            _ => {}
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
            Ty::Duration => {
                let nanos = single_field(self.bytes()?, 1)?
                    .map(|value| value.integer("duration"))
                    .transpose()?
                    .unwrap_or(0) as i64;
                visitor.visit_string(time::format_go_duration(nanos))
            }
            Ty::Quantity => match single_field(self.bytes()?, 1)? {
                Some(value) => visit_text(visitor, value.bytes("quantity")?),
                None => visitor.visit_borrowed_str("0"),
            },
            Ty::IntOrString => match int_or_string_parts(self.bytes()?)? {
                IntOrStringParts::String(text) => visit_text(visitor, text),
                IntOrStringParts::Int(int) => visitor.visit_i32(int),
            },
            Ty::FieldsV1 | Ty::RawExtension => {
                read_embedded!(self.embedded_json()?, |json| json.deserialize_any(visitor))
            }
            Ty::StringList => {
                // `{repeated items = 1}`: every item, wherever it appears.
                let mut items = Vec::new();
                let mut reader = Reader::new(self.bytes()?);
                while let Some((number, value)) = reader.field()? {
                    if number == 1 {
                        items.push(value);
                    }
                }
                visitor.visit_seq(RepeatedAccess::gathered(items, Ty::String, self.options))
            }
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
            Ty::FieldsV1 | Ty::RawExtension => read_embedded!(self.embedded_json()?, |json| {
                json.deserialize_newtype_struct(name, visitor)
            }),
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

/// The fields of one message, as a serde map keyed by JSON names, each field once.
struct FieldAccess<'de> {
    fields: Fields<'de>,
    pending: Option<(&'static Field, Pending<'de>)>,
    /// `apiVersion` and `kind` still to present before the message's own fields; the
    /// `apiVersion` is emptied once presented.
    type_meta: Option<(&'static str, &'static str)>,
    options: DecodeOptions,
}

/// Where a message's fields come from.
enum Fields<'de> {
    /// Read as they stream past: every field in one run, as Go writes them ([`is_regular`]).
    Streamed {
        reader: Reader<'de>,
        message: &'static Message,
        /// The messages an inlined field was entered from, innermost last.
        outer: Vec<(Reader<'de>, &'static Message)>,
    },
    /// Gathered first, field by field, in the order each field first appears.
    Gathered(std::vec::IntoIter<Group<'de>>),
}

/// Every occurrence of one field in a message (and the messages inlined in it).
struct Group<'de> {
    field: &'static Field,
    values: Vec<WireValue<'de>>,
    /// managedFields, which the options drop.
    dropped: bool,
}

/// The value of the key just presented.
enum Pending<'de> {
    /// One occurrence, read from a streamed message.
    Streamed(WireValue<'de>),
    /// Every occurrence, gathered.
    Gathered(Vec<WireValue<'de>>),
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

/// Whether the message `bytes` can stream to serde: each field (counting those of inlined
/// messages) arrives in one run, and a field that is not repeated arrives once. Go writes every
/// message so. Malformed bytes count as regular: streaming reports them where it meets them.
fn is_regular(bytes: &[u8], message: &'static Message) -> bool {
    let mut reader = Reader::new(bytes);
    let (mut seen_under_64, mut seen_above) = (0u64, Vec::new());
    // No field is numbered 0.
    let mut previous = 0;
    loop {
        let Ok(Some((number, value))) = reader.field() else {
            return true;
        };
        let field = message.field(number);
        if number == previous {
            match field {
                Some(field) if !matches!(field.shape, Shape::Repeated | Shape::Map(_)) => {
                    return false;
                }
                _ => continue,
            }
        }
        previous = number;
        let seen = match 1u64.checked_shl(number) {
            Some(bit) => {
                let seen = seen_under_64 & bit != 0;
                seen_under_64 |= bit;
                seen
            }
            None if seen_above.contains(&number) => true,
            None => {
                seen_above.push(number);
                false
            }
        };
        match field {
            // A field this schema does not know is skipped wherever it appears.
            None => {}
            Some(_) if seen => return false,
            Some(Field {
                shape: Shape::Inline,
                ty: Ty::Message(inner),
                ..
            }) => {
                if let WireValue::Bytes(inner_bytes) = value
                    && !is_regular(inner_bytes, inner)
                {
                    return false;
                }
            }
            Some(_) => {}
        }
    }
}

/// Adds every field of the message `bytes` (and of the messages inlined in it) to `groups`.
fn gather<'de>(
    groups: &mut Vec<Group<'de>>,
    bytes: &'de [u8],
    message: &'static Message,
    options: DecodeOptions,
) -> Result<(), Error> {
    let mut reader = Reader::new(bytes);
    while let Some((number, value)) = reader.field()? {
        // A field this schema does not know (a newer server) is skipped, as protobuf does.
        let Some(field) = message.field(number) else {
            continue;
        };
        if let Shape::Inline = field.shape {
            let Ty::Message(inner) = field.ty else {
                return Err(Error::Malformed("an inlined field that is not a message"));
            };
            gather(groups, value.bytes("inlined message")?, inner, options)?;
            continue;
        }
        match groups.iter_mut().find(|group| ptr::eq(group.field, field)) {
            Some(group) => group.values.push(value),
            None => groups.push(Group {
                field,
                values: vec![value],
                dropped: is_dropped(options, message, field),
            }),
        }
    }
    Ok(())
}

/// Whether `options` drop `field` of `message`.
fn is_dropped(options: DecodeOptions, message: &'static Message, field: &Field) -> bool {
    options.drop_managed_fields
        && ptr::eq(message, &META_V1_OBJECT_META)
        && field.name == "managedFields"
}

impl<'de> FieldAccess<'de> {
    fn new(
        bytes: &'de [u8],
        message: &'static Message,
        options: DecodeOptions,
    ) -> Result<Self, Error> {
        if is_regular(bytes, message) {
            let fields = Fields::Streamed {
                reader: Reader::new(bytes),
                message,
                outer: Vec::new(),
            };
            Ok(Self::over(fields, options))
        } else {
            Self::merged(&[bytes], message, options)
        }
    }

    /// The message made of `segments`, one after another: protobuf's merge of several
    /// occurrences of one message.
    fn merged(
        segments: &[&'de [u8]],
        message: &'static Message,
        options: DecodeOptions,
    ) -> Result<Self, Error> {
        let mut groups = Vec::new();
        for bytes in segments {
            gather(&mut groups, bytes, message, options)?;
        }
        Ok(Self::over(Fields::Gathered(groups.into_iter()), options))
    }

    fn over(fields: Fields<'de>, mut options: DecodeOptions) -> Self {
        // Taken out of the options, so messages nested in this one present nothing.
        let type_meta = options.type_meta.take();
        Self {
            fields,
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

    /// The next field to present and its value, if any is left.
    fn next_field(&mut self) -> Result<Option<(&'static Field, Pending<'de>)>, Error> {
        match &mut self.fields {
            Fields::Streamed {
                reader,
                message,
                outer,
            } => loop {
                let Some((number, value)) = reader.field()? else {
                    match outer.pop() {
                        Some((outer_reader, outer_message)) => {
                            *reader = outer_reader;
                            *message = outer_message;
                            continue;
                        }
                        None => return Ok(None),
                    }
                };
                // A field this schema does not know (a newer server) is skipped, as protobuf does.
                let Some(field) = message.field(number) else {
                    continue;
                };
                match field.shape {
                    Shape::Inline => {
                        let Ty::Message(inner) = field.ty else {
                            return Err(Error::Malformed("an inlined field that is not a message"));
                        };
                        let bytes = value.bytes("inlined message")?;
                        outer.push((*reader, *message));
                        *reader = Reader::new(bytes);
                        *message = inner;
                        continue;
                    }
                    Shape::Single if field.omit_zero && value.is_zero() => {
                        // Skipped, but only when it has the field's wire type, as in Go.
                        check(field.ty, value)?;
                        continue;
                    }
                    _ if is_dropped(self.options, message, field) => {
                        skip_entries_of(reader, number)?;
                        continue;
                    }
                    _ => {}
                }
                return Ok(Some((field, Pending::Streamed(value))));
            },
            Fields::Gathered(groups) => {
                for Group {
                    field,
                    values,
                    dropped,
                } in groups.by_ref()
                {
                    if dropped {
                        continue;
                    }
                    if matches!(field.shape, Shape::Single) && field.omit_zero {
                        // A message is merged, so absent only when every occurrence is empty;
                        // any other value is absent when its last occurrence is zero, and
                        // the earlier ones must still be values it can hold.
                        let merged = matches!(field.ty, Ty::Message(_));
                        let absent = if merged {
                            values.iter().all(|value| value.is_zero())
                        } else {
                            values.last().is_some_and(|value| value.is_zero())
                        };
                        if absent {
                            for &value in &values {
                                check(field.ty, value)?;
                            }
                            continue;
                        }
                    }
                    return Ok(Some((field, Pending::Gathered(values))));
                }
                Ok(None)
            }
        }
    }
}

/// Skips the entries of field `number` that follow `reader` before any other field.
fn skip_entries_of(reader: &mut Reader<'_>, number: u32) -> Result<(), Error> {
    while reader.peek_number() == Some(number) {
        reader.field()?;
    }
    Ok(())
}

impl<'de> MapAccess<'de> for FieldAccess<'de> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        let next = match self.next_type_meta() {
            Some((field, text)) => {
                Some((field, Pending::Streamed(WireValue::Bytes(text.as_bytes()))))
            }
            None => self.next_field()?,
        };
        let Some((field, value)) = next else {
            return Ok(None);
        };
        self.pending = Some((field, value));
        seed.deserialize(BorrowedStrDeserializer::new(field.name))
            .map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        let Some((field, pending)) = self.pending.take() else {
            return Err(Error::Malformed("a value asked for before its key"));
        };
        let options = self.options;
        let values = match pending {
            Pending::Streamed(value) => {
                let (Shape::Repeated | Shape::Map(_), Fields::Streamed { reader, .. }) =
                    (field.shape, &mut self.fields)
                else {
                    return seed.deserialize(ValueDeserializer {
                        ty: field.ty,
                        value,
                        options,
                    });
                };
                let entries = Entries::Run {
                    reader,
                    number: field.number,
                };
                let decoded = match field.shape {
                    Shape::Map(key) => seed.deserialize(MapDeserializer(MapEntries {
                        entries,
                        first: Some(value),
                        key,
                        ty: field.ty,
                        value: None,
                        options,
                    })),
                    _ => seed.deserialize(RepeatedDeserializer(RepeatedAccess {
                        entries,
                        first: Some(value),
                        packed: None,
                        ty: field.ty,
                        options,
                    })),
                }?;
                if let Fields::Streamed { reader, .. } = &mut self.fields {
                    skip_entries_of(reader, field.number)?;
                }
                return Ok(decoded);
            }
            Pending::Gathered(values) => values,
        };
        match (field.shape, field.ty) {
            (Shape::Repeated, ty) => seed.deserialize(RepeatedDeserializer(
                RepeatedAccess::gathered(values, ty, options),
            )),
            (Shape::Map(key), ty) => seed.deserialize(MapDeserializer(MapEntries {
                entries: Entries::Gathered(values.into_iter()),
                first: None,
                key,
                ty,
                value: None,
                options,
            })),
            // A message seen more than once is merged.
            (_, Ty::Message(message)) if values.len() > 1 => {
                let segments = values
                    .iter()
                    .map(|value| value.bytes("message"))
                    .collect::<Result<Vec<_>, _>>()?;
                seed.deserialize(MergedMessage {
                    segments,
                    message,
                    options,
                })
            }
            // Any other value seen more than once: the last wins, and every earlier one must
            // still be one the field can hold, as Go's decoder reads each.
            (_, ty) => match values.split_last() {
                Some((&value, earlier)) => {
                    for &earlier in earlier {
                        check(ty, earlier)?;
                    }
                    seed.deserialize(ValueDeserializer { ty, value, options })
                }
                None => Err(Error::Malformed("a field gathered without a value")),
            },
        }
    }
}

/// Whether `value` is one a field of `ty` can hold, read as the generated decoders read it but
/// kept nowhere: what an occurrence of a scalar that a later one replaces must still pass.
fn check(ty: Ty, value: WireValue<'_>) -> Result<(), Error> {
    match ty {
        Ty::Bool | Ty::Int32 | Ty::Int64 | Ty::Uint32 | Ty::Uint64 => {
            value.integer("number").map(drop)
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
        Ty::Quantity => single_field(value.bytes("quantity")?, 1)?
            .map_or(Ok(()), |text| text.bytes("quantity").map(drop)),
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

/// A message that appeared more than once in its parent: its occurrences merged.
struct MergedMessage<'de> {
    segments: Vec<&'de [u8]>,
    message: &'static Message,
    options: DecodeOptions,
}

impl<'de> Deserializer<'de> for MergedMessage<'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_map(FieldAccess::merged(
            &self.segments,
            self.message,
            self.options,
        )?)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_some(self)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct seq tuple tuple_struct map struct enum identifier
    }
}

/// The entries of one repeated or map field.
enum Entries<'a, 'de> {
    /// The entries of field `number` that follow `reader` before any other field: all of them,
    /// in a streamed message.
    Run {
        reader: &'a mut Reader<'de>,
        number: u32,
    },
    /// Every entry, gathered from wherever it appeared.
    Gathered(std::vec::IntoIter<WireValue<'de>>),
}

impl<'de> Entries<'_, 'de> {
    fn next(&mut self) -> Result<Option<WireValue<'de>>, Error> {
        match self {
            Entries::Run { reader, number } if reader.peek_number() == Some(*number) => {
                Ok(reader.field()?.map(|(_, value)| value))
            }
            Entries::Run { .. } => Ok(None),
            Entries::Gathered(values) => Ok(values.next()),
        }
    }

    /// How many elements of `ty` the entries still ahead hold (a packed entry holds several).
    fn count(&self, ty: Ty) -> usize {
        let elements = |value: WireValue<'_>| match value {
            WireValue::Bytes(bytes) if is_packable(ty) => packed_len(bytes, ty),
            _ => 1,
        };
        match self {
            Entries::Run { reader, number } => {
                let mut ahead = **reader;
                let mut count = 0;
                while ahead.peek_number() == Some(*number) {
                    match ahead.field() {
                        Ok(Some((_, value))) => count += elements(value),
                        _ => break,
                    }
                }
                count
            }
            Entries::Gathered(values) => {
                values.as_slice().iter().map(|&value| elements(value)).sum()
            }
        }
    }
}

/// The elements of one repeated field.
struct RepeatedAccess<'a, 'de> {
    entries: Entries<'a, 'de>,
    /// The entry in hand, read before the others.
    first: Option<WireValue<'de>>,
    /// The rest of a packed run of numbers.
    packed: Option<Reader<'de>>,
    ty: Ty,
    options: DecodeOptions,
}

impl<'de> RepeatedAccess<'_, 'de> {
    /// The elements of `values`, every entry of a repeated field of `ty`.
    fn gathered(values: Vec<WireValue<'de>>, ty: Ty, options: DecodeOptions) -> Self {
        Self {
            entries: Entries::Gathered(values.into_iter()),
            first: None,
            packed: None,
            ty,
            options,
        }
    }

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
                None => match self.entries.next()? {
                    Some(value) => value,
                    None => return Ok(None),
                },
            };
            match value {
                WireValue::Bytes(bytes) if is_packable(self.ty) => {
                    self.packed = Some(Reader::new(bytes));
                }
                value => return Ok(Some(value)),
            }
        }
    }

    /// How many elements remain: what is left of a packed run, the entry in hand and the
    /// entries still ahead. Told to serde as the sequence's size, so a `Vec` is allocated once
    /// at its final length instead of doubling, which would leave up to half its slots (a
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
        packed + first + self.entries.count(self.ty)
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

/// The entries of one `map<…>` field; a key seen twice keeps its last value, as in Go.
struct MapEntries<'a, 'de> {
    entries: Entries<'a, 'de>,
    /// The entry in hand, read before the others.
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
            None => match self.entries.next()? {
                Some(entry) => entry,
                None => return Ok(None),
            },
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
