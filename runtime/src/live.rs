//! The table of live actors by id, for `kill(id)` and `monitor(id)`: Erlang's process table,
//! without which a bare id leads nowhere.
//!
//! Every actor enters its runtime's table when it is spawned or started and leaves it in
//! `ActorCell::end`, which runs exactly once per actor, however it ends. An entry is one word,
//! a weak reference to the actor's cell, found by the id in that cell (`id_of`): the cell
//! reaches the actor's join packet, for monitors (`ActorCell::exit`), so the table keeps
//! neither an ended actor nor its result alive, and dropping an entry runs no user code.
//!
//! The table also holds its handler actors, from their start to their end: an idle one may be
//! in no queue, and shutdown must reach it to drop its program (`handler.rs`, "Shutdown";
//! `sweep_handlers`). The table is the one registry of them, so starting and ending a handler
//! actor takes one shard's lock, not a lock that every worker shares. The reference it lets go
//! of at the end is an ended actor's, whose body is gone: dropping it runs no user code either.
//!
//! That reference costs the entry nothing: the entry keeps its weak reference, and the table
//! also owns one strong count of the cell, taken at the insert (`Arc::into_raw`) and given
//! back once (`Arc::from_raw`), at the actor's end or to shutdown's sweep. Which of the two
//! comes first is recorded in the cell (`ActorCell::held_by_live_table`), under the shard's
//! lock. (A list of the handler actors beside the entries cost a word each, and its removal
//! touched a second actor's cell, the one moved into the freed place.)
//!
//! Cost: one insert and one remove per actor under one of `SHARDS` locks, with a hash that keeps
//! consecutive ids in neighbouring buckets (`IdHasher`) and no allocation but the table's own
//! growth. One word an entry, against the 32 bytes of an entry that kept its key and both weak
//! references beside it, saves 24 bytes a bucket: 27 to 55 bytes an actor across the load the
//! table keeps (between seven sixteenths and seven eighths full), about 50 at 1M actors, for 16
//! more in each cell (`docs/perf-log.md`, "Session 20"). The price: growing a shard rehashes
//! each entry by the id in its cell, a read of every cell of the shard (a cache miss each, in
//! a burst) under its lock, where the old entries held their keys.

use std::hash::Hasher;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

use hashbrown::HashTable;
use parking_lot::Mutex;

use crate::actor::{ActorCell, ActorId, HELD, NO_SLOT};
use crate::join::{ExitSource, ExitWatch};

/// Shards: enough that workers spawning at once seldom take the same lock.
const SHARDS: usize = 64;

/// The hash of an id, for its shard's table: it keeps neighbours together.
///
/// Ids are consecutive numbers, and actors spawned together tend to end together, so a table
/// that puts consecutive ids in neighbouring buckets finds the bucket of the next insert or
/// remove already in cache; a hash that scatters them (as a plain multiplicative one does)
/// costs a cache miss on each, most of an insert's or remove's time in a burst of 100,000
/// actors. So an id's *rank* in its shard (`id / SHARDS`; its shard is `id % SHARDS`) picks
/// its bucket in runs of `RUN`: ranks `8k .. 8k + 7` take neighbouring buckets, and each run
/// starts at a place picked by a multiplicative hash of `k`, so that no pattern of live ids
/// (one kept out of every 2^20 spawned, say) piles up in one place. The top 7 bits of a word,
/// which hashbrown keeps beside each bucket as a filter, come from a hash of the whole rank, so
/// neighbours in a run still tell apart at a glance.
#[derive(Default)]
struct IdHasher(u64);

/// Consecutive ranks that share a run of neighbouring buckets: 8 entries of a word are one
/// cache line, half of one of hashbrown's 16-byte groups of control bytes.
///
/// The price of keeping neighbours together is paid under steady churn (actors ending as
/// others start): a bucket removed from a crowded stretch is marked deleted, not empty, and
/// the tombstones make a table rehash, or grow once, sooner than a scattering hash would. A
/// separate program that churned 1,000 to 100,000 live entries through one table (2M inserts
/// and removes each, ids spaced 1, 3 and 7 ranks apart) ended with 1.62x the capacity it
/// started with on average (1.91x with runs of 16, 1.07x with a scattering hash), at 12.1 ns
/// an operation (12.5; 10.3). Runs of 8 cost bursts about what runs of 16 do (spawn + run +
/// exit of 1M handler actors, 715-858 against 686-709 ns an actor; 911-1,118 scattered).
const RUN: u64 = 8;

