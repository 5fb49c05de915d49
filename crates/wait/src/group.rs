use std::future::Future;

use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::Error;
use crate::panic::catch_panic;

/// Starts tasks and waits for all of them: apimachinery's `wait.Group`, on a tokio
/// [`JoinSet`].
///
/// Every task runs under [`catch_panic`], so a panicking task is logged and reported by
/// [`wait`](Group::wait) instead of being lost. Unlike Go's group, dropping a `Group` without
/// waiting aborts the tasks still running, so no task outlives its owner by accident.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let mut group = kinformer_wait::Group::new();
/// group.spawn("fine", async {});
/// group.spawn("broken", async { panic!("bad object") });
/// let panics = group.wait().await;
/// assert_eq!(panics.len(), 1);
/// # }
/// ```
#[doc(alias = "wait.Group")]
#[derive(Debug, Default)]
pub struct Group {
    tasks: JoinSet<Result<(), Error>>,
}

impl Group {
    /// An empty group.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Spawns `future` on the current tokio runtime as a member of the group; `name` labels
    /// it in the log if it panics.
    ///
    /// # Panics
    ///
    /// If called outside a tokio runtime.
    #[doc(alias = "Start")]
    pub fn spawn<F>(&mut self, name: impl Into<String>, future: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let name = name.into();
        self.tasks
            .spawn(async move { catch_panic(&name, future).await });
    }

    /// Spawns the future `f` builds from a clone of `token`, for tasks that should stop when
    /// the token is cancelled (apimachinery's `StartWithContext`).
    ///
    /// # Panics
    ///
    /// If called outside a tokio runtime.
    #[doc(alias = "StartWithContext")]
    #[doc(alias = "StartWithChannel")]
    pub fn spawn_with_token<F, Fut>(
        &mut self,
        name: impl Into<String>,
        token: &CancellationToken,
        f: F,
    ) where
        F: FnOnce(CancellationToken) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.spawn(name, f(token.clone()));
    }

    /// How many tasks have not been waited for yet.
    #[must_use]
    pub fn len(&self) -> usize {
        self.tasks.len()
    }

    /// Whether every task has been waited for (or none was started).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    /// Waits until every task has finished and returns the panics of those that panicked (in
    /// the order they finished), empty when all finished normally.
    #[doc(alias = "Wait")]
    pub async fn wait(mut self) -> Vec<Error> {
        let mut panics = Vec::new();
        while let Some(joined) = self.tasks.join_next().await {
            match joined {
                Ok(Ok(())) => {}
                Ok(Err(panicked)) => panics.push(panicked),
                // Tasks are never aborted while the group is alive and panics are caught inside
                // them, so this is the runtime shutting down under us: nothing left to wait for.
                Err(_shutdown) => {}
            }
        }
        panics
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::Duration;

    use tokio::time::{Instant, sleep};

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn wait_returns_once_every_task_has_finished() {
        let finished = Arc::new(AtomicU32::new(0));
        let mut group = Group::new();
        for seconds in [3, 1, 2] {
            let finished = Arc::clone(&finished);
            group.spawn(format!("sleeper {seconds}"), async move {
                sleep(Duration::from_secs(seconds)).await;
                finished.fetch_add(1, Ordering::SeqCst);
            });
        }
        assert_eq!(group.len(), 3);
        let start = Instant::now();
        let panics = group.wait().await;
        assert!(panics.is_empty());
        assert_eq!(finished.load(Ordering::SeqCst), 3);
        assert_eq!(start.elapsed(), Duration::from_secs(3));
    }

    #[tokio::test(start_paused = true)]
    async fn wait_reports_each_panicking_task_by_name() {
        let mut group = Group::new();
        group.spawn("calm", async {});
        group.spawn("angry", async { panic!("no more") });
        let panics = group.wait().await;
        assert_eq!(panics.len(), 1);
        assert_eq!(panics[0].to_string(), "angry panicked: no more");
    }

    #[tokio::test(start_paused = true)]
    async fn tasks_started_with_a_token_stop_when_it_is_cancelled() {
        let token = CancellationToken::new();
        let mut group = Group::new();
        for name in ["first", "second"] {
            group.spawn_with_token(name, &token, |token| async move {
                token.cancelled().await;
            });
        }
        let canceller = token.clone();
        tokio::spawn(async move {
            sleep(Duration::from_secs(5)).await;
            canceller.cancel();
        });
        let start = Instant::now();
        assert!(group.wait().await.is_empty());
        assert_eq!(start.elapsed(), Duration::from_secs(5));
    }
}
