//! Protobuf's wire format: varints, tags and length-delimited values.

use std::borrow::Cow;

use crate::Error;

/// A string field's bytes as text, as Go's JSON encoder writes them: as they are when they are
/// UTF-8, else with U+FFFD for each byte of every invalid sequence (Go's decoders keep any
/// bytes in a string, which a Rust `String` cannot; its JSON shows them so).
pub(crate) fn go_text(bytes: &[u8]) -> Cow<'_, str> {
    let mut rest = match std::str::from_utf8(bytes) {
        Ok(text) => return Cow::Borrowed(text),
        Err(_) => bytes,
    };
    let mut text = String::with_capacity(bytes.len() + 8);
    loop {
        match std::str::from_utf8(rest) {
            Ok(valid) => {
                text.push_str(valid);
                return Cow::Owned(text);
            }
            Err(error) => {
                let (valid, after) = rest.split_at(error.valid_up_to());
                // The first `valid_up_to` bytes are UTF-8: this check cannot fail.
                text.push_str(std::str::from_utf8(valid).unwrap_or_default());
                let invalid = error.error_len().unwrap_or(after.len());
                for _ in 0..invalid {
                    text.push(char::REPLACEMENT_CHARACTER);
                }
                rest = &after[invalid..];
            }
        }
    }
}

/// A value as it sits on the wire, before the schema says what it means.
#[derive(Debug, Clone, Copy)]
pub(crate) enum WireValue<'de> {
    Varint(u64),
    Fixed64(u64),
    Fixed32(u32),
    Bytes(&'de [u8]),
    /// A group (wire types 3 to 4), which no Kubernetes message has: skipped as an unknown
    /// field, refused as a known one, as Go's decoders do.
    Group,
}

impl<'de> WireValue<'de> {
    /// The bytes of a length-delimited value, or an error naming what was expected.
    pub(crate) fn bytes(self, what: &'static str) -> Result<&'de [u8], Error> {
        match self {
            WireValue::Bytes(bytes) => Ok(bytes),
            other => Err(Error::WireType {
                expected: what,
                found: other.kind(),
            }),
        }
    }

    /// The integer of a varint: what every integer and bool field of Kubernetes' messages is.
    /// Any other wire type is an error, as in Go's generated decoders.
    pub(crate) fn integer(self, what: &'static str) -> Result<u64, Error> {
        match self {
            WireValue::Varint(value) => Ok(value),
            other => Err(Error::WireType {
                expected: what,
                found: other.kind(),
            }),
        }
    }

    /// The bits of a fixed 64-bit value (a `double`).
    pub(crate) fn fixed64(self, what: &'static str) -> Result<u64, Error> {
        match self {
            WireValue::Fixed64(value) => Ok(value),
            other => Err(Error::WireType {
                expected: what,
                found: other.kind(),
            }),
        }
    }

    /// The bits of a fixed 32-bit value (a `float`).
    pub(crate) fn fixed32(self, what: &'static str) -> Result<u32, Error> {
        match self {
            WireValue::Fixed32(value) => Ok(value),
            other => Err(Error::WireType {
                expected: what,
                found: other.kind(),
            }),
        }
    }

    /// Whether this is the zero value of its type: protobuf writes it, JSON's `omitempty`
    /// would not.
    pub(crate) fn is_zero(self) -> bool {
        match self {
            WireValue::Varint(value) | WireValue::Fixed64(value) => value == 0,
            WireValue::Fixed32(value) => value == 0,
            WireValue::Bytes(bytes) => bytes.is_empty(),
            WireValue::Group => false,
        }
    }

    fn kind(self) -> &'static str {
        match self {
            WireValue::Varint(_) => "varint",
            WireValue::Fixed64(_) => "fixed64",
            WireValue::Fixed32(_) => "fixed32",
            WireValue::Bytes(_) => "length-delimited",
            WireValue::Group => "group",
        }
    }
}

/// A cursor over one message's bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Reader<'de> {
    bytes: &'de [u8],
}

impl<'de> Reader<'de> {
    pub(crate) fn new(bytes: &'de [u8]) -> Self {
        Self { bytes }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The bytes not read yet.
    pub(crate) fn remaining(&self) -> &'de [u8] {
        self.bytes
    }

