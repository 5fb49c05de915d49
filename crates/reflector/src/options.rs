//! What a list or watch request asks for: client-go's `metav1.ListOptions`, reduced to the
//! fields a reflector sets.

/// How a list's `resourceVersion` is interpreted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[doc(alias = "ResourceVersionMatch")]
pub enum VersionMatch {
    /// Data at least as new as the resource version given.
    NotOlderThan,
    /// Data at exactly the resource version given.
    Exact,
}

/// The options of one list or watch request.
///
/// The reflector fills in the resource version, paging and watch fields; a [`ListerWatcher`]
/// adds its own selectors (and may tweak the rest) before sending the request.
///
/// [`ListerWatcher`]: crate::ListerWatcher
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListOptions {
    /// `labelSelector`.
    pub label_selector: Option<String>,
    /// `fieldSelector`.
    pub field_selector: Option<String>,
    /// `resourceVersion`: `None` and `Some("")` both mean a consistent read (list) or "from now"
    /// (watch); `Some("0")` means any version, typically the API server's watch cache.
    pub resource_version: Option<String>,
    /// `resourceVersionMatch`.
    pub resource_version_match: Option<VersionMatch>,
    /// `limit`: the page size of a list; `None` asks for everything at once.
    pub limit: Option<u32>,
    /// `continue`: the token of the next page.
    pub continue_token: Option<String>,
    /// `timeoutSeconds` of a watch.
    pub timeout_seconds: Option<u32>,
    /// `allowWatchBookmarks` of a watch.
    pub allow_watch_bookmarks: bool,
    /// `sendInitialEvents` of a watch: a streaming list.
    pub send_initial_events: bool,
    /// `shardSelector`: only the objects of one shard
    /// ([`Shard`](kinformer_store::Shard)'s form), where the server has the
    /// `ShardedListAndWatch` feature; a server without it ignores the parameter.
    pub shard_selector: Option<String>,
}

impl ListOptions {
    /// The resource version as sent, `""` when unset.
    pub fn resource_version(&self) -> &str {
        self.resource_version.as_deref().unwrap_or_default()
    }
}
