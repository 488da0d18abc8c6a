//! Names: a process-wide registry from names to actors' addresses (Erlang's `register` and
//! `whereis`).
//!
//! The registry holds an *uncounted* address of each registered mailbox, so being registered does
//! not keep an actor alive (it still ends when its last counted `Addr` goes). One exit hook per
//! mailbox, put in place by the first registration that finds none, removes the mailbox's entries
//! when the actor ends, each if the name still points to that mailbox (a supervised child's lent
//! mailbox: at the end of the incarnation then attached, so a name given through its address goes
//! at a restart; `Child::register` gives it to each incarnation again); `whereis` also drops an
//! entry whose mailbox it finds closed with its actor ended (the hook has not run yet), so a name
//! never leads to an ended actor. An actor that closed its mailbox to drain it is live, and keeps
//! its names until it ends: `whereis` finds nothing for them meanwhile (its mailbox takes no
//! message), and another actor's `register` is refused. Nor does a name lead to an actor whose
//! counted addresses have all gone: that actor has seen, or will see, its mailbox end (most actors
//! then end), and an address made for it would take messages that it may never receive. Such an
//! actor keeps its name (it is live, and may make itself a new address, after which `whereis` finds
//! it again). Entries removed from the registry are dropped after its lock is released: the last
//! reference to a mailbox drops the messages in it, whose destructors are user code.

use std::any::Any;
use std::collections::HashMap;
use std::fmt;
use std::sync::{LazyLock, Mutex, PoisonError};

use crate::mailbox::{Addr, UncountedAddr};

/// One registered mailbox, with its message type erased.
trait Registered: Send + Sync {
    fn holds_names(&self) -> bool;
    fn key(&self) -> usize;
    fn as_any(&self) -> &dyn Any;
}

impl<M: Send + 'static> Registered for UncountedAddr<M> {
    fn holds_names(&self) -> bool {
        UncountedAddr::holds_names(self)
    }
    fn key(&self) -> usize {
        self.mailbox_key()
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The registry's state.
#[derive(Default)]
struct Names {
    /// Each name's mailbox.
    by_name: HashMap<String, Box<dyn Registered>>,
    /// The mailboxes (by `mailbox_key`) that have a `NamesHook` (made by the registration
    /// that entered the mailbox here, and put in place once it has unlocked and dropped what
    /// it replaced), each with the names `by_name` gives it: one hook a mailbox, however many
    /// names and registrations, takes them all away at the actor's end.
    hooked: HashMap<usize, Vec<String>>,
}

impl Names {
    /// `name` no longer leads to mailbox `key` (unregistered, evicted or given to another).
    fn forget_name(&mut self, key: usize, name: &str) {
        if let Some(held) = self.hooked.get_mut(&key) {
            held.retain(|n| n != name);
        }
    }
}

static NAMES: LazyLock<Mutex<Names>> = LazyLock::new(Mutex::default);

fn names() -> std::sync::MutexGuard<'static, Names> {
    // Nothing runs under this lock that could panic half-way through an update.
    NAMES.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The names part of one mailbox's exit hook: dropped, it removes every name still registered
/// to that mailbox, and the mailbox from `hooked`. The hook drops it when the actor ends (at
/// once, if it had ended when the hook was given; for a supervised child, at the end of the
/// incarnation then attached); a mailbox dropped with the hook unrun (before an actor ever
/// attached) drops it too, as does a `register` that unwinds before giving it. So `hooked`
/// never keeps the key of a mailbox that is gone (a new mailbox at the same address would
/// find a hook that does not exist).
struct NamesHook(usize);

impl Drop for NamesHook {
    fn drop(&mut self) {
        let key = self.0;
        let removed: Vec<Box<dyn Registered>> = {
            let mut names = names();
            let held = names.hooked.remove(&key).unwrap_or_default();
            let mut removed = Vec::new();
            for name in held {
                // Unless the name was given to another actor meanwhile.
                if names.by_name.get(&name).is_some_and(|e| e.key() == key) {
                    removed.extend(names.by_name.remove(&name));
                }
            }
            removed
        };
        // Dropped with no lock held (module docs).
        drop(removed);
    }
}

/// Why [`register`] refused a name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegisterError {
    /// The name is registered to another live actor.
    Taken(String),
    /// The actor behind the address has ended: a name for it would only be removed at once
    /// (Erlang's `register` refuses a dead process the same way).
    Ended(String),
}

