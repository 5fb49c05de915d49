//! Typed objects out of JSON: simd-json where it gives exactly what serde_json gives, serde_json
//! everywhere else.
//!
//! simd-json decodes a Pod in about half serde_json's time (`benches/json_parsers.rs`), through
//! the same `Deserialize` impls. It is only handed bytes on which the two are known to agree:
//!
//! - **Valid UTF-8, checked first.** simd-json's string fast path trusts its input to be UTF-8
//!   (simd-lite/simd-json#453); checking the whole input up front (simdutf8, a few hundred
//!   nanoseconds for a Pod) means every string it builds is valid, whatever its backend.
//! - **Nested at most [`MAX_DEPTH`] deep**, serde_json's own limit. simd-json's deserializer
//!   recurses without a limit of its own, but only over a tape its parser built, and the parser
//!   is given the same limit ([`simd_json::Buffers::with_max_depth`]): deeper input is refused
//!   before anything recurses, and serde_json then refuses it with its own error.
//! - **No `-0` integer**, which serde_json reads as the float `-0.0` and simd-json as `0`.
//!
//! One difference is kept on purpose: simd-json rounds every decimal to the nearest `f64`, as
//! Go's `strconv.ParseFloat` does, where serde_json without its `float_roundtrip` feature can be
//! one unit in the last place off for long mantissas. The tests compare against serde_json with
//! that feature on.
//!
//! Anything simd-json refuses (a malformed body, an integer beyond 64 bits, a type that needs
//! serde_json's own deserializer such as `RawValue`) is decoded again by serde_json, so errors
//! and every edge case are serde_json's. The parsers' agreement is tested against serde_json on
//! fixtures, on every single-byte corruption of one, and on generated JSON.

use std::cell::RefCell;

use serde::de::DeserializeOwned;

/// The deepest nesting serde_json reads (it refuses a 128th level), given to simd-json's parser.
const MAX_DEPTH: usize = 127;

/// Scratch memory kept per thread up to this size; a larger object's is freed after use, so one
/// huge object does not pin its buffers to a thread for good.
const KEEP_SCRATCH: usize = 1 << 20;

/// The input copy simd-json parses in place, and its working buffers.
struct Scratch {
    input: Vec<u8>,
    buffers: simd_json::Buffers,
}

thread_local! {
    static SCRATCH: RefCell<Option<Scratch>> = const { RefCell::new(None) };
}

/// `raw` decoded as a `T`; the same result as `serde_json::from_slice`, faster where it can be.
pub(crate) fn from_slice<T: DeserializeOwned>(raw: &[u8]) -> serde_json::Result<T> {
    if simd_agrees(raw)
        && let Some(Ok(value)) = with_simd_json(raw)
    {
        return Ok(value);
    }
    serde_json::from_slice(raw)
}

/// `raw` decoded by simd-json on this thread's scratch buffers; `None` when they are in use (a
/// `Deserialize` impl that decodes JSON itself).
fn with_simd_json<T: DeserializeOwned>(raw: &[u8]) -> Option<simd_json::Result<T>> {
    SCRATCH.with(|cell| {
        let mut slot = cell.try_borrow_mut().ok()?;
        let scratch = slot.get_or_insert_with(|| Scratch {
            input: Vec::new(),
            buffers: simd_json::Buffers::with_max_depth(0, MAX_DEPTH),
        });
        scratch.input.clear();
        scratch.input.extend_from_slice(raw);
        let decoded = simd_json::serde::from_slice_with_buffers(
            scratch.input.as_mut_slice(),
            &mut scratch.buffers,
        );
        if scratch.input.capacity() > KEEP_SCRATCH {
            *slot = None;
        }
        Some(decoded)
    })
}

/// Whether simd-json's reading of `raw`, if it reads it, is serde_json's (see the module docs;
/// the depth limit is the parser's).
fn simd_agrees(raw: &[u8]) -> bool {
    simdutf8::basic::from_utf8(raw).is_ok() && !has_minus_zero(raw)
}

/// Whether `raw` may hold the number `-0` (not `-0.0` or `-0e1`, which both read as a float):
/// a `-0` after a `:`, `[` or `,` and not followed by a fraction or an exponent. Strings are not
/// told apart, so a string holding such text sends the object to serde_json too.
fn has_minus_zero(raw: &[u8]) -> bool {
    memchr::memmem::find_iter(raw, b"-0").any(|at| {
        let after = raw.get(at + 2).copied();
        let before = raw[..at]
            .iter()
            .rev()
            .find(|byte| !byte.is_ascii_whitespace())
            .copied();
        !matches!(after, Some(b'.' | b'e' | b'E' | b'0'..=b'9'))
            && matches!(before, None | Some(b':' | b'[' | b','))
    })
}

#[cfg(test)]
mod tests;
