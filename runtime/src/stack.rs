//! Guarded coroutine stacks, carved from large reserved regions and recycled through pools.
//!
//! # What this module owns
//!
//! * [`StackSlab`]: one per runtime, shared by all workers. It reserves address space in
//!   [`STACKS_PER_CHUNK`]-stack chunks with `mmap(MAP_NORESERVE)`, installs one guard page below
//!   every stack, and keeps the stacks that worker pools spill into and refill from: dirty
//!   batches (pages still resident, trimmed after `TRIM_AFTER`) and a free list (pages given
//!   back). Under `mprotect` guards it also counts the spawns' reservations
//!   ([`reserve`](StackSlab::reserve)) against the cap on kernel mappings.
//! * [`StackPool`]: one per worker, owned by it alone. An actor's first run (`WorkerLoop::start`)
//!   takes a stack of the runtime's size from it; in steady state that pops a warm stack from
//!   this `Vec` and costs no system call and no lock. Spawning takes nothing from it.
//! * [`Stack`]: one stack slot, handed to `corosensei` for the life of one actor.
//! * [`OwnedStack`]: a stack of a custom size, with a mapping and guard of its own, mapped at
//!   spawn for one actor and unmapped after.
//!
//! # Invariants
//!
//! 1. A slot is `GUARD` bytes of guard page followed by `size` usable bytes. The guard is
//!    installed once, when the chunk is carved, and stays for the life of the runtime.
//! 2. A [`Stack`] is owned by exactly one place at a time: a pool, the slab's dirty batches or
//!    free list, or one coroutine. Its memory is only ever touched by code running on that
//!    coroutine.
//! 3. Chunks are never unmapped while the slab lives; the slab is dropped only after every worker
//!    has exited and every coroutine has been dropped (the runtime's shutdown protocol).
//!
//! # Guard pages
//!
//! `mprotect` splits a mapping, so each mprotect-guarded stack costs two kernel VMAs and
//! `vm.max_map_count` (65,530 by default) caps a process at about 32,700 of them. Linux 6.13
//! added `madvise(MADV_GUARD_INSTALL)`, which marks pages as guards inside the page tables
//! without splitting the mapping, so a million guarded stacks fit in one VMA per chunk. The slab
//! probes for it when it is created (once per process) and falls back to `mprotect`, refusing (with an error that names
//! the sysctl) before the map count would run out.

use std::collections::VecDeque;
use std::io;
use std::num::NonZeroUsize;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// Page size assumed for guards and alignment; `Builder::build` refuses machines whose page
/// size differs.
pub const PAGE_SIZE: usize = 4096;

/// Size of the guard below every stack.
pub(crate) const GUARD: usize = PAGE_SIZE;

/// Smallest stack the runtime accepts. corosensei needs 4 KiB; our entry frame, a panic's
/// unwinding and the payload formatting need more than that, so one page is not enough. (A
/// panic's backtrace, when `RUST_BACKTRACE` asks for one, is captured on the actor's stack and
/// formatted on a thread of its own: the lookup of its symbols would not fit.)
///
/// ```
/// use threadlet_runtime::{MIN_STACK_SIZE, Runtime};
///
/// let rt = Runtime::builder().workers(1).stack_size(MIN_STACK_SIZE).build().unwrap();
/// assert_eq!(rt.block_on(|| 1), 1);
/// assert!(Runtime::builder().stack_size(MIN_STACK_SIZE - 4096).build().is_err());
/// ```
pub const MIN_STACK_SIZE: usize = 16 * 1024;

/// The largest stack an actor may ask for: 1 GiB, Go's cap for a goroutine's stack on 64-bit
/// machines. Stacks are reserved address space (only touched pages cost memory), but the slab
/// carves them 64 at a time, and a size near `usize::MAX` cannot be mapped at all; refusing it
/// when the runtime is built or the actor spawned gives a clear error instead of a failure at
/// the actor's first run.
///
/// ```
/// use threadlet_runtime::{BuildError, MAX_STACK_SIZE, Runtime};
///
/// let err = Runtime::builder().stack_size(2 * MAX_STACK_SIZE).build().unwrap_err();
/// assert!(matches!(err, BuildError::StackTooLarge { maximum, .. } if maximum == MAX_STACK_SIZE));
/// ```
pub const MAX_STACK_SIZE: usize = 1 << 30;

/// Default usable stack size per actor: 64 KiB reserved, of which only touched pages cost memory.
///
/// ```
/// use threadlet_runtime::{DEFAULT_STACK_SIZE, Runtime};
///
/// assert_eq!(DEFAULT_STACK_SIZE, 64 * 1024);
/// let rt = Runtime::builder().workers(1).build().unwrap();
/// assert_eq!(rt.stack_size(), DEFAULT_STACK_SIZE);
/// ```
pub const DEFAULT_STACK_SIZE: usize = 64 * 1024;

