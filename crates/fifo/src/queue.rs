//! The seam the informer consumes: the object-safe [`Queue`] trait.

use std::{
    future::Future,
    pin::Pin,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
};

use kinformer_store::{CacheReader, Incoming, KeyFunc, Store};
use tokio::sync::Notify;

use kinformer_store::AddKind;

use crate::{BoxError, Deltas, Popped, Result};

/// A boxed, sendable future, as the object-safe [`Queue`] returns from its async methods.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The process function a pop calls with what it popped and whether that belongs to the
/// initial list (the first replace, not yet popped in full); it says what became of the item.
///
/// It runs while the queue's lock is held (unless a [`RealFifo`](crate::RealFifo) was built to
/// unlock while processing), so it must not call back into the queue; in exchange nothing can
/// queue, resync or replace the key it is processing until it returns.
#[doc(alias = "PopProcessFunc")]
#[doc(alias = "ProcessBatchFunc")]
pub type ProcessFn<'a, K> = dyn FnMut(&Popped<K>, AddKind) -> Processed + Send + 'a;

/// What a process function made of a popped item: an outcome, not an error.
#[derive(Debug)]
#[must_use]
#[doc(alias = "ErrRequeue")]
pub enum Processed {
    /// Processed: the item leaves the queue and `pop` returns it.
    Done,
    /// Put the item back (unless its key was queued again meanwhile; the newer deltas win), and
    /// let `pop` return it.
    Requeue,
    /// Failed: the item leaves the queue and `pop` reports
    /// [`Error::Process`](crate::Error::Process).
    Failed(BoxError),
    /// Failed, and put back for another try as [`Requeue`](Self::Requeue) does; `pop` reports
    /// [`Error::Process`](crate::Error::Process).
    Retry(BoxError),
}

impl Processed {
    /// Whether the popped item goes back into the queue.
    pub(crate) fn requeues(&self) -> bool {
        matches!(self, Processed::Requeue | Processed::Retry(_))
    }

    /// What `pop` returns for `popped`.
    pub(crate) fn into_result<T>(self, popped: T) -> Result<T> {
        match self {
            Processed::Done | Processed::Requeue => Ok(popped),
            Processed::Failed(source) | Processed::Retry(source) => {
                Err(crate::Error::Process { source })
            }
        }
    }
}

/// What a pop tells its process function: whether the initial population is still being
/// popped.
pub(crate) fn add_kind(synced: bool) -> AddKind {
    if synced {
        AddKind::Live
    } else {
        AddKind::InitialList
    }
}

/// Applied to every object on its way into a queue (never to tombstones or resync objects),
/// for instance to drop fields the consumer never reads before they are cached.
///
/// client-go's `TransformFunc` may fail; here a transform cannot, since it returns the same
/// type it was given.
#[doc(alias = "TransformFunc")]
pub type Transformer<K> = Arc<dyn Fn(Arc<K>) -> Arc<K> + Send + Sync>;

/// `obj` as a queue holds it: through `transformer` when there is one. The bytes `obj` was
/// decoded from go with it only when no transformer ran: a transformed object is no longer
/// what they hold.
pub(crate) fn transformed<K>(
    transformer: Option<&Transformer<K>>,
    obj: Incoming<K>,
) -> Incoming<K> {
    match transformer {
        Some(transform) => transform(obj.into_parts().0).into(),
        None => obj,
    }
}

/// A part of a list keyed and transformed on its way into a queue: for each object, the key
/// it is queued under, the key the consumer will hold the transformed object under (the same
/// unless a transformer changes it), and the transformed object.
pub(crate) fn keyed_part<K>(
    items: Vec<Incoming<K>>,
    key_func: &KeyFunc<K>,
    transformer: Option<&Transformer<K>>,
) -> kinformer_store::Result<Vec<(String, String, Incoming<K>)>> {
    items
        .into_iter()
        .map(|obj| {
            let key = key_func(obj.object())?;
            let obj = transformed(transformer, obj);
            let held = match transformer {
                Some(_) => key_func(obj.object())?,
                None => key.clone(),
            };
            Ok((key, held, obj))
        })
        .collect()
}

/// Resolves once `queued` (how many items a queue holds, and whether it is closed) is within
/// `backlog` or closed, woken through `room`; at once without a backlog.
pub(crate) fn room_for_part<'a>(
    room: &'a Waker,
    backlog: Option<usize>,
    queued: impl Fn() -> (usize, bool) + Send + Sync + 'a,
) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send + 'a>> {
    let Some(backlog) = backlog else {
        return Box::pin(std::future::ready(()));
    };
    Box::pin(async move {
        let roomy = || {
            let (len, closed) = queued();
            (len <= backlog || closed).then_some(Ok(()))
        };
        let _ = room.wait_until(roomy).await;
    })
}

/// The consumer's cache as a queue sees it: a read-only view, of which the queue asks its keys
/// and the object under a key. An informer's cache (an `Arc<dyn Indexer<K>>`) coerces to it.
pub type KnownObjects<K> = Arc<dyn CacheReader<K>>;

/// A queue between a reflector (which writes into it through [`Store`]) and the informer's
/// process loop (which pops from it).
///
/// [`DeltaFifo`](crate::DeltaFifo) and [`RealFifo`](crate::RealFifo) implement it; an informer
/// holds an `Arc<dyn Queue<K>>`, so a user can bring a queue of their own.
///
/// Its reads return the deltas queued, not the objects cached.
#[doc(alias = "QueueWithBatch")]
pub trait Queue<K>: Store<K> {
    /// The deltas queued for every key, in pop order.
    fn list(&self) -> Vec<Deltas<K>>;

