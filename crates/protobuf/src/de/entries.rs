//! The entries of one repeated or map field, as a serde sequence or map: a run read as it
//! streams past, or every entry gathered from wherever it appeared.

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

use super::{DecodeOptions, ValueDeserializer, check};
use crate::{
    Error,
    schema::Ty,
    wire::{Reader, WireValue, go_map_entry},
};

/// The entries of one repeated or map field.
pub(super) enum Entries<'a, 'de> {
    /// The entries of field `number` that follow `reader` before any other field: all of them,
    /// in a streamed message.
    Run {
        reader: &'a mut Reader<'de>,
        number: u32,
        /// The tag of the entry read last, which errors of its value are marked with
        /// ([`Error::at`]).
        tag: *const u8,
    },
    /// Every entry, gathered from wherever it appeared.
    Gathered(std::vec::IntoIter<WireValue<'de>>),
}

impl<'de> Entries<'_, 'de> {
    fn next(&mut self) -> Result<Option<WireValue<'de>>, Error> {
        match self {
            Entries::Run {
                reader,
                number,
                tag,
            } if reader.peek_number() == Some(*number) => {
                *tag = reader.remaining().as_ptr();
                let tag = *tag;
                Ok(reader
                    .field()
                    .map_err(|error| error.at(tag))?
                    .map(|(_, value)| value))
            }
            Entries::Run { .. } => Ok(None),
            Entries::Gathered(values) => Ok(values.next()),
        }
    }

    /// How many elements of `ty` the entries still ahead hold (a packed entry holds several).
    /// Marks `error` as one of the entry read last, when its place is known.
    fn mark(&self, error: Error) -> Error {
        match self {
            Entries::Run { tag, .. } => error.at(*tag),
            Entries::Gathered(_) => error,
        }
    }

    fn count(&self, ty: Ty) -> usize {
        let elements = |value: WireValue<'_>| match value {
            WireValue::Bytes(bytes) if is_packable(ty) => packed_len(bytes, ty),
            _ => 1,
        };
        match self {
            Entries::Run { reader, number, .. } => {
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
pub(super) struct RepeatedAccess<'a, 'de> {
    pub(super) entries: Entries<'a, 'de>,
    /// The entry in hand, read before the others.
    pub(super) first: Option<WireValue<'de>>,
    /// The rest of a packed run of numbers.
    pub(super) packed: Option<Reader<'de>>,
    pub(super) ty: Ty,
    pub(super) options: DecodeOptions,
}

impl<'de> RepeatedAccess<'_, 'de> {
    /// The elements of `values`, every entry of a repeated field of `ty`.
    pub(super) fn gathered(values: Vec<WireValue<'de>>, ty: Ty, options: DecodeOptions) -> Self {
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
        match self
            .next_value()
            .map_err(|error| self.entries.mark(error))?
        {
            Some(value) => seed
                .deserialize(ValueDeserializer {
                    ty: self.ty,
                    value,
                    options: self.options,
                })
                .map(Some)
                .map_err(|error| self.entries.mark(error)),
            None => Ok(None),
        }
    }
}

/// A deserializer over an access type: a repeated field as a serde sequence, a map field as a
/// serde map. Present means `Some`; skipping needs no work, the entries are consumed after.
macro_rules! collection_deserializer {
    ($(#[$doc:meta])* $name:ident($access:ident) => $visit:ident) => {
        $(#[$doc])*
        pub(super) struct $name<'a, 'de>(pub(super) $access<'a, 'de>);

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
pub(super) struct MapEntries<'a, 'de> {
    pub(super) entries: Entries<'a, 'de>,
    /// The entry in hand, read before the others.
    pub(super) first: Option<WireValue<'de>>,
    pub(super) key: Ty,
    pub(super) ty: Ty,
    pub(super) value: Option<WireValue<'de>>,
    pub(super) options: DecodeOptions,
    /// The message (or each occurrence of it) the entries came from: what an entry Go reads
    /// loosely may reach into ([`go_map_entry`]).
    pub(super) parents: &'a [&'de [u8]],
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
        let (key, value) = match map_entry(entry, self.key, self.ty, self.options) {
            Ok(read) => read,
            // Go's decoders read an entry more loosely: as they do, when that reads it.
            Err(error) => self
                .entry_as_go(entry)
                .unwrap_or(Err(error))
                .map_err(|error| self.entries.mark(error))?,
        };
        self.value = Some(value);
        seed.deserialize(ValueDeserializer {
            ty: self.key,
            value: key,
            options: self.options,
        })
        .map(Some)
        .map_err(|error| self.entries.mark(error))
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
        .map_err(|error| self.entries.mark(error))
    }
}

impl<'de> MapEntries<'_, 'de> {
    /// `entry` read as Go's decoders read it ([`go_map_entry`]), from the message it is in;
    /// `None` when it is in none of [`parents`](MapEntries::parents).
    #[cold]
    fn entry_as_go(
        &self,
        entry: WireValue<'de>,
    ) -> Option<Result<(WireValue<'de>, WireValue<'de>), Error>> {
        let WireValue::Bytes(entry) = entry else {
            return None;
        };
        let at = entry.as_ptr() as usize;
        let parent = self.parents.iter().find(|parent| {
            let start = parent.as_ptr() as usize;
            at >= start && at + entry.len() <= start + parent.len()
        })?;
        let within = &parent[at - parent.as_ptr() as usize..];
        let varint = matches!(zero_of(self.ty), WireValue::Varint(_));
        let mut value = None;
        let read = go_map_entry(within, entry.len(), varint, |found| {
            if let Some(earlier) = value.replace(found) {
                validate(self.ty, earlier, self.options)?;
            }
            Ok(())
        });
        Some(read.map(|key| {
            (
                key.map_or(zero_of(self.key), WireValue::Bytes),
                value.unwrap_or(zero_of(self.ty)),
            )
        }))
    }
}

/// The key and value of one map entry; a missing one is its type's zero. Go decodes every
/// occurrence of the value, so an earlier one must be a value too.
fn map_entry<'de>(
    entry: WireValue<'de>,
    key_ty: Ty,
    ty: Ty,
    options: DecodeOptions,
) -> Result<(WireValue<'de>, WireValue<'de>), Error> {
    let mut fields = Reader::new(entry.bytes("map entry")?);
    let (mut key, mut value) = (zero_of(key_ty), None);
    while let Some((number, field)) = fields.field()? {
        match number {
            1 => key = field,
            2 => {
                if let Some(earlier) = value.replace(field) {
                    validate(ty, earlier, options)?;
                }
            }
            _ => {}
        }
    }
    let value = value.unwrap_or(zero_of(ty));
    // A key or value of another wire type is one Go reads otherwise: refused here, so that the
    // caller reads the entry as Go does.
    for (found, ty) in [(key, key_ty), (value, ty)] {
        if std::mem::discriminant(&found) != std::mem::discriminant(&zero_of(ty)) {
            check(ty, found)?;
        }
    }
    Ok((key, value))
}

/// Whether `value` is one a map value of `ty` can hold, decoded whole as the generated
/// decoders decode it, and kept nowhere.
fn validate(ty: Ty, value: WireValue<'_>, options: DecodeOptions) -> Result<(), Error> {
    match ty {
        // Through a JSON tree: the map's value type is known only to the seed of the last.
        Ty::Message(_) => {
            <serde_json::Value as serde::Deserialize>::deserialize(ValueDeserializer {
                ty,
                value,
                options,
            })
            .map(drop)
        }
        _ => check(ty, value),
    }
}

collection_deserializer! {
    /// A map field as a serde map.
    MapDeserializer(MapEntries) => visit_map
}
