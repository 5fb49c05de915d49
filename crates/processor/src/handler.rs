//! What a listener receives: [`Notification`]s, and the [`ResourceEventHandler`] trait with its
//! two stock implementations, [`HandlerFuncs`] and [`FilteringHandler`].

use std::{fmt, sync::Arc};

use kinformer_store::{AddKind, ObjectOrTombstone, OldObject};

/// One change to relay to a listener.
///
/// client-go has three notification structs (`addNotification`, `updateNotification`,
/// `deleteNotification`) passed as `interface{}`; here they are one enum. Objects are `Arc`s
/// shared with the cache and every other listener, so relaying a notification to ten listeners
/// copies twenty pointers, never an object.
#[doc(alias = "addNotification")]
#[doc(alias = "updateNotification")]
#[doc(alias = "deleteNotification")]
#[derive(Debug)]
pub enum Notification<K> {
    /// The object appeared in the cache.
    Add {
        /// The object as stored.
        obj: Arc<K>,
        /// Whether the object is part of the initial list (the first full list the informer
        /// saw, or the cache snapshot given to a listener added after start).
        kind: AddKind,
    },
    /// The object changed, or a resync re-delivered it unchanged.
    Update {
        /// The last state the cache held. A compact cache may hand it over still encoded: it
        /// is decoded when a handler reads it ([`OldObject::get`]), once for all listeners.
        old: OldObject<K>,
        /// The state now in the cache.
        new: Arc<K>,
    },
    /// The object left the cache; a tombstone when the deletion was inferred from a relist.
    Delete(ObjectOrTombstone<K>),
}

impl<K> Notification<K> {
    /// An [`Add`](Self::Add) that is not part of the initial list.
    pub fn add(obj: Arc<K>) -> Self {
        Self::Add {
            obj,
            kind: AddKind::Live,
        }
    }

    /// An [`Add`](Self::Add) that is part of the initial list.
    pub fn initial_add(obj: Arc<K>) -> Self {
        Self::Add {
            obj,
            kind: AddKind::InitialList,
        }
    }

    /// An [`Update`](Self::Update); `old` is an `Arc<K>` or an [`OldObject`].
    pub fn update(old: impl Into<OldObject<K>>, new: Arc<K>) -> Self {
        Self::Update {
            old: old.into(),
            new,
        }
    }

    /// A [`Delete`](Self::Delete) of an object or a tombstone.
    pub fn delete(obj: impl Into<ObjectOrTombstone<K>>) -> Self {
        Self::Delete(obj.into())
    }

    /// The newest state the notification carries (for a deletion, the last known state).
    pub fn object(&self) -> &Arc<K> {
        match self {
            Self::Add { obj, .. } => obj,
            Self::Update { new, .. } => new,
            Self::Delete(obj) => obj.object(),
        }
    }

    /// Whether this is an initial-list add, which the registration's sync tracking counts.
    pub fn is_in_initial_list(&self) -> bool {
        matches!(
            self,
            Self::Add {
                kind: AddKind::InitialList,
                ..
            }
        )
    }

    /// Calls the handler method matching this notification.
    pub fn dispatch_to<H>(self, handler: &mut H)
    where
        H: ResourceEventHandler<K> + ?Sized,
    {
        match self {
            Self::Add { obj, kind } => handler.on_add(obj, kind),
            Self::Update { old, new } => handler.on_update_lazy(old, new),
            Self::Delete(obj) => handler.on_delete(obj),
        }
    }
}

impl<K> Clone for Notification<K> {
    fn clone(&self) -> Self {
        match self {
            Self::Add { obj, kind } => Self::Add {
                obj: Arc::clone(obj),
                kind: *kind,
            },
            Self::Update { old, new } => Self::Update {
                old: old.clone(),
                new: Arc::clone(new),
            },
            Self::Delete(obj) => Self::Delete(obj.clone()),
        }
    }
}

impl<K> PartialEq for Notification<K> {
    /// Equal when both are the same kind of notification over the same allocations.
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Add { obj: a, kind: ka }, Self::Add { obj: b, kind: kb }) => {
                Arc::ptr_eq(a, b) && ka == kb
            }
            (Self::Update { old: oa, new: na }, Self::Update { old: ob, new: nb }) => {
                oa.ptr_eq(ob) && Arc::ptr_eq(na, nb)
            }
            (Self::Delete(a), Self::Delete(b)) => a == b,
            _ => false,
        }
    }
}

