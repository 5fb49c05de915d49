//! A JSON list body cut into its items as the bytes arrive, so that a list is decoded item by
//! item and never held whole: a `resourceVersion=0` list of 100k Pods is about 500 MiB of JSON.
//!
//! The splitter reads only the structure (strings, escapes, nesting): each element of the
//! top-level `items` array comes out as the bytes of one JSON value, and everything else
//! (`kind`, `apiVersion`, `metadata`) is kept as the *head*, the same list with an empty
//! `items`, which the ordinary list decoder reads for the resourceVersion and continue token.
//! It validates nothing beyond the nesting; the decoders that read the pieces do.

use crate::{Error, Result, arriving::Splitter};

/// Where the splitter is in the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// Outside the `items` array: bytes go to the head.
    Head,
    /// Inside `items`, between elements.
    Between,
    /// Inside one element of `items`.
    Item,
    /// After the top-level value closed.
    Done,
}

/// Cuts a JSON list body, fed in chunks of any size, into its head and its items.
#[derive(Debug)]
pub(crate) struct ListSplitter {
    place: Place,
    /// Nesting depth of objects and arrays, counted over the whole body.
    depth: u32,
    in_string: bool,
    escaped: bool,
    /// Whether the last string closed at depth 1 was the key `items` (and a `:` may follow).
    items_key: bool,
    /// The bytes of the string being read at depth 1, when it may still be `items`.
    key: Vec<u8>,
    head: Vec<u8>,
    item: Vec<u8>,
    /// Items completed and not yet taken.
    ready: Vec<Vec<u8>>,
    /// Whether the `items` array has been reached.
    items_begun: bool,
}

/// The depth of the `items` array's elements: the list object is depth 1, `items` depth 2.
const ITEM_DEPTH: u32 = 2;

impl ListSplitter {
    pub(crate) fn new() -> Self {
        Self {
            place: Place::Head,
            depth: 0,
            in_string: false,
            escaped: false,
            items_key: false,
            key: Vec::new(),
            head: Vec::new(),
            item: Vec::new(),
            ready: Vec::new(),
            items_begun: false,
        }
    }
}

impl Splitter for ListSplitter {
    type Item = Vec<u8>;

    fn feed(&mut self, chunk: &[u8]) -> Result<()> {
        let mut start = 0;
        let mut at = 0;
        while let Some(&byte) = chunk.get(at) {
            if self.in_string {
                if self.escaped {
                    self.escaped = false;
                } else if byte == b'\\' {
                    self.escaped = true;
                } else if byte == b'"' {
                    self.in_string = false;
                    if self.place == Place::Head && self.depth == 1 {
                        self.items_key = self.key == b"items";
                    }
                } else if self.place == Place::Head && self.depth == 1 && self.key.len() <= 5 {
                    self.key.push(byte);
                } else {
                    // Most of a body is string contents: jump to the next quote or backslash.
                    at = memchr::memchr2(b'"', b'\\', &chunk[at..])
                        .map_or(chunk.len(), |offset| at + offset);
                    continue;
                }
                at += 1;
                continue;
            }
            match byte {
                b'"' => {
                    if self.place == Place::Done {
                        return Err(trailing(chunk));
                    }
                    self.in_string = true;
                    if self.place == Place::Head && self.depth == 1 {
                        self.key.clear();
                    }
                    if self.place == Place::Between {
                        return Err(not_an_object(chunk));
                    }
                }
                b'{' | b'[' => {
                    if self.place == Place::Done {
                        return Err(trailing(chunk));
                    }
                    if self.place == Place::Head
                        && byte == b'['
                        && self.depth == 1
                        && self.items_key
                    {
                        // `"items": [`: the head keeps the bracket, the elements go apart.
                        self.head.extend_from_slice(&chunk[start..=at]);
                        start = at + 1;
                        self.place = Place::Between;
                        self.items_begun = true;
                        self.depth += 1;
                        at += 1;
                        continue;
                    }
                    if self.place == Place::Between {
                        if byte != b'{' {
                            return Err(not_an_object(chunk));
                        }
                        start = at;
                        self.place = Place::Item;
                    }
                    self.depth += 1;
                }
                b'}' | b']' => {
                    self.depth = self
                        .depth
                        .checked_sub(1)
                        .ok_or_else(|| malformed("a close without an open", chunk))?;
                    match self.place {
                        Place::Item if self.depth == ITEM_DEPTH => {
                            self.item.extend_from_slice(&chunk[start..=at]);
                            self.ready.push(std::mem::take(&mut self.item));
                            start = at + 1;
                            self.place = Place::Between;
                        }
                        Place::Between => {
                            // The end of `items`: the head gets its close.
                            start = at;
                            self.place = Place::Head;
                        }
                        Place::Head if self.depth == 0 => self.place = Place::Done,
                        _ => {}
                    }
                }
                b':' | b',' | b' ' | b'\n' | b'\r' | b'\t' => {
                    if byte == b',' && self.depth == 1 {
                        self.items_key = false;
                    }
                    if self.place == Place::Between {
                        start = at + 1;
                    }
                }
                _ => {
                    if self.place == Place::Between {
                        return Err(not_an_object(chunk));
                    }
                    if self.place == Place::Done {
                        return Err(trailing(chunk));
                    }
                }
            }
            at += 1;
        }
        match self.place {
            Place::Head | Place::Done => self.head.extend_from_slice(&chunk[start..]),
            Place::Item => self.item.extend_from_slice(&chunk[start..]),
            Place::Between => {}
        }
        Ok(())
    }

