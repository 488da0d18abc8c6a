//! The global allocator of a `--features mimalloc` build: mimalloc, called the way its C API
//! is meant to be called.
//!
//! The `mimalloc` crate's `MiMalloc` (0.1.52) passes every request to `mi_malloc_aligned`, whatever its
//! alignment. Under a burst of fresh allocations (100,000 actors spawned at once) that path
//! often finds its size class's free list empty and falls back to over-allocating by the
//! alignment, through a slower generic path: in callgrind, a handler actor's spawn, run and
//! exit cost 3,727 instructions with `MiMalloc` and 3,538 with this wrapper; a tokio task's
//! 2,334 and 2,317 (`docs/perf-log.md`, "Session 16"). A request whose alignment mimalloc's
//! plain `mi_malloc` already guarantees (a word, and no more than the size) goes there; any
//! other goes to the aligned functions, as before. Every runtime in the binary, tokio included,
//! allocates through it.

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

use libmimalloc_sys as mi;

/// See the module docs.
pub struct MiMalloc;

/// Whether `mi_malloc` (and `mi_zalloc`, `mi_realloc`) of `size` bytes is aligned enough for
/// `align`: mimalloc's blocks are whole words from a 16-byte aligned start, so every block is
/// at least word aligned. (Sizes below the alignment go to the aligned functions too, as the
/// `mimalloc` crate's pull request for the same change does.)
fn plain_suffices(size: usize, align: usize) -> bool {
    align <= std::mem::size_of::<usize>() && align <= size
}

// SAFETY: each function hands the request to mimalloc, which returns null or a block of at
// least `size` bytes at the alignment asked for (the plain functions only where
// `plain_suffices` holds: mimalloc guarantees word alignment); `dealloc` and `realloc` get
// only pointers that these functions returned, which `mi_free` and `mi_realloc*` accept
// whichever of them made the block.
unsafe impl GlobalAlloc for MiMalloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: see the impl's comment; any size and power-of-two alignment is accepted.
        unsafe {
            if plain_suffices(layout.size(), layout.align()) {
                mi::mi_malloc(layout.size()).cast()
            } else {
                mi::mi_malloc_aligned(layout.size(), layout.align()).cast()
            }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as `alloc`, zeroed.
        unsafe {
            if plain_suffices(layout.size(), layout.align()) {
                mi::mi_zalloc(layout.size()).cast()
            } else {
                mi::mi_zalloc_aligned(layout.size(), layout.align()).cast()
            }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: `ptr` came from one of this allocator's functions (`GlobalAlloc`'s contract).
        unsafe { mi::mi_free(ptr.cast::<c_void>()) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` came from this allocator with `layout` (`GlobalAlloc`'s contract); the
        // new block keeps the alignment, by the same test as `alloc` on the new size.
        unsafe {
            if plain_suffices(new_size, layout.align()) {
                mi::mi_realloc(ptr.cast::<c_void>(), new_size).cast()
            } else {
                mi::mi_realloc_aligned(ptr.cast::<c_void>(), new_size, layout.align()).cast()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Blocks of every size up to 256 bytes, at every alignment up to 4 KiB, come back aligned
    /// and writable, and keep their bytes and alignment when they grow and shrink. (Built with
    /// `--features mimalloc` only; `.ci/run` runs it.)
    #[test]
    fn blocks_are_aligned_and_keep_their_bytes() {
        let a = MiMalloc;
        for align in (0..=12).map(|s| 1usize << s) {
            for size in 1..=256usize {
                let layout = Layout::from_size_align(size, align).unwrap();
                // SAFETY: a non-zero size; the block is written within `size`, read back,
                // reallocated up and down and freed once, with its last layout.
                unsafe {
                    let p = a.alloc(layout);
                    assert!(!p.is_null());
                    assert_eq!(p as usize % align, 0, "size {size} align {align}");
                    p.write_bytes(0xA5, size);
                    let q = a.realloc(p, layout, size * 3);
                    assert_eq!(q as usize % align, 0, "grown: size {size} align {align}");
                    assert!((0..size).all(|i| *q.add(i) == 0xA5));
                    let grown = Layout::from_size_align(size * 3, align).unwrap();
                    let r = a.realloc(q, grown, size);
                    assert_eq!(r as usize % align, 0, "shrunk: size {size} align {align}");
                    assert!((0..size).all(|i| *r.add(i) == 0xA5));
                    let z = a.alloc_zeroed(layout);
                    assert_eq!(z as usize % align, 0);
                    assert!((0..size).all(|i| *z.add(i) == 0));
                    a.dealloc(z, layout);
                    a.dealloc(r, layout);
                }
            }
        }
    }
}
