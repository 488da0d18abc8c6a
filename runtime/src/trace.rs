//! `tracing` instrumentation, behind the optional `tracing` feature.
//!
//! With the feature on, every actor has a span (`actor`, with `id`, `name` and `kind`), made when
//! it is spawned and entered for every run, so that anything the actor logs through `tracing`
//! is attributed to it, and tools such as tokio-console's subscriber layers can follow it. The
//! runtime emits events at `TRACE` level, target `threadlet`: `spawn`, `park` (with what the
//! actor waits on), `wake`, `steal` (with how many actors were taken), `preempt`, and at
//! `ERROR` level `panic` (the actor's label and message), emitted once the actor has handed
//! its worker back (the panic hook, where it is noticed, is no place to call a subscriber
//! from).
//!
//! A subscriber is the program's code, called from the runtime's threads: every call to it
//! is contained (`fault::contain`), so a subscriber that panics loses that span or event and
//! has its panic reported, and no runtime thread dies of it.
//!
//! With the feature off (the default) every function here is an empty `#[inline(always)]` one
//! and the per-actor span field does not exist: the hot paths compile to what they were.

#[cfg(feature = "tracing")]
mod on {
    use std::cell::RefCell;

    use crate::actor::ActorCell;

    /// Calls the subscriber, contained (`fault::contain`): a subscriber is the program's code,
    /// and a panic in it must not take down the runtime thread that called it (a worker, the
    /// monitor). What the call was to record is lost; the panic is reported.
    fn to_subscriber<R>(what: &str, f: impl FnOnce() -> R) -> Option<R> {
        crate::fault::contain(format_args!("a tracing subscriber ({what})"), f)
    }

    /// The span of one actor (a field of `ActorCell`); closed, contained, when the cell goes.
    pub(crate) struct ActorSpan(tracing::Span);

    impl Drop for ActorSpan {
        fn drop(&mut self) {
            close(&mut self.0);
        }
    }

    /// Drops a reference to a span (the subscriber's `try_close`), contained.
    fn close(span: &mut tracing::Span) {
        let span = std::mem::replace(span, tracing::Span::none());
        to_subscriber("closing an actor's span", || drop(span));
    }

    /// Makes the actor's span and records its spawn. (Each call to the subscriber is contained
    /// on its own, with no span made inside it: a span dropped by the unwind of a panic in the
    /// subscriber would call it again from a destructor, and a second panic there aborts.)
    pub(crate) fn spawned(id: u64, name: Option<&str>, handler: bool) -> ActorSpan {
        let kind = if handler { "handler" } else { "process" };
        let span = to_subscriber(
            "an actor's span",
            || tracing::trace_span!(target: "threadlet", "actor", id, name, kind),
        )
        .unwrap_or_else(tracing::Span::none);
        to_subscriber("the `spawn` event", || {
            tracing::trace!(target: "threadlet", parent: &span, "spawn");
        });
        ActorSpan(span)
    }

    /// The actor's span, entered for one run (owned: the run may hand the actor's queue entry
    /// on before it ends); dropped, it exits the span. Made and left a call at a time, each
    /// contained, as in `spawned`.
    pub(crate) struct RunSpan {
        span: tracing::Span,
        entered: bool,
    }

    impl Drop for RunSpan {
        fn drop(&mut self) {
            if self.entered {
                to_subscriber("exiting an actor's span", || {
                    self.span
                        .with_subscriber(|(id, dispatch)| dispatch.exit(id));
                });
            }
            close(&mut self.span);
        }
    }

    /// Enters the actor's span for one run.
    pub(crate) fn run(actor: &ActorCell) -> RunSpan {
        let span = to_subscriber("an actor's span", || actor.span.0.clone())
            .unwrap_or_else(tracing::Span::none);
        let entered = to_subscriber("entering an actor's span", || {
            span.with_subscriber(|(id, dispatch)| dispatch.enter(id));
        })
        .is_some();
        RunSpan { span, entered }
    }

    /// The actor's coroutine has handed control back to its worker, from a run or a forced
    /// unwind (a kill, shutdown): emits the `panic` events that panics meanwhile left
    /// (`panicked`), before the worker acts on the outcome. (A process actor's result is handed
    /// over as its coroutine ends, so its joiner may wake a moment before the event is out.)
    pub(crate) fn resumed() {
        let left = PANICS.with(|p| std::mem::take(&mut *p.borrow_mut()));
        for (label, message) in left {
            to_subscriber("the `panic` event", || {
                tracing::error!(target: "threadlet", actor = label, message, "panic");
            });
        }
    }

    /// `wait`: the encoded wait word (`wait::encode`).
    pub(crate) fn parked(actor: &ActorCell, wait: u64) {
        if let Some((wait, timed)) = crate::wait::decode(wait) {
            to_subscriber("the `park` event", || {
                tracing::trace!(target: "threadlet", parent: &actor.span.0, %wait, timed, "park");
            });
        }
    }

    pub(crate) fn woken(actor: &ActorCell) {
        to_subscriber("the `wake` event", || {
            tracing::trace!(target: "threadlet", parent: &actor.span.0, "wake");
        });
    }

    pub(crate) fn preempted(actor: &ActorCell) {
        to_subscriber("the `preempt` event", || {
            tracing::trace!(target: "threadlet", parent: &actor.span.0, "preempt");
        });
    }

    pub(crate) fn stole(worker: usize, taken: u64) {
        to_subscriber("the `steal` event", || {
            tracing::trace!(target: "threadlet", worker, taken, "steal");
        });
    }

    thread_local! {
        /// Panics of actors on this thread not yet told to the subscriber: (label, message).
        static PANICS: RefCell<Vec<(String, String)>> = const { RefCell::new(Vec::new()) };
    }

    /// An actor panicked: called from the panic hook, where nothing can catch a panic (Rust
    /// aborts on a panic inside the hook), so the subscriber hears of it only once the actor's
    /// coroutine has handed control back to its worker (`resumed`), contained.
    pub(crate) fn panicked(label: &str, message: &str) {
        let _ = PANICS.try_with(|p| {
            if let Ok(mut p) = p.try_borrow_mut() {
                p.push((label.to_owned(), message.to_owned()));
            }
        });
    }
}

#[cfg(feature = "tracing")]
pub(crate) use on::*;

#[cfg(not(feature = "tracing"))]
mod off {
    use crate::actor::ActorCell;

    /// Stands for the entered span (`RunSpan` with the feature).
    pub(crate) struct NoSpan;

    #[inline(always)]
    pub(crate) fn run(_: &ActorCell) -> NoSpan {
        NoSpan
    }

    #[inline(always)]
    pub(crate) fn resumed() {}

    #[inline(always)]
    pub(crate) fn parked(_: &ActorCell, _: u64) {}

    #[inline(always)]
    pub(crate) fn woken(_: &ActorCell) {}

    #[inline(always)]
    pub(crate) fn preempted(_: &ActorCell) {}

    #[inline(always)]
    pub(crate) fn stole(_: usize, _: u64) {}

    #[inline(always)]
    pub(crate) fn panicked(_: &str, _: &str) {}
}

#[cfg(not(feature = "tracing"))]
pub(crate) use off::*;