/// Stacks reserved per `mmap` call. 64 amortises the system calls of carving (one `mmap` and
/// one `process_madvise`, or 64 `madvise` on older kernels) over 64 spawns while keeping a
/// chunk of 64 KiB stacks at about 4 MiB of address space.
const STACKS_PER_CHUNK: usize = 64;

/// Warm stacks a worker keeps for itself. Past this, ended actors' stacks are released to the
/// slab's free list with their pages given back to the kernel (`MADV_DONTNEED`), so that a burst
/// of a million short actors does not pin a million touched stacks.
const WARM_STACKS_PER_WORKER: usize = 1024;

/// How long the pages of ended actors' stacks stay resident before an idle worker gives them
/// back to the kernel. Long enough that a program that spawns bursts of actors reuses warm
/// stacks from one burst to the next; short enough that memory returns soon after a burst.
/// (Go's scavenger makes the same trade over a few seconds.)
const TRIM_AFTER: Duration = Duration::from_secs(1);

/// One `give_back` of stacks whose pages are still resident.
struct DirtyBatch {
    since: Instant,
    stacks: Vec<Stack>,
}

/// How many stacks a worker takes from (or gives to) the slab's free list at once.
const POOL_BATCH: usize = 64;

/// Stacks kept out of reservations under `mprotect` guards, for the chunks that workers carve
/// before they need them (a chunk per worker, generously).
const RESERVE_HEADROOM: usize = 64 * STACKS_PER_CHUNK;

/// `madvise` advice that installs guard markers (Linux 6.13+); not yet in the `libc` crate.
const MADV_GUARD_INSTALL: libc::c_int = 102;

/// Share of `vm.max_map_count` that mprotect-guarded stacks may use, leaving the rest to the
/// allocator, shared libraries and the application.
const MAP_COUNT_SHARE_PERCENT: usize = 90;

/// One guarded stack slot. See the module docs for its layout and ownership.
#[derive(Debug)]
pub struct Stack {
    /// Lowest address of the slot: the start of its guard page.
    slot: NonZeroUsize,
    /// Usable bytes above the guard.
    size: usize,
}

// SAFETY: a `Stack` is a unique handle to a slot of anonymous memory (invariant 2); it holds no
// thread-affine state, so moving the handle between threads is sound.
unsafe impl Send for Stack {}

impl Stack {
    /// Usable size in bytes.
    #[cfg(test)]
    pub fn size(&self) -> usize {
        self.size
    }

    /// The guard page's address range.
    #[cfg(test)]
    pub fn guard_range(&self) -> (usize, usize) {
        (self.slot.get(), self.slot.get() + GUARD)
    }

    /// Its guard page and usable size, for the overflow reporter.
    pub(crate) fn guard_span(&self) -> GuardSpan {
        GuardSpan::new(self.slot.get(), self.size)
    }
}

/// What the overflow report knows of the stack an actor runs on (`guard.rs`): where the
/// stack's guard page starts, and its usable size, in one word (as two, they took the actor
/// cell out of its allocation class: see `actor_cell_size`).
///
/// The guard page's number (its address over `PAGE_SIZE`) fills the low `PAGE_NUMBER_BITS`
/// bits, the stack's size in pages the bits above. 45 bits of page number cover a 57-bit
/// address space (five-level paging), and the 19 bits above hold `MAX_STACK_SIZE` in pages.
/// A stack that would not fit (none on today's machines) gets `NONE`: its overflow is then
/// reported as a plain crash, without the actor's name.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct GuardSpan(u64);

/// Low bits of a `GuardSpan`: the guard page's number.
const PAGE_NUMBER_BITS: u32 = 45;

const _: () = assert!(MAX_STACK_SIZE / PAGE_SIZE < 1 << (64 - PAGE_NUMBER_BITS));

impl GuardSpan {
    /// No stack (an actor that has not started).
    pub(crate) const NONE: GuardSpan = GuardSpan(0);

    /// The span of a stack whose guard page starts at `guard`, with `size` usable bytes
    /// above it (both page aligned).
    fn new(guard: usize, size: usize) -> GuardSpan {
        let page = (guard / PAGE_SIZE) as u64;
        let pages = (size / PAGE_SIZE) as u64;
        if page == 0 || page >= 1 << PAGE_NUMBER_BITS || pages >= 1 << (64 - PAGE_NUMBER_BITS) {
            return GuardSpan::NONE;
        }
        GuardSpan(pages << PAGE_NUMBER_BITS | page)
    }

    /// Whether `addr` is in the guard page (never, for `NONE`).
    pub(crate) fn guards(self, addr: usize) -> bool {
        let lo = (self.0 & ((1 << PAGE_NUMBER_BITS) - 1)) as usize * PAGE_SIZE;
        lo != 0 && (lo..lo + GUARD).contains(&addr)
    }