    /// Every key with queued deltas, in pop order.
    #[doc(alias = "ListKeys")]
    fn list_keys(&self) -> Vec<String>;

    /// The deltas queued for `obj`'s key.
    ///
    /// # Errors
    ///
    /// When the object cannot be keyed.
    fn get(&self, obj: &K) -> kinformer_store::Result<Option<Deltas<K>>>;

    /// The deltas queued for `key`.
    #[doc(alias = "GetByKey")]
    fn get_by_key(&self, key: &str) -> Option<Deltas<K>>;

    /// Waits until something is queued (or the queue is closed), removes it, and hands it to
    /// `process` with its [`AddKind`]; then returns it.
    ///
    /// The process function runs under the queue's lock, so processing a key never races a
    /// resync or replace of that key.
    ///
    /// # Errors
    ///
    /// [`Error::Closed`](crate::Error::Closed) once the queue is closed and empty;
    /// [`Error::Process`](crate::Error::Process) for what the process function reported as
    /// [`Processed::Failed`] or [`Processed::Retry`].
    #[doc(alias = "Pop")]
    fn pop<'a>(&'a self, process: &'a mut ProcessFn<'_, K>) -> BoxFuture<'a, Result<Popped<K>>>;

    /// Like [`pop`](Self::pop), but may hand over several in-order deltas for distinct keys at
    /// once as [`Popped::Batch`]. A queue without batching pops one item.
    ///
    /// # Errors
    ///
    /// As [`pop`](Self::pop).
    #[doc(alias = "PopBatch")]
    fn pop_batch<'a>(
        &'a self,
        process: &'a mut ProcessFn<'_, K>,
    ) -> BoxFuture<'a, Result<Popped<K>>> {
        self.pop(process)
    }

    /// [`pop`](Self::pop) without waiting: `Ok(None)` when the queue is empty and open.
    ///
    /// # Errors
    ///
    /// As [`pop`](Self::pop).
    fn try_pop(&self, process: &mut ProcessFn<'_, K>) -> Result<Option<Popped<K>>>;

    /// Puts deltas previously popped back, unless the key has been queued again meanwhile (the
    /// newer deltas win). An empty `deltas` is ignored.
    ///
    /// # Errors
    ///
    /// [`Error::Key`](crate::Error::Key) when the newest delta's object cannot be keyed.
    #[doc(alias = "AddIfNotPresent")]
    fn add_if_not_present(&self, deltas: Deltas<K>) -> Result<()>;

    /// Records that the watch reached `resource_version`. A queue that does not deliver
    /// bookmarks ignores it, as this default does.
    ///
    /// # Errors
    ///
    /// When the queue cannot record it.
    #[doc(alias = "Bookmark")]
    fn bookmark(&self, resource_version: &str) -> Result<()> {
        let _ = resource_version;
        Ok(())
    }

    /// Whether the initial population (the first replace, or nothing if an add came first) has
    /// been popped in full.
    #[doc(alias = "HasSynced")]
    fn has_synced(&self) -> bool;

    /// Closes the queue: every waiting pop wakes, and pops report
    /// [`Error::Closed`](crate::Error::Closed) once the queue is empty.
    #[doc(alias = "Close")]
    fn close(&self);

    /// Whether [`close`](Self::close) was called.
    #[doc(alias = "IsClosed")]
    fn is_closed(&self) -> bool;

    /// How many items a pop could still take (keys for a DeltaFIFO; deltas and whole items,
    /// such as a relist or one part of it, for a RealFIFO).
    fn len(&self) -> usize;

    /// Whether nothing is queued.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Wakes pops waiting on an empty queue, without touching the `Notify` when nobody waits.
#[derive(Debug, Default)]
pub(crate) struct Waker {
    notify: Notify,
    /// Pops registered on `notify` (or about to be). A producer reads it after releasing the
    /// queue's lock; a waiter raises it before taking that lock for its last look, so either
    /// the waiter sees the item or the producer sees the waiter.
    waiters: AtomicUsize,
}

impl Waker {
    /// Wakes one waiting pop, if any.
    pub(crate) fn wake_one(&self) {
        if self.waiters.load(Ordering::SeqCst) > 0 {
            self.notify.notify_one();
        }
    }

    /// Wakes every waiting pop.
    pub(crate) fn wake_all(&self) {
        if self.waiters.load(Ordering::SeqCst) > 0 {
            self.notify.notify_waiters();
            self.notify.notify_one();
        }
    }

    /// Runs `attempt` until it yields, sleeping in between.
    ///
    /// The first attempt runs without registering as a waiter, which is all a busy queue
    /// needs. Before sleeping, the waiter registers and then tries once more, so a push or a
    /// close that lands between a failed attempt and the sleep still wakes it.
    pub(crate) async fn wait_until<T>(
        &self,
        mut attempt: impl FnMut() -> Option<Result<T>>,
    ) -> Result<T> {
        if let Some(outcome) = attempt() {
            return outcome;
        }
        self.waiters.fetch_add(1, Ordering::SeqCst);
        let _registered = Registered(&self.waiters);
        loop {
            let mut notified = std::pin::pin!(self.notify.notified());
            notified.as_mut().enable();
            if let Some(outcome) = attempt() {
                return outcome;
            }
            notified.await;
        }
    }
}

/// Lowers the waiter count when a waiting pop ends, cancelled or not.
struct Registered<'a>(&'a AtomicUsize);

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}
