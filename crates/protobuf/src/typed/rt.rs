//! What the generated decoders are written in: one reader per value type, one helper per field
//! shape, and the slot a field is written through whether k8s-openapi made it optional or not.
//!
//! Every helper does what the serde path (`crate::de`) does for the same field, so that both
//! paths give the same value: a zero scalar of an `omitempty` field is absent, a zero `Time` or
//! embedded JSON document is `null`, a map entry without a value holds the value type's zero.

use std::{borrow::Cow, collections::BTreeMap};

use k8s_openapi::{
    ByteString,
    apimachinery::pkg::{
        api::resource::Quantity,
        apis::meta::v1::{FieldsV1, MicroTime, Time},
        runtime::RawExtension,
        util::intstr::IntOrString,
    },
    jiff::Timestamp,
};

use crate::{
    DecodeOptions, Error,
    de::{IntOrStringParts, int_or_string_parts, single_field},
    quantity, time,
    wire::{self, Reader, WireValue, go_text},
};

/// A k8s-openapi struct that takes its fields from protobuf by number.
pub(crate) trait Merge {
    /// Its repeated fields that take one element per occurrence on the wire (messages and
    /// strings, not packed numbers): [`merge`] counts each run of them before its first
    /// element, so that each list is allocated once, at its length.
    const REPEATED: &'static [u32] = &[];

    /// [`REPEATED`](Merge::REPEATED)'s numbers under 64, as bits: what [`merge`] checks for
    /// every field, in one instruction rather than a scan of the list.
    const REPEATED_BITS: u64 = bits_under_64(Self::REPEATED);

    /// Its single fields of a type Go decodes as a message that merges with an earlier
    /// occurrence (`Quantity`, `IntOrString`, `Duration`, `FieldsV1`, `RawExtension`): where one
    /// comes again, [`merge`] decodes all its occurrences joined, which is protobuf's merge.
    const MERGED: &'static [u32] = &[];

    /// [`MERGED`](Merge::MERGED) as bits; the generator numbers none of them 64 or above.
    const MERGED_BITS: u64 = bits_under_64(Self::MERGED);

    /// Its `map<…>` fields: [`merge`] reads an entry of one strictly, and when that fails
    /// again as Go's decoders read entries ([`Merge::merge_entry_as_go`]).
    const MAPS: &'static [u32] = &[];

    /// [`MAPS`](Merge::MAPS)'s numbers under 64, as bits.
    const MAPS_BITS: u64 = bits_under_64(Self::MAPS);

    /// Takes an entry of map field `number`, one of [`MAPS`](Merge::MAPS), as Go's decoders
    /// read it ([`map_as_go`]): `within` is this message's bytes from the entry's start, `len`
    /// the entry's length.
    fn merge_entry_as_go(
        &mut self,
        _number: u32,
        _within: &[u8],
        _len: usize,
        _options: &DecodeOptions,
    ) -> Result<(), Error> {
        Ok(())
    }

    /// Makes room for `additional` more elements of repeated field `number`, one of
    /// [`REPEATED`](Merge::REPEATED), unless `options` drop that field.
    fn reserve(&mut self, _number: u32, _additional: usize, _options: &DecodeOptions) {}

    /// Takes field `number` from the wire; a number the type does not know is skipped.
    fn merge_field(
        &mut self,
        number: u32,
        value: WireValue<'_>,
        options: &DecodeOptions,
    ) -> Result<(), Error>;
}