    /// The stack's usable size in bytes.
    pub(crate) fn usable_size(self) -> usize {
        (self.0 >> PAGE_NUMBER_BITS) as usize * PAGE_SIZE
    }
}

// SAFETY: `base` and `limit` bound memory that this handle owns exclusively; `limit` includes
// the guard page that catches overflow (installed when the chunk was carved, invariant 1), and the
// usable size is at least `MIN_STACK_SIZE` (checked by the builder), above corosensei's 4 KiB.
// Both addresses are page aligned, hence aligned to `STACK_ALIGNMENT`.
unsafe impl corosensei::stack::Stack for Stack {
    fn base(&self) -> corosensei::stack::StackPointer {
        NonZeroUsize::new(self.slot.get() + GUARD + self.size).expect("stack base overflow")
    }

    fn limit(&self) -> corosensei::stack::StackPointer {
        self.slot
    }
}

/// How the slab guards its stacks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GuardKind {
    /// `madvise(MADV_GUARD_INSTALL)`: no kernel mapping per stack.
    Madvise,
    /// `mprotect(PROT_NONE)`: two kernel mappings per stack, capped by `vm.max_map_count`.
    Mprotect,
}

/// Custom-size stacks ([`OwnedStack`]) alive in the process under `mprotect` guards (where
/// each costs two kernel mappings), for the cap of `StackSlab::map_owned` and `carve_chunk`.
/// Process-wide, as the limit on mappings is; the guard kind is too (`probe_guard_kind`).
static OWNED_MPROTECT_STACKS: AtomicUsize = AtomicUsize::new(0);

/// The runtime-wide source of stacks of the runtime's default size.
pub struct StackSlab {
    size: usize,
    guard: GuardKind,
    /// Slots guarded with `mprotect` so far (chunks are never unmapped); with the custom-size
    /// stacks alive (`OWNED_MPROTECT_STACKS`), against `mprotect_limit`.
    mprotect_guarded: AtomicUsize,
    mprotect_limit: usize,
    /// Live actors holding a reservation (`mprotect` guards only).
    reserved: AtomicUsize,
    /// Stacks returned by workers with their pages released.
    free: Mutex<Vec<Stack>>,
    /// Batches of stacks returned by workers with their pages still resident, oldest first,
    /// waiting for `trim`; reused first (newest first), since they are warm.
    dirty: Mutex<VecDeque<DirtyBatch>>,
    /// Stacks in `dirty`, read without the lock by idle workers.
    dirty_len: AtomicUsize,
    /// Every chunk ever mapped, for `Drop`.
    chunks: Mutex<Vec<(usize, usize)>>,
    /// Stacks carved so far (for stats and tests).
    carved: AtomicUsize,
}

impl StackSlab {
    /// Creates a slab of stacks with `size` usable bytes each. `size` must be page aligned and at
    /// least [`MIN_STACK_SIZE`]; the builder checks both.
    pub fn new(size: usize) -> StackSlab {
        debug_assert!(size >= MIN_STACK_SIZE && size.is_multiple_of(PAGE_SIZE));
        StackSlab {
            size,
            guard: probe_guard_kind(),
            mprotect_guarded: AtomicUsize::new(0),
            reserved: AtomicUsize::new(0),
            mprotect_limit: max_map_count() * MAP_COUNT_SHARE_PERCENT / 100 / 2,
            free: Mutex::new(Vec::new()),
            dirty: Mutex::new(VecDeque::new()),
            dirty_len: AtomicUsize::new(0),
            chunks: Mutex::new(Vec::new()),
            carved: AtomicUsize::new(0),
        }
    }

    /// Usable size of this slab's stacks.
    pub fn stack_size(&self) -> usize {
        self.size
    }

    /// Reserves a stack for an actor being spawned, so that it is sure to get one when it
    /// starts (stacks are taken lazily, at the first run). Only `mprotect` guards have a hard
    /// cap; there the reservation fails with the error that names `vm.max_map_count`. Returns
    /// whether a reservation was taken (to be released with [`unreserve`](StackSlab::unreserve)).
    pub fn reserve(&self) -> io::Result<bool> {
        if self.guard == GuardKind::Madvise {
            return Ok(false);
        }
        // Leave room for the chunks that workers carve ahead of need.
        let cap = self.mprotect_limit.saturating_sub(RESERVE_HEADROOM);
        if self.reserved.fetch_add(1, Ordering::Relaxed) >= cap {
            self.reserved.fetch_sub(1, Ordering::Relaxed);
            return Err(self.map_count_error());
        }
        Ok(true)
    }

    /// Releases a reservation taken by [`reserve`](StackSlab::reserve).
    pub fn unreserve(&self) {
        self.reserved.fetch_sub(1, Ordering::Relaxed);
    }

