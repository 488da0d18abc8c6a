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

/// The error of [`register`]: the name belongs to another live actor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameTaken(pub String);

impl fmt::Display for NameTaken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the name {:?} is registered to another live actor",
            self.0
        )
    }
}

impl std::error::Error for NameTaken {}

/// Registers `name` for the actor behind `addr`, process-wide, until the actor ends (or
/// [`unregister`]). Registering the same actor again under the same name is fine; a name
/// held by another live actor is an error. The registration does not keep the actor alive.
///
/// ```
/// use threadlet::{Mailbox, RuntimeExt};
///
/// let rt = threadlet::Runtime::builder().workers(1).build().unwrap();
/// let (addr, h) = rt.spawn_actor(|mb: Mailbox<u32>| mb.recv());
/// threadlet::register("doc-example-counter", &addr).unwrap();
/// let found = threadlet::whereis::<u32>("doc-example-counter").unwrap();
/// assert!(found.same_mailbox(&addr));
/// found.send(7).unwrap();
/// assert_eq!(h.join().unwrap(), Some(7));
/// assert!(threadlet::whereis::<u32>("doc-example-counter").is_none()); // it ended
/// ```
pub fn register<M: Send + 'static>(
    name: impl Into<String>,
    addr: &Addr<M>,
) -> Result<(), NameTaken> {
    let name = name.into();
    let key = addr.mailbox_key();
    let replaced = {
        let mut names = names();
        if let Some(old) = names.get(&name)
            && old.key() != key
            && old.is_open()
        {
            return Err(NameTaken(name));
        }
        names.insert(name.clone(), Box::new(addr.uncounted()))
    };
    drop(replaced);
    // When the actor ends, its name goes, unless it was given to another actor meanwhile.
    addr.on_exit(Box::new(move |_| {
        let removed = {
            let mut names = names();
            match names.get(&name) {
                Some(e) if e.key() == key => names.remove(&name),
                _ => None,
            }
        };
        drop(removed);
    }));
    Ok(())
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
