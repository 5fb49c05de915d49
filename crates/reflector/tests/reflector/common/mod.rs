//! The harness the reflector's test binaries share.
//!
//! Each module of the `reflector` binary holds the tests of one behaviour (listing, watching,
//! errors and backoff, streaming lists, stopping), in two worlds:
//!
//! - [`scripted`]: a `ListerWatcher` whose answers the test scripts, on tokio's paused clock, for
//!   call sequences and timing (client-go's reflector_test.go cases);
//! - [`fake_server`]: kube-client over real HTTP against kinformer-testing's fake API server, for
//!   the faults a real cluster throws at a client.
//!
//! Both run the reflector through [`Running`].

pub(crate) mod fake_server;
pub(crate) mod scripted;

use std::{sync::Arc, time::Duration};

use kinformer_reflector::{Error, ListerWatcher, Reflector, ReflectorExit, ReflectorOptions};
use kinformer_store::{Object, Store};
use parking_lot::Mutex;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// A reflector running in a task: the errors it reported (when started with [`Running::start`])
/// and a way to stop it.
pub(crate) struct Running<K: Object, S: Store<K> + ?Sized> {
    pub(crate) reflector: Arc<Reflector<K, S>>,
    errors: Arc<Mutex<Vec<String>>>,
    token: CancellationToken,
    task: JoinHandle<ReflectorExit>,
    /// How soon after its token fires the reflector must have stopped.
    stop_within: Duration,
}

impl<K: Object, S: Store<K> + ?Sized + 'static> Running<K, S> {
    /// Runs `reflector` in a task; its options keep their own error handler.
    pub(crate) fn spawn(reflector: &Arc<Reflector<K, S>>, stop_within: Duration) -> Self {
        Self::run(
            Arc::clone(reflector),
            Arc::new(Mutex::new(Vec::new())),
            stop_within,
        )
    }

    /// Builds a reflector of `lister_watcher` into `store` and runs it, noting every error it
    /// reports as its `Debug` string.
    pub(crate) fn start(
        lister_watcher: impl ListerWatcher<K> + 'static,
        store: &Arc<S>,
        options: ReflectorOptions<K>,
        stop_within: Duration,
    ) -> Self {
        let errors = Arc::new(Mutex::new(Vec::new()));
        let options = options.watch_error_handler({
            let errors = Arc::clone(&errors);
            move |error: &Error| errors.lock().push(format!("{error:?}"))
        });
        let reflector = Arc::new(Reflector::new(lister_watcher, Arc::clone(store), options));
        Self::run(reflector, errors, stop_within)
    }

    fn run(
        reflector: Arc<Reflector<K, S>>,
        errors: Arc<Mutex<Vec<String>>>,
        stop_within: Duration,
    ) -> Self {
        let token = CancellationToken::new();
        let task = tokio::spawn({
            let (reflector, token) = (Arc::clone(&reflector), token.clone());
            async move { reflector.run(token).await }
        });
        Self {
            reflector,
            errors,
            token,
            task,
            stop_within,
        }
    }

    /// The errors reported so far, as `Debug` strings.
    pub(crate) fn errors(&self) -> Vec<String> {
        self.errors.lock().clone()
    }

    /// Whether an error of this variant (its `Debug` prefix) was reported.
    pub(crate) fn saw(&self, variant: &str) -> bool {
        self.errors().iter().any(|error| error.starts_with(variant))
    }

    /// Whether the reflector has returned.
    pub(crate) fn is_finished(&self) -> bool {
        self.task.is_finished()
    }

    /// Fires the token and waits for the reflector to return; how it returned.
    pub(crate) async fn stop(self) -> ReflectorExit {
        self.token.cancel();
        tokio::time::timeout(self.stop_within, self.task)
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "the reflector stops within {:?} of its token firing",
                    self.stop_within
                )
            })
            .expect("the reflector task does not panic")
    }

    /// Waits, at most `within`, for the reflector to return by itself (its token never fires);
    /// how it returned. Call it once, and not before [`stop`](Self::stop).
    pub(crate) async fn exits_within(&mut self, within: Duration) -> ReflectorExit {
        tokio::time::timeout(within, &mut self.task)
            .await
            .unwrap_or_else(|_| panic!("the reflector stops by itself within {within:?}"))
            .expect("the reflector task does not panic")
    }
}
