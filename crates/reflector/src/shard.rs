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
use parking_lot::Mutex;
use tokio::sync::watch;
use tracing::{info, warn};

use crate::{
    Error, ListOptions, ListPage, ListSink, ListerWatcher, Result, VersionMatch, WatchEvent,
    WatchStream,
};

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

/// The shard in force, numbered: every [`ShardedListerWatcher::set_shard`] that changes it
/// makes a new one with the next epoch.
#[derive(Debug)]
struct Current {
    shard: Arc<Shard>,
    selector: String,
    epoch: u64,
}

impl Current {
    fn new(shard: Shard, epoch: u64) -> Self {
        Self {
            selector: shard.to_string(),
            shard: Arc::new(shard),
            epoch,
        }
    }
}

struct State {
    /// The shard in force; a watch ends when it changes.
    current: watch::Sender<Arc<Current>>,
    /// The shard the last list (or streaming list) was taken for: a watch that resumes from
    /// that list's version must be of the same shard (epoch), or it would miss what the new
    /// shard gained and keep what it lost.
    listed: Mutex<Arc<Current>>,
    mode: AtomicU8,
    /// Objects received in the shard since the last one from outside it, across lists and
    /// watches: the evidence that the server filters when it echoes nothing.
    in_shard_since_outsider: AtomicU64,
    out_of_shard: AtomicU64,
}

impl State {
    fn listed_epoch(&self) -> u64 {
        self.listed.lock().epoch
    }

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
/// The shard can change while it runs ([`set_shard`](Self::set_shard)): the watch in progress
/// ends with [`Error::ShardChanged`], which makes a reflector list again (with no backoff) for
/// the new shard, and replace what it held with what that list holds. An informer hands the
/// objects the new shard gained to its handlers as adds, and lets go of the ones it lost with
/// tombstones marked [`left_shard`](kinformer_store::DeletedFinalStateUnknown::left_shard).
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
    state: Arc<State>,
}

impl<K> Clone for ShardedListerWatcher<K> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
            state: Arc::clone(&self.state),
        }
    }
}

impl<K> std::fmt::Debug for ShardedListerWatcher<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardedListerWatcher")
            .field("shard", &self.current().selector)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl<K: Object> ShardedListerWatcher<K> {
    /// The objects of `shard` among those `inner` lists and watches.
    pub fn new(inner: impl ListerWatcher<K> + 'static, shard: Shard) -> Self {
        let current = Arc::new(Current::new(shard, 0));
        Self {
            inner: Arc::new(inner),
            state: Arc::new(State {
                current: watch::Sender::new(Arc::clone(&current)),
                listed: Mutex::new(current),
                mode: AtomicU8::new(0),
                in_shard_since_outsider: AtomicU64::new(0),
                out_of_shard: AtomicU64::new(0),
            }),
        }
    }
}

impl<K> ShardedListerWatcher<K> {
    /// The shard listed and watched now.
    pub fn shard(&self) -> Arc<Shard> {
        Arc::clone(&self.current().shard)
    }

    /// Lists and watches `shard` from now on, on every clone: a watch in progress ends with
    /// [`Error::ShardChanged`], and one opened before a list of the new shard is refused with
    /// it, so the consumer lists the new shard before it watches it. The same shard again
    /// changes nothing.
    pub fn set_shard(&self, shard: Shard) {
        self.state.current.send_if_modified(|current| {
            if *current.shard == shard {
                return false;
            }
            info!(from = %current.selector, to = %shard, "the shard changes");
            *current = Arc::new(Current::new(shard, current.epoch + 1));
            true
        });
    }

    /// The shard of the last list (or streaming list) asked for: what a list handed on now
    /// holds, for a list of another shard fails before it completes. A consumer that records
    /// this when it takes a list's end knows which shard its store holds once that end is
    /// applied, while [`shard`](Self::shard) may already name the next.
    pub fn listed_shard(&self) -> Arc<Shard> {
        Arc::clone(&self.state.listed.lock().shard)
    }