/// Merges every field of the message `bytes` into `target`.
///
/// A list left to grow by doubling copies its elements at every step (a `Volume` is 3.3 KB, a
/// `Container` 2.3 KB) and keeps up to half its slots empty for as long as the object is
/// cached. So at the first element of a run of one repeated field, the run is counted and its
/// list reserved. Go writes each repeated field's elements together, in one run; elements that
/// arrive in several runs are still all kept, in order, each run reserved as it starts.
#[inline]
pub(crate) fn merge<T: Merge>(
    target: &mut T,
    bytes: &[u8],
    options: &DecodeOptions,
) -> Result<(), Error> {
    let mut reader = Reader::new(bytes);
    let mut previous = 0;
    // The merged fields seen once, and those seen again and decoded joined.
    let (mut merged, mut joined) = (0u64, 0u64);
    loop {
        let tag = reader.remaining().as_ptr();
        let Some((number, value)) = reader.field().map_err(|error| error.at(tag))? else {
            return Ok(());
        };
        if number != previous && is_repeated::<T>(number) {
            target.reserve(number, 1 + run_after(reader, number), options);
        }
        previous = number;
        if T::MERGED_BITS != 0 && number < 64 && T::MERGED_BITS & (1 << number) != 0 {
            let bit = 1u64 << number;
            // The first occurrence is decoded as it comes; only a later one, which Go's
            // encoders never write, decodes them all again, joined.
            if merged & bit == 0 {
                merged |= bit;
            } else if joined & bit != 0 {
                // Decoded with the others.
                continue;
            } else if let Some(all) = joined_occurrences(bytes, number) {
                joined |= bit;
                target
                    .merge_field(number, WireValue::Bytes(&all), options)
                    .map_err(|error| error.at(tag))?;
                continue;
            }
        }
        if let Err(error) = target.merge_field(number, value, options) {
            // An entry Go reads loosely: retried as Go reads it, from this message's bytes.
            match value {
                WireValue::Bytes(entry) if listed(T::MAPS_BITS, T::MAPS, number) => {
                    let start = entry.as_ptr() as usize - bytes.as_ptr() as usize;
                    target
                        .merge_entry_as_go(number, &bytes[start..], entry.len(), options)
                        .map_err(|error| error.at(tag))?;
                }
                _ => return Err(error.at(tag)),
            }
        }
    }
}

/// Every occurrence of field `number` in the message `bytes` so far and after, joined: one
/// message that decodes as protobuf merges them. `None` when one is not length-delimited:
/// each occurrence is then decoded on its own, and that one refused where it stands. Reading
/// stops at malformed bytes, which the decode reports where it meets them.
#[cold]
fn joined_occurrences(bytes: &[u8], number: u32) -> Option<Vec<u8>> {
    let mut reader = Reader::new(bytes);
    let mut joined = Vec::new();
    while let Ok(Some((next, value))) = reader.field() {
        if next == number {
            let WireValue::Bytes(occurrence) = value else {
                return None;
            };
            joined.extend_from_slice(occurrence);
        }
    }
    Some(joined)
}

/// Whether field `number` of `T` is one of its [`Merge::REPEATED`].
#[inline(always)]
fn is_repeated<T: Merge>(number: u32) -> bool {
    listed(T::REPEATED_BITS, T::REPEATED, number)
}

/// Whether `number` is in `list`, whose numbers under 64 are `bits`.
#[inline(always)]
fn listed(bits: u64, list: &[u32], number: u32) -> bool {
    match 1u64.checked_shl(number) {
        Some(bit) => bits & bit != 0,
        None => list.contains(&number),
    }
}

/// `numbers` under 64 as the bits of a `u64`.
const fn bits_under_64(numbers: &[u32]) -> u64 {
    let mut bits = 0u64;
    let mut i = 0;
    while i < numbers.len() {
        if numbers[i] < 64 {
            bits |= 1 << numbers[i];
        }
        i += 1;
    }
    bits
}

/// How many fields numbered `number` follow `reader` before any other field. Counting reads
/// only the fields' tags and lengths; malformed bytes end the count, and the decode that
/// follows reports them.
#[inline]
fn run_after(mut reader: Reader<'_>, number: u32) -> usize {
    let mut count = 0;
    while let Ok(Some((next, _))) = reader.field() {
        if next != number {
            break;
        }
        count += 1;
    }
    count
}

/// Room for `additional` more elements in a repeated field (see [`Merge::reserve`]).
#[inline]
pub(crate) fn reserve<T, S: Slot<Vec<T>>>(slot: &mut S, additional: usize) {
    slot.slot().reserve_exact(additional);
}

/// Where a field's value goes: the field itself when k8s-openapi made it required, its `Some`
/// when optional.
pub(crate) trait Slot<T> {
    /// Replaces the value.
    fn set(&mut self, value: T);

    /// The value, made fresh first when the field is absent.
    fn slot(&mut self) -> &mut T
    where
        T: Zero;

    /// Makes the field absent, or its zero when k8s-openapi made it required: what a zero on
    /// the wire leaves of an `omitempty` field that an earlier occurrence set.
    fn clear(&mut self)
    where
        T: Zero;
}

