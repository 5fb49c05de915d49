//! What `cargo xtask bench` needs from the server, and the checksum the peers share with it.
//!
//! The contract is `xtask/peers/BENCH-PROTOCOL.md`. With
//! [`admin_endpoints`](crate::ServerOptions::admin_endpoints) on (as in the
//! `kinformer-fake-apiserver` binary) the server answers:
//!
//! - `POST /admin/bench/update?resource=R&count=C&rate=S`: `C` updates of the objects of `R`
//!   (`pods` or `configmaps`) in the background, round robin in key order, `S` a second (`0` or
//!   absent: as fast as it can), each setting [`EMIT_NS_ANNOTATION`] to the Unix time in
//!   nanoseconds taken just before the object is stored; then the sentinel, an object of `R`
//!   named [`SENTINEL_PREFIX`]`K` in the namespace of fixture 0. Answers
//!   `{"ok":true,"sentinel":"NS/NAME"}` at once.
//! - `POST /admin/bench/relist?resource=R&fraction=F`: under one lock, closes every open
//!   watch, updates and deletes (alternately) every `round(1/F)`-th object of `R` in key order
//!   (positions 0, step, 2·step, …), creates the sentinel and compacts the history. Answers
//!   `{"ok":true,"sentinel":"NS/NAME","updated":U,"deleted":D}`.
//! - `GET /admin/bench/checksum?resource=R`: `{"count":N,"checksum":"HEX"}` of the current
//!   objects of `R` (see [`checksum`]).
//! - `GET /admin/content-types`: `{"application/json":N,...}`, responses to get, list and
//!   watch requests by `Content-Type`.
//!
//! "The objects of `R`" leaves out earlier sentinels, so that which objects a call touches
//! does not depend on the calls before it; the checksum counts every object.
//!
//! Writes from `update` never overflow a watch: before each batch the updater waits (up to
//! [`WATCH_ROOM_PATIENCE`]) until every open watch of `R` has room for it, so "as fast as the
//! server can" is as fast as the slowest watcher drains, and a peer that falls behind is slowed
//! down instead of cut off. A watcher stuck for longer is closed, as apiserver closes one that
//! stops reading.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::Response;
use serde_json::{Value, json};

use crate::fixtures;
use crate::object::Obj;
use crate::resources::ResourceType;
use crate::response::{ResponseBody, body_response};
use crate::shared::Shared;
use crate::status::ApiError;
use crate::store::Store;
use crate::wire::to_bytes;
use crate::write::{create_locked, prepare_create};

/// The annotation every bench write sets: Unix time in nanoseconds, taken just before the
/// object is stored (and so just before its watch event is sent).
pub const EMIT_NS_ANNOTATION: &str = "bench.kinformer.dev/emit-ns";

/// Sentinels are named `bench-sentinel-1`, `bench-sentinel-2`, … in the order the server hands
/// them out.
pub const SENTINEL_PREFIX: &str = "bench-sentinel-";

/// FNV-1a's 64-bit offset basis: the checksum of the empty set.
const FNV_OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// Updates between two yields to the runtime when running as fast as possible: small enough
/// that watch tasks on the same worker are not starved, large enough to amortise the yield.
const BATCH: usize = 256;

/// How long the updater waits for a slow watcher to make room before writing anyway.
pub const WATCH_ROOM_PATIENCE: Duration = Duration::from_secs(10);

/// 64-bit FNV-1a over `key \0 resourceVersion \n` of each object, fed in key order.
#[derive(Debug)]
struct Fnv1a(u64);

impl Fnv1a {
    fn new() -> Self {
        Self(FNV_OFFSET_BASIS)
    }

    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 ^= u64::from(*byte);
            self.0 = self.0.wrapping_mul(FNV_PRIME);
        }
    }

    fn object(&mut self, key: &str, resource_version: &[u8]) {
        self.write(key.as_bytes());
        self.write(&[0]);
        self.write(resource_version);
        self.write(b"\n");
    }

    fn hex(&self) -> String {
        format!("{:016x}", self.0)
    }
}

