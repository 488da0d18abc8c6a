//! The exit hooks that wait for one actor's end, and the pruning of those nobody wants any more.
//!
//! Two places keep such a list: an actor's [`ExitWatch`](crate::ExitWatch) (monitors made from
//! a join handle or an id) and, in the `threadlet` crate, an actor's mailbox (monitors, links
//! and names made through an address). Each hook runs once, at the end, or at once if the end
//! is already recorded.
//!
//! # Pruning
//!
//! A long-lived actor may be watched again and again by watchers that come and go: a server
//! that each client monitors for the length of one call, as Erlang's `gen_server:call` does.
//! Without pruning, every hook would stay until the server ends, so memory would grow with the
//! number of calls ever made, not with the watchers that are still there. A hook may therefore
//! name a *listener*, held weakly (a monitor's hook names the monitor's shared state):
//!
//! 1. While anybody holds the listener strongly, the hook is kept.
//! 2. When the list is full (its length has reached its capacity) and a hook is added, the
//!    hooks whose listener nobody holds are taken out first, and handed back to the caller
//!    ([`Pruned`]), which drops them after unlocking: a hook is user code, and so is its
//!    destructor, which runs contained (a panic in it is reported, as one in a hook is).
//! 3. Then the capacity is brought within two to four times what the list holds: doubled if
//!    more than half of it is taken, shrunk to twice the length if less than a quarter is
//!    (never under [`MIN_CAPACITY`]), else left as it is. So the next prune comes only after
//!    at least half the capacity in pushes, and scans the capacity: pruning costs at most two
//!    entries scanned a push, amortised. And the capacity never exceeds four times the hooks
//!    that were still wanted at the last prune (or `MIN_CAPACITY`): memory follows the
//!    watchers that are there, not the most there ever were.
//!
//! A listener, once gone, cannot come back (nothing can make a strong reference from a
//! `Weak` with no strong one left), so no hook that is wanted is ever pruned. A hook whose
//! listener went away but that was not pruned yet still runs at the end; it finds nobody to
//! tell.

use std::any::Any;
use std::sync::Weak;

use crate::fault;
use crate::join::{Down, call_exit_hook};

/// What runs once an actor has ended.
pub type ExitHook = Box<dyn FnOnce(&Down) + Send>;

/// Who a hook tells, held weakly: the hook is pruned once nobody holds it (see the module docs).
pub type Listener = Weak<dyn Any + Send + Sync>;

/// One hook, with its listener, if it has one.
struct Entry {
    hook: ExitHook,
    listener: Option<Listener>,
}

impl Entry {
    /// Nobody wants this hook's news any more.
    fn abandoned(&self) -> bool {
        self.listener
            .as_ref()
            .is_some_and(|l| Weak::strong_count(l) == 0)
    }
}

/// The exit hooks waiting for one actor's end; see the module docs.
#[derive(Default)]
pub struct ExitHooks(Vec<Entry>);

/// The capacity a prune never shrinks the list below (step 3): a handful of hooks is scanned
/// for nothing at most once every few pushes.
pub const MIN_CAPACITY: usize = 4;

/// Hooks taken out by a prune (step 2), to be dropped after unlocking whatever guards the list;
/// each is dropped contained.
#[must_use = "pruned hooks are user code: drop them after unlocking"]
pub struct Pruned(Vec<Entry>);

impl Drop for Pruned {
    fn drop(&mut self) {
        for e in self.0.drain(..) {
            fault::contain("an exit hook dropped unrun", || drop(e));
        }
    }
}

impl ExitHooks {
    /// An empty list (no allocation).
    pub const fn new() -> ExitHooks {
        ExitHooks(Vec::new())
    }

    /// Adds `hook`, pruning first if the list is full (see the module docs).
    pub fn push(&mut self, listener: Option<Listener>, hook: ExitHook) -> Pruned {
        let mut pruned = Vec::new();
        if !self.0.is_empty() && self.0.len() == self.0.capacity() {
            pruned = self.0.extract_if(.., |e| e.abandoned()).collect();
            // Step 3: capacity within two to four times the length.
            let (len, cap) = (self.0.len(), self.0.capacity());
            if len > cap / 2 {
                self.0.reserve(len);
            } else if len < cap / 4 {
                self.0.shrink_to((2 * len).max(MIN_CAPACITY));
            }
        }
        self.0.push(Entry { hook, listener });
        Pruned(pruned)
    }

