//! Where a [`CompactCache`] frees what a write leaves unreferenced: after its locks are
//! released, so that readers never wait on a free.

use std::sync::Arc;

use super::{Codec, CodecError, CompactCache};
use crate::{
    CacheReader, Indexer, Indexers, Store,
    free_probe::{FreeLog, Probe},
};

/// `name` and `version` as `name:version`.
struct Text(Arc<FreeLog>);

impl Codec<Probe> for Text {
    fn encode(&self, probe: &Probe) -> Result<Vec<u8>, CodecError> {
        Ok(format!("{}:{}", probe.name, probe.version).into_bytes())
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
    let key: crate::KeyFunc<Probe> = Arc::new(|probe: &Probe| Ok(probe.name.clone()));
    let cache = Arc::new(
        CompactCache::new(key, Indexers::new(), Arc::new(Text(Arc::clone(&log)))).hot_capacity(1),
    );
    log.watch(&cache, |cache| {
        cache.inner.is_locked() || cache.hot.is_locked()
    });

    cache.add(probe("a", 1)).expect("stored");
    cache.add(probe("b", 1)).expect("stored"); // evicts a
    cache.update(probe("b", 2)).expect("stored"); // replaces b:1 in the set
    let old = cache.upsert(probe("c", 1)).expect("stored"); // evicts b:2
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
