//! The processor's hot path and its memory under a stuck handler.
//!
//! | ID | scenario (timed part) |
//! | --- | --- |
//! | `processor/distribute/{1,3,10}_listeners` | distribute 10,000 adds to N listeners, each on its own handler thread, until every handler has received the last one (throughput counts distributed notifications) |
//! | `processor/distribute_batched/{1,3,10}_listeners` | the same through `SharedProcessor::batch`, 1,000 adds a batch (what an informer does with a popped batch of deltas) |
//! | `processor/registration/add_remove_running` | add a handler to a running processor (its thread starts) and remove it again, waiting until its thread has exited |
//! | `processor/stuck_listener/fill_100k` | distribute 100,000 adds to one listener whose handler is blocked (pure buffer growth) |
//!
//! Handlers are trivial (one relaxed atomic add), so the figures are the processor's own cost:
//! the buffer lock on each side, the condvar hand-off and the thread wake-ups. Objects are
//! shared `Arc`s built once, so no object is cloned or allocated in the timed loops.
//!
//! The memory figure (bytes per buffered notification under a stuck handler) is printed once
//! on stderr before the timings: the ring's allocation (exact: slots x slot size) and the
//! process's resident-set growth (a cross-check, Linux only).

#![allow(missing_docs)]

use std::{
    hint::black_box,
    sync::{
        Arc, Condvar, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use kinformer_processor::{
    HandlerFuncs, ListenerOptions, Notification, Recipients, Registration, SharedProcessor,
};
use tokio::runtime::Runtime;
use tokio_util::sync::CancellationToken;

const BATCH: usize = 10_000;
const BACKLOG: usize = 100_000;

/// Counts handlers that have seen the batch's last notification.
#[derive(Default)]
struct Finish {
    done: Mutex<usize>,
    changed: Condvar,
}

impl Finish {
    fn arrive(&self) {
        *self.done.lock().expect("poisoned") += 1;
        self.changed.notify_all();
    }

    fn wait_and_reset(&self, listeners: usize) {
        let mut done = self.done.lock().expect("poisoned");
        while *done < listeners {
            done = self.changed.wait(done).expect("poisoned");
        }
        *done = 0;
    }
}

struct Running {
    processor: SharedProcessor<String>,
    token: CancellationToken,
    runtime: Runtime,
}

impl Running {
    fn start(processor: SharedProcessor<String>) -> Self {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let token = CancellationToken::new();
        let task_processor = processor.clone();
        let task_token = token.clone();
        runtime.spawn(async move { task_processor.run(task_token).await });
        runtime.block_on(async {
            while !processor.is_running() {
                tokio::task::yield_now().await;
            }
        });
        Self {
            processor,
            token,
            runtime,
        }
    }

    fn stop(self) {
        self.token.cancel();
        let processor = self.processor;
        self.runtime.block_on(async move {
            while !processor.is_stopped() {
                tokio::task::yield_now().await;
            }
        });
    }
}

/// How many adds one `SharedProcessor::batch` carries in `distribute_batched`: the FIFO's
/// default pop batch.
const POP_BATCH: usize = 1_000;

fn distribute(c: &mut Criterion) {
    distribute_group(c, "processor/distribute", |processor, objects| {
        for obj in objects {
            processor.distribute(Notification::add(Arc::clone(obj)), Recipients::All);
        }
    });
    distribute_group(c, "processor/distribute_batched", |processor, objects| {
        for chunk in objects.chunks(POP_BATCH) {
            let batch = processor.batch();
            for obj in chunk {
                batch.distribute(Notification::add(Arc::clone(obj)), Recipients::All);
            }
        }
    });
}

fn distribute_group(
    c: &mut Criterion,
    name: &str,
    send: impl Fn(&SharedProcessor<String>, &[Arc<String>]),
) {
    let mut group = c.benchmark_group(name);
    group.throughput(Throughput::Elements(BATCH as u64));
    let objects: Vec<Arc<String>> = (0..BATCH).map(|i| Arc::new(format!("pod-{i}"))).collect();
    for listeners in [1_usize, 3, 10] {
        let processor = SharedProcessor::<String>::default();
        let finish = Arc::new(Finish::default());
        let last = Arc::clone(&objects[BATCH - 1]);
        let handled = Arc::new(AtomicU64::new(0));
        for index in 0..listeners {
            let (finish, last, handled) =
                (Arc::clone(&finish), Arc::clone(&last), Arc::clone(&handled));
            processor
                .add_handler(
                    HandlerFuncs::new().add_func(move |obj: Arc<String>, _| {
                        handled.fetch_add(1, Ordering::Relaxed);
                        if Arc::ptr_eq(&obj, &last) {
                            finish.arrive();
                        }
                    }),
                    ListenerOptions::new().name(format!("bench-{index}")),
                )
                .expect("added");
        }
        let running = Running::start(processor);
        group.bench_function(
            BenchmarkId::from_parameter(format!("{listeners}_listeners")),
            |b| {
                b.iter_custom(|iterations| {
                    let mut total = Duration::ZERO;
                    for _ in 0..iterations {
                        let began = Instant::now();
                        send(&running.processor, &objects);
                        finish.wait_and_reset(listeners);
                        total += began.elapsed();
                    }
                    total
                });
            },
        );
        black_box(handled.load(Ordering::Relaxed));
        running.stop();
    }
    group.finish();
}

/// A listener whose handler never returns until the bench releases it.
fn stuck_listener(
    processor: &SharedProcessor<String>,
) -> (Registration<String>, Arc<(Mutex<bool>, Condvar)>) {
    let gate = Arc::new((Mutex::new(false), Condvar::new()));
    let held = Arc::clone(&gate);
    let registration = processor
        .add_handler(
            HandlerFuncs::new().add_func(move |_obj: Arc<String>, _| {
                let (open, changed) = &*held;
                let mut open = open.lock().expect("poisoned");
                while !*open {
                    open = changed.wait(open).expect("poisoned");
                }
            }),
            ListenerOptions::new().name("stuck"),
        )
        .expect("added");
    (registration, gate)
}

fn release(gate: &(Mutex<bool>, Condvar)) {
    *gate.0.lock().expect("poisoned") = true;
    gate.1.notify_all();
}

/// Resident set size in bytes, from /proc (Linux); None elsewhere.
fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

#[allow(clippy::print_stderr)] // the memory figure is a one-off report beside criterion's timings
fn report_backlog_memory() {
    let processor = SharedProcessor::<String>::default();
    let (registration, gate) = stuck_listener(&processor);
    let running = Running::start(processor);
    let pod = Arc::new("pod".to_owned());
    running
        .processor
        .distribute(Notification::add(Arc::clone(&pod)), Recipients::All);
    while registration.stats().delivered == 0 {
        std::thread::yield_now();
    }
    let before = resident_bytes();
    for _ in 0..BACKLOG {
        running
            .processor
            .distribute(Notification::add(Arc::clone(&pod)), Recipients::All);
    }
    let after = resident_bytes();
    let stats = registration.stats();
    let slot = std::mem::size_of::<Notification<String>>();
    let ring_bytes = stats.buffer_capacity * slot;
    eprintln!(
        "processor/stuck_listener: {} pending, ring {} slots x {slot} B = {ring_bytes} B \
         ({:.1} B per pending notification); resident growth {}",
        stats.buffered,
        stats.buffer_capacity,
        ring_bytes as f64 / stats.buffered as f64,
        match (before, after) {
            (Some(before), Some(after)) => format!(
                "{} B ({:.1} B per pending notification)",
                after.saturating_sub(before),
                after.saturating_sub(before) as f64 / stats.buffered as f64
            ),
            _ => "not measured on this platform".to_owned(),
        }
    );
    release(&gate);
    running.stop();
}

fn stuck(c: &mut Criterion) {
    report_backlog_memory();
    let mut group = c.benchmark_group("processor/stuck_listener");
    group.throughput(Throughput::Elements(BACKLOG as u64));
    group.sample_size(10);
    let pod = Arc::new("pod".to_owned());
    group.bench_function("fill_100k", |b| {
        b.iter_custom(|iterations| {
            let mut total = Duration::ZERO;
            for _ in 0..iterations {
                let processor = SharedProcessor::<String>::default();
                let (registration, gate) = stuck_listener(&processor);
                let running = Running::start(processor);
                running
                    .processor
                    .distribute(Notification::add(Arc::clone(&pod)), Recipients::All);
                while registration.stats().delivered == 0 {
                    std::thread::yield_now();
                }
                let began = Instant::now();
                for _ in 0..BACKLOG {
                    running
                        .processor
                        .distribute(Notification::add(Arc::clone(&pod)), Recipients::All);
                }
                total += began.elapsed();
                registration.remove();
                release(&gate);
                running.stop();
            }
            total
        });
    });
    group.finish();
}

/// The cost of a dedicated thread per handler, paid once per registration.
fn registration(c: &mut Criterion) {
    let mut group = c.benchmark_group("processor/registration");
    let running = Running::start(SharedProcessor::<String>::default());
    group.bench_function("add_remove_running", |b| {
        b.iter(|| {
            let registration = running
                .processor
                .add_handler(HandlerFuncs::new(), ListenerOptions::new())
                .expect("added");
            registration.remove();
            running.runtime.block_on(registration.stopped());
        });
    });
    group.finish();
    running.stop();
}

criterion_group!(benches, distribute, registration, stuck);
criterion_main!(benches);