/// Multiplicative (Fibonacci) hashing: one multiplication spreads numbers over the high bits.
const FIBONACCI: u64 = 0x9E37_79B9_7F4A_7C15;

/// The bits hashbrown takes its 7-bit filter from: the top 7 of a word (of 32 bits, where a
/// word is that; it takes the bucket from the word's low bits).
const FILTER_BITS: u64 = 0x7F << (usize::BITS - 7);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only ids are hashed here, and they hash as one u64 (`write_u64`); fold anything else.
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(FIBONACCI);
        }
    }

    fn write_u64(&mut self, id: u64) {
        let rank = id / SHARDS as u64;
        // A product's well-mixed bits are its high ones: rotate them down to where the table
        // takes its bucket from (a plain product of `k << 10` would end in ten zero bits).
        let run_start =
            (rank / RUN).wrapping_mul(FIBONACCI).rotate_left(32) & !FILTER_BITS & !(RUN - 1);
        let filter = rank.wrapping_mul(FIBONACCI) & FILTER_BITS;
        self.0 = filter | run_start | (rank % RUN);
    }
}

/// One shard: its entries, and how many it has taken in and let go (for `Runtime::metrics`:
/// spawned = ended + live holds shard by shard).
#[derive(Default)]
struct ShardState {
    /// Every live actor's cell, weakly, one word an entry: found by the id in the cell it
    /// points at (`id_of`), hashed as [`IdHasher`] hashes it. A handler actor's cell is also
    /// held, by a strong count the table owns (module docs).
    entries: HashTable<Weak<ActorCell>>,
    /// How many of the entries are handler actors' (for `Runtime::metrics`).
    handler_entries: usize,
    inserted: u64,
    removed: u64,
}

type Shard = Mutex<ShardState>;

/// Totals over the table, from [`LiveTable::counts`].
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct LiveCounts {
    pub(crate) live: usize,
    pub(crate) handlers: usize,
    pub(crate) inserted: u64,
    pub(crate) removed: u64,
}

pub(crate) struct LiveTable {
    shards: Box<[Shard]>,
    /// Shards that shutdown's sweep of handler actors has handed out (`sweep_handlers`).
    swept: AtomicUsize,
}

impl LiveTable {
    pub(crate) fn new() -> LiveTable {
        LiveTable {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            swept: AtomicUsize::new(0),
        }
    }

    fn shard(&self, id: ActorId) -> &Shard {
        &self.shards[(id.as_u64() as usize) % SHARDS]
    }

    /// Enters a new actor; a handler actor's cell is also held, until the actor ends.
    pub(crate) fn insert(&self, actor: &Arc<ActorCell>) {
        let id = actor.id;
        let entry = Arc::downgrade(actor);
        let held = actor.is_handler().then(|| actor.clone());
        let mut shard = self.shard(id).lock();
        shard.inserted += 1;
        if let Some(cell) = held {
            shard.handler_entries += 1;
            // Relaxed, here and at every access of the flag: each happens under this shard's
            // lock, which orders them.
            cell.held_by_live_table().store(HELD, Ordering::Relaxed);
            // The table's strong count, given back once: by `remove` or by a sweep, which each
            // first take the flag back under this lock.
            let _ = Arc::into_raw(cell);
        }
        debug_assert!(
            shard
                .entries
                .find(hash_of(id), |e| id_of(e) == id)
                .is_none(),
            "ids are never reused"
        );
        shard
            .entries
            .insert_unique(hash_of(id), entry, |e| hash_of(id_of(e)));
    }

    /// Lets an ended actor go (a no-op if it is not in the table).
    pub(crate) fn remove(&self, actor: &ActorCell) {
        let mut held = None;
        let gone = {
            let mut shard = self.shard(actor.id).lock();
            let gone = take_entry(&mut shard, actor);
            if actor.is_handler() && gone.is_some() {
                // SAFETY: `as_ptr` of the entry's `Weak` may reach the whole allocation, and the
                // caller's `actor` keeps the cell alive (it ends the actor, holding it); the
                // shard is locked.
                held = gone
                    .as_ref()
                    .and_then(|e| unsafe { take_held(Weak::as_ptr(e)) });
            }
            gone
        };
        // A weak reference, and an ended actor's cell (its body is gone: the caller ended it),
        // dropped with no lock held: nothing of the user's runs here.
        drop((gone, held));
    }