/// Receives the notifications of one registration, in order, one at a time.
///
/// The methods are synchronous, as in client-go, and run on the listener's own thread, so a
/// handler may block (a slow API call, a lock) without delaying any other listener or the tokio
/// runtime. They take `&mut self` because a listener never calls its handler concurrently.
/// Objects arrive as `Arc`s: keep them, forward them to a work queue, never copy them.
///
/// A panic in a method is caught by the listener, logged with the listener's name and counted
/// in [`ListenerStats::panicked`](crate::ListenerStats::panicked); the notification is
/// skipped and the next one is delivered.
///
/// Most handlers are [`HandlerFuncs`] built from closures; implement the trait when a handler
/// owns state.
pub trait ResourceEventHandler<K>: Send + 'static {
    /// An object was added to the cache. `kind` is [`AddKind::InitialList`] for the objects of
    /// the initial list, and for the cache snapshot a listener receives when it joins late.
    #[doc(alias = "OnAdd")]
    fn on_add(&mut self, obj: Arc<K>, kind: AddKind);

    /// An object changed. `old` is the last state the cache held, which may skip intermediate
    /// states. A resync delivers an update whose `old` and `new` are the same object.
    #[doc(alias = "OnUpdate")]
    fn on_update(&mut self, old: Arc<K>, new: Arc<K>);

    /// An object changed, with the old state as the cache handed it over: a compact cache
    /// leaves it encoded until [`OldObject::get`] decodes it. The default decodes it and calls
    /// [`on_update`](Self::on_update); a handler that never reads the old state overrides this
    /// to skip that decode ([`HandlerFuncs::update_new_func`] does). If the old state cannot
    /// be decoded (the cache reports that to the informer's watch error handler and counts
    /// it), the update is still delivered, with the new state as the old one too.
    fn on_update_lazy(&mut self, old: OldObject<K>, new: Arc<K>) {
        let old = old.get().unwrap_or_else(|| Arc::clone(&new));
        self.on_update(old, new);
    }

    /// An object was deleted. When the informer inferred the deletion from a relist, the final
    /// state is unknown and `obj` is a [`DeletedFinalStateUnknown`] tombstone.
    ///
    /// [`DeletedFinalStateUnknown`]: kinformer_store::DeletedFinalStateUnknown
    #[doc(alias = "OnDelete")]
    fn on_delete(&mut self, obj: ObjectOrTombstone<K>);
}

impl<K, H> ResourceEventHandler<K> for Box<H>
where
    H: ResourceEventHandler<K> + ?Sized,
{
    fn on_add(&mut self, obj: Arc<K>, kind: AddKind) {
        (**self).on_add(obj, kind);
    }

    fn on_update(&mut self, old: Arc<K>, new: Arc<K>) {
        (**self).on_update(old, new);
    }

    fn on_update_lazy(&mut self, old: OldObject<K>, new: Arc<K>) {
        (**self).on_update_lazy(old, new);
    }

    fn on_delete(&mut self, obj: ObjectOrTombstone<K>) {
        (**self).on_delete(obj);
    }
}

type AddFn<K> = Box<dyn FnMut(Arc<K>, AddKind) + Send>;
/// An update closure: with the old and the new object, or with the new one only.
enum UpdateFn<K> {
    OldAndNew(Box<dyn FnMut(Arc<K>, Arc<K>) + Send>),
    NewOnly(Box<dyn FnMut(Arc<K>) + Send>),
}
type DeleteFn<K> = Box<dyn FnMut(ObjectOrTombstone<K>) + Send>;

/// A handler made of closures; a missing closure ignores its kind of notification.
///
/// ```
/// use std::sync::{Arc, atomic::{AtomicUsize, Ordering}};
///
/// use kinformer_processor::{AddKind, HandlerFuncs, ResourceEventHandler};
///
/// let adds = Arc::new(AtomicUsize::new(0));
/// let counted = Arc::clone(&adds);
/// let mut handler = HandlerFuncs::<String>::new().add_func(move |_obj, _kind| {
///     counted.fetch_add(1, Ordering::Relaxed);
/// });
/// handler.on_add(Arc::new("pod".to_owned()), AddKind::InitialList);
/// handler.on_update(Arc::new("a".to_owned()), Arc::new("b".to_owned())); // ignored
/// assert_eq!(adds.load(Ordering::Relaxed), 1);
/// ```
#[doc(alias = "ResourceEventHandlerFuncs")]
#[doc(alias = "ResourceEventHandlerDetailedFuncs")]
pub struct HandlerFuncs<K> {
    add: Option<AddFn<K>>,
    update: Option<UpdateFn<K>>,
    delete: Option<DeleteFn<K>>,
}

