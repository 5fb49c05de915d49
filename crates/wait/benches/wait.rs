//! Costs of the hot paths other layers hit on every retry or handler call.

use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use kinformer_wait::{
    Backoff, BackoffManager, ExponentialBackoffManager, catch_panic, catch_panic_sync, jitter,
};

fn backoff(c: &mut Criterion) {
    let mut group = c.benchmark_group("backoff");
    let template = Backoff {
        duration: Duration::from_millis(10),
        factor: 2.0,
        jitter: 0.0,
        steps: 1_000,
        cap: Some(Duration::from_secs(30)),
    };
    group.bench_function("step", |b| {
        let mut backoff = template;
        b.iter(|| black_box(&mut backoff).step());
    });
    group.bench_function("step_jittered", |b| {
        let mut backoff = Backoff {
            jitter: 1.0,
            ..template
        };
        b.iter(|| black_box(&mut backoff).step());
    });
    group.bench_function("jitter", |b| {
        b.iter(|| jitter(black_box(Duration::from_secs(1)), black_box(0.5)));
    });
    group.bench_function("exponential_manager_next_delay", |b| {
        let mut manager = ExponentialBackoffManager::default();
        b.iter(|| black_box(&mut manager).next_delay());
    });
    group.finish();
}

fn panic_guard(c: &mut Criterion) {
    let mut group = c.benchmark_group("catch_panic");
    group.bench_function("sync_no_panic", |b| {
        b.iter(|| catch_panic_sync("bench", || black_box(7_u64) * 6));
    });
    group.bench_function("ready_future_no_panic", |b| {
        let mut context = Context::from_waker(Waker::noop());
        b.iter(|| {
            let mut guarded = pin!(catch_panic("bench", async { black_box(7_u64) * 6 }));
            match guarded.as_mut().poll(&mut context) {
                Poll::Ready(result) => result,
                Poll::Pending => unreachable!("a ready future completes on its first poll"),
            }
        });
    });
    group.finish();
}

criterion_group!(benches, backoff, panic_guard);
criterion_main!(benches);