    fn map_count_error(&self) -> io::Error {
        io::Error::other(format!(
            "threadlet: cannot guard more than {} stacks with mprotect: each costs two kernel \
             mappings and vm.max_map_count is {}. Raise it (sysctl -w vm.max_map_count=N) or \
             run on Linux 6.13+, whose MADV_GUARD_INSTALL needs no mapping per stack",
            self.mprotect_limit.saturating_sub(RESERVE_HEADROOM),
            max_map_count()
        ))
    }

    /// Maps a stack of a size other than the slab's for one actor ([`OwnedStack`]). Under
    /// `mprotect` guards it costs the same two kernel mappings as a slot, so it counts against
    /// the same cap as the slots carved: past it, the error names `vm.max_map_count`, rather
    /// than the process running out of mappings elsewhere (carved slots stay counted after
    /// their actors end, so reservations alone did not bound the mappings).
    pub fn map_owned(&self, size: usize) -> io::Result<OwnedStack> {
        // Against the slots carved and the custom stacks alive. (Two racing calls may both
        // pass at the edge: the cap keeps a tenth of the limit spare, `MAP_COUNT_SHARE_PERCENT`.)
        if self.guard == GuardKind::Mprotect
            && self.mprotect_guarded.load(Ordering::Relaxed)
                + OWNED_MPROTECT_STACKS.load(Ordering::Relaxed)
                >= self.mprotect_limit
        {
            return Err(self.map_count_error());
        }
        OwnedStack::new(size)
    }

    /// Which guard mechanism this slab uses.
    pub fn guard_kind(&self) -> GuardKind {
        self.guard
    }

    /// Stacks carved so far.
    pub fn carved(&self) -> usize {
        self.carved.load(Ordering::Relaxed)
    }

    /// Moves up to `POOL_BATCH` stacks into `out`, carving a new chunk when the free list is empty.
    fn refill(&self, out: &mut Vec<Stack>) -> io::Result<()> {
        {
            let mut dirty = self.dirty.lock();
            if let Some(batch) = dirty.pop_back() {
                self.dirty_len
                    .fetch_sub(batch.stacks.len(), Ordering::Relaxed);
                out.extend(batch.stacks);
                return Ok(());
            }
        }
        {
            let mut free = self.free.lock();
            let take = free.len().min(POOL_BATCH);
            if take > 0 {
                let at = free.len() - take;
                out.extend(free.drain(at..));
                return Ok(());
            }
        }
        self.carve_chunk(out)
    }

    /// Maps a fresh chunk, guards every slot, and pushes the slots into `out`.
    fn carve_chunk(&self, out: &mut Vec<Stack>) -> io::Result<()> {
        let slot_size = GUARD + self.size;
        let count = STACKS_PER_CHUNK;
        if self.guard == GuardKind::Mprotect {
            let before = self.mprotect_guarded.fetch_add(count, Ordering::Relaxed);
            let owned = OWNED_MPROTECT_STACKS.load(Ordering::Relaxed);
            if before + count + owned > self.mprotect_limit {
                self.mprotect_guarded.fetch_sub(count, Ordering::Relaxed);
                return Err(self.map_count_error());
            }
        }
        // The slots counted above that got no guard (a refused mapping, or a guard refused
        // part way) give their count back: each failed carve would otherwise keep a chunk's
        // worth of the cap for good.
        let uncount = |unguarded: usize| {
            if self.guard == GuardKind::Mprotect {
                self.mprotect_guarded
                    .fetch_sub(unguarded, Ordering::Relaxed);
            }
        };
        let len = slot_size * count;
        let base = map_stacks(len).inspect_err(|_| uncount(count))?;
        self.chunks.lock().push((base, len));
        let slots: [usize; STACKS_PER_CHUNK] = std::array::from_fn(|i| base + i * slot_size);
        let mut guarded = count;
        if !(self.guard == GuardKind::Madvise && install_guards_at_once(&slots)) {
            for (i, &slot) in slots.iter().enumerate() {
                if let Err(e) = install_guard(slot, self.guard) {
                    uncount(count - i);
                    if i == 0 {
                        return Err(e);
                    }
                    // The slots guarded so far are handed out; the rest of the chunk stays
                    // mapped, unused, until the slab goes (`chunks`).
                    guarded = i;
                    break;
                }
            }
        }
        for &slot in &slots[..guarded] {
            out.push(Stack {
                slot: NonZeroUsize::new(slot).expect("mmap returned null"),
                size: self.size,
            });
        }
        self.carved.fetch_add(guarded, Ordering::Relaxed);
        Ok(())
    }