impl<K> HandlerFuncs<K> {
    /// A handler that ignores everything until closures are set.
    pub fn new() -> Self {
        Self {
            add: None,
            update: None,
            delete: None,
        }
    }

    /// Sets the closure called for adds, with the object and where it comes from.
    #[doc(alias = "AddFunc")]
    #[must_use]
    pub fn add_func(mut self, f: impl FnMut(Arc<K>, AddKind) + Send + 'static) -> Self {
        self.add = Some(Box::new(f));
        self
    }

    /// Sets the closure called for updates, with the old and the new object.
    #[doc(alias = "UpdateFunc")]
    #[must_use]
    pub fn update_func(mut self, f: impl FnMut(Arc<K>, Arc<K>) + Send + 'static) -> Self {
        self.update = Some(UpdateFn::OldAndNew(Box::new(f)));
        self
    }

    /// Sets the closure called for updates, with the new object only, in place of
    /// [`update_func`](Self::update_func). An informer with a compact cache then never
    /// decodes the replaced object for this handler.
    #[must_use]
    pub fn update_new_func(mut self, f: impl FnMut(Arc<K>) + Send + 'static) -> Self {
        self.update = Some(UpdateFn::NewOnly(Box::new(f)));
        self
    }

    /// Sets the closure called for deletions.
    #[doc(alias = "DeleteFunc")]
    #[must_use]
    pub fn delete_func(mut self, f: impl FnMut(ObjectOrTombstone<K>) + Send + 'static) -> Self {
        self.delete = Some(Box::new(f));
        self
    }
}

impl<K> Default for HandlerFuncs<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K> fmt::Debug for HandlerFuncs<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HandlerFuncs")
            .field("add", &self.add.is_some())
            .field("update", &self.update.is_some())
            .field("delete", &self.delete.is_some())
            .finish()
    }
}

impl<K: 'static> ResourceEventHandler<K> for HandlerFuncs<K> {
    fn on_add(&mut self, obj: Arc<K>, kind: AddKind) {
        if let Some(add) = &mut self.add {
            add(obj, kind);
        }
    }

    fn on_update(&mut self, old: Arc<K>, new: Arc<K>) {
        match &mut self.update {
            Some(UpdateFn::OldAndNew(update)) => update(old, new),
            Some(UpdateFn::NewOnly(update)) => update(new),
            None => {}
        }
    }

    fn on_update_lazy(&mut self, old: OldObject<K>, new: Arc<K>) {
        match &mut self.update {
            Some(UpdateFn::OldAndNew(update)) => {
                // An old state that does not decode was reported by the cache; the update is
                // delivered all the same, as the trait's default does.
                update(old.get().unwrap_or_else(|| Arc::clone(&new)), new);
            }
            Some(UpdateFn::NewOnly(update)) => update(new),
            None => {}
        }
    }

    fn on_delete(&mut self, obj: ObjectOrTombstone<K>) {
        if let Some(delete) = &mut self.delete {
            delete(obj);
        }
    }
}

/// Passes on only the objects that match a filter, turning an update into an add when the
/// object starts matching and into a delete when it stops, as client-go's
/// `FilteringResourceEventHandler` does.
///
/// | old matches | new matches | inner handler gets |
/// | --- | --- | --- |
/// | yes | yes | `on_update(old, new)` |
/// | no | yes | `on_add(new, AddKind::Live)` |
/// | yes | no | `on_delete(old)` |
/// | no | no | nothing |
///
/// Adds and deletes pass when their object matches; for a tombstone the filter sees the last
/// known state. Like a handler, the filter must not rely on mutating the objects it sees (they
/// are shared and immutable).
///
/// ```
/// use std::sync::{Arc, Mutex};
///
/// use kinformer_processor::{FilteringHandler, HandlerFuncs, ResourceEventHandler};
///
/// let seen = Arc::new(Mutex::new(Vec::new()));
/// let record = Arc::clone(&seen);
/// let inner = HandlerFuncs::<u32>::new()
///     .add_func(move |obj, _| record.lock().unwrap().push(format!("add {obj}")));
/// let mut even_only = FilteringHandler::new(|n: &u32| n.is_multiple_of(2), inner);
///
/// // 3 -> 4: the object starts matching, so the inner handler sees an add.
/// even_only.on_update(Arc::new(3), Arc::new(4));
/// assert_eq!(*seen.lock().unwrap(), ["add 4"]);
/// ```
#[doc(alias = "FilteringResourceEventHandler")]
pub struct FilteringHandler<F, H> {
    filter: F,
    handler: H,
}

