//! Where a [`CompactCache`] frees what a write leaves unreferenced: after its locks are
//! released, so that readers never wait on a free.

use std::sync::Arc;

use super::{Codec, CodecError, CompactCache};
use crate::{
    CacheReader, Encoded, Incoming, Indexer, Indexers, ProjectedMeta, Store, default_key_func,
    free_probe::{FreeLog, Probe},
};

/// What the tests' codecs adopt.
const TEXT: &str = "text/plain";

/// `name` and `version` as `name:version`.
struct Text(Arc<FreeLog>);

impl Codec<Probe> for Text {
    fn encode(&self, probe: &Probe) -> Result<Vec<u8>, CodecError> {
        Ok(format!("{}:{}", probe.name_str(), probe.version).into_bytes())
    }

    fn decode(&self, bytes: &[u8]) -> Result<Probe, CodecError> {
        let text = std::str::from_utf8(bytes)?;
        let (name, version) = text.split_once(':').ok_or("no version")?;
        Ok(self.0.probe(name, version.parse()?))
    }
}

#[test]
fn what_a_write_displaces_is_freed_outside_the_locks() {
    let log = FreeLog::new();
    let probe = |name: &str, version| Arc::new(log.probe(name, version));
    let codec = Arc::new(Text(Arc::clone(&log)));
    let cache =
        Arc::new(CompactCache::new(default_key_func(), Indexers::new(), codec).hot_capacity(1));
    log.watch(&cache, |cache| {
        cache.inner.is_locked() || cache.hot.is_locked()
    });

    cache.add(probe("a", 1).into()).expect("stored");
    cache.add(probe("b", 1).into()).expect("stored"); // evicts a
    cache.update(probe("b", 2).into()).expect("stored"); // replaces b:1 in the set
    let old = cache.upsert(probe("c", 1).into()).expect("stored"); // evicts b:2
    assert!(old.is_none());
    let got = cache.get_by_key("a").expect("decoded"); // evicts c, keeps a:1 decoded
    drop(got);
    cache.delete(probe("a", 1)).expect("deleted"); // the probe passed in, and the held a:1
    cache.replace(vec![probe("d", 1)], "2").expect("replaced"); // d:1, once replace lets it go
    drop(cache);

    assert_eq!(
        log.freed(),
        ["a:1", "b:1", "b:2", "c:1", "a:1", "a:1", "d:1"]
    );
    let locked = log.freed_under_a_lock();
    assert!(locked.is_empty(), "freed under a lock: {locked:?}");
}

/// An object the wire tests store: a name and a version, written `name:version`.
#[derive(Debug, Clone, PartialEq)]
struct Versioned {
    metadata: ProjectedMeta,
    version: u8,
}

crate::impl_object!(Versioned, metadata);

/// `name:version`, counting its encodes; with `adopts`, keeps protobuf wire bytes as they are.
struct Counting {
    encodes: std::sync::atomic::AtomicUsize,
    adopts: bool,
}

impl Codec<Versioned> for Counting {
    fn encode(&self, obj: &Versioned) -> Result<Vec<u8>, CodecError> {
        self.encodes
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = obj.metadata.name.as_deref().unwrap_or_default();
        Ok(format!("{name}:{}", obj.version).into_bytes())
    }

    fn decode(&self, bytes: &[u8]) -> Result<Versioned, CodecError> {
        let (name, version) = std::str::from_utf8(bytes)?
            .split_once(':')
            .ok_or("no version")?;
        Ok(unshared(name, version.parse()?))
    }

    fn adopt(&self, encoded: &Encoded) -> Option<Arc<[u8]>> {
        (self.adopts && encoded.media_type() == TEXT).then(|| Arc::clone(encoded.bytes()))
    }
}

fn unshared(name: &str, version: u8) -> Versioned {
    Versioned {
        metadata: ProjectedMeta {
            name: Some(name.to_owned()),
            ..ProjectedMeta::default()
        },
        version,
    }
}

fn versioned(name: &str, version: u8) -> Arc<Versioned> {
    Arc::new(unshared(name, version))
}

/// A cache keeping nothing decoded, so every read decodes what the cache holds.
fn counting_cache(adopts: bool) -> (CompactCache<Versioned>, Arc<Counting>) {
    let codec = Arc::new(Counting {
        encodes: std::sync::atomic::AtomicUsize::new(0),
        adopts,
    });
    let cache = CompactCache::new(default_key_func(), Indexers::new(), Arc::clone(&codec) as _)
        .hot_capacity(0);
    (cache, codec)
}

fn encodes(codec: &Counting) -> usize {
    codec.encodes.load(std::sync::atomic::Ordering::Relaxed)
}

#[test]
fn bytes_the_codec_adopts_are_stored_without_an_encode() {
    let (cache, codec) = counting_cache(true);
    let arrived =
        |obj, text: &str| Incoming::new(obj, Some(Encoded::new(TEXT, Arc::from(text.as_bytes()))));

    cache
        .add(arrived(versioned("a", 1), "a:1"))
        .expect("stored");
    let old = cache
        .upsert(arrived(versioned("a", 2), "a:2"))
        .expect("stored")
        .expect("replaced a:1");
    cache
        .update(arrived(versioned("b", 1), "b:1"))
        .expect("stored");
    assert_eq!(encodes(&codec), 0);
    // What was stored is the bytes that arrived: the old object and reads decode from them.
    assert_eq!(old.get().as_deref(), Some(&*versioned("a", 1)));
    assert_eq!(cache.get_by_key("a").as_deref(), Some(&*versioned("a", 2)));
    assert_eq!(cache.get_by_key("b").as_deref(), Some(&*versioned("b", 1)));

    // Without bytes, the object is encoded.
    cache.upsert(versioned("a", 3).into()).expect("stored");
    assert_eq!(encodes(&codec), 1);
    assert_eq!(cache.get_by_key("a").as_deref(), Some(&*versioned("a", 3)));
}

#[test]
fn bytes_the_codec_does_not_adopt_are_ignored_and_the_object_encoded() {
    let (cache, codec) = counting_cache(false);
    let encoded = Encoded::new(TEXT, Arc::from(&b"not what the object holds"[..]));

    cache
        .add(Incoming::new(versioned("a", 1), Some(encoded.clone())))
        .expect("stored");
    let old = cache
        .upsert(Incoming::new(versioned("a", 2), Some(encoded)))
        .expect("stored")
        .expect("replaced a:1");
    assert_eq!(encodes(&codec), 2);
    assert_eq!(old.get().as_deref(), Some(&*versioned("a", 1)));
    assert_eq!(cache.get_by_key("a").as_deref(), Some(&*versioned("a", 2)));
}
