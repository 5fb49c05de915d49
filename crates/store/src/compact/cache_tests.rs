//! [`CompactCache`]'s own behaviour, beyond what it shares with [`Cache`](crate::Cache)
//! (the model and snapshot properties run over both): which objects it keeps decoded, and what
//! a codec's failures do.

use std::{
    collections::BTreeMap,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
};

use super::{Codec, CodecError, CompactCache, Pending};
use crate::{CacheReader, Error, Indexer, Indexers, OldObject, Store, meta_namespace_key_func};
use k8s_openapi::api::core::v1::ConfigMap;
use kube_core::ObjectMeta;

/// Items are cluster-less ConfigMaps with one `value`.
type Item = ConfigMap;

fn value(item: &Item) -> String {
    item.data
        .as_ref()
        .and_then(|data| data.get("value"))
        .cloned()
        .unwrap_or_default()
}

/// JSON; refuses to encode a value of `"unencodable"` and to decode one of `"undecodable"`,
/// and counts its decodes.
#[derive(Default)]
struct Counting {
    decodes: AtomicUsize,
}

impl Codec<Item> for Counting {
    fn encode(&self, item: &Item) -> Result<Vec<u8>, CodecError> {
        if value(item) == "unencodable" {
            return Err("this value cannot be encoded".into());
        }
        Ok(serde_json::to_vec(item)?)
    }

    fn decode(&self, bytes: &[u8]) -> Result<Item, CodecError> {
        self.decodes.fetch_add(1, Ordering::Relaxed);
        let item: Item = serde_json::from_slice(bytes)?;
        if value(&item) == "undecodable" {
            return Err("these bytes cannot be decoded".into());
        }
        Ok(item)
    }
}

fn item(name: &str, value: &str) -> Arc<Item> {
    Arc::new(ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([("value".to_owned(), value.to_owned())])),
        ..ConfigMap::default()
    })
}

/// `item(name, value)` with a UID and a resourceVersion.
fn versioned(name: &str, value: &str, uid: &str, resource_version: &str) -> Arc<Item> {
    let mut versioned = (*item(name, value)).clone();
    versioned.metadata.uid = Some(uid.to_owned());
    versioned.metadata.resource_version = Some(resource_version.to_owned());
    Arc::new(versioned)
}

fn decodes(codec: &Counting) -> usize {
    codec.decodes.load(Ordering::Relaxed)
}

fn cache(hot: usize) -> (CompactCache<Item>, Arc<Counting>) {
    let codec = Arc::new(Counting::default());
    let mut indexers: Indexers<Item> = Indexers::new();
    indexers.insert("value".into(), Arc::new(|item: &Item| vec![value(item)]));
    let cache = CompactCache::new(
        Arc::new(meta_namespace_key_func::<Item>),
        indexers,
        Arc::clone(&codec) as _,
    );
    (cache.hot_capacity(hot), codec)
}

#[test]
fn a_written_object_is_read_back_without_a_decode_until_it_is_evicted() {
    let (cache, codec) = cache(2);
    let first = item("a", "1");
    cache.add(Arc::clone(&first).into()).unwrap();
    let got = cache.get_by_key("a").unwrap();
    assert!(Arc::ptr_eq(&got, &first), "kept decoded: the written Arc");
    assert_eq!(codec.decodes.load(Ordering::Relaxed), 0);

    cache.add(item("b", "2").into()).unwrap();
    cache.add(item("c", "3").into()).unwrap();
    cache.add(item("d", "4").into()).unwrap();
    assert_eq!(cache.hot_len(), 2);
    let again = cache.get_by_key("a").unwrap();
    assert_eq!(*again, *first);
    assert_eq!(codec.decodes.load(Ordering::Relaxed), 1, "evicted: decoded");
    let third = cache.get_by_key("a").unwrap();
    assert!(Arc::ptr_eq(&third, &again), "a get keeps what it decoded");
    assert_eq!(codec.decodes.load(Ordering::Relaxed), 1);
}

#[test]
fn scans_use_the_decoded_set_without_filling_it() {
    let (cache, codec) = cache(1);
    for name in ["a", "b", "c"] {
        cache.add(item(name, "same").into()).unwrap();
    }
    // "c" was written last and is the one kept.
    assert_eq!(cache.list().len(), 3);
    assert_eq!(codec.decodes.load(Ordering::Relaxed), 2);
    assert_eq!(cache.by_index("value", "same").unwrap().len(), 3);
    assert_eq!(codec.decodes.load(Ordering::Relaxed), 4);
    assert!(Arc::ptr_eq(
        &cache.get_by_key("c").unwrap(),
        &cache
            .list()
            .into_iter()
            .find(|i| i.metadata.name.as_deref() == Some("c"))
            .unwrap()
    ));
}