    /// Takes out the entry of a cell that is being dropped without having ended (`Drop for
    /// ActorCell`), so that no entry outlives its cell. The table holds no strong count of it
    /// (the count would have kept it), so there is none to give back.
    pub(crate) fn forget_dropped(&self, actor: &ActorCell) {
        let gone = {
            let mut shard = self.shard(actor.id).lock();
            debug_assert!(
                !actor.is_handler() || actor.held_by_live_table().load(Ordering::Relaxed) != HELD,
                "the table held a count of a cell that is being dropped"
            );
            take_entry(&mut shard, actor)
        };
        drop(gone);
    }

    /// Whether `actor`'s entry is in the table (for a debug check in `Drop for ActorCell`).
    pub(crate) fn holds(&self, actor: &ActorCell) -> bool {
        let shard = self.shard(actor.id).lock();
        shard
            .entries
            .find(hash_of(actor.id), |e| std::ptr::eq(Weak::as_ptr(e), actor))
            .is_some()
    }

    /// Live, inserted and removed entries, summed shard by shard (each shard's three figures
    /// agree; shards are read one after another).
    pub(crate) fn counts(&self) -> LiveCounts {
        self.shards.iter().fold(LiveCounts::default(), |c, shard| {
            let s = shard.lock();
            LiveCounts {
                live: c.live + s.entries.len(),
                handlers: c.handlers + s.handler_entries,
                inserted: c.inserted + s.inserted,
                removed: c.removed + s.removed,
            }
        })
    }

    /// Shutdown's sweep of idle handler actors (`worker.rs`, "Shutdown", step 4): takes the
    /// handler actors of the next shard that no caller has had yet (`None` once every shard
    /// has been handed out), so each actor goes to one worker. They stay in the table until
    /// they end.
    pub(crate) fn sweep_handlers(&self) -> Option<Vec<Arc<ActorCell>>> {
        // Relaxed: the counter only hands out distinct numbers; the shard's lock orders what is
        // taken under it.
        let shard = self
            .shards
            .get(self.swept.fetch_add(1, Ordering::Relaxed))?;
        Some(take_shards_handlers(shard))
    }

    /// Lets go of the handler actors that are left, after the workers have exited (a late
    /// start through a handle): each has ended by then, dropped with the queues.
    pub(crate) fn release_handlers(&self) {
        for shard in self.shards.iter() {
            let left = take_shards_handlers(shard);
            debug_assert!(
                left.iter().all(|a| a.state.is_done()),
                "a handler actor left in the live table has not ended"
            );
            drop(left);
        }
    }

    /// The live actor `id`.
    pub(crate) fn get(&self, id: ActorId) -> Option<Arc<ActorCell>> {
        let shard = self.shard(id).lock();
        // Upgraded under the lock, dropped by the caller with no lock held.
        shard
            .entries
            .find(hash_of(id), |e| id_of(e) == id)
            .and_then(Weak::upgrade)
    }

    /// Calls `f` on every live actor, one shard at a time: each shard's entries are copied
    /// out under its lock, and `f` runs with no lock held (`dump.rs`, step 2).
    pub(crate) fn for_each(&self, mut f: impl FnMut(&Arc<ActorCell>)) {
        let _ = self.try_for_each(|cell| {
            f(cell);
            ControlFlow::Continue(())
        });
    }

    /// [`for_each`](LiveTable::for_each) until `f` breaks (the deadlock check stops at the
    /// first actor that proves the runtime alive).
    pub(crate) fn try_for_each(
        &self,
        mut f: impl FnMut(&Arc<ActorCell>) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        let mut batch: Vec<Weak<ActorCell>> = Vec::new();
        for shard in self.shards.iter() {
            batch.extend(shard.lock().entries.iter().cloned());
            for entry in batch.drain(..) {
                if let Some(cell) = entry.upgrade() {
                    f(&cell)?;
                }
            }
        }
        ControlFlow::Continue(())
    }