impl fmt::Display for RegisterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RegisterError::Taken(name) => {
                write!(f, "the name {name:?} is registered to another live actor")
            }
            RegisterError::Ended(name) => {
                write!(f, "cannot register {name:?}: its actor has ended")
            }
        }
    }
}

impl std::error::Error for RegisterError {}

/// Registers `name` for the actor behind `addr`, process-wide, until the actor ends (or
/// [`unregister`]). Registering the same actor again under the same name is fine (and adds
/// nothing; an actor keeps one exit hook for all its names, however often it registers and
/// unregisters); a name held by another live actor is an error (one that has closed its mailbox
/// to drain it included), and so is an actor that has ended. An actor that ends while
/// `register` runs is such an error too, although the name may have been visible for that
/// moment: a [`whereis`] in between found the actor live, and what was sent through it was
/// delivered as to any live actor. The name goes with the actor either way.
/// The registration does not keep the actor alive.
///
/// ```
/// use threadlet::{Mailbox, RegisterError, RuntimeExt};
///
/// let rt = threadlet::Runtime::builder().workers(1).build().unwrap();
/// let (addr, h) = rt.spawn_actor(|mb: Mailbox<u32>| mb.recv());
/// threadlet::register("doc-example-counter", &addr).unwrap();
/// let found = threadlet::whereis::<u32>("doc-example-counter").unwrap();
/// assert!(found.same_mailbox(&addr));
/// found.send(7).unwrap();
/// assert_eq!(h.join().unwrap(), Some(7));
/// assert!(threadlet::whereis::<u32>("doc-example-counter").is_none()); // it ended
/// assert_eq!(
///     threadlet::register("doc-example-counter", &addr),
///     Err(RegisterError::Ended("doc-example-counter".into()))
/// );
/// ```
pub fn register<M: Send + 'static>(
    name: impl Into<String>,
    addr: &Addr<M>,
) -> Result<(), RegisterError> {
    let name = name.into();
    let key = addr.mailbox_key();
    let (replaced, hooked) = {
        let mut names = names();
        match names.by_name.get(&name) {
            // Registered to this actor already (its mailbox open or not: an actor may close its
            // own): the exit hook stands, unless the actor has ended (a racing `register` of
            // it inserted the entry, and its hook is about to remove it). Lock order: names,
            // then the mailbox, as in `whereis`.
            Some(old) if old.key() == key => {
                return if addr.has_ended() {
                    Err(RegisterError::Ended(name))
                } else {
                    Ok(())
                };
            }
            Some(old) if old.holds_names() => return Err(RegisterError::Taken(name)),
            _ => {}
        }
        let hooked = names.hooked.contains_key(&key);
        if hooked && addr.has_ended() {
            // Its hook is about to run (or running): it would take this name away at once.
            return Err(RegisterError::Ended(name));
        }
        let replaced = names
            .by_name
            .insert(name.clone(), Box::new(addr.uncounted()));
        if let Some(old) = &replaced {
            // A closed mailbox's entry, another one's (this one's returned above).
            names.forget_name(old.key(), &name);
        }
        let held = names.hooked.entry(key).or_default();
        if !held.contains(&name) {
            held.push(name.clone());
        }
        (replaced, hooked)
    };
    // When the actor ends, its names go, unless given to other actors meanwhile. Made before
    // the drop below, which runs user code (a replaced mailbox's last messages): should that
    // unwind, the guard still takes this mailbox out of `hooked`.
    let hook = (!hooked).then(|| NamesHook(key));
    drop(replaced);
    let Some(hook) = hook else {
        // The hook of an earlier registration of this mailbox takes this name away too.
        return Ok(());
    };
    let kept = addr.on_exit(Box::new(move |_| drop(hook)));
    // Not kept: the actor had ended, and the hook has just removed the name again.
    if kept {
        Ok(())
    } else {
        Err(RegisterError::Ended(name))
    }
}

