//! A lister-watcher of one shard: asks the server for it, and filters on the client with the
//! server's hash whatever the server sends, so the result is the same whether or not the server
//! honours the selector.

use std::sync::{
    Arc,
    atomic::{AtomicU8, AtomicU64, Ordering},
};

use async_trait::async_trait;
use futures::StreamExt;
use kinformer_store::{Incoming, Object, Shard};
use tracing::{info, warn};

use crate::{ListOptions, ListPage, ListSink, ListerWatcher, Result, WatchEvent, WatchStream};

/// Who filters a shard's objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShardMode {
    /// The server: its last list echoed the shard selector (`metadata.shardInfo`), so it lists
    /// and watches only the shard's objects (kube-apiserver with `ShardedListAndWatch` on).
    Server,
    /// The client: the server ignored the selector (an older server, the feature gate off),
    /// sending every object; the ones outside the shard are dropped as they arrive.
    Client,
}

/// What a [`ShardedListerWatcher`] has seen.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShardStats {
    /// Who filters, once an echo, an object from outside the shard or a long enough run of
    /// objects in it has told; `None` before.
    pub mode: Option<ShardMode>,
    /// Objects received from outside the shard and dropped on the client.
    pub out_of_shard: u64,
}

// `State::mode`: 0 until a list or an object tells.
const SERVER: u8 = 1;
const CLIENT: u8 = 2;

#[derive(Default)]
struct State {
    mode: AtomicU8,
    /// Objects received in the shard since the last one from outside it, across lists and
    /// watches: the evidence that the server filters when it echoes nothing.
    in_shard_since_outsider: AtomicU64,
    out_of_shard: AtomicU64,
}

impl State {
    /// Records who filters, with one log line whenever that changes.
    fn set_mode(&self, mode: u8, selector: &str, what: &str) {
        if self.mode.swap(mode, Ordering::Relaxed) == mode {
            return;
        }
        if mode == SERVER {
            info!(shard = selector, "the server filters the shard");
        } else {
            warn!(
                shard = selector,
                "the server ignored the shard selector ({what}): filtering every object on the \
                 client (kube-apiserver needs the ShardedListAndWatch feature gate)"
            );
        }
    }
}

/// Lists and watches one [`Shard`] of what another [`ListerWatcher`] lists and watches.
///
/// Every list and watch carries the shard's `shardSelector`. Every object that arrives is
/// checked against the shard with the server's hash, and the ones outside it are dropped: when
/// the server honours the selector nothing is dropped, when it ignores it the client does the
/// server's filtering, and either way the consumer sees exactly the shard. Which of the two
/// happens is in [`stats`](Self::stats) and is logged once when it becomes known or changes:
/// an object from outside the shard means the client filters; a list that echoes the selector
/// in `metadata.shardInfo`, or a run of objects in the shard (over lists and watches, streaming
/// lists included) long enough that it cannot be chance, means the server does: kube-apiserver
/// does not echo the selector in metadata-only and custom-resource lists, nor in a watch.
///
/// A shard by UID or namespace is stable for an object's life: an object never moves between
/// shards, so a watch never needs to turn an update into an add or a delete.
///
/// # Example
///
/// ```
/// use k8s_openapi::api::core::v1::Pod;
/// use kinformer_reflector::{KubeListerWatcher, ShardedListerWatcher};
/// use kinformer_store::Shard;
///
/// # fn sharded(client: kube_client::Client) -> kinformer_store::Result<()> {
/// let pods = KubeListerWatcher::new(kube_client::Api::<Pod>::all(client));
/// // The second of three replicas lists and watches a third of the Pods.
/// let mine = ShardedListerWatcher::new(pods, Shard::of(1, 3)?);
/// assert_eq!(mine.stats().mode, None); // known after the first list
/// # Ok(())
/// # }
/// ```
pub struct ShardedListerWatcher<K> {
    inner: Arc<dyn ListerWatcher<K>>,
    shard: Arc<Shard>,
    selector: String,
    state: Arc<State>,
}

impl<K> Clone for ShardedListerWatcher<K> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
            shard: Arc::clone(&self.shard),
            selector: self.selector.clone(),
            state: Arc::clone(&self.state),
        }
    }
}

impl<K> std::fmt::Debug for ShardedListerWatcher<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardedListerWatcher")
            .field("shard", &self.selector)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl<K: Object> ShardedListerWatcher<K> {
    /// The objects of `shard` among those `inner` lists and watches.
    pub fn new(inner: impl ListerWatcher<K> + 'static, shard: Shard) -> Self {
        Self {
            inner: Arc::new(inner),
            selector: shard.to_string(),
            shard: Arc::new(shard),
            state: Arc::default(),
        }
    }
}

impl<K> ShardedListerWatcher<K> {
    /// The shard listed and watched.
    pub fn shard(&self) -> &Shard {
        &self.shard
    }

