//! The shape of Kubernetes' protobuf messages, as the generated tables describe them.
//!
//! Every table in the generated module is written by `cargo xtask protobuf-schema`
//! from the Go API types themselves (reflection over client-go's scheme), so field numbers, JSON
//! names, pointer-ness and `omitempty` are exactly what kube-apiserver's encoders use.

/// One protobuf message: the table of one Go API struct (its fields' numbers, JSON names and
/// types), which encoding and decoding are driven by.
///
/// Find one with [`message_for`](crate::message_for) by `apiVersion` and `kind`, through
/// [`Message::field_message`] for a nested one, or among the [`messages`](crate::messages) a
/// server needs by name.
#[derive(Debug)]
pub struct Message {
    /// The protobuf name, such as `k8s.io.api.core.v1.Pod`.
    pub(crate) name: &'static str,
    /// The fields the Go struct carries on the wire, sorted by number.
    pub(crate) fields: &'static [Field],
}

/// One field of a [`Message`].
#[derive(Debug)]
pub(crate) struct Field {
    /// The protobuf field number.
    pub(crate) number: u32,
    /// The JSON name (empty for an [`Shape::Inline`] field, whose fields join the parent's).
    pub(crate) name: &'static str,
    /// The type of one value (of an element for [`Shape::Repeated`], of a value for
    /// [`Shape::Map`]).
    pub(crate) ty: Ty,
    /// Single, repeated, map or inlined.
    pub(crate) shape: Shape,
    /// A zero value on the wire means "absent" in JSON: the Go field is a non-pointer scalar
    /// tagged `omitempty`, which protobuf writes even when it is empty.
    pub(crate) omit_zero: bool,
    /// Go writes the field even when it holds its zero value: a value field, not a pointer,
    /// slice or map, so an encoder that writes what Go writes writes it when JSON leaves it out.
    pub(crate) always: bool,
}

/// How a [`Field`] holds its values.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Shape {
    /// One value.
    Single,
    /// A list: one wire entry per element (or one packed entry for numbers).
    Repeated,
    /// A map with keys of the given type: one wire entry per pair, a message with the key as
    /// field 1 and the value as field 2.
    Map(Ty),
    /// An embedded Go struct tagged `json:",inline"`: a nested message on the wire, flattened
    /// into its parent in JSON.
    Inline,
}

/// The type of one value.
#[derive(Debug, Clone, Copy)]
#[allow(
    dead_code,
    reason = "the generator writes every Go wire type; today's API uses no unsigned, float or Duration field, but a future one may"
)]
pub(crate) enum Ty {
    /// `bool`, a varint.
    Bool,
    /// `int32`, a varint.
    Int32,
    /// `int64` (and Go `int`), a varint.
    Int64,
    /// `uint32`, a varint.
    Uint32,
    /// `uint64`, a varint.
    Uint64,
    /// `float64`, fixed 64 bits.
    Double,
    /// `float32`, fixed 32 bits.
    Float,
    /// `string` and named string types.
    String,
    /// `[]byte`, base64 in JSON.
    Bytes,
    /// A nested message.
    Message(&'static Message),
    /// `metav1.Time`: `{seconds = 1, nanos = 2}` on the wire, RFC 3339 seconds in JSON.
    Time,
    /// `metav1.MicroTime`: as [`Ty::Time`], with microseconds in JSON.
    MicroTime,
    /// `metav1.Duration`: `{duration = 1}` nanoseconds on the wire, Go's duration string in
    /// JSON.
    Duration,
    /// `resource.Quantity`: `{string = 1}` on the wire, a string in JSON.
    Quantity,
    /// `intstr.IntOrString`: `{type = 1, intVal = 2, strVal = 3}` on the wire, a number or a
    /// string in JSON.
    IntOrString,
    /// `metav1.FieldsV1`: `{Raw = 1}` JSON bytes on the wire, that JSON inline in JSON.
    FieldsV1,
    /// `runtime.RawExtension`: `{raw = 1}` JSON bytes on the wire (what the apiserver stores
    /// for embedded objects), that JSON inline in JSON.
    RawExtension,
    /// A named `[]string` type (`ExtraValue`, `Verbs`): `{repeated items = 1}` on the wire, an
    /// array in JSON.
    StringList,
}

impl Ty {
    /// The type's name in errors, as the generated decoders name it too.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Ty::Bool => "bool",
            Ty::Int32 => "int32",
            Ty::Int64 => "int64",
            Ty::Uint32 => "uint32",
            Ty::Uint64 => "uint64",
            Ty::Double => "double",
            Ty::Float => "float",
            Ty::String => "string",
            Ty::Bytes => "bytes",
            Ty::Message(_) => "message",
            Ty::Time | Ty::MicroTime => "time",
            Ty::Duration => "duration",
            Ty::Quantity => "quantity",
            Ty::IntOrString => "IntOrString",
            Ty::FieldsV1 | Ty::RawExtension => "embedded JSON",
            Ty::StringList => "string list",
        }
    }
}

impl Message {
    /// The protobuf name, such as `k8s.io.api.core.v1.Pod`.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The number of the field whose JSON name is `json_name` (`metadata`, `resourceVersion`),
    /// if the message has one.
    pub fn field_number(&self, json_name: &str) -> Option<u32> {
        self.field_named(json_name).map(|field| field.number)
    }

    /// The message of the field whose JSON name is `json_name`, when that field holds a nested
    /// message (`metadata` of a Pod is an `ObjectMeta`).
    pub fn field_message(&self, json_name: &str) -> Option<&'static Message> {
        self.field_named(json_name)
            .and_then(|field| match field.ty {
                Ty::Message(message) => Some(message),
                _ => None,
            })
    }

    /// The field whose JSON name is `json_name`.
    pub(crate) fn field_named(&self, json_name: &str) -> Option<&'static Field> {
        let fields: &'static [Field] = self.fields;
        fields.iter().find(|field| field.name == json_name)
    }

    /// The field numbered `number`, if the message has one.
    #[inline]
    pub(crate) fn field(&'static self, number: u32) -> Option<&'static Field> {
        let fields: &'static [Field] = self.fields;
        // Most messages number their fields 1, 2, 3...: try the dense position first.
        if let Some(field) = fields.get((number as usize).wrapping_sub(1))
            && field.number == number
        {
            return Some(field);
        }
        fields
            .binary_search_by_key(&number, |field| field.number)
            .ok()
            .map(|index| &fields[index])
    }
}