    /// Takes back stacks a worker no longer keeps warm. Their pages stay resident until a
    /// [`trim`](StackSlab::trim) at least `TRIM_AFTER` later, so a burst of ending actors costs
    /// no system call, and a new burst soon after reuses warm stacks.
    fn give_back(&self, stacks: impl Iterator<Item = Stack>) {
        let stacks: Vec<Stack> = stacks.collect();
        if stacks.is_empty() {
            return;
        }
        self.dirty_len.fetch_add(stacks.len(), Ordering::Relaxed);
        self.dirty.lock().push_back(DirtyBatch {
            since: Instant::now(),
            stacks,
        });
    }

    /// Gives back to the kernel the pages of stacks returned at least `TRIM_AFTER` ago, and
    /// returns how long until the next batch is due (`None`: nothing left to trim).
    ///
    /// Idle workers call it before parking (and park no longer than it says), so the system
    /// calls, and the TLB shootdowns they cause on every core, happen when a core has nothing
    /// better to do. Neighbouring stacks of one chunk are released with one call: with
    /// `MADV_GUARD_INSTALL` guards the range may span the guard pages between them, since guard
    /// markers survive `MADV_DONTNEED` (checked by `guard_pages_fault_and_survive_trim`).
    pub fn trim(&self, now: Instant) -> Option<Duration> {
        self.trim_where(now, |since| {
            now.saturating_duration_since(since) >= TRIM_AFTER
        })
    }

    /// Gives back to the kernel the pages of every stack returned so far, however recently: at
    /// the end of the runtime's shutdown, when no worker is left to trim them later and no
    /// stack will be taken again, so that a [`Handle`](crate::Handle) kept after the drop, which
    /// keeps the slab, keeps its address space but not its memory.
    pub fn trim_all(&self) {
        self.trim_where(Instant::now(), |_| true);
    }

    /// Stacks given back whose pages are still resident (for tests).
    #[cfg(test)]
    pub(crate) fn resident_free(&self) -> usize {
        self.dirty_len.load(Ordering::Relaxed)
    }

    /// [`trim`](StackSlab::trim) of the oldest batches, as long as `due` says so of the time
    /// each was given back.
    fn trim_where(&self, now: Instant, due: impl Fn(Instant) -> bool) -> Option<Duration> {
        if self.dirty_len.load(Ordering::Relaxed) == 0 {
            return None;
        }
        let mut stacks = Vec::new();
        let next_due = {
            let mut dirty = self.dirty.lock();
            while dirty.front().is_some_and(|b| due(b.since)) {
                let batch = dirty.pop_front().expect("checked");
                stacks.extend(batch.stacks);
            }
            self.dirty_len.fetch_sub(stacks.len(), Ordering::Relaxed);
            dirty
                .front()
                .map(|b| TRIM_AFTER.saturating_sub(now - b.since))
        };
        if stacks.is_empty() {
            return next_due;
        }
        stacks.sort_unstable_by_key(|s| s.slot);
        let slot_size = GUARD + self.size;
        let mut i = 0;
        while i < stacks.len() {
            let mut j = i + 1;
            if self.guard == GuardKind::Madvise {
                while j < stacks.len()
                    && stacks[j].slot.get() == stacks[j - 1].slot.get() + slot_size
                {
                    j += 1;
                }
            }
            let start = stacks[i].slot.get() + GUARD;
            let end = stacks[j - 1].slot.get() + slot_size;
            // SAFETY: every stack in `i..j` is owned by this list (invariant 2) and no coroutine
            // runs on it; the range covers their usable parts and, between neighbours, their
            // guard pages, whose markers `MADV_DONTNEED` leaves in place. All of it lies in the
            // slab's live chunks (invariant 3): two neighbours may sit in two chunks that the
            // kernel mapped next to each other, both the slab's, and never unmapped.
            unsafe {
                libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED);
            }
            i = j;
        }
        self.free.lock().append(&mut stacks);
        next_due
    }
}

impl Drop for StackSlab {
    fn drop(&mut self) {
        for &(base, len) in self.chunks.get_mut().iter() {
            // SAFETY: the slab outlives every stack carved from it (invariant 3), so no coroutine
            // runs on this chunk any more; the range is exactly one mapping we made.
            unsafe {
                libc::munmap(base as *mut libc::c_void, len);
            }
        }
    }
}

/// A worker's own cache of warm stacks. Only its worker touches it.
pub struct StackPool {
    warm: Vec<Stack>,
}

impl StackPool {
    /// An empty pool; it fills from the slab on first use.
    pub fn new() -> StackPool {
        StackPool { warm: Vec::new() }
    }

    /// Takes a stack of the slab's size: a warm one if any, else from the slab.
    pub fn take(&mut self, slab: &StackSlab) -> io::Result<Stack> {
        if let Some(stack) = self.warm.pop() {
            return Ok(stack);
        }
        slab.refill(&mut self.warm)?;
        Ok(self.warm.pop().expect("refill yields at least one stack"))
    }

