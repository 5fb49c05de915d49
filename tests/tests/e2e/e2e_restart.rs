//! kube-apiserver killed and restarted under a watching informer (`cargo xtask e2e --local` and
//! `--kind`, where the test kills and starts it itself through kinformer-controlplane, which
//! finds it through `KINFORMER_E2E_CONTROL_PLANE` or `KINFORMER_E2E_KIND_NODE`), and the fake's
//! listener closed and reopened (`cargo xtask e2e --fake`, plain `cargo test`).
//!
//! The informer must ride out the outage as client-go's does: notice the cut watch, retry with
//! backoff rather than in a hot loop, and once the server is back converge to exactly what it
//! holds, with every change made while it was disconnected reaching its handler. A foreign
//! cluster does not let the suite kill its kube-apiserver: there the test fails saying so, and
//! `cargo xtask e2e` skips it with a line of its own.
//!
//! The test runs alone (`run_alone`): no other test uses the server while it is down.

use crate::config_maps;
use crate::e2e_support;

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use async_trait::async_trait;
use config_maps::{config_map, value_of};
use e2e_support::{Ctx, eventually, run_alone};
use k8s_openapi::api::core::v1::ConfigMap;
use kinformer::reflector::WireFormat;
use kinformer::{
    factory::{FactoryOptions, InformerRequest, SharedInformerFactory},
    informer::SharedIndexInformer,
    processor::HandlerFuncs,
    reflector::{
        Error as ReflectorError, KubeListerWatcher, ListOptions, ListPage, ListSink, ListerWatcher,
        Result as ReflectorResult, WatchStream,
    },
    store::ObjectOrTombstone,
};
use kube_client::{
    Api, ResourceExt as _,
    api::{DeleteParams, ListParams, PostParams},
};

/// The longest the test waits for the informer to catch up with the server.
const CONVERGE: Duration = Duration::from_secs(30);
/// How long the server stays down. The reflector backs off 0.8 s, doubling, with up to as much
/// again in jitter: a few attempts fit in this window, and a hot loop would make hundreds.
const OUTAGE: Duration = Duration::from_secs(5);
/// List and watch requests allowed while the server is down (the backoff allows about four).
const MAX_ATTEMPTS_WHILE_DOWN: usize = 8;
/// List and watch requests allowed from the kill until the cache has converged again.
const MAX_ATTEMPTS_IN_ALL: usize = 20;
/// How long the informer is watched once converged, for a loop that only starts afterwards.
const SETTLED: Duration = Duration::from_secs(3);

/// The ConfigMap kube-controller-manager puts in every namespace of a full cluster; the fake
/// and the local control plane have none. Views leave it out.
const ROOT_CA: &str = "kube-root-ca.crt";

/// One list or watch request of the informer's reflector.
#[derive(Debug, Clone, Copy)]
struct Attempt {
    at: Instant,
    what: &'static str,
    /// `None` while in flight.
    succeeded: Option<bool>,
}

/// Every list and watch request the informer's reflector started.
#[derive(Debug, Default)]
struct Attempts(Mutex<Vec<Attempt>>);

impl Attempts {
    /// Records a request starting now; its index, for [`done`](Self::done).
    fn start(&self, what: &'static str) -> usize {
        let mut attempts = self.0.lock().expect("never poisoned");
        attempts.push(Attempt {
            at: Instant::now(),
            what,
            succeeded: None,
        });
        attempts.len() - 1
    }

    fn done(&self, index: usize, succeeded: bool) {
        self.0.lock().expect("never poisoned")[index].succeeded = Some(succeeded);
    }

    /// The requests started in `[from, to)`, as `list` or `watch`.
    fn between(&self, from: Instant, to: Instant) -> Vec<&'static str> {
        self.0
            .lock()
            .expect("never poisoned")
            .iter()
            .filter(|attempt| attempt.at >= from && attempt.at < to)
            .map(|attempt| attempt.what)
            .collect()
    }

    /// Whether a request started after `from` and before `to` has succeeded: the informer was
    /// connected again.
    fn reconnected(&self, from: Instant, to: Instant) -> bool {
        self.0
            .lock()
            .expect("never poisoned")
            .iter()
            .any(|attempt| attempt.at >= from && attempt.at < to && attempt.succeeded == Some(true))
    }
}

