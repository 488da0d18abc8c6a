//! Carriers: the coroutines on which a worker runs handler actors' activations.
//!
//! Each worker keeps a few idle carriers (`Core::carriers`, at most [`IDLE_CARRIERS`] once
//! the activations that took one have returned). A carrier is a coroutine on a pooled stack
//! that loops: resumed with a lent program (`program.rs`), it runs one activation
//! (`Activation::run`, a batch of messages) and suspends with the outcome. `run_actor` in
//! `worker.rs` lends the top idle carrier to an activation ([`WorkerLoop::activate`]); an
//! activation that runs to its end leaves it there, so the common case moves nothing and makes
//! no coroutine. One that suspends inside `handle` takes its carrier into `Core::suspended`
//! and pins its actor here ([`WorkerLoop::suspend_activation`]) until it returns
//! ([`WorkerLoop::end_activation`]). The steps, and why a lent program is never touched by two
//! parties at once, are in the module docs of `handler.rs` and `program.rs`.
//!
//! Owned by the worker's thread alone: only the worker loop touches the carriers, never code
//! running inside an actor, and no borrow of them is held across a resume other than the
//! loop's own.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::Ordering;

use corosensei::Coroutine;

use super::WorkerLoop;
use crate::actor::{
    ActorCell, ActorCoroutine, ActorFrame, ActorRef, ActorStack, ActorYielder, Body, Out,
};
use crate::context;
use crate::fault;
use crate::handler::Step;
use crate::program::Lent;

/// Idle carriers a worker keeps. A carrier leaves the pool only while an activation suspended
/// inside `handle` holds it; a few cover the common case of a handful of such actors at a time,
/// and the rest are unwound rather than kept.
pub(super) const IDLE_CARRIERS: usize = 4;

/// A coroutine that runs handler actors' activations one after another (`handler.rs`); its
/// frame (`ActorFrame`) carries the guard page and size of its stack, for the overflow report
/// of the actor it runs.
pub(super) struct Carrier {
    pub(super) coroutine: ActorCoroutine,
}

/// Whether `actor` is a handler actor whose activation is suspended: its body is lent to its
/// carrier (`program.rs`), so no reference to the body may be made until the carrier has been
/// unwound or the activation has returned. A live handler actor is pinned exactly then
/// (`suspend_activation` pins it, `end_activation` unpins it; handler actors are never placed
/// or migratable). One ended by unwinding its carrier (a kill, or shutdown) stays pinned, with
/// no carrier left: nothing runs it or looks at its body again but `drop_queued`, which
/// returns at this check.
pub(super) fn activation_suspended(actor: &ActorCell) -> bool {
    actor.is_handler() && actor.home().is_some()
}

/// Drops the program of a handler actor whose suspended activation's carrier was just unwound
/// (a kill, or shutdown), contained; nothing for a process actor (its body is `Done` by then).
pub(super) fn drop_unwound_program(actor: &ActorCell, body: &mut Body) {
    if let Body::Idle(_) = body {
        let program = std::mem::replace(body, Body::Done);
        let id = actor.id;
        fault::contain(
            format_args!("handler actor {id}, dropped after its activation was unwound"),
            move || drop(program),
        );
    }
}

/// Names the handler actor an activation runs, for a contained panic's report.
struct ActivationOf(&'static str);

impl std::fmt::Display for ActivationOf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match context::current() {
            Some(id) => write!(f, "{} of handler actor {id}", self.0),
            None => write!(f, "{} of a handler actor", self.0),
        }
    }
}