    /// Returns a stack of the slab's size; past `WARM_STACKS_PER_WORKER`, a batch goes back to
    /// the slab with its pages released.
    pub fn put(&mut self, stack: Stack, slab: &StackSlab) {
        debug_assert_eq!(stack.size, slab.size);
        self.warm.push(stack);
        if self.warm.len() > WARM_STACKS_PER_WORKER {
            let at = self.warm.len() - POOL_BATCH;
            slab.give_back(self.warm.drain(at..));
        }
    }

    /// Hands every stack back to the slab (worker exit).
    pub fn drain_into(&mut self, slab: &StackSlab) {
        slab.give_back(self.warm.drain(..));
    }
}

impl Default for StackPool {
    fn default() -> Self {
        Self::new()
    }
}

/// A stack of a size other than the runtime's default, mapped for one actor and unmapped after.
pub struct OwnedStack {
    /// The whole mapping: the guard page, then the usable bytes (`GUARD + size`).
    stack: Stack,
}

impl OwnedStack {
    /// Maps a guarded stack of `size` usable bytes (page aligned, at least `MIN_STACK_SIZE`).
    pub fn new(size: usize) -> io::Result<OwnedStack> {
        let len = GUARD + size;
        let slot = map_stacks(len)?;
        if let Err(e) = install_guard(slot, probe_guard_kind()) {
            // SAFETY: `map_stacks` just made this mapping, and nothing else refers to it.
            unsafe { libc::munmap(slot as *mut libc::c_void, len) };
            return Err(e);
        }
        if probe_guard_kind() == GuardKind::Mprotect {
            // Given back in `drop`.
            OWNED_MPROTECT_STACKS.fetch_add(1, Ordering::Relaxed);
        }
        Ok(OwnedStack {
            stack: Stack {
                slot: NonZeroUsize::new(slot).expect("mmap returned null"),
                size,
            },
        })
    }

    /// The guard page's address range.
    #[cfg(test)]
    pub fn guard_range(&self) -> (usize, usize) {
        self.stack.guard_range()
    }

    /// Its guard page and usable size, for the overflow reporter.
    pub(crate) fn guard_span(&self) -> GuardSpan {
        self.stack.guard_span()
    }
}

