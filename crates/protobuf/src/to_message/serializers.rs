//! serde's `Serializer` for each place a value can take in a message: a message's fields, a
//! repeated field, a map field, a map key, and one value of a known type. What a JSON shape never
//! holds there is refused with an error.

use serde::{
    Serialize,
    ser::{self, Impossible},
};

use super::{
    KeySer, MapEntries, MapFieldSer, MessageFields, MessageSer, NestedFields, SeqSer, StringItems,
    StringItemsOrNone, ValueSer, open,
};
use crate::{Error, schema::Ty};

/// Refuses what a JSON shape never holds where a value is expected.
macro_rules! refuse {
    ($($method:ident($($arg:ty),*) -> $ret:ty;)*) => {
        $(fn $method(self, $(_: $arg),*) -> Result<$ret, Error> {
            Err(Error::custom(concat!("cannot encode a value of the kind `", stringify!($method), "`")))
        })*
    };
}

/// Refuses every scalar: where a container is expected.
macro_rules! refuse_scalars {
    ($ok:ty) => {
        refuse! {
            serialize_bool(bool) -> $ok;
            serialize_i8(i8) -> $ok;
            serialize_i16(i16) -> $ok;
            serialize_i32(i32) -> $ok;
            serialize_i64(i64) -> $ok;
            serialize_u8(u8) -> $ok;
            serialize_u16(u16) -> $ok;
            serialize_u32(u32) -> $ok;
            serialize_u64(u64) -> $ok;
            serialize_f32(f32) -> $ok;
            serialize_f64(f64) -> $ok;
            serialize_char(char) -> $ok;
            serialize_bytes(&[u8]) -> $ok;
            serialize_unit_struct(&'static str) -> $ok;
        }
    };
}

/// Refuses tuples and struct variants, which no JSON shape has.
macro_rules! refuse_tuples {
    ($ok:ty) => {
        refuse! {
            serialize_tuple(usize) -> Impossible<$ok, Error>;
            serialize_tuple_struct(&'static str, usize) -> Impossible<$ok, Error>;
            serialize_tuple_variant(&'static str, u32, &'static str, usize) -> Impossible<$ok, Error>;
            serialize_struct_variant(&'static str, u32, &'static str, usize) -> Impossible<$ok, Error>;
        }
    };
}

/// Looks through `Some` and newtype structs, and refuses newtype variants.
macro_rules! see_through {
    ($ok:ty) => {
        fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<$ok, Error> {
            value.serialize(self)
        }
        fn serialize_newtype_struct<T: Serialize + ?Sized>(
            self,
            _: &'static str,
            value: &T,
        ) -> Result<$ok, Error> {
            value.serialize(self)
        }
        fn serialize_newtype_variant<T: Serialize + ?Sized>(
            self,
            _: &'static str,
            _: u32,
            _: &'static str,
            _: &T,
        ) -> Result<$ok, Error> {
            Err(Error::custom("cannot encode an enum variant with a value"))
        }
    };
}

impl<'w> ser::Serializer for ValueSer<'w> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = StringItemsOrNone<'w>;
    type SerializeTuple = Impossible<(), Error>;
    type SerializeTupleStruct = Impossible<(), Error>;
    type SerializeTupleVariant = Impossible<(), Error>;
    type SerializeMap = NestedFields<'w>;
    type SerializeStruct = NestedFields<'w>;
    type SerializeStructVariant = Impossible<(), Error>;

    fn serialize_bool(self, value: bool) -> Result<(), Error> {
        match self.ty {
            Ty::Bool => {
                self.writer.varint_field(self.number, u64::from(value));
                Ok(())
            }
            _ => Err(self.mismatch("a bool")),
        }
    }

    fn serialize_i8(self, value: i8) -> Result<(), Error> {
        self.integer(i64::from(value) as u64)
    }
    fn serialize_i16(self, value: i16) -> Result<(), Error> {
        self.integer(i64::from(value) as u64)
    }
    fn serialize_i32(self, value: i32) -> Result<(), Error> {
        self.integer(i64::from(value) as u64)
    }
    fn serialize_i64(self, value: i64) -> Result<(), Error> {
        self.integer(value as u64)
    }
    fn serialize_u8(self, value: u8) -> Result<(), Error> {
        self.integer(u64::from(value))
    }
    fn serialize_u16(self, value: u16) -> Result<(), Error> {
        self.integer(u64::from(value))
    }
    fn serialize_u32(self, value: u32) -> Result<(), Error> {
        self.integer(u64::from(value))
    }
    fn serialize_u64(self, value: u64) -> Result<(), Error> {
        self.integer(value)
    }
    fn serialize_f32(self, value: f32) -> Result<(), Error> {
        self.float(f64::from(value))
    }
    fn serialize_f64(self, value: f64) -> Result<(), Error> {
        self.float(value)
    }
    fn serialize_char(self, value: char) -> Result<(), Error> {
        self.text(value.encode_utf8(&mut [0; 4]))
    }
    fn serialize_str(self, value: &str) -> Result<(), Error> {
        self.text(value)
    }
    fn serialize_bytes(self, value: &[u8]) -> Result<(), Error> {
        match self.ty {
            Ty::Bytes | Ty::String => {
                self.writer.bytes_field(self.number, value);
                Ok(())
            }
            _ => Err(self.mismatch("bytes")),
        }
    }
    fn serialize_none(self) -> Result<(), Error> {
        Ok(())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Error> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Error> {
        Ok(())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), Error> {
        Ok(())
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<(), Error> {
        self.text(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<(), Error> {
        Err(self.mismatch("an enum variant with a value"))
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<StringItemsOrNone<'w>, Error> {
        match self.ty {
            Ty::StringList => {
                // The items go into one nested message, whose length is known at `end`.
                let at = open(self.writer, self.number);
                Ok(StringItemsOrNone {
                    items: StringItems {
                        writer: self.writer,
                    },
                    at,
                })
            }
            _ => Err(self.mismatch("an array")),
        }
    }
    fn serialize_map(self, _: Option<usize>) -> Result<NestedFields<'w>, Error> {
        self.serialize_struct("", 0)
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<NestedFields<'w>, Error> {
        let Ty::Message(message) = self.ty else {
            return Err(self.mismatch("an object"));
        };
        let at = open(self.writer, self.number);
        Ok(NestedFields {
            fields: MessageFields {
                writer: self.writer,
                message,
                key: None,
            },
            at,
        })
    }

    refuse_tuples!(());
}

impl<'w> ser::Serializer for MessageSer<'w> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Impossible<(), Error>;
    type SerializeTuple = Impossible<(), Error>;
    type SerializeTupleStruct = Impossible<(), Error>;
    type SerializeTupleVariant = Impossible<(), Error>;
    type SerializeMap = MessageFields<'w>;
    type SerializeStruct = MessageFields<'w>;
    type SerializeStructVariant = Impossible<(), Error>;

    fn serialize_map(self, _: Option<usize>) -> Result<MessageFields<'w>, Error> {
        Ok(MessageFields {
            writer: self.writer,
            message: self.message,
            key: None,
        })
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<MessageFields<'w>, Error> {
        self.serialize_map(None)
    }

    see_through!(());
    refuse_scalars!(());
    refuse_tuples!(());
    refuse! {
        serialize_str(&str) -> ();
        serialize_none() -> ();
        serialize_unit() -> ();
        serialize_unit_variant(&'static str, u32, &'static str) -> ();
        serialize_seq(Option<usize>) -> Impossible<(), Error>;
    }
}

impl ser::Serializer for SeqSer<'_> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Self;
    type SerializeTuple = Impossible<(), Error>;
    type SerializeTupleStruct = Impossible<(), Error>;
    type SerializeTupleVariant = Impossible<(), Error>;
    type SerializeMap = Impossible<(), Error>;
    type SerializeStruct = Impossible<(), Error>;
    type SerializeStructVariant = Impossible<(), Error>;

    fn serialize_seq(self, _: Option<usize>) -> Result<Self, Error> {
        Ok(self)
    }
    fn serialize_none(self) -> Result<(), Error> {
        Ok(())
    }
    fn serialize_unit(self) -> Result<(), Error> {
        Ok(())
    }

    see_through!(());
    refuse_scalars!(());
    refuse_tuples!(());
    refuse! {
        serialize_str(&str) -> ();
        serialize_unit_variant(&'static str, u32, &'static str) -> ();
        serialize_map(Option<usize>) -> Impossible<(), Error>;
        serialize_struct(&'static str, usize) -> Impossible<(), Error>;
    }
}

impl<'w> ser::Serializer for MapFieldSer<'w> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Impossible<(), Error>;
    type SerializeTuple = Impossible<(), Error>;
    type SerializeTupleStruct = Impossible<(), Error>;
    type SerializeTupleVariant = Impossible<(), Error>;
    type SerializeMap = MapEntries<'w>;
    type SerializeStruct = Impossible<(), Error>;
    type SerializeStructVariant = Impossible<(), Error>;

    fn serialize_map(self, _: Option<usize>) -> Result<MapEntries<'w>, Error> {
        Ok(MapEntries {
            field: self,
            key: None,
        })
    }
    fn serialize_none(self) -> Result<(), Error> {
        Ok(())
    }
    fn serialize_unit(self) -> Result<(), Error> {
        Ok(())
    }

    see_through!(());
    refuse_scalars!(());
    refuse_tuples!(());
    refuse! {
        serialize_str(&str) -> ();
        serialize_unit_variant(&'static str, u32, &'static str) -> ();
        serialize_seq(Option<usize>) -> Impossible<(), Error>;
        serialize_struct(&'static str, usize) -> Impossible<(), Error>;
    }
}

impl ser::Serializer for KeySer {
    type Ok = String;
    type Error = Error;
    type SerializeSeq = Impossible<String, Error>;
    type SerializeTuple = Impossible<String, Error>;
    type SerializeTupleStruct = Impossible<String, Error>;
    type SerializeTupleVariant = Impossible<String, Error>;
    type SerializeMap = Impossible<String, Error>;
    type SerializeStruct = Impossible<String, Error>;
    type SerializeStructVariant = Impossible<String, Error>;

    fn serialize_str(self, value: &str) -> Result<String, Error> {
        Ok(value.to_owned())
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<String, Error> {
        Ok(variant.to_owned())
    }

    see_through!(String);
    refuse_scalars!(String);
    refuse_tuples!(String);
    refuse! {
        serialize_none() -> String;
        serialize_unit() -> String;
        serialize_seq(Option<usize>) -> Impossible<String, Error>;
        serialize_map(Option<usize>) -> Impossible<String, Error>;
        serialize_struct(&'static str, usize) -> Impossible<String, Error>;
    }
}
