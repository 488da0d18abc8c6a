//! Placement: where a process actor spawned on a runtime of two or more workers starts.
//!
//! A process actor starts on the worker that first pops it and stays there (`actor.rs`), so
//! where it starts is where it will ever run. Stealing decides that for most spawns, but a
//! burst of actors that start and then wait (a pool waiting for jobs) is started by the
//! spawner's worker, one after another, before a parked worker woken to steal gets there; when
//! the jobs come, all of them compute on one worker. So a spawn may hand the new actor to a
//! parked worker directly ("power of two choices": the spawner's worker and one other):
//!
//! 1. Only a process actor that is neither a handler actor nor migratable (those are not pinned
//!    where they start: thieves balance them), spawned by an actor running on worker W of a
//!    runtime with two or more workers, not shutting down, is considered ([`place`]).
//! 2. W's load is the number of actors pinned to it (its registry of started actors, published
//!    in `Remote::pinned`), plus those placed on it and not started yet (`Remote::placed`), plus
//!    the length of its fresh queue (process actors not started yet). Below `PLACE_MIN_LOAD`,
//!    the actor goes to W's fresh queue without reading another worker's state. Otherwise W
//!    picks the next other worker O in turn (`Core::place_turn`); if O is parked
//!    (`Remote::parked`) and its load (the same three terms) is at least
//!    `PLACE_MARGIN` below W's, the actor is placed on O; else it goes to W's fresh queue, as
//!    without placement. So spawn, run and exit, fork-join and pairs of
//!    actors that talk keep their cheap local path (the spawner counts itself: on a worker that
//!    holds nothing else, its first two children stay), ties stay local, and a parked worker is
//!    handed actors while it stays parked and lighter by the margin, after which, awake, it
//!    steals as without placement (a fair share at a time, `worker.rs`). On a worker
//!    that already holds other pinned actors, a parked and lighter worker may get even a first
//!    child: placement balances load, it does not know which actors talk to each other.
//! 3. Placing: the actor records O (`ActorCell::placed_on`), O's `placed` count goes up, and the
//!    actor goes into O's queue of placed actors (`Remote::placed_actors`), whose push is
//!    followed by an unpark of O and, as for any stealable work, `Shared::notify_parked`
//!    (`Remote::take_placed`). O takes it after its fresh queue and, unless a thief takes it
//!    first, starts it like any queued actor, pinning it to itself. Thieves take placed actors
//!    under the same rule as fresh queues (step 5), and a covering spare takes them freely. So
//!    a placed actor never waits on O alone: O may have been woken for other work just before
//!    (`parked` is only a hint), and run first an actor that then blocks its thread. (An
//!    earlier version put placed actors in O's inbox, which only O drains; an actor placed on a
//!    worker that had just woken from its I/O poll waited there behind the actor the poll woke,
//!    `actors/tests/placement.rs`.)
//! 4. The actor leaves `placed` exactly once, through `ActorCell::unplace`, by whoever holds its
//!    body: when it starts (it counts as pinned from then on), or when it ends unstarted (a
//!    stack refused at start, a queue dropped at shutdown, in whichever queue shutdown's sweeps
//!    moved it to). `pinned` is the registry's length, republished at every change of it.
//! 5. Thieves keep the balance too, for a while. A process actor spawned by an actor waits in its
//!    worker's fresh queue until it starts, apart from the deque, and an idle worker that already
//!    holds pinned or placed actors steals from another's fresh queue only if that worker's load
//!    (the three terms of step 2) is at least `PLACE_MARGIN` above its own, or once that queue has
//!    been held back from for `FRESH_GRACE` (`may_take_fresh`, `grace.rs`). A worker that holds
//!    nothing steals freely, and deques and free FIFOs stay open to all (they hold what does not
//!    pin, and what came through the injector). Without the rule a burst came apart whenever the
//!    spawner's thread lost its CPU for a moment (the kernel may run a woken thread on its waker's
//!    CPU): the woken worker started the members placed on it, then stole the spawner's own, and
//!    the whole pool ran on one worker (in 4 of 10 runs of `threadlet-bench pool` here).
//! 6. The grace, and why nothing held back is stranded. A worker's unstarted process actors
//!    (its fresh queue and `placed_actors`) are its own to start, and it empties both before it
//!    searches or parks; but it may be stuck in actor code that never comes back to the loop (a
//!    blocking call, a loop without safe points), with no spare to cover it, and the wakeup
//!    argument of `idle.rs` needs a worker that sees work to take it. So the first worker held
//!    back from them marks them with the time (`Remote::fresh_mark`), every worker held back
//!    from them sleeps no longer than `FRESH_GRACE` from that mark, and once the grace is over
//!    their searches take the work, right after `find`, searching or not. What a held-back
//!    worker does meanwhile does not move the mark, and a worker that finds work of its own
//!    while it holds back wakes a parked worker for what it holds back. Whoever pushes into
//!    them while both are empty clears the mark first, so new work gets a grace of its own.
//!    `grace.rs` keeps this protocol and its argument; `Idle::search` runs it through the `Searcher` hooks (`holds_back`,
//!    `grace_left`, `take_held_back`), and `tests/loom_idle.rs` models it. Held-back work
//!    therefore waits for its own worker for about one grace, or, if every worker that holds
//!    it back is busy with work of its own, until one of them next looks for work after that;
//!    never for good. `actors/tests/placement.rs` leaves a child behind a spawner blocked in
//!    a plain `recv` (2 and 3 workers, time slices off) and behind one spinning, and checks
//!    that a worker that held back, then went idle, sleeps.
//! 7. Spawns from outside the runtime (a plain thread, `block_on`, a `Handle`) of process
//!    actors are placed too ([`place_from_outside`]), or a pool spawned from `main` would
//!    start on whichever worker woke first, one member after another, before the others woke
//!    (4 members on one worker of two in 39 of 40 runs, as stealing alone left it). The
//!    runtime keeps an *outside home*, a worker that takes such spawns while it is not
//!    `PLACE_MARGIN` more loaded (its `Remote::load`: pinned and placed actors) than another
//!    candidate, which turns over the other workers; when it is, the candidate takes the
//!    spawn and becomes the home. The worker so picked takes the actor only if it is parked
//!    (only that condition of step 2 applies here, not its fresh-queue term): it goes in as a
//!    placed actor (step 3). A spawn that picks an awake
//!    worker goes through the injector, open to every worker, as before: an awake worker
//!    would run its own actors first. So a burst spawned onto an idle runtime spreads two by
//!    two, and two actors spawned in a row (a server and its client) tend to start together.
//!    Handler and migratable actors, which thieves balance at any time, and every spawn on a
//!    runtime of one worker go through the injector.
//!
//! The figures are read with relaxed loads and may lag: a stale one makes one placement less
//! apt, never a wrong one (every placed actor is started by some worker, or dropped, and stays
//! stealable until it starts, in `placed_actors` or the fresh queue of whoever stole it).

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::actor::ActorCell;
use crate::context::WorkerContext;
use crate::runtime::Shared;

