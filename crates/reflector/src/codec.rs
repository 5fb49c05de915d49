//! Codecs for kinformer-store's [`CompactCache`](kinformer_store::CompactCache): the compact
//! form an informer keeps Kubernetes objects in.

use std::{fmt, marker::PhantomData, sync::Arc};

use kinformer_protobuf::{DecodeOptions, Decoder as ProtobufDecoder, Message, message_for};
use kinformer_store::{Codec, CodecError, Encoded};
use kube_core::Resource;
use serde::{Serialize, de::DeserializeOwned};

/// Kubernetes protobuf, written from the object's serde form by the message tables
/// (`kinformer_protobuf::to_message`) and read back through the decoders generated for
/// k8s-openapi's kinds: the smallest form of a built-in kind, and the fastest to read back. The
/// bytes are the object's message without the envelope, since the codec knows its kind; an
/// object a protobuf watch delivered is stored as the message it arrived in
/// ([`Codec::adopt`]), not encoded again.
pub struct ProtobufCodec<K> {
    message: &'static Message,
    decoder: ProtobufDecoder<K>,
}

impl<K> fmt::Debug for ProtobufCodec<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProtobufCodec")
            .field("message", &self.message.name())
            .finish()
    }
}

impl<K: Resource<DynamicType = ()> + DeserializeOwned + 'static> ProtobufCodec<K> {
    /// A codec for `K`, when `K` is a kind the protobuf tables describe and a decoder was
    /// generated for (the k8s-openapi kinds of the minor the tables were made from); `None`
    /// otherwise, for [`JsonCodec`] to take.
    pub fn new() -> Option<Self> {
        let message = message_for(&K::api_version(&()), &K::kind(&()))?;
        let decoder = ProtobufDecoder::<K>::new();
        decoder.is_generated().then_some(Self { message, decoder })
    }
}

impl<K> Codec<K> for ProtobufCodec<K>
where
    K: Serialize + DeserializeOwned + Send + Sync + 'static,
{
    fn encode(&self, obj: &K) -> Result<Vec<u8>, CodecError> {
        Ok(kinformer_protobuf::to_message(obj, self.message)?)
    }

    fn decode(&self, bytes: &[u8]) -> Result<K, CodecError> {
        Ok(self
            .decoder
            .decode(bytes, self.message, DecodeOptions::default())?)
    }

    /// The message an object arrived in, as it is: the decoders in this crate keep it only for
    /// an object decoded whole by the generated decoder this codec reads with, so it decodes
    /// back to that object.
    fn adopt(&self, encoded: &Encoded) -> Option<Arc<[u8]>> {
        (encoded.media_type() == crate::protobuf::PROTOBUF_RAW).then(|| Arc::clone(encoded.bytes()))
    }
}

/// JSON: for the kinds protobuf has no form for (custom resources, dynamic objects,
/// metadata-only objects), and any type with serde's derives. Encoded by serde_json; decoded
/// as [`KubeListerWatcher`](crate::KubeListerWatcher) decodes JSON objects, by simd-json where it
/// reads the bytes as serde_json does.
pub struct JsonCodec<K>(PhantomData<fn() -> K>);

impl<K> JsonCodec<K> {
    /// A JSON codec.
    pub fn new() -> Self {
        Self(PhantomData)
    }
}

impl<K> Default for JsonCodec<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K> fmt::Debug for JsonCodec<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("JsonCodec")
    }
}

impl<K: Serialize + DeserializeOwned> Codec<K> for JsonCodec<K> {
    fn encode(&self, obj: &K) -> Result<Vec<u8>, CodecError> {
        Ok(serde_json::to_vec(obj)?)
    }

    fn decode(&self, bytes: &[u8]) -> Result<K, CodecError> {
        Ok(crate::decoder::fast_json::from_slice(bytes)?)
    }
}

/// The compact form for `K`: [`ProtobufCodec`] when it has one, else [`JsonCodec`].
///
/// ```
/// use std::sync::Arc;
///
/// use k8s_openapi::api::core::v1::Pod;
/// use kinformer_reflector::compact_codec;
/// use kinformer_store::{CacheReader, CompactCache, Store};
///
/// let cache = CompactCache::with_namespace_index(compact_codec::<Pod>());
/// let mut pod = Pod::default();
/// pod.metadata.namespace = Some("prod".into());
/// pod.metadata.name = Some("web-0".into());
/// cache.add(pod.clone().into())?;
/// assert_eq!(cache.get_by_key("prod/web-0").as_deref(), Some(&pod));
/// # Ok::<(), kinformer_store::Error>(())
/// ```
pub fn compact_codec<K>() -> Arc<dyn Codec<K>>
where
    K: Resource<DynamicType = ()> + Serialize + DeserializeOwned + Send + Sync + 'static,
{
    match ProtobufCodec::<K>::new() {
        Some(codec) => Arc::new(codec),
        None => Arc::new(JsonCodec::<K>::new()),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{ConfigMap, Pod};
    use kube_core::{PartialObjectMeta, ResourceExt};

    use super::*;

    fn pod() -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": "web-0", "namespace": "prod", "labels": { "app": "web" },
                "managedFields": [{ "manager": "kubectl", "operation": "Update",
                    "fieldsType": "FieldsV1", "fieldsV1": { "f:metadata": { "f:labels": {} } } }],
            },
            "spec": { "containers": [{ "name": "web", "image": "nginx:1.27",
                "resources": { "limits": { "cpu": "500m" } } }] },
            "status": { "phase": "Running", "startTime": "2026-01-01T00:00:01Z" },
        }))
        .expect("a valid Pod")
    }

    #[test]
    fn built_in_kinds_take_protobuf_and_come_back_equal() {
        let codec = ProtobufCodec::<Pod>::new().expect("Pod has a generated decoder");
        let bytes = codec.encode(&pod()).expect("encodes");
        assert!(bytes.len() < serde_json::to_vec(&pod()).expect("JSON").len());
        assert_eq!(codec.decode(&bytes).expect("decodes"), pod());
        assert!(ProtobufCodec::<ConfigMap>::new().is_some());
    }

    #[test]
    fn metadata_only_objects_take_json_and_come_back_equal() {
        assert!(ProtobufCodec::<PartialObjectMeta<Pod>>::new().is_none());
        let codec = compact_codec::<PartialObjectMeta<Pod>>();
        let meta: PartialObjectMeta<Pod> = serde_json::from_value(serde_json::json!({
            "apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
            "metadata": { "name": "web-0", "namespace": "prod", "resourceVersion": "7" },
        }))
        .expect("valid metadata");
        let back = codec
            .decode(&codec.encode(&meta).expect("encodes"))
            .expect("decodes");
        assert_eq!(back.name_any(), "web-0");
        assert_eq!(back.metadata, meta.metadata);
        assert_eq!(back.types, meta.types);
    }

    #[test]
    fn bytes_that_are_not_the_kind_are_an_error() {
        let codec = compact_codec::<Pod>();
        assert!(codec.decode(b"\xff\xff\xff").is_err());
        assert!(
            JsonCodec::<Pod>::new()
                .decode(b"{\"metadata\": 7}")
                .is_err()
        );
    }
}
