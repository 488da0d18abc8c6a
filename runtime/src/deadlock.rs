//! The deadlock check: Go's "all goroutines are asleep", for a runtime whose actors can also
//! be woken from plain threads, timers and sockets.
//!
//! # When a runtime is deadlocked
//!
//! Every live actor is suspended on something that only another actor of this runtime could
//! provide:
//!
//! - no worker is running an actor, and no actor is runnable or unstarted;
//! - no timer is pending, in the runtime's heap or the process-wide one (a sleeper, a timeout,
//!   a `send_after` may still wake someone);
//! - every actor waits without a timeout, on something no outside party ends by itself: its
//!   mailbox, a channel, a join, a request's reply, room in a bounded mailbox, or a bare park
//!   ([`Wait::is_external`]: sleeps, sockets, the blocking pool and selects do not count);
//! - no plain thread holds an address of a waiting actor's mailbox, or a sender or receiver of
//!   a channel an actor waits on (`MailboxStats::held_outside`, `Wait::ChannelRecv::outside`):
//!   the `threadlet` crate counts those made or cloned outside any actor.
//!
//! What it cannot see: an address or sender made inside an actor and then moved to a plain
//! thread counts as held inside. A plain thread holding only a `Runtime` or `Handle` (it could
//! spawn, or kill) is not counted either. Both can give a report that a later outside action
//! would have proved wrong; the default hook only prints.
//!
//! # Protocol (the monitor thread, `monitor.rs`)
//!
//! 1. At each of its samples that finds every worker idle and no timer pending, the monitor
//!    reads the *activity stamp*: the runs of every worker plus the actors ever spawned. A
//!    stamp already judged (alive, or reported) is not looked at again: nothing ran since. A
//!    stamp that differs from the previous sample's is only remembered, and the monitor
//!    samples again one period later: the walk waits for a whole quiet sample period, so a
//!    runtime that goes idle and busy again and again (a plain thread spawning actors one by
//!    one) pays for no walk.
//! 2. Otherwise it walks the live actors (`dump::inspect`, one shard lock at a time) and
//!    applies the rules above. The first actor that breaks one ends the walk: alive.
//! 3. All dead: the monitor remembers the stamp as suspect and looks again one sample period
//!    later (a quarter of a time slice). Only when the second look finds the same stamp and
//!    still all dead is it reported: the walk is not atomic, and an actor woken between two
//!    reads of it would have run by then, changing the stamp.
//! 4. The report ([`Deadlock`]) goes to the hook (`Builder::on_deadlock`; by default one
//!    report on stderr), once per stamp. With `Builder::panic_on_deadlock`, every `block_on`
//!    in flight has its root actor killed and panics with the report.
//!
//! From the moment the last worker goes idle, the report comes within three sample periods
//! plus the time of two walks: under a time slice (7.5 ms of the default 10 ms).

use std::fmt;
use std::ops::ControlFlow;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::actor::ActorId;
use crate::dump::{self, ActorDump, ActorState, coarse_now_ms};
use crate::fault;
use crate::runtime::Shared;
use crate::wait::Wait;

/// A deadlock: every live actor of a runtime waits on another (see `Builder::on_deadlock`).
///
/// `Display` prints the report: the waits-for cycle if the waits name one (joins, requests,
/// room in a mailbox), then every actor with what it waits on.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Deadlock {
    /// Every live actor, each waiting.
    pub actors: Vec<ActorDump>,
    /// A cycle of the waits-for graph, first actor not repeated, if one was found.
    pub cycle: Vec<ActorId>,
}

impl Deadlock {
    fn label(&self, id: ActorId) -> String {
        self.actors
            .iter()
            .find(|a| a.id == id)
            .map_or_else(|| id.to_string(), ActorDump::label)
    }
}

impl fmt::Display for Deadlock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "deadlock: all {} actors of this runtime are waiting, and nothing outside it can \
             wake them",
            self.actors.len()
        )?;
        if let Some(&first) = self.cycle.first() {
            write!(f, "  waits-for cycle: ")?;
            for &id in &self.cycle {
                write!(f, "{} -> ", self.label(id))?;
            }
            writeln!(f, "{}", self.label(first))?;
        }
        for a in &self.actors {
            writeln!(f, "  {a}")?;
        }
        Ok(())
    }
}

/// What the runtime calls on a [`Deadlock`]; set with `Builder::on_deadlock`.
pub(crate) type DeadlockHook = Arc<dyn Fn(&Deadlock) + Send + Sync>;

/// The default hook: the report on stderr.
pub(crate) fn default_deadlock_hook() -> DeadlockHook {
    Arc::new(|d: &Deadlock| eprint!("threadlet: {d}"))
}

/// How the runtime answers a deadlock, fixed by the builder.
#[derive(Clone)]
pub(crate) struct DeadlockConfig {
    pub(crate) hook: DeadlockHook,
    /// Kill the root actors of `block_on` calls in flight, which then panic with the report.
    pub(crate) panic_block_on: bool,
}

impl Default for DeadlockConfig {
    fn default() -> Self {
        DeadlockConfig {
            hook: default_deadlock_hook(),
            panic_block_on: false,
        }
    }
}