/// The bench checksum of a set of objects, given as `(key, resourceVersion)` pairs in any
/// order: sorted by key (`namespace/name`, or `name` when cluster-scoped), each object's key,
/// one `0x00` byte, its `metadata.resourceVersion` and one `\n` byte go through 64-bit FNV-1a,
/// written as 16 lower-case hex digits.
///
/// The server answers `GET /admin/bench/checksum` with the same function, so a peer whose view
/// has the server's checksum has seen every change.
///
/// ```
/// use kinformer_testing::bench::checksum;
///
/// assert_eq!(checksum(Vec::<(String, String)>::new()), "cbf29ce484222325");
/// let view = [("ns-1/pod-1", "12"), ("ns-0/pod-0", "11")];
/// let reordered = [("ns-0/pod-0", "11"), ("ns-1/pod-1", "12")];
/// assert_eq!(checksum(view), checksum(reordered));
/// ```
pub fn checksum<K, V>(objects: impl IntoIterator<Item = (K, V)>) -> String
where
    K: AsRef<str>,
    V: AsRef<str>,
{
    let mut objects: Vec<(K, V)> = objects.into_iter().collect();
    objects.sort_unstable_by(|a, b| a.0.as_ref().cmp(b.0.as_ref()));
    let mut hash = Fnv1a::new();
    for (key, resource_version) in &objects {
        hash.object(key.as_ref(), resource_version.as_ref().as_bytes());
    }
    hash.hex()
}

/// `n` in decimal, written at the end of `buffer`.
fn decimal(mut n: u64, buffer: &mut [u8; 20]) -> &[u8] {
    let mut start = buffer.len();
    loop {
        start -= 1;
        buffer[start] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buffer[start..];
        }
    }
}

fn unix_nanos() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_nanos()).unwrap_or(u64::MAX)
        })
}

fn is_sentinel(key: &str) -> bool {
    let name = key.rsplit_once('/').map_or(key, |(_, name)| name);
    name.starts_with(SENTINEL_PREFIX)
}

fn ok(value: &Value) -> Response<ResponseBody> {
    body_response(200, "application/json", to_bytes(value))
}

/// The resource a bench call names: `pods` or `configmaps`.
fn bench_resource(
    shared: &Shared,
    query: &HashMap<String, String>,
) -> Result<Arc<ResourceType>, ApiError> {
    let plural = query
        .get("resource")
        .ok_or_else(|| ApiError::bad_request("resource is required (pods or configmaps)"))?;
    if !matches!(plural.as_str(), "pods" | "configmaps") {
        return Err(ApiError::bad_request(format!(
            "unknown bench resource {plural:?}: expected pods or configmaps"
        )));
    }
    shared
        .registry
        .read()
        .find("", "v1", plural)
        .ok_or_else(|| ApiError::bad_request(format!("{plural} is not served")))
}

fn count_param(
    query: &HashMap<String, String>,
    name: &str,
    default: Option<u64>,
) -> Result<u64, ApiError> {
    match query.get(name) {
        Some(raw) => raw.parse().map_err(|_| {
            ApiError::bad_request(format!(
                "{name} must be a non-negative integer, got {raw:?}"
            ))
        }),
        None => default.ok_or_else(|| ApiError::bad_request(format!("{name} is required"))),
    }
}

fn fraction_param(query: &HashMap<String, String>) -> Result<f64, ApiError> {
    let raw = query
        .get("fraction")
        .ok_or_else(|| ApiError::bad_request("fraction is required"))?;
    raw.parse::<f64>()
        .ok()
        .filter(|f| *f > 0.0 && *f <= 1.0)
        .ok_or_else(|| {
            ApiError::bad_request(format!("fraction must be a number in (0, 1], got {raw:?}"))
        })
}

/// A sentinel to create: its namespace and its name, unique in this server.
#[derive(Debug, Clone)]
struct Sentinel {
    namespace: String,
    name: String,
}

impl Sentinel {
    fn next(shared: &Shared) -> Self {
        let k = shared.sentinels.fetch_add(1, Ordering::Relaxed) + 1;
        Self {
            namespace: fixtures::namespace_of(0),
            name: format!("{SENTINEL_PREFIX}{k}"),
        }
    }

    fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    fn object(&self, resource: &ResourceType) -> Value {
        let mut object = json!({
            "apiVersion": resource.api_version(),
            "kind": resource.kind,
            "metadata": { "name": self.name, "namespace": self.namespace },
        });
        if resource.kind == "Pod" {
            object["spec"] = json!({ "containers": [{ "name": "sentinel", "image": "registry.k8s.io/pause:3.10" }] });
        } else {
            object["data"] = json!({});
        }
        object
    }