impl Drop for OwnedStack {
    fn drop(&mut self) {
        // SAFETY: this mapping belongs to this value alone, and the coroutine that ran on it has
        // been dropped before the stack (corosensei hands the stack back only when done).
        unsafe {
            libc::munmap(
                self.stack.slot.get() as *mut libc::c_void,
                GUARD + self.stack.size,
            );
        }
        if probe_guard_kind() == GuardKind::Mprotect {
            OWNED_MPROTECT_STACKS.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

// SAFETY: delegates to the inner `Stack`, whose contract holds for the whole mapping.
unsafe impl corosensei::stack::Stack for OwnedStack {
    fn base(&self) -> corosensei::stack::StackPointer {
        self.stack.base()
    }

    fn limit(&self) -> corosensei::stack::StackPointer {
        self.stack.limit()
    }
}

/// Reserves `len` bytes of fresh address space for stacks (a chunk, or one custom-size stack);
/// returns its address.
fn map_stacks(len: usize) -> io::Result<usize> {
    // SAFETY: an anonymous private mapping at an address of the kernel's choosing aliases
    // nothing; MAP_NORESERVE only defers commit, so untouched stack pages cost no memory.
    let base = unsafe {
        libc::mmap(
            ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if base == libc::MAP_FAILED {
        Err(io::Error::last_os_error())
    } else {
        Ok(base as usize)
    }
}

/// Installs the guard page at `slot`.
fn install_guard(slot: usize, kind: GuardKind) -> io::Result<()> {
    let rc = match kind {
        // SAFETY: `slot` is the first page of a mapping we own; marking it as a guard only makes
        // accesses to it fault, which is the point.
        GuardKind::Madvise => unsafe {
            libc::madvise(slot as *mut libc::c_void, GUARD, MADV_GUARD_INSTALL)
        },
        // SAFETY: as above, with page protections instead of guard markers.
        GuardKind::Mprotect => unsafe {
            libc::mprotect(slot as *mut libc::c_void, GUARD, libc::PROT_NONE)
        },
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `process_madvise`'s name for the calling thread (`PIDFD_SELF_THREAD`), whose memory is the
/// process's: -10000 since it appeared (Linux 6.14), where the thread-group name was
/// renumbered later (-20000, then -10001) and, after the main thread exits, names a leader
/// with no memory at all. A kernel without it refuses it as a bad file descriptor.
const PIDFD_SELF_THREAD: libc::c_int = -10000;

/// Whether the kernel refused `process_madvise` for guard markers (an older kernel, an unknown
/// sentinel, a filter on the call): not asked again. A passing failure (out of memory, a
/// signal) only sends that chunk down the one-by-one path.
static GUARDS_AT_ONCE_REFUSED: AtomicBool = AtomicBool::new(false);

/// Installs guard markers at every slot of a chunk with one system call: `process_madvise` on
/// the calling process takes any advice since Linux 6.13, and a vector of ranges (with the
/// calling thread's sentinel, since 6.14). So carving a chunk costs two system calls, not
/// `STACKS_PER_CHUNK + 1`: a first run of 100,000 process actors makes 100,000 fewer. `false`
/// if not all were installed (the kernel refused, or stopped part way); the caller then
/// installs each with `madvise`, which is harmless for a slot that has its guard already.
fn install_guards_at_once(slots: &[usize; STACKS_PER_CHUNK]) -> bool {
    // Relaxed: a hint that saves a refused call; a stale `false` only costs one more.
    if GUARDS_AT_ONCE_REFUSED.load(Ordering::Relaxed) {
        return false;
    }
    let ranges: [libc::iovec; STACKS_PER_CHUNK] = std::array::from_fn(|i| libc::iovec {
        iov_base: slots[i] as *mut libc::c_void,
        iov_len: GUARD,
    });
    // SAFETY: each range is the first page of a slot of a mapping this slab owns (as in
    // `install_guard`); `ranges` outlives the call, which reads `STACKS_PER_CHUNK` entries
    // (within the kernel's `UIO_MAXIOV` of 1,024). The sentinel names the calling process
    // alone (its thread, whose memory is the process's), also in a forked child, so no other
    // process's memory is advised.
    let advised = unsafe {
        libc::syscall(
            libc::SYS_process_madvise,
            PIDFD_SELF_THREAD,
            ranges.as_ptr(),
            ranges.len(),
            MADV_GUARD_INSTALL,
            0,
        )
    };
    if advised < 0
        && matches!(
            io::Error::last_os_error().raw_os_error(),
            Some(libc::EBADF | libc::EINVAL | libc::ENOSYS | libc::EPERM | libc::ESRCH)
        )
    {
        GUARDS_AT_ONCE_REFUSED.store(true, Ordering::Relaxed);
    }
    advised == (GUARD * STACKS_PER_CHUNK) as libc::c_long
}

/// Finds out once per process whether the kernel has `MADV_GUARD_INSTALL`.
pub fn probe_guard_kind() -> GuardKind {
    static KIND: std::sync::OnceLock<GuardKind> = std::sync::OnceLock::new();
    *KIND.get_or_init(|| {
        if std::env::var_os("THREADLET_FORCE_MPROTECT_GUARDS").is_some() {
            return GuardKind::Mprotect;
        }
        // SAFETY: a private one-page probe mapping, unmapped before returning.
        unsafe {
            let page = libc::mmap(
                ptr::null_mut(),
                PAGE_SIZE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            if page == libc::MAP_FAILED {
                return GuardKind::Mprotect;
            }
            let ok = libc::madvise(page, PAGE_SIZE, MADV_GUARD_INSTALL) == 0;
            libc::munmap(page, PAGE_SIZE);
            if ok {
                GuardKind::Madvise
            } else {
                GuardKind::Mprotect
            }
        }
    })
}

/// `vm.max_map_count`, or the usual default where it cannot be read.
fn max_map_count() -> usize {
    std::fs::read_to_string("/proc/sys/vm/max_map_count")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(65_530)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_guard_span_keeps_its_guard_page_and_size() {
        let guard = 0x7f12_3456_7000;
        let span = GuardSpan::new(guard, MAX_STACK_SIZE);
        assert_eq!(span.usable_size(), MAX_STACK_SIZE);
        assert!(span.guards(guard) && span.guards(guard + GUARD - 1));
        assert!(!span.guards(guard - 1) && !span.guards(guard + GUARD));
        let small = GuardSpan::new(PAGE_SIZE, MIN_STACK_SIZE);
        assert_eq!(small.usable_size(), MIN_STACK_SIZE);
        assert!(small.guards(PAGE_SIZE));
        // None, and what does not fit, guard nothing (the fault is then not ours).
        assert!(!GuardSpan::NONE.guards(0) && !GuardSpan::NONE.guards(PAGE_SIZE));
        let beyond = GuardSpan::new(PAGE_SIZE << PAGE_NUMBER_BITS, MIN_STACK_SIZE);
        assert_eq!(beyond, GuardSpan::NONE);
    }

    #[test]
    fn pool_recycles_warm_stacks() {
        let slab = StackSlab::new(DEFAULT_STACK_SIZE);
        let mut pool = StackPool::new();
        let a = pool.take(&slab).unwrap();
        let addr = a.slot;
        pool.put(a, &slab);
        let b = pool.take(&slab).unwrap();
        assert_eq!(b.slot, addr, "the warm stack is reused first");
        assert_eq!(slab.carved(), STACKS_PER_CHUNK);
        pool.put(b, &slab);
        pool.drain_into(&slab);
    }

    #[test]
    fn stack_memory_is_usable_and_guarded_below() {
        let slab = StackSlab::new(DEFAULT_STACK_SIZE);
        let mut pool = StackPool::new();
        let s = pool.take(&slab).unwrap();
        use corosensei::stack::Stack as _;
        let (lo, hi) = s.guard_range();
        assert_eq!(s.limit().get(), lo);
        assert_eq!(hi + s.size(), s.base().get());
        // The usable range is writable.
        // SAFETY: the usable range belongs to `s`, which no coroutine uses.
        unsafe { ptr::write_bytes(hi as *mut u8, 0xAB, s.size()) };
        pool.put(s, &slab);
        pool.drain_into(&slab);
    }

    #[test]
    fn many_pools_spill_to_the_slab() {
        let slab = StackSlab::new(MIN_STACK_SIZE);
        let mut pool = StackPool::new();
        let stacks: Vec<_> = (0..WARM_STACKS_PER_WORKER + 100)
            .map(|_| pool.take(&slab).unwrap())
            .collect();
        for s in stacks {
            pool.put(s, &slab);
        }
        assert!(pool.warm.len() <= WARM_STACKS_PER_WORKER);
        let due = slab.trim(Instant::now());
        assert!(
            due.is_some_and(|d| d <= TRIM_AFTER),
            "nothing is due yet: {due:?}"
        );
        assert_eq!(slab.trim(Instant::now() + TRIM_AFTER), None);
        assert!(!slab.free.lock().is_empty());
        // Trimmed stacks are zeroed and usable again.
        let s = pool.take(&slab).unwrap();
        pool.put(s, &slab);
        pool.drain_into(&slab);
    }

    /// Touches `addr` in a forked child and reports whether the child died of SIGSEGV.
    fn faults_in_child(addr: usize) -> bool {
        // SAFETY: the child only writes one byte and exits, touching no lock or allocator that
        // another thread of the test binary might hold.
        unsafe {
            let pid = libc::fork();
            assert!(pid >= 0);
            if pid == 0 {
                ptr::write_volatile(addr as *mut u8, 1);
                libc::_exit(0);
            }
            let mut status = 0;
            libc::waitpid(pid, &mut status, 0);
            libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGSEGV
        }
    }

    #[test]
    fn guard_pages_fault_and_survive_trim() {
        let slab = StackSlab::new(MIN_STACK_SIZE);
        let mut pool = StackPool::new();
        let stacks: Vec<_> = (0..STACKS_PER_CHUNK)
            .map(|_| pool.take(&slab).unwrap())
            .collect();
        let guards: Vec<_> = stacks.iter().map(|s| s.guard_range()).collect();
        for s in &stacks {
            let (_, hi) = s.guard_range();
            // SAFETY: usable memory of a stack no coroutine uses.
            unsafe { ptr::write_bytes(hi as *mut u8, 7, s.size()) };
        }
        slab.give_back(stacks.into_iter());
        slab.trim(Instant::now() + TRIM_AFTER);
        for &(lo, hi) in guards.iter().step_by(7) {
            assert!(
                faults_in_child(lo),
                "guard at {lo:#x} must fault after trim"
            );
            assert!(
                !faults_in_child(hi),
                "usable page above the guard must not fault"
            );
        }
        pool.drain_into(&slab);
    }

    /// The one-call guards of a chunk (`install_guards_at_once`) fault, each of them, and the
    /// pages between them stay usable. Where the kernel refuses the call, the test checks the
    /// fallback, one `madvise` per slot.
    #[test]
    fn guards_installed_at_once_fault() {
        if probe_guard_kind() != GuardKind::Madvise {
            return; // No guard markers here: `mprotect` guards, tested above.
        }
        let slot_size = GUARD + MIN_STACK_SIZE;
        let len = slot_size * STACKS_PER_CHUNK;
        let base = map_stacks(len).unwrap();
        let slots: [usize; STACKS_PER_CHUNK] = std::array::from_fn(|i| base + i * slot_size);
        if !install_guards_at_once(&slots) {
            for &slot in &slots {
                install_guard(slot, GuardKind::Madvise).unwrap();
            }
        }
        for &slot in slots.iter().step_by(5).chain(slots.last()) {
            assert!(faults_in_child(slot), "guard at {slot:#x} must fault");
            assert!(
                !faults_in_child(slot + GUARD),
                "the stack above it must not"
            );
        }
        // SAFETY: the mapping made above, no longer used.
        unsafe { libc::munmap(base as *mut libc::c_void, len) };
    }

    #[test]
    fn owned_stacks_map_and_unmap() {
        let s = OwnedStack::new(256 * 1024).unwrap();
        let (_, hi) = s.guard_range();
        // SAFETY: the first usable byte of a stack no coroutine uses.
        unsafe { ptr::write(hi as *mut u8, 1) };
    }
}
