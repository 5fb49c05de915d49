use std::fmt;

use crate::{
    Message,
    schema::{Shape, Ty},
    wire::{Reader, WireValue},
};

/// Why a protobuf body could not be decoded or an object could not be encoded.
///
/// A decode error inside an object is an [`Error::InField`]: the cause, with the field path,
/// the byte offset and the message type where it happened. No message quotes the object's data.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The body does not start with Kubernetes' `k8s\0` magic.
    #[error("not a Kubernetes protobuf body (no `k8s\\0` prefix)")]
    NoMagic,
    /// The body ends in the middle of a value: the value named.
    #[error("truncated protobuf: the body ends inside {0}")]
    Truncated(&'static str),
    /// The bytes are not valid protobuf.
    #[error("malformed protobuf: {0}")]
    Malformed(&'static str),
    /// A field has a wire type its schema does not allow.
    #[error("wire type {found} for a field of type {expected}")]
    WireType {
        /// The field's type, such as `string` or `int32`.
        expected: &'static str,
        /// The wire type on the wire, such as `varint`.
        found: &'static str,
    },
    /// A string the envelope or a JSON document holds is not UTF-8. (A string field of an
    /// object is read as Go's JSON writes it, with U+FFFD for each invalid byte.)
    #[error("a string is not valid UTF-8")]
    Utf8,
    /// No generated table describes this kind.
    #[error("no protobuf schema for {api_version}/{kind}")]
    UnknownKind {
        /// The `apiVersion` of the body.
        api_version: String,
        /// The `kind` of the body.
        kind: String,
    },
    /// The body's content encoding is not the identity (Kubernetes defines no other).
    #[error("unsupported protobuf content encoding {0:?}")]
    ContentEncoding(String),
    /// The target type refused a value (a serde error), or an encoder input was not what the
    /// schema describes.
    #[error("{0}")]
    Custom(String),
    /// A value inside an object could not be read: the cause, and where it sits.
    #[error("{0}")]
    InField(Box<FieldError>),
}

/// Where in an object a decode failed, and why: see [`Error::InField`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    place: Place,
    cause: Error,
}

/// Where a [`FieldError`] happened.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Place {
    /// The address of the failing field's tag, while the error unwinds to the decode that
    /// holds the whole object's bytes (see [`Error::at`]).
    Marked(usize),
    /// The field's path and offset, and the message that holds it.
    Named {
        path: String,
        offset: usize,
        message: &'static str,
    },
}

impl FieldError {
    /// The field, as JSON names it from the object's root: `spec.containers[1].args[0]`. A map
    /// entry is named by its position among the map's entries (`metadata.labels[2]`), never by
    /// its key. Empty when the failure is in the object's own fields' framing.
    pub fn path(&self) -> &str {
        match &self.place {
            Place::Named { path, .. } => path,
            Place::Marked(_) => "",
        }
    }

    /// The offset, in the object's message bytes (after the envelope), of the tag of the
    /// field that could not be read.
    pub fn offset(&self) -> usize {
        match self.place {
            Place::Named { offset, .. } => offset,
            Place::Marked(_) => 0,
        }
    }

    /// The protobuf name of the message that holds the field, such as
    /// `k8s.io.api.core.v1.Container`.
    pub fn message(&self) -> &'static str {
        match self.place {
            Place::Named { message, .. } => message,
            Place::Marked(_) => "",
        }
    }

    /// What went wrong there.
    pub fn cause(&self) -> &Error {
        &self.cause
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Place::Named {
            path,
            offset,
            message,
        } = &self.place
        else {
            return self.cause.fmt(f);
        };
        let path = if path.is_empty() {
            "the message's own fields"
        } else {
            path
        };
        write!(
            f,
            "{} (at {path}, byte {offset}, in a {message})",
            self.cause
        )
    }
}

impl Error {
    pub(crate) fn custom(message: impl fmt::Display) -> Self {
        Error::Custom(message.to_string())
    }

    /// The cause itself, wherever it happened: this error, or the cause of an
    /// [`Error::InField`].
    pub fn cause(&self) -> &Error {
        match self {
            Error::InField(field) => &field.cause,
            other => other,
        }
    }

    /// Marks an error of the field whose tag starts at `tag` (an address in the bytes being
    /// decoded), unless a field nested in it was marked already: only the innermost field's
    /// place is kept, and [`Error::located`] turns it into a path once the whole object's bytes
    /// are at hand. An address costs nothing while decoding goes well, where a path built as
    /// the error unwinds would need every level to know its field names.
    #[cold]
    pub(crate) fn at(self, tag: *const u8) -> Self {
        match self {
            Error::InField(_) => self,
            cause if tag.is_null() => cause,
            cause => Error::InField(Box::new(FieldError {
                place: Place::Marked(tag as usize),
                cause,
            })),
        }
    }

    /// Names the place of a marked error, given the bytes of the object's message it came
    /// from; an error that is not marked, or whose mark lies outside `bytes`, is kept as it is
    /// (without its mark).
    #[cold]
    pub(crate) fn located(self, bytes: &[u8], message: &'static Message) -> Self {
        let Error::InField(mut field) = self else {
            return self;
        };
        let Place::Marked(tag) = field.place else {
            return Error::InField(field);
        };
        let base = bytes.as_ptr() as usize;
        if tag < base || tag > base + bytes.len() {
            return field.cause;
        }
        let mut path = String::new();
        let holder = path_to(bytes, message, tag, &mut path);
        field.place = Place::Named {
            path,
            offset: tag - base,
            message: holder.name,
        };
        Error::InField(field)
    }
}

/// Writes into `path` the JSON path of the field of `message` (in `bytes`) whose tag is at
/// address `tag`, descending through nested messages; returns the message that holds it.
fn path_to(
    bytes: &[u8],
    message: &'static Message,
    tag: usize,
    path: &mut String,
) -> &'static Message {
    let mut reader = Reader::new(bytes);
    // How many entries of each field came before the one read: the index of a list element.
    let mut seen: Vec<(u32, usize)> = Vec::new();
    loop {
        let start = reader.remaining().as_ptr() as usize;
        if start > tag {
            return message;
        }
        let Ok(Some((number, value))) = reader.field() else {
            return message;
        };
        let end = reader.remaining().as_ptr() as usize;
        let index = match seen.iter_mut().find(|(seen, _)| *seen == number) {
            Some((_, count)) => {
                *count += 1;
                *count - 1
            }
            None => {
                seen.push((number, 1));
                0
            }
        };
        if tag >= end {
            continue;
        }
        let Some(field) = message.field(number) else {
            return message;
        };
        if !matches!(field.shape, Shape::Inline) {
            if !path.is_empty() {
                path.push('.');
            }
            path.push_str(field.name);
        }
        if matches!(field.shape, Shape::Repeated | Shape::Map(_)) {
            use fmt::Write as _;
            let _ = write!(path, "[{index}]");
        }
        if tag == start {
            return message;
        }
        // The place is inside this field's value: a nested message's field.
        match (field.shape, field.ty, value) {
            (Shape::Map(_), _, _) | (_, _, WireValue::Varint(_) | WireValue::Fixed32(_)) => {
                return message;
            }
            (_, Ty::Message(inner), WireValue::Bytes(inner_bytes)) => {
                return path_to(inner_bytes, inner, tag, path);
            }
            _ => return message,
        }
    }
}

impl serde::de::Error for Error {
    fn custom<T: fmt::Display>(message: T) -> Self {
        Error::Custom(message.to_string())
    }
}
