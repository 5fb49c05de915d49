//! Lists a [`RealFifo`] takes in parts: the initial list with atomic events, and relists when
//! it takes those in parts too.

use std::{collections::HashSet, future::Future, pin::Pin, sync::Arc};

use kinformer_store::{Incoming, ListInParts};

use super::{Entry, RealFifo, StoreResult};
use crate::{
    Delta, DeltaType, ListEnd, RelistEnd, RelistPart,
    queue::{keyed_part, room_for_part},
};

impl<K: Send + Sync> RealFifo<K> {
    /// Resolves once the queue, counting the objects its relist parts hold, is within the
    /// list backlog (or closed).
    fn room_for_list_part(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        room_for_part(&self.room, self.list_backlog, move || {
            let state = self.state.lock();
            (state.items.len() + state.relisted, state.closed)
        })
    }
}

/// The initial list queued part by part: each object as a `Replaced` delta, then one
/// [`ListEnd`] that deletes what the list did not name (objects an abandoned list brought).
pub(super) struct PartsIntoRealFifo<'a, K> {
    pub(super) fifo: &'a RealFifo<K>,
    pub(super) listed: HashSet<String>,
}

impl<K: Send + Sync + 'static> ListInParts<K> for PartsIntoRealFifo<'_, K> {
    fn part(&mut self, items: Vec<Incoming<K>>) -> StoreResult<()> {
        let fifo = self.fifo;
        let keyed = keyed_part(items, &fifo.key_func, fifo.transformer.as_ref())?;
        {
            let mut state = fifo.state.lock();
            state.items.reserve(keyed.len());
            for (key, held, obj) in keyed {
                self.listed.insert(held);
                state.items.push_back(Entry::Delta {
                    key,
                    delta: Delta::arrived(DeltaType::Replaced, obj),
                });
                if !state.populated {
                    state.initial_population_count += 1;
                }
            }
        }
        fifo.waker.wake_all();
        Ok(())
    }

    fn ready(&mut self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        self.fifo.room_for_list_part()
    }

    fn finish(self: Box<Self>, resource_version: &str) -> StoreResult<()> {
        let fifo = self.fifo;
        {
            let mut state = fifo.state.lock();
            state.items.push_back(Entry::ListEnd(ListEnd {
                resource_version: resource_version.to_owned(),
                listed: Arc::new(self.listed),
            }));
            if !state.populated {
                state.populated = true;
                state.initial_population_count += 1;
            }
        }
        fifo.waker.wake_all();
        Ok(())
    }
}

/// A relist queued part by part ([`RealFifoOptions::relist_in_parts`]): each part one
/// [`Popped::RelistPart`], the end one [`Popped::RelistEnd`]. Dropped unfinished (the list
/// failed on the way), it queues an end that abandons the relist.
pub(super) struct RelistIntoRealFifo<'a, K> {
    pub(super) fifo: &'a RealFifo<K>,
    pub(super) relist: u64,
    pub(super) finished: bool,
}

impl<K> RelistIntoRealFifo<'_, K> {
    fn end(&mut self, resource_version: Option<String>) {
        self.finished = true;
        self.fifo
            .state
            .lock()
            .items
            .push_back(Entry::RelistEnd(RelistEnd {
                relist: self.relist,
                resource_version,
            }));
        self.fifo.waker.wake_all();
    }
}

impl<K: Send + Sync + 'static> ListInParts<K> for RelistIntoRealFifo<'_, K> {
    fn part(&mut self, items: Vec<Incoming<K>>) -> StoreResult<()> {
        let fifo = self.fifo;
        // Keyed only to refuse an object without a key, as a whole replace does.
        let objects = keyed_part(items, &fifo.key_func, fifo.transformer.as_ref())?
            .into_iter()
            .map(|(_, _, obj)| obj)
            .collect::<Vec<_>>();
        if objects.is_empty() {
            return Ok(());
        }
        {
            let mut state = fifo.state.lock();
            state.relisted += objects.len();
            state.items.push_back(Entry::RelistPart(RelistPart {
                relist: self.relist,
                objects,
            }));
        }
        fifo.waker.wake_all();
        Ok(())
    }

    fn ready(&mut self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        self.fifo.room_for_list_part()
    }

    fn finish(mut self: Box<Self>, resource_version: &str) -> StoreResult<()> {
        self.end(Some(resource_version.to_owned()));
        Ok(())
    }
}

impl<K> Drop for RelistIntoRealFifo<'_, K> {
    fn drop(&mut self) {
        if !self.finished {
            self.end(None);
        }
    }
}
