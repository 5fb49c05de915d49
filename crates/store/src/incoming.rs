//! [`Incoming`]: an object on its way into a store, with the encoded form it arrived in when
//! the decoder kept it ([`Encoded`]).

use std::{fmt, sync::Arc};

/// Bytes an object was decoded from, exactly as they arrived, and the media type that names
/// their form (`application/vnd.kubernetes.protobuf` for a Kubernetes protobuf message without
/// its envelope, say).
///
/// This crate reads neither: a store that holds objects encoded asks its
/// [`Codec`](crate::Codec) whether the form is its own ([`Codec::adopt`](crate::Codec::adopt))
/// and keeps the bytes rather than encoding the object again; every other store ignores them.
/// A decoder attaches them only when the object it made is all they hold: no field left out,
/// no transform or projection applied afterwards.
#[derive(Clone, PartialEq, Eq)]
pub struct Encoded {
    media_type: &'static str,
    bytes: Arc<[u8]>,
}

impl Encoded {
    /// `bytes` in the form `media_type` names.
    pub fn new(media_type: &'static str, bytes: Arc<[u8]>) -> Self {
        Self { media_type, bytes }
    }

    /// The media type naming the form of the bytes.
    pub fn media_type(&self) -> &'static str {
        self.media_type
    }

    /// The bytes, shared.
    pub fn bytes(&self) -> &Arc<[u8]> {
        &self.bytes
    }
}

impl fmt::Debug for Encoded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Encoded({}, {} bytes)",
            self.media_type,
            self.bytes.len()
        )
    }
}

/// What a store's writes take: the object, shared, and the bytes it was decoded from when the
/// decoder kept them. The one way into a [`Store`](crate::Store) or an
/// [`Indexer`](crate::Indexer): what a store keeps of the encoded form is its own business.
///
/// Anything that is not a decoder writes an object alone, with `.into()` from the object or
/// its `Arc`:
///
/// ```
/// use std::sync::Arc;
///
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kinformer_store::{Cache, CacheReader, Incoming, Store};
///
/// let mut config = ConfigMap::default();
/// config.metadata.name = Some("settings".into());
/// let cache = Cache::<ConfigMap>::default();
/// cache.add(config.into())?;
/// let stored = cache.get_by_key("settings").expect("stored");
/// let incoming: Incoming<ConfigMap> = stored.into();
/// assert!(incoming.encoded().is_none());
/// # Ok::<(), kinformer_store::Error>(())
/// ```
pub struct Incoming<K> {
    object: Arc<K>,
    encoded: Option<Encoded>,
}

impl<K> Incoming<K> {
    /// `object`, with the bytes it was decoded from when there are any.
    pub fn new(object: Arc<K>, encoded: Option<Encoded>) -> Self {
        Self { object, encoded }
    }

    /// The object.
    pub fn object(&self) -> &Arc<K> {
        &self.object
    }

    /// The bytes the object was decoded from, when the decoder kept them.
    pub fn encoded(&self) -> Option<&Encoded> {
        self.encoded.as_ref()
    }

    /// The object and its bytes.
    pub fn into_parts(self) -> (Arc<K>, Option<Encoded>) {
        (self.object, self.encoded)
    }
}

/// An `Incoming` reads as its object, as the `Arc` it holds does: a watch event's
/// `WatchEvent::Added(pod)` is read as `pod.metadata`, its bytes through
/// [`encoded`](Incoming::encoded).
impl<K> std::ops::Deref for Incoming<K> {
    type Target = K;

    fn deref(&self) -> &K {
        &self.object
    }
}

impl<K> From<Arc<K>> for Incoming<K> {
    fn from(object: Arc<K>) -> Self {
        Self::new(object, None)
    }
}

impl<K> From<K> for Incoming<K> {
    fn from(object: K) -> Self {
        Self::new(Arc::new(object), None)
    }
}

impl<K> Clone for Incoming<K> {
    fn clone(&self) -> Self {
        Self::new(Arc::clone(&self.object), self.encoded.clone())
    }
}

impl<K: fmt::Debug> fmt::Debug for Incoming<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Incoming")
            .field("object", &self.object)
            .field("encoded", &self.encoded)
            .finish()
    }
}
