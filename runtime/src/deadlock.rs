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
//!   a `send_after` may still wake someone), nor one that its actors armed on another
//!   runtime's heap (a `send_after` to an actor there, whose reply may come back, with its
//!   retries; an interval's ticks);
//! - no job is queued or running on the runtime's blocking pool: a closure runs to its end
//!   even when its caller was killed meanwhile, and may hold an address or a sender
//!   (`blocking.rs`);
//! - every actor waits without a timeout, on something no outside party ends by itself: its
//!   mailbox, a channel, a join, a request's reply, room in a bounded mailbox, or a bare park
//!   ([`Wait::is_external`]: sleeps, sockets, the blocking pool and selects do not count);
//! - no plain thread holds an address of a waiting actor's mailbox, or a sender or receiver of
//!   a channel an actor waits on (`MailboxStats::held_outside`, `Wait::ChannelRecv::outside`):
//!   the `threadlet` crate counts those made or cloned outside any actor;
//! - every runtime linked to this one is in the same state (see "Linked runtimes"): an actor
//!   of one may hold an address of one of ours.
//!
//! What it cannot see: an address or sender made inside an actor and then moved to a plain thread
//! counts as held inside (so does one moved to an actor of another runtime not linked to this one:
//! see "Linked runtimes"). A plain thread holding only a `Runtime` or `Handle` (it could spawn,
//! kill, or look a registered name up with the `threadlet` crate's `whereis` and send) is not
//! counted either. Both can give a report that a later outside action would have proved wrong; the
//! default hook only prints.
//!
//! # Linked runtimes
//!
//! An address made inside an actor may also travel to an actor of *another* runtime (in a
//! message, a spawn's closure, a delayed message), which may send to it later: a request to a
//! server on another runtime waits for a reply that the other runtime's actor is still working
//! on. So runtimes that have touched each other are *linked* (both ways, for the life of the
//! two), and a runtime is judged together with every runtime it is linked to, directly or
//! through others (its *group*):
//!
//! - an actor of one woke an actor of the other (a send to a parked receiver, a join, a
//!   channel), or spawned an actor there ([`link`], from `Shared::schedule_woken_from` and
//!   `Shared::spawn_cell`);
//! - an actor of one armed a timer on the other's heap (`call_at_for`: a `send_after` to an
//!   actor there);
//! - an actor of one began to watch an actor of the other for its end (a monitor, a link's
//!   hook, a `JoinSet` entry: [`link_caller_to`], from `JoinHandle::exit_watch`,
//!   `Handle::exit_watch` and the `threadlet` crate's mailboxes), whose `Down` will be a wake
//!   from there.
//!
//! Once every actor of ours looks dead, a runtime of the group with a worker running, a timer
//! pending, or one actor that does not look dead by the rules above (judged with its own
//! runtime's table and outside holders) may still wake one of ours: no report. The report
//! lists this runtime's actors only; each runtime of the group reports its own. A report is
//! made once for a given state of this runtime's own actors, however often the others change.
//! Links are made where a wake or a spawn crosses from one runtime's worker to another, so a
//! first message into an actor of another runtime that was running then (no wake) links
//! nothing yet: until a wake does, that runtime is not judged with this one, and a report made
//! while its actor works on a request from here is wrong. The others' changes do not kick this
//! runtime's monitor: while its actors all look dead and a linked runtime runs an actor, it
//! looks again each sample; while a quiet linked runtime holds the report back (a timer, an
//! actor alive), after a wait that doubles from `PEER_WAIT_FIRST` to `PEER_WAIT_MOST` while
//! nothing there changes (a report of the group's deadlock may come that late after a change
//! no stamp shows: a plain thread dropping an address). A link is for good: a
//! deadlock within this runtime alone goes unreported while a linked runtime has an actor that
//! does not look dead (a supervisor's select, a socket, an address held by a plain thread), and
//! so does a cycle of waits across two runtimes (a join, a reply or room that names another
//! runtime's actor is not judged: such an actor looks alive).
//!
//! # Protocol (the monitor thread, `monitor.rs`)
//!
//! 1. At each of its samples that finds every worker idle and no timer pending, the monitor
//!    reads the *activity stamp*: the runs of every worker plus the actors ever spawned. A
//!    stamp already judged (alive, or reported) is not looked at again: nothing ran since. A
//!    stamp that differs from the previous sample's is only remembered, and the monitor
//!    samples again one period later: the walk waits for a whole quiet sample period, so a
//!    runtime that goes idle and busy again and again (a plain thread spawning actors one by
//!    one) pays for no walk. A job on the blocking pool holds the check away, and the last one
//!    to end kicks the monitor. A pending timer holds the check away; the monitor hears when its
//!    own timers fire, and when the last timer its actors armed elsewhere (on another
//!    runtime's heap, or the process-wide one: `timers_elsewhere`) goes (that kicks it), but
//!    not when any other timer on the process-wide heap fires (one armed from a plain thread:
//!    that thread knows no runtime): so, held off by those, it looks again one sample period
//!    after the last of them is due ([`Recheck::After`]).
//! 2. Otherwise it walks the live actors (`dump::inspect`, one shard lock at a time) and
//!    applies the rules above. The first actor that breaks one ends the walk: alive. If all
//!    look dead and the runtime is linked to others, the monitor looks at those (see "Linked
//!    runtimes"), once their stamps have stood for a whole sample: while one may still wake an
//!    actor here, it looks again later (at the next sample, or after a growing wait), without
//!    walking its own actors again while their stamp stands. Else the stamps of step 3 are the
//!    group's.
//! 3. All dead: the monitor remembers the stamp as suspect and looks again one sample period
//!    later (a quarter of a time slice). Only when the second look finds the same stamp and
//!    still all dead is it reported: the walk is not atomic, and an actor woken between two
//!    reads of it would have run by then, changing the stamp.
//! 4. The report ([`Deadlock`]) goes to the hook (`Builder::on_deadlock`; by default one
//!    report on stderr), once per stamp. With `Builder::panic_on_deadlock`, every `block_on`
//!    in flight has its root actor killed and panics with the report.
//!
//! From the moment the last worker goes idle, the report comes within three sample periods
//! plus the time of two walks: under a time slice (7.5 ms of the default 10 ms). With linked
//! runtimes, add one sample period (their stamps must stand for a whole one too) and the walks
//! of their actors, from the moment the last of them goes idle.

