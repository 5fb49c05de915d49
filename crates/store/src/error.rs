//! The store's error type.

/// Everything the store layer can refuse to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The object has no `metadata.name` (or an empty one), so it has no key.
    #[error("object has no metadata.name, so it cannot be keyed (namespace {namespace:?})")]
    MissingName {
        /// The object's namespace, to help find it.
        namespace: Option<String>,
    },
    /// A key that is not `name` or `namespace/name`.
    #[error("malformed object key {key:?}: expected \"name\" or \"namespace/name\"")]
    MalformedKey {
        /// The key as given.
        key: String,
    },
    /// A query named an index that was never registered.
    #[error("index {name:?} does not exist")]
    IndexNotFound {
        /// The index asked for.
        name: String,
    },
    /// `add_indexers` was given a name that is already registered.
    #[error("indexer conflict: an index named {name:?} already exists")]
    IndexerConflict {
        /// The conflicting index name.
        name: String,
    },
    /// A lister found no object under the name asked for.
    ///
    /// The counterpart of the API's `NotFound` status that client-go's listers return.
    #[error("{} not found in the cache", match namespace {
        Some(namespace) => format!("object {namespace}/{name}"),
        None => format!("cluster-scoped object {name}"),
    })]
    NotFound {
        /// The namespace searched, `None` for a cluster-scoped lookup.
        namespace: Option<String>,
        /// The name asked for.
        name: String,
    },
    /// A label selector string that does not parse.
    #[error("invalid label selector {selector:?} at byte {position}: {reason}")]
    InvalidSelector {
        /// The selector as given.
        selector: String,
        /// The byte offset where parsing failed.
        position: usize,
        /// What was wrong there, and what was expected.
        reason: String,
    },
    /// A shard selector (or shard) that kube-apiserver would refuse, with its reason.
    #[error("invalid shard selector {selector:?}: {reason}")]
    InvalidShard {
        /// The selector as given.
        selector: String,
        /// What was wrong, in kube-apiserver's words where it has them.
        reason: String,
    },
    /// A [`CompactCache`](crate::CompactCache)'s codec could not encode an object; the cache is
    /// unchanged.
    #[error("cannot encode the object under key {key:?} for the compact cache: {reason}")]
    Encode {
        /// The object's key.
        key: String,
        /// What the codec reported.
        reason: String,
    },
    /// A [`CompactCache`](crate::CompactCache)'s codec could not decode the bytes it holds for
    /// an object: a read leaves the object out, an index added meanwhile cannot index it, and
    /// an informer hands the update that replaces it to its handlers with the new state as the
    /// old one. The cache keeps the bytes (the next write of the key replaces them) and reports
    /// every such failure ([`CompactCache::on_decode_failure`](crate::CompactCache::on_decode_failure)).
    #[error("the compact cache cannot decode the object it holds under key {key:?}: {reason}")]
    Decode {
        /// The object's key.
        key: String,
        /// What the codec reported.
        reason: String,
    },
    /// A custom key function refused an object.
    #[error("key function failed: {reason}")]
    KeyFunc {
        /// What the key function reported.
        reason: String,
    },
}

/// The store's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
