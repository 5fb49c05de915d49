//! The peers' global allocator: mimalloc, asked for a plain block whenever every block it hands
//! out already has the alignment the layout needs; or, with `KINFORMER_PEER_ALLOCATOR=system`,
//! the system allocator (glibc's malloc here), which is what a program that picks no allocator
//! gets, so the suite can show both.
//!
//! The `mimalloc` crate passes every request to `mi_malloc_aligned`, even at an alignment of 8.
//! mimalloc 3 serves such a request from its size class's free list when the list has a block.
//! When the list is empty, `mi_malloc` would collect the blocks freed into that page since (by
//! this thread or by others) and go on from there; the aligned path instead over-allocates
//! unless the size rounds to a power of two. It asks for `size + align - 1` bytes, a block of the
//! next size class, and leaves the page it skipped uncollected, so the next request of that size
//! takes the same detour. Decoding a watch event allocates mostly such sizes (strings, small
//! vectors, map nodes) while another thread frees the object it replaced, which keeps those lists
//! empty.
//!
//! Every mimalloc block is at least 8 bytes, its size classes are multiples of 8 and every
//! page's first block is 16-byte aligned, so any block is 8-byte aligned. Layouts aligned to 8
//! or less (nearly all of them: strings, vectors, boxed structs) therefore take `mi_malloc`, and
//! only the rare larger alignment takes `mi_malloc_aligned`.
//!
//! The choice is made once, at the process's first allocation, from the environment as the C
//! library reads it (`getenv` allocates nothing), so every block is freed by the allocator that
//! handed it out. Deciding costs one relaxed atomic load per call afterwards.

#![expect(
    unsafe_code,
    reason = "a global allocator is an unsafe trait over mimalloc's C API"
)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::ffi::{CStr, c_char, c_void};
use std::sync::atomic::{AtomicU8, Ordering};

use libmimalloc_sys::{
    mi_free, mi_malloc, mi_malloc_aligned, mi_realloc, mi_realloc_aligned, mi_zalloc,
    mi_zalloc_aligned,
};

/// The alignment every mimalloc block has.
const BLOCK_ALIGN: usize = 8;

/// The environment variable that puts the process on the system allocator (`system`).
pub const ALLOCATOR_ENV: &CStr = c"KINFORMER_PEER_ALLOCATOR";

const UNDECIDED: u8 = 0;
const MIMALLOC: u8 = 1;
const SYSTEM: u8 = 2;

/// Which allocator serves the process: decided at its first allocation.
static CHOICE: AtomicU8 = AtomicU8::new(UNDECIDED);

unsafe extern "C" {
    /// The C library's `getenv`: a pointer into the environment, or null; it allocates nothing.
    fn getenv(name: *const c_char) -> *const c_char;
}

/// Whether the process runs on the system allocator, deciding it on the first call.
#[inline]
fn on_system() -> bool {
    match CHOICE.load(Ordering::Relaxed) {
        MIMALLOC => false,
        SYSTEM => true,
        _ => decide(),
    }
}

#[cold]
fn decide() -> bool {
    // SAFETY: `ALLOCATOR_ENV` is NUL-terminated, and the peers never change their environment,
    // so the string `getenv` points to stays valid while it is read. Threads racing here read
    // the same environment and store the same answer.
    let system = unsafe {
        let value = getenv(ALLOCATOR_ENV.as_ptr());
        !value.is_null() && CStr::from_ptr(value) == c"system"
    };
    CHOICE.store(if system { SYSTEM } else { MIMALLOC }, Ordering::Relaxed);
    system
}

/// The allocator this process runs on, `mimalloc` or `system`, for the result line.
pub fn allocator_name() -> &'static str {
    if on_system() { "system" } else { "mimalloc" }
}

/// mimalloc, with plain calls where the alignment allows, or the system allocator (see the
/// module docs).
#[derive(Debug, Clone, Copy, Default)]
pub struct PeerAllocator;

