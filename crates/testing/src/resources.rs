//! The resource types the server serves: a table of built-ins over k8s-openapi, plus CRDs.

use std::any::TypeId;
use std::sync::Arc;

use k8s_openapi::NamespaceResourceScope;
use serde_json::{Value, json};

use crate::object::object_key;
use crate::status::Target;

/// The verbs every served resource advertises in discovery.
const VERBS: [&str; 8] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// One served resource at one group/version, as discovery describes it.
///
/// Objects are stored per group and resource (like apiserver's storage key), so a CRD served at
/// several versions shares one set of objects; only `apiVersion` differs between versions, which
/// is what a CRD with conversion strategy `None` does.
///
/// A test builds one with [`ResourceType::custom`] and serves it with
/// [`FakeApiServer::register`](crate::FakeApiServer::register), or creates the CRD object
/// ([`fixtures::widget_crd`](crate::fixtures::widget_crd)) as a cluster would; the built-ins
/// come from [`builtin_resources`]. The public fields are what discovery names it by.
#[derive(Debug, Clone, PartialEq, Eq)]
#[doc(alias = "APIResource")]
pub struct ResourceType {
    /// API group, empty for the core group.
    pub group: String,
    /// API version within the group, e.g. `v1`.
    pub(crate) version: String,
    /// The object kind, e.g. `Pod`.
    pub kind: String,
    /// The URL path segment, e.g. `pods`.
    pub plural: String,
    /// The lower-case singular name, e.g. `pod`.
    pub singular: String,
    /// Whether objects live in a namespace.
    pub namespaced: bool,
    /// Short names advertised by discovery, e.g. `po`.
    pub short_names: Vec<String>,
    /// Whether the `/status` subresource exists: then the main resource ignores status changes
    /// and `/status` changes nothing but status, as apiserver's strategies do.
    pub(crate) status_subresource: bool,
    /// Field selector paths accepted beyond `metadata.name` and `metadata.namespace`
    /// (e.g. `spec.nodeName` for pods). Values are read from the JSON object by dotted path.
    pub(crate) field_selectors: Vec<String>,
    /// Whether a delete answers with the deleted object (pods do) rather than a `Success` Status.
    pub(crate) returns_deleted_object: bool,
    /// Whether apiserver's strategy for the kind keeps `metadata.generation`: 1 on create, plus
    /// one per spec change (kinds with a spec a controller acts on, and every custom resource).
    /// Other kinds (ConfigMaps, Secrets, Services, ...) never get one from the server.
    pub(crate) tracks_generation: bool,
    /// Whether objects are served as unstructured JSON, as custom resources are: their list
    /// items keep `apiVersion` and `kind`, while a typed list of a built-in leaves them out.
    pub(crate) unstructured: bool,
}

impl ResourceType {
    /// The key an object of this type is stored under: `namespace/name` (the namespace
    /// defaulting to `default`) when the type is namespaced, else `name`.
    pub(crate) fn key(&self, namespace: Option<&str>, name: &str) -> String {
        if self.namespaced {
            object_key(Some(namespace.unwrap_or("default")), name)
        } else {
            object_key(None, name)
        }
    }

    /// What an error about the object `name` of this type names.
    pub(crate) fn target<'a>(&'a self, name: &'a str) -> Target<'a> {
        Target {
            group: &self.group,
            resource: &self.plural,
            name,
        }
    }
}

impl ResourceType {
    /// The description of a k8s-openapi type, read from its `Resource` constants.
    pub(crate) fn of<K>() -> Self
    where
        K: k8s_openapi::Resource + 'static,
        K::Scope: 'static,
    {
        Self {
            group: K::GROUP.to_owned(),
            version: K::VERSION.to_owned(),
            kind: K::KIND.to_owned(),
            plural: K::URL_PATH_SEGMENT.to_owned(),
            singular: K::KIND.to_ascii_lowercase(),
            namespaced: TypeId::of::<K::Scope>() == TypeId::of::<NamespaceResourceScope>(),
            short_names: Vec::new(),
            status_subresource: false,
            field_selectors: Vec::new(),
            returns_deleted_object: false,
            tracks_generation: false,
            unstructured: false,
        }
    }