    /// Kills the live actor `id` (`ActorCell::kill`); `false` if there is none, or if its end
    /// is recorded already (its worker may still be tidying up after it).
    pub(crate) fn kill(&self, id: ActorId) -> bool {
        let Some(actor) = self.get(id) else {
            return false;
        };
        if look_at_packet(&actor, |p| p.is_ended()).is_none_or(|ended| ended) {
            return false;
        }
        actor.kill()
    }

    /// The exit watch of the live actor `id`, if there is one.
    pub(crate) fn exit_watch(&self, id: ActorId) -> Option<ExitWatch> {
        let actor = self.get(id)?;
        look_at_packet(&actor, |p| p.exit_watch())
    }
}

/// `f` of the actor's join packet, if it is still there. The packet is upgraded for the look:
/// if the actor's join handle is dropped meanwhile and its result recorded, the last reference
/// (and the result, user code) drops here, contained, as the monitor thread calls this too (a
/// deadlock report's kill).
fn look_at_packet<T>(actor: &ActorCell, f: impl FnOnce(&dyn ExitSource) -> T) -> Option<T> {
    let packet = actor.exit.upgrade()?;
    let seen = f(&*packet);
    crate::fault::contain(
        format_args!("the result of actor {}, dropped by a look at it", actor.id),
        move || drop(packet),
    );
    Some(seen)
}

/// Takes `actor`'s entry out of its (locked) shard, found by address, counting it out.
fn take_entry(shard: &mut ShardState, actor: &ActorCell) -> Option<Weak<ActorCell>> {
    let gone = match shard
        .entries
        .find_entry(hash_of(actor.id), |e| std::ptr::eq(Weak::as_ptr(e), actor))
    {
        Ok(entry) => Some(entry.remove().0),
        Err(_) => None,
    };
    if gone.is_some() {
        shard.removed += 1;
        if actor.is_handler() {
            shard.handler_entries -= 1;
        }
    }
    gone
}

/// Where an id's entry lies in its shard's table.
fn hash_of(id: ActorId) -> u64 {
    let mut h = IdHasher::default();
    h.write_u64(id.as_u64());
    h.finish()
}

/// The id of the cell an entry points at: what the table finds an entry by, and rehashes it by
/// when it grows.
fn id_of(entry: &Weak<ActorCell>) -> ActorId {
    // SAFETY: every entry is made by `Arc::downgrade` (`insert`), so its pointer is into the
    // cell's allocation, which the `Weak` keeps allocated. The cell's fields are all there:
    // an entry leaves the table in `ActorCell::end` (`remove`), whose caller holds the cell,
    // and a cell dropped without ending leaves it at the start of its `Drop`, before any of
    // its fields is dropped (`forget_dropped`); both under the shard's lock, which every
    // caller of this holds (`insert`'s rehash and check, `get`). (That second way out is for a
    // cell that was never in the table, in practice: a debug check in `Drop for ActorCell`
    // finds none in the table in any test, so no read here overlaps a cell's `Drop`.) The
    // field is a `Copy` value written once, when the cell was made. Only the id is read: no
    // reference to the cell is made.
    unsafe { (*Weak::as_ptr(entry)).id }
}

/// Takes back the table's strong count of a handler actor's cell, if the table still holds it.
///
/// # Safety
///
/// `cell` comes from `Arc::as_ptr` or `Weak::as_ptr` of the cell (a pointer that may reach the
/// whole allocation, the reference counts included, as `Arc::from_raw` needs: one made from a
/// `&ActorCell` may not), the cell is alive for the call, and its shard is locked.
unsafe fn take_held(cell: *const ActorCell) -> Option<Arc<ActorCell>> {
    // SAFETY: alive, by the caller's promise.
    let actor = unsafe { &*cell };
    if actor.held_by_live_table().swap(NO_SLOT, Ordering::Relaxed) != HELD {
        // Shutdown's sweep took it.
        return None;
    }
    // SAFETY: `cell` points into the `Arc` allocation that `Arc::into_raw` gave at the insert
    // (every cell lives in an `Arc`, made by `ActorCell::with_body`), which left the table one
    // strong count (`insert`), and may reach all of it (the caller's promise). The flag, raised
    // there and swapped back here under the same shard lock, makes this the one place that
    // count is turned back into an `Arc`: no other caller finds it raised, and the cell could
    // not be freed while the count was held.
    Some(unsafe { Arc::from_raw(cell) })
}