    /// Stores the sentinel, stamping it as late as possible; the caller holds the lock.
    fn create(&self, store: &mut Store, resource: &ResourceType) -> Result<Arc<Obj>, ApiError> {
        let mut prepared = prepare_create(resource, Some(&self.namespace), self.object(resource))?;
        prepared.set_annotation(EMIT_NS_ANNOTATION, &unix_nanos().to_string());
        create_locked(store, resource, prepared)
    }
}

/// Writes a fresh emit-ns into the current state of `key`; false when the object is gone.
fn stamp(store: &mut Store, group_resource: &str, key: &str) -> bool {
    let Some(current) = store.get(group_resource, key) else {
        return false;
    };
    let emit_ns = unix_nanos().to_string();
    store.commit_with(group_resource, key, |rv| {
        current.restamped(rv, Some((EMIT_NS_ANNOTATION, &emit_ns)))
    });
    true
}

/// `POST /admin/bench/update`.
pub(crate) fn update(
    shared: &Arc<Shared>,
    query: &HashMap<String, String>,
) -> Result<Response<ResponseBody>, ApiError> {
    let resource = bench_resource(shared, query)?;
    let count = count_param(query, "count", None)?;
    let rate = count_param(query, "rate", Some(0))?;
    let keys: Vec<String> = shared
        .store
        .lock()
        .current(&resource.group_resource())
        .map(|(key, _)| key)
        .filter(|key| !is_sentinel(key))
        .map(str::to_owned)
        .collect();
    if keys.is_empty() && count > 0 {
        return Err(ApiError::bad_request(format!(
            "there are no {} to update",
            resource.plural
        )));
    }
    let sentinel = Sentinel::next(shared);
    let answer = json!({ "ok": true, "sentinel": sentinel.key() });
    let updater = Updater {
        shared: shared.clone(),
        resource,
        keys,
        count,
        rate,
        sentinel,
    };
    shared.spawn_background(updater.run());
    Ok(ok(&answer))
}

/// One `update` call's background work.
#[derive(Debug)]
struct Updater {
    shared: Arc<Shared>,
    resource: Arc<ResourceType>,
    keys: Vec<String>,
    count: u64,
    rate: u64,
    sentinel: Sentinel,
}