#[test]
fn upsert_returns_the_replaced_object_and_moves_its_index_entry() {
    let (cache, _) = cache(0);
    assert!(cache.upsert(item("a", "1").into()).unwrap().is_none());
    let old = cache.upsert(item("a", "2").into()).unwrap().unwrap();
    assert_eq!(old.get().as_deref(), Some(&*item("a", "1")));
    assert!(cache.by_index("value", "1").unwrap().is_empty());
    assert_eq!(
        cache.index_keys("value", "2").unwrap(),
        vec!["a".to_owned()]
    );
    assert_eq!(cache.list_index_func_values("value"), vec!["2".to_owned()]);
}

#[test]
fn an_object_the_codec_cannot_encode_is_refused_and_the_cache_is_unchanged() {
    let (cache, _) = cache(4);
    cache.add(item("a", "1").into()).unwrap();
    let error = cache.update(item("a", "unencodable").into()).unwrap_err();
    assert!(
        matches!(&error, Error::Encode { key, .. } if key == "a"),
        "{error}"
    );
    assert_eq!(*cache.get_by_key("a").unwrap(), *item("a", "1"));
    let error = cache
        .replace(vec![item("b", "2"), item("c", "unencodable")], "7")
        .unwrap_err();
    assert!(
        matches!(&error, Error::Encode { key, .. } if key == "c"),
        "{error}"
    );
    assert_eq!(cache.list_keys(), vec!["a".to_owned()]);
}

#[test]
fn bytes_that_do_not_decode_are_reported_and_left_out_of_reads() {
    let (cache, _) = cache(0);
    let reported = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let cache = cache.on_decode_failure({
        let reported = Arc::clone(&reported);
        move |error| reported.lock().push(error.clone())
    });
    cache.add(item("a", "1").into()).unwrap();
    cache.add(item("b", "undecodable").into()).unwrap();
    assert_eq!(cache.len(), 2);
    assert!(cache.get_by_key("b").is_none());
    assert_eq!(cache.list(), vec![item("a", "1")]);
    assert_eq!(reported.lock().len(), 2);
    // The replaced object is handed back, and cannot be read.
    let old = cache
        .upsert(item("b", "2").into())
        .unwrap()
        .expect("replaced");
    assert!(old.get().is_none());
    assert_eq!(reported.lock().len(), 3);
    // Each failure was reported, naming the key and what the codec said.
    let reported = std::mem::take(&mut *reported.lock());
    assert_eq!(reported.len(), 3);
    for error in &reported {
        assert!(
            matches!(error, Error::Decode { key, reason } if key == "b" && reason.contains("cannot be decoded")),
            "{error:?}"
        );
    }
    assert_eq!(*cache.get_by_key("b").unwrap(), *item("b", "2"));
}

#[test]
fn a_replace_drops_what_was_kept_decoded_and_an_added_index_covers_every_object() {
    let (cache, _) = cache(8);
    cache.add(item("a", "1").into()).unwrap();
    cache
        .replace(vec![item("a", "2"), item("b", "3")], "9")
        .unwrap();
    assert_eq!(cache.hot_len(), 0);
    assert_eq!(*cache.get_by_key("a").unwrap(), *item("a", "2"));
    let mut by_name: Indexers<Item> = Indexers::new();
    by_name.insert(
        "name".into(),
        Arc::new(|item: &Item| item.metadata.name.clone().into_iter().collect()),
    );
    cache.add_indexers(by_name).unwrap();
    assert_eq!(cache.by_index("name", "b").unwrap(), vec![item("b", "3")]);
    assert_eq!(
        cache.index_names(),
        vec!["name".to_owned(), "value".to_owned()]
    );
}

#[test]
fn large_reads_and_replaces_on_the_pool_keep_every_object_in_order() {
    // 300 objects of 1 KiB: a replace and a full read are large enough to run on rayon's pool.
    let (cache, codec) = cache(0);
    let big = |i: usize| {
        item(
            &format!("cm-{i:03}"),
            &format!("{i:03}{}", "x".repeat(1024)),
        )
    };
    let items: Vec<Arc<Item>> = (0..300).map(big).collect();
    cache.replace(items.clone(), "1").unwrap();

    let mut listed = cache.list();
    listed.sort_by_key(|item| item.metadata.name.clone());
    assert_eq!(listed.len(), 300);
    for (got, want) in listed.iter().zip(&items) {
        assert_eq!(**got, **want);
    }
    let keys = cache.list_keys();
    let mut by_key: Vec<Arc<Item>> = keys.iter().filter_map(|k| cache.get_by_key(k)).collect();
    by_key.sort_by_key(|item| item.metadata.name.clone());
    assert_eq!(by_key, listed);

    let one = format!("007{}", "x".repeat(1024));
    let found = cache.by_index("value", &one).unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(*found[0], *items[7]);
    assert_eq!(codec.decodes.load(Ordering::Relaxed), 300 + 300 + 1);
}