use std::fmt;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::actor::{ActorCell, ActorId};
use crate::dump::{self, ActorDump, coarse_now_ms};
use crate::fault;
use crate::runtime::Shared;
use crate::wait::Wait;
use crate::wake::Phase;

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

/// When the monitor runs the check again ([`DeadlockWatch::check`]'s answer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Recheck {
    /// Once something changes: a worker leaves idle (and kicks the monitor), a timer of this
    /// runtime's fires, or the last one counted elsewhere goes (and kicks it).
    OnKick,
    /// At the next sample, one sample period from now (steps 1 and 3).
    NextSample,
    /// Once this instant has passed: the last timer on the process-wide heap, which holds the
    /// check away (it may still wake an actor), is due then, and its firing tells no runtime;
    /// or a quiet linked runtime held the report back, and is looked at again then.
    After(Instant),
}

/// The check's memory between samples (steps 1 and 3), and the `block_on` roots of step 4.
pub(crate) struct DeadlockWatch {
    config: DeadlockConfig,
    state: Mutex<WatchState>,
    /// Timers that this runtime's actors armed on another runtime's heap (or the process-wide
    /// one) and that have not fired or been dropped (`call_at_for`: a `send_after` to an actor
    /// of that runtime, or to a mailbox with none attached, whose reply may still wake one of ours, and what such a timer arms in turn: a retry, an
    /// interval's next tick); pending, they keep the check away as this runtime's own timers
    /// do. The last one going kicks the monitor, which looks again (step 1).
    timers_elsewhere: AtomicUsize,
    /// The runtimes linked to this one ("Linked runtimes"), each once; weak, so that a link
    /// keeps no runtime alive (dropped ones are pruned when a new link is made).
    peers: Mutex<Vec<Weak<Shared>>>,
}

