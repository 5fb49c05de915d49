//! Leader election across processes, against a real kube-apiserver (`cargo xtask e2e`) and
//! against kinformer-testing's fake server (plain `cargo test`): three candidate processes
//! compete for a Lease; the leader is killed with SIGKILL, again and again, and each time a
//! live candidate takes over. The Lease's own history proves the tenures never overlap: every
//! new holder acquired it at least a lease duration after the last renewal of the holder it
//! replaced. docs/e2e.md lists what each test proves.
//!
//! The candidates are this test binary run again with `KINFORMER_E2E_CANDIDATE` set: the same
//! test function then competes instead of orchestrating.

use crate::e2e_support;
use crate::processes;

use std::{
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use e2e_support::{BackendKind, eventually, run};
use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::{api::coordination::v1::Lease, jiff::Timestamp};
use kinformer::leaderelection::{LeaderElector, LeaderElectorOptions, LeadershipEvent};
use kube_client::{
    Api,
    api::{WatchEvent, WatchParams},
};
use processes::Children;

const CANDIDATE: &str = "KINFORMER_E2E_CANDIDATE";
const TEST: &str = "e2e_leader::the_leader_is_killed_again_and_again_and_tenures_never_overlap";
const LEASE: &str = "e2e-leader";
const LEASE_DURATION: Duration = Duration::from_secs(1);
const RENEW_DEADLINE: Duration = Duration::from_millis(700);
const RETRY_PERIOD: Duration = Duration::from_millis(200);
/// How long one hand-over may take before the test calls it lost: generous, a passing run
/// takes about the lease duration.
const PATIENCE: Duration = Duration::from_secs(30);

fn options() -> LeaderElectorOptions {
    LeaderElectorOptions::default()
        .lease_duration(LEASE_DURATION)
        .renew_deadline(RENEW_DEADLINE)
        .retry_period(RETRY_PERIOD)
}

/// A candidate process: competes until killed.
async fn candidate(identity: String) {
    let (namespace, client) = processes::child_context().await;
    loop {
        let (elector, mut events) =
            LeaderElector::new(client.clone(), &namespace, LEASE, &identity, options())
                .expect("valid options");
        let token = kinformer::wait::CancellationToken::new();
        let running = tokio::spawn({
            let elector = Arc::clone(&elector);
            async move { elector.run(token).await }
        });
        while let Some(event) = events.recv().await {
            if event == LeadershipEvent::StoppedLeading {
                break;
            }
        }
        let _ = running.await;
    }
}

/// One holder's time with the Lease, from the Lease's own timestamps.
#[derive(Debug, Clone)]
struct Tenure {
    holder: String,
    acquired: Timestamp,
    last_renewed: Timestamp,
}

/// Every version of the Lease, in the order the server wrote them.
async fn record_history(leases: Api<Lease>, history: Arc<Mutex<Vec<Tenure>>>) {
    let mut version = "0".to_owned();
    loop {
        let Ok(stream) = leases.watch(&WatchParams::default(), &version).await else {
            tokio::time::sleep(Duration::from_millis(100)).await; // the server restarts
            continue;
        };
        let mut stream = stream.boxed();
        while let Ok(Some(event)) = stream.try_next().await {
            let lease = match event {
                WatchEvent::Added(lease) | WatchEvent::Modified(lease) => lease,
                WatchEvent::Bookmark(bookmark) => {
                    version = bookmark.metadata.resource_version;
                    continue;
                }
                WatchEvent::Error(_) => {
                    version = "0".to_owned();
                    break;
                }
                WatchEvent::Deleted(_) => continue,
            };
            version = lease.metadata.resource_version.clone().unwrap_or_default();
            if lease.metadata.name.as_deref() != Some(LEASE) {
                continue;
            }
            let spec = lease.spec.unwrap_or_default();
            let (Some(holder), Some(acquired), Some(renewed)) =
                (spec.holder_identity, spec.acquire_time, spec.renew_time)
            else {
                continue;
            };
            let mut history = history.lock().unwrap_or_else(PoisonError::into_inner);
            match history.last_mut() {
                Some(tenure) if tenure.holder == holder && tenure.acquired == acquired.0 => {
                    tenure.last_renewed = tenure.last_renewed.max(renewed.0);
                }
                _ => history.push(Tenure {
                    holder,
                    acquired: acquired.0,
                    last_renewed: renewed.0,
                }),
            }
        }
    }
}

#[tokio::test]
#[allow(
    clippy::print_stderr,
    reason = "the hand-over figures docs/e2e.md quotes"
)]
async fn the_leader_is_killed_again_and_again_and_tenures_never_overlap() {
    if let Ok(identity) = std::env::var(CANDIDATE) {
        return candidate(identity).await;
    }
    run("leader", |ctx| async move {
        // The 50 kills on a real API server; fewer on the fake, which proves the same
        // in `cargo test` without a minute of waiting.
        let kills = if ctx.backend.kind() == BackendKind::Fake {
            8
        } else {
            50
        };
        let leases: Api<Lease> = Api::namespaced(ctx.client(), &ctx.namespace);
        let history = Arc::new(Mutex::new(Vec::new()));
        let recorder = tokio::spawn(record_history(leases.clone(), Arc::clone(&history)));
        let kubeconfig = ctx.backend.kubeconfig_file();
        let mut candidates = Children::new(
            TEST,
            CANDIDATE,
            &ctx.namespace,
            kubeconfig.path(),
            Vec::new(),
        );
        let mut started = 0;
        let mut spawn = |candidates: &mut Children| {
            started += 1;
            candidates.spawn(&format!("candidate-{started}"));
        };
        for _ in 0..3 {
            spawn(&mut candidates);
        }
        let mut killed = Vec::new();
        for _ in 0..kills {
            let leader = live_holder(&leases, &candidates, &killed).await;
            candidates.kill(&leader);
            killed.push(leader);
            spawn(&mut candidates);
        }
        live_holder(&leases, &candidates, &killed).await;
        drop(candidates);
        recorder.abort();

        let tenures = history
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        assert!(
            tenures.len() > kills,
            "one tenure per kill and the last: {tenures:#?}"
        );
        let mut longest = Duration::ZERO;
        for pair in tenures.windows(2) {
            let (before, after) = (&pair[0], &pair[1]);
            assert_ne!(before.holder, after.holder, "{pair:#?}");
            let gap = after.acquired.duration_since(before.last_renewed);
            let gap = Duration::try_from(gap).unwrap_or_default();
            // The new holder waited out the lease it last saw renewed; its clock and the old
            // holder's are this machine's (or the cluster's), so the gap is at least the lease
            // duration, less the time between computing a renewal's timestamp and writing it.
            assert!(
                gap + Duration::from_millis(250) >= LEASE_DURATION,
                "{} acquired {gap:?} after {}'s last renewal, within its lease: {pair:#?}",
                after.holder,
                before.holder
            );
            longest = longest.max(gap);
        }
        eprintln!(
            "e2e_leader: {kills} SIGKILLs, {} tenures, none overlapping; the longest hand-over \
             {longest:?} (lease {LEASE_DURATION:?}, retry period {RETRY_PERIOD:?})",
            tenures.len()
        );
    })
    .await;
}

/// Waits until a live candidate, not one killed, holds the Lease; returns its identity.
async fn live_holder(leases: &Api<Lease>, candidates: &Children, killed: &[String]) -> String {
    let holder = Arc::new(Mutex::new(String::new()));
    eventually("a live candidate holds the lease", PATIENCE, || {
        let (leases, holder) = (leases.clone(), Arc::clone(&holder));
        let live = candidates.identities();
        let killed = killed.to_vec();
        async move {
            let lease = leases
                .get_opt(LEASE)
                .await
                .map_err(|error| error.to_string())?
                .ok_or("no lease yet")?;
            let current = lease
                .spec
                .and_then(|spec| spec.holder_identity)
                .unwrap_or_default();
            if killed.contains(&current) || !live.contains(&current) {
                return Err(format!("held by {current:?}, not a live candidate"));
            }
            *holder.lock().unwrap_or_else(PoisonError::into_inner) = current;
            Ok(())
        }
    })
    .await;
    let holder = holder
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    assert!(candidates.identities().contains(&holder));
    holder
}
