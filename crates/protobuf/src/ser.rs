//! JSON to protobuf: what a server (kinformer-testing's fake) does to answer a protobuf request
//! from the JSON it stores.

use serde_json::{Map, Value};

use crate::{
    Error,
    envelope::{encode_envelope, message_for},
    schema::{Field, Message, Shape, Ty},
    to_message::write_text,
    wire::Writer,
};

/// Encodes a JSON object as the protobuf message `message`, byte for byte as kube-apiserver's
/// Go encoder writes the same object.
///
/// Keys the table does not name are dropped, as a Go server drops what its struct does not
/// hold. A field that is absent or `null` is left out where Go's field is a pointer, slice or
/// map, and written as its zero value where Go's is a value (a string, a number, a struct),
/// as Go's generated `Marshal` writes it.
///
/// # Errors
///
/// [`Error::Custom`] naming the field when a value does not fit its type (a string where a
/// number belongs, an unparsable time).
pub fn encode_message(object: &Value, message: &'static Message) -> Result<Vec<u8>, Error> {
    encode(object, message, true)
}

/// [`encode_message`] without the zero values JSON leaves out: the fields `object` holds and
/// nothing else, as [`to_message`](crate::to_message) writes them.
#[cfg(test)]
pub(crate) fn encode_present(object: &Value, message: &'static Message) -> Result<Vec<u8>, Error> {
    encode(object, message, false)
}

fn encode(object: &Value, message: &'static Message, zeros: bool) -> Result<Vec<u8>, Error> {
    let mut writer = Writer::default();
    let fields = object
        .as_object()
        .ok_or_else(|| Error::custom(format_args!("{} must be a JSON object", message.name)))?;
    write_fields(&mut writer, fields, message, zeros)?;
    Ok(writer.buf)
}

/// Encodes a whole object into an enveloped body, using its own `apiVersion` and `kind` to find
/// the table.
///
/// # Errors
///
/// [`Error::UnknownKind`] when no table describes the object's kind, else as for
/// [`encode_message`].
pub fn encode_object(object: &Value) -> Result<Vec<u8>, Error> {
    let text = |key| object.get(key).and_then(Value::as_str).unwrap_or_default();
    let (api_version, kind) = (text("apiVersion"), text("kind"));
    let message = message_for(api_version, kind).ok_or_else(|| Error::UnknownKind {
        api_version: api_version.to_owned(),
        kind: kind.to_owned(),
    })?;
    Ok(encode_envelope(
        api_version,
        kind,
        &encode_message(object, message)?,
    ))
}

/// Writes `object`'s fields in `message`'s order; with `zeros`, also the value fields `object`
/// leaves out, as Go's `Marshal` writes them.
fn write_fields(
    writer: &mut Writer,
    object: &Map<String, Value>,
    message: &'static Message,
    zeros: bool,
) -> Result<(), Error> {
    for field in message.fields {
        if let (Shape::Inline, Ty::Message(inner)) = (field.shape, field.ty) {
            writer.message_field(field.number, |nested| {
                write_fields(nested, object, inner, zeros)
            })?;
            continue;
        }
        match object.get(field.name) {
            None | Some(Value::Null) if zeros && field.always => {
                write_zero(writer, field.number, field.ty)?;
            }
            None | Some(Value::Null) => {}
            Some(value) => write_field(writer, field, value, zeros).map_err(|error| {
                Error::custom(format_args!("{}.{}: {error}", message.name, field.name))
            })?,
        }
    }
    Ok(())
}

/// Writes what Go's generated `Marshal` writes for a value field holding its zero value, which
/// JSON leaves out (or writes as `null`, as for a zero `metav1.Time`).
fn write_zero(writer: &mut Writer, number: u32, ty: Ty) -> Result<(), Error> {
    match ty {
        Ty::Bool | Ty::Int32 | Ty::Int64 | Ty::Uint32 | Ty::Uint64 => {
            writer.varint_field(number, 0);
        }
        Ty::Double => {
            writer.tag(number, 1);
            writer.buf.extend_from_slice(&[0; 8]);
        }
        Ty::Float => {
            writer.tag(number, 5);
            writer.buf.extend_from_slice(&[0; 4]);
        }
        Ty::String => writer.bytes_field(number, b""),
        // Go writes a nil byte slice not at all; a string list is a slice.
        Ty::Bytes | Ty::StringList => {}
        Ty::Message(message) => {
            writer.message_field(number, |nested| {
                write_fields(nested, &Map::new(), message, true)
            })?;
        }
        // A zero `metav1.Time` marshals to nothing, and so do the nil `Raw` bytes of
        // `FieldsV1` and `RawExtension`: an empty message.
        Ty::Time | Ty::MicroTime | Ty::FieldsV1 | Ty::RawExtension => {
            writer.bytes_field(number, b"");
        }
        Ty::Duration => write_text(writer, number, ty, "0s")?,
        // The zero `resource.Quantity` prints as "0".
        Ty::Quantity => write_text(writer, number, ty, "0")?,
        Ty::IntOrString => writer.message_field(number, |nested| {
            nested.varint_field(1, 0);
            nested.varint_field(2, 0);
            nested.bytes_field(3, b"");
            Ok::<_, Error>(())
        })?,
    }
    Ok(())
}

