//! The parallelizer: client-go's parallelizer_test.go, ported.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicUsize, Ordering};

use kinformer_workqueue::Parallelizer;

fn visits(pieces: usize) -> Vec<AtomicUsize> {
    (0..pieces).map(|_| AtomicUsize::new(0)).collect()
}

/// Ported from client-go's TestParallelizeUntil (all four cases).
#[test]
fn every_piece_is_visited_exactly_once_for_any_chunk_size() {
    for (pieces, workers, chunk_size) in [
        (1000, 10, 1),
        (1000, 10, 10),
        (1000, 10, 100),
        (999, 10, 13),
    ] {
        let seen = visits(pieces);
        Parallelizer::new(workers)
            .chunk_size(chunk_size)
            .run(pieces, |piece| {
                seen[piece].fetch_add(1, Ordering::Relaxed);
            });
        for (piece, count) in seen.iter().enumerate() {
            assert_eq!(
                count.load(Ordering::Relaxed),
                1,
                "piece {piece} with pieces={pieces} workers={workers} chunk_size={chunk_size}"
            );
        }
    }
}

#[test]
fn no_pieces_and_zero_sizes_are_harmless() {
    Parallelizer::new(0)
        .chunk_size(0)
        .run(0, |_| panic!("no piece to run"));
    let seen = visits(3);
    Parallelizer::new(0).chunk_size(0).run(3, |piece| {
        seen[piece].fetch_add(1, Ordering::Relaxed);
    });
    assert!(seen.iter().all(|count| count.load(Ordering::Relaxed) == 1));
}

#[test]
fn a_stop_condition_stops_the_workers_early() {
    let done = AtomicUsize::new(0);
    Parallelizer::new(4).run_until(
        10_000,
        || done.load(Ordering::Relaxed) >= 100,
        |_| {
            done.fetch_add(1, Ordering::Relaxed);
        },
    );
    let done = done.load(Ordering::Relaxed);
    assert!((100..10_000).contains(&done), "{done} pieces ran");
}

#[test]
fn a_panicking_piece_reaches_the_caller_and_stops_the_rest() {
    let done = AtomicUsize::new(0);
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        Parallelizer::new(2).run(20_000, |piece| {
            if piece == 10 {
                panic!("piece 10 fails");
            }
            // Slow enough that the panic hook (which runs before unwinding) finishes long
            // before the other worker could get through every piece.
            std::thread::sleep(std::time::Duration::from_micros(200));
            done.fetch_add(1, Ordering::Relaxed);
        });
    }));
    assert!(outcome.is_err());
    assert!(
        done.load(Ordering::Relaxed) < 19_999,
        "the other workers were not stopped"
    );
}