    #[inline]
    pub(crate) fn varint(&mut self) -> Result<u64, Error> {
        let mut value = 0u64;
        for (index, &byte) in self.bytes.iter().enumerate().take(10) {
            value |= u64::from(byte & 0x7f) << (7 * index);
            if byte < 0x80 {
                self.bytes = &self.bytes[index + 1..];
                return Ok(value);
            }
        }
        Err(if self.bytes.len() < 10 {
            Error::Truncated("a varint")
        } else {
            Error::Malformed("a varint longer than 10 bytes")
        })
    }

    #[inline]
    fn take(&mut self, len: usize, what: &'static str) -> Result<&'de [u8], Error> {
        if self.bytes.len() < len {
            return Err(Error::Truncated(what));
        }
        let (head, rest) = self.bytes.split_at(len);
        self.bytes = rest;
        Ok(head)
    }

    /// The next `N` bytes, for a fixed-width element of a packed run.
    pub(crate) fn take_fixed<const N: usize>(&mut self) -> Result<[u8; N], Error> {
        let bytes = self.take(N, "a packed fixed-width value")?;
        let mut out = [0; N];
        out.copy_from_slice(bytes);
        Ok(out)
    }

    /// The next field's number and value; `None` at the end of the message.
    #[inline(always)]
    pub(crate) fn field(&mut self) -> Result<Option<(u32, WireValue<'de>)>, Error> {
        let tag = match self.bytes {
            [] => return Ok(None),
            // Fields 1 to 15 have a one-byte tag: most fields of every Kubernetes message.
            [first, rest @ ..] if *first < 0x80 => {
                self.bytes = rest;
                u64::from(*first)
            }
            _ => self.varint()?,
        };
        let Some(number) = field_number(tag) else {
            return Err(Error::Malformed("a field number that is zero or negative"));
        };
        let value = match tag & 7 {
            2 => {
                let len = match self.bytes {
                    // Values under 128 bytes have a one-byte length: most strings.
                    [first, rest @ ..] if *first < 0x80 => {
                        self.bytes = rest;
                        usize::from(*first)
                    }
                    _ => usize::try_from(self.varint()?)
                        .map_err(|_| Error::Malformed("a length out of range"))?,
                };
                WireValue::Bytes(self.take(len, "a length-delimited value")?)
            }
            0 => WireValue::Varint(self.varint()?),
            1 => {
                let bytes = self.take(8, "a fixed64")?;
                WireValue::Fixed64(u64::from_le_bytes(bytes.try_into().unwrap_or([0; 8])))
            }
            5 => {
                let bytes = self.take(4, "a fixed32")?;
                WireValue::Fixed32(u32::from_le_bytes(bytes.try_into().unwrap_or([0; 4])))
            }
            3 => {
                self.skip_group()?;
                WireValue::Group
            }
            4 => return Err(Error::Malformed("the end of a group that never started")),
            _ => return Err(Error::Malformed("an unknown wire type")),
        };
        Ok(Some((number, value)))
    }

    /// The number of the next field, without consuming it.
    pub(crate) fn peek_number(&self) -> Option<u32> {
        let mut copy = *self;
        copy.varint().ok().and_then(field_number)
    }

    /// Skips the rest of a group whose start was just read, nested groups included, through
    /// its end, as Go's `skipGenerated` does (which does not match the end's number either).
    fn skip_group(&mut self) -> Result<(), Error> {
        let mut depth = 1usize;
        while depth > 0 {
            if self.bytes.is_empty() {
                return Err(Error::Truncated("a group"));
            }
            let tag = self.varint()?;
            match tag & 7 {
                0 => drop(self.varint()?),
                1 => drop(self.take(8, "a fixed64")?),
                2 => {
                    let len = usize::try_from(self.varint()?)
                        .map_err(|_| Error::Malformed("a length out of range"))?;
                    self.take(len, "a length-delimited value")?;
                }
                3 => depth += 1,
                4 => depth -= 1,
                5 => drop(self.take(4, "a fixed32")?),
                _ => return Err(Error::Malformed("an unknown wire type")),
            }
        }
        Ok(())
    }
}

/// One entry of a `map<…>` field as Go's generated decoders read it, which is looser than
/// protobuf: `within` is the enclosing message's bytes from the entry's first byte to the
/// message's end, and `len` the entry's length.
///
/// Go reads fields 1 (the key) and 2 (the value) as length-delimited whatever their wire type
/// (a varint when `varint` values), bounds each by the enclosing message's end rather than
/// the entry's, and skips any other field (field 0 included) as its `skipGenerated` does. A
/// strict read of the entry that gives a key and a value of their wire types gives these, so
/// this is what the decoders fall back on when that fails. `on_value` sees every occurrence
/// of the value, as Go decodes each; the key is the last one's.
pub(crate) fn go_map_entry<'de>(
    within: &'de [u8],
    len: usize,
    varint: bool,
    mut on_value: impl FnMut(WireValue<'de>) -> Result<(), Error>,
) -> Result<Option<&'de [u8]>, Error> {
    let mut reader = Reader::new(within);
    let read = |reader: &Reader<'_>| within.len() - reader.bytes.len();
    let mut key = None;
    while read(&reader) < len {
        let before = reader;
        let tag = reader.varint()?;
        match (tag >> 3) as u32 as i32 {
            1 => key = Some(reader.go_bytes()?),
            2 if varint => on_value(WireValue::Varint(reader.varint()?))?,
            2 => on_value(WireValue::Bytes(reader.go_bytes()?))?,
            _ => {
                reader = before;
                reader.skip_as_go()?;
                if read(&reader) > len {
                    return Err(Error::Truncated("a map entry"));
                }
            }
        }
    }
    Ok(key)
}

