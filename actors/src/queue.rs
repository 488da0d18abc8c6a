//! [`MessageQueue`]: the lock-free multi-producer, single-consumer queue inside a mailbox.
//!
//! Dmitry Vyukov's intrusive MPSC node queue: a singly linked list from the oldest node (`tail`,
//! the consumer's end) to the newest (`head`, where producers append). The node at `tail` is
//! always a *stub* whose value has been taken (or never existed); the messages are in the nodes
//! after it.
//!
//! * Push (any thread): allocate a node, swap it in as `head` (one atomic swap: producers are
//!   ordered by it), then link the previous head's `next` to it.
//! * Pop (the one consumer): read `tail.next`; if set, it becomes the new stub, its value is
//!   moved out, and the old stub is freed.
//!
//! Between a producer's swap and its link the list is cut: the consumer sees the nodes before
//! the cut only, so a pop may report nothing while a push is under way. The mailbox deals with
//! that window (it counts senders in flight, see `mailbox.rs`); this queue only promises that a
//! push whose link is visible to the consumer is popped, once, in order of the swaps.
//!
//! Why no node is freed while in use: producers touch only the node they swapped out of `head`
//! (to link it), and the consumer frees a node only once it has moved past it, which requires
//! that node's `next` to be linked, which is the last thing its producer does with it.

use std::ptr;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};

use threadlet_runtime::sync::{AtomicPtr, UnsafeCell};

struct Node<M> {
    next: AtomicPtr<Node<M>>,
    /// `None` in the stub.
    value: UnsafeCell<Option<M>>,
}

/// A message in a node of its own, allocated before its push.
pub(crate) struct Pending<M>(Box<Node<M>>);

impl<M> Pending<M> {
    pub(crate) fn new(value: M) -> Pending<M> {
        Pending(Box::new(Node {
            next: AtomicPtr::new(ptr::null_mut()),
            value: UnsafeCell::new(Some(value)),
        }))
    }

    /// The message back, for a push that is refused.
    pub(crate) fn into_inner(self) -> M {
        let node = *self.0;
        node.value
            .into_inner()
            .expect("a pending node holds its message")
    }

    fn into_raw(self) -> *mut Node<M> {
        Box::into_raw(self.0)
    }
}

/// See the module docs.
pub(crate) struct MessageQueue<M> {
    /// The newest node; producers swap themselves in here.
    head: AtomicPtr<Node<M>>,
    /// The stub: the consumer's end. Only the consumer reads or writes it.
    tail: UnsafeCell<*mut Node<M>>,
}

// SAFETY: messages move from producer threads to the consumer's, so `M: Send` suffices; the
// raw pointers are owned by the queue and accessed under the protocol of the module docs.
unsafe impl<M: Send> Send for MessageQueue<M> {}
// SAFETY: as above: `push` is safe from any thread, `pop` is `unsafe` and requires one consumer.
unsafe impl<M: Send> Sync for MessageQueue<M> {}

impl<M> MessageQueue<M> {
    pub(crate) fn new() -> MessageQueue<M> {
        let stub = Box::into_raw(Box::new(Node {
            next: AtomicPtr::new(ptr::null_mut()),
            value: UnsafeCell::new(None),
        }));
        MessageQueue {
            head: AtomicPtr::new(stub),
            tail: UnsafeCell::new(stub),
        }
    }

    /// Appends a message. Any thread, any time. The node was allocated beforehand
    /// ([`Pending::new`]), so a push is two atomic operations with nothing between them that
    /// could block or run user code.
    pub(crate) fn push(&self, pending: Pending<M>) {
        let node = pending.into_raw();
        // AcqRel: release publishes the new node's contents to the producer that links after
        // it (and, through its link, to the consumer); acquire pairs with the previous
        // producer's swap, so this one sees `prev` initialised.
        let prev = self.head.swap(node, AcqRel);
        // SAFETY: `prev` is a live node: the consumer frees a node only after moving past it,
        // which needs the `next` link written below, and nobody else writes it (each node is
        // swapped out of `head` exactly once).
        // Release: pairs with the consumer's acquire load of `next` in `pop`, publishing the
        // node and its value.
        unsafe { (*prev).next.store(node, Release) };
    }

