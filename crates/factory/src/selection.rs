//! Which objects of a type an informer holds, and how the factory tells informers apart.

use std::{
    any::TypeId,
    fmt,
    hash::{Hash, Hasher},
};

use kinformer_store::Shard;

/// The slice of a resource an informer lists and watches: a namespace (all when `None`), a
/// label selector, a field selector and a shard.
///
/// It is part of an informer's identity in the factory: asking twice for the same type and
/// the same selection returns the same informer, a different selection gets its own.
///
/// ```
/// use kinformer_factory::Selection;
///
/// let selection = Selection::all().namespace("prod").labels("app=web");
/// assert_eq!(selection.namespace_name(), Some("prod"));
/// assert_ne!(selection, Selection::all());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Selection {
    namespace: Option<String>,
    label_selector: Option<String>,
    field_selector: Option<String>,
    shard: Option<Shard>,
    /// The shard is the factory's own ([`FactoryOptions::shard`](crate::FactoryOptions::shard)),
    /// which [`SharedInformerFactory::set_shard`](crate::SharedInformerFactory::set_shard)
    /// moves: part of the identity, so an informer of the factory's shard is never one asked
    /// for with a shard of its own.
    factory_shard: bool,
}

impl Selection {
    /// Every object of the type, in every namespace.
    pub fn all() -> Self {
        Self::default()
    }

    /// Only objects in `namespace` (client-go's `WithNamespace`). Ignored for cluster-scoped
    /// types.
    #[doc(alias = "WithNamespace")]
    #[must_use]
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// Only objects whose labels match `selector` (`app=web,tier!=cache`).
    #[must_use]
    pub fn labels(mut self, selector: impl Into<String>) -> Self {
        self.label_selector = Some(selector.into());
        self
    }

    /// Only objects whose fields match `selector` (`spec.nodeName=node-1`).
    #[must_use]
    pub fn fields(mut self, selector: impl Into<String>) -> Self {
        self.field_selector = Some(selector.into());
        self
    }

    /// Only the objects of `shard`: the informer asks the server for the shard and filters
    /// what a server without sharded list and watch sends
    /// ([`InformerOptions::shard`](kinformer_informer::InformerOptions::shard)). A shard
    /// given here stays where it is when the factory's own shard moves.
    #[must_use]
    pub fn shard(mut self, shard: Shard) -> Self {
        self.shard = Some(shard);
        self.factory_shard = false;
        self
    }

    /// The factory's own shard, `shard` for now: it moves with the factory's.
    pub(crate) fn factory_shard(mut self, shard: Shard) -> Self {
        self.shard = Some(shard);
        self.factory_shard = true;
        self
    }

    /// Whether the shard is the factory's own, which moves with it.
    pub(crate) fn follows_factory(&self) -> bool {
        self.factory_shard
    }

    /// The same selection with the factory's shard where it takes the factory's.
    pub(crate) fn resolved(mut self, factory_shard: Option<&Shard>) -> Self {
        if self.factory_shard {
            self.shard = factory_shard.cloned();
        }
        self
    }

    /// The namespace selected, `None` for all.
    pub fn namespace_name(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// The label selector, if any.
    pub fn label_selector(&self) -> Option<&str> {
        self.label_selector.as_deref()
    }

    /// The field selector, if any.
    pub fn field_selector(&self) -> Option<&str> {
        self.field_selector.as_deref()
    }

    /// The shard, if any: for the factory's own, where it was when this selection was taken
    /// (an informer's key in the factory names where it is now).
    pub fn shard_selector(&self) -> Option<&Shard> {
        self.shard.as_ref()
    }
}

impl fmt::Display for Selection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if let Some(namespace) = &self.namespace {
            parts.push(format!("namespace={namespace}"));
        }
        if let Some(labels) = &self.label_selector {
            parts.push(format!("labels={labels}"));
        }
        if let Some(fields) = &self.field_selector {
            parts.push(format!("fields={fields}"));
        }
        if let Some(shard) = &self.shard {
            parts.push(format!("shard={shard}"));
        }
        if parts.is_empty() {
            f.write_str("all")
        } else {
            f.write_str(&parts.join(", "))
        }
    }
}

/// An informer's identity in a factory: the Rust type it caches, the API resource for
/// dynamic informers, and its [`Selection`]. `wait_for_cache_sync` reports per key.
///
/// client-go keys its factory by `reflect.Type` alone (one factory, one namespace); the
/// selection is in the key here so one factory can serve several namespaces or selectors.
#[derive(Clone)]
pub struct InformerKey {
    type_id: TypeId,
    resource: Option<String>,
    selection: Selection,
    description: String,
    /// Group, version and plural, when known: what follows from the type and `resource`, so
    /// not part of the identity.
    api: [String; 3],
}