impl WorkerLoop<'_> {
    /// Starts an activation of an idle handler actor (`handler.rs`, steps 1 and 2): makes sure
    /// this worker has an idle carrier to lend it, the top one (making one, on a stack from the
    /// pool, if there is none), and marks the actor started. The program stays in the body,
    /// which the caller then lends to that carrier (`program.rs`); the carrier stays where it
    /// is unless the activation suspends (`suspend_activation`). `false` if no stack could be
    /// had for a new carrier: the actor then ends, as a process actor that cannot get a stack
    /// for its first run does, its program dropped without `stopped` (which would need that
    /// stack) and its join handle reporting `Spawn` with the error.
    pub(super) fn activate(&self, actor: &ActorRef, body: &mut Body) -> bool {
        debug_assert!(
            matches!(body, Body::Idle(_)),
            "activate() on an actor that is not idle"
        );
        let mut carriers = self.core().carriers.borrow_mut();
        if carriers.is_empty() {
            match self.new_carrier() {
                Ok(c) => carriers.push(c),
                Err(e) => {
                    let Body::Idle(program) = std::mem::replace(body, Body::Done) else {
                        unreachable!("checked above");
                    };
                    drop(carriers);
                    actor.end();
                    self.remote().slice.store(0, Ordering::Relaxed);
                    let what = format!(
                        "handler actor {}, which could not get a stack for its next message \
                         ({e})",
                        actor.id
                    );
                    // Its join completer, dropped with the program, reports the error.
                    self.ctx.no_stack.set(Some(std::io::Error::new(
                        e.kind(),
                        format!("no stack for its next message: {e}"),
                    )));
                    fault::contain(what, move || drop(program));
                    drop(self.ctx.no_stack.take()); // taken, unless the program had no completer
                    return false;
                }
            }
        }
        // From its first activation on, a handler actor's body belongs to registries, as a
        // started process actor's does: a queue entry of it is only a reference, which sweeps
        // at shutdown may drop (`Shared::after_push`, `Runnable::release_at_shutdown`); an idle
        // one is held by the live table, which shutdown step 4 sweeps.
        actor.mark_started();
        true
    }

    /// A new carrier (`handler.rs`): a coroutine on a pooled stack that runs one program per
    /// resume, and suspends with the outcome.
    fn new_carrier(&self) -> std::io::Result<Carrier> {
        let stack = self.core().pool.borrow_mut().take(&self.shared().slab)?;
        let stack = ActorStack::Pooled(stack);
        let guard = stack.guard_span();
        let coroutine =
            Coroutine::with_stack(stack, move |y: &ActorYielder, first: Option<Lent>| {
                let frame = ActorFrame { yielder: y, guard };
                let mut next = first;
                loop {
                    let Some(mut body) = next.take() else {
                        unreachable!("a carrier is resumed with a program when idle");
                    };
                    // The actor this activation runs suspends through this carrier, and an
                    // overflow of this stack is reported as its.
                    context::enter_frame(&frame);
                    // `run` catches the user's panics; one of its own ends the actor, contained.
                    let step = fault::contain(ActivationOf("an activation"), || {
                        // SAFETY: lent by `run_actor`, which keeps step 2 of the lending
                        // protocol (`program.rs`) until this carrier suspends with the outcome
                        // below; the one reference made through `body`.
                        unsafe { body.get() }.run()
                    });
                    next = match step {
                        Some(step @ (Step::Park | Step::Yield)) => y.suspend(Out::Activated(step)),
                        Some(Step::Stop) | None => {
                            // SAFETY: as above; taken out before the drop (step 3), which an
                            // unwind of this carrier may cut short.
                            let program = unsafe { body.take() };
                            // Dropped here, inside the actor: its mailbox and what is left.
                            fault::contain(ActivationOf("dropping"), move || drop(program));
                            y.suspend(Out::Stopped)
                        }
                    };
                }
            });
        Ok(Carrier { coroutine })
    }

    /// An activation suspended: its carrier, lent on top of the idle ones, goes to `suspended`
    /// (not into the body, where its program stays in place: `program.rs`). The first time,
    /// the actor is also pinned here and registered, for wakes and shutdown (`handler.rs`,
    /// step 2). Until it suspends nobody needs any of these: a wake while it runs only leaves
    /// `NOTIFIED`, no queue holds it, and shutdown never interrupts a run.
    pub(super) fn suspend_activation(&self, actor: &ActorRef, first: bool) {
        let carrier = (self.core().carriers.borrow_mut().pop()).expect("lent to it");
        self.core().suspended.borrow_mut().insert(actor.id, carrier);
        if !first {
            return;
        }
        // Step 1 of the hand-off (`home.rs`), before the state word's `after_park` or
        // `yielded` that follow in `run_actor`.
        actor.home.pin(self.ctx.index);
        self.register_local(actor);
    }

    /// An activation ended (`handler.rs`, step 3): its carrier, lent on top of this worker's
    /// idle ones, is idle again. If it had suspended, the idle ones may now be one too many
    /// (the rest are retired), and the actor leaves its registry and is unpinned.
    pub(super) fn end_activation(&self, actor: &ActorRef, had_suspended: bool) {
        if !had_suspended {
            return;
        }
        let mut carriers = self.core().carriers.borrow_mut();
        if carriers.len() > IDLE_CARRIERS {
            let extra = carriers.pop().expect("more than none");
            drop(carriers);
            self.retire_carrier(extra);
        }
        // It had suspended (`suspend_activation`).
        self.unregister_local(actor);
        // Step 2 of the hand-off (`home.rs`), before the state word's `after_park` or
        // `yielded`: a waker that then schedules the actor routes it as free.
        actor.home.unpin();
    }

    /// The carrier of `actor`'s activation that suspended, out of `suspended`.
    pub(super) fn take_suspended(&self, actor: &ActorCell) -> Carrier {
        let carrier = self.core().suspended.borrow_mut().remove(&actor.id);
        carrier.expect("a suspended activation's carrier is with its worker")
    }

    /// Unwinds an idle carrier (it holds no actor: only its own loop is on its stack) and gives
    /// its stack back.
    pub(super) fn retire_carrier(&self, carrier: Carrier) {
        let mut coroutine = carrier.coroutine;
        let unwound = catch_unwind(AssertUnwindSafe(|| coroutine.force_unwind()));
        self.ctx.frame.set(std::ptr::null());
        if unwound.is_ok() {
            self.recycle(coroutine.into_stack());
        } else {
            std::mem::forget(coroutine);
        }
    }
}
