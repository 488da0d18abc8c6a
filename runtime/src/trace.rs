//! `tracing` instrumentation, behind the optional `tracing` feature.
//!
//! With the feature on, every actor has a span (`actor`, with `id`, `name` and `kind`), made when
//! it is spawned and entered for every run, so that anything the actor logs through `tracing`
//! is attributed to it, and tools such as tokio-console's subscriber layers can follow it. The
//! runtime emits events at `TRACE` level, target `threadlet`: `spawn`, `park` (with what the
//! actor waits on), `wake`, `steal` (with how many actors were taken), `preempt`, and at
//! `ERROR` level `panic` (the actor's label and message).
//!
//! With the feature off (the default) every function here is an empty `#[inline(always)]` one
//! and the per-actor span field does not exist: the hot paths compile to what they were.

#[cfg(feature = "tracing")]
mod on {
    use crate::actor::ActorCell;

    /// The span of one actor (a field of `ActorCell`).
    pub(crate) type ActorSpan = tracing::Span;

    /// Makes the actor's span and records its spawn.
    pub(crate) fn spawned(id: u64, name: Option<&str>, handler: bool) -> ActorSpan {
        let kind = if handler { "handler" } else { "process" };
        let span = tracing::trace_span!(target: "threadlet", "actor", id, name, kind);
        tracing::trace!(target: "threadlet", parent: &span, "spawn");
        span
    }

    /// Enters the actor's span for one run; the guard (owned: the run may hand the actor's
    /// queue entry on before it ends) exits it.
    pub(crate) fn run(actor: &ActorCell) -> tracing::span::EnteredSpan {
        actor.span.clone().entered()
    }

    /// `wait`: the encoded wait word (`wait::encode`).
    pub(crate) fn parked(actor: &ActorCell, wait: u64) {
        if let Some((wait, timed)) = crate::wait::decode(wait) {
            tracing::trace!(target: "threadlet", parent: &actor.span, %wait, timed, "park");
        }
    }

    pub(crate) fn woken(actor: &ActorCell) {
        tracing::trace!(target: "threadlet", parent: &actor.span, "wake");
    }

    pub(crate) fn preempted(actor: &ActorCell) {
        tracing::trace!(target: "threadlet", parent: &actor.span, "preempt");
    }

    pub(crate) fn stole(worker: usize, taken: u64) {
        tracing::trace!(target: "threadlet", worker, taken, "steal");
    }

    pub(crate) fn panicked(label: &str, message: &str) {
        tracing::error!(target: "threadlet", actor = label, message, "panic");
    }
}

#[cfg(feature = "tracing")]
pub(crate) use on::*;

#[cfg(not(feature = "tracing"))]
mod off {
    use crate::actor::ActorCell;

    /// Stands for the entered span.
    pub(crate) struct NoSpan;

    #[inline(always)]
    pub(crate) fn run(_: &ActorCell) -> NoSpan {
        NoSpan
    }

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