/// Links runtimes `a` and `b` for their deadlock checks ("Linked runtimes"); nothing if they
/// are one runtime, or already linked. Called where a worker of one wakes or spawns an actor
/// of the other, where an actor of one arms a timer on the other's heap, and where it watches
/// an actor of the other for its end ([`link_caller_to`]): off the paths within one runtime,
/// and a short lock once linked.
pub(crate) fn link(a: &Arc<Shared>, b: &Arc<Shared>) {
    if Arc::ptr_eq(a, b) {
        return;
    }
    a.deadlock.add_peer(b);
    b.deadlock.add_peer(a);
}

/// Links the calling actor's runtime (nothing on a plain thread) to `target`, whose actor it
/// is about to watch for its end (a monitor, a `JoinSet` entry, a link's trap): the `Down`
/// that the watch delivers, through a channel or a mailbox, is a wake that comes from
/// `target`, which no wake has linked yet while the caller waits for it.
pub(crate) fn link_caller_to(target: &Arc<Shared>) {
    crate::context::with_worker(|ctx| {
        if let Some(ctx) = ctx {
            link(&ctx.shared, target);
        }
    });
}

/// The first wait before a quiet linked runtime that held a report back (a timer pending, an
/// actor that looks alive) is looked at again: a few sample periods, since a reply on its way
/// is the common case.
const PEER_WAIT_FIRST: Duration = Duration::from_millis(10);

/// The longest such wait, reached by doubling while nothing there changes: an idle runtime
/// linked to a server that waits on a socket wakes its monitor once a second for it, not four
/// hundred times. It bounds how late a deadlock of the group is reported after a change that
/// no stamp shows (a plain thread dropping an address, a timer cancelled).
const PEER_WAIT_MOST: Duration = Duration::from_secs(1);

/// Each linked runtime (by address: held, it is not reused) with its activity stamp.
type PeerStamps = Vec<(usize, u64)>;

fn peer_stamps(peers: &[Arc<Shared>]) -> PeerStamps {
    peers
        .iter()
        .map(|p| (Arc::as_ptr(p) as usize, activity_stamp(p)))
        .collect()
}

#[derive(Default)]
struct WatchState {
    /// The stamp at the previous idle sample: a look needs one whole quiet sample (step 1).
    quiet_since: Option<u64>,
    /// The last stamp judged alive or reported: not looked at again.
    judged: Option<u64>,
    /// The stamps of a first look that found every actor dead (step 3), ours and the linked
    /// runtimes'.
    suspect: Option<(u64, PeerStamps)>,
    /// At the quiet stamp (`quiet_since`), this runtime's actors all looked dead and a linked
    /// runtime held the report back (step 2): they are not walked again while it stands.
    waiting_on_peers: bool,
    /// The linked runtimes' stamps at the previous sample: they are walked once a whole
    /// sample has been quiet for them too, as ours are (step 1).
    peers_quiet_since: Option<PeerStamps>,
    /// The linked runtimes' stamps when they last held the report back while quiet (a timer
    /// pending, an actor alive), with the wait before they are looked at again: doubled while
    /// the stamps stand (`PEER_WAIT_FIRST` to `PEER_WAIT_MOST`).
    peers_held: Option<(PeerStamps, Duration)>,
    /// Root actors of `block_on` calls in flight, each with the report that killed it, if one
    /// did (step 4).
    roots: Vec<(ActorId, Option<Arc<Deadlock>>)>,
    /// The latest report, for a `block_on` whose root it names but that registered too late
    /// to be killed with the others (`enter_block_on`).
    last: Option<Arc<Deadlock>>,
}

