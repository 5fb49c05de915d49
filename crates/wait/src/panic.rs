use std::any::Any;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};

use futures::FutureExt;

use crate::Error;

/// Placeholder message for panics whose payload is neither `&str` nor `String`
/// (`std::panic::panic_any` with some other type).
const NON_STRING_PAYLOAD: &str = "<non-string panic payload>";

/// Drives `future` to completion, catching a panic instead of letting it unwind into the
/// runtime.
///
/// A panic is logged through `tracing` at error level with `name` and the panic message, and
/// comes back as [`Error::Panicked`]. This is client-go's `HandleCrash` without the crash:
/// Go re-panics by default (`ReallyCrash = true`) because a goroutine panic kills the process
/// anyway; a tokio task's panic only kills the task and is easy to miss, so we log it, return
/// it, and let the caller decide (a loop keeps going, a spawner reports it).
///
/// The process's panic hook still runs first (by default it prints the panic to stderr).
///
/// # Errors
///
/// [`Error::Panicked`] if the future panicked while being polled.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let result = kinformer_wait::catch_panic("resync", async { panic!("lost the lease") }).await;
/// assert!(matches!(
///     result,
///     Err(kinformer_wait::Error::Panicked { ref message, .. }) if message == "lost the lease"
/// ));
/// # }
/// ```
#[doc(alias = "HandleCrash")]
#[doc(alias = "HandleCrashWithContext")]
pub async fn catch_panic<F: Future>(name: &str, future: F) -> Result<F::Output, Error> {
    // The future is dropped right after a panic and never polled again, so a broken invariant
    // inside it cannot be observed: asserting unwind safety is sound here.
    match AssertUnwindSafe(future).catch_unwind().await {
        Ok(output) => Ok(output),
        Err(payload) => Err(report_panic(name, payload.as_ref())),
    }
}

/// Runs `f`, catching a panic instead of unwinding: the synchronous twin of [`catch_panic`].
///
/// # Errors
///
/// [`Error::Panicked`] if `f` panicked.
///
/// # Examples
///
/// ```
/// let ok = kinformer_wait::catch_panic_sync("add", || 2 + 2);
/// assert_eq!(ok.ok(), Some(4));
/// let caught = kinformer_wait::catch_panic_sync("divide", || -> u32 { panic!("by zero") });
/// assert!(caught.is_err());
/// ```
#[doc(alias = "HandleCrash")]
pub fn catch_panic_sync<R>(name: &str, f: impl FnOnce() -> R) -> Result<R, Error> {
    // `f` is consumed by the call, so nothing it captured outlives the panic.
    catch_unwind(AssertUnwindSafe(f)).map_err(|payload| report_panic(name, payload.as_ref()))
}

/// The human-readable message of a panic payload: the `&str` or `String` given to `panic!`,
/// or a placeholder for any other payload type.
fn panic_message(payload: &(dyn Any + Send)) -> &str {
    if let Some(message) = payload.downcast_ref::<&'static str>() {
        message
    } else if let Some(message) = payload.downcast_ref::<String>() {
        message
    } else {
        NON_STRING_PAYLOAD
    }
}

fn report_panic(name: &str, payload: &(dyn Any + Send)) -> Error {
    let message = panic_message(payload);
    tracing::error!(name, panic = message, "observed a panic");
    Error::Panicked {
        name: name.to_owned(),
        message: message.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use std::panic::panic_any;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use tracing::Level;

    use super::*;
    use crate::test_support::CaptureGuard;

    #[tokio::test]
    async fn catch_panic_passes_the_output_through_when_nothing_panics() {
        assert_eq!(catch_panic("answer", async { 42 }).await.ok(), Some(42));
    }

    #[tokio::test]
    async fn catch_panic_captures_a_literal_message() {
        let result = catch_panic("literal", async { panic!("plain words") }).await;
        assert!(matches!(
            result,
            Err(Error::Panicked { ref name, ref message }) if name == "literal" && message == "plain words"
        ));
    }

    #[tokio::test]
    async fn catch_panic_captures_a_formatted_message() {
        let shard = 7;
        let result = catch_panic("formatted", async move {
            if shard > 0 {
                panic!("shard {shard} lost");
            }
        })
        .await;
        let Err(error) = result else {
            panic!("expected a caught panic");
        };
        assert_eq!(error.to_string(), "formatted panicked: shard 7 lost");
    }

    #[tokio::test]
    async fn catch_panic_survives_a_payload_that_is_not_a_string() {
        let result = catch_panic("odd payload", async { panic_any(17_u8) }).await;
        assert!(matches!(
            result,
            Err(Error::Panicked { ref message, .. }) if message == NON_STRING_PAYLOAD
        ));
    }

    #[tokio::test]
    async fn catch_panic_logs_the_name_and_message_at_error_level() {
        let capture = CaptureGuard::start();
        let _ = catch_panic("handler/pods", async { panic!("nil object") }).await;

        let events = capture.events();
        assert_eq!(events.len(), 1, "{events:?}");
        let event = &events[0];
        assert_eq!(event.level, Level::ERROR);
        assert_eq!(event.field("name"), Some("handler/pods"));
        assert_eq!(event.field("panic"), Some("nil object"));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_caught_panic_leaves_the_task_and_the_runtime_running() {
        let after_panic = Arc::new(AtomicBool::new(false));
        let task = tokio::spawn({
            let after_panic = Arc::clone(&after_panic);
            async move {
                let caught = catch_panic("inner", async { panic!("inside a task") }).await;
                // Still running in the same task after the panic.
                after_panic.store(true, Ordering::SeqCst);
                caught
            }
        });
        let joined = task.await.expect("the panic did not escape into the task");
        assert!(matches!(joined, Err(Error::Panicked { .. })));
        assert!(after_panic.load(Ordering::SeqCst));

        let still_scheduling = tokio::spawn(async { 1 + 1 }).await;
        assert_eq!(still_scheduling.ok(), Some(2));
    }

    #[test]
    fn catch_panic_sync_returns_the_value_or_the_caught_panic() {
        assert_eq!(catch_panic_sync("sum", || 1 + 2).ok(), Some(3));
        let capture = CaptureGuard::start();
        let caught = catch_panic_sync("parse", || -> u32 {
            panic!("{}", String::from("bad digit"))
        });
        assert!(matches!(
            caught,
            Err(Error::Panicked { ref name, ref message }) if name == "parse" && message == "bad digit"
        ));
        assert_eq!(capture.events().len(), 1);
    }
}
