//! A message's fields as a serde map: streamed as they are read when each field comes in one
//! run (as Go writes every message), gathered field by field first when not.

use std::ptr;

use serde::de::{
    DeserializeSeed, Deserializer, MapAccess, Visitor, value::BorrowedStrDeserializer,
};

use super::{
    DecodeOptions, MergedValue, ValueDeserializer, check,
    entries::{Entries, MapDeserializer, MapEntries, RepeatedAccess, RepeatedDeserializer},
    merges,
};
use crate::{
    Error,
    generated::META_V1_OBJECT_META,
    schema::{Field, Message, Shape, Ty},
    wire::{Reader, WireValue},
};

/// The fields of one message, as a serde map keyed by JSON names, each field once.
pub(super) struct FieldAccess<'de> {
    fields: Fields<'de>,
    pending: Option<(&'static Field, Pending<'de>)>,
    /// Where the pending field's tag is, to mark its errors with ([`Error::at`]); null for a
    /// gathered field, whose errors the enclosing message marks.
    tag: *const u8,
    /// `apiVersion` and `kind` still to present before the message's own fields; the
    /// `apiVersion` is emptied once presented.
    type_meta: Option<(&'static str, &'static str)>,
    options: DecodeOptions,
}

/// Where a message's fields come from.
pub(super) enum Fields<'de> {
    /// Read as they stream past: every field in one run, as Go writes them ([`is_regular`]).
    Streamed {
        reader: Reader<'de>,
        message: &'static Message,
        /// The messages an inlined field was entered from, innermost last.
        outer: Vec<(Reader<'de>, &'static Message, &'de [u8])>,
        /// The whole message `reader` reads: what a map entry Go reads loosely may reach into.
        bytes: &'de [u8],
    },
    /// Gathered first, field by field, in the order each field first appears; and the
    /// occurrences of the message they were gathered from.
    Gathered(std::vec::IntoIter<Group<'de>>, Vec<&'de [u8]>),
}

/// Every occurrence of one field in a message (and the messages inlined in it).
pub(super) struct Group<'de> {
    field: &'static Field,
    values: Vec<WireValue<'de>>,
    /// managedFields, which the options drop.
    dropped: bool,
}

/// The value of the key just presented.
pub(super) enum Pending<'de> {
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
    always: false,
};
static KIND: Field = Field {
    number: 0,
    name: "kind",
    ty: Ty::String,
    shape: Shape::Single,
    omit_zero: false,
    always: false,
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
    pub(super) fn new(
        bytes: &'de [u8],
        message: &'static Message,
        options: DecodeOptions,
    ) -> Result<Self, Error> {
        if is_regular(bytes, message) {
            let fields = Fields::Streamed {
                reader: Reader::new(bytes),
                message,
                outer: Vec::new(),
                bytes,
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
        Ok(Self::over(
            Fields::Gathered(groups.into_iter(), segments.to_vec()),
            options,
        ))
    }

    fn over(fields: Fields<'de>, mut options: DecodeOptions) -> Self {
        // Taken out of the options, so messages nested in this one present nothing.
        let type_meta = options.type_meta.take();
        Self {
            fields,
            pending: None,
            tag: ptr::null(),
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
        self.tag = ptr::null();
        match &mut self.fields {
            Fields::Streamed {
                reader,
                message,
                outer,
                bytes,
            } => loop {
                let tag = reader.remaining().as_ptr();
                let Some((number, value)) = reader.field().map_err(|error| error.at(tag))? else {
                    match outer.pop() {
                        Some((outer_reader, outer_message, outer_bytes)) => {
                            *reader = outer_reader;
                            *message = outer_message;
                            *bytes = outer_bytes;
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
                        let inlined = value
                            .bytes("inlined message")
                            .map_err(|error| error.at(tag))?;
                        outer.push((*reader, *message, *bytes));
                        *reader = Reader::new(inlined);
                        *message = inner;
                        *bytes = inlined;
                        continue;
                    }
                    Shape::Single if field.omit_zero && value.is_zero() => {
                        // Skipped, but only when it has the field's wire type, as in Go.
                        check(field.ty, value).map_err(|error| error.at(tag))?;
                        continue;
                    }
                    _ if is_dropped(self.options, message, field) => {
                        skip_entries_of(reader, number)?;
                        continue;
                    }
                    _ => {}
                }
                self.tag = tag;
                return Ok(Some((field, Pending::Streamed(value))));
            },
            Fields::Gathered(groups, _) => {
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
                        let merged = matches!(field.ty, Ty::Message(_)) || merges(field.ty);
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
        let tag = self.tag;
        let values = match pending {
            Pending::Streamed(value) => {
                let (Shape::Repeated | Shape::Map(_), Fields::Streamed { reader, bytes, .. }) =
                    (field.shape, &mut self.fields)
                else {
                    return seed
                        .deserialize(ValueDeserializer {
                            ty: field.ty,
                            value,
                            options,
                        })
                        .map_err(|error| error.at(tag));
                };
                let entries = Entries::Run {
                    reader,
                    number: field.number,
                    tag,
                };
                let decoded = match field.shape {
                    Shape::Map(key) => seed.deserialize(MapDeserializer(MapEntries {
                        entries,
                        first: Some(value),
                        key,
                        ty: field.ty,
                        value: None,
                        options,
                        parents: std::slice::from_ref(bytes),
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
                parents: match &self.fields {
                    Fields::Gathered(_, segments) => segments,
                    Fields::Streamed { bytes, .. } => std::slice::from_ref(bytes),
                },
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
            // A special type Go decodes as a message, seen more than once, is merged too.
            (_, ty) if values.len() > 1 && merges(ty) => {
                let segments = values
                    .iter()
                    .map(|value| value.bytes(ty.name()))
                    .collect::<Result<Vec<_>, _>>()?;
                seed.deserialize(MergedValue {
                    ty,
                    segments: &segments,
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

/// A message that appeared more than once in its parent: its occurrences merged.
pub(super) struct MergedMessage<'de> {
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