    /// Who filters, and how many objects the client dropped; shared by every clone.
    pub fn stats(&self) -> ShardStats {
        ShardStats {
            mode: match self.state.mode.load(Ordering::Relaxed) {
                SERVER => Some(ShardMode::Server),
                CLIENT => Some(ShardMode::Client),
                _ => None,
            },
            out_of_shard: self.state.out_of_shard.load(Ordering::Relaxed),
        }
    }

    /// Counts `count` objects received in the shard. kube-apiserver filters but echoes nothing
    /// in metadata-only and custom-resource lists nor in a watch, so a run of objects with none
    /// from outside the shard, across lists and watches, says the server filters once it is
    /// long enough that chance would give it less than once in a million.
    fn kept(&self, count: u64) {
        let run = self
            .state
            .in_shard_since_outsider
            .fetch_add(count, Ordering::Relaxed)
            + count;
        if self.state.mode.load(Ordering::Relaxed) != SERVER
            && self.filtered_by_chance_below(run, 1e-6)
        {
            self.state.set_mode(SERVER, &self.selector, "");
        }
    }

    /// Whether `kept` objects all falling in the shard by chance, from a server that does not
    /// filter, is less likely than `odds`.
    fn filtered_by_chance_below(&self, kept: u64, odds: f64) -> bool {
        let width: u128 = self
            .shard
            .hash_ranges()
            .iter()
            .map(|range| range.end - range.start)
            .sum();
        #[allow(clippy::cast_precision_loss, reason = "a fraction of the hash space")]
        let fraction = width as f64 / 2f64.powi(64);
        let kept = i32::try_from(kept).unwrap_or(i32::MAX);
        fraction < 1.0 && fraction.powi(kept) < odds
    }

    fn dropped(&self, count: u64, what: &str) {
        if count > 0 {
            self.state
                .in_shard_since_outsider
                .store(0, Ordering::Relaxed);
            self.state.out_of_shard.fetch_add(count, Ordering::Relaxed);
            self.state.set_mode(CLIENT, &self.selector, what);
        }
    }
}

/// Hands on the parts of a list, without the objects outside the shard.
struct InShard<'a, K> {
    sink: &'a mut dyn ListSink<K>,
    shard: &'a Shard,
    kept: u64,
    dropped: u64,
}

#[async_trait]
impl<K: Object> ListSink<K> for InShard<'_, K> {
    async fn part(&mut self, mut items: Vec<Incoming<K>>) -> Result<()> {
        let before = items.len();
        items.retain(|item| self.shard.contains(&**item));
        self.dropped += (before - items.len()) as u64;
        self.kept += items.len() as u64;
        self.sink.part(items).await
    }
}

#[async_trait]
impl<K: Object> ListerWatcher<K> for ShardedListerWatcher<K> {
    async fn list(&self, mut options: ListOptions, sink: &mut dyn ListSink<K>) -> Result<ListPage> {
        options.shard_selector = Some(self.selector.clone());
        let mut in_shard = InShard {
            sink,
            shard: &self.shard,
            kept: 0,
            dropped: 0,
        };
        let page = self.inner.list(options, &mut in_shard).await?;
        let echoed = page
            .shard_selector
            .as_deref()
            .and_then(|echo| echo.parse::<Shard>().ok())
            .is_some_and(|echo| echo == *self.shard);
        if in_shard.dropped > 0 {
            self.dropped(in_shard.dropped, "its list held objects outside the shard");
        } else if echoed {
            self.state.set_mode(SERVER, &self.selector, "");
        }
        // A page with outsiders starts the run afresh: which of its objects came after the
        // last outsider is not known, so none counts.
        if in_shard.dropped == 0 {
            self.kept(in_shard.kept);
        }
        Ok(page)
    }

    async fn watch(&self, mut options: ListOptions) -> Result<WatchStream<K>> {
        options.shard_selector = Some(self.selector.clone());
        let stream = self.inner.watch(options).await?;
        let this = self.clone();
        Ok(stream
            .filter(move |event| {
                let in_shard = match event {
                    Ok(WatchEvent::Added(object) | WatchEvent::Modified(object)) => {
                        this.shard.contains(&**object)
                    }
                    Ok(WatchEvent::Deleted(object)) => this.shard.contains(&**object),
                    Ok(WatchEvent::Bookmark { .. }) | Err(_) => return std::future::ready(true),
                };
                if in_shard {
                    this.kept(1);
                } else {
                    this.dropped(1, "its watch sent an object outside the shard");
                }
                std::future::ready(in_shard)
            })
            .boxed())
    }

    fn type_description(&self) -> String {
        self.inner.type_description()
    }

    fn namespace(&self) -> Option<String> {
        self.inner.namespace()
    }
}