/// Counts the requests of the [`ListerWatcher`] it wraps: on the fake and on kube-apiserver
/// alike, the requests refused while the server is down never reach it, so only the client
/// can count them.
struct Counted<L> {
    inner: L,
    attempts: Arc<Attempts>,
}

#[async_trait]
impl<K, L> ListerWatcher<K> for Counted<L>
where
    K: Send + Sync + 'static,
    L: ListerWatcher<K>,
{
    async fn list(
        &self,
        options: ListOptions,
        sink: &mut dyn ListSink<K>,
    ) -> ReflectorResult<ListPage> {
        let attempt = self.attempts.start("list");
        let page = self.inner.list(options, sink).await;
        self.attempts.done(attempt, page.is_ok());
        page
    }

    async fn watch(&self, options: ListOptions) -> ReflectorResult<WatchStream<K>> {
        let attempt = self.attempts.start("watch");
        let stream = self.inner.watch(options).await;
        self.attempts.done(attempt, stream.is_ok());
        stream
    }

    fn type_description(&self) -> String {
        self.inner.type_description()
    }

    fn namespace(&self) -> Option<String> {
        self.inner.namespace()
    }
}

/// What the handler believes the server holds (`name -> value@resourceVersion`), built from
/// nothing but its notifications, and a line per notification.
#[derive(Debug, Default, Clone)]
struct View {
    objects: Arc<Mutex<BTreeMap<String, String>>>,
    log: Arc<Mutex<Vec<String>>>,
}

impl View {
    fn handler(&self) -> HandlerFuncs<ConfigMap> {
        let (added, updated, deleted) = (self.clone(), self.clone(), self.clone());
        HandlerFuncs::new()
            .add_func(move |object: Arc<ConfigMap>, initial| {
                let verb = if initial.is_initial_list() {
                    "initial"
                } else {
                    "add"
                };
                added.note(format!(
                    "{verb} {} {}",
                    object.name_any(),
                    value_of(&object)
                ));
                added.set(&object);
            })
            .update_func(move |old: Arc<ConfigMap>, new: Arc<ConfigMap>| {
                updated.note(format!(
                    "update {} {}->{}",
                    new.name_any(),
                    value_of(&old),
                    value_of(&new)
                ));
                updated.set(&new);
            })
            .delete_func(move |gone: ObjectOrTombstone<ConfigMap>| {
                let name = gone.object().name_any();
                deleted.note(match &gone {
                    ObjectOrTombstone::Object(object) => {
                        format!("delete {name} {}", value_of(object))
                    }
                    ObjectOrTombstone::Tombstone(_) => format!("tombstone {name}"),
                });
                deleted
                    .objects
                    .lock()
                    .expect("a handler never panics holding the view")
                    .remove(&name);
            })
    }

    fn set(&self, object: &ConfigMap) {
        if object.name_any() != ROOT_CA {
            self.objects
                .lock()
                .expect("a handler never panics holding the view")
                .insert(object.name_any(), versioned_value(object));
        }
    }

    fn note(&self, line: String) {
        if !line.contains(ROOT_CA) {
            self.log
                .lock()
                .expect("a handler never panics holding the log")
                .push(line);
        }
    }

    fn objects(&self) -> BTreeMap<String, String> {
        self.objects
            .lock()
            .expect("a handler never panics holding the view")
            .clone()
    }

    fn lines(&self) -> Vec<String> {
        self.log
            .lock()
            .expect("a handler never panics holding the log")
            .clone()
    }
}

fn versioned_value(config_map: &ConfigMap) -> String {
    format!(
        "{}@{}",
        value_of(config_map),
        config_map.resource_version().unwrap_or_default()
    )
}

/// Writes `value` into an existing ConfigMap, returning the stored object.
async fn set_value(api: &Api<ConfigMap>, current: &ConfigMap, value: &str) -> ConfigMap {
    let mut changed = current.clone();
    changed.data = Some(BTreeMap::from([("key".to_owned(), value.to_owned())]));
    api.replace(&current.name_any(), &PostParams::default(), &changed)
        .await
        .expect("update")
}