    /// The hooks waiting, pruned or not.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether no hook waits.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Calls every hook with `down`, in the order they were added, each contained
    /// ([`call_exit_hook`]). Call it with no lock held.
    #[inline]
    pub fn call_all(self, down: &Down) {
        if self.0.is_empty() {
            // Most actors end unwatched: nothing to call, and no buffer to free.
            return;
        }
        for e in self.0 {
            call_exit_hook(e.hook, down);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Weak};

    use super::*;
    use crate::ActorId;
    use crate::join::ExitReason;

    fn down() -> Down {
        Down {
            id: ActorId::next(),
            name: None,
            reason: ExitReason::Normal,
        }
    }

    fn listener(l: &Arc<AtomicUsize>) -> Option<Listener> {
        let w: Weak<AtomicUsize> = Arc::downgrade(l);
        Some(w)
    }

    /// A hook that counts its call in `n`.
    fn counting(n: &Arc<AtomicUsize>) -> ExitHook {
        let n = n.clone();
        Box::new(move |_| {
            n.fetch_add(1, Ordering::Relaxed);
        })
    }

    /// Hooks whose listeners come and go one by one stay few: the list holds about as many as
    /// are wanted, not one per hook ever added; the wanted ones all run.
    #[test]
    fn hooks_of_listeners_that_went_are_pruned() {
        let mut hooks = ExitHooks::new();
        let kept = Arc::new(AtomicUsize::new(0));
        for _ in 0..3 {
            let _ = hooks.push(listener(&kept), counting(&kept));
        }
        for _ in 0..10_000 {
            let gone = Arc::new(AtomicUsize::new(0));
            let _ = hooks.push(listener(&gone), Box::new(|_| ()));
            drop(gone);
            assert!(hooks.0.capacity() <= 16, "room for {}", hooks.0.capacity());
        }
        // A listener that was never there (`Weak::new`) is as gone as one dropped.
        for _ in 0..10_000 {
            let never: Weak<()> = Weak::new();
            let _ = hooks.push(Some(never), Box::new(|_| ()));
            assert!(hooks.0.capacity() <= 16, "room for {}", hooks.0.capacity());
        }
        let fired = Arc::new(AtomicUsize::new(0));
        let _ = hooks.push(None, counting(&fired));
        hooks.call_all(&down());
        assert_eq!(kept.load(Ordering::Relaxed), 3);
        assert_eq!(fired.load(Ordering::Relaxed), 1);
    }

    /// Memory follows the watchers that are there, not the most there ever were: after a
    /// crowd of listeners has gone, the list's room shrinks back as new ones come and go.
    #[test]
    fn room_shrinks_back_after_a_crowd_has_gone() {
        let mut hooks = ExitHooks::new();
        let crowd: Vec<_> = (0..100_000)
            .map(|_| Arc::new(AtomicUsize::new(0)))
            .collect();
        for l in &crowd {
            let _ = hooks.push(listener(l), Box::new(|_| ()));
        }
        assert!(hooks.0.capacity() >= 100_000);
        drop(crowd);
        for _ in 0..300_000 {
            let gone = Arc::new(AtomicUsize::new(0));
            let _ = hooks.push(listener(&gone), Box::new(|_| ()));
        }
        assert!(hooks.0.capacity() <= 16, "room for {}", hooks.0.capacity());
    }

    /// Hooks that name no listener, and those whose listener lives, are never pruned, however
    /// many there are; they run in the order they were added.
    #[test]
    fn wanted_hooks_are_never_pruned() {
        let mut hooks = ExitHooks::new();
        let order = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let alive = Arc::new(AtomicUsize::new(0));
        for i in 0..1_000 {
            let o = order.clone();
            let l = if i % 2 == 0 { listener(&alive) } else { None };
            let _ = hooks.push(l, Box::new(move |_| o.lock().push(i)));
        }
        assert_eq!(hooks.len(), 1_000);
        hooks.call_all(&down());
        assert_eq!(*order.lock(), (0..1_000).collect::<Vec<_>>());
    }

    /// What a prune takes out is handed back, not dropped in `push` (under the caller's lock),
    /// and a panic in the destructor of one is contained when the caller drops it.
    #[test]
    fn pruned_hooks_are_dropped_by_the_caller_contained() {
        struct Noisy(Arc<AtomicUsize>);
        impl Drop for Noisy {
            fn drop(&mut self) {
                let n = self.0.fetch_add(1, Ordering::Relaxed);
                if n == 0 {
                    panic!("a hook's destructor panics");
                }
            }
        }
        let dropped = Arc::new(AtomicUsize::new(0));
        let mut hooks = ExitHooks::new();
        let mut total = 0;
        let mut held = Vec::new();
        for _ in 0..64 {
            let gone = Arc::new(AtomicUsize::new(0));
            let noisy = Noisy(dropped.clone());
            let before = dropped.load(Ordering::Relaxed);
            let pruned = hooks.push(listener(&gone), Box::new(move |_| drop(noisy)));
            assert_eq!(dropped.load(Ordering::Relaxed), before);
            drop(gone);
            total += pruned.0.len();
            held.push(pruned);
        }
        assert!(total > 0);
        drop(held);
        assert_eq!(dropped.load(Ordering::Relaxed), total);
    }
}
