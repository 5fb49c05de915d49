//! The script format of the `fifo-peer` Go program: what to do to a queue, and what was seen.
//!
//! A script is JSON lines: a `begin` line choosing the queue, the operations, and an `end` line.
//! The peer answers every line with exactly one [`StepResult`] line, so a driver knows how many
//! lines to read back. Both the Go peer and the Rust side of a differential test produce
//! [`StepResult`]s, and the test compares them field by field.

use std::{collections::BTreeMap, fmt, sync::Arc};

use k8s_openapi::{api::core::v1::Pod, apimachinery::pkg::apis::meta::v1::ObjectMeta};
use kinformer_store::{Object, meta_namespace_key_func};
use serde::{Deserialize, Serialize};

/// Which client-go queue a script drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QueueKind {
    /// `cache.DeltaFIFO`: one entry per key, its deltas accumulated.
    Delta,
    /// `cache.RealFIFO`: every delta in arrival order.
    Real,
}

/// The part of a Pod a script controls.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectSpec {
    /// `metadata.namespace`; empty for a cluster-scoped object.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// `metadata.name`; never empty in a generated script.
    pub name: String,
    /// `metadata.resourceVersion`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub rv: String,
    /// `metadata.labels`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

impl ObjectSpec {
    /// An unlabelled object.
    pub fn new(namespace: &str, name: &str, rv: &str) -> Self {
        Self {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            rv: rv.to_owned(),
            labels: BTreeMap::new(),
        }
    }

    /// The Pod this spec stands for, as both peers build it (the Go side's `scriptobj.Pod`).
    pub fn to_pod(&self) -> Arc<Pod> {
        let non_empty = |s: &str| (!s.is_empty()).then(|| s.to_owned());
        Arc::new(Pod {
            metadata: ObjectMeta {
                namespace: non_empty(&self.namespace),
                name: Some(self.name.clone()),
                resource_version: non_empty(&self.rv),
                labels: (!self.labels.is_empty()).then(|| self.labels.clone()),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        })
    }

    /// `namespace/name`, or `name` when cluster-scoped: client-go's `MetaNamespaceKeyFunc`.
    pub fn key(&self) -> String {
        if self.namespace.is_empty() {
            self.name.clone()
        } else {
            format!("{}/{}", self.namespace, self.name)
        }
    }
}

/// One operation of a script.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Op {
    /// `Add(obj)`.
    Add {
        /// The object added.
        object: ObjectSpec,
    },
    /// `Update(obj)`.
    Update {
        /// The object updated.
        object: ObjectSpec,
    },
    /// `Delete(obj)`.
    Delete {
        /// The object deleted.
        object: ObjectSpec,
    },
    /// `Replace(objects, rv)`, as after a relist.
    Replace {
        /// The full new list.
        objects: Vec<ObjectSpec>,
        /// The list's resourceVersion.
        rv: String,
    },
    /// `Resync()`.
    Resync,
    /// `Bookmark(rv)`: queued by the atomic RealFIFO only, ignored by the other queues.
    Bookmark {
        /// The bookmark's resourceVersion.
        rv: String,
    },
    /// Pops one entry; an empty queue reports `empty` instead of blocking.
    Pop {
        /// Whether processing fails and hands the popped deltas back to the queue.
        requeue: bool,
    },
    /// `PopBatch` (the in-order queue only).
    PopBatch,
    /// Pops (without requeue) until the queue is empty.
    Drain,
    /// Reports the keys queued and the keys of the known objects, both sorted.
    ListKeys,
    /// Reports `HasSynced` (every result does; this op does nothing else).
    HasSynced,
}

/// A whole script: the queue it drives and its operations.
#[derive(Clone, PartialEq, Eq)]
pub struct Script {
    /// Names the script in results and failure messages.
    pub id: String,
    /// The queue under test.
    pub queue: QueueKind,
    /// Whether a known-objects store is attached; the consumer applies popped deltas to it,
    /// as an informer's HandleDeltas does.
    pub known_objects: bool,
    /// DeltaFIFO's `EmitDeltaTypeReplaced`: a Replace queues `Replaced` rather than `Sync`.
    pub emit_replaced: bool,
    /// RealFIFO's `AtomicEvents` (with `UnlockWhileProcessing`, today's informer default): a
    /// replace queues one `ReplacedAll`, a resync one `SyncAll`. Takes no known objects; the
    /// consumer keeps its store all the same.
    pub atomic_events: bool,
    /// The operations, in order.
    pub ops: Vec<Op>,
}

#[derive(Serialize)]
struct BeginLine<'a> {
    op: &'static str,
    id: &'a str,
    queue: QueueKind,
    known_objects: bool,
    emit_replaced: bool,
    atomic_events: bool,
}

impl Script {
    /// The script as the JSON lines the peer reads: `begin`, the operations, `end`.
    pub fn to_lines(&self) -> Vec<String> {
        let begin = BeginLine {
            op: "begin",
            id: &self.id,
            queue: self.queue,
            known_objects: self.known_objects,
            emit_replaced: self.emit_replaced,
            atomic_events: self.atomic_events,
        };
        script_lines(&begin, &self.ops)
    }
}

