//! Leader election over kube-client against kinformer-testing's API server, which serves Leases
//! with resourceVersion conflicts: one of several candidates leads; a crashed leader is
//! replaced once its lease expires, never before; a leader that is cancelled with
//! `release_on_cancel` hands over at the next attempt; the options refuse durations that
//! cannot keep one leader at a time.
//!
//! Durations are short and real: each test awaits the events it expects (bounded by
//! `PATIENCE`, which a passing test never reaches) and asserts only orders, never timings.

use std::{collections::VecDeque, sync::Arc, time::Duration};

use k8s_openapi::api::coordination::v1::Lease;
use kinformer_leaderelection::{
    Error, LeaderElector, LeaderElectorOptions, LeadershipEvent, LeadershipEvents,
};
use kinformer_testing::FakeApiServer;
use kube_client::{Api, Client};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

const PATIENCE: Duration = Duration::from_secs(20);
const NAMESPACE: &str = "default";
const LEASE: &str = "controller";

fn quick() -> LeaderElectorOptions {
    LeaderElectorOptions::default()
        // A leader loses its lease only after 2 s without a renewal: short enough for a quick
        // test, long enough that a loaded machine's stalls do not cost it the lease.
        .lease_duration(Duration::from_secs(3))
        .renew_deadline(Duration::from_secs(2))
        .retry_period(Duration::from_millis(100))
}

struct Candidate {
    identity: String,
    elector: Arc<LeaderElector>,
    events: LeadershipEvents,
    /// Events received while waiting for another (by `leader_of`), not yet looked at.
    backlog: VecDeque<LeadershipEvent>,
    token: CancellationToken,
    running: JoinHandle<()>,
}

impl Candidate {
    fn start(client: &Client, identity: &str, options: LeaderElectorOptions) -> Self {
        let (elector, events) =
            LeaderElector::new(client.clone(), NAMESPACE, LEASE, identity, options)
                .expect("valid options");
        let token = CancellationToken::new();
        let running = tokio::spawn({
            let (elector, token) = (Arc::clone(&elector), token.clone());
            async move { elector.run(token).await }
        });
        Self {
            identity: identity.to_owned(),
            elector,
            events,
            backlog: VecDeque::new(),
            token,
            running,
        }
    }

    /// Waits for `expected`, skipping other events.
    async fn until(&mut self, expected: &LeadershipEvent) {
        if let Some(at) = self.backlog.iter().position(|event| event == expected) {
            self.backlog.drain(..=at);
            return;
        }
        self.backlog.clear();
        let found = tokio::time::timeout(PATIENCE, async {
            while let Some(event) = self.events.recv().await {
                if &event == expected {
                    return true;
                }
            }
            false
        })
        .await;
        assert_eq!(found, Ok(true), "{} never saw {expected:?}", self.identity);
    }
}

async fn holder(client: &Client) -> (Option<String>, i32) {
    let lease = Api::<Lease>::namespaced(client.clone(), NAMESPACE)
        .get(LEASE)
        .await
        .expect("the lease exists");
    let spec = lease.spec.unwrap_or_default();
    (
        spec.holder_identity.filter(|holder| !holder.is_empty()),
        spec.lease_transitions.unwrap_or(0),
    )
}

