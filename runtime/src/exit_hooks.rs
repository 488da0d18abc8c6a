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
//!    hooks whose listener nobody holds are taken out first, and handed back to the caller,
//!    which drops them after unlocking (a hook is user code, and so is its destructor).
//! 3. If more than half of the capacity is still taken after that, the list grows to at least
//!    twice what it holds, so that the next prune comes only after as many pushes as this one
//!    scanned entries: pruning costs O(1) a push, amortised, and the list never holds more
//!    than twice the hooks still wanted, plus the few added since the last prune.
//!
//! A listener, once gone, cannot come back (nothing can make a strong reference from a
//! `Weak` with no strong one left), so no hook that is wanted is ever pruned. A hook whose
//! listener went away but that was not pruned yet still runs at the end; it finds nobody to
//! tell.

use std::any::Any;
use std::sync::Weak;

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

/// Hooks taken out by a prune, to be dropped after unlocking (see the module docs, step 2).
pub struct Pruned(#[allow(dead_code)] Vec<Entry>);

impl ExitHooks {
    /// An empty list (no allocation).
    pub const fn new() -> ExitHooks {
        ExitHooks(Vec::new())
    }

    /// Adds `hook`, pruning first if the list is full (see the module docs). Drop what it
    /// returns after unlocking whatever guards the list.
    pub fn push(&mut self, hook: ExitHook, listener: Option<Listener>) -> Pruned {
        let mut pruned = Vec::new();
        if !self.0.is_empty() && self.0.len() == self.0.capacity() {
            pruned = self.0.extract_if(.., |e| e.abandoned()).collect();
            if self.0.len() > self.0.capacity() / 2 {
                // Step 3: at least as many pushes before the next prune as this one scanned.
                self.0.reserve(self.0.len());
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
    pub fn call_all(self, down: &Down) {
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

    /// Hooks whose listeners come and go one by one stay few: the list holds about as many as
    /// are wanted, not one per hook ever added (step 3's bound: twice the wanted ones, plus
    /// the ones added since the last prune).
    #[test]
    fn hooks_of_listeners_that_went_are_pruned() {
        let mut hooks = ExitHooks::new();
        let kept = Arc::new(AtomicUsize::new(0));
        for _ in 0..3 {
            let k = kept.clone();
            let _ = hooks.push(
                Box::new(move |_| {
                    k.fetch_add(1, Ordering::Relaxed);
                }),
                listener(&kept),
            );
        }
        for _ in 0..10_000 {
            let gone = Arc::new(AtomicUsize::new(0));
            let _ = hooks.push(Box::new(|_| ()), listener(&gone));
            drop(gone);
            assert!(hooks.len() <= 16, "{} hooks kept", hooks.len());
        }
        let fired = Arc::new(AtomicUsize::new(0));
        let f = fired.clone();
        let _ = hooks.push(
            Box::new(move |_| {
                f.fetch_add(1, Ordering::Relaxed);
            }),
            None,
        );
        hooks.call_all(&down());
        assert_eq!(kept.load(Ordering::Relaxed), 3);
        assert_eq!(fired.load(Ordering::Relaxed), 1);
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
            let _ = hooks.push(Box::new(move |_| o.lock().push(i)), l);
        }
        assert_eq!(hooks.len(), 1_000);
        hooks.call_all(&down());
        assert_eq!(*order.lock(), (0..1_000).collect::<Vec<_>>());
    }

    /// What a prune takes out is handed back, not dropped under the caller's lock.
    #[test]
    fn pruned_hooks_are_dropped_by_the_caller() {
        struct Noisy(Arc<AtomicUsize>);
        impl Drop for Noisy {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::Relaxed);
            }
        }
        let dropped = Arc::new(AtomicUsize::new(0));
        let mut hooks = ExitHooks::new();
        let mut total = 0;
        let mut held = Vec::new();
        for _ in 0..64 {
            let gone = Arc::new(AtomicUsize::new(0));
            let noisy = Noisy(dropped.clone());
            let pruned = hooks.push(Box::new(move |_| drop(noisy)), listener(&gone));
            drop(gone);
            let before = dropped.load(Ordering::Relaxed);
            total += pruned.0.len();
            held.push(pruned);
            assert_eq!(dropped.load(Ordering::Relaxed), before);
        }
        assert!(total > 0);
        drop(held);
        assert_eq!(dropped.load(Ordering::Relaxed), total);
    }
}
