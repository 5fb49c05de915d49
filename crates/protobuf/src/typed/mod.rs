//! Decoders generated per k8s-openapi type: protobuf written straight into the struct, field by
//! field, with no serde in between.
//!
//! `cargo xtask protobuf-schema` writes one `Merge` impl per message that has a k8s-openapi
//! struct, from the same tables the serde path reads plus k8s-openapi's own field names. They
//! are compiled only for the Kubernetes minor the tables were made from (k8s-openapi's
//! `k8s_if_1_37!`); with any other minor, and for any type they do not cover (a projection, a
//! custom type, `PartialObjectMeta`), [`Decoder`] takes the serde path, which gives the same
//! value.

use std::{
    any::{Any, TypeId},
    collections::HashMap,
    fmt,
    marker::PhantomData,
    ptr,
    sync::OnceLock,
};

use serde::de::DeserializeOwned;

use crate::{DecodeOptions, Envelope, Error, Message, from_message};

#[cfg_attr(
    not(test),
    allow(
        dead_code,
        reason = "used only by the generated decoders, which one minor compiles"
    )
)]
mod rt;

#[cfg_attr(
    not(test),
    allow(dead_code, reason = "used only by `rt`, which one minor compiles")
)]
mod object_tree;

k8s_openapi::k8s_if_1_37! {
    mod generated;
    #[cfg(test)]
    mod tests;
}

/// One generated decoder, type-erased: it writes `Some(T)` into the `Option<T>` it is given.
/// On an error the `Option` may hold a partly decoded value, which the caller discards.
type DecodeFn = fn(&[u8], &DecodeOptions, &mut dyn Any) -> Result<(), Error>;

/// A registry row: the type, its message, its decoder.
#[allow(dead_code, reason = "built only by the generated registry")]
pub(crate) struct Entry {
    type_id: TypeId,
    message: &'static Message,
    decode: DecodeFn,
}

/// The row of `T`, whose message is `message`.
#[allow(dead_code, reason = "called only by the generated registry")]
pub(crate) fn entry<T: rt::Merge + rt::Zero + 'static>(message: &'static Message) -> Entry {
    fn decode<T: rt::Merge + rt::Zero + 'static>(
        bytes: &[u8],
        options: &DecodeOptions,
        out: &mut dyn Any,
    ) -> Result<(), Error> {
        let out = out.downcast_mut::<Option<T>>().ok_or(Error::Malformed(
            "a generated decoder called for another type",
        ))?;
        // Built and decoded where the caller looks for it: a `Pod` is 2.5 KB to copy.
        *out = None;
        rt::merge(out.get_or_insert_with(T::zero), bytes, options)
    }
    Entry {
        type_id: TypeId::of::<T>(),
        message,
        decode: decode::<T>,
    }
}

k8s_openapi::k8s_if_1_37! {
    fn entries() -> Vec<Entry> {
        generated::registry()
    }
}

// The minors the decoders were not generated for: every type takes the serde path.
k8s_openapi::k8s_if_le_1_36! {
    fn entries() -> Vec<Entry> {
        Vec::new()
    }
}

fn registry() -> &'static HashMap<TypeId, (&'static Message, DecodeFn)> {
    static REGISTRY: OnceLock<HashMap<TypeId, (&'static Message, DecodeFn)>> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        entries()
            .into_iter()
            .map(|entry| (entry.type_id, (entry.message, entry.decode)))
            .collect()
    })
}

/// Decodes protobuf into `T` the fastest way there is for it: the generated decoder when `T`
/// is a k8s-openapi kind this build has one for, the serde path ([`from_message`]) otherwise.
/// Both give the same value. Look one up once and keep it: the lookup is a hash of the type.
///
/// ```
/// use k8s_openapi::api::core::v1::Pod;
/// use kinformer_protobuf::{DecodeOptions, Decoder, Envelope, encode_object};
///
/// let body = encode_object(&serde_json::json!({
///     "apiVersion": "v1", "kind": "Pod",
///     "metadata": { "name": "web-0", "namespace": "prod" },
///     "spec": { "containers": [{ "name": "web", "image": "nginx:1.27" }] },
/// }))?;
/// let decoder = Decoder::<Pod>::new();
/// let pod = decoder.decode_envelope(&Envelope::parse(&body)?, DecodeOptions::default())?;
/// assert_eq!(pod.metadata.name.as_deref(), Some("web-0"));
/// # Ok::<(), kinformer_protobuf::Error>(())
/// ```
pub struct Decoder<T> {
    generated: Option<(&'static Message, DecodeFn)>,
    _type: PhantomData<fn() -> T>,
}

impl<T> Clone for Decoder<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Decoder<T> {}

impl<T> fmt::Debug for Decoder<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Decoder")
            .field("type", &std::any::type_name::<T>())
            .field(
                "generated",
                &self.generated.map(|(message, _)| message.name()),
            )
            .finish()
    }
}

impl<T: DeserializeOwned + 'static> Default for Decoder<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: DeserializeOwned + 'static> Decoder<T> {
    /// The decoder for `T`.
    pub fn new() -> Self {
        Self {
            generated: registry().get(&TypeId::of::<T>()).copied(),
            _type: PhantomData,
        }
    }

    /// The serde path, whatever `T` is: what [`Decoder::new`] falls back to.
    pub fn serde() -> Self {
        Self {
            generated: None,
            _type: PhantomData,
        }
    }

    /// Whether this build has a generated decoder for `T`.
    pub fn is_generated(&self) -> bool {
        self.generated.is_some()
    }

    /// Decodes `bytes`, one `message` (without the envelope), into `T`.
    ///
    /// # Errors
    ///
    /// [`Error`] when the bytes are not valid protobuf or do not fit `T`.
    pub fn decode(
        &self,
        bytes: &[u8],
        message: &'static Message,
        options: DecodeOptions,
    ) -> Result<T, Error> {
        match self.generated {
            // A message other than `T`'s (a caller's mistake) gets what the serde path makes of it.
            Some((own, decode)) if ptr::eq(own, message) => {
                let mut out: Option<T> = None;
                decode(bytes, &options, &mut out).map_err(|error| error.located(bytes, message))?;
                out.ok_or(Error::Malformed("a generated decoder returned nothing"))
            }
            _ => from_message(bytes, message, options),
        }
    }

    /// Decodes the object an [`Envelope`] carries into `T`.
    ///
    /// # Errors
    ///
    /// [`Error::UnknownKind`] for a kind with no table, else as [`Decoder::decode`].
    pub fn decode_envelope(
        &self,
        envelope: &Envelope<'_>,
        options: DecodeOptions,
    ) -> Result<T, Error> {
        self.decode(envelope.raw, envelope.message()?, options)
    }
}
