//! A listener's pending notifications: a ring that grows and shrinks, optionally bounded.

use std::{collections::VecDeque, num::NonZeroUsize};

use crate::Notification;

/// How many notifications a listener may hold while its handler is busy.
///
/// The default is [`Unbounded`](Self::Unbounded), as in client-go: a stuck handler holds every
/// notification until memory runs out, but never loses one. A bounded buffer caps memory and
/// counts what it drops in [`ListenerStats::dropped`](crate::ListenerStats::dropped), so the
/// loss is visible; a handler that cannot afford to lose notifications must stay unbounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum BufferPolicy {
    /// Keep everything (client-go's behaviour). The ring doubles when full and gives memory
    /// back once the handler catches up.
    #[default]
    Unbounded,
    /// Keep at most `capacity` notifications; when full, apply `overflow`. A handler thread
    /// moves up to 64 notifications at a time out of the buffer into its hand-off batch, so a
    /// listener can hold that many beyond `capacity`.
    Bounded {
        /// The most notifications held at once.
        capacity: NonZeroUsize,
        /// Which notification to drop when the buffer is full.
        overflow: Overflow,
    },
}

impl BufferPolicy {
    /// A bounded buffer of `capacity` (at least one) that drops as `overflow` says.
    pub fn bounded(capacity: usize, overflow: Overflow) -> Self {
        Self::Bounded {
            capacity: NonZeroUsize::new(capacity).unwrap_or(NonZeroUsize::MIN),
            overflow,
        }
    }
}

/// Which notification a full bounded buffer drops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overflow {
    /// Drop the oldest pending notification to make room: the handler sees the newest state
    /// sooner, but misses what it was replaced by.
    DropOldest,
    /// Refuse the incoming notification: the handler sees an unbroken prefix of the stream.
    DropNewest,
}

/// Below this capacity the ring never shrinks; client-go starts its ring at the same size.
const NORMAL_CAPACITY: usize = 1024;
/// Room for a burst without reallocating, while an idle listener stays small.
const INITIAL_CAPACITY: usize = 16;

/// What [`RingBuffer::push`] did with a notification.
#[derive(Debug)]
pub(crate) enum Pushed<K> {
    Queued,
    /// The buffer was full; this notification (the new one or the oldest) was dropped.
    Dropped(Notification<K>),
}

/// client-go's `buffer.RingGrowing`, plus shrinking and an optional bound.
#[derive(Debug)]
pub(crate) struct RingBuffer<K> {
    items: VecDeque<Notification<K>>,
    policy: BufferPolicy,
}

impl<K> RingBuffer<K> {
    pub(crate) fn new(policy: BufferPolicy) -> Self {
        let initial = match policy {
            BufferPolicy::Bounded { capacity, .. } => capacity.get().min(INITIAL_CAPACITY),
            BufferPolicy::Unbounded => INITIAL_CAPACITY,
        };
        Self {
            items: VecDeque::with_capacity(initial),
            policy,
        }
    }

    pub(crate) fn push(&mut self, notification: Notification<K>) -> Pushed<K> {
        let mut outcome = Pushed::Queued;
        if let BufferPolicy::Bounded { capacity, overflow } = self.policy
            && self.items.len() >= capacity.get()
        {
            match overflow {
                Overflow::DropNewest => return Pushed::Dropped(notification),
                Overflow::DropOldest => {
                    if let Some(oldest) = self.items.pop_front() {
                        outcome = Pushed::Dropped(oldest);
                    }
                }
            }
        }
        self.items.push_back(notification);
        outcome
    }

    pub(crate) fn pop(&mut self) -> Option<Notification<K>> {
        let next = self.items.pop_front()?;
        self.shrink_if_sparse();
        Some(next)
    }

    /// Gives memory back after a backlog drains. Shrinking only once the ring is a quarter
    /// full, and then to half, keeps the copying amortised O(1) per notification.
    fn shrink_if_sparse(&mut self) {
        let capacity = self.items.capacity();
        if capacity > NORMAL_CAPACITY && self.items.len() <= capacity / 4 {
            self.items
                .shrink_to((self.items.len() * 2).max(NORMAL_CAPACITY));
        }
    }

    /// Empties the buffer, handing back what was pending.
    pub(crate) fn drain_all(&mut self) -> VecDeque<Notification<K>> {
        std::mem::take(&mut self.items)
    }

    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    pub(crate) fn capacity(&self) -> usize {
        self.items.capacity()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn add(n: u32) -> Notification<u32> {
        Notification::add(Arc::new(n))
    }

    fn value(notification: &Notification<u32>) -> u32 {
        **notification.object()
    }

    #[test]
    fn unbounded_ring_keeps_order_while_growing() {
        let mut ring = RingBuffer::new(BufferPolicy::Unbounded);
        for n in 0..5000 {
            assert!(matches!(ring.push(add(n)), Pushed::Queued));
        }
        assert_eq!(ring.len(), 5000);
        let drained: Vec<u32> = std::iter::from_fn(|| ring.pop())
            .map(|n| value(&n))
            .collect();
        assert_eq!(drained, (0..5000).collect::<Vec<_>>());
    }

    #[test]
    fn ring_gives_memory_back_once_a_backlog_drains() {
        let mut ring = RingBuffer::new(BufferPolicy::Unbounded);
        for n in 0..100_000 {
            ring.push(add(n));
        }
        assert!(ring.capacity() >= 100_000);
        while ring.pop().is_some() {}
        assert!(
            ring.capacity() <= NORMAL_CAPACITY * 2,
            "capacity stayed at {}",
            ring.capacity()
        );
    }

    #[test]
    fn bounded_drop_newest_refuses_what_does_not_fit() {
        let mut ring = RingBuffer::new(BufferPolicy::bounded(3, Overflow::DropNewest));
        for n in 0..3 {
            assert!(matches!(ring.push(add(n)), Pushed::Queued));
        }
        match ring.push(add(3)) {
            Pushed::Dropped(dropped) => assert_eq!(value(&dropped), 3),
            Pushed::Queued => panic!("a full buffer queued a fourth notification"),
        }
        let kept: Vec<u32> = std::iter::from_fn(|| ring.pop())
            .map(|n| value(&n))
            .collect();
        assert_eq!(kept, [0, 1, 2]);
    }

    #[test]
    fn bounded_drop_oldest_keeps_the_newest() {
        let mut ring = RingBuffer::new(BufferPolicy::bounded(3, Overflow::DropOldest));
        let mut dropped = Vec::new();
        for n in 0..5 {
            if let Pushed::Dropped(old) = ring.push(add(n)) {
                dropped.push(value(&old));
            }
        }
        assert_eq!(dropped, [0, 1]);
        let kept: Vec<u32> = std::iter::from_fn(|| ring.pop())
            .map(|n| value(&n))
            .collect();
        assert_eq!(kept, [2, 3, 4]);
    }

    #[test]
    fn a_zero_bound_is_raised_to_one() {
        assert_eq!(
            BufferPolicy::bounded(0, Overflow::DropNewest),
            BufferPolicy::Bounded {
                capacity: NonZeroUsize::MIN,
                overflow: Overflow::DropNewest
            }
        );
    }
}