#[test]
fn upsert_hands_back_the_replaced_object_encoded_and_decodes_it_once() {
    let (cache, codec) = cache(0);
    assert!(
        cache
            .upsert(versioned("a", "1", "u1", "10").into())
            .unwrap()
            .is_none()
    );
    let old = cache
        .upsert(versioned("a", "2", "u1", "11").into())
        .unwrap()
        .expect("a replaced object");
    assert!(!old.is_decoded());
    assert_eq!(
        (old.uid(), old.resource_version()),
        (Some("u1"), Some("10"))
    );
    assert_eq!(decodes(&codec), 0, "identity is held, not decoded");

    let reader = old.clone();
    let decoded = std::thread::spawn(move || reader.get())
        .join()
        .unwrap()
        .expect("decodes");
    assert_eq!(decoded, versioned("a", "1", "u1", "10"));
    assert!(old.is_decoded());
    assert!(
        Arc::ptr_eq(&old.get().unwrap(), &decoded),
        "clones share the decode"
    );
    assert_eq!(decodes(&codec), 1);
    assert_eq!(
        cache.index_keys("value", "2").unwrap(),
        vec!["a".to_owned()]
    );

    // What a relist stored keeps its identity too.
    cache
        .replace(vec![versioned("b", "1", "u2", "20")], "20")
        .unwrap();
    let old = cache
        .upsert(versioned("b", "2", "u2", "21").into())
        .unwrap()
        .expect("a replaced object");
    assert_eq!(old.resource_version(), Some("20"));
    assert!(!old.is_decoded());
}

#[test]
fn upsert_hands_back_an_object_kept_decoded_as_it_is() {
    let (cache, codec) = cache(2);
    let first = versioned("a", "1", "u1", "10");
    cache.upsert(Arc::clone(&first).into()).unwrap();
    let old = cache
        .upsert(versioned("a", "2", "u1", "11").into())
        .unwrap()
        .unwrap();
    assert!(old.ptr_eq(&OldObject::decoded(Arc::clone(&first))));
    assert_eq!(decodes(&codec), 0);
}

#[test]
fn an_old_object_that_does_not_decode_is_reported_and_reads_as_none() {
    let (cache, _) = cache(0);
    let reported = Arc::new(AtomicUsize::new(0));
    let cache = cache.on_decode_failure({
        let reported = Arc::clone(&reported);
        move |_| {
            reported.fetch_add(1, Ordering::Relaxed);
        }
    });
    cache
        .add(versioned("b", "undecodable", "u1", "10").into())
        .unwrap();
    let old = cache
        .upsert(versioned("b", "2", "u1", "11").into())
        .unwrap()
        .expect("the replaced object, still encoded");
    assert_eq!(old.resource_version(), Some("10"));
    assert_eq!(old.get(), None);
    assert_eq!(old.get(), None, "the failure is remembered, not retried");
    assert_eq!(reported.load(Ordering::Relaxed), 1);
}

#[test]
fn get_lazy_hands_over_what_a_relist_replaces_without_decoding_or_marking_it_read() {
    let (cache, codec) = cache(1);
    let kept = versioned("a", "1", "u1", "10");
    cache
        .replace(vec![versioned("b", "1", "u2", "20")], "20")
        .unwrap();
    cache.add(Arc::clone(&kept).into()).unwrap();
    assert_eq!(cache.hot_len(), 1);

    // Encoded, with its identity, shared by its clones; the kept object comes back as it is.
    let old = cache.get_lazy("b").expect("cached");
    assert!(!old.is_decoded());
    assert_eq!(
        (old.uid(), old.resource_version()),
        (Some("u2"), Some("20"))
    );
    let held = cache.get_lazy("a").expect("cached");
    assert!(held.ptr_eq(&OldObject::decoded(Arc::clone(&kept))));
    assert!(cache.get_lazy("c").is_none());
    assert_eq!(decodes(&codec), 0);

    // The relist replaces the cache; the handed-over object still decodes, once.
    cache
        .replace(vec![versioned("b", "2", "u2", "21")], "21")
        .unwrap();
    let clone = old.clone();
    assert_eq!(old.get(), Some(versioned("b", "1", "u2", "20")));
    assert!(clone.is_decoded(), "clones share the decode");
    assert_eq!(decodes(&codec), 1);
    assert_eq!(cache.hot_len(), 0, "not kept decoded");
}

/// A read that found an object encoded just before a relist swapped in a new table, and
/// decodes it after, keeps it decoded under the old table's slot and stamp: no object of the
/// new table, whatever slot it took, is ever answered with it.
#[test]
fn a_read_racing_a_relist_never_answers_for_the_new_table() {
    let (cache, _) = cache(8);
    cache.replace(vec![item("a", "old")], "1").unwrap();
    let pending = {
        let inner = cache.inner.read();
        let slots = vec![inner.slot("a").expect("cached")];
        cache.pending(&inner, &slots, true)
    };
    assert!(
        matches!(pending[..], [Pending::Encoded { .. }]),
        "a relist keeps nothing decoded"
    );
    cache.replace(vec![item("b", "new")], "2").unwrap();
    let read = cache.finish(pending, true);
    assert_eq!(read, [item("a", "old")]);
    assert_eq!(cache.get_by_key("b"), Some(item("b", "new")));
    assert_eq!(cache.get_by_key("a"), None);
}