/// `begin`, one line per operation, then `end`: the frame every peer script has.
pub(crate) fn script_lines<B: Serialize, O: Serialize>(begin: &B, ops: &[O]) -> Vec<String> {
    let mut lines = Vec::with_capacity(ops.len() + 2);
    lines.push(to_json(begin));
    lines.extend(ops.iter().map(to_json));
    lines.push(r#"{"op":"end"}"#.to_owned());
    lines
}

fn to_json<T: Serialize>(value: &T) -> String {
    // Serializing these plain structs (string keys, no floats) cannot fail.
    serde_json::to_string(value).expect("script values serialize to JSON")
}

impl fmt::Debug for Script {
    /// Prints the script as JSON lines, ready to paste into the peer.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "script ({} ops):", self.ops.len())?;
        for line in self.to_lines() {
            writeln!(f, "  {line}")?;
        }
        Ok(())
    }
}

/// What a result reports about an object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectView {
    /// The object's own key.
    pub key: String,
    /// Its resourceVersion.
    #[serde(default)]
    pub rv: String,
    /// Its labels.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

impl ObjectView {
    /// How a result reports `obj`.
    ///
    /// # Panics
    ///
    /// When `obj` has no name: scripts only hold named objects.
    pub fn of<K: Object>(obj: &K) -> Self {
        Self {
            key: meta_namespace_key_func(obj).expect("scripts only hold named objects"),
            rv: obj.resource_version().unwrap_or_default().to_owned(),
            labels: obj.labels().cloned().unwrap_or_default(),
        }
    }
}

/// What a result reports about one popped delta.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeltaView {
    /// `Added`, `Updated`, `Deleted`, `Replaced`, `Sync`, `ReplacedAll`, `SyncAll` or
    /// `Bookmark`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The key the delta is queued under (a tombstone's recorded key).
    pub key: String,
    /// Whether the object is a `DeletedFinalStateUnknown`.
    pub tombstone: bool,
    /// The object, or the tombstone's last known state; `None` when that is unknown, and for
    /// the whole-queue events (`ReplacedAll`, `SyncAll`, `Bookmark`).
    pub object: Option<ObjectView>,
    /// A `ReplacedAll`'s or a `Bookmark`'s resourceVersion.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub rv: String,
    /// A `ReplacedAll`'s objects.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub objects: Vec<ObjectView>,
}

/// One pop that found something.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Popped {
    /// The `isInInitialList` the process callback was given.
    pub is_in_initial_list: bool,
    /// The deltas handed to the process callback, oldest first.
    pub deltas: Vec<DeltaView>,
    /// Whether processing handed them back to the queue.
    #[serde(default)]
    pub requeued: bool,
}

/// The peer's answer to one script line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepResult {
    /// 0 for `begin`, then 1, 2, ... (the `end` line included).
    pub step: u32,
    /// The operation's name, as in the script.
    pub op: String,
    /// The script id, on `begin` and `end` lines.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub id: String,
    /// The queue's error, if the operation returned one. Generated scripts never provoke one,
    /// so a differential test treats any error as a failure rather than comparing texts.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub error: String,
    /// `HasSynced()` after the operation.
    pub has_synced: bool,
    /// What a pop found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub popped: Option<Popped>,
    /// A pop found the queue empty.
    #[serde(default, skip_serializing_if = "is_false")]
    pub empty: bool,
    /// What a drain popped, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drained: Vec<Popped>,
    /// The queued keys, sorted (`list_keys` only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub queue_keys: Vec<String>,
    /// The consumer's store keys (the known objects, when attached), sorted (`list_keys`
    /// only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub known_keys: Vec<String>,
}

// Results print as the peer prints them: fields at their defaults left out.
fn is_false(value: &bool) -> bool {
    !value
}

impl StepResult {
    /// An empty result for step `step` of operation `op`, to be filled in.
    pub fn new(step: u32, op: &str, has_synced: bool) -> Self {
        Self {
            step,
            op: op.to_owned(),
            id: String::new(),
            error: String::new(),
            has_synced,
            popped: None,
            empty: false,
            drained: Vec::new(),
            queue_keys: Vec::new(),
            known_keys: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_serialize_with_the_peer_field_names() {
        let replace = Op::Replace {
            objects: vec![ObjectSpec::new("", "node-1", "7")],
            rv: "9".into(),
        };
        assert_eq!(
            serde_json::to_string(&replace).unwrap(),
            r#"{"op":"replace","objects":[{"name":"node-1","rv":"7"}],"rv":"9"}"#
        );
        assert_eq!(
            serde_json::to_string(&Op::PopBatch).unwrap(),
            r#"{"op":"pop_batch"}"#
        );
    }

    #[test]
    fn results_parse_with_absent_fields_defaulted() {
        let line = r#"{"step":3,"op":"pop","has_synced":true,"empty":true}"#;
        let result: StepResult = serde_json::from_str(line).unwrap();
        let mut expected = StepResult::new(3, "pop", true);
        expected.empty = true;
        assert_eq!(result, expected);
    }

    #[test]
    fn cluster_scoped_objects_are_keyed_by_name_alone() {
        assert_eq!(ObjectSpec::new("", "n", "1").key(), "n");
        assert_eq!(ObjectSpec::new("ns", "n", "1").key(), "ns/n");
    }
}