impl DeadlockWatch {
    pub(crate) fn new(config: DeadlockConfig) -> DeadlockWatch {
        DeadlockWatch {
            config,
            state: Mutex::default(),
            timers_elsewhere: AtomicUsize::new(0),
            peers: Mutex::default(),
        }
    }

    /// Adds `peer` to this runtime's links, if it is not there yet.
    fn add_peer(&self, peer: &Arc<Shared>) {
        let mut peers = self.peers.lock();
        if peers
            .iter()
            .any(|p| std::ptr::eq(p.as_ptr(), Arc::as_ptr(peer)))
        {
            return;
        }
        peers.retain(|p| p.strong_count() > 0);
        peers.push(Arc::downgrade(peer));
    }

    /// The runtimes linked to `shared`, directly or through others, each once; `shared` not
    /// among them.
    fn group(shared: &Arc<Shared>) -> Vec<Arc<Shared>> {
        let mut group: Vec<Arc<Shared>> = Vec::new();
        let mut next = 0;
        let mut from = shared.clone();
        loop {
            // One lock at a time: `link` takes them one at a time too.
            let peers: Vec<Arc<Shared>> = from
                .deadlock
                .peers
                .lock()
                .iter()
                .filter_map(Weak::upgrade)
                .collect();
            for p in peers {
                if !Arc::ptr_eq(&p, shared) && !group.iter().any(|g| Arc::ptr_eq(g, &p)) {
                    group.push(p);
                }
            }
            let Some(p) = group.get(next) else {
                return group;
            };
            from = p.clone();
            next += 1;
        }
    }

    /// One more timer armed elsewhere (see `timers_elsewhere`); `Relaxed` here and in
    /// `timer_elsewhere_done`: the count is read at a sample as a hint, like the heap's own
    /// `is_pending`, and a look that finds it stale is confirmed by a second (step 3).
    pub(crate) fn timer_elsewhere_armed(&self) {
        self.timers_elsewhere.fetch_add(1, Ordering::Relaxed);
    }

    /// A timer armed elsewhere fired or was dropped; whether it was the last (the monitor must
    /// then look again: nothing of the runtime's own may wake it).
    pub(crate) fn timer_elsewhere_done(&self) -> bool {
        self.timers_elsewhere.fetch_sub(1, Ordering::Relaxed) == 1
    }

    /// A `block_on` began, with this root actor. A root that a report already named (it
    /// deadlocked before it was registered) is killed now, as it would have been then.
    pub(crate) fn enter_block_on(&self, shared: &Shared, root: ActorId) {
        let named = {
            let mut st = self.state.lock();
            let named = st
                .last
                .clone()
                .filter(|d| self.config.panic_block_on && d.names(root));
            st.roots.push((root, named.clone()));
            named
        };
        if named.is_some() {
            shared.live.kill(root);
        }
    }

    /// That `block_on` ended; if a deadlock report killed its root, the report.
    pub(crate) fn leave_block_on(&self, root: ActorId) -> Option<Arc<Deadlock>> {
        let mut st = self.state.lock();
        let at = st.roots.iter().position(|(r, _)| *r == root)?;
        st.roots.swap_remove(at).1
    }