impl<F, H> FilteringHandler<F, H> {
    /// Wraps `handler` so that it sees only objects for which `filter` returns true.
    pub fn new(filter: F, handler: H) -> Self {
        Self { filter, handler }
    }

    /// The wrapped handler.
    pub fn inner(&self) -> &H {
        &self.handler
    }

    /// Unwraps the inner handler.
    pub fn into_inner(self) -> H {
        self.handler
    }
}

impl<F, H: fmt::Debug> fmt::Debug for FilteringHandler<F, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FilteringHandler")
            .field("handler", &self.handler)
            .finish_non_exhaustive()
    }
}

impl<K, F, H> ResourceEventHandler<K> for FilteringHandler<F, H>
where
    F: FnMut(&K) -> bool + Send + 'static,
    H: ResourceEventHandler<K>,
{
    fn on_add(&mut self, obj: Arc<K>, kind: AddKind) {
        if (self.filter)(&obj) {
            self.handler.on_add(obj, kind);
        }
    }

    fn on_update(&mut self, old: Arc<K>, new: Arc<K>) {
        let newer = (self.filter)(&new);
        let older = (self.filter)(&old);
        match (older, newer) {
            (true, true) => self.handler.on_update(old, new),
            (false, true) => self.handler.on_add(new, AddKind::Live),
            (true, false) => self.handler.on_delete(ObjectOrTombstone::Object(old)),
            (false, false) => {}
        }
    }

    fn on_delete(&mut self, obj: ObjectOrTombstone<K>) {
        if (self.filter)(obj.object()) {
            self.handler.on_delete(obj);
        }
    }
}

#[cfg(test)]
mod tests {
    use kinformer_store::DeletedFinalStateUnknown;

    use super::*;

    /// Objects are numbers; the filter matches even ones.
    #[derive(Default)]
    struct Calls(Vec<String>);

    impl ResourceEventHandler<u32> for Calls {
        fn on_add(&mut self, obj: Arc<u32>, kind: AddKind) {
            self.0.push(format!("add {obj} {}", kind.is_initial_list()));
        }

        fn on_update(&mut self, old: Arc<u32>, new: Arc<u32>) {
            self.0.push(format!("update {old} {new}"));
        }

        fn on_delete(&mut self, obj: ObjectOrTombstone<u32>) {
            let kind = if obj.is_tombstone() {
                "tombstone"
            } else {
                "object"
            };
            self.0.push(format!("delete {} {kind}", obj.object()));
        }
    }