/// The server's ConfigMaps as `name -> value@resourceVersion`.
async fn server_view(api: &Api<ConfigMap>) -> Result<BTreeMap<String, String>, String> {
    let list = api
        .list(&ListParams::default())
        .await
        .map_err(|err| format!("listing on the server: {err}"))?;
    Ok(list
        .items
        .iter()
        .filter(|object| object.name_any() != ROOT_CA)
        .map(|object| (object.name_any(), versioned_value(object)))
        .collect())
}

/// Waits until both the informer's cache and the handler's view equal the server's list, at
/// the same resourceVersions.
async fn converges(
    what: &str,
    api: &Api<ConfigMap>,
    informer: &SharedIndexInformer<ConfigMap>,
    view: &View,
) {
    eventually(what, CONVERGE, || async move {
        let server = server_view(api).await?;
        let cached: BTreeMap<String, String> = informer
            .cache()
            .list()
            .iter()
            .filter(|object| object.name_any() != ROOT_CA)
            .map(|object| (object.name_any(), versioned_value(object)))
            .collect();
        let seen = view.objects();
        if cached != server {
            Err(format!("server {server:?}, cache {cached:?}"))
        } else if seen != server {
            Err(format!("server {server:?}, handler's view {seen:?}"))
        } else {
            Ok(())
        }
    })
    .await;
}

/// Prints what happened during the outage, for `--nocapture` (where the figures in
/// docs/e2e.md come from).
#[allow(
    clippy::print_stderr,
    reason = "the test's report goes where libtest shows it with --nocapture"
)]
fn report(summary: &str) {
    eprintln!("{summary}");
}

