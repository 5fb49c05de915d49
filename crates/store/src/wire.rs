//! [`WireBytes`]: the encoded form an object arrived in, carried beside it so that a cache
//! holding objects encoded does not encode it again.

use std::{fmt, sync::Arc};

/// The bytes an object was decoded from, exactly as the API server sent them, handed along
/// with the decoded object from the watch to the cache.
///
/// A decoder attaches them only when the object it made is all they hold: no field left out
/// (managedFields dropped on the wire), no transform or projection applied afterwards. A
/// [`CompactCache`](crate::CompactCache) whose [`Codec`](crate::Codec) keeps that form
/// ([`Codec::adopt`](crate::Codec::adopt)) stores them as they are, where it would otherwise
/// encode the object; every other store ignores them.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum WireBytes {
    /// A Kubernetes protobuf message, without the `k8s\0` envelope around it: the `raw` of the
    /// `runtime.Unknown` a list item or watch event holds.
    Protobuf(Arc<[u8]>),
}

impl WireBytes {
    /// The bytes, whatever their form.
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            Self::Protobuf(bytes) => bytes,
        }
    }
}

impl fmt::Debug for WireBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Protobuf(bytes) => write!(f, "WireBytes::Protobuf({} bytes)", bytes.len()),
        }
    }
}
