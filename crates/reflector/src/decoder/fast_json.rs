//! Typed objects out of JSON: simd-json where it gives exactly what serde_json gives, serde_json
//! everywhere else.
//!
//! simd-json decodes a Pod in about half serde_json's time (`benches/json_parsers.rs`), through
//! the same `Deserialize` impls. It is only handed bytes on which the two are known to agree:
//!
//! - **Valid UTF-8, checked first.** simd-json's string fast path trusts its input to be UTF-8
//!   (simd-lite/simd-json#453); checking the whole input up front (simdutf8, a few hundred
//!   nanoseconds for a Pod) means every string it builds is valid, whatever its backend.
//! - **Nested at most [`MAX_DEPTH`] deep**, serde_json's own limit: simd-json's deserializer
//!   recurses without one, and a hostile body nested a million deep would overflow the stack.
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

/// The deepest nesting serde_json reads (it refuses a 128th level); simd-json has no limit.
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
            buffers: simd_json::Buffers::default(),
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

/// Whether simd-json's reading of `raw`, if it reads it, is serde_json's (see the module docs).
fn simd_agrees(raw: &[u8]) -> bool {
    simdutf8::basic::from_utf8(raw).is_ok() && nested_within(raw, MAX_DEPTH) && !has_minus_zero(raw)
}

/// Whether no array or object in `raw` is nested deeper than `limit`. Brackets inside strings
/// do not count; a document too broken to tell is let through (the parsers refuse it).
fn nested_within(raw: &[u8], limit: usize) -> bool {
    // Most objects have fewer brackets in all than the limit, which settles it at once.
    if raw
        .iter()
        .filter(|&&byte| byte == b'{' || byte == b'[')
        .count()
        <= limit
    {
        return true;
    }
    let mut depth = 0usize;
    let mut at = 0;
    while let Some(&byte) = raw.get(at) {
        match byte {
            b'"' => match string_end(raw, at + 1) {
                Some(end) => at = end,
                None => return true,
            },
            b'{' | b'[' => {
                depth += 1;
                if depth > limit {
                    return false;
                }
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
        at += 1;
    }
    true
}

/// The index of the quote that closes the string whose contents start at `from`.
fn string_end(raw: &[u8], mut from: usize) -> Option<usize> {
    loop {
        let offset = memchr::memchr2(b'"', b'\\', raw.get(from..)?)?;
        let at = from + offset;
        if raw[at] == b'"' {
            return Some(at);
        }
        // An escape: skip the backslash and the byte it escapes.
        from = at + 2;
    }
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
