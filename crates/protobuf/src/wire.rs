//! Protobuf's wire format: varints, tags and length-delimited values.

use crate::Error;

/// A value as it sits on the wire, before the schema says what it means.
#[derive(Debug, Clone, Copy)]
pub(crate) enum WireValue<'de> {
    Varint(u64),
    Fixed64(u64),
    Fixed32(u32),
    Bytes(&'de [u8]),
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

    /// The integer of a varint or fixed-width value.
    pub(crate) fn integer(self, what: &'static str) -> Result<u64, Error> {
        match self {
            WireValue::Varint(value) | WireValue::Fixed64(value) => Ok(value),
            WireValue::Fixed32(value) => Ok(u64::from(value)),
            WireValue::Bytes(_) => Err(Error::WireType {
                expected: what,
                found: "length-delimited",
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
        }
    }

    fn kind(self) -> &'static str {
        match self {
            WireValue::Varint(_) => "varint",
            WireValue::Fixed64(_) => "fixed64",
            WireValue::Fixed32(_) => "fixed32",
            WireValue::Bytes(_) => "length-delimited",
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
            Error::Truncated("varint")
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
        let bytes = self.take(N, "packed fixed-width value")?;
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
        // A match, not `ok_or`: `Error` has drop glue, so `ok_or` builds and drops one per field.
        let number = match u32::try_from(tag >> 3) {
            Ok(number) if number != 0 => number,
            _ => return Err(Error::Malformed("a field number out of range")),
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
                WireValue::Bytes(self.take(len, "length-delimited value")?)
            }
            0 => WireValue::Varint(self.varint()?),
            1 => {
                let bytes = self.take(8, "fixed64")?;
                WireValue::Fixed64(u64::from_le_bytes(bytes.try_into().unwrap_or([0; 8])))
            }
            5 => {
                let bytes = self.take(4, "fixed32")?;
                WireValue::Fixed32(u32::from_le_bytes(bytes.try_into().unwrap_or([0; 4])))
            }
            3 | 4 => return Err(Error::Malformed("a group (wire types 3 and 4)")),
            _ => return Err(Error::Malformed("an unknown wire type")),
        };
        Ok(Some((number, value)))
    }

    /// The number of the next field, without consuming it.
    pub(crate) fn peek_number(&self) -> Option<u32> {
        let mut copy = *self;
        copy.varint()
            .ok()
            .and_then(|tag| u32::try_from(tag >> 3).ok())
    }
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
