//! The peers' global allocator: mimalloc, asked for a plain block whenever every block it hands
//! out already has the alignment the layout needs.
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

#![expect(
    unsafe_code,
    reason = "a global allocator is an unsafe trait over mimalloc's C API"
)]

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

use libmimalloc_sys::{
    mi_free, mi_malloc, mi_malloc_aligned, mi_realloc, mi_realloc_aligned, mi_zalloc,
    mi_zalloc_aligned,
};

/// The alignment every mimalloc block has.
const BLOCK_ALIGN: usize = 8;

/// mimalloc, with plain calls where the alignment allows (see the module docs).
#[derive(Debug, Clone, Copy, Default)]
pub struct Mimalloc;

// SAFETY: every method hands the request to mimalloc, which returns null or a block of at least
// `size` bytes aligned to at least `BLOCK_ALIGN`; a layout asking for more alignment goes to
// mimalloc's aligned entry points. Every block comes from, and goes back to, mimalloc.
unsafe impl GlobalAlloc for Mimalloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
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
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: the caller passes a block this allocator returned, so mimalloc's own.
        unsafe { mi_free(ptr.cast::<c_void>()) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
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

    /// Every size up to a few pages at every alignment from 1 to a page: the block is aligned,
    /// holds what was written, keeps it across a grow and a shrink, and is zeroed when asked.
    #[test]
    #[expect(
        unsafe_code,
        reason = "calls the allocator as the global allocator would"
    )]
    fn blocks_are_aligned_and_keep_their_contents() {
        let sizes = (1..=256).chain([257, 1000, 4095, 4096, 4097, 70_000, 1 << 20]);
        for size in sizes {
            for align in (0..=12).map(|shift| 1usize << shift) {
                let layout = Layout::from_size_align(size, align).expect("a valid layout");
                // SAFETY: `layout` has a non-zero size; every block is freed with its layout.
                unsafe {
                    let zeroed = Mimalloc.alloc_zeroed(layout);
                    assert!(!zeroed.is_null(), "{layout:?}");
                    assert_eq!(zeroed.addr() % align, 0, "zeroed {layout:?}");
                    assert!(
                        std::slice::from_raw_parts(zeroed, size)
                            .iter()
                            .all(|&b| b == 0)
                    );
                    Mimalloc.dealloc(zeroed, layout);

                    let block = Mimalloc.alloc(layout);
                    assert!(!block.is_null(), "{layout:?}");
                    assert_eq!(block.addr() % align, 0, "{layout:?}");
                    let pattern = |i: usize| (i % 251) as u8;
                    for i in 0..size {
                        block.add(i).write(pattern(i));
                    }
                    let grown = Mimalloc.realloc(block, layout, size * 3);
                    assert_eq!(grown.addr() % align, 0, "grown {layout:?}");
                    assert!((0..size).all(|i| grown.add(i).read() == pattern(i)));
                    let grown_layout = Layout::from_size_align(size * 3, align).expect("valid");
                    let shrunk = Mimalloc.realloc(grown, grown_layout, size.div_ceil(2));
                    assert_eq!(shrunk.addr() % align, 0, "shrunk {layout:?}");
                    assert!((0..size.div_ceil(2)).all(|i| shrunk.add(i).read() == pattern(i)));
                    let shrunk_layout =
                        Layout::from_size_align(size.div_ceil(2), align).expect("valid");
                    Mimalloc.dealloc(shrunk, shrunk_layout);
                }
            }
        }
    }
}