    /// Steps 1 to 4, for a monitor sample that found no worker running an actor (or, with
    /// time slices off, any sample); `timers_pending`: the runtime's heap holds a live timer.
    /// Returns when the monitor should look again.
    pub(crate) fn check(&self, shared: &Arc<Shared>, timers_pending: bool) -> Recheck {
        if a_worker_runs(shared) {
            // Busy (only seen with time slices off, when the monitor does not sample): come
            // back, since nothing else wakes the monitor when the last worker goes idle.
            self.state.lock().quiet_since = None;
            return Recheck::NextSample;
        }
        // A timer of this runtime's own wakes the monitor when it fires, and the last one
        // counted elsewhere kicks it when it goes; one on the process-wide heap does neither,
        // so the monitor looks again once the last of those is due.
        // So does a job on the blocking pool, whose closure may outlive a killed caller and
        // hold what wakes an actor: the last one to end kicks the monitor (`blocking.rs`).
        let held_off = if timers_pending
            || self.timers_elsewhere.load(Ordering::Relaxed) > 0
            || shared.blocking.holds_off_deadlock_check()
        {
            Some(Recheck::OnKick)
        } else {
            crate::timer::process_timers_pending_until().map(Recheck::After)
        };
        if let Some(recheck) = held_off {
            let mut st = self.state.lock();
            st.suspect = None;
            st.quiet_since = None;
            return recheck;
        }
        let own = activity_stamp(shared);
        let waited_on_peers = {
            let mut st = self.state.lock();
            if st.judged == Some(own) {
                return Recheck::OnKick;
            }
            if st.quiet_since != Some(own) {
                // Something ran since the last sample: look once a whole sample has been quiet,
                // so that a busy spell (a plain thread spawning, say) costs no walk at all.
                st.quiet_since = Some(own);
                st.suspect = None;
                st.waiting_on_peers = false;
                return Recheck::NextSample;
            }
            st.waiting_on_peers
        };
        // Our own actors, unless at an earlier sample of this same stamp they all looked dead
        // and only a linked runtime held the report back (step 2).
        let mut found = None;
        if !waited_on_peers {
            found = find(shared);
            let mut st = self.state.lock();
            // The walk is not atomic: anything that ran or was spawned during it changes the
            // stamp.
            if activity_stamp(shared) != own {
                st.quiet_since = None;
                return Recheck::NextSample;
            }
            if found.is_none() {
                st.judged = Some(own);
                st.suspect = None;
                return Recheck::OnKick;
            }
        }
        // Every actor of ours waits on one of ours, unless a linked runtime may still wake one
        // ("Linked runtimes"); its changes do not kick this monitor, so it samples meanwhile.
        let peers = Self::group(shared);
        let peers_stamp = peer_stamps(&peers);
        if let Some(recheck) = self.peers_may_wake(&peers, &peers_stamp) {
            let mut st = self.state.lock();
            st.waiting_on_peers = true;
            st.suspect = None;
            return recheck;
        }
        let Some(found) = found.or_else(|| find(shared)) else {
            // Walked at an earlier sample; one of ours was woken since and has not run yet.
            self.state.lock().quiet_since = None;
            return Recheck::NextSample;
        };
        if activity_stamp(shared) != own || peer_stamps(&peers) != peers_stamp {
            self.state.lock().quiet_since = None;
            return Recheck::NextSample;
        }
        let stamp = (own, peers_stamp);
        let (report, doomed) = {
            let mut st = self.state.lock();
            st.waiting_on_peers = false;
            if st.suspect.as_ref() != Some(&stamp) {
                st.suspect = Some(stamp);
                return Recheck::NextSample;
            }
            st.suspect = None;
            // Once for this state of our own actors, however the linked runtimes change.
            st.judged = Some(own);
            let report = Arc::new(found);
            st.last = Some(report.clone());
            let mut doomed = Vec::new();
            if self.config.panic_block_on {
                // Only the roots this report names: a `block_on` begun since is not part of it.
                for (root, killed_by) in st.roots.iter_mut() {
                    if report.names(*root) {
                        *killed_by = Some(report.clone());
                        doomed.push(*root);
                    }
                }
            }
            (report, doomed)
        };
        let hook = &self.config.hook;
        fault::contain("the deadlock hook (Builder::on_deadlock)", || hook(&report));
        for root in doomed {
            shared.live.kill(root);
        }
        Recheck::OnKick
    }