    /// Once the `items` array has begun, the head read so far closed after an empty `items`.
    fn head_before_items(&self) -> Option<Vec<u8>> {
        if matches!(self.place, Place::Head | Place::Done) && !self.items_begun {
            return None;
        }
        let mut head = self.head.clone();
        if matches!(self.place, Place::Between | Place::Item) {
            head.extend_from_slice(b"]}");
        }
        Some(head)
    }

    fn take_items(&mut self) -> Vec<Vec<u8>> {
        std::mem::take(&mut self.ready)
    }

    fn finish(self) -> Result<Vec<u8>> {
        if self.place != Place::Done || self.in_string {
            return Err(Error::decode(
                "list",
                "the body ends inside its JSON value",
                &self.head,
            ));
        }
        Ok(self.head)
    }
}

fn malformed(why: &'static str, chunk: &[u8]) -> Error {
    Error::decode("list", why, chunk)
}

fn not_an_object(chunk: &[u8]) -> Error {
    malformed("an element of items is not a JSON object", chunk)
}

fn trailing(chunk: &[u8]) -> Error {
    malformed("bytes after the list's JSON value", chunk)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::{Value, json};

    use super::*;

    fn split(body: &[u8], cuts: &[usize]) -> Result<(Vec<u8>, Vec<Vec<u8>>)> {
        let mut splitter = ListSplitter::new();
        let mut items = Vec::new();
        let mut at = 0;
        for &cut in cuts.iter().chain(std::iter::once(&body.len())) {
            let cut = cut.clamp(at, body.len());
            splitter.feed(&body[at..cut])?;
            items.extend(splitter.take_items());
            at = cut;
        }
        Ok((splitter.finish()?, items))
    }

    fn list(items: &[Value]) -> Value {
        json!({
            "kind": "PodList",
            "apiVersion": "v1",
            "metadata": { "resourceVersion": "12", "continue": "c\"items\"[{" },
            "items": items,
        })
    }

    #[test]
    fn a_list_splits_into_its_items_and_a_head_without_them() {
        let items = vec![
            json!({ "metadata": { "name": "a", "labels": { "x": "}{][\"" } } }),
            json!({ "metadata": { "name": "b" }, "spec": { "items": [1, 2, { "y": [] }] } }),
        ];
        let body = serde_json::to_vec_pretty(&list(&items)).expect("JSON");
        let (head, split_items) = split(&body, &[]).expect("splits");
        let head: Value = serde_json::from_slice(&head).expect("the head is JSON");
        assert_eq!(head, list(&[]));
        let split_items: Vec<Value> = split_items
            .iter()
            .map(|item| serde_json::from_slice(item).expect("an item is JSON"))
            .collect();
        assert_eq!(split_items, items);
    }

    #[test]
    fn metadata_after_items_stays_in_the_head() {
        let body =
            br#"{"items":[{"a":1},{"b":"]"}],"metadata":{"resourceVersion":"3"},"kind":"PodList"}"#;
        let (head, items) = split(body, &[5, 11, 12, 30]).expect("splits");
        let mut early = ListSplitter::new();
        early.feed(&body[..12]).expect("feeds");
        assert_eq!(
            early.head_before_items().as_deref(),
            Some(&br#"{"items":[]}"#[..])
        );
        assert_eq!(
            serde_json::from_slice::<Value>(&head).expect("JSON"),
            json!({ "items": [], "metadata": { "resourceVersion": "3" }, "kind": "PodList" })
        );
        assert_eq!(
            items,
            vec![br#"{"a":1}"#.to_vec(), br#"{"b":"]"}"#.to_vec()]
        );
    }

    #[test]
    fn the_head_before_the_items_is_a_list_with_no_items() {
        let body = br#"{"kind":"PodList","metadata":{"continue":"x"},"items":[{"a":1},"#;
        let mut splitter = ListSplitter::new();
        splitter.feed(&body[..40]).expect("feeds");
        assert_eq!(splitter.head_before_items(), None, "items have not begun");
        splitter.feed(&body[40..]).expect("feeds");
        assert_eq!(
            splitter.head_before_items().as_deref(),
            Some(&br#"{"kind":"PodList","metadata":{"continue":"x"},"items":[]}"#[..])
        );
        assert_eq!(splitter.take_items(), vec![br#"{"a":1}"#.to_vec()]);
        assert!(splitter.finish().is_err(), "the body is not complete");
    }

    #[test]
    fn bad_bodies_are_errors() {
        for body in [
            &br#"{"items":[{"a":1}"#[..],
            br#"{"items":[1,2]}"#,
            br#"{"items":["x"]}"#,
            br#"{"items":[]}}"#,
            br#"{"items":[]} {"#,
            br#"{"kind":"PodList"#,
        ] {
            assert!(
                split(body, &[]).is_err(),
                "{} was accepted",
                String::from_utf8_lossy(body)
            );
        }
    }

    fn item() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            "[a-z\"\\\\{}\\[\\],: ]{0,8}".prop_map(Value::from),
        ];
        let tree = leaf.prop_recursive(4, 32, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
                prop::collection::btree_map("[a-z\"{}\\[\\]]{0,6}", inner, 0..4)
                    .prop_map(|map| Value::Object(map.into_iter().collect())),
            ]
        });
        prop::collection::btree_map("[a-z]{1,6}", tree, 0..4)
            .prop_map(|map| Value::Object(map.into_iter().collect()))
    }

    proptest! {
        /// Any list, cut anywhere, splits into exactly its items and its head.
        #[test]
        fn any_list_cut_anywhere_splits_the_same(
            items in prop::collection::vec(item(), 0..6),
            pretty in any::<bool>(),
            cuts in prop::collection::vec(0usize..2048, 0..12),
        ) {
            let value = list(&items);
            let body = if pretty {
                serde_json::to_vec_pretty(&value)
            } else {
                serde_json::to_vec(&value)
            }.expect("JSON");
            let mut cuts = cuts;
            cuts.sort_unstable();
            let (head, split_items) = split(&body, &cuts).expect("splits");
            prop_assert_eq!(serde_json::from_slice::<Value>(&head).expect("JSON"), list(&[]));
            let split_items: Vec<Value> = split_items
                .iter()
                .map(|item| serde_json::from_slice(item).expect("JSON"))
                .collect();
            prop_assert_eq!(split_items, items);
        }
    }
}