impl<T> Slot<T> for T {
    #[inline]
    fn set(&mut self, value: T) {
        *self = value;
    }

    #[inline]
    fn slot(&mut self) -> &mut T {
        self
    }

    #[inline]
    fn clear(&mut self)
    where
        T: Zero,
    {
        *self = T::zero();
    }
}

impl<T> Slot<T> for Option<T> {
    #[inline]
    fn set(&mut self, value: T) {
        *self = Some(value);
    }

    #[inline]
    fn slot(&mut self) -> &mut T
    where
        T: Zero,
    {
        self.get_or_insert_with(T::zero)
    }

    #[inline]
    fn clear(&mut self) {
        *self = None;
    }
}

/// The value a message starts from before its fields arrive: `Default` where k8s-openapi
/// derives it, and for the few structs it does not (a required `Time` has no default) every
/// field's own zero. A required field absent on the wire keeps that zero, where serde would
/// refuse the object.
pub(crate) trait Zero {
    fn zero() -> Self;
}

macro_rules! zero_by_default {
    ($($ty:ty),* $(,)?) => {
        $(impl Zero for $ty {
            #[inline]
            fn zero() -> Self {
                Self::default()
            }
        })*
    };
}

zero_by_default!(bool, i32, i64, String, ByteString, Quantity);

impl<T> Zero for Option<T> {
    #[inline]
    fn zero() -> Self {
        None
    }
}

impl<T> Zero for Vec<T> {
    #[inline]
    fn zero() -> Self {
        Vec::new()
    }
}

impl<K, V> Zero for BTreeMap<K, V> {
    #[inline]
    fn zero() -> Self {
        BTreeMap::new()
    }
}

impl Zero for IntOrString {
    fn zero() -> Self {
        IntOrString::Int(0)
    }
}

/// Go's zero time, 0001-01-01T00:00:00Z: what a required time holds when Go left it unset.
fn go_zero_time() -> Timestamp {
    Timestamp::new(-62_135_596_800, 0).unwrap_or(Timestamp::UNIX_EPOCH)
}

impl Zero for Time {
    fn zero() -> Self {
        Time(go_zero_time())
    }
}

impl Zero for MicroTime {
    fn zero() -> Self {
        MicroTime(go_zero_time())
    }
}

impl Zero for FieldsV1 {
    fn zero() -> Self {
        FieldsV1(serde_json::Value::Null)
    }
}

impl Zero for RawExtension {
    fn zero() -> Self {
        RawExtension(serde_json::Value::Null)
    }
}

