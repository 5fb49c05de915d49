//! Property test: any interleaving of add, get, done, add_after and the clock moving behaves
//! exactly like a small model of client-go's queue; no item is lost, no item is handed to two
//! workers at once, and duplicates are merged.

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::Duration;

use futures::FutureExt;
use kinformer_workqueue::RateLimitingQueue;
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Add(u8),
    Get,
    /// Finishes one of the in-flight items, chosen by index modulo their number.
    Done(usize),
    AddAfter(u8, u64),
    Advance(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0u8..6).prop_map(Op::Add),
        3 => Just(Op::Get),
        3 => any::<usize>().prop_map(Op::Done),
        2 => ((0u8..6), (0u64..20)).prop_map(|(item, ms)| Op::AddAfter(item, ms)),
        2 => (1u64..25).prop_map(Op::Advance),
    ]
}

/// client-go's queue, written as plainly as possible. Time is in milliseconds.
#[derive(Debug, Default)]
struct Model {
    now: u64,
    queue: VecDeque<u8>,
    dirty: HashSet<u8>,
    processing: HashSet<u8>,
    waiting: HashMap<u8, (u64, u64)>,
    next_seq: u64,
}

impl Model {
    fn add(&mut self, item: u8) {
        if self.dirty.insert(item) && !self.processing.contains(&item) {
            self.queue.push_back(item);
        }
    }

    fn get(&mut self) -> Option<u8> {
        let item = self.queue.pop_front()?;
        self.dirty.remove(&item);
        self.processing.insert(item);
        Some(item)
    }

    fn done(&mut self, item: u8) {
        if self.processing.remove(&item) && self.dirty.contains(&item) {
            self.queue.push_back(item);
        }
    }

    fn add_after(&mut self, item: u8, ms: u64) {
        if ms == 0 {
            self.add(item);
            return;
        }
        let ready_at = self.now + ms;
        if self
            .waiting
            .get(&item)
            .is_some_and(|(current, _)| *current <= ready_at)
        {
            return;
        }
        self.waiting.insert(item, (ready_at, self.next_seq));
        self.next_seq += 1;
    }

    fn advance(&mut self, ms: u64) {
        self.now += ms;
        let mut due: Vec<(u64, u64, u8)> = self
            .waiting
            .iter()
            .filter(|(_, (ready_at, _))| *ready_at <= self.now)
            .map(|(item, (ready_at, seq))| (*ready_at, *seq, *item))
            .collect();
        due.sort_unstable();
        for (_, _, item) in due {
            self.waiting.remove(&item);
            self.add(item);
        }
    }
}

async fn settle() {
    for _ in 0..8 {
        tokio::task::yield_now().await;
    }
}

async fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let queue = RateLimitingQueue::default();
    let mut model = Model::default();
    let mut in_flight: Vec<u8> = Vec::new();

    for op in ops {
        match op {
            Op::Add(item) => {
                queue.add(item);
                model.add(item);
            }
            Op::Get => {
                let got = queue.get().now_or_never().flatten();
                let expected = model.get();
                prop_assert_eq!(got, expected);
                if let Some(item) = got {
                    prop_assert!(
                        !in_flight.contains(&item),
                        "{} handed out while a worker still holds it",
                        item
                    );
                    in_flight.push(item);
                }
            }
            Op::Done(index) => {
                if !in_flight.is_empty() {
                    let item = in_flight.swap_remove(index % in_flight.len());
                    queue.done(&item);
                    model.done(item);
                }
            }
            Op::AddAfter(item, ms) => {
                queue.add_after(item, Duration::from_millis(ms));
                model.add_after(item, ms);
            }
            Op::Advance(ms) => {
                tokio::time::advance(Duration::from_millis(ms)).await;
                settle().await;
                model.advance(ms);
            }
        }
        prop_assert_eq!(queue.len(), model.queue.len());
        prop_assert_eq!(queue.waiting_len(), model.waiting.len());
        let unique: HashSet<u8> = model.queue.iter().copied().collect();
        prop_assert_eq!(
            unique.len(),
            model.queue.len(),
            "model queue holds a duplicate"
        );
    }

    // Nothing is lost: once every deadline passes and every worker finishes, each item that was
    // added and not yet handed out comes out exactly once.
    tokio::time::advance(Duration::from_secs(1)).await;
    settle().await;
    model.advance(1000);
    for item in in_flight.drain(..) {
        queue.done(&item);
        model.done(item);
    }
    let owed = model.dirty.clone();
    queue.shut_down();
    let mut handed_out = HashSet::new();
    while let Some(item) = queue.get().await {
        prop_assert!(handed_out.insert(item), "{} handed out twice", item);
        queue.done(&item);
    }
    prop_assert_eq!(handed_out, owed);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn queue_matches_the_model_for_any_interleaving(ops in prop::collection::vec(op(), 1..80)) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .expect("a paused runtime builds");
        runtime.block_on(run(ops))?;
    }
}
