//! What freeing a decoded Pod costs where an informer frees it: long after the decode, and on
//! another thread than the one that decoded it.
//!
//! ```text
//! cargo run --release -p kinformer-protobuf --example free_where
//! ```
//!
//! Each round decodes `N` copies of the fixture Pod (`tests/fixtures/pod.json`, encoded to
//! protobuf; `N` defaults to 100,000, about 3.5 GB), then frees them all on the decoding
//! thread, in the order they were made; decodes them again and frees them on a new thread;
//! and last decodes and frees one Pod at a time, the free then touching memory still in cache.
//! It prints the time per Pod of each. The first two are what a steady watch pays for every
//! update's replaced object, which was decoded 100,000 updates earlier on a decode worker and
//! is dropped on a handler's thread.

use std::{hint::black_box, time::Instant};

use k8s_openapi::api::core::v1::Pod;
use kinformer_protobuf::{DecodeOptions, Decoder, Envelope, encode_object};

/// The allocator the decode benchmark and the side-by-side bench peers run on.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[allow(clippy::print_stdout, reason = "the timings are the example's output")]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let json = include_bytes!("../tests/fixtures/pod.json");
    let value: serde_json::Value = serde_json::from_slice(json)?;
    let protobuf = encode_object(&value)?;
    let count: usize = std::env::var("N").map_or(Ok(100_000), |count| count.parse())?;
    if count == 0 {
        return Err("N must be at least 1".into());
    }
    let decoder = Decoder::<Pod>::new();
    let decode = || -> Result<Pod, kinformer_protobuf::Error> {
        let envelope = Envelope::parse(black_box(&protobuf))?;
        decoder.decode_envelope(&envelope, DecodeOptions::default())
    };
    let per_pod = |seconds: f64| seconds * 1e6 / count as f64;
    for round in 1..=3 {
        let pods = (0..count)
            .map(|_| decode())
            .collect::<Result<Vec<_>, _>>()?;
        let start = Instant::now();
        drop(black_box(pods));
        let same_thread = start.elapsed();

        let pods = (0..count)
            .map(|_| decode())
            .collect::<Result<Vec<_>, _>>()?;
        let other_thread = std::thread::spawn(move || {
            let start = Instant::now();
            drop(black_box(pods));
            start.elapsed()
        })
        .join()
        .map_err(|_| "the freeing thread panicked")?;

        let start = Instant::now();
        for _ in 0..count {
            black_box(decode()?);
        }
        let hot = start.elapsed();

        println!(
            "round {round}: free per Pod, decoded long before: {:.2} µs on the decoding thread, \
             {:.2} µs on another; decode and free at once: {:.2} µs",
            per_pod(same_thread.as_secs_f64()),
            per_pod(other_thread.as_secs_f64()),
            per_pod(hot.as_secs_f64()),
        );
    }
    Ok(())
}