/// The load (module docs, step 2) the spawning worker must have before a spawn may be placed on
/// another worker. The spawner counts itself, so on a worker that holds nothing else, 3 keeps
/// its first two children local: an actor
/// that spawns a child and joins it (spawn, run, exit; a fork-join node) keeps its warm core,
/// and so does a pair of actors spawned to talk to each other (`pingpong`: split over two
/// workers, each message wakes a thread on the other core, about 10x slower here).
const PLACE_MIN_LOAD: usize = 3;

/// How much less loaded the other worker must be: a tie, or a lead of one, stays local.
pub(super) const PLACE_MARGIN: usize = 2;

/// The most unstarted process actors a thief takes at once: a fair share of the victim's
/// unstarted ones (their number over the worker count), at least one and at most this
/// (crossbeam's own batch limit when none is given; crossbeam takes at most half in any case).
/// Not half, as for runnable actors: each one taken is pinned to the thief when it starts,
/// while the other workers woken for the same burst are on their way.
/// Half of a pool of 16 spawned on 16 workers went to the first thief (`docs/benchmarks.md`,
/// "On 16 cores").
const UNSTARTED_SHARE: usize = 32;

/// How many of a worker's `unstarted` process actors a thief takes at once, among `workers`
/// workers: a fair share, at least one, at most `UNSTARTED_SHARE`.
pub(super) fn unstarted_share(unstarted: usize, workers: usize) -> usize {
    (unstarted / workers.max(1)).clamp(1, UNSTARTED_SHARE)
}

/// The other worker that worker `me`'s `turn`-th placement looks at, of `n` (at least 2):
/// each other worker in turn, never `me`.
fn other_in_turn(me: usize, turn: usize, n: usize) -> usize {
    (me + 1 + turn % (n - 1)) % n
}