/// Takes the table's strong counts of the handler actors in `shard`, for shutdown. Their
/// entries stay until they end.
fn take_shards_handlers(shard: &Shard) -> Vec<Arc<ActorCell>> {
    let (held, seen) = {
        let shard = shard.lock();
        // Every live actor's cell, upgraded to look at it: a handler actor's is alive while
        // the table holds it. All of them are dropped below, with no lock held (one may be
        // the last reference to a cell whose actor ended meanwhile).
        let seen: Vec<Arc<ActorCell>> = shard.entries.iter().filter_map(Weak::upgrade).collect();
        let held: Vec<Arc<ActorCell>> = seen
            .iter()
            .filter(|a| a.is_handler())
            // SAFETY: `Arc::as_ptr` may reach the whole allocation; `a` keeps the cell alive;
            // the shard is locked.
            .filter_map(|a| unsafe { take_held(Arc::as_ptr(a)) })
            .collect();
        (held, seen)
    };
    drop(seen);
    held
}

/// Kills the actor with this id on the calling actor's runtime (see
/// [`JoinHandle::abort`](crate::JoinHandle::abort)); `false` if no live actor there has that id,
/// or outside any runtime (use [`Handle::kill`](crate::Handle::kill) there).
///
/// ```
/// use threadlet_runtime::Runtime;
///
/// let rt = Runtime::builder().workers(1).build().unwrap();
/// let sleeper = rt.spawn(|| threadlet_runtime::sleep(std::time::Duration::from_secs(3600)));
/// let id = sleeper.id();
/// assert!(rt.block_on(move || threadlet_runtime::kill(id)));
/// assert!(sleeper.join().unwrap_err().is_killed());
/// assert!(!rt.handle().kill(id)); // ended: no longer in the table
/// ```
pub fn kill(id: ActorId) -> bool {
    crate::context::current_shared().is_some_and(|s| s.live.kill(id))
}

