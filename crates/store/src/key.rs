//! Object keys: `namespace/name` for namespaced objects, `name` for cluster-scoped ones.

use std::sync::Arc;

use crate::{Error, Object, Result};

/// Computes the key an object is stored under.
///
/// Any `Fn(&K) -> Result<String>` closure works; `Arc::new(meta_namespace_key_func::<K>)`, the
/// default, keys by [`meta_namespace_key_func`].
pub type KeyFunc<K> = Arc<dyn Fn(&K) -> Result<String> + Send + Sync>;

/// The default key func, [`meta_namespace_key_func`], as a shareable [`KeyFunc`].
pub(crate) fn default_key_func<K: Object>() -> KeyFunc<K> {
    Arc::new(meta_namespace_key_func::<K>)
}

/// `namespace/name`, or `name` when the object has no namespace: the key every cache and
/// queue files an object under unless given another [`KeyFunc`], and what a controller
/// enqueues. [`split_key`] takes a key apart again.
///
/// A deletion's tombstone ([`DeletedFinalStateUnknown`](crate::DeletedFinalStateUnknown))
/// carries the key its object was filed under in its `key` field (client-go's
/// `DeletionHandlingMetaNamespaceKeyFunc` reads it there); kinformer-processor's `KeyHandler`
/// hands on either key.
///
/// ```
/// use k8s_openapi::api::core::v1::Pod;
/// use kinformer_store::{meta_namespace_key_func, split_key};
///
/// let mut pod = Pod::default();
/// pod.metadata.namespace = Some("shop".into());
/// pod.metadata.name = Some("cart-0".into());
/// let key = meta_namespace_key_func(&pod)?;
/// assert_eq!(key, "shop/cart-0");
/// assert_eq!(split_key(&key)?, (Some("shop"), "cart-0"));
/// # Ok::<(), kinformer_store::Error>(())
/// ```
///
/// # Errors
///
/// [`Error::MissingName`] when the object has no name. client-go would key such an object as
/// `""` or `"namespace/"`, which then collides with every other nameless object; we refuse it.
#[doc(alias = "MetaNamespaceKeyFunc")]
#[doc(alias = "DeletionHandlingMetaNamespaceKeyFunc")]
pub fn meta_namespace_key_func<K: Object + ?Sized>(obj: &K) -> Result<String> {
    let name = match obj.name() {
        Some(name) if !name.is_empty() => name,
        _ => {
            return Err(Error::MissingName {
                namespace: obj.namespace().map(str::to_owned),
            });
        }
    };
    Ok(object_key(obj.namespace(), name))
}

/// Joins a namespace and a name into a key; an absent or empty namespace gives just the name.
pub(crate) fn object_key(namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(namespace) if !namespace.is_empty() => {
            let mut key = String::with_capacity(namespace.len() + 1 + name.len());
            key.push_str(namespace);
            key.push('/');
            key.push_str(name);
            key
        }
        _ => name.to_owned(),
    }
}

/// Splits a key into its namespace (if any) and name.
///
/// # Errors
///
/// [`Error::MalformedKey`] for keys with more than one `/`, an empty name, or an empty
/// namespace before the `/`. client-go accepts the last two; no key func produces them, so
/// here they are reported instead of silently naming nothing.
#[doc(alias = "SplitMetaNamespaceKey")]
pub fn split_key(key: &str) -> Result<(Option<&str>, &str)> {
    let malformed = || Error::MalformedKey {
        key: key.to_owned(),
    };
    match key.split_once('/') {
        None if !key.is_empty() => Ok((None, key)),
        Some((namespace, name))
            if !namespace.is_empty() && !name.is_empty() && !name.contains('/') =>
        {
            Ok((Some(namespace), name))
        }
        _ => Err(malformed()),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{Namespace, Pod};
    use kube_core::ObjectMeta;

    use super::*;

    fn pod(namespace: Option<&str>, name: Option<&str>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                namespace: namespace.map(Into::into),
                name: name.map(Into::into),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        }
    }

    #[test]
    fn namespaced_objects_are_keyed_namespace_slash_name() {
        assert_eq!(
            meta_namespace_key_func(&pod(Some("ns"), Some("a"))).unwrap(),
            "ns/a"
        );
    }

    #[test]
    fn cluster_scoped_objects_are_keyed_by_name() {
        let namespace = Namespace {
            metadata: ObjectMeta {
                name: Some("kube-system".into()),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        assert_eq!(meta_namespace_key_func(&namespace).unwrap(), "kube-system");
        assert_eq!(
            meta_namespace_key_func(&pod(Some(""), Some("a"))).unwrap(),
            "a"
        );
    }

    #[test]
    fn objects_without_a_name_are_refused() {
        for name in [None, Some("")] {
            let err = meta_namespace_key_func(&pod(Some("ns"), name)).unwrap_err();
            assert_eq!(
                err,
                Error::MissingName {
                    namespace: Some("ns".into())
                }
            );
            assert!(err.to_string().contains("no metadata.name"));
        }
    }

    /// Ported from client-go's `TestSplitMetaNamespaceKey`, tightened to reject empty parts.
    #[test]
    fn split_key_round_trips_and_rejects_malformed_keys() {
        assert_eq!(split_key("a/b").unwrap(), (Some("a"), "b"));
        assert_eq!(split_key("name").unwrap(), (None, "name"));
        for bad in ["", "a/b/c", "/name", "ns/", "/"] {
            assert_eq!(
                split_key(bad).unwrap_err(),
                Error::MalformedKey { key: bad.into() },
                "{bad:?}"
            );
        }
        let key = object_key(Some("ns"), "n");
        assert_eq!(split_key(&key).unwrap(), (Some("ns"), "n"));
    }
}
