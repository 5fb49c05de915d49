//! The shape of Kubernetes' protobuf messages, as the generated tables describe them.
//!
//! Every table in [`generated`](crate::protobuf::generated) is written by `cargo xtask protobuf-schema`
//! from the Go API types themselves (reflection over client-go's scheme), so field numbers, JSON
//! names, pointer-ness and `omitempty` are exactly what kube-apiserver's encoders use.

/// One protobuf message: one Go API struct.
#[derive(Debug)]
pub struct Message {
    /// The protobuf name, such as `k8s.io.api.core.v1.Pod`.
    pub name: &'static str,
    /// The fields the Go struct carries on the wire, sorted by number.
    pub fields: &'static [Field],
}

/// One field of a [`Message`].
#[derive(Debug)]
pub struct Field {
    /// The protobuf field number.
    pub number: u32,
    /// The JSON name (empty for an [`Shape::Inline`] field, whose fields join the parent's).
    pub name: &'static str,
    /// The type of one value (of an element for [`Shape::Repeated`], of a value for
    /// [`Shape::Map`]).
    pub ty: Ty,
    /// Single, repeated, map or inlined.
    pub shape: Shape,
    /// A zero value on the wire means "absent" in JSON: the Go field is a non-pointer scalar
    /// tagged `omitempty`, which protobuf writes even when it is empty.
    pub omit_zero: bool,
}

/// How a [`Field`] holds its values.
#[derive(Debug, Clone, Copy)]
pub enum Shape {
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
pub enum Ty {
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

impl Message {
    /// The field numbered `number`, if the message has one.
    #[inline]
    pub fn field(&'static self, number: u32) -> Option<&'static Field> {
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
