//! Decodes the fixture Pod (`tests/fixtures/pod.json`, encoded to protobuf) a fixed number of
//! times through the generated decoder, for counting instructions where timings are too noisy:
//!
//! ```text
//! cargo build --release -p kinformer-protobuf --example decode_many
//! N=1000 valgrind --tool=callgrind target/release/examples/decode_many
//! N=3000 valgrind --tool=callgrind target/release/examples/decode_many
//! ```
//!
//! The difference between the two counts, over 2,000, is the cost of one decode (and the free
//! of its result) with the setup cancelled out. `N` defaults to 1,000; pass `drop` as the only
//! argument to skip managedFields on the wire.

use std::hint::black_box;

use k8s_openapi::api::core::v1::Pod;
use kinformer_protobuf::{DecodeOptions, Decoder, Envelope, encode_object};

/// The allocator the decode benchmark and the side-by-side bench peers run on.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let json = include_bytes!("../tests/fixtures/pod.json");
    let value: serde_json::Value = serde_json::from_slice(json)?;
    let protobuf = encode_object(&value)?;
    let count: usize = std::env::var("N").map_or(Ok(1_000), |count| count.parse())?;
    let options = match std::env::args().nth(1).as_deref() {
        Some("drop") => DecodeOptions::default().drop_managed_fields(),
        None => DecodeOptions::default(),
        Some(other) => return Err(format!("unknown argument {other:?}; `drop` or none").into()),
    };
    let decoder = Decoder::<Pod>::new();
    for _ in 0..count {
        let envelope = Envelope::parse(black_box(&protobuf))?;
        black_box(decoder.decode_envelope(&envelope, options)?);
    }
    Ok(())
}
