//! Where a [`CompactCache`] frees what a write leaves unreferenced: after its locks are
//! released, so that readers never wait on a free.

use std::sync::{Arc, Mutex, OnceLock, Weak};

use super::{Codec, CodecError, CompactCache};
use crate::{CacheReader, Indexer, Indexers, Store};

/// An object that, when freed, records whether its cache's locks were held at that moment.
struct Probe {
    name: String,
    version: u8,
    watch: Arc<Watch>,
}

#[derive(Default)]
struct Watch {
    cache: OnceLock<Weak<CompactCache<Probe>>>,
    /// One entry per freed probe: its name, version, and whether a lock was held.
    freed: Mutex<Vec<(String, u8, bool)>>,
}

impl Drop for Probe {
    fn drop(&mut self) {
        let Some(cache) = self.watch.cache.get().and_then(Weak::upgrade) else {
            return;
        };
        let locked = cache.inner.is_locked() || cache.hot.is_locked();
        let entry = (std::mem::take(&mut self.name), self.version, locked);
        self.watch.freed.lock().expect("not poisoned").push(entry);
    }
}

/// `name` and `version` as `name:version`.
struct Text(Arc<Watch>);

impl Codec<Probe> for Text {
    fn encode(&self, probe: &Probe) -> Result<Vec<u8>, CodecError> {
        Ok(format!("{}:{}", probe.name, probe.version).into_bytes())
    }

    fn decode(&self, bytes: &[u8]) -> Result<Probe, CodecError> {
        let text = std::str::from_utf8(bytes)?;
        let (name, version) = text.split_once(':').ok_or("no version")?;
        Ok(Probe {
            name: name.to_owned(),
            version: version.parse()?,
            watch: Arc::clone(&self.0),
        })
    }
}

#[test]
fn what_a_write_displaces_is_freed_outside_the_locks() {
    let watch = Arc::new(Watch::default());
    let probe = |name: &str, version| {
        Arc::new(Probe {
            name: name.to_owned(),
            version,
            watch: Arc::clone(&watch),
        })
    };
    let key: crate::KeyFunc<Probe> = Arc::new(|probe: &Probe| Ok(probe.name.clone()));
    let cache = Arc::new(
        CompactCache::new(key, Indexers::new(), Arc::new(Text(Arc::clone(&watch)))).hot_capacity(1),
    );
    assert!(watch.cache.set(Arc::downgrade(&cache)).is_ok());

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

    let freed = watch.freed.lock().expect("not poisoned").clone();
    let names: Vec<String> = freed
        .iter()
        .map(|(name, version, _)| format!("{name}:{version}"))
        .collect();
    assert_eq!(names, ["a:1", "b:1", "b:2", "c:1", "a:1", "a:1", "d:1"]);
    let locked: Vec<&String> = freed
        .iter()
        .zip(&names)
        .filter(|((_, _, locked), _)| *locked)
        .map(|(_, name)| name)
        .collect();
    assert!(locked.is_empty(), "freed under a lock: {locked:?}");
}