fn write_field(
    writer: &mut Writer,
    field: &Field,
    value: &Value,
    zeros: bool,
) -> Result<(), Error> {
    match field.shape {
        Shape::Single | Shape::Inline => write_value(writer, field.number, field.ty, value, zeros),
        Shape::Repeated => {
            let items = value
                .as_array()
                .ok_or_else(|| Error::custom("expected an array"))?;
            items
                .iter()
                .try_for_each(|item| write_value(writer, field.number, field.ty, item, zeros))
        }
        Shape::Map(key_ty) => {
            let entries = value
                .as_object()
                .ok_or_else(|| Error::custom("expected an object"))?;
            for (key, item) in entries {
                writer.message_field(field.number, |entry| {
                    write_value(entry, 1, key_ty, &Value::String(key.clone()), zeros)?;
                    write_value(entry, 2, field.ty, item, zeros)
                })?;
            }
            Ok(())
        }
    }
}

fn integer(value: &Value) -> Result<u64, Error> {
    value
        .as_i64()
        .map(|int| int as u64)
        .or_else(|| value.as_u64())
        .ok_or_else(|| Error::custom(format_args!("expected an integer, found {value}")))
}

fn text(value: &Value) -> Result<&str, Error> {
    value
        .as_str()
        .ok_or_else(|| Error::custom(format_args!("expected a string, found {value}")))
}

fn write_value(
    writer: &mut Writer,
    number: u32,
    ty: Ty,
    value: &Value,
    zeros: bool,
) -> Result<(), Error> {
    match ty {
        Ty::Bool => {
            let flag = value
                .as_bool()
                .ok_or_else(|| Error::custom(format_args!("expected a bool, found {value}")))?;
            writer.varint_field(number, u64::from(flag));
        }
        // Negative numbers travel sign-extended to 64 bits, as Go writes them.
        Ty::Int32 | Ty::Int64 | Ty::Uint32 | Ty::Uint64 => {
            writer.varint_field(number, integer(value)?);
        }
        Ty::Double | Ty::Float => {
            let float = value
                .as_f64()
                .ok_or_else(|| Error::custom(format_args!("expected a number, found {value}")))?;
            if matches!(ty, Ty::Double) {
                writer.tag(number, 1);
                writer.buf.extend_from_slice(&float.to_bits().to_le_bytes());
            } else {
                writer.tag(number, 5);
                writer
                    .buf
                    .extend_from_slice(&(float as f32).to_bits().to_le_bytes());
            }
        }
        Ty::String | Ty::Bytes | Ty::Time | Ty::MicroTime | Ty::Duration => {
            write_text(writer, number, ty, text(value)?)?;
        }
        Ty::Message(message) => {
            let object = value
                .as_object()
                .ok_or_else(|| Error::custom("expected an object"))?;
            writer.message_field(number, |nested| {
                write_fields(nested, object, message, zeros)
            })?;
        }
        Ty::Quantity => {
            let quantity = match value {
                Value::Number(number) => number.to_string(),
                other => text(other)?.to_owned(),
            };
            write_text(writer, number, ty, &quantity)?;
        }
        Ty::IntOrString if value.is_string() => write_text(writer, number, ty, text(value)?)?,
        Ty::IntOrString => {
            writer.message_field(number, |nested| {
                nested.varint_field(1, 0);
                nested.varint_field(2, integer(value)?);
                nested.bytes_field(3, b"");
                Ok::<_, Error>(())
            })?;
        }
        Ty::FieldsV1 | Ty::RawExtension => {
            let json = serde_json::to_vec(value).map_err(Error::custom)?;
            writer.message_field::<Error>(number, |nested| {
                nested.bytes_field(1, &json);
                Ok(())
            })?;
        }
        Ty::StringList => {
            let items = value
                .as_array()
                .ok_or_else(|| Error::custom("expected an array of strings"))?;
            writer.message_field(number, |nested| {
                items.iter().try_for_each(|item| {
                    nested.bytes_field(1, text(item)?.as_bytes());
                    Ok::<_, Error>(())
                })
            })?;
        }
    }
    Ok(())
}