/// The exit watch of the actor with this id on the calling actor's runtime, if it is live
/// (`None` outside any runtime: use [`Handle::exit_watch`](crate::Handle::exit_watch) there).
pub fn exit_watch(id: ActorId) -> Option<ExitWatch> {
    crate::context::current_shared().and_then(|s| s.live.exit_watch(id))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handler::{Activation, Completion, Step};
    use crate::{Runtime, SpawnOptions};
    use std::collections::HashSet;
    use std::time::{Duration, Instant};

    /// A handler actor that parks at once and for good: idle in no queue until a kill or
    /// shutdown ends it.
    struct Idle(#[allow(dead_code)] Completion<()>);

    impl Activation for Idle {
        fn run(&mut self) -> Step {
            Step::Park
        }
    }

    /// Waits (within a generous bound: a worker may hold the cell a moment longer, running
    /// or queueing it) until at most `holders` hold the cell; whether it came to that.
    fn held_by_at_most(cell: &Weak<ActorCell>, holders: usize) -> bool {
        let deadline = Instant::now() + Duration::from_secs(20);
        while cell.strong_count() > holders && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        cell.strong_count() <= holders
    }

    /// The table's strong count of a handler actor goes back once, whichever comes first: the
    /// actor's end (a kill, here) or shutdown's sweep (an actor idle until then). Either way
    /// the cell is freed once the actor is gone: a count never given back would keep it, and
    /// one given back twice would free it under a holder (the sanitizer step catches that).
    #[test]
    fn the_count_held_for_a_handler_actor_goes_back_once() {
        let rt = Runtime::builder().workers(1).build().unwrap();
        let killed = rt
            .start_handler(SpawnOptions::new(), |_, c| Idle(c))
            .unwrap();
        let idle = rt
            .start_handler(SpawnOptions::new(), |_, c| Idle(c))
            .unwrap();
        let cell_of = |id| Arc::downgrade(&rt.shared().live.get(id).expect("live"));
        let (killed_cell, idle_cell) = (cell_of(killed.id()), cell_of(idle.id()));
        assert_eq!(rt.shared().live.counts().handlers, 2);

        assert!(killed.abort());
        assert!(killed.join().unwrap_err().is_killed());
        assert!(
            held_by_at_most(&killed_cell, 0),
            "an ended handler actor's cell is still held"
        );
        // Once its first activation has parked it, only the table holds the idle one.
        assert!(held_by_at_most(&idle_cell, 1));
        assert_eq!(idle_cell.strong_count(), 1, "the table's count is gone");

        drop(rt);
        assert!(idle.join().unwrap_err().is_cancelled());
        assert!(
            held_by_at_most(&idle_cell, 0),
            "a handler actor swept at shutdown is still held"
        );
    }

    /// The table finds every live actor by its id, and only live ones, after its shards have
    /// grown many times over (each growth rehashes every entry by the id in its cell), and
    /// after half of the actors have ended (their entries removed by address).
    #[test]
    fn every_live_actor_is_found_by_its_id_as_the_table_grows_and_shrinks() {
        let rt = Runtime::builder().workers(1).build().unwrap();
        let handles: Vec<_> = (0..5_000)
            .map(|_| {
                rt.start_handler(SpawnOptions::new(), |_, c| Idle(c))
                    .unwrap()
            })
            .collect();
        let live = &rt.shared().live;
        for h in &handles {
            assert_eq!(live.get(h.id()).map(|c| c.id), Some(h.id()));
        }
        let (ended, kept): (Vec<_>, Vec<_>) = handles
            .into_iter()
            .enumerate()
            .partition(|(i, _)| i % 2 == 0);
        let ended: Vec<ActorId> = ended
            .into_iter()
            .map(|(_, h)| {
                let id = h.id();
                assert!(h.abort());
                assert!(h.join().unwrap_err().is_killed());
                id
            })
            .collect();
        for id in &ended {
            assert!(live.get(*id).is_none(), "ended actor {id} is still found");
            assert!(live.exit_watch(*id).is_none());
        }
        for (_, h) in &kept {
            assert_eq!(live.get(h.id()).map(|c| c.id), Some(h.id()));
            assert!(live.exit_watch(h.id()).is_some());
        }
        assert_eq!(live.counts().live, kept.len());
        assert!(live.kill(kept[0].1.id()));
    }

    fn hash(id: u64) -> u64 {
        hash_of(ActorId(std::num::NonZeroU64::new(id).unwrap()))
    }

    /// A shard's consecutive ids take neighbouring buckets, run by run, with filters that
    /// differ.
    #[test]
    fn neighbours_share_a_run_of_buckets() {
        let shard = 5;
        let ids: Vec<u64> = (0..RUN)
            .map(|rank| (32 * RUN + rank) * SHARDS as u64 + shard)
            .collect();
        let place = |id: u64| hash(id) & !FILTER_BITS;
        for (i, &id) in ids.iter().enumerate() {
            assert_eq!(place(id), place(ids[0]) + i as u64);
        }
        let filters: HashSet<u64> = ids.iter().map(|&id| hash(id) & FILTER_BITS).collect();
        assert!(filters.len() > RUN as usize / 2, "{filters:?}");
        // The next run starts elsewhere.
        let next = ids[RUN as usize - 1] + SHARDS as u64;
        assert_ne!(place(next), place(ids[0]) + RUN);
    }

    /// Live ids spaced by a power of two (one kept out of every 2^20 spawned) still spread
    /// over the runs of a table of their size, and the table finds each of them.
    #[test]
    fn spaced_ids_do_not_pile_up() {
        let ids: Vec<u64> = (1..=1024u64).map(|k| k << 20).collect();
        // Runs of a 1,024-bucket table: 128; a hash that kept a product's low bits (ten zeros
        // here) would put every one of these ids in the first.
        let runs: HashSet<u64> = ids.iter().map(|&id| (hash(id) & 1023) / RUN).collect();
        assert!(runs.len() > 112, "{} runs of 128", runs.len());
        // A table that grows as the live table's shards do, rehashing by the same hash.
        let mut table: HashTable<u64> = HashTable::new();
        for &id in &ids {
            table.insert_unique(hash(id), id, |&e| hash(e));
        }
        for &id in &ids {
            assert_eq!(table.find(hash(id), |&e| e == id), Some(&id));
        }
    }
}