fn config_maps(ctx: &Ctx) -> Api<ConfigMap> {
    Api::namespaced(ctx.client(), &ctx.namespace)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_informer_converges_with_nothing_lost_and_no_hot_loop_when_kube_apiserver_is_killed_and_restarted()
 {
    run_alone("apiserver-restart", |ctx| async move {
        if let Some(why) = ctx.backend.api_server_restart_unavailable() {
            panic!("{why}");
        }
        let api = config_maps(&ctx);
        let post = PostParams::default();
        let mut created = BTreeMap::new();
        for index in 0..6 {
            let name = format!("cm-{index}");
            let object = api
                .create(&post, &config_map(&name, "v1", &[]))
                .await
                .expect("create");
            created.insert(name, object);
        }

        let attempts = Arc::new(Attempts::default());
        let errors: Arc<Mutex<Vec<(Instant, String)>>> = Arc::default();
        let factory = SharedInformerFactory::new(ctx.client(), FactoryOptions::from_env()
            .namespace(ctx.namespace.clone()));
        // The factory's own ConfigMap informer, but over a ListerWatcher that counts requests
        // (client-go's InformerFor).
        let (reported, counted, namespace) =
            (Arc::clone(&errors), Arc::clone(&attempts), ctx.namespace.clone());
        let informer = factory
            .informer_for(InformerRequest::<ConfigMap>::built_by(move |client, options| {
                SharedIndexInformer::new(
                    Counted {
                        inner: KubeListerWatcher::new(Api::<ConfigMap>::namespaced(
                            client.clone(),
                            &namespace,
                        )).wire_format(WireFormat::from_env()),
                        attempts: counted,
                    },
                    options
                        .name("configmaps")
                        .watch_error_handler(move |error: &ReflectorError| {
                            reported
                                .lock()
                                .expect("never poisoned")
                                .push((Instant::now(), error.to_string()));
                        }),
                )
            }))
            .expect("informer");
        let view = View::default();
        informer
            .add_event_handler(view.handler())
            .expect("handler");
        factory.start().expect("start");
        assert!(
            factory
                .wait_for_cache_sync(CONVERGE)
                .await
                .all_synced(),
            "the informer syncs"
        );
        // A change after sync reaches the handler through the open watch: the kill below
        // happens mid-watch.
        let cm0 = set_value(&api, &created["cm-0"], "v2").await;
        converges("before the restart", &api, &informer, &view).await;
        assert!(
            view.lines().contains(&"update cm-0 v1->v2".to_owned()),
            "{:?}",
            view.lines()
        );

        let down_at = Instant::now();
        let kill_took = ctx.backend.kill_api_server().await;
        eventually("the informer notices the outage", CONVERGE, || {
            let errors = Arc::clone(&errors);
            async move {
                let noticed = errors
                    .lock()
                    .expect("never poisoned")
                    .iter()
                    .any(|(at, _)| *at >= down_at);
                noticed
                    .then_some(())
                    .ok_or_else(|| "no list or watch error reported yet".to_owned())
            }
        })
        .await;
        // The outage lasts its full length, so the reflector backs off against a dead server.
        tokio::time::sleep_until((down_at + OUTAGE).into()).await;
        let starting_at = Instant::now();
        let while_down = attempts.between(down_at, starting_at);
        let start_took = ctx.backend.start_api_server().await;
        let up_at = Instant::now();

        // Changes the informer has not seen yet, as a rule: it is still backing off (it may
        // also have reconnected while kube-apiserver was starting; the report says which).
        // Every kind of change: creates, updates, deletes, and a delete and create under one
        // name.
        let back_before_the_writes = attempts.reconnected(down_at, Instant::now());
        for name in ["cm-6", "cm-7"] {
            api.create(&post, &config_map(name, "v1", &[]))
                .await
                .expect("create after the restart");
        }
        set_value(&api, &created["cm-1"], "v2").await;
        set_value(&api, &cm0, "v3").await;
        for name in ["cm-3", "cm-4", "cm-5"] {
            api.delete(name, &DeleteParams::default())
                .await
                .expect("delete after the restart");
        }
        api.create(&post, &config_map("cm-5", "v9", &[]))
            .await
            .expect("create cm-5 again");

        converges("after the restart", &api, &informer, &view).await;
        let converged_at = Instant::now();
        let lines = view.lines();
        let saw = |wanted: &[&str]| wanted.iter().any(|line| lines.iter().any(|l| l == line));
        for wanted in [
            &["add cm-6 v1"][..],
            &["add cm-7 v1"],
            &["update cm-1 v1->v2"],
            &["update cm-0 v2->v3"],
            // Deletions seen by a resumed watch are deletes; by a relist, tombstones.
            &["delete cm-3 v1", "tombstone cm-3"],
            &["delete cm-4 v1", "tombstone cm-4"],
            // A relist sees the new cm-5 replace the old one under the same key.
            &["add cm-5 v9", "update cm-5 v1->v9"],
        ] {
            assert!(saw(wanted), "the handler saw none of {wanted:?}: {lines:?}");
        }

        let in_all = attempts.between(down_at, converged_at);
        let while_starting = attempts.between(starting_at, up_at);
        let after_start = attempts.between(up_at, converged_at);
        let relisted = [&while_starting, &after_start]
            .iter()
            .any(|requests| requests.contains(&"list"));
        // A settled period: a reflector in a retry loop would show as requests within it.
        tokio::time::sleep(SETTLED).await;
        let settled = attempts.between(converged_at, Instant::now());
        let reported: Vec<String> = errors
            .lock()
            .expect("never poisoned")
            .iter()
            .map(|(at, error)| format!("+{:.1?} {error}", at.saturating_duration_since(down_at)))
            .collect();
        report(&format!(
            "restart: kill {kill_took:?}, down {:?} ({} requests: {while_down:?}), \
             start {start_took:?} ({while_starting:?}), reconnected before the writes: \
             {back_before_the_writes}, converged {:?} after the start ({after_start:?}), \
             relisted: {relisted}, {} requests in all, {} once settled; errors reported: {reported:#?}; the handler saw {lines:#?}",
            starting_at - down_at,
            while_down.len(),
            converged_at - up_at,
            in_all.len(),
            settled.len()
        ));
        assert!(
            !while_down.is_empty(),
            "the informer tried to reconnect while the server was down"
        );
        assert!(
            while_down.len() <= MAX_ATTEMPTS_WHILE_DOWN,
            "{} requests in {OUTAGE:?} of outage ({while_down:?}): the reconnects did not back off",
            while_down.len()
        );
        assert!(
            in_all.len() <= MAX_ATTEMPTS_IN_ALL,
            "{} requests from the kill to convergence ({in_all:?})",
            in_all.len()
        );
        // At most the watch that follows a relist; a loop that started only once the server
        // was back would show here.
        assert!(
            settled.len() <= 1,
            "{} requests once converged ({settled:?})",
            settled.len()
        );
        factory.shutdown().await;
        assert_eq!(factory.running_tasks(), 0);
    })
    .await;
}
