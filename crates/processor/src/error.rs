//! The processor's error type.

/// What can go wrong when registering listeners or running a [`SharedProcessor`].
///
/// [`SharedProcessor`]: crate::SharedProcessor
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The processor has already stopped; a listener added now would never receive anything.
    /// client-go's informer refuses the same way ("it has stopped already").
    #[error("listener {name:?} was not added because the processor has stopped already")]
    Stopped {
        /// The name the rejected listener would have had.
        name: String,
    },
    /// [`SharedProcessor::run`](crate::SharedProcessor::run) was called a second time; a
    /// processor runs once.
    #[error("the processor is already running or has run")]
    AlreadyStarted,
    /// A listener asked for [`BufferPolicy::CoalesceByKey`](crate::BufferPolicy::CoalesceByKey)
    /// from a processor that has no key function to merge by
    /// ([`ProcessorOptions::key_func`](crate::ProcessorOptions::key_func)).
    #[error(
        "listener {name:?} asks to coalesce by key, but the processor has no key function; \
         set ProcessorOptions::key_func"
    )]
    CoalesceWithoutKey {
        /// The listener that was refused.
        name: String,
    },
    /// A listener asked for [`Overflow::Resync`](crate::Overflow::Resync) from a processor
    /// that cannot read the cache or key objects
    /// ([`ProcessorOptions::cache_snapshot`](crate::ProcessorOptions::cache_snapshot) and
    /// [`ProcessorOptions::key_func`](crate::ProcessorOptions::key_func); an informer sets both).
    #[error(
        "listener {name:?} asks to resync on overflow, but the processor has no cache snapshot \
         or key function; set ProcessorOptions::cache_snapshot and key_func"
    )]
    ResyncWithoutCache {
        /// The listener that was refused.
        name: String,
    },
    /// The operating system refused to start the thread that runs a listener's handler.
    #[error("could not start the handler thread of listener {name:?}")]
    SpawnHandlerThread {
        /// The listener whose thread could not start.
        name: String,
        /// Why the thread could not start.
        #[source]
        source: std::io::Error,
    },
    /// [`HandlerExecutor::Tasks`](crate::HandlerExecutor::Tasks) needs a tokio runtime to
    /// spawn the handler's task on, and the listener was started outside one.
    #[error("listener {name:?} runs its handler as a tokio task, but no tokio runtime is running")]
    NoRuntimeForHandlers {
        /// The listener whose handler could not start.
        name: String,
    },
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