impl<'de> Reader<'de> {
    /// A length and that many bytes, whatever the tag before said.
    fn go_bytes(&mut self) -> Result<&'de [u8], Error> {
        let len = usize::try_from(self.varint()?)
            .ok()
            .filter(|&len| i64::try_from(len).is_ok())
            .ok_or(Error::Malformed("a length out of range"))?;
        self.take(len, "a length-delimited value")
    }

    /// Skips one field, tag included, as Go's `skipGenerated` does: whatever its number.
    fn skip_as_go(&mut self) -> Result<(), Error> {
        let tag = self.varint()?;
        match tag & 7 {
            0 => drop(self.varint()?),
            1 => drop(self.take(8, "a fixed64")?),
            2 => drop(self.go_bytes()?),
            3 => self.skip_group()?,
            4 => return Err(Error::Malformed("the end of a group that never started")),
            5 => drop(self.take(4, "a fixed32")?),
            _ => return Err(Error::Malformed("an unknown wire type")),
        }
        Ok(())
    }
}

/// The field number of `tag` as Go's generated decoders read it: the low 32 bits of
/// `tag >> 3` as an `int32`, which must be positive.
#[inline(always)]
fn field_number(tag: u64) -> Option<u32> {
    let number = (tag >> 3) as u32;
    (number as i32 > 0).then_some(number)
}

/// Appends protobuf fields to a buffer.
#[derive(Debug, Default)]
pub(crate) struct Writer {
    pub(crate) buf: Vec<u8>,
}

impl Writer {
    pub(crate) fn varint(&mut self, mut value: u64) {
        while value >= 0x80 {
            self.buf.push((value as u8) | 0x80);
            value >>= 7;
        }
        self.buf.push(value as u8);
    }

    pub(crate) fn tag(&mut self, number: u32, wire_type: u8) {
        self.varint((u64::from(number) << 3) | u64::from(wire_type));
    }

    pub(crate) fn varint_field(&mut self, number: u32, value: u64) {
        self.tag(number, 0);
        self.varint(value);
    }

    pub(crate) fn bytes_field(&mut self, number: u32, bytes: &[u8]) {
        self.tag(number, 2);
        self.varint(bytes.len() as u64);
        self.buf.extend_from_slice(bytes);
    }

    /// Writes field `number` as a nested message that `write` fills in.
    pub(crate) fn message_field<E>(
        &mut self,
        number: u32,
        write: impl FnOnce(&mut Writer) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut nested = Writer::default();
        write(&mut nested)?;
        self.bytes_field(number, &nested.buf);
        Ok(())
    }
}

#[cfg(test)]
mod text_tests {
    use super::go_text;

    #[test]
    fn invalid_bytes_become_one_replacement_each_as_in_go() {
        assert_eq!(go_text(b"plain"), "plain");
        assert!(matches!(go_text(b"plain"), std::borrow::Cow::Borrowed(_)));
        // A lone continuation byte, a truncated three-byte sequence followed by ASCII, a
        // truncated sequence at the end: Go's utf8.DecodeRune takes one byte per error.
        assert_eq!(go_text(b"a\x80b"), "a\u{fffd}b");
        assert_eq!(go_text(b"\xe6\x97A"), "\u{fffd}\u{fffd}A");
        assert_eq!(go_text("日本".as_bytes()), "日本");
        assert_eq!(go_text(b"x\xe6\x97"), "x\u{fffd}\u{fffd}");
        assert_eq!(go_text(b"\xff\xfe"), "\u{fffd}\u{fffd}");
    }
}
