//! A handler actor's program as its cell holds it: in the cell itself when it is small, so
//! that such an actor costs one allocation fewer (no box of its own), and boxed otherwise.
//!
//! A [`Program`] is a hand-made trait object of [`Activation`]: a pointer to a table of two
//! functions made for the program's type (`run`, `drop`), beside [`INLINE_WORDS`] words that
//! hold either the program itself (when it fits them and needs no more than a word's
//! alignment) or a `Box` of it. A `Box<dyn Activation>` would be a fat pointer to an allocation
//! of its own; here the two words of that fat pointer become the table pointer and the first
//! data word, so a program that fits costs the cell no byte more than a box did beyond the
//! three words of room, and a program that does not fit costs what a box did.
//!
//! # Invariants
//!
//! - `data` always holds one initialised value of the type `T` that `table` was made for
//!   (`P` or `Box<P>`), placed at its start; `T` fits the words and their alignment.
//! - That value is dropped exactly once, by `Program`'s `Drop`, through `table.drop`.
//! - `T` is `Send` (an `Activation` is), so a `Program` may move between threads; a program
//!   is only ever run through `&mut Program`, so it needs no `Sync`.
//!
//! Moving a `Program` moves the value's bytes, as moving the value would: Rust values have no
//! address of their own to keep (none is pinned here). An activation does not move it, though:
//! the carrier that runs it gets a pointer to it where it lies, in the actor's body ([`Lent`]),
//! so that a program kept in place costs an activation nothing more than a boxed one did.

use std::mem::{MaybeUninit, align_of, size_of};
use std::ptr::NonNull;

use crate::handler::{Activation, Step};

/// Words a program may take to be kept in its cell. Four hold a handler actor whose value is a
/// word or less (the `threadlet` crate's program adds its mailbox, its completion, a start
/// signal and two flags: 32 bytes around a zero-sized actor); with the table pointer they keep
/// the cell's body at its size (`actor_cell_size`), which a fifth word would grow, taking
/// every actor's cell, process actors' too, up an allocation class.
pub(crate) const INLINE_WORDS: usize = 4;

/// See the module docs.
pub(crate) struct Program {
    table: &'static Table,
    data: MaybeUninit<[usize; INLINE_WORDS]>,
}

/// The functions of one stored type.
struct Table {
    /// Runs the value at the pointer (`&mut T`).
    run: unsafe fn(*mut ()) -> Step,
    /// Drops the value at the pointer in place.
    drop: unsafe fn(*mut ()),
    /// Whether the value is the program itself (`false`: a `Box` of it).
    #[cfg_attr(not(test), allow(dead_code))]
    in_place: bool,
}

/// Whether a `T` can be kept in a `Program`'s words.
const fn fits<T>() -> bool {
    size_of::<T>() <= size_of::<[usize; INLINE_WORDS]>() && align_of::<T>() <= align_of::<usize>()
}

/// The table of `T`, as a constant (so `&Tables::<T, _>::TABLE` is promoted to a
/// `'static`); `IN_PLACE` says whether `T` is the program or its box.
struct Tables<T, const IN_PLACE: bool>(std::marker::PhantomData<T>);

impl<T: Activation, const IN_PLACE: bool> Tables<T, IN_PLACE> {
    const TABLE: Table = Table {
        run: run::<T>,
        drop: drop_in_place::<T>,
        in_place: IN_PLACE,
    };
}

/// # Safety
/// `ptr` points to a valid `T` that nothing else accesses for the call.
unsafe fn run<T: Activation>(ptr: *mut ()) -> Step {
    // SAFETY: the caller's promise; `Program::run` passes its own data, which holds a `T`
    // (the module's first invariant), through its `&mut self`.
    unsafe { (*ptr.cast::<T>()).run() }
}

/// # Safety
/// `ptr` points to a valid `T`, which is not used again.
unsafe fn drop_in_place<T>(ptr: *mut ()) {
    // SAFETY: the caller's promise; `Program::drop` passes its own data once (the module's
    // second invariant).
    unsafe { std::ptr::drop_in_place(ptr.cast::<T>()) }
}

impl<P: Activation + ?Sized> Activation for Box<P> {
    fn run(&mut self) -> Step {
        (**self).run()
    }
}

impl Program {
    /// Stores `program`: in place if it fits, else boxed.
    pub(crate) fn new<P: Activation>(program: P) -> Program {
        if fits::<P>() {
            Program::store::<P, true>(program)
        } else {
            Program::store::<Box<P>, false>(Box::new(program))
        }
    }

    /// Whether the program is kept in place (no allocation of its own).
    #[cfg(test)]
    fn is_inline(&self) -> bool {
        self.table.in_place
    }

    fn store<T: Activation, const IN_PLACE: bool>(value: T) -> Program {
        // `new` stores only types that fit: a `P` that does, or a `Box`, one word. (A constant
        // for each `T`, so the check folds away; a `const` block would fail to build for the
        // branch of `new` that is not taken.)
        assert!(fits::<T>());
        let mut data = MaybeUninit::<[usize; INLINE_WORDS]>::uninit();
        // SAFETY: `data` is as large as `T` and aligned for it (`fits`, asserted above), and
        // is uninitialised, so nothing is overwritten that needed a drop. From here `data`
        // holds a `T` and `table` is `T`'s: the module's first invariant.
        unsafe { data.as_mut_ptr().cast::<T>().write(value) };
        Program {
            table: &Tables::<T, IN_PLACE>::TABLE,
            data,
        }
    }

