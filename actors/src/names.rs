//! Names: a process-wide registry from names to actors' addresses (Erlang's `register` and
//! `whereis`).
//!
//! The registry holds an *uncounted* address of each registered mailbox, so being registered
//! does not keep an actor alive (it still ends when its last counted `Addr` goes). An exit
//! hook removes the entry when the actor ends, if the name still points to that mailbox;
//! `whereis` also drops an entry whose mailbox it finds closed (the actor closed it, or the
//! hook has not run yet), so a name never leads to an ended actor. Entries removed from the
//! registry are dropped after its lock is released: the last reference to a mailbox drops the
//! messages in it, whose destructors are user code.

use std::any::Any;
use std::collections::HashMap;
use std::fmt;
use std::sync::{LazyLock, Mutex, PoisonError};

use crate::mailbox::{Addr, UncountedAddr};

/// One registered mailbox, with its message type erased.
trait Registered: Send + Sync {
    fn is_open(&self) -> bool;
    fn key(&self) -> usize;
    fn as_any(&self) -> &dyn Any;
}

impl<M: Send + 'static> Registered for UncountedAddr<M> {
    fn is_open(&self) -> bool {
        UncountedAddr::is_open(self)
    }
    fn key(&self) -> usize {
        self.mailbox_key()
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

static NAMES: LazyLock<Mutex<HashMap<String, Box<dyn Registered>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

fn names() -> std::sync::MutexGuard<'static, HashMap<String, Box<dyn Registered>>> {
    // Nothing runs under this lock that could panic half-way through an update.
    NAMES.lock().unwrap_or_else(PoisonError::into_inner)
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
/// nothing while the name is still its: after an `unregister`, registering again adds a new
/// exit hook); a name held by another live actor is an error, and so is an actor that has
/// ended.
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
    let replaced = {
        let mut names = names();
        match names.get(&name) {
            // Registered to this actor already (its mailbox open or not: an actor may close its
            // own): the exit hook of that registration stands, unless the actor has ended (a
            // racing `register` of it inserted the entry, and its hook is about to remove it).
            // Lock order: names, then the mailbox, as in `whereis`.
            Some(old) if old.key() == key => {
                return if addr.has_ended() {
                    Err(RegisterError::Ended(name))
                } else {
                    Ok(())
                };
            }
            Some(old) if old.is_open() => return Err(RegisterError::Taken(name)),
            _ => {}
        }
        names.insert(name.clone(), Box::new(addr.uncounted()))
    };
    drop(replaced);
    // When the actor ends, its name goes, unless it was given to another actor meanwhile.
    let hook_name = name.clone();
    let kept = addr.on_exit(Box::new(move |_| {
        let removed = {
            let mut names = names();
            match names.get(&hook_name) {
                Some(e) if e.key() == key => names.remove(&hook_name),
                _ => None,
            }
        };
        drop(removed);
    }));
    // Not kept: the actor had ended, and the hook has just removed the name again.
    if kept {
        Ok(())
    } else {
        Err(RegisterError::Ended(name))
    }
}

/// The address registered under `name`, if its actor is live and its messages are `M`.
pub fn whereis<M: Send + 'static>(name: &str) -> Option<Addr<M>> {
    let mut names = names();
    let entry = names.get(name)?;
    if !entry.is_open() {
        let removed = names.remove(name);
        drop(names);
        drop(removed);
        return None;
    }
    entry
        .as_any()
        .downcast_ref::<UncountedAddr<M>>()
        .map(UncountedAddr::addr)
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
    let removed = names().remove(name);
    removed.is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An actor that registers itself again and again (say, at each restart of a loop) keeps
    /// one exit hook for the name, not one per call.
    #[test]
    fn registering_the_same_actor_again_adds_no_hook() {
        let rt = threadlet_runtime::Runtime::builder()
            .workers(1)
            .build()
            .unwrap();
        let (addr, mb) = crate::mailbox::mailbox::<u8>();
        let h = rt.spawn(move || mb.recv());
        addr.attach(&h);
        for _ in 0..100 {
            register("names-unit-again", &addr).unwrap();
        }
        assert_eq!(addr.exit_hooks(), 1);
        addr.send(1).unwrap();
        assert_eq!(h.join().unwrap(), Some(1));
        assert!(whereis::<u8>("names-unit-again").is_none());
    }
}