impl Updater {
    async fn run(self) {
        let group_resource = self.resource.group_resource();
        let batch = BATCH.min(self.shared.config.watcher_buffer.max(1)) as u64;
        let started = Instant::now();
        let mut done = 0u64;
        let mut next_key = 0usize;
        'updates: while done < self.count {
            let due = if self.rate == 0 {
                self.count
            } else {
                // Behind schedule (a slow watcher, a busy machine): catch up in batches.
                let elapsed = started.elapsed().as_secs_f64();
                ((elapsed * self.rate as f64) as u64 + 1).min(self.count)
            };
            if done >= due {
                let at = started + Duration::from_secs_f64(done as f64 / self.rate as f64);
                tokio::time::sleep_until(at.into()).await;
                continue;
            }
            let end = due.min(done + batch);
            self.wait_for_watch_room(&group_resource, (end - done) as usize)
                .await;
            while done < end {
                let mut missing = 0;
                loop {
                    let key = &self.keys[next_key % self.keys.len()];
                    next_key += 1;
                    let mut store = self.shared.store.lock();
                    if stamp(&mut store, &group_resource, key) {
                        self.shared.publish_revision(store.resource_version());
                        break;
                    }
                    missing += 1;
                    if missing >= self.keys.len() {
                        tracing::warn!(
                            resource = %group_resource,
                            done,
                            "every object a bench update was rotating over is gone; stopping early"
                        );
                        break 'updates;
                    }
                }
                done += 1;
            }
            tokio::task::yield_now().await;
        }
        let created = {
            let mut store = self.shared.store.lock();
            let created = self.sentinel.create(&mut store, &self.resource);
            self.shared.publish_revision(store.resource_version());
            created
        };
        match created {
            Ok(_) => tracing::debug!(
                resource = %group_resource,
                updates = done,
                seconds = started.elapsed().as_secs_f64(),
                sentinel = %self.sentinel.key(),
                "bench update done"
            ),
            Err(error) => tracing::error!(
                sentinel = %self.sentinel.key(),
                message = %error.message,
                "could not create a bench sentinel"
            ),
        }
    }

    async fn wait_for_watch_room(&self, group_resource: &str, needed: usize) {
        let give_up = Instant::now() + WATCH_ROOM_PATIENCE;
        loop {
            let room = self.shared.store.lock().watch_room(group_resource);
            if room.is_none_or(|room| room >= needed) {
                return;
            }
            if Instant::now() >= give_up {
                tracing::warn!(
                    resource = %group_resource,
                    "a watcher made no room for {WATCH_ROOM_PATIENCE:?}; writing past it"
                );
                return;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
}

/// `POST /admin/bench/relist`.
pub(crate) async fn relist(
    shared: &Arc<Shared>,
    query: &HashMap<String, String>,
) -> Result<Response<ResponseBody>, ApiError> {
    let resource = bench_resource(shared, query)?;
    let fraction = fraction_param(query)?;
    let step = ((1.0 / fraction).round() as usize).max(1);
    let sentinel = Sentinel::next(shared);
    let shared = shared.clone();
    // Thousands of writes under the store's lock: off the runtime's workers.
    let answer = tokio::task::spawn_blocking(move || {
        relist_now(&shared, &resource, step, &sentinel).map(|(updated, deleted)| {
            json!({ "ok": true, "sentinel": sentinel.key(), "updated": updated, "deleted": deleted })
        })
    })
    .await
    .map_err(|e| ApiError::new(500, "InternalError", format!("the relist failed: {e}")))??;
    Ok(ok(&answer))
}

/// The relist itself, all under one lock so no watch can open in between: the watches opened
/// before never see a change, and compaction sends every resume from before to 410.
fn relist_now(
    shared: &Shared,
    resource: &ResourceType,
    step: usize,
    sentinel: &Sentinel,
) -> Result<(usize, usize), ApiError> {
    let group_resource = resource.group_resource();
    let mut store = shared.store.lock();
    store.close_watchers();
    let chosen: Vec<String> = store
        .current(&group_resource)
        .map(|(key, _)| key)
        .filter(|key| !is_sentinel(key))
        .step_by(step)
        .map(str::to_owned)
        .collect();
    let (mut updated, mut deleted) = (0, 0);
    for (i, key) in chosen.iter().enumerate() {
        if i % 2 == 0 {
            stamp(&mut store, &group_resource, key);
            updated += 1;
        } else {
            store.commit(&group_resource, key, None);
            deleted += 1;
        }
    }
    let created = sentinel.create(&mut store, resource);
    store.compact_all();
    shared.publish_revision(store.resource_version());
    created.map(|_| (updated, deleted))
}

/// `GET /admin/bench/checksum`.
pub(crate) fn server_checksum(
    shared: &Shared,
    query: &HashMap<String, String>,
) -> Result<Response<ResponseBody>, ApiError> {
    let resource = bench_resource(shared, query)?;
    let (count, hash) = {
        let store = shared.store.lock();
        let mut hash = Fnv1a::new();
        let mut count = 0u64;
        // The store keeps objects in key order already: no sort, no copies, and the lock is
        // held for one walk, so the revision is formatted without an allocation per object.
        let mut digits = [0u8; 20];
        for (key, obj) in store.current(&resource.group_resource()) {
            hash.object(key, decimal(obj.rv, &mut digits));
            count += 1;
        }
        (count, hash)
    };
    Ok(ok(&json!({ "count": count, "checksum": hash.hex() })))
}

/// `GET /admin/content-types`.
pub(crate) fn content_types(shared: &Shared) -> Response<ResponseBody> {
    let body = serde_json::to_vec(&*shared.content_types.lock()).unwrap_or_default();
    body_response(200, "application/json", Bytes::from(body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_matches_to_string() {
        let mut digits = [0u8; 20];
        for n in [0, 7, 10, 1_234_567, u64::MAX] {
            assert_eq!(decimal(n, &mut digits), n.to_string().as_bytes());
        }
    }

    #[test]
    fn sentinels_are_recognised_by_name_alone() {
        assert!(is_sentinel("ns-0/bench-sentinel-3"));
        assert!(is_sentinel("bench-sentinel-1"));
        assert!(!is_sentinel("ns-0/pod-1"));
        assert!(!is_sentinel("bench-sentinel-ns/pod-1"));
    }
}
