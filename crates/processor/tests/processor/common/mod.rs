//! Helpers shared by the processor's integration tests.

use std::{
    sync::{Arc, Condvar, Mutex},
    time::Duration,
};

use kinformer_processor::{AddKind, ObjectOrTombstone, ResourceEventHandler, SharedProcessor};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// How long a test waits for a handler thread before failing: generous, because two cores are
/// shared with other builds; a passing test never waits this long.
pub(crate) const PATIENCE: Duration = Duration::from_secs(20);

/// Records every call as a line such as `add pod1 initial`, `update pod1 -> pod1`,
/// `delete pod1`, and lets the test block until a number of lines has arrived.
#[derive(Clone, Default)]
pub(crate) struct Recorder {
    shared: Arc<(Mutex<Vec<String>>, Condvar)>,
}

impl Recorder {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    pub(crate) fn push(&self, line: String) {
        let (lines, arrived) = &*self.shared;
        lines.lock().expect("recorder poisoned").push(line);
        arrived.notify_all();
    }

    pub(crate) fn lines(&self) -> Vec<String> {
        self.shared.0.lock().expect("recorder poisoned").clone()
    }

    pub(crate) fn clear(&self) {
        self.shared.0.lock().expect("recorder poisoned").clear();
    }

    /// Blocks the calling thread (handler threads need no runtime) until `count` lines exist.
    pub(crate) fn wait_for(&self, count: usize) -> Vec<String> {
        let (lines, arrived) = &*self.shared;
        let guard = lines.lock().expect("recorder poisoned");
        let (guard, timeout) = arrived
            .wait_timeout_while(guard, PATIENCE, |lines| lines.len() < count)
            .expect("recorder poisoned");
        assert!(
            !timeout.timed_out(),
            "waited for {count} events, got {}: {:?}",
            guard.len(),
            *guard
        );
        guard.clone()
    }
}

impl ResourceEventHandler<String> for Recorder {
    fn on_add(&mut self, obj: Arc<String>, kind: AddKind) {
        let suffix = if kind.is_initial_list() {
            " initial"
        } else {
            ""
        };
        self.push(format!("add {obj}{suffix}"));
    }

    fn on_update(&mut self, old: Arc<String>, new: Arc<String>) {
        self.push(format!("update {old} -> {new}"));
    }

    fn on_delete(&mut self, obj: ObjectOrTombstone<String>) {
        let tombstone = if obj.is_tombstone() { " tombstone" } else { "" };
        self.push(format!("delete {}{tombstone}", obj.object()));
    }
}

/// A door handler threads wait at until the test opens it; counts who arrived.
#[derive(Clone, Default)]
pub(crate) struct Gate {
    shared: Arc<(Mutex<GateState>, Condvar)>,
}

#[derive(Default)]
struct GateState {
    open: bool,
    arrivals: usize,
}

impl Gate {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Blocks until the gate opens.
    pub(crate) fn pass(&self) {
        let (state, changed) = &*self.shared;
        let mut state = state.lock().expect("gate poisoned");
        state.arrivals += 1;
        changed.notify_all();
        while !state.open {
            state = changed.wait(state).expect("gate poisoned");
        }
    }

    pub(crate) fn open(&self) {
        let (state, changed) = &*self.shared;
        state.lock().expect("gate poisoned").open = true;
        changed.notify_all();
    }

    /// Blocks until `count` threads have reached the gate.
    pub(crate) fn wait_for_arrivals(&self, count: usize) {
        let (state, changed) = &*self.shared;
        let state = state.lock().expect("gate poisoned");
        let (_state, timeout) = changed
            .wait_timeout_while(state, PATIENCE, |state| state.arrivals < count)
            .expect("gate poisoned");
        assert!(!timeout.timed_out(), "nobody reached the gate");
    }
}

pub(crate) fn obj(name: &str) -> Arc<String> {
    Arc::new(name.to_owned())
}

/// Spawns `processor.run` and returns once it is running, with the token that stops it.
pub(crate) async fn start(
    processor: &SharedProcessor<String>,
) -> (
    CancellationToken,
    JoinHandle<kinformer_processor::Result<()>>,
) {
    let token = CancellationToken::new();
    let running = tokio::spawn({
        let (processor, token) = (processor.clone(), token.clone());
        async move { processor.run(token).await }
    });
    while !processor.is_running() {
        tokio::task::yield_now().await;
    }
    (token, running)
}

/// Cancels the processor and waits for `run` to return.
pub(crate) async fn stop(
    token: CancellationToken,
    running: JoinHandle<kinformer_processor::Result<()>>,
) {
    token.cancel();
    running
        .await
        .expect("the processor task panicked")
        .expect("the processor failed");
}

/// Polls `condition` until it holds; fails the test after [`PATIENCE`]. For state another
/// thread changes without a signal a test can await.
pub(crate) async fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !condition() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "gave up waiting: {what}"
        );
        tokio::time::sleep(Duration::from_millis(2)).await; // polling: nothing to await
    }
}