    /// Removes the oldest message whose push is linked, if any.
    ///
    /// # Safety
    ///
    /// Only one thread at a time may call `pop` (and `len_hint`, `Drop`): the consumer.
    pub(crate) unsafe fn pop(&self) -> Option<M> {
        // SAFETY: only the consumer touches `tail` (the caller's promise).
        let tail = self.tail.with(|t| unsafe { *t });
        // SAFETY: `tail` is the live stub, owned by the consumer.
        // Acquire: pairs with the release store of the producer that linked `next`.
        let next = unsafe { (*tail).next.load(Acquire) };
        if next.is_null() {
            return None;
        }
        // SAFETY: the consumer alone moves `tail`.
        self.tail.with_mut(|t| unsafe { *t = next });
        // SAFETY: `next` is linked, so its producer is done with it except for its `next`
        // field (an atomic); the value is the consumer's to take, once: `next` is now the stub.
        let value = unsafe { (*next).value.with_mut(|v| (*v).take()) };
        // SAFETY: the old stub is unreachable now: `head` moved past it (its `next` is set) and
        // `tail` points after it; nobody else holds it.
        drop(unsafe { Box::from_raw(tail) });
        debug_assert!(value.is_some(), "a linked node holds a message");
        value
    }
}

impl<M> Drop for MessageQueue<M> {
    fn drop(&mut self) {
        // `&mut self`: no producer or consumer is left, so every push is linked.
        // SAFETY: no other access to `tail` can exist while we hold `&mut self`.
        let mut node = self.tail.with(|t| unsafe { *t });
        while !node.is_null() {
            // SAFETY: every node from the stub on is owned by the queue and freed once here.
            let boxed = unsafe { Box::from_raw(node) };
            node = boxed.next.load(Relaxed);
            drop(boxed); // the stub's value is `None`; the others drop their message
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn fifo_for_one_producer() {
        let q = MessageQueue::new();
        // SAFETY (every `pop` here): this test thread is the only consumer.
        assert_eq!(unsafe { q.pop() }, None);
        for i in 0..100 {
            q.push(Pending::new(i));
        }
        for i in 0..100 {
            assert_eq!(unsafe { q.pop() }, Some(i));
        }
        assert_eq!(unsafe { q.pop() }, None);
    }

    #[test]
    fn drop_frees_what_is_left() {
        let token = Arc::new(());
        let q = MessageQueue::new();
        for _ in 0..10 {
            q.push(Pending::new(token.clone()));
        }
        // SAFETY: the only consumer.
        drop(unsafe { q.pop() });
        assert_eq!(Arc::strong_count(&token), 10);
        drop(q);
        assert_eq!(Arc::strong_count(&token), 1);
    }

    #[test]
    fn many_producers_each_in_order() {
        const PRODUCERS: usize = 4;
        const EACH: usize = 10_000;
        let q = Arc::new(MessageQueue::new());
        let producers: Vec<_> = (0..PRODUCERS)
            .map(|p| {
                let q = q.clone();
                std::thread::spawn(move || {
                    for i in 0..EACH {
                        q.push(Pending::new((p, i)));
                    }
                })
            })
            .collect();
        let mut next = [0; PRODUCERS];
        let mut got = 0;
        while got < PRODUCERS * EACH {
            // SAFETY: the only consumer.
            match unsafe { q.pop() } {
                Some((p, i)) => {
                    assert_eq!(i, next[p], "producer {p}'s messages out of order");
                    next[p] += 1;
                    got += 1;
                }
                None => std::thread::yield_now(),
            }
        }
        for p in producers {
            p.join().unwrap();
        }
        // SAFETY: the only consumer.
        assert_eq!(unsafe { q.pop() }, None);
    }
}

/// Loom models of the queue alone (the mailbox's protocol around it is modelled in
/// `tests/loom_mailbox.rs`):
///
/// ```text
/// RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p threadlet --lib --release queue
/// ```
#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use loom::thread;
    use std::sync::Arc;

    /// Two producers push while the consumer pops: each message comes out once, each
    /// producer's in order, none is freed while a producer still links to it (loom's
    /// `UnsafeCell` and leak checks would report it).
    #[test]
    fn two_producers_one_consumer() {
        loom::model(|| {
            let q = Arc::new(MessageQueue::new());
            let producers: Vec<_> = [[1, 2], [10, 20]]
                .into_iter()
                .map(|msgs| {
                    let q = q.clone();
                    thread::spawn(move || {
                        for m in msgs {
                            q.push(Pending::new(m));
                        }
                    })
                })
                .collect();
            let mut got = Vec::new();
            // A bounded number of looks, then what is left after the producers finish.
            for _ in 0..3 {
                // SAFETY: this thread is the only consumer.
                match unsafe { q.pop() } {
                    Some(m) => got.push(m),
                    None => thread::yield_now(),
                }
            }
            for p in producers {
                p.join().unwrap();
            }
            // SAFETY: as above.
            while let Some(m) = unsafe { q.pop() } {
                got.push(m);
            }
            let small: Vec<_> = got.iter().copied().filter(|&m| m < 10).collect();
            let large: Vec<_> = got.iter().copied().filter(|&m| m >= 10).collect();
            assert_eq!((small, large), (vec![1, 2], vec![10, 20]));
        });
    }
}