    fn current(&self) -> Arc<Current> {
        Arc::clone(&self.state.current.borrow())
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
    /// `current` is the shard the list or watch asked for.
    fn kept(&self, current: &Current, count: u64) {
        let run = self
            .state
            .in_shard_since_outsider
            .fetch_add(count, Ordering::Relaxed)
            + count;
        if self.state.mode.load(Ordering::Relaxed) != SERVER
            && filtered_by_chance_below(&current.shard, run, 1e-6)
        {
            self.state.set_mode(SERVER, &current.selector, "");
        }
    }

    fn dropped(&self, current: &Current, count: u64, what: &str) {
        if count > 0 {
            self.state
                .in_shard_since_outsider
                .store(0, Ordering::Relaxed);
            self.state.out_of_shard.fetch_add(count, Ordering::Relaxed);
            self.state.set_mode(CLIENT, &current.selector, what);
        }
    }
}

/// Whether `kept` objects all falling in `shard` by chance, from a server that does not
/// filter, is less likely than `odds`.
fn filtered_by_chance_below(shard: &Shard, kept: u64, odds: f64) -> bool {
    let width: u128 = shard
        .hash_ranges()
        .iter()
        .map(|range| range.end - range.start)
        .sum();
    #[allow(clippy::cast_precision_loss, reason = "a fraction of the hash space")]
    let fraction = width as f64 / 2f64.powi(64);
    let kept = i32::try_from(kept).unwrap_or(i32::MAX);
    fraction < 1.0 && fraction.powi(kept) < odds
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
        let current = self.current();
        options.shard_selector = Some(current.selector.clone());
        // The first page of a list a watch may resume from. A list at an exact version reads
        // the past (an informer's consistency check), and a watch never follows it.
        let starts_a_list = options.continue_token.is_none()
            && options.resource_version_match != Some(VersionMatch::Exact);
        // Pages of one list are of one shard: a continuation of a list whose shard changed
        // since its first page is refused before it is asked for, and the reflector lists
        // again from its first page. So is a read of the past, which is compared with what
        // the last list brought.
        if !starts_a_list && self.state.listed_epoch() != current.epoch {
            return Err(Error::ShardChanged);
        }
        let mut in_shard = InShard {
            sink,
            shard: &current.shard,
            kept: 0,
            dropped: 0,
        };
        let page = self.inner.list(options, &mut in_shard).await?;
        if starts_a_list {
            *self.state.listed.lock() = Arc::clone(&current);
        }
        let echoed = page
            .shard_selector
            .as_deref()
            .and_then(|echo| echo.parse::<Shard>().ok())
            .is_some_and(|echo| echo == *current.shard);
        if in_shard.dropped > 0 {
            self.dropped(
                &current,
                in_shard.dropped,
                "its list held objects outside the shard",
            );
        } else if echoed {
            self.state.set_mode(SERVER, &current.selector, "");
        }
        // A page with outsiders starts the run afresh: which of its objects came after the
        // last outsider is not known, so none counts.
        if in_shard.dropped == 0 {
            self.kept(&current, in_shard.kept);
        }
        Ok(page)
    }

    async fn watch(&self, mut options: ListOptions) -> Result<WatchStream<K>> {
        // Subscribed before the shard is read, so no change falls between the two.
        let mut changes = self.state.current.subscribe();
        let current = Arc::clone(&changes.borrow_and_update());
        if options.send_initial_events {
            // A streaming list: the watch lists the shard itself.
            *self.state.listed.lock() = Arc::clone(&current);
        } else if self.state.listed_epoch() != current.epoch {
            return Err(Error::ShardChanged);
        }
        options.shard_selector = Some(current.selector.clone());
        let stream = self.inner.watch(options).await?;
        let this = self.clone();
        let events = stream.filter(move |event| {
            let in_shard = match event {
                Ok(WatchEvent::Added(object) | WatchEvent::Modified(object)) => {
                    current.shard.contains(&**object)
                }
                Ok(WatchEvent::Deleted(object)) => current.shard.contains(&**object),
                Ok(WatchEvent::Bookmark { .. }) | Err(_) => return std::future::ready(true),
            };
            if in_shard {
                this.kept(&current, 1);
            } else {
                this.dropped(&current, 1, "its watch sent an object outside the shard");
            }
            std::future::ready(in_shard)
        });
        // The events until the shard changes, then `ShardChanged` to end the watch. (The
        // sender lives in `self.state`, which the filter above holds, so `changed` never
        // fails while the stream lives.)
        Ok(
            futures::stream::unfold(Some((events.boxed(), changes)), |state| async move {
                let (mut events, mut changes) = state?;
                tokio::select! {
                    biased;
                    _ = changes.changed() => Some((Err(Error::ShardChanged), None)),
                    item = events.next() => item.map(|item| (item, Some((events, changes)))),
                }
            })
            .boxed(),
        )
    }

    fn type_description(&self) -> String {
        self.inner.type_description()
    }

    fn namespace(&self) -> Option<String> {
        self.inner.namespace()
    }
}

