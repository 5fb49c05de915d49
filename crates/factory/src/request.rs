//! [`InformerRequest`]: which informer a caller asks the factory for.

use std::fmt;

use kinformer_informer::{InformerOptions, SharedIndexInformer};
use kinformer_store::Shard;
use kube_client::Client;
use kube_core::{ApiResource, DynamicObject, PartialObjectMeta};

use crate::{
    FactoryResource, Selection,
    error::Result,
    factory::{Handed, Hold, SharedInformerFactory},
};

/// Builds the informer a request names, or finds it, in a factory.
type Make<K> = Box<dyn FnOnce(&SharedInformerFactory, Selection, Hold) -> Result<Handed<K>> + Send>;

/// Which shared informer to hand out: what it informs on (a typed resource, a dynamic one,
/// metadata only, or an informer built by the caller) and over which scope. Hand it to
/// [`SharedInformerFactory::informer_for`] or [`SharedInformerFactory::lease`];
/// [`SharedInformerFactory::informer`] is the short form of the typed request in the
/// factory's scope.
///
/// Two requests for the same resource and scope get the same informer.
///
/// ```
/// use k8s_openapi::api::{apps::v1::Deployment, core::v1::Pod};
/// use kinformer_factory::InformerRequest;
/// use kube_core::{ApiResource, DynamicObject, PartialObjectMeta};
///
/// // Pods in one namespace, whatever the factory's own namespace is.
/// let pods = InformerRequest::<Pod>::typed().namespace("shop");
/// // Only the metadata of Deployments labelled tier=web.
/// let deployments = InformerRequest::<PartialObjectMeta<Deployment>>::metadata().labels("tier=web");
/// // A custom resource, as dynamic objects.
/// let widgets = ApiResource {
///     group: "example.com".into(),
///     version: "v1".into(),
///     api_version: "example.com/v1".into(),
///     kind: "Widget".into(),
///     plural: "widgets".into(),
/// };
/// let widgets: InformerRequest<DynamicObject> = InformerRequest::dynamic(&widgets);
/// # let _ = (pods, deployments, widgets);
/// ```
#[must_use = "a request does nothing until it is handed to the factory"]
pub struct InformerRequest<K> {
    make: Make<K>,
    /// The scope instead of the factory's, when given whole.
    selection: Option<Selection>,
    namespace: Option<String>,
    labels: Option<String>,
    fields: Option<String>,
    shard: Option<Shard>,
}

impl<K> fmt::Debug for InformerRequest<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InformerRequest")
            .field("type", &std::any::type_name::<K>())
            .field("selection", &self.selection)
            .field("namespace", &self.namespace)
            .field("labels", &self.labels)
            .field("fields", &self.fields)
            .field("shard", &self.shard.as_ref().map(ToString::to_string))
            .finish_non_exhaustive()
    }
}

impl<K: FactoryResource> InformerRequest<K> {
    /// The informer for `K`, a k8s-openapi or `CustomResource` type (client-go's
    /// `factory.Core().V1().Pods().Informer()`).
    pub fn typed() -> Self {
        Self::new(Box::new(|factory, selection, hold| {
            factory.typed::<K>(selection, hold)
        }))
    }
}

impl<K: FactoryResource> InformerRequest<PartialObjectMeta<K>> {
    /// The metadata-only informer for `K`: `PartialObjectMetadata` lists and watches, so the
    /// cache holds names, labels, annotations and owners and nothing else (client-go's
    /// `metadatainformer`). Far smaller than the typed informer for a controller that reads
    /// nothing more.
    #[doc(alias = "metadatainformer")]
    pub fn metadata() -> Self {
        Self::new(Box::new(|factory, selection, hold| {
            factory.metadata::<K>(selection, hold)
        }))
    }
}

impl InformerRequest<DynamicObject> {
    /// The informer for any resource, a custom resource for instance, as [`DynamicObject`]s
    /// (client-go's `dynamicinformer.DynamicSharedInformerFactory.ForResource`). For a
    /// cluster-scoped resource in a namespaced factory, give the request
    /// [`Selection::all`].
    ///
    /// A custom resource's informer stops when its CRD is deleted, and leaves the factory so
    /// that a later request starts afresh.
    #[doc(alias = "ForResource")]
    pub fn dynamic(resource: &ApiResource) -> Self {
        let resource = resource.clone();
        Self::new(Box::new(move |factory, selection, hold| {
            factory.dynamic(&resource, selection, hold)
        }))
    }
}

impl<K: kinformer_store::Object> InformerRequest<K> {
    /// The informer `new` builds, if the factory holds none for `K` in this scope yet
    /// (client-go's `InformerFor`): for a projection type or a lister-watcher of your own.
    /// `new` receives the client and the options the factory would use for `K` (its resync
    /// period and, when set, its transform, [`FactoryOptions::transform_for`](crate::FactoryOptions::transform_for));
    /// build the informer with them, adding what you need. Its scope is yours to apply: the
    /// factory keys the informer by `K` and the request's scope.
    ///
    /// `new` runs under the factory's registry lock, as client-go's does, so that two callers
    /// never build two informers: it must not call back into the factory.
    #[doc(alias = "InformerFor")]
    pub fn built_by(
        new: impl FnOnce(&Client, InformerOptions<K>) -> SharedIndexInformer<K> + Send + 'static,
    ) -> Self {
        Self::new(Box::new(move |factory, selection, hold| {
            factory.built_by(selection, hold, new)
        }))
    }
}

impl<K> InformerRequest<K> {
    fn new(make: Make<K>) -> Self {
        Self {
            make,
            selection: None,
            namespace: None,
            labels: None,
            fields: None,
            shard: None,
        }
    }

    /// Informs on `selection` instead of the factory's scope ([`Selection::all`] for every
    /// namespace and object).
    pub fn selection(mut self, selection: Selection) -> Self {
        self.selection = Some(selection);
        self
    }

    /// Informs on `namespace` alone, keeping the rest of the scope.
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// Informs on the objects `selector` (a label selector) matches, keeping the rest of the
    /// scope.
    pub fn labels(mut self, selector: impl Into<String>) -> Self {
        self.labels = Some(selector.into());
        self
    }

    /// Informs on the objects `selector` (a field selector) matches, keeping the rest of the
    /// scope.
    pub fn fields(mut self, selector: impl Into<String>) -> Self {
        self.fields = Some(selector.into());
        self
    }

    /// Informs on the objects of `shard` alone, keeping the rest of the scope: one replica's
    /// share of a collection, asked of the server (kube-apiserver's sharded list and watch)
    /// and filtered by the informer where the server does not.
    pub fn shard(mut self, shard: Shard) -> Self {
        self.shard = Some(shard);
        self
    }

    /// The informer this request names in `factory`, held as `hold` says.
    pub(crate) fn hand_out(self, factory: &SharedInformerFactory, hold: Hold) -> Result<Handed<K>> {
        let mut selection = self
            .selection
            .unwrap_or_else(|| factory.default_selection());
        if let Some(namespace) = self.namespace {
            selection = selection.namespace(namespace);
        }
        if let Some(labels) = self.labels {
            selection = selection.labels(labels);
        }
        if let Some(fields) = self.fields {
            selection = selection.fields(fields);
        }
        if let Some(shard) = self.shard {
            selection = selection.shard(shard);
        }
        (self.make)(factory, selection, hold)
    }
}
