//! What a projection type needs to be cached: [`ProjectedMeta`] and [`impl_object!`].
//!
//! A projection is a slim type with only the fields a controller reads, decoded straight from
//! the wire (see kinformer-reflector's `KubeListerWatcher::projected`). The store keys, versions and selects by
//! five metadata fields; a projection keeps them in a [`ProjectedMeta`] and gets
//! [`Object`](crate::Object) from one macro line.

use std::collections::BTreeMap;

use crate::Interned;

/// The metadata every layer reads, as a projection keeps it: the JSON (and protobuf) shape of
/// `metadata`, with every other field skipped while decoding. The namespace is [`Interned`]:
/// thousands of objects share a few of them.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProjectedMeta {
    /// `metadata.name`.
    pub name: Option<String>,
    /// `metadata.namespace`.
    pub namespace: Option<Interned>,
    /// `metadata.resourceVersion`.
    pub resource_version: Option<String>,
    /// `metadata.uid`.
    pub uid: Option<String>,
    /// `metadata.labels`, for label selectors and index funcs.
    pub labels: Option<BTreeMap<String, String>>,
}

/// Implements [`Object`](crate::Object) for a projection type whose field `$field` is a
/// [`ProjectedMeta`].
///
/// ```
/// use kinformer_store::{Interned, Object, ProjectedMeta, impl_object};
///
/// #[derive(Debug, serde::Deserialize)]
/// struct SlimPod {
///     metadata: ProjectedMeta,
///     #[serde(default)]
///     spec: SlimSpec,
/// }
///
/// #[derive(Debug, Default, serde::Deserialize)]
/// struct SlimSpec {
///     #[serde(rename = "nodeName")]
///     node_name: Option<Interned>,
/// }
///
/// impl_object!(SlimPod, metadata);
///
/// let pod: SlimPod = serde_json::from_str(
///     r#"{"metadata":{"name":"web-0","namespace":"prod","managedFields":[{}]},
///         "spec":{"nodeName":"node-7","containers":[]}}"#,
/// )?;
/// assert_eq!((pod.name(), pod.namespace()), (Some("web-0"), Some("prod")));
/// assert_eq!(pod.spec.node_name.as_deref(), Some("node-7"));
/// # Ok::<(), serde_json::Error>(())
/// ```
#[macro_export]
macro_rules! impl_object {
    ($type:ty, $field:ident) => {
        impl $crate::Object for $type {
            fn name(&self) -> Option<&str> {
                self.$field.name.as_deref()
            }

            fn namespace(&self) -> Option<&str> {
                self.$field.namespace.as_deref()
            }

            fn resource_version(&self) -> Option<&str> {
                self.$field.resource_version.as_deref()
            }

            fn uid(&self) -> Option<&str> {
                self.$field.uid.as_deref()
            }

            fn labels(&self) -> Option<&::std::collections::BTreeMap<String, String>> {
                self.$field.labels.as_ref()
            }
        }
    };
}
