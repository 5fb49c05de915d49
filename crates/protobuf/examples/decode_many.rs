//! Decodes (or clones) the fixture Pod (`tests/fixtures/pod.json`, encoded to protobuf) a fixed
//! number of times through the generated decoder, for counting instructions where timings are
//! too noisy:
//!
//! ```text
//! cargo build --release -p kinformer-protobuf --example decode_many
//! N=1000 valgrind --tool=callgrind target/release/examples/decode_many
//! N=3000 valgrind --tool=callgrind target/release/examples/decode_many
//! ```
//!
//! The difference between the two counts, over 2,000, is the cost of one decode (and the free
//! of its result) with the setup cancelled out. `N` defaults to 1,000; pass `drop` as the only
//! argument to skip managedFields on the wire, or `clone` to clone the decoded Pod instead of
//! decoding it: the floor of any decode into k8s-openapi's types, which must allocate, fill
//! and free the same tree.

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
    let decoder = Decoder::<Pod>::new();
    let options = match std::env::args().nth(1).as_deref() {
        Some("drop") => DecodeOptions::default().drop_managed_fields(),
        None => DecodeOptions::default(),
        Some("clone") => {
            let envelope = Envelope::parse(&protobuf)?;
            let pod = decoder.decode_envelope(&envelope, DecodeOptions::default())?;
            for _ in 0..count {
                black_box(black_box(&pod).clone());
            }
            return Ok(());
        }
        Some(other) => {
            return Err(format!("unknown argument {other:?}; `drop`, `clone` or none").into());
        }
    };
    for _ in 0..count {
        let envelope = Envelope::parse(black_box(&protobuf))?;
        black_box(decoder.decode_envelope(&envelope, options)?);
    }
    Ok(())
}