#[cfg(test)]
mod tests {
    use futures::stream;
    use k8s_openapi::api::core::v1::Pod;

    use super::*;

    /// A collection of no objects, listed in two pages, whose watch delivers nothing until it
    /// is dropped: what is under test is what the shard does around it. It counts the pages
    /// asked of it.
    #[derive(Default, Clone)]
    struct TwoEmptyPages {
        pages: Arc<std::sync::atomic::AtomicUsize>,
    }

    impl TwoEmptyPages {
        fn pages(&self) -> usize {
            self.pages.load(Ordering::Relaxed)
        }
    }

    #[async_trait]
    impl ListerWatcher<Pod> for TwoEmptyPages {
        async fn list(&self, options: ListOptions, _: &mut dyn ListSink<Pod>) -> Result<ListPage> {
            self.pages.fetch_add(1, Ordering::Relaxed);
            Ok(ListPage {
                resource_version: "7".into(),
                continue_token: options.continue_token.is_none().then(|| "page-2".into()),
                shard_selector: None,
            })
        }

        async fn watch(&self, _: ListOptions) -> Result<WatchStream<Pod>> {
            Ok(stream::pending().boxed())
        }
    }

    fn shard(index: u64) -> Shard {
        Shard::of(index, 2).expect("a shard")
    }

    fn first_page() -> ListOptions {
        ListOptions::default()
    }

    fn second_page() -> ListOptions {
        ListOptions {
            continue_token: Some("page-2".into()),
            ..ListOptions::default()
        }
    }

    #[tokio::test]
    async fn a_watch_in_progress_ends_when_the_shard_changes() {
        let sharded = ShardedListerWatcher::new(TwoEmptyPages::default(), shard(0));
        sharded
            .list(first_page(), &mut Vec::new())
            .await
            .expect("listed");
        let mut watch = sharded
            .watch(ListOptions::default())
            .await
            .expect("watching");
        sharded.set_shard(shard(0));
        assert!(
            futures::poll!(watch.next()).is_pending(),
            "the same shard again changes nothing"
        );
        sharded.clone().set_shard(shard(1));
        assert!(matches!(watch.next().await, Some(Err(Error::ShardChanged))));
        assert!(watch.next().await.is_none(), "and the watch is over");
        assert_eq!(*sharded.shard(), shard(1));
    }

    #[tokio::test]
    async fn a_watch_after_a_list_of_the_old_shard_is_refused_until_the_new_one_is_listed() {
        let sharded = ShardedListerWatcher::new(TwoEmptyPages::default(), shard(0));
        sharded
            .list(first_page(), &mut Vec::new())
            .await
            .expect("listed");
        sharded.set_shard(shard(1));
        assert!(matches!(
            sharded.watch(ListOptions::default()).await,
            Err(Error::ShardChanged)
        ));
        // A streaming list lists the new shard itself.
        let streaming = ListOptions {
            send_initial_events: true,
            ..ListOptions::default()
        };
        assert!(sharded.watch(streaming).await.is_ok());
        sharded.set_shard(shard(0));
        sharded
            .list(first_page(), &mut Vec::new())
            .await
            .expect("listed");
        assert!(sharded.watch(ListOptions::default()).await.is_ok());
    }

    #[tokio::test]
    async fn a_list_whose_shard_changed_between_its_pages_is_refused() {
        let inner = TwoEmptyPages::default();
        let sharded = ShardedListerWatcher::new(inner.clone(), shard(0));
        let page = sharded
            .list(first_page(), &mut Vec::new())
            .await
            .expect("the first page");
        assert_eq!(page.next_page_token(), Some("page-2"));
        sharded.set_shard(shard(1));
        assert!(matches!(
            sharded.list(second_page(), &mut Vec::new()).await,
            Err(Error::ShardChanged)
        ));
        assert_eq!(inner.pages(), 1, "refused before the page is asked for");
        // A check of the past (a list at an exact version) neither counts as the list a watch
        // resumes from nor survives a change under it.
        let exact = ListOptions {
            resource_version: Some("7".into()),
            resource_version_match: Some(VersionMatch::Exact),
            ..ListOptions::default()
        };
        assert!(matches!(
            sharded.list(exact, &mut Vec::new()).await,
            Err(Error::ShardChanged)
        ));
        assert_eq!(inner.pages(), 1);
        sharded
            .list(first_page(), &mut Vec::new())
            .await
            .expect("listed again");
        sharded
            .list(second_page(), &mut Vec::new())
            .await
            .expect("the second page of the new shard");
    }
}
