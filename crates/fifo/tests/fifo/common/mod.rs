//! Test objects and helpers shared by the queue tests: client-go's `testFifoObject` and
//! `literalListerGetter`, in Rust.

// Each test crate uses a different subset of these helpers, and `pub` is how they share them.

use std::{collections::BTreeMap, future::Future, pin::Pin, sync::Arc, task::Poll};

use kinformer_fifo::{
    Delta, DeltaType, Deltas, KnownObjects, Popped, Processed, Queue, Transformer,
};
use kinformer_store::{CacheReader, Encoded, Incoming, Object, ObjectOrTombstone};

/// client-go's `testFifoObject`: a name (its key) and a value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Obj {
    pub(crate) name: String,
    pub(crate) val: i64,
}

impl Object for Obj {
    fn name(&self) -> Option<&str> {
        Some(self.name.as_str()).filter(|name| !name.is_empty())
    }
    fn namespace(&self) -> Option<&str> {
        None
    }
    fn resource_version(&self) -> Option<&str> {
        None
    }
    fn uid(&self) -> Option<&str> {
        None
    }
    fn labels(&self) -> Option<&BTreeMap<String, String>> {
        None
    }
}

/// client-go's `mkFifoObj`.
pub(crate) fn obj(name: &str, val: i64) -> Arc<Obj> {
    Arc::new(Obj {
        name: name.to_owned(),
        val,
    })
}

/// client-go's `literalListerGetter`: known objects in a fixed order.
pub(crate) struct Literal(pub Vec<Arc<Obj>>);

impl CacheReader<Obj> for Literal {
    fn get_by_key(&self, key: &str) -> Option<Arc<Obj>> {
        self.0.iter().find(|obj| obj.name == key).cloned()
    }
    fn get(&self, obj: &Obj) -> kinformer_store::Result<Option<Arc<Obj>>> {
        Ok(self.get_by_key(&obj.name))
    }
    fn list(&self) -> Vec<Arc<Obj>> {
        self.0.clone()
    }
    fn list_keys(&self) -> Vec<String> {
        self.0.iter().map(|obj| obj.name.clone()).collect()
    }
}

pub(crate) fn known(objects: Vec<Arc<Obj>>) -> KnownObjects<Obj> {
    Arc::new(Literal(objects))
}

/// A delta as the Go tests spell it: kind, then the object or the tombstone's key and object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum D {
    Obj(DeltaType, &'static str, i64),
    Tomb(DeltaType, &'static str, &'static str, i64),
}

pub(crate) fn describe(delta: &Delta<Obj>) -> String {
    match &delta.object {
        ObjectOrTombstone::Object(obj) => format!("{:?} {}={}", delta.kind, obj.name, obj.val),
        ObjectOrTombstone::Tombstone(t) => {
            format!(
                "{:?} tombstone[{}] {}={}",
                delta.kind, t.key, t.obj.name, t.obj.val
            )
        }
    }
}

pub(crate) fn expect(ds: &[D]) -> Vec<String> {
    ds.iter()
        .map(|d| match d {
            D::Obj(kind, name, val) => format!("{kind:?} {name}={val}"),
            D::Tomb(kind, key, name, val) => format!("{kind:?} tombstone[{key}] {name}={val}"),
        })
        .collect()
}

pub(crate) fn describe_all(deltas: &[Delta<Obj>]) -> Vec<String> {
    deltas.iter().map(describe).collect()
}

/// client-go's `Pop(queue)` helper: pops one item without waiting, panicking if empty.
pub(crate) fn pop(queue: &dyn Queue<Obj>) -> Popped<Obj> {
    queue
        .try_pop(&mut |_, _| Processed::Done)
        .expect("pop failed")
        .expect("queue unexpectedly empty")
}

/// Pops one item and describes its deltas.
pub(crate) fn pop_described(queue: &dyn Queue<Obj>) -> Vec<String> {
    describe_all(pop(queue).deltas())
}

/// The newest object of one pop (client-go's `testPop`).
pub(crate) fn pop_newest(queue: &dyn Queue<Obj>) -> Arc<Obj> {
    let popped = pop(queue);
    Arc::clone(popped.deltas().last().expect("empty pop").object())
}

pub(crate) fn deltas_of(popped: Popped<Obj>) -> Deltas<Obj> {
    match popped {
        Popped::Deltas(deltas) => deltas,
        other => panic!("expected one key's deltas, got {other:?}"),
    }
}

/// Polls `future` once and says whether it is waiting: proof that a pop has parked (and
/// registered its waker) before the test goes on, without sleeping on it.
pub(crate) async fn is_waiting<F: Future + Unpin>(future: &mut F) -> bool {
    std::future::poll_fn(|cx| Poll::Ready(Pin::new(&mut *future).poll(cx).is_pending())).await
}

/// The bytes each delta `fifo` holds carries, in pop order.
pub(crate) fn queued_encoded(fifo: &impl Queue<Obj>) -> Vec<Option<Vec<u8>>> {
    fifo.list()
        .iter()
        .flat_map(|deltas| deltas.iter())
        .map(|delta| {
            delta
                .encoded
                .as_ref()
                .map(|encoded| encoded.bytes().to_vec())
        })
        .collect()
}

/// `obj`, as if it arrived as the bytes of `text`.
pub(crate) fn arrived(obj: Arc<Obj>, text: &str) -> Incoming<Obj> {
    Incoming::new(
        obj,
        Some(Encoded::new("text/plain", Arc::from(text.as_bytes()))),
    )
}

/// A transformer that adds 1,000 to every value.
pub(crate) fn plus_a_thousand() -> Transformer<Obj> {
    Arc::new(|o: Arc<Obj>| {
        Arc::new(Obj {
            name: o.name.clone(),
            val: o.val + 1000,
        })
    })
}