    /// When to look again if a runtime linked to this one may still wake one of its actors:
    /// it runs an actor (next sample), has a timer pending, or has an actor that does not look
    /// dead (a wait that grows while their stamps stand: `peers_held`); `None` if none may.
    /// They are walked once their stamps (`stamps`) have stood for a whole sample.
    fn peers_may_wake(&self, peers: &[Arc<Shared>], stamps: &PeerStamps) -> Option<Recheck> {
        if peers.is_empty() {
            return None;
        }
        if peers.iter().any(|p| a_worker_runs(p)) {
            self.state.lock().peers_quiet_since = None;
            return Some(Recheck::NextSample);
        }
        {
            let mut st = self.state.lock();
            if st.peers_quiet_since.as_ref() != Some(stamps) {
                st.peers_quiet_since = Some(stamps.clone());
                return Some(Recheck::NextSample);
            }
        }
        let held = peers.iter().any(|p| timers_pending_for(p) || !all_dead(p));
        // The walks are not atomic either: one that a peer's run overlapped counts for nothing.
        if peer_stamps(peers) != *stamps {
            self.state.lock().peers_quiet_since = None;
            return Some(Recheck::NextSample);
        }
        if !held {
            return None;
        }
        let mut st = self.state.lock();
        let wait = match &st.peers_held {
            Some((at, wait)) if at == stamps => (*wait * 2).min(PEER_WAIT_MOST),
            _ => PEER_WAIT_FIRST,
        };
        st.peers_held = Some((stamps.clone(), wait));
        Some(Recheck::After(Instant::now() + wait))
    }
}

/// Whether a worker of `shared` runs an actor now (seen with time slices off, or on a linked
/// runtime).
fn a_worker_runs(shared: &Shared) -> bool {
    shared.remotes.iter().any(|r| r.running().is_some())
}

/// Whether a timer may still wake an actor of `shared`: one on its heap, or one its actors
/// armed elsewhere; or a job on its blocking pool, which may outlive its caller (for a linked
/// runtime; this runtime's own are the monitor's to test).
fn timers_pending_for(shared: &Shared) -> bool {
    shared.timers.is_pending()
        || shared.deadlock.timers_elsewhere.load(Ordering::Relaxed) > 0
        || shared.blocking.has_jobs()
}

