//! How an informer recovers, against a real kube-apiserver (`cargo xtask e2e`) and against
//! kinformer-testing's fake server (plain `cargo test`): a relist after a compaction turns the
//! deletions missed while disconnected into tombstones, and list errors reach the watch error
//! handler and are retried with backoff. Part of the informer suite (see `e2e_informer.rs`);
//! docs/e2e.md lists what each test proves.

use crate::config_maps;
use crate::e2e_support;
use crate::informers;

use std::{
    collections::BTreeMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use async_trait::async_trait;
use config_maps::config_map;
use e2e_support::{Ctx, cache_from_env, eventually, run};
use futures::StreamExt as _;
use informers::{
    CONVERGE, Log, config_maps, converges, lines, name_recorder, named, push, spawn_informer,
    stop_informer, synced_within,
};
use k8s_openapi::api::{
    core::v1::{ConfigMap, Secret},
    rbac::v1::{Role, RoleBinding},
};
use kinformer::reflector::WireFormat;
use kinformer::{
    informer::{InformerOptions, SharedIndexInformer},
    reflector::{
        Error as ReflectorError, KubeListerWatcher, ListOptions, ListPage, ListSink, ListerWatcher,
        Result as ReflectorResult, WatchStream,
    },
};
use kube_client::{
    Api,
    api::{DeleteParams, PostParams},
};
use tokio::sync::watch;

/// A [`ListerWatcher`] whose watches the test can cut and hold back, to simulate a client that
/// is disconnected while the server moves on.
struct Unpluggable<L> {
    inner: L,
    connected: watch::Sender<bool>,
    lists: AtomicUsize,
    waiting: Arc<AtomicUsize>,
}

impl<L> Unpluggable<L> {
    fn new(inner: L) -> Self {
        Self {
            inner,
            connected: watch::Sender::new(true),
            lists: AtomicUsize::new(0),
            waiting: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Ends the open watch and holds new ones back until [`plug`](Self::plug).
    fn unplug(&self) {
        self.connected.send_replace(false);
    }

    fn plug(&self) {
        self.connected.send_replace(true);
    }
}

#[async_trait]
impl<K, L> ListerWatcher<K> for Unpluggable<L>
where
    K: Send + Sync + 'static,
    L: ListerWatcher<K>,
{
    async fn list(
        &self,
        options: ListOptions,
        sink: &mut dyn ListSink<K>,
    ) -> ReflectorResult<ListPage> {
        self.lists.fetch_add(1, Ordering::SeqCst);
        self.inner.list(options, sink).await
    }

    async fn watch(&self, options: ListOptions) -> ReflectorResult<WatchStream<K>> {
        let mut connected = self.connected.subscribe();
        self.waiting.fetch_add(1, Ordering::SeqCst);
        // The sender lives in `self`, so this only ends once plugged in.
        let _ = connected.wait_for(|connected| *connected).await;
        self.waiting.fetch_sub(1, Ordering::SeqCst);
        let stream = self.inner.watch(options).await?;
        let mut unplugged = self.connected.subscribe();
        Ok(stream
            .take_until(async move {
                let _ = unplugged.wait_for(|connected| !*connected).await;
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

#[tokio::test]
async fn after_a_compaction_the_informer_relists_and_reports_deletions_missed_as_tombstones() {
    run("relist-tombstones", |ctx| async move {
        // Secrets: the local control plane serves them without a watch cache, so a compaction
        // of etcd reaches their watches (see e2e_conformance's 410 test).
        let api: Api<Secret> = Api::namespaced(ctx.client(), &ctx.namespace);
        let post = PostParams::default();
        let secret = |name: &str, step: &str| Secret {
            metadata: named(name, &[("step", step)]),
            ..Secret::default()
        };
        let mut created = Vec::new();
        for index in 0..4 {
            let name = format!("s-{index}");
            created.push(
                api.create(&post, &secret(&name, "one"))
                    .await
                    .expect("create"),
            );
        }
        let lister_watcher = Arc::new(Unpluggable::new(
            KubeListerWatcher::new(api.clone()).wire_format(WireFormat::from_env()),
        ));
        let errors = Log::default();
        let reported = errors.clone();
        let informer = SharedIndexInformer::new(
            Arc::clone(&lister_watcher),
            cache_from_env(InformerOptions::new())
                .name("secrets")
                .watch_error_handler(move |error: &ReflectorError| {
                    push(&reported, error.to_string());
                }),
        );
        let log = Log::default();
        informer
            .add_event_handler(name_recorder::<Secret>(&log))
            .expect("handler");
        let (token, running) = spawn_informer(&informer);
        assert!(
            synced_within(&informer, CONVERGE).await,
            "the informer syncs"
        );

        lister_watcher.unplug();
        eventually("the informer waits for a watch", CONVERGE, || {
            let waiting = Arc::clone(&lister_watcher.waiting);
            async move {
                (waiting.load(Ordering::SeqCst) > 0)
                    .then_some(())
                    .ok_or_else(|| "no watch held back yet".to_owned())
            }
        })
        .await;
        let lists_before = lister_watcher.lists.load(Ordering::SeqCst);

        // Three revisions past the informer's last one: a watch resuming from it then starts
        // below the compacted revision, not at it (docs/e2e.md, difference 8).
        api.delete("s-0", &DeleteParams::default())
            .await
            .expect("delete s-0");
        api.delete("s-1", &DeleteParams::default())
            .await
            .expect("delete s-1");
        let mut changed = created[2].clone();
        changed.metadata.labels = Some(BTreeMap::from([("step".to_owned(), "two".to_owned())]));
        api.replace("s-2", &post, &changed)
            .await
            .expect("update s-2");
        api.create(&post, &secret("s-4", "one"))
            .await
            .expect("create s-4");
        // s-3 is deleted and created again: the same name, a new UID.
        api.delete("s-3", &DeleteParams::default())
            .await
            .expect("delete s-3");
        let s3_again = api
            .create(&post, &secret("s-3", "again"))
            .await
            .expect("create s-3 again");
        assert_ne!(s3_again.metadata.uid, created[3].metadata.uid);
        let compacted = ctx.backend.force_compaction().await;
        lister_watcher.plug();

        converges("the cache after reconnecting", &informer, &api).await;
        // With a compaction the missed deletions can only be inferred by the relist, as
        // tombstones. Without one (kind or a foreign cluster, whose etcd is out of reach) the
        // watch cache may replay them as ordinary deletions instead; both are correct there.
        let deletion_lines = |name: &str| {
            let tombstone = format!("tombstone {name}");
            if compacted {
                vec![tombstone]
            } else {
                vec![tombstone, format!("delete {name}")]
            }
        };
        let (s0_gone, s1_gone) = (deletion_lines("s-0"), deletion_lines("s-1"));
        let s3_gone = deletion_lines("s-3");
        eventually("the handler saw every change", CONVERGE, || {
            let (log, s0_gone, s1_gone, s3_gone) = (&log, &s0_gone, &s1_gone, &s3_gone);
            async move {
                let seen = lines(log);
                let has = |wanted: &str| seen.iter().any(|line| line == wanted);
                let has_any = |wanted: &[String]| wanted.iter().any(|line| has(line));
                let deletions = seen
                    .iter()
                    .filter(|line| line.starts_with("delete ") || line.starts_with("tombstone "))
                    .count();
                // The recreated s-3 is a deletion and an add, never an update.
                if has("update s-3") {
                    return Err(format!("s-3 arrived as an update: {seen:?}"));
                }
                if has_any(s0_gone)
                    && has_any(s1_gone)
                    && has_any(s3_gone)
                    && has("update s-2")
                    && has("add s-4")
                    && has("add s-3")
                    && deletions == 3
                {
                    Ok(())
                } else {
                    Err(format!("saw {seen:?}"))
                }
            }
        })
        .await;
        let cached = informer
            .cache()
            .get_by_key(&format!("{}/s-3", ctx.namespace))
            .expect("s-3 cached");
        assert_eq!(cached.metadata.uid, s3_again.metadata.uid);
        if compacted {
            assert!(
                lister_watcher.lists.load(Ordering::SeqCst) > lists_before,
                "the informer relisted"
            );
            let reported = lines(&errors);
            assert!(
                reported.iter().any(|error| error.contains("410")),
                "the expired watch reached the error handler: {reported:?}"
            );
        }
        stop_informer(&token, running).await;
    })
    .await;
}

/// Grants the ServiceAccount `e2e-nobody` list and watch on ConfigMaps in `namespace`.
async fn grant_config_map_reads(ctx: &Ctx) {
    let role: Role = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "configmap-reader" },
        "rules": [{ "apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"] }],
    }))
    .expect("a valid Role");
    let binding: RoleBinding = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "configmap-reader" },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "configmap-reader" },
        "subjects": [{ "kind": "ServiceAccount", "name": "e2e-nobody", "namespace": ctx.namespace }],
    }))
    .expect("a valid RoleBinding");
    Api::<Role>::namespaced(ctx.client(), &ctx.namespace)
        .create(&PostParams::default(), &role)
        .await
        .expect("create Role");
    Api::<RoleBinding>::namespaced(ctx.client(), &ctx.namespace)
        .create(&PostParams::default(), &binding)
        .await
        .expect("create RoleBinding");
}

