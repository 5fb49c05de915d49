//! The script format of the `store-peer` Go program: what to do to an indexer, and what was
//! seen. Framed like [`fifo_script`](crate::fifo_script): `begin`, operations, `end`, and one
//! [`StoreResult`] per line.

use std::{collections::BTreeMap, fmt};

use serde::{Deserialize, Serialize};

use crate::fifo_script::script_lines;
pub use crate::fifo_script::{ObjectSpec, ObjectView};

/// One operation of a store script.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum StoreOp {
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
    /// `Replace(objects, rv)`.
    Replace {
        /// The new contents.
        objects: Vec<ObjectSpec>,
        /// The list's resourceVersion.
        rv: String,
    },
    /// `GetByKey(key)`.
    Get {
        /// The key looked up.
        key: String,
    },
    /// `ListKeys()`, sorted.
    ListKeys,
    /// `ByIndex(index, value)`: the keys of the objects found, sorted.
    ByIndex {
        /// The index name.
        index: String,
        /// The indexed value.
        value: String,
    },
    /// `IndexKeys(index, value)`, sorted.
    IndexKeys {
        /// The index name.
        index: String,
        /// The indexed value.
        value: String,
    },
    /// `Index(index, obj)`: the keys of the objects sharing any of `obj`'s values, sorted.
    Index {
        /// The index name.
        index: String,
        /// The object whose values are looked up.
        object: ObjectSpec,
    },
    /// `ListIndexFuncValues(index)`, sorted.
    ListIndexFuncValues {
        /// The index name.
        index: String,
    },
    /// `AddIndexers` with the peer's index func of that name.
    AddIndexer {
        /// The index name (the peer knows `tier`).
        index: String,
    },
    /// Every object and every index (value to sorted keys).
    Snapshot,
}

/// A whole store script.
#[derive(Clone, PartialEq, Eq)]
pub struct StoreScript {
    /// Names the script in results and failure messages.
    pub id: String,
    /// The operations, in order.
    pub ops: Vec<StoreOp>,
}

#[derive(Serialize)]
struct BeginLine<'a> {
    op: &'static str,
    id: &'a str,
}

impl StoreScript {
    /// The script as the JSON lines the peer reads: `begin`, the operations, `end`.
    pub fn to_lines(&self) -> Vec<String> {
        let begin = BeginLine {
            op: "begin",
            id: &self.id,
        };
        script_lines(&begin, &self.ops)
    }
}

impl fmt::Debug for StoreScript {
    /// Prints the script as JSON lines, ready to paste into the peer.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "store script ({} ops):", self.ops.len())?;
        for line in self.to_lines() {
            writeln!(f, "  {line}")?;
        }
        Ok(())
    }
}

/// The peer's answer to one store script line.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoreResult {
    /// 0 for `begin`, then 1, 2, ...
    pub step: u32,
    /// The operation's name.
    pub op: String,
    /// The script id, on `begin` and `end` lines.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub id: String,
    /// The error, if the operation returned one. The two sides word errors differently, so a
    /// differential test compares whether there was one, not the text.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub error: String,
    /// Sorted keys (`list_keys`, `index_keys`, `by_index`, `index`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keys: Vec<String>,
    /// Sorted index values (`list_index_func_values`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
    /// What `get` found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub found: Option<ObjectView>,
    /// Every object, by key (`snapshot`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub objects: Vec<ObjectView>,
    /// Every index: value to sorted keys (`snapshot`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub indices: BTreeMap<String, BTreeMap<String, Vec<String>>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_ops_serialize_with_the_peer_field_names() {
        let op = StoreOp::ByIndex {
            index: "namespace".into(),
            value: "ns".into(),
        };
        assert_eq!(
            serde_json::to_string(&op).unwrap(),
            r#"{"op":"by_index","index":"namespace","value":"ns"}"#
        );
        let script = StoreScript {
            id: "s".into(),
            ops: vec![StoreOp::Snapshot],
        };
        assert_eq!(
            script.to_lines(),
            [
                r#"{"op":"begin","id":"s"}"#,
                r#"{"op":"snapshot"}"#,
                r#"{"op":"end"}"#
            ]
        );
    }
}