/// The address registered under `name`, if its actor is live and can be sent to, and its
/// messages are `M`.
///
/// `None` also while every counted address of the actor's mailbox is gone, though the actor
/// may still run: its `recv` returns `None` then (a handler actor stops), so a message sent
/// through an address made for it might never be received. The name stays the actor's
/// meanwhile ([`register`] by another actor is refused with `Taken`), and leads to it again
/// once the actor makes itself an address ([`Mailbox::addr`](crate::Mailbox::addr)).
pub fn whereis<M: Send + 'static>(name: &str) -> Option<Addr<M>> {
    let mut names = names();
    let entry = names.by_name.get(name)?;
    if !entry.holds_names() {
        let removed = names.by_name.remove(name);
        if let Some(entry) = &removed {
            names.forget_name(entry.key(), name);
        }
        drop(names);
        drop(removed);
        return None;
    }
    // `None` too while its live actor drains the mailbox it closed (the name stays its own),
    // and once every counted address of the mailbox has gone, while it is still open: its
    // actor is ending (`UncountedAddr::upgrade`), and its exit hook removes the name.
    entry
        .as_any()
        .downcast_ref::<UncountedAddr<M>>()
        .and_then(UncountedAddr::upgrade)
}

/// Removes `name` from the registry; `false` if it was not registered.
///
/// ```
/// use threadlet::{Mailbox, RuntimeExt};
///
/// let rt = threadlet::Runtime::builder().workers(1).build().unwrap();
/// let (addr, _h) = rt.spawn_actor(|mb: Mailbox<u8>| mb.recv());
/// threadlet::register("doc-example-temp", &addr).unwrap();
/// assert!(threadlet::unregister("doc-example-temp"));
/// assert!(threadlet::whereis::<u8>("doc-example-temp").is_none());
/// assert!(!threadlet::unregister("doc-example-temp"));
/// ```
pub fn unregister(name: &str) -> bool {
    let removed = {
        let mut names = names();
        let removed = names.by_name.remove(name);
        if let Some(entry) = &removed {
            // The mailbox's hook stays, for its other names and later registrations.
            names.forget_name(entry.key(), name);
        }
        removed
    };
    // Dropped with no lock held (module docs).
    removed.is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use threadlet_runtime::{JoinHandle, Runtime};

    /// An actor that receives one message, and its address.
    fn receiver(rt: &Runtime) -> (Addr<u8>, JoinHandle<Option<u8>>) {
        let (addr, mb) = crate::mailbox::mailbox::<u8>();
        let h = rt.spawn(move || mb.recv());
        addr.attach(&h);
        (addr, h)
    }

    /// An actor that registers itself again and again (say, at each restart of a loop) keeps
    /// one exit hook for the name, not one per call.
    #[test]
    fn registering_the_same_actor_again_adds_no_hook() {
        let rt = Runtime::builder().workers(1).build().unwrap();
        let (addr, h) = receiver(&rt);
        for _ in 0..100 {
            register("names-unit-again", &addr).unwrap();
        }
        assert_eq!(addr.exit_hooks(), 1);
        addr.send(1).unwrap();
        assert_eq!(h.join().unwrap(), Some(1));
        assert!(whereis::<u8>("names-unit-again").is_none());
    }

    /// A mailbox registered before any actor attached, then dropped: its hook goes unrun, and
    /// still takes the name away and forgets the mailbox, so that a new mailbox at the same
    /// address does not find a hook in place that does not exist.
    #[test]
    fn a_mailbox_dropped_unattached_leaves_no_hook_behind() {
        let (addr, mb) = crate::mailbox::mailbox::<u8>();
        register("names-unit-unattached", &addr).unwrap();
        let key = addr.mailbox_key();
        assert!(names().hooked.contains_key(&key));
        drop((addr, mb));
        // The registry's own reference goes with the closed entry, and with it the mailbox.
        assert!(whereis::<u8>("names-unit-unattached").is_none());
        assert!(!names().hooked.contains_key(&key));
    }

    /// Registering over a closed mailbox's entry drops that mailbox's last messages, user code
    /// that may panic. The registration unwinds, but leaves no mailbox in `hooked` without a
    /// hook: the next registration of the same actor puts one in place, and its names go
    /// when it ends.
    #[test]
    fn a_registration_that_unwinds_leaves_no_mailbox_without_a_hook() {
        struct PanicsWhenDropped;
        impl Drop for PanicsWhenDropped {
            fn drop(&mut self) {
                panic!("a message's destructor panicked");
            }
        }
        // A closed mailbox that keeps its queue (a lent one's drop does not empty it), with
        // the registry's entry as its last reference.
        let (closed, mb) = crate::mailbox::mailbox::<PanicsWhenDropped>();
        let lent = mb.into_lent();
        register("names-unit-unwinds", &closed).unwrap();
        closed.send(PanicsWhenDropped).unwrap();
        closed.uncounted().close();
        drop((closed, lent));

        let rt = Runtime::builder().workers(1).build().unwrap();
        let (addr, h) = receiver(&rt);
        let key = addr.mailbox_key();
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            register("names-unit-unwinds", &addr)
        }));
        assert!(unwound.is_err(), "the replaced entry's message panicked");
        assert!(!names().hooked.contains_key(&key));
        register("names-unit-unwinds-2", &addr).unwrap();
        assert_eq!(addr.exit_hooks(), 1);
        addr.send(1).unwrap();
        assert_eq!(h.join().unwrap(), Some(1));
        // The name goes with the actor's exit hooks, which may finish a moment after the
        // join returns.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while names().by_name.contains_key("names-unit-unwinds-2") {
            assert!(std::time::Instant::now() < deadline, "its name outlived it");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert!(!unregister("names-unit-unwinds-2"));
        drop(addr);
        assert!(!names().hooked.contains_key(&key));
    }

    /// A closed mailbox registered again and again, its entry evicted by `whereis` each time
    /// (a mailbox closed while its owner drains it), keeps one copy of the name.
    #[test]
    fn evicted_names_do_not_pile_up() {
        let (addr, mb) = crate::mailbox::mailbox::<u8>();
        mb.close();
        let key = addr.mailbox_key();
        for _ in 0..100 {
            register("names-unit-evicted", &addr).unwrap();
            assert!(whereis::<u8>("names-unit-evicted").is_none());
        }
        let held = names().hooked.get(&key).map_or(0, Vec::len);
        assert_eq!(held, 0);
    }

    /// A name taken over from a closed mailbox leaves that mailbox's list: only the mailbox
    /// the name leads to keeps it.
    #[test]
    fn a_name_taken_over_leaves_the_old_mailboxs_list() {
        let (old, old_mb) = crate::mailbox::mailbox::<u8>();
        old_mb.close();
        let (new, _new_mb) = crate::mailbox::mailbox::<u8>();
        register("names-unit-taken-over", &old).unwrap();
        register("names-unit-taken-over", &new).unwrap();
        let listed = |addr: &Addr<u8>| {
            names()
                .hooked
                .get(&addr.mailbox_key())
                .is_some_and(|held| held.iter().any(|n| n == "names-unit-taken-over"))
        };
        assert!(!listed(&old));
        assert!(listed(&new));
        assert!(unregister("names-unit-taken-over"));
    }

    /// Unregistering and registering again, under one name or several, keeps one exit hook
    /// for the actor's names; when it ends, every name it still holds goes, and the names it
    /// let go of stay with whoever took them since.
    #[test]
    fn register_unregister_cycles_keep_one_hook() {
        let rt = Runtime::builder().workers(1).build().unwrap();
        let (addr, h) = receiver(&rt);
        for i in 0..100 {
            register("names-unit-cycle", &addr).unwrap();
            assert!(unregister("names-unit-cycle"));
            register(format!("names-unit-cycle-{}", i % 3), &addr).unwrap();
        }
        assert_eq!(addr.exit_hooks(), 1);
        // A name it let go of, taken by another actor, stays with that one.
        assert!(unregister("names-unit-cycle-0"));
        let (other, other_h) = receiver(&rt);
        register("names-unit-cycle-0", &other).unwrap();

        addr.send(1).unwrap();
        assert_eq!(h.join().unwrap(), Some(1));
        for gone in [
            "names-unit-cycle",
            "names-unit-cycle-1",
            "names-unit-cycle-2",
        ] {
            assert!(whereis::<u8>(gone).is_none(), "{gone}");
            assert!(!unregister(gone), "{gone} was still registered");
        }
        assert!(whereis::<u8>("names-unit-cycle-0").is_some());
        other.send(2).unwrap();
        assert_eq!(other_h.join().unwrap(), Some(2));
        assert!(whereis::<u8>("names-unit-cycle-0").is_none());
    }
}
