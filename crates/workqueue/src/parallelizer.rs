//! Running independent pieces of CPU work on several threads.

use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Runs `pieces` independent pieces of work on up to `workers` threads, handing them out in
/// chunks, until every piece is done or a stop condition turns true.
///
/// This is blocking, CPU-bound work on scoped OS threads (the calling thread is one of the
/// workers), not tokio tasks: from async code, call it inside `tokio::task::spawn_blocking`. A
/// panic in a piece stops the other workers after their current piece, then propagates to the
/// caller, as client-go's `HandleCrash` re-panics.
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use kinformer_workqueue::Parallelizer;
///
/// let visits: Vec<AtomicUsize> = (0..1000).map(|_| AtomicUsize::new(0)).collect();
/// Parallelizer::new(4).chunk_size(16).run(visits.len(), |piece| {
///     visits[piece].fetch_add(1, Ordering::Relaxed);
/// });
/// assert!(visits.iter().all(|v| v.load(Ordering::Relaxed) == 1));
/// ```
#[doc(alias = "ParallelizeUntil")]
#[doc(alias = "Parallelize")]
#[derive(Debug, Clone, Copy)]
pub struct Parallelizer {
    workers: NonZeroUsize,
    chunk_size: NonZeroUsize,
}

impl Parallelizer {
    /// Up to `workers` threads (at least one), one piece per chunk.
    pub fn new(workers: usize) -> Self {
        Self {
            workers: NonZeroUsize::new(workers).unwrap_or(NonZeroUsize::MIN),
            chunk_size: NonZeroUsize::MIN,
        }
    }

    /// Hands out `chunk_size` consecutive pieces at a time (at least one), which pays off when a
    /// piece is cheap.
    #[doc(alias = "WithChunkSize")]
    #[must_use]
    pub fn chunk_size(mut self, chunk_size: usize) -> Self {
        self.chunk_size = NonZeroUsize::new(chunk_size).unwrap_or(NonZeroUsize::MIN);
        self
    }

    /// Calls `work` once with every piece index in `0..pieces`.
    #[doc(alias = "Parallelize")]
    pub fn run<W>(&self, pieces: usize, work: W)
    where
        W: Fn(usize) + Sync,
    {
        self.run_until(pieces, || false, work);
    }

    /// Like [`run`](Parallelizer::run), but workers stop taking pieces once `stopped` returns
    /// true (it is checked before every piece, like client-go's check of the context).
    #[doc(alias = "ParallelizeUntil")]
    pub fn run_until<S, W>(&self, pieces: usize, stopped: S, work: W)
    where
        S: Fn() -> bool + Sync,
        W: Fn(usize) + Sync,
    {
        let chunk_size = self.chunk_size.get();
        let chunks = pieces.div_ceil(chunk_size);
        let workers = self.workers.get().min(chunks);
        if workers == 0 {
            return;
        }
        let next_chunk = AtomicUsize::new(0);
        let worker = || {
            loop {
                let chunk = next_chunk.fetch_add(1, Ordering::Relaxed);
                if chunk >= chunks {
                    return;
                }
                let start = chunk * chunk_size;
                let end = (start + chunk_size).min(pieces);
                for piece in start..end {
                    if stopped() {
                        // Other workers see the counter exhausted and stop after their piece.
                        next_chunk.store(chunks, Ordering::Relaxed);
                        return;
                    }
                    let stop_others_on_panic = StopOnPanic {
                        next_chunk: &next_chunk,
                        chunks,
                    };
                    work(piece);
                    std::mem::forget(stop_others_on_panic);
                }
            }
        };
        std::thread::scope(|scope| {
            for _ in 1..workers {
                scope.spawn(worker);
            }
            worker();
        });
    }
}

/// Exhausts the chunk counter if dropped during a panic, so the other workers stop early.
struct StopOnPanic<'a> {
    next_chunk: &'a AtomicUsize,
    chunks: usize,
}

impl Drop for StopOnPanic<'_> {
    fn drop(&mut self) {
        self.next_chunk.store(self.chunks, Ordering::Relaxed);
    }
}
