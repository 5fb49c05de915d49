//! The little an object must tell the lower layers about itself.

use std::collections::BTreeMap;

/// The metadata the store, the queues and the processor read from an object.
///
/// Every kube [`Resource`](kube_core::Resource) (k8s-openapi structs, `DynamicObject`,
/// `PartialObjectMeta`, `#[derive(CustomResource)]` types) implements it through a blanket impl.
/// A type of your own that does not implement `Resource` (say, a slim Pod holding only the fields
/// a controller reads) can implement it by hand and be cached like any other object.
pub trait Object: Send + Sync + 'static {
    /// `metadata.name`; `None` or empty means the object cannot be keyed.
    fn name(&self) -> Option<&str>;
    /// `metadata.namespace`; `None` or empty for cluster-scoped objects.
    fn namespace(&self) -> Option<&str>;
    /// `metadata.resourceVersion`, opaque to clients.
    fn resource_version(&self) -> Option<&str>;
    /// `metadata.uid`.
    fn uid(&self) -> Option<&str>;
    /// `metadata.labels`.
    fn labels(&self) -> Option<&BTreeMap<String, String>>;
    /// Clears `metadata.managedFields`, where the type keeps them; a projection that does not
    /// name them has nothing to clear, which is what this default does.
    fn drop_managed_fields(&mut self) {}
}

impl<K> Object for K
where
    K: kube_core::Resource + Send + Sync + 'static,
{
    fn name(&self) -> Option<&str> {
        self.meta().name.as_deref()
    }

    fn namespace(&self) -> Option<&str> {
        self.meta().namespace.as_deref()
    }

    fn resource_version(&self) -> Option<&str> {
        self.meta().resource_version.as_deref()
    }

    fn uid(&self) -> Option<&str> {
        self.meta().uid.as_deref()
    }

    fn labels(&self) -> Option<&BTreeMap<String, String>> {
        self.meta().labels.as_ref()
    }

    fn drop_managed_fields(&mut self) {
        self.meta_mut().managed_fields = None;
    }
}