    /// Runs the program (one activation: see `Activation::run`).
    pub(crate) fn run(&mut self) -> Step {
        // SAFETY: `data` holds the `T` that `table` was made for (first invariant), and the
        // `&mut self` makes this the only access to it for the call.
        unsafe { (self.table.run)(self.data.as_mut_ptr().cast()) }
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: `data` holds the `T` of `table` (first invariant), and this is the one drop
        // of it (second invariant): a `Program` is dropped once, and nothing reads `data`
        // after.
        unsafe { (self.table.drop)(self.data.as_mut_ptr().cast()) }
    }
}

// SAFETY: the value it holds is an `Activation`, which is `Send` (third invariant), or a
// `Box` of one; the table is `'static` and immutable.
unsafe impl Send for Program {}

/// A program lent to the carrier that runs one of its activations (`worker.rs`): a pointer
/// to it where it lies, in its actor's body, so that an activation neither moves the program
/// nor copies it through the switch.
///
/// The lending protocol, for each activation:
/// 1. the worker that holds the actor's body makes a `Lent` of the body's program and resumes
///    an idle carrier with it ([`Lent::new`]);
/// 2. until the activation ends, the program stays where it is and nothing but the carrier
///    touches it: the worker leaves the body alone, and if the activation suspends, its
///    carrier goes to the worker's table of suspended activations, not into the body, so that
///    the body (and the program in it) stays in place;
/// 3. the activation ends when the carrier suspends with `Out::Activated` (the program is
///    the body's again) or `Out::Stopped`, after the carrier dropped the program in place
///    ([`Lent::drop_in_place`]; the worker then overwrites the body without dropping it).
///    If the carrier is unwound instead (a kill, or shutdown), the program is intact, and
///    whoever unwound the carrier drops it after.
pub(crate) struct Lent(NonNull<Program>);

impl Lent {
    /// Step 1 of the protocol.
    ///
    /// # Safety
    ///
    /// The caller keeps step 2 until step 3: the program stays in place, and nothing else
    /// uses it or drops it.
    pub(crate) unsafe fn new(program: &mut Program) -> Lent {
        Lent(NonNull::from(program))
    }

    /// The program, for the carrier to run.
    ///
    /// # Safety
    ///
    /// Within step 2 of the protocol (which its maker promised), and no other reference made
    /// through this `Lent` is live.
    pub(crate) unsafe fn get(&mut self) -> &mut Program {
        // SAFETY: the caller's promise: the program is in place, used by nobody else, and
        // this is the one live reference to it.
        unsafe { self.0.as_mut() }
    }

    /// Step 3 for an actor that stopped: drops the program where it lies.
    ///
    /// # Safety
    ///
    /// As for [`get`](Lent::get); the worker overwrites the program's place without a drop
    /// once the carrier suspends with `Out::Stopped`.
    pub(crate) unsafe fn drop_in_place(self) {
        // SAFETY: the caller's promise: the program is valid, unused by anyone else, and will
        // not be dropped again (its owner overwrites it without a drop).
        unsafe { std::ptr::drop_in_place(self.0.as_ptr()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Counts its runs and its drops in a shared counter; `N` words of payload.
    struct Counted<const N: usize> {
        runs: usize,
        drops: Arc<AtomicUsize>,
        _payload: [usize; N],
    }

    impl<const N: usize> Activation for Counted<N> {
        fn run(&mut self) -> Step {
            self.runs += 1;
            if self.runs == 2 {
                Step::Stop
            } else {
                Step::Park
            }
        }
    }

    impl<const N: usize> Drop for Counted<N> {
        fn drop(&mut self) {
            self.drops.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn counted<const N: usize>(drops: &Arc<AtomicUsize>) -> Counted<N> {
        Counted {
            runs: 0,
            drops: drops.clone(),
            _payload: [7; N],
        }
    }

    #[test]
    fn small_programs_are_kept_in_place_and_large_ones_boxed() {
        let drops = Arc::new(AtomicUsize::new(0));
        // Two words of counters, then the payload: two more fit, three do not.
        let mut small = Program::new(counted::<2>(&drops));
        let mut large = Program::new(counted::<3>(&drops));
        assert!(small.is_inline());
        assert!(!large.is_inline());
        for p in [&mut small, &mut large] {
            assert_eq!(p.run(), Step::Park);
            assert_eq!(p.run(), Step::Stop); // the state carried over between runs
        }
        // Moved (as a body is, into a carrier and back), then dropped: once each.
        let moved = (small, large);
        assert_eq!(drops.load(Ordering::Relaxed), 0);
        drop(moved);
        assert_eq!(drops.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn over_aligned_programs_are_boxed() {
        #[repr(align(16))]
        struct Wide(u8);
        impl Activation for Wide {
            fn run(&mut self) -> Step {
                self.0 += 1;
                Step::Yield
            }
        }
        let mut p = Program::new(Wide(0));
        assert!(!p.is_inline());
        assert_eq!(p.run(), Step::Yield);
    }

    #[test]
    fn a_lent_program_runs_and_drops_in_place() {
        let drops = Arc::new(AtomicUsize::new(0));
        let mut slot = std::mem::ManuallyDrop::new(Program::new(counted::<1>(&drops)));
        // SAFETY: `slot` stays in place and unused while `lent` is used.
        let mut lent = unsafe { Lent::new(&mut slot) };
        // SAFETY: the only reference made through `lent`.
        assert_eq!(unsafe { lent.get() }.run(), Step::Park);
        // SAFETY: as above; `slot` is a `ManuallyDrop`, so it is not dropped a second time.
        unsafe { lent.drop_in_place() };
        assert_eq!(drops.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_program_is_five_words() {
        assert_eq!(
            size_of::<Program>(),
            (INLINE_WORDS + 1) * size_of::<usize>()
        );
    }
}