/// Which of two candidates leads; the other must not. Other events wait in the backlogs.
async fn leader_of(a: &mut Candidate, b: &mut Candidate) -> bool {
    tokio::time::timeout(PATIENCE, async {
        loop {
            tokio::select! {
                Some(event) = a.events.recv() => match event {
                    LeadershipEvent::StartedLeading => return true,
                    event => a.backlog.push_back(event),
                },
                Some(event) = b.events.recv() => match event {
                    LeadershipEvent::StartedLeading => return false,
                    event => b.backlog.push_back(event),
                },
            }
        }
    })
    .await
    .expect("someone leads")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_of_two_candidates_leads_and_a_crashed_leader_is_replaced_after_its_lease() {
    let server = FakeApiServer::start()
        .await
        .expect("the fake server starts");
    let client = server.client().expect("a client");
    let mut a = Candidate::start(&client, "a", quick());
    let mut b = Candidate::start(&client, "b", quick());
    let a_leads = leader_of(&mut a, &mut b).await;
    let (mut leader, mut follower) = if a_leads { (a, b) } else { (b, a) };
    let leader_name = leader.identity.clone();
    assert!(leader.elector.is_leader());
    assert!(!follower.elector.is_leader(), "two leaders at once");
    assert_eq!(
        holder(&client).await.0.as_deref(),
        Some(leader_name.as_str())
    );
    // The follower is told who leads, and does not lead itself.
    follower
        .until(&LeadershipEvent::NewLeader(leader_name.clone()))
        .await;
    assert!(!follower.elector.is_leader());

    // The leader crashes: its task is gone without releasing anything, so the follower takes
    // over only once the lease it last saw change has gone unrenewed for its whole duration.
    leader.running.abort();
    follower.until(&LeadershipEvent::StartedLeading).await;
    let (holder_now, transitions) = holder(&client).await;
    assert_eq!(holder_now.as_deref(), Some(follower.identity.as_str()));
    assert_eq!(transitions, 1, "one change of holder");
    // A zero timeout still polls once: an event waiting would be received.
    assert!(
        tokio::time::timeout(Duration::ZERO, leader.events.recv())
            .await
            .is_err(),
        "the crashed leader said nothing more"
    );
    follower.token.cancel();
    follower.until(&LeadershipEvent::StoppedLeading).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_that_releases_on_cancel_hands_over_and_stops_leading() {
    let server = FakeApiServer::start()
        .await
        .expect("the fake server starts");
    let client = server.client().expect("a client");
    // Long leases: the hand-over cannot be the lease expiring.
    let patient = LeaderElectorOptions::default()
        .lease_duration(Duration::from_secs(60))
        .renew_deadline(Duration::from_secs(40))
        .retry_period(Duration::from_millis(100))
        .release_on_cancel(true);
    let mut first = Candidate::start(&client, "first", patient.clone());
    first.until(&LeadershipEvent::StartedLeading).await;
    let mut second = Candidate::start(&client, "second", patient);
    second
        .until(&LeadershipEvent::NewLeader("first".to_owned()))
        .await;

    first.token.cancel();
    first.until(&LeadershipEvent::StoppedLeading).await;
    first.running.await.expect("the elector does not panic");
    second.until(&LeadershipEvent::StartedLeading).await;
    assert_eq!(holder(&client).await, (Some("second".to_owned()), 1));
    second.token.cancel();
    second.until(&LeadershipEvent::StoppedLeading).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_that_cannot_renew_stops_leading_within_its_deadline() {
    let server = FakeApiServer::start()
        .await
        .expect("the fake server starts");
    let client = server.client().expect("a client");
    let mut leader = Candidate::start(&client, "alone", quick());
    leader.until(&LeadershipEvent::StartedLeading).await;
    // Someone else takes the lease by force (an operator, a split brain): every renewal now
    // conflicts or finds another holder.
    let leases = Api::<Lease>::namespaced(client.clone(), NAMESPACE);
    // The leader renews as we write: a conflict means it renewed first, so read and try again.
    let taken = tokio::time::timeout(PATIENCE, async {
        loop {
            let mut lease = leases.get(LEASE).await.expect("the lease exists");
            if let Some(spec) = lease.spec.as_mut() {
                spec.holder_identity = Some("intruder".to_owned());
                spec.lease_duration_seconds = Some(3600);
            }
            match leases.replace(LEASE, &Default::default(), &lease).await {
                Ok(_) => return,
                Err(kube_client::Error::Api(status)) if status.code == 409 => {}
                Err(error) => panic!("taking the lease: {error}"),
            }
        }
    })
    .await;
    assert!(taken.is_ok(), "the lease could not be taken");
    leader.until(&LeadershipEvent::StoppedLeading).await;
    assert!(!leader.elector.is_leader());
    leader
        .running
        .await
        .expect("the elector returns after losing");
}

#[test]
fn options_that_cannot_keep_one_leader_are_refused() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let _entered = runtime.enter();
    let client = Client::try_from(kube_client::Config::new(
        "http://127.0.0.1:9".parse().expect("a URL"),
    ))
    .expect("a client");
    let refused = |options: LeaderElectorOptions| {
        LeaderElector::new(client.clone(), NAMESPACE, LEASE, "me", options)
            .expect_err("refused")
            .to_string()
    };
    let s = Duration::from_secs;
    assert!(
        refused(LeaderElectorOptions::default().renew_deadline(s(15)))
            .contains("longer than the renew deadline")
    );
    assert!(refused(LeaderElectorOptions::default().retry_period(s(9))).contains("1.2 times"));
    assert!(matches!(
        LeaderElector::new(
            client.clone(),
            NAMESPACE,
            LEASE,
            "",
            LeaderElectorOptions::default()
        ),
        Err(Error::InvalidName {
            what: "identity",
            ..
        })
    ));
    assert!(
        LeaderElector::new(
            client,
            NAMESPACE,
            LEASE,
            "me",
            LeaderElectorOptions::default()
        )
        .is_ok()
    );
}
