//! [`OldObject`]: the object an upsert replaced, decoded only when someone reads it.

use std::{
    fmt,
    sync::{Arc, OnceLock},
};

use crate::{
    Codec, Object,
    compact::{DecodeFailures, decode_or_report},
};

/// The object an upsert replaced ([`Indexer::upsert`](crate::Indexer::upsert)):
/// either decoded already, or still in the encoded form a
/// [`CompactCache`](crate::CompactCache) held it in, decoded the first time
/// [`get`](Self::get) is called. Clones share that one decode, so a replaced object read by
/// several handlers is decoded once, on whichever thread asks first, and one read by none is
/// never decoded.
///
/// Its UID and resourceVersion are known without a decode, which is all an informer needs to
/// tell an update from a resync or a re-creation.
///
/// ```
/// use std::sync::Arc;
///
/// use k8s_openapi::api::core::v1::Pod;
/// use kinformer_store::OldObject;
///
/// let mut pod = Pod::default();
/// pod.metadata.resource_version = Some("7".into());
/// let old = OldObject::from(Arc::new(pod));
/// assert_eq!(old.resource_version(), Some("7"));
/// assert!(old.is_decoded());
/// assert_eq!(old.get().unwrap().metadata.resource_version.as_deref(), Some("7"));
/// ```
pub struct OldObject<K>(Repr<K>);

enum Repr<K> {
    Decoded(Arc<K>),
    Encoded(Arc<Encoded<K>>),
}

/// An object a compact cache let go of, with what decoding it needs.
struct Encoded<K> {
    key: Arc<str>,
    bytes: Arc<[u8]>,
    identity: Identity,
    codec: Arc<dyn Codec<K>>,
    /// Where the cache counts and reports the objects it could not decode.
    failures: Arc<DecodeFailures>,
    decoded: OnceLock<Option<Arc<K>>>,
}

/// An object's UID and resourceVersion, held beside its encoded form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Identity {
    uid: Option<Box<str>>,
    resource_version: Option<Box<str>>,
}

impl Identity {
    /// `obj`'s UID and resourceVersion.
    pub(crate) fn of<K: Object>(obj: &K) -> Self {
        Self {
            uid: obj.uid().map(Box::from),
            resource_version: obj.resource_version().map(Box::from),
        }
    }
}

impl<K> OldObject<K> {
    /// An object that needs no decode.
    pub fn decoded(obj: Arc<K>) -> Self {
        Self(Repr::Decoded(obj))
    }

    /// An encoded object, decoded by `codec` when first read; a failed decode is counted in
    /// `failures`.
    pub(crate) fn encoded(
        key: Arc<str>,
        bytes: Arc<[u8]>,
        identity: Identity,
        codec: Arc<dyn Codec<K>>,
        failures: Arc<DecodeFailures>,
    ) -> Self {
        Self(Repr::Encoded(Arc::new(Encoded {
            key,
            bytes,
            identity,
            codec,
            failures,
            decoded: OnceLock::new(),
        })))
    }

    /// The object, decoded on the first call of any clone. `None` only when its bytes do not
    /// decode; the cache that held them reports that with the key
    /// ([`CompactCache::on_decode_failure`](crate::CompactCache::on_decode_failure)).
    pub fn get(&self) -> Option<Arc<K>> {
        match &self.0 {
            Repr::Decoded(obj) => Some(Arc::clone(obj)),
            Repr::Encoded(encoded) => encoded
                .decoded
                .get_or_init(|| {
                    let Encoded {
                        key,
                        bytes,
                        codec,
                        failures,
                        ..
                    } = &**encoded;
                    decode_or_report(&**codec, failures, key, bytes)
                })
                .clone(),
        }
    }

    /// Whether [`get`](Self::get) costs no decode: the object was never encoded, or a clone
    /// has decoded it.
    pub fn is_decoded(&self) -> bool {
        match &self.0 {
            Repr::Decoded(_) => true,
            Repr::Encoded(encoded) => encoded.decoded.get().is_some(),
        }
    }

    /// Whether both are the same object: the same allocation, or clones of one encoded object.
    pub fn ptr_eq(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            (Repr::Decoded(a), Repr::Decoded(b)) => Arc::ptr_eq(a, b),
            (Repr::Encoded(a), Repr::Encoded(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl<K: Object> OldObject<K> {
    /// `metadata.uid`, without a decode.
    pub fn uid(&self) -> Option<&str> {
        match &self.0 {
            Repr::Decoded(obj) => obj.uid(),
            Repr::Encoded(encoded) => encoded.identity.uid.as_deref(),
        }
    }

    /// `metadata.resourceVersion`, without a decode.
    pub fn resource_version(&self) -> Option<&str> {
        match &self.0 {
            Repr::Decoded(obj) => obj.resource_version(),
            Repr::Encoded(encoded) => encoded.identity.resource_version.as_deref(),
        }
    }
}

impl<K> From<Arc<K>> for OldObject<K> {
    fn from(obj: Arc<K>) -> Self {
        Self::decoded(obj)
    }
}

impl<K> Clone for OldObject<K> {
    fn clone(&self) -> Self {
        Self(match &self.0 {
            Repr::Decoded(obj) => Repr::Decoded(Arc::clone(obj)),
            Repr::Encoded(encoded) => Repr::Encoded(Arc::clone(encoded)),
        })
    }
}

impl<K: fmt::Debug> fmt::Debug for OldObject<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Repr::Decoded(obj) => f.debug_tuple("OldObject").field(obj).finish(),
            Repr::Encoded(encoded) => f
                .debug_struct("OldObject")
                .field("key", &encoded.key)
                .field("encoded_len", &encoded.bytes.len())
                .field("decoded", &encoded.decoded.get())
                .finish(),
        }
    }
}
