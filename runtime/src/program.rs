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

use std::marker::PhantomData;
use std::mem::{MaybeUninit, align_of, size_of};
use std::ptr::NonNull;

use crate::actor::Body;
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
    /// Neither `Send` nor `Sync` by itself: the fields above would make it both whatever it
    /// holds. `Send` comes back by the `unsafe impl` below, argued from the `Activation` bound;
    /// `Sync` does not, since an activation need not be `Sync`, and a method reading `data`
    /// through `&self` would then share it between threads unchecked.
    _not_sync: PhantomData<*mut ()>,
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
            _not_sync: PhantomData,
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

/// A handler actor's body lent to the carrier that runs one of its activations
/// (`worker/carrier.rs`): a pointer to the body that holds the program where it lies, so that an
/// activation neither moves the program nor copies it through the switch.
///
/// The lending protocol, for each activation:
/// 1. the worker that holds the actor runs it: it makes a `Lent` of the body from the cell's
///    raw pointer ([`Lent::new`]) and resumes an idle carrier with it;
/// 2. until the activation ends, only the carrier touches the body, through the `Lent`: the
///    worker makes no reference to the body (not even to read which variant it is), and if
///    the activation suspends, its carrier goes to the worker's table of suspended
///    activations, not into the body, and the actor is pinned. While a handler actor is
///    pinned, every path that could reach its body (a later run, a kill, a shutdown drain or
///    unwind) first asks whether it is pinned, and if so leaves the body alone until its
///    carrier has been unwound;
/// 3. the activation ends when the carrier suspends with `Out::Activated` (the program is in
///    the body, which is the worker's again) or `Out::Stopped`, after the carrier took the
///    program out of the body, leaving `Done`, and dropped it ([`Lent::take`]). Taking it out
///    before the drop matters: that drop may be cut short by a kill or shutdown (a destructor
///    that blocks, then is unwound), or the carrier may be unwound after it (a `handle` that
///    caught the unwind and stopped), and whoever unwinds the carrier then finds `Done`
///    instead of a program to drop a second time. If the carrier is unwound while the program
///    is still in the body, the unwinder drops it after.
///
/// The worker's own references to the body never overlap the carrier's: it makes them only
/// before step 1 and after step 3, or after the carrier has been unwound, each for a short
/// time, from the cell's raw pointer.
pub(crate) struct Lent(NonNull<Body>);

impl Lent {
    /// Step 1 of the protocol: lends the body at `body`, which holds a program.
    ///
    /// # Safety
    ///
    /// `body` is the cell's pointer to its body, and the caller keeps step 2 until step 3.
    pub(crate) unsafe fn new(body: *mut Body) -> Lent {
        Lent(NonNull::new(body).expect("a cell's body is not null"))
    }

    /// The program, for the carrier to run.
    ///
    /// # Safety
    ///
    /// Within step 2 of the protocol (which its maker promised), and no other reference made
    /// through this `Lent` is live.
    pub(crate) unsafe fn get(&mut self) -> &mut Program {
        // SAFETY: the caller's promise: only the carrier touches the body during step 2, and
        // this is the one live reference made through the `Lent`.
        match unsafe { self.0.as_mut() } {
            Body::Idle(program) => program,
            _ => unreachable!("a lent body holds a program until it is taken"),
        }
    }

    /// Step 3 for an actor that stopped: takes the program out, leaving `Done`.
    ///
    /// # Safety
    ///
    /// As for [`get`](Lent::get).
    pub(crate) unsafe fn take(self) -> Program {
        // SAFETY: the caller's promise, as in `get`; the body stays valid (`Done` owns
        // nothing), and the program moves out whole.
        match unsafe { std::ptr::replace(self.0.as_ptr(), Body::Done) } {
            Body::Idle(program) => program,
            _ => unreachable!("a lent body holds a program until it is taken"),
        }
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
    fn a_lent_body_runs_its_program_in_place_and_gives_it_up_once() {
        let drops = Arc::new(AtomicUsize::new(0));
        let mut body = Body::Idle(Program::new(counted::<1>(&drops)));
        // SAFETY: `body` is used only through `lent` until the take below.
        let mut lent = unsafe { Lent::new(&mut body) };
        // SAFETY: the only reference made through `lent`.
        assert_eq!(unsafe { lent.get() }.run(), Step::Park);
        // SAFETY: as above.
        let program = unsafe { lent.take() };
        assert!(matches!(body, Body::Done));
        assert_eq!(drops.load(Ordering::Relaxed), 0);
        drop(program);
        assert_eq!(drops.load(Ordering::Relaxed), 1);
        drop(body); // `Done`: nothing more
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