    /// A custom resource type (what a CRD version declares).
    pub fn custom(group: &str, version: &str, kind: &str, plural: &str, namespaced: bool) -> Self {
        Self {
            group: group.to_owned(),
            version: version.to_owned(),
            kind: kind.to_owned(),
            plural: plural.to_owned(),
            singular: kind.to_ascii_lowercase(),
            namespaced,
            short_names: Vec::new(),
            status_subresource: false,
            field_selectors: Vec::new(),
            returns_deleted_object: false,
            tracks_generation: true,
            unstructured: true,
        }
    }

    /// Adds short names.
    pub(crate) fn with_short_names(mut self, names: &[&str]) -> Self {
        self.short_names = names.iter().map(|n| (*n).to_owned()).collect();
        self
    }

    /// Declares the `/status` subresource.
    pub(crate) fn with_status_subresource(mut self) -> Self {
        self.status_subresource = true;
        self
    }

    /// Adds field selector paths (the per-kind extension point).
    pub(crate) fn with_field_selectors(mut self, fields: &[&str]) -> Self {
        self.field_selectors
            .extend(fields.iter().map(|f| (*f).to_owned()));
        self
    }

    /// Declares that the kind's strategy keeps `metadata.generation`.
    pub(crate) fn with_generation(mut self) -> Self {
        self.tracks_generation = true;
        self
    }

    fn returning_deleted_object(mut self) -> Self {
        self.returns_deleted_object = true;
        self
    }

    /// `v1` or `apps/v1`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The storage identity shared by every version: `pods` or `deployments.apps`.
    pub(crate) fn group_resource(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    pub(crate) fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }

    pub(crate) fn discovery_entry(&self) -> Vec<Value> {
        let mut entry = json!({
            "name": self.plural,
            "singularName": self.singular,
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": VERBS,
        });
        if !self.short_names.is_empty() {
            entry["shortNames"] = json!(self.short_names);
        }
        let mut entries = vec![entry];
        if self.status_subresource {
            entries.push(json!({
                "name": format!("{}/status", self.plural),
                "singularName": "",
                "namespaced": self.namespaced,
                "kind": self.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
        entries
    }

    pub(crate) fn aggregated_entry(&self) -> Value {
        let gvk = json!({ "group": self.group, "version": self.version, "kind": self.kind });
        let mut entry = json!({
            "resource": self.plural,
            "responseKind": gvk,
            "scope": if self.namespaced { "Namespaced" } else { "Cluster" },
            "singularResource": self.singular,
            "verbs": VERBS,
        });
        if !self.short_names.is_empty() {
            entry["shortNames"] = json!(self.short_names);
        }
        if self.status_subresource {
            entry["subresources"] = json!([{
                "subresource": "status",
                "responseKind": gvk,
                "verbs": ["get", "patch", "update"],
            }]);
        }
        entry
    }

    /// Whether `path` can be used in a field selector on this resource.
    pub(crate) fn supports_field(&self, path: &str) -> bool {
        path == "metadata.name"
            || (path == "metadata.namespace")
            || self.field_selectors.iter().any(|f| f == path)
    }
}

/// Lists built-in types, each from its k8s-openapi struct, so adding one is one line.
macro_rules! builtin_table {
    ($($ty:ty $(=> $($modifier:ident($($arg:expr),*)).+)?;)*) => {
        vec![$(ResourceType::of::<$ty>()$($(.$modifier($($arg),*))+)?),*]
    };
}

/// The core and apps built-ins the server serves out of the box (plus a few a controller meets).
pub fn builtin_resources() -> Vec<ResourceType> {
    use k8s_openapi::api::core::v1 as core;
    use k8s_openapi::api::{
        apps::v1 as apps, batch::v1 as batch, coordination::v1 as coordination, rbac::v1 as rbac,
    };
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiextensions;
    builtin_table! {
        // Pods count generations since 1.33 (PodObservedGenerationTracking), unconditionally.
        core::Pod => with_short_names(&["po"]).with_status_subresource().returning_deleted_object()
            .with_generation()
            .with_field_selectors(&[
                "spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
                "spec.serviceAccountName", "spec.hostNetwork", "status.phase", "status.podIP",
                "status.nominatedNodeName",
            ]);
        core::ConfigMap => with_short_names(&["cm"]);
        core::Secret => with_field_selectors(&["type"]);
        core::Service => with_short_names(&["svc"]).with_status_subresource();
        core::Namespace => with_short_names(&["ns"]).with_status_subresource()
            .with_field_selectors(&["status.phase"]);
        core::Node => with_short_names(&["no"]).with_status_subresource()
            .with_field_selectors(&["spec.unschedulable"]);
        core::Event => with_short_names(&["ev"]).with_field_selectors(&[
            "involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
            "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
            "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type",
        ]);
        core::Endpoints => with_short_names(&["ep"]);
        core::ServiceAccount => with_short_names(&["sa"]);
        core::PersistentVolumeClaim => with_short_names(&["pvc"]).with_status_subresource();
        core::PersistentVolume => with_short_names(&["pv"]).with_status_subresource();
        apps::Deployment => with_generation().with_short_names(&["deploy"]).with_status_subresource();
        apps::ReplicaSet => with_generation().with_short_names(&["rs"]).with_status_subresource();
        apps::StatefulSet => with_generation().with_short_names(&["sts"]).with_status_subresource();
        apps::DaemonSet => with_generation().with_short_names(&["ds"]).with_status_subresource();
        apps::ControllerRevision;
        batch::Job => with_generation().with_status_subresource();
        batch::CronJob => with_generation().with_short_names(&["cj"]).with_status_subresource();
        coordination::Lease;
        rbac::Role;
        rbac::RoleBinding;
        rbac::ClusterRole;
        rbac::ClusterRoleBinding;
        apiextensions::CustomResourceDefinition => with_short_names(&["crd", "crds"])
            .with_status_subresource().with_generation();
    }
}

/// The served types, by group/version; cheap to clone out of the server's lock.
#[derive(Debug, Clone, Default)]
pub(crate) struct Registry {
    types: Vec<Arc<ResourceType>>,
}

impl Registry {
    pub(crate) fn with_builtins() -> Self {
        let mut registry = Self::default();
        for resource in builtin_resources() {
            registry.register(resource);
        }
        registry
    }

    /// Adds a type, replacing one with the same group, version and plural.
    pub(crate) fn register(&mut self, resource: ResourceType) {
        self.types.retain(|t| {
            !(t.group == resource.group
                && t.version == resource.version
                && t.plural == resource.plural)
        });
        self.types.push(Arc::new(resource));
    }

    pub(crate) fn unregister_group_resource(&mut self, group: &str, plural: &str) {
        self.types
            .retain(|t| !(t.group == group && t.plural == plural));
    }

    pub(crate) fn find(
        &self,
        group: &str,
        version: &str,
        plural: &str,
    ) -> Option<Arc<ResourceType>> {
        self.types
            .iter()
            .find(|t| t.group == group && t.version == version && t.plural == plural)
            .cloned()
    }

    /// Every served type.
    pub(crate) fn all(&self) -> &[Arc<ResourceType>] {
        &self.types
    }

    pub(crate) fn find_kind(&self, api_version: &str, kind: &str) -> Option<Arc<ResourceType>> {
        self.types
            .iter()
            .find(|t| t.api_version() == api_version && t.kind == kind)
            .cloned()
    }

    pub(crate) fn in_group_version(&self, group: &str, version: &str) -> Vec<Arc<ResourceType>> {
        self.types
            .iter()
            .filter(|t| t.group == group && t.version == version)
            .cloned()
            .collect()
    }

    /// Groups (core excluded) with their versions, in registration order.
    pub(crate) fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut groups: Vec<(String, Vec<String>)> = Vec::new();
        for t in self.types.iter().filter(|t| !t.group.is_empty()) {
            match groups.iter_mut().find(|(g, _)| *g == t.group) {
                Some((_, versions)) => {
                    if !versions.contains(&t.version) {
                        versions.push(t.version.clone());
                    }
                }
                None => groups.push((t.group.clone(), vec![t.version.clone()])),
            }
        }
        groups
    }
}