impl InformerKey {
    pub(crate) fn new<K: 'static>(
        resource: Option<String>,
        selection: Selection,
        description: String,
    ) -> Self {
        Self {
            type_id: TypeId::of::<K>(),
            resource,
            selection,
            description,
            api: Default::default(),
        }
    }

    /// The same key with the factory's shard where its selection takes the factory's.
    pub(crate) fn resolved(mut self, factory_shard: Option<&Shard>) -> Self {
        self.selection = self.selection.resolved(factory_shard);
        self
    }

    /// The same key, knowing its API group, version and resource (plural).
    pub(crate) fn with_api(mut self, group: &str, version: &str, plural: &str) -> Self {
        self.api = [group.to_owned(), version.to_owned(), plural.to_owned()];
        self
    }

    /// The API group, version and resource (plural) of what the informer caches, as in
    /// client-go's informer metrics; empty strings for an informer a request builds with `built_by`,
    /// whose type the factory cannot ask.
    pub fn group_version_resource(&self) -> (&str, &str, &str) {
        let [group, version, resource] = &self.api;
        (group, version, resource)
    }

    /// Whether this informer caches objects of type `K`.
    ///
    /// ```
    /// # use kinformer_factory::{InformerKey, Selection};
    /// # fn check(key: &InformerKey) -> bool {
    /// key.is::<k8s_openapi::api::core::v1::Pod>()
    /// # }
    /// ```
    pub fn is<K: 'static>(&self) -> bool {
        self.type_id == TypeId::of::<K>()
    }

    /// The API resource (`group/version/plural`) of a dynamic informer, `None` otherwise.
    pub fn resource(&self) -> Option<&str> {
        self.resource.as_deref()
    }

    /// The selection the informer lists and watches.
    pub fn selection(&self) -> &Selection {
        &self.selection
    }

    /// A readable name: the kind (`Pod`, `Pod (metadata)`, `apps/v1/deployments`...).
    pub fn description(&self) -> &str {
        &self.description
    }
}

// The description is derived from the other fields (or names a custom constructor's type), so
// identity leaves it out: `informer::<Pod>()` and a request `built_by` a constructor of Pods share one informer.
impl PartialEq for InformerKey {
    fn eq(&self, other: &Self) -> bool {
        self.type_id == other.type_id
            && self.resource == other.resource
            && self.selection == other.selection
    }
}

impl Eq for InformerKey {}

impl Hash for InformerKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.type_id.hash(state);
        self.resource.hash(state);
        self.selection.hash(state);
    }
}

impl fmt::Debug for InformerKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InformerKey")
            .field("description", &self.description)
            .field("resource", &self.resource)
            .field("selection", &self.selection)
            .finish()
    }
}

/// The description, then the API group, version and resource when known, then the selection:
/// `Deployment (apps/v1 deployments) [namespace=shop]`, so that two informers of one kind
/// (another resource, another scope) read apart in a status line.
impl fmt::Display for InformerKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.description)?;
        match &self.api {
            [_, version, _] if version.is_empty() => {}
            [group, version, plural] if group.is_empty() => write!(f, " ({version} {plural})")?,
            [group, version, plural] => write!(f, " ({group}/{version} {plural})")?,
        }
        write!(f, " [{}]", self.selection)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn a_key_reads_with_its_group_version_resource_and_selection() {
        let deployments = InformerKey::new::<u8>(
            Some("apps/v1/deployments".into()),
            Selection::all().namespace("shop"),
            "Deployment".into(),
        )
        .with_api("apps", "v1", "deployments");
        assert_eq!(
            deployments.to_string(),
            "Deployment (apps/v1 deployments) [namespace=shop]"
        );
        let pods = InformerKey::new::<u16>(None, Selection::all(), "Pod".into())
            .with_api("", "v1", "pods");
        assert_eq!(pods.to_string(), "Pod (v1 pods) [all]");
        let custom = InformerKey::new::<u32>(None, Selection::all(), "Projection".into());
        assert_eq!(custom.to_string(), "Projection [all]");
    }

    #[test]
    fn keys_differ_by_type_resource_and_selection_but_not_by_description() {
        let pods = InformerKey::new::<u8>(None, Selection::all(), "Pod".into());
        let same_type_other_name = InformerKey::new::<u8>(None, Selection::all(), "u8".into());
        let other_type = InformerKey::new::<u16>(None, Selection::all(), "Pod".into());
        let other_namespace =
            InformerKey::new::<u8>(None, Selection::all().namespace("a"), "Pod".into());
        let dynamic = InformerKey::new::<u8>(
            Some("example.com/v1/widgets".into()),
            Selection::all(),
            "Pod".into(),
        );

        assert_eq!(pods, same_type_other_name);
        let distinct: HashSet<_> = [
            pods,
            same_type_other_name,
            other_type,
            other_namespace,
            dynamic,
        ]
        .into_iter()
        .collect();
        assert_eq!(distinct.len(), 4);
    }

    #[test]
    fn a_selection_prints_what_it_selects() {
        assert_eq!(Selection::all().to_string(), "all");
        let narrow = Selection::all()
            .namespace("prod")
            .labels("app=web")
            .fields("spec.nodeName=n1");
        assert_eq!(
            narrow.to_string(),
            "namespace=prod, labels=app=web, fields=spec.nodeName=n1"
        );
        let key = InformerKey::new::<u8>(None, narrow, "Pod".into());
        assert_eq!(
            key.to_string(),
            "Pod [namespace=prod, labels=app=web, fields=spec.nodeName=n1]"
        );
        assert!(key.is::<u8>() && !key.is::<u16>());
    }
}
