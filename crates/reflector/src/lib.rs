//! The reflector layer: where objects enter kinformer from the Kubernetes API.
//!
//! It owns:
//!
//! - **the [`ListerWatcher`] seam**: list one page, open a watch stream; object safe, so a test
//!   or another data source can bring its own;
//! - **[`KubeListerWatcher`]**: the implementation over kube-client, for typed resources,
//!   projections of them ([`KubeListerWatcher::projected`]: a type that names only what a
//!   controller reads, the rest skipped on the wire), [`DynamicObject`](kube_core::DynamicObject)s
//!   and metadata only, with namespace, label and field selectors and a tweak hook, over a client
//!   from [`informer_client`] (kube-client's own retry layer off: the reflector owns retries).
//!   It asks for Kubernetes protobuf for built-in kinds (and for `PartialObjectMetadata` of any
//!   kind), decodes whichever format arrives straight into `K`, and can drop `managedFields`
//!   without decoding them; malformed input is reported as [`Error::Decode`]. JSON objects are
//!   decoded with simd-json where it reads them exactly as serde_json would, and with
//!   serde_json otherwise (the `simd-json` feature, on by default; without it serde_json reads
//!   all). [`WireFormat`] turns protobuf off (and [`WireFormat::from_env`] reads the choice from
//!   `KINFORMER_WIRE_FORMAT` for a program that asks). List pages are decoded on a blocking
//!   thread while the next page is already in flight (a large page item by item as its bytes
//!   arrive, in either format, never held whole), and watch frames on worker tasks beside the
//!   one reading the watch, in the server's order
//!   ([`KubeListerWatcher::watch_decode_workers`]);
//! - **[`ShardedListerWatcher`]**: one shard of what another lister-watcher lists and watches,
//!   asked of the server (kube-apiserver's sharded list and watch, `shardSelector`) and
//!   filtered on the client with the server's hash where the server does not, with
//!   [`ShardStats`] saying which; its shard can move while it runs
//!   ([`ShardedListerWatcher::set_shard`]), which makes a reflector list the new shard;
//! - **[`Reflector`]**: client-go's `ListAndWatch` loop. A paged list (resource version "0"
//!   first, a consistent read when that version is unusable), `Replace` into any
//!   [`Store`](kinformer_store::Store), a watch with bookmarks from the list's version, resume
//!   after a stream ends, relist on 410, jittered exponential backoff (honouring `Retry-After`),
//!   random 5 to 10 minute watch timeouts with an idle deadline just above them, periodic resync,
//!   streaming lists (`sendInitialEvents`) with a fallback, and prompt cancellation.
//!
//! Nothing here knows what sits above the store (queues, handlers). Start with
//! [`Reflector::new`]: a lister-watcher, a store and [`ReflectorOptions`] (every kinformer layer
//! is configured the same way: an options struct with [`Default`] and chained setters, given to
//! the constructor).
//!
//! # Example
//!
//! A reflector over an in-memory [`ListerWatcher`] (a real one would be
//! `KubeListerWatcher::new(Api::<Pod>::all(client))`):
//!
//! ```
//! use std::sync::Arc;
//!
//! use async_trait::async_trait;
//! use k8s_openapi::api::core::v1::Pod;
//! use kinformer_reflector::{
//!     ListOptions, ListPage, ListSink, ListerWatcher, Reflector, ReflectorOptions, Result,
//!     WatchStream,
//! };
//! use kinformer_store::{Cache, CacheReader};
//! use kube_core::ObjectMeta;
//! use tokio_util::sync::CancellationToken;
//!
//! struct TwoPods;
//!
//! #[async_trait]
//! impl ListerWatcher<Pod> for TwoPods {
//!     async fn list(&self, _options: ListOptions, sink: &mut dyn ListSink<Pod>) -> Result<ListPage> {
//!         let pod = |name: &str| {
//!             let metadata = ObjectMeta { name: Some(name.into()), ..ObjectMeta::default() };
//!             Arc::new(Pod { metadata, ..Pod::default() }).into()
//!         };
//!         // The objects go to the sink, in as many parts as suit the source.
//!         sink.part(vec![pod("a"), pod("b")]).await?;
//!         Ok(ListPage { resource_version: "7".into(), ..ListPage::default() })
//!     }
//!
//!     async fn watch(&self, _options: ListOptions) -> Result<WatchStream<Pod>> {
//!         // A watch on which nothing ever happens.
//!         Ok(Box::pin(futures::stream::pending()))
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let cache = Arc::new(Cache::<Pod>::default());
//! let options = ReflectorOptions::default().name("pods").page_size(500);
//! let reflector = Arc::new(Reflector::new(TwoPods, Arc::clone(&cache), options));
//! let token = CancellationToken::new();
//! let running = tokio::spawn({
//!     let (reflector, token) = (Arc::clone(&reflector), token.clone());
//!     async move { reflector.run(token).await }
//! });
//! while cache.list_keys().len() != 2 {
//!     tokio::task::yield_now().await;
//! }
//! // The version moves before the store's write, so whoever sees the write sees it too.
//! assert_eq!(reflector.last_sync_resource_version(), "7");
//! token.cancel();
//! running.await.expect("the reflector stops when its token fires");
//! # }
//! ```

mod arriving;
mod client;
mod codec;
mod decoder;
mod error;
mod event;
mod json_list;
mod kube;
mod lister_watcher;
mod options;
mod peek;
mod protobuf;
mod reflector;
mod shard;
mod stats;

pub use crate::{
    client::informer_client,
    codec::{JsonCodec, ProtobufCodec, compact_codec},
    error::{Error, Result},
    event::{INITIAL_EVENTS_END_ANNOTATION, ListPage, WatchEvent, WatchStream},
    kube::{KubeListerWatcher, MAX_WATCH_LINE},
    lister_watcher::{ListSink, ListerWatcher},
    options::{ListOptions, VersionMatch},
    protobuf::{WIRE_FORMAT_ENV, WireFormat},
    reflector::{
        DEFAULT_MIN_WATCH_TIMEOUT, DEFAULT_PAGE_SIZE, Failures, Reflector, ReflectorExit,
        ReflectorOptions, WATCH_IDLE_GRACE,
    },
    shard::{ShardMode, ShardStats, ShardedListerWatcher},
    stats::{RELIST_REASONS, ReflectorStats},
};
pub(crate) use crate::{
    decoder::{Decoder, ExpectedType, Framing, JsonDecoder},
    protobuf::KubeDecoder,
};

// The README's code blocks, compiled as doc tests so the README cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
