//! Building an `Api` in a selection's namespace for namespaced and cluster-scoped types alike.

use kube_client::Api;
use kube_core::{ClusterResourceScope, NamespaceResourceScope, Resource};

/// How the factory builds an [`Api`] for a typed resource of this scope: kube's `Api`
/// constructors are split by scope at compile time, and the factory is generic over both.
///
/// Implemented for [`NamespaceResourceScope`] (the selection's namespace is used) and
/// [`ClusterResourceScope`] (the namespace is ignored, as client-go's generated informers for
/// cluster-scoped types ignore the factory's namespace).
pub trait ApiScope {
    /// An `Api<K>` over `namespace`, or over every namespace when `None`.
    fn api<K>(client: kube_client::Client, namespace: Option<&str>) -> Api<K>
    where
        K: Resource<Scope = Self, DynamicType = ()>;
}

impl ApiScope for NamespaceResourceScope {
    fn api<K>(client: kube_client::Client, namespace: Option<&str>) -> Api<K>
    where
        K: Resource<Scope = Self, DynamicType = ()>,
    {
        match namespace {
            Some(namespace) => Api::namespaced(client, namespace),
            None => Api::all(client),
        }
    }
}

impl ApiScope for ClusterResourceScope {
    fn api<K>(client: kube_client::Client, _namespace: Option<&str>) -> Api<K>
    where
        K: Resource<Scope = Self, DynamicType = ()>,
    {
        Api::all(client)
    }
}