/// The check's memory between samples (steps 1 and 3), and the `block_on` roots of step 4.
pub(crate) struct DeadlockWatch {
    config: DeadlockConfig,
    state: Mutex<WatchState>,
}

#[derive(Default)]
struct WatchState {
    /// The stamp at the previous idle sample: a look needs one whole quiet sample (step 1).
    quiet_since: Option<u64>,
    /// The last stamp judged alive or reported: not looked at again.
    judged: Option<u64>,
    /// The stamp of a first look that found every actor dead (step 3).
    suspect: Option<u64>,
    /// Root actors of `block_on` calls in flight.
    roots: Vec<ActorId>,
    /// The report that ended them, for their panic.
    report: Option<Arc<Deadlock>>,
}

impl DeadlockWatch {
    pub(crate) fn new(config: DeadlockConfig) -> DeadlockWatch {
        DeadlockWatch {
            config,
            state: Mutex::default(),
        }
    }

    /// A `block_on` began, with this root actor.
    pub(crate) fn enter_block_on(&self, root: ActorId) {
        self.state.lock().roots.push(root);
    }

    /// That `block_on` ended; if its root was killed for a deadlock, the report.
    pub(crate) fn leave_block_on(&self, root: ActorId) -> Option<Arc<Deadlock>> {
        let mut st = self.state.lock();
        let at = st.roots.iter().position(|&r| r == root)?;
        st.roots.swap_remove(at);
        st.report.clone()
    }

    /// Steps 1 to 4, for a monitor sample that found every worker idle; `timers_pending`: the
    /// runtime's heap holds a timer. Returns whether the monitor should look again in one
    /// sample period (step 3).
    pub(crate) fn check(&self, shared: &Shared, timers_pending: bool) -> bool {
        if timers_pending || crate::timer::process_timers_pending() {
            let mut st = self.state.lock();
            st.suspect = None;
            st.quiet_since = None;
            return false;
        }
        let stamp = activity_stamp(shared);
        {
            let mut st = self.state.lock();
            if st.judged == Some(stamp) {
                return false;
            }
            if st.quiet_since != Some(stamp) {
                // Something ran since the last sample: look once a whole sample has been quiet,
                // so that a busy spell (a plain thread spawning, say) costs no walk at all.
                st.quiet_since = Some(stamp);
                st.suspect = None;
                return true;
            }
        }
        let Some(found) = find(shared) else {
            let mut st = self.state.lock();
            st.judged = Some(stamp);
            st.suspect = None;
            return false;
        };
        let roots = {
            let mut st = self.state.lock();
            if st.suspect != Some(stamp) {
                st.suspect = Some(stamp);
                return true;
            }
            st.suspect = None;
            st.judged = Some(stamp);
            let report = Arc::new(found);
            if self.config.panic_block_on {
                st.report = Some(report.clone());
            }
            (report, st.roots.clone())
        };
        let (report, roots) = roots;
        let hook = &self.config.hook;
        fault::contain("the deadlock hook (Builder::on_deadlock)", || hook(&report));
        if self.config.panic_block_on {
            for root in roots {
                shared.live.kill(root);
            }
        }
        false
    }
}

/// Everything that changes when anything runs or is spawned (step 1).
fn activity_stamp(shared: &Shared) -> u64 {
    let runs = shared
        .remotes
        .iter()
        .map(|r| r.stats.snapshot().actors_run)
        .fold(0u64, u64::wrapping_add);
    runs.wrapping_add(shared.live.counts().inserted)
}

/// Step 2: the report, if every live actor waits as the module docs say.
fn find(shared: &Shared) -> Option<Deadlock> {
    if shared.remotes.iter().any(|r| r.running().is_some()) {
        return None;
    }
    let now = coarse_now_ms();
    let mut actors = Vec::new();
    let walk = shared.live.try_for_each(|cell, entry| {
        let a = dump::inspect(cell, entry, now);
        let dead = match a.state {
            ActorState::Waiting { on, timeout } => {
                // A message already queued, or an address on a plain thread: it may run.
                let may_get_mail = on == Wait::Message
                    && a.mailbox.is_some_and(|m| m.len > 0 || m.held_outside > 0);
                !(timeout || on.is_external() || may_get_mail)
            }
            _ => false,
        };
        if !dead {
            // Alive: no need to look at the others.
            return ControlFlow::Break(());
        }
        actors.push(a);
        ControlFlow::Continue(())
    });
    if walk.is_break() || actors.is_empty() {
        return None;
    }
    actors.sort_unstable_by_key(|a| a.id);
    let cycle = find_cycle(&actors);
    Some(Deadlock { actors, cycle })
}

/// A cycle of the waits-for graph (each actor has at most one edge: `Wait::waits_for`).
fn find_cycle(actors: &[ActorDump]) -> Vec<ActorId> {
    let next = |id: ActorId| -> Option<ActorId> {
        let i = actors.binary_search_by_key(&id, |a| a.id).ok()?;
        actors[i].waiting_on()?.waits_for()
    };
    for start in actors {
        let mut path = vec![start.id];
        let mut at = start.id;
        while let Some(n) = next(at) {
            if let Some(i) = path.iter().position(|&p| p == n) {
                return path.split_off(i);
            }
            if path.len() > actors.len() {
                break;
            }
            path.push(n);
            at = n;
        }
    }
    Vec::new()
}