/// Steps 1 and 2 (module docs): where a process actor spawned by an actor running
/// on `ctx`'s worker should start. `Some(w)`: on worker `w` (the caller hands it over with
/// `Remote::take_placed`); `None`: in the spawner's own fresh queue, the common case.
pub(crate) fn place(ctx: &WorkerContext, actor: &ActorCell) -> Option<usize> {
    let remotes = &ctx.shared.remotes;
    // The workers only: spares take no placed actors (`spare.rs`).
    let n = ctx.shared.spares.first;
    // Handler and migratable actors are not pinned where they first run, so thieves balance
    // them; once shutdown has begun nothing new should go to another worker's queues. A spare
    // places nothing: what it starts stays with it.
    if n < 2 || ctx.index >= n || !actor.pins_at_start() {
        return None;
    }
    let mine = remotes[ctx.index].load() + ctx.core.fresh.len();
    // The common case, decided without reading another worker's cache lines.
    if mine < PLACE_MIN_LOAD || ctx.shared.is_shutdown() {
        return None;
    }
    // The next other worker in turn, not a random one: a burst then hands one actor to each
    // parked worker before any gets a second (at random, 14 spawns on 16 workers left about
    // five workers with none and others with two).
    let turn = ctx.core.place_turn.get();
    ctx.core.place_turn.set(turn.wrapping_add(1));
    let o = other_in_turn(ctx.index, turn, n);
    let other = &remotes[o];
    // Only a parked worker takes placed actors: an awake one steals what it has time for, and
    // a hand-off to a busy worker would only move waiting from one queue to another.
    // Relaxed, both: hints (see `Remote::parked`, `Remote::load`). A stale `parked` keeps one
    // actor local or places one on a worker that has just woken, which then runs it; a stale
    // load lets a burst place one more or one fewer.
    // No cap on how many wait there (it was two): with it, a burst of 16 on 2 workers placed
    // 2 and the spawner's worker started the other 14 before the parked one woke to steal.
    // The margin alone keeps the parked worker no heavier than the spawner's.
    if !other.parked.load(Ordering::Relaxed) {
        return None;
    }
    let theirs = other.load() + other.fresh_stealer.len();
    (theirs + PLACE_MARGIN <= mine).then_some(o)
}

/// Step 7 (module docs): where spawns from outside the runtime place process
/// actors. Touched by any thread that spawns from outside; relaxed accesses, as for the loads
/// they weigh: a stale value makes one placement less apt, never a wrong one.
#[derive(Debug, Default)]
pub(crate) struct OutsidePlacement {
    /// The worker that took the last one, kept while it is not `PLACE_MARGIN` more loaded
    /// than the other candidate.
    home: AtomicUsize,
    /// Turns the other candidate over the remaining workers.
    turn: AtomicUsize,
}

/// Step 7 (module docs): the worker on which a process actor spawned from outside
/// the runtime is placed; `None` (the worker picked is awake, one worker, an actor that does not
/// pin at start, shutdown begun): the injector, as before placement.
pub(crate) fn place_from_outside(shared: &Shared, actor: &ActorCell) -> Option<usize> {
    // The workers only, as for placement from inside.
    let n = shared.spares.first;
    if n < 2 || !actor.pins_at_start() || shared.is_shutdown() {
        return None;
    }
    let outside = &shared.outside;
    // Relaxed, all: see `OutsidePlacement` (and `Remote::parked` for the flag). The turn is
    // a load and a store, not a read-modify-write: two spawns that race may see the same one.
    let home = outside.home.load(Ordering::Relaxed);
    let turn = outside.turn.load(Ordering::Relaxed);
    outside.turn.store(turn.wrapping_add(1), Ordering::Relaxed);
    let other = (home + 1 + turn % (n - 1)) % n;
    let remotes = &shared.remotes;
    let pick = if remotes[other].load() + PLACE_MARGIN <= remotes[home].load() {
        outside.home.store(other, Ordering::Relaxed);
        other
    } else {
        home
    };
    // Only a parked worker, as from inside (step 2): an awake one would run its own actors
    // first, and the injector is open to every worker.
    remotes[pick].parked.load(Ordering::Relaxed).then_some(pick)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placements_turn_over_every_other_worker_once_before_any_twice() {
        for n in 2..=16 {
            for me in 0..n {
                let mut seen: Vec<usize> = (0..n - 1).map(|t| other_in_turn(me, t, n)).collect();
                assert!(!seen.contains(&me), "worker {me} of {n} placed on itself");
                seen.sort_unstable();
                seen.dedup();
                assert_eq!(seen.len(), n - 1, "worker {me} of {n}: {seen:?}");
                // And the next round starts over in the same order.
                assert_eq!(other_in_turn(me, n - 1, n), other_in_turn(me, 0, n));
            }
        }
    }

    #[test]
    fn a_thief_takes_a_fair_share_of_unstarted_actors_not_half() {
        // A burst of 16 waiting on one worker of 16: one at a time, not eight.
        assert_eq!(unstarted_share(16, 16), 1);
        assert_eq!(unstarted_share(16, 4), 4);
        assert_eq!(unstarted_share(16, 2), 8);
        // At least one, so a thief always makes progress; at most a crossbeam batch.
        assert_eq!(unstarted_share(0, 8), 1);
        assert_eq!(unstarted_share(3, 8), 1);
        assert_eq!(unstarted_share(10_000, 2), UNSTARTED_SHARE);
        assert_eq!(unstarted_share(5, 0), 5);
    }
}