#[tokio::test]
async fn a_forbidden_list_reaches_the_watch_error_handler_and_is_retried_with_backoff() {
    run("forbidden-informer", |ctx| async move {
        let admin = config_maps(&ctx);
        admin
            .create(&PostParams::default(), &config_map("cm-0", "v1", &[]))
            .await
            .expect("create");
        let client = match ctx.backend.unprivileged_client(&ctx.namespace).await {
            Some(client) => client,
            // The fake has no RBAC (docs/e2e.md, limitation 5): it answers 403 by injection.
            None => {
                assert!(
                    ctx.backend.forbid_lists("configmaps"),
                    "only the fake lacks RBAC"
                );
                ctx.client()
            }
        };
        let failures: Arc<Mutex<Vec<(Instant, String, bool)>>> = Arc::default();
        let reported = Arc::clone(&failures);
        let informer = SharedIndexInformer::new(
            KubeListerWatcher::new(Api::<ConfigMap>::namespaced(client, &ctx.namespace))
                .wire_format(WireFormat::from_env()),
            cache_from_env(InformerOptions::new())
                .name("forbidden")
                .watch_error_handler(move |error: &ReflectorError| {
                    let forbidden = matches!(error, ReflectorError::Forbidden { .. });
                    reported.lock().expect("never poisoned").push((
                        Instant::now(),
                        error.to_string(),
                        forbidden,
                    ));
                }),
        );
        let (token, running) = spawn_informer(&informer);
        eventually("three failed lists reach the handler", CONVERGE, || {
            let failures = Arc::clone(&failures);
            async move {
                let count = failures.lock().expect("never poisoned").len();
                (count >= 3)
                    .then_some(())
                    .ok_or_else(|| format!("{count} so far"))
            }
        })
        .await;
        let seen = failures.lock().expect("never poisoned").clone();
        assert!(
            !informer.has_synced(),
            "nothing was listed, so nothing synced"
        );
        for (_, message, forbidden) in &seen {
            assert!(*forbidden, "a 403 maps to Error::Forbidden: {message}");
            assert!(
                message.starts_with("forbidden (403)") && message.contains("configmaps"),
                "the error says what was refused: {message}"
            );
        }
        // The reflector's backoff starts at 800 ms and doubles, jitter only adding to it: a hot
        // loop would report the failures milliseconds apart.
        let first_gap = seen[1].0 - seen[0].0;
        let second_gap = seen[2].0 - seen[1].0;
        assert!(first_gap >= Duration::from_millis(750), "{first_gap:?}");
        assert!(second_gap >= Duration::from_millis(1500), "{second_gap:?}");

        if !ctx.backend.clear_faults() {
            grant_config_map_reads(&ctx).await;
        }
        // The next attempt comes after up to 6.4 s of backoff, and RBAC takes a moment to see
        // a new binding, so this wait is longer than the others.
        assert!(
            synced_within(&informer, CONVERGE + CONVERGE).await,
            "the informer syncs once it may list"
        );
        converges("the cache once permitted", &informer, &admin).await;
        let total = failures.lock().expect("never poisoned").len();
        assert!(total <= 6, "{total} failures: the retries backed off");
        stop_informer(&token, running).await;
    })
    .await;
}
