//! Decodes fixture Pods from JSON, as list items, a fixed number of times, for counting
//! instructions where timings are too noisy:
//!
//! ```text
//! cargo build --release -p kinformer-reflector --example decode_many_json
//! N=1000 valgrind --tool=callgrind target/release/examples/decode_many_json
//! N=3000 valgrind --tool=callgrind target/release/examples/decode_many_json
//! ```
//!
//! The difference between the two counts, over 2,000, is the cost of one decode (the checks
//! that choose the parser, the parse, and the free of the result) with the setup cancelled
//! out. `N` defaults to 1,000.

use std::hint::black_box;

use k8s_openapi::api::core::v1::Pod;
use kinformer_reflector::{Decoder, ExpectedType, JsonDecoder};
use kinformer_testing::fixtures;

/// The allocator the side-by-side bench peers run on.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let count: usize = std::env::var("N").map_or(Ok(1_000), |count| count.parse())?;
    let pods = (0..8)
        .map(|i| serde_json::to_vec(&fixtures::pod(i)))
        .collect::<Result<Vec<_>, _>>()?;
    let decoder = JsonDecoder::<Pod>::new(Some(ExpectedType::new("v1", "Pod")));
    for i in 0..count {
        black_box(decoder.decode_list_item(black_box(&pods[i % pods.len()]))?);
    }
    Ok(())
}