/// A single scalar, string or special value; `skip_zero` for an `omitempty` scalar (protobuf
/// writes its zero, JSON would leave it out) and for the types whose zero is JSON's `null`.
#[inline]
///
/// The last occurrence wins, as in Go: a zero that `skip_zero` skips still clears what an
/// earlier occurrence set.
pub(crate) fn single<T: Zero, S: Slot<T>>(
    slot: &mut S,
    value: WireValue<'_>,
    options: &DecodeOptions,
    skip_zero: bool,
    read: impl Fn(WireValue<'_>, &DecodeOptions) -> Result<T, Error>,
) -> Result<(), Error> {
    // Read first: even a value that is skipped must have the field's wire type, as in Go.
    let decoded = read(value, options)?;
    if skip_zero && value.is_zero() {
        slot.clear();
    } else {
        slot.set(decoded);
    }
    Ok(())
}

/// A single nested message, decoded in place.
#[inline]
///
/// A message that arrives twice is merged, as protobuf and Go's decoders do: the second
/// occurrence's fields are decoded into what the first left.
pub(crate) fn message<T: Merge + Zero, S: Slot<T>>(
    slot: &mut S,
    value: WireValue<'_>,
    options: &DecodeOptions,
) -> Result<(), Error> {
    merge(slot.slot(), value.bytes("message")?, options)
}

/// One element of a repeated field.
#[inline]
pub(crate) fn repeated<T, S: Slot<Vec<T>>>(
    slot: &mut S,
    value: WireValue<'_>,
    options: &DecodeOptions,
    read: impl Fn(WireValue<'_>, &DecodeOptions) -> Result<T, Error>,
) -> Result<(), Error> {
    let element = read(value, options)?;
    slot.slot().push(element);
    Ok(())
}

/// One element of a repeated message, decoded in place at the end of the list.
#[inline]
pub(crate) fn repeated_message<T: Merge + Zero, S: Slot<Vec<T>>>(
    slot: &mut S,
    value: WireValue<'_>,
    options: &DecodeOptions,
) -> Result<(), Error> {
    let bytes = value.bytes("message")?;
    let list = slot.slot();
    // Zeroed in its slot: `push(T::zero())` builds the element on the stack and copies it in,
    // 3.3 KB for a `Volume`, on every element.
    list.resize_with(list.len() + 1, T::zero);
    match list.last_mut() {
        Some(element) => merge(element, bytes, options),
        None => Ok(()),
    }
}

/// One entry of a repeated number: one element, or a packed run of them.
pub(crate) fn repeated_varint<T, S: Slot<Vec<T>>>(
    slot: &mut S,
    value: WireValue<'_>,
    options: &DecodeOptions,
    read: impl Fn(WireValue<'_>, &DecodeOptions) -> Result<T, Error>,
) -> Result<(), Error> {
    let list = slot.slot();
    match value {
        WireValue::Bytes(bytes) => {
            let mut reader = Reader::new(bytes);
            while !reader.is_empty() {
                list.push(read(WireValue::Varint(reader.varint()?), options)?);
            }
        }
        other => list.push(read(other, options)?),
    }
    Ok(())
}

/// One entry of a `map<string, V>`: a message with the key as field 1 and the value as field 2.
pub(crate) fn map<V, S: Slot<BTreeMap<String, V>>>(
    slot: &mut S,
    value: WireValue<'_>,
    options: &DecodeOptions,
    read: impl Fn(WireValue<'_>, &DecodeOptions) -> Result<V, Error>,
    zero: WireValue<'static>,
) -> Result<(), Error> {
    let mut reader = Reader::new(value.bytes("map entry")?);
    let mut key = None;
    let mut entry_value = None;
    while let Some((number, value)) = reader.field()? {
        match number {
            1 => key = Some(value),
            // Go decodes every occurrence: an earlier one must be a value too.
            2 => {
                if let Some(earlier) = entry_value.replace(value) {
                    read(earlier, options)?;
                }
            }
            _ => {}
        }
    }
    let key = match key {
        Some(key) => string(key, options)?,
        None => String::new(),
    };
    let entry_value = read(entry_value.unwrap_or(zero), options)?;
    slot.slot().insert(key, entry_value);
    Ok(())
}

/// One entry of a `map<string, V>` read as Go's decoders read it ([`wire::go_map_entry`]):
/// what [`merge`] falls back on when [`map`] refuses an entry.
#[cold]
pub(crate) fn map_as_go<V, S: Slot<BTreeMap<String, V>>>(
    slot: &mut S,
    within: &[u8],
    len: usize,
    options: &DecodeOptions,
    read: impl Fn(WireValue<'_>, &DecodeOptions) -> Result<V, Error>,
    zero: WireValue<'static>,
) -> Result<(), Error> {
    let varint = matches!(zero, WireValue::Varint(_));
    let mut last = None;
    let key = wire::go_map_entry(within, len, varint, |value| {
        last = Some(read(value, options)?);
        Ok(())
    })?;
    let key = match key {
        Some(key) => owned_str(key)?,
        None => String::new(),
    };
    let value = match last {
        Some(value) => value,
        None => read(zero, options)?,
    };
    slot.slot().insert(key, value);
    Ok(())
}

/// Whether every byte is ASCII, read eight bytes at a time (the last word overlapping the one
/// before it) where the standard library's checks read a slice this short byte by byte.
fn is_ascii(bytes: &[u8]) -> bool {
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    if let Some(last) = bytes.last_chunk::<8>() {
        let (words, _) = bytes.as_chunks::<8>();
        let any = words.iter().fold(u64::from_ne_bytes(*last), |any, word| {
            any | u64::from_ne_bytes(*word)
        });
        any & HIGH == 0
    } else if let (Some(first), Some(last)) = (bytes.first_chunk::<4>(), bytes.last_chunk::<4>()) {
        (u32::from_ne_bytes(*first) | u32::from_ne_bytes(*last)) & 0x8080_8080 == 0
    } else {
        bytes.iter().fold(0, |any, byte| any | byte) < 0x80
    }
}

/// `bytes` copied into a `String`; bytes that are not UTF-8 come out as Go's JSON shows them
/// ([`go_text`]).
///
/// Nearly every string of an object is ASCII and short (a Pod's average about 14 bytes), and
/// `str::from_utf8` walks a string that short byte by byte, about 100 instructions a string.
/// [`is_ascii`] reads it a word at a time; only bytes that are not all ASCII take the full check.
#[allow(
    unsafe_code,
    reason = "a Pod's decode counts 118.2k instructions (callgrind, decode_many) with this and \
              132.9k with str::from_utf8; it skips only a second check of bytes proven ASCII"
)]
fn owned_str(bytes: &[u8]) -> Result<String, Error> {
    if !is_ascii(bytes) {
        return Ok(go_text(bytes).into_owned());
    }
    let copy = bytes.to_vec();
    // SAFETY: every byte is ASCII, and ASCII is valid UTF-8.
    Ok(unsafe { String::from_utf8_unchecked(copy) })
}

pub(crate) fn bool(value: WireValue<'_>, _: &DecodeOptions) -> Result<bool, Error> {
    Ok(value.integer("bool")? != 0)
}

pub(crate) fn int32(value: WireValue<'_>, _: &DecodeOptions) -> Result<i32, Error> {
    // Negative int32s travel as sign-extended 64-bit varints: truncation is the decoding.
    Ok(value.integer("int32")? as i32)
}

pub(crate) fn int64(value: WireValue<'_>, _: &DecodeOptions) -> Result<i64, Error> {
    Ok(value.integer("int64")? as i64)
}

pub(crate) fn string(value: WireValue<'_>, _: &DecodeOptions) -> Result<String, Error> {
    owned_str(value.bytes("string")?)
}

pub(crate) fn bytes(value: WireValue<'_>, _: &DecodeOptions) -> Result<ByteString, Error> {
    Ok(ByteString(value.bytes("bytes")?.to_vec()))
}

/// The text Go holds: `ParseQuantity`'s checks, `Quantity.String`'s form ([`quantity`]).
pub(crate) fn quantity(value: WireValue<'_>, _: &DecodeOptions) -> Result<Quantity, Error> {
    Ok(Quantity(quantity::from_value(value)?.into_owned()))
}

pub(crate) fn int_or_string(value: WireValue<'_>, _: &DecodeOptions) -> Result<IntOrString, Error> {
    Ok(match int_or_string_parts(value.bytes("IntOrString")?)? {
        IntOrStringParts::String(text) => IntOrString::String(owned_str(text)?),
        IntOrStringParts::Int(int) => IntOrString::Int(int),
    })
}

/// `{seconds = 1, nanos = 2}` as Go holds it ([`time::from_wire`]), cut to microseconds for a
/// `MicroTime` as its JSON text is.
fn timestamp(value: WireValue<'_>, micro: bool) -> Result<Timestamp, Error> {
    let (seconds, nanos) = time::from_wire(value.bytes("time")?, micro)?;
    Timestamp::new(seconds, nanos / 1_000 * 1_000).map_err(|_| Error::Malformed(time::OUT_OF_RANGE))
}

pub(crate) fn time(value: WireValue<'_>, _: &DecodeOptions) -> Result<Time, Error> {
    timestamp(value, false).map(Time)
}

pub(crate) fn micro_time(value: WireValue<'_>, _: &DecodeOptions) -> Result<MicroTime, Error> {
    timestamp(value, true).map(MicroTime)
}

/// The JSON document inside `{raw = 1}`.
fn embedded_json(value: WireValue<'_>) -> Result<serde_json::Value, Error> {
    json(embedded_raw(value)?)
}

/// The bytes of the JSON document inside `{raw = 1}`.
fn embedded_raw(value: WireValue<'_>) -> Result<&[u8], Error> {
    Ok(match single_field(value.bytes("embedded JSON")?, 1)? {
        Some(raw) => raw.bytes("raw JSON")?,
        None => b"null",
    })
}

/// `raw` parsed; a document that is not UTF-8 is read as Go's JSON shows it ([`go_text`]),
/// at the cost of a second parse only then.
fn json(raw: &[u8]) -> Result<serde_json::Value, Error> {
    let error = |error: serde_json::Error| Error::custom(format_args!("embedded JSON: {error}"));
    serde_json::from_slice(raw).or_else(|first| match go_text(raw) {
        Cow::Owned(text) => serde_json::from_str(&text).map_err(error),
        Cow::Borrowed(_) => Err(error(first)),
    })
}

/// The tree parser checks the document's UTF-8 once; anything it does not take (a document
/// that is not UTF-8 included) goes to [`json`].
pub(crate) fn fields_v1(value: WireValue<'_>, _: &DecodeOptions) -> Result<FieldsV1, Error> {
    let raw = embedded_raw(value)?;
    match super::object_tree::parse(raw) {
        Some(tree) => Ok(FieldsV1(tree)),
        None => json(raw).map(FieldsV1),
    }
}

pub(crate) fn raw_extension(
    value: WireValue<'_>,
    _: &DecodeOptions,
) -> Result<RawExtension, Error> {
    embedded_json(value).map(RawExtension)
}

/// A named `[]string` (`ExtraValue`): `{repeated items = 1}`.
pub(crate) fn string_list(
    value: WireValue<'_>,
    options: &DecodeOptions,
) -> Result<Vec<String>, Error> {
    let mut items = Vec::new();
    let mut reader = Reader::new(value.bytes("string list")?);
    while let Some((number, value)) = reader.field()? {
        if number == 1 {
            items.push(string(value, options)?);
        }
    }
    Ok(items)
}

/// A nested message as a value (an element of a list, a value of a map).
pub(crate) fn owned<T: Merge + Zero>(
    value: WireValue<'_>,
    options: &DecodeOptions,
) -> Result<T, Error> {
    let mut target = T::zero();
    merge(&mut target, value.bytes("message")?, options)?;
    Ok(target)
}

/// The fields of an embedded Go struct that JSON (and k8s-openapi) flattens into its parent.
#[inline]
pub(crate) fn inline(
    value: WireValue<'_>,
    mut field: impl FnMut(u32, WireValue<'_>) -> Result<(), Error>,
) -> Result<(), Error> {
    let mut reader = Reader::new(value.bytes("inlined message")?);
    while let Some((number, value)) = reader.field()? {
        field(number, value)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Numbered;

    impl Merge for Numbered {
        const REPEATED: &'static [u32] = &[1, 17, 63, 64, 200];

        fn merge_field(
            &mut self,
            _: u32,
            _: WireValue<'_>,
            _: &DecodeOptions,
        ) -> Result<(), Error> {
            Ok(())
        }
    }

    proptest::proptest! {
        #[test]
        fn the_ascii_check_agrees_with_the_standard_one(bytes in proptest::collection::vec(
            proptest::sample::select(vec![0u8, b'a', b'~', 0x7f, 0x80, 0xc3, 0xa9, 0xff]),
            0..40,
        )) {
            proptest::prop_assert_eq!(is_ascii(&bytes), bytes.is_ascii());
        }

        #[test]
        fn strings_are_kept_exactly_when_they_are_utf8(bytes in proptest::collection::vec(
            proptest::sample::select(vec![0u8, b'a', b'~', 0x7f, 0x80, 0xc3, 0xa9, 0xe2, 0xff]),
            0..40,
        )) {
            let expected = go_text(&bytes).into_owned();
            proptest::prop_assert_eq!(owned_str(&bytes).ok(), Some(expected));
        }
    }

    #[test]
    fn one_high_byte_anywhere_fails_the_ascii_check() {
        for len in 0..=40 {
            let ascii = vec![b'x'; len];
            assert!(is_ascii(&ascii), "{len} bytes of ASCII");
            for at in 0..len {
                let mut bytes = ascii.clone();
                bytes[at] = 0x80;
                assert!(!is_ascii(&bytes), "byte {at} of {len} is 0x80");
            }
        }
    }

    #[test]
    fn repeated_numbers_are_found_above_and_below_64() {
        assert_eq!(Numbered::REPEATED_BITS, 1 << 1 | 1 << 17 | 1 << 63);
        let found: Vec<u32> = (0..=300).filter(|&n| is_repeated::<Numbered>(n)).collect();
        assert_eq!(found, Numbered::REPEATED);
    }
}