// SAFETY: the choice between the two allocators is made before the first block is handed out
// and never changes, so every block goes back to the allocator it came from. The system
// allocator is `std`'s. On mimalloc, every method hands the request to mimalloc, which returns
// null or a block of at least `size` bytes aligned to at least `BLOCK_ALIGN`; a layout asking
// for more alignment goes to mimalloc's aligned entry points.
unsafe impl GlobalAlloc for PeerAllocator {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if on_system() {
            // SAFETY: the caller's contract for `alloc`, passed on.
            return unsafe { System.alloc(layout) };
        }
        // SAFETY: mimalloc's allocation functions accept any size and power-of-two alignment.
        unsafe {
            if layout.align() <= BLOCK_ALIGN {
                mi_malloc(layout.size()).cast()
            } else {
                mi_malloc_aligned(layout.size(), layout.align()).cast()
            }
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if on_system() {
            // SAFETY: the caller's contract for `alloc_zeroed`, passed on.
            return unsafe { System.alloc_zeroed(layout) };
        }
        // SAFETY: as for `alloc`.
        unsafe {
            if layout.align() <= BLOCK_ALIGN {
                mi_zalloc(layout.size()).cast()
            } else {
                mi_zalloc_aligned(layout.size(), layout.align()).cast()
            }
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if on_system() {
            // SAFETY: the block came from `System` (the choice never changes).
            return unsafe { System.dealloc(ptr, layout) };
        }
        // SAFETY: the caller passes a block this allocator returned, so mimalloc's own.
        unsafe { mi_free(ptr.cast::<c_void>()) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if on_system() {
            // SAFETY: the block came from `System`; the caller's contract, passed on.
            return unsafe { System.realloc(ptr, layout, new_size) };
        }
        // SAFETY: `ptr` is mimalloc's block of `layout`; the new block keeps its alignment.
        unsafe {
            if layout.align() <= BLOCK_ALIGN {
                mi_realloc(ptr.cast::<c_void>(), new_size).cast()
            } else {
                mi_realloc_aligned(ptr.cast::<c_void>(), new_size, layout.align()).cast()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every size up to a few pages at every alignment from 1 to a page, on each allocator:
    /// the block is aligned, holds what was written, keeps it across a grow and a shrink, and
    /// is zeroed when asked. (The only test that calls `PeerAllocator`, so it may set the
    /// choice; the test binary's own allocator is `std`'s.)
    #[test]
    fn blocks_are_aligned_and_keep_their_contents() {
        for (choice, name) in [(MIMALLOC, "mimalloc"), (SYSTEM, "system")] {
            CHOICE.store(choice, Ordering::Relaxed);
            assert_eq!(allocator_name(), name);
            every_size_and_alignment();
        }
    }

    #[expect(
        unsafe_code,
        reason = "calls the allocator as the global allocator would"
    )]
    fn every_size_and_alignment() {
        let sizes = (1..=256).chain([257, 1000, 4095, 4096, 4097, 70_000, 1 << 20]);
        for size in sizes {
            for align in (0..=12).map(|shift| 1usize << shift) {
                let layout = Layout::from_size_align(size, align).expect("a valid layout");
                // SAFETY: `layout` has a non-zero size; every block is freed with its layout.
                unsafe {
                    let zeroed = PeerAllocator.alloc_zeroed(layout);
                    assert!(!zeroed.is_null(), "{layout:?}");
                    assert_eq!(zeroed.addr() % align, 0, "zeroed {layout:?}");
                    assert!(
                        std::slice::from_raw_parts(zeroed, size)
                            .iter()
                            .all(|&b| b == 0)
                    );
                    PeerAllocator.dealloc(zeroed, layout);

                    let block = PeerAllocator.alloc(layout);
                    assert!(!block.is_null(), "{layout:?}");
                    assert_eq!(block.addr() % align, 0, "{layout:?}");
                    let pattern = |i: usize| (i % 251) as u8;
                    for i in 0..size {
                        block.add(i).write(pattern(i));
                    }
                    let grown = PeerAllocator.realloc(block, layout, size * 3);
                    assert_eq!(grown.addr() % align, 0, "grown {layout:?}");
                    assert!((0..size).all(|i| grown.add(i).read() == pattern(i)));
                    let grown_layout = Layout::from_size_align(size * 3, align).expect("valid");
                    let shrunk = PeerAllocator.realloc(grown, grown_layout, size.div_ceil(2));
                    assert_eq!(shrunk.addr() % align, 0, "shrunk {layout:?}");
                    assert!((0..size.div_ceil(2)).all(|i| shrunk.add(i).read() == pattern(i)));
                    let shrunk_layout =
                        Layout::from_size_align(size.div_ceil(2), align).expect("valid");
                    PeerAllocator.dealloc(shrunk, shrunk_layout);
                }
            }
        }
    }
}
