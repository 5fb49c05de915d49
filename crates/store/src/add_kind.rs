//! [`AddKind`]: the initial list or a later change.

/// Where an added object comes from, relative to the informer's initial list (client-go's
/// `isInInitialList`): what a queue's process function and a handler's `on_add` are told.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[doc(alias = "isInInitialList")]
pub enum AddKind {
    /// Part of the initial list: the first full list the informer saw, or the cache snapshot a
    /// listener added after start receives.
    InitialList,
    /// A change after that: created on the server, or newly matching a selection.
    Live,
}

impl AddKind {
    /// Whether the object is part of the initial list.
    pub fn is_initial_list(self) -> bool {
        self == AddKind::InitialList
    }
}