    fn even_only() -> FilteringHandler<impl FnMut(&u32) -> bool + Send + 'static, Calls> {
        FilteringHandler::new(|n: &u32| n.is_multiple_of(2), Calls::default())
    }

    fn calls<F>(handler: FilteringHandler<F, Calls>) -> Vec<String> {
        handler.into_inner().0
    }

    /// Every old/new matching combination of client-go's FilteringResourceEventHandler.OnUpdate.
    #[test]
    fn filtered_update_follows_the_match_transition() {
        let cases: [(u32, u32, &[&str]); 4] = [
            (2, 4, &["update 2 4"]),
            (1, 4, &["add 4 false"]),
            (2, 3, &["delete 2 object"]),
            (1, 3, &[]),
        ];
        for (old, new, expected) in cases {
            let mut handler = even_only();
            handler.on_update(Arc::new(old), Arc::new(new));
            assert_eq!(calls(handler), expected, "update {old} -> {new}");
        }
    }

    /// The deletion made from an update that stops matching carries the old object itself.
    #[test]
    fn an_object_that_stops_matching_is_deleted_with_its_old_state() {
        let old = Arc::new(2);
        let mut handler = even_only();
        handler.on_update(Arc::clone(&old), Arc::new(3));
        assert_eq!(calls(handler), ["delete 2 object"]);
        let deleted = Arc::new(std::sync::Mutex::new(Vec::new()));
        let record = Arc::clone(&deleted);
        let inner = HandlerFuncs::new().delete_func(move |obj| {
            record.lock().expect("poisoned").push(obj);
        });
        let mut handler = FilteringHandler::new(|n: &u32| n.is_multiple_of(2), inner);
        handler.on_update(Arc::clone(&old), Arc::new(3));
        assert_eq!(
            *deleted.lock().expect("poisoned"),
            [ObjectOrTombstone::Object(old)]
        );
    }

    #[test]
    fn filtered_add_passes_only_matching_objects_with_their_initial_flag() {
        let mut handler = even_only();
        handler.on_add(Arc::new(1), AddKind::InitialList);
        handler.on_add(Arc::new(2), AddKind::InitialList);
        handler.on_add(Arc::new(3), AddKind::Live);
        handler.on_add(Arc::new(4), AddKind::Live);
        assert_eq!(calls(handler), ["add 2 true", "add 4 false"]);
    }

    #[test]
    fn filtered_delete_judges_a_tombstone_by_its_last_known_state() {
        let mut handler = even_only();
        handler.on_delete(ObjectOrTombstone::Object(Arc::new(1)));
        handler.on_delete(ObjectOrTombstone::Object(Arc::new(2)));
        for n in [3, 4] {
            handler.on_delete(ObjectOrTombstone::Tombstone(DeletedFinalStateUnknown::new(
                format!("default/{n}"),
                Arc::new(n),
            )));
        }
        assert_eq!(calls(handler), ["delete 2 object", "delete 4 tombstone"]);
    }

    #[test]
    fn handler_funcs_without_closures_ignore_everything() {
        let mut handler = HandlerFuncs::<u32>::new();
        handler.on_add(Arc::new(1), AddKind::Live);
        handler.on_update(Arc::new(1), Arc::new(2));
        handler.on_delete(ObjectOrTombstone::Object(Arc::new(2)));
        assert_eq!(
            format!("{handler:?}"),
            "HandlerFuncs { add: false, update: false, delete: false }"
        );
    }

    #[test]
    fn dispatch_calls_the_method_matching_the_notification() {
        let mut handler = Calls::default();
        let (a, b) = (Arc::new(1), Arc::new(2));
        Notification::initial_add(Arc::clone(&a)).dispatch_to(&mut handler);
        Notification::update(Arc::clone(&a), Arc::clone(&b)).dispatch_to(&mut handler);
        Notification::delete(Arc::clone(&b)).dispatch_to(&mut handler);
        assert_eq!(handler.0, ["add 1 true", "update 1 2", "delete 2 object"]);
    }

    #[test]
    fn an_update_closure_for_the_new_object_only_gets_it_from_either_method() {
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let record = Arc::clone(&seen);
        let mut handler = HandlerFuncs::<u32>::new().update_new_func(move |new| {
            record.lock().expect("poisoned").push(*new);
        });
        handler.on_update(Arc::new(1), Arc::new(2));
        Notification::update(Arc::new(2), Arc::new(3)).dispatch_to(&mut handler);
        handler.on_update_lazy(OldObject::decoded(Arc::new(3)), Arc::new(4));
        assert_eq!(*seen.lock().expect("poisoned"), [2, 3, 4]);
        // Set after it, `update_func` takes its place.
        let record = Arc::clone(&seen);
        let mut handler = HandlerFuncs::<u32>::new()
            .update_new_func(|_| panic!("replaced"))
            .update_func(move |old, new| record.lock().expect("poisoned").push(*old * 10 + *new));
        handler.on_update_lazy(OldObject::decoded(Arc::new(4)), Arc::new(5));
        assert_eq!(*seen.lock().expect("poisoned"), [2, 3, 4, 45]);
    }

    #[test]
    fn notifications_compare_by_allocation_and_kind() {
        let a = Arc::new(1);
        assert_eq!(
            Notification::add(Arc::clone(&a)),
            Notification::add(Arc::clone(&a))
        );
        assert_ne!(
            Notification::add(Arc::clone(&a)),
            Notification::add(Arc::new(1))
        );
        assert_ne!(
            Notification::add(Arc::clone(&a)),
            Notification::initial_add(Arc::clone(&a))
        );
        let update = Notification::update(Arc::clone(&a), Arc::clone(&a));
        assert_eq!(update.clone(), update);
        assert!(Arc::ptr_eq(update.object(), &a));
    }
}