impl Deadlock {
    /// Whether the report lists this actor.
    fn names(&self, id: ActorId) -> bool {
        self.actors.binary_search_by_key(&id, |a| a.id).is_ok()
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

/// Whether this actor, as far as one look can tell, waits on something only another actor of
/// this runtime could provide (the rules in the module docs). Reads the wake state and the
/// wait word; the mailbox only for a wait on one.
fn looks_dead(cell: &ActorCell, shared: &Shared) -> bool {
    if cell.state.phase() != Phase::Idle {
        return false;
    }
    let Some((on, timeout)) = cell.wait.get() else {
        return false;
    };
    if timeout || on.is_external() {
        return false;
    }
    if let Some(other) = on.waits_for()
        && shared.live.get(other).is_none()
    {
        // An actor of another runtime (or one ended a moment ago, whose end is on its way):
        // not ours to judge.
        return false;
    }
    // A message already queued, or an address held by a plain thread: it may run. (The
    // `threadlet` crate's actors started from a plain thread tell their end to their mailbox
    // before they first wait on it, `join::set_own_exit_sink`, so that the mailbox is seen here
    // even while that thread has not attached it yet; a spawner that is an actor is not dead
    // until it has. A bare `park_on(Wait::Message)` has no mailbox: nothing but another actor
    // wakes it.)
    !(on == Wait::Message
        && dump::mailbox_of(cell).is_some_and(|m| m.len > 0 || m.held_outside > 0))
}

/// Whether every live actor of a linked runtime looks dead (step 2), by its own runtime's
/// rules: the walk stops at the first that does not.
fn all_dead(peer: &Shared) -> bool {
    peer.live
        .try_for_each(|cell| {
            if looks_dead(cell, peer) {
                ControlFlow::Continue(())
            } else {
                ControlFlow::Break(())
            }
        })
        .is_continue()
}

/// Step 2: the report, if every live actor waits as the module docs say. The walk stops at the
/// first actor that does not; the report's details are gathered only when none does.
fn find(shared: &Shared) -> Option<Deadlock> {
    let mut dead = Vec::new();
    let walk = shared.live.try_for_each(|cell| {
        if !looks_dead(cell, shared) {
            return ControlFlow::Break(());
        }
        dead.push(cell.clone());
        ControlFlow::Continue(())
    });
    if walk.is_break() || dead.is_empty() {
        return None;
    }
    let now = coarse_now_ms();
    let mut actors: Vec<ActorDump> = dead.iter().map(|cell| dump::inspect(cell, now)).collect();
    actors.sort_unstable_by_key(|a| a.id);
    let cycle = find_cycle(&actors);
    Some(Deadlock { actors, cycle })
}

/// A cycle of the waits-for graph, if there is one. Each actor has at most one edge
/// (`Wait::waits_for`), so following edges from each actor not yet visited, and stopping at
/// any actor an earlier walk visited, finds one in O(n log n).
fn find_cycle(actors: &[ActorDump]) -> Vec<ActorId> {
    let index = |id: ActorId| actors.binary_search_by_key(&id, |a| a.id).ok();
    let next = |i: usize| -> Option<usize> { index(actors[i].waiting_on()?.waits_for()?) };
    // The walk that first visited each actor (0: none yet).
    let mut seen = vec![0usize; actors.len()];
    for start in 0..actors.len() {
        if seen[start] != 0 {
            continue;
        }
        let walk = start + 1;
        let mut path: Vec<usize> = Vec::new();
        let mut at = Some(start);
        while let Some(i) = at {
            if seen[i] == walk {
                // Back on this walk's own path: the cycle is the path from there.
                let from = path.iter().position(|&p| p == i).unwrap_or(0);
                return path[from..].iter().map(|&p| actors[p].id).collect();
            }
            if seen[i] != 0 {
                break; // an earlier walk's ground: no new cycle this way
            }
            seen[i] = walk;
            path.push(i);
            at = next(i);
        }
    }
    Vec::new()
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::dump::ActorState;
    use std::num::NonZeroU64;
    use std::time::Duration;

    fn waiting(id: u64, on: Option<u64>) -> ActorDump {
        let id = ActorId(NonZeroU64::new(id).unwrap());
        let wait = match on {
            Some(o) => Wait::Join {
                actor: ActorId(NonZeroU64::new(o).unwrap()),
            },
            None => Wait::Message,
        };
        ActorDump {
            id,
            name: None,
            kind: dump::ActorKind::Process,
            state: ActorState::Waiting {
                on: wait,
                timeout: false,
            },
            mailbox: None,
            runs: 0,
            preemptions: 0,
            cpu_time: Duration::ZERO,
            age: Duration::ZERO,
        }
    }

    fn ids(v: &[ActorId]) -> Vec<u64> {
        v.iter().map(|i| i.as_u64()).collect()
    }

    #[test]
    fn cycles_are_found_after_a_tail_and_not_made_up() {
        // 1 -> 2 -> 3 -> 4 -> 2, and 5 waiting on its mailbox.
        let actors = [
            waiting(1, Some(2)),
            waiting(2, Some(3)),
            waiting(3, Some(4)),
            waiting(4, Some(2)),
            waiting(5, None),
        ];
        assert_eq!(ids(&find_cycle(&actors)), [2, 3, 4]);
        // A chain with no cycle (each joins the next; the last waits on its mailbox).
        let chain: Vec<_> = (1..=2_000)
            .map(|i| waiting(i, (i < 2_000).then_some(i + 1)))
            .collect();
        assert!(find_cycle(&chain).is_empty());
        // A self-join is a cycle of one.
        assert_eq!(ids(&find_cycle(&[waiting(7, Some(7))])), [7]);
    }
}
