//! A mailbox's queue of messages: first in, first out, holding its first message inline.
//!
//! Most mailboxes never hold more than one message at a time: a request waiting for its
//! actor, a sack passed round a circle. A `VecDeque` allocates its buffer on the first push
//! (four or eight slots) and keeps it for the mailbox's life. This queue keeps a lone message
//! in its own words instead, and allocates a buffer only when a second message arrives while
//! the first is still there; once it has one, it keeps it, as a `VecDeque` does, so a mailbox
//! that sees bursts allocates once, not once per burst.
//!
//! Invariants:
//! - `One(m)`: exactly one message, `m`.
//! - `Many(q)`: the messages of `q`, in order; `q` may be empty, and has a buffer unless it
//!   is the empty queue that `Queue::new` makes, which takes no allocation.
//!
//! Size: `VecDeque`'s capacity field has room for a tag (a capacity is at most `isize::MAX`),
//! so a message of up to three words fits beside it in the `VecDeque`'s four: the queue is no
//! larger than a `VecDeque` for such messages (`queue_size`), and a larger message makes it
//! its own size and a word.

use std::collections::VecDeque;

pub(crate) enum Queue<M> {
    Many(VecDeque<M>),
    One(M),
}

impl<M> Default for Queue<M> {
    fn default() -> Self {
        Queue::new()
    }
}

impl<M> Queue<M> {
    /// An empty queue; allocates nothing.
    pub(crate) const fn new() -> Queue<M> {
        Queue::Many(VecDeque::new())
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        match self {
            Queue::Many(q) => q.len(),
            Queue::One(_) => 1,
        }
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Adds a message at the back; returns how many the queue holds now.
    #[inline]
    pub(crate) fn push_back(&mut self, msg: M) -> usize {
        match self {
            // The common case of a busy mailbox: its buffer has room.
            Queue::Many(q) if q.capacity() > 0 => {
                q.push_back(msg);
                q.len()
            }
            // Empty and with no buffer: the message stays inline. (The empty `VecDeque` it
            // replaces owns no allocation: forgetting it, rather than dropping it, saves its
            // drop's check of a capacity known to be 0.)
            Queue::Many(_) => {
                std::mem::forget(std::mem::replace(self, Queue::One(msg)));
                1
            }
            Queue::One(_) => {
                self.spill(msg);
                2
            }
        }
    }

    /// A second message while the first is inline: both move into a buffer, which the queue
    /// keeps from then on. Out of line: the hot paths above stay small enough to inline.
    #[inline(never)]
    fn spill(&mut self, msg: M) {
        let Queue::One(first) = std::mem::take(self) else {
            unreachable!("called on `One`")
        };
        // The same first buffer as a `VecDeque`'s first push would make.
        let mut q = VecDeque::new();
        q.push_back(first);
        q.push_back(msg);
        *self = Queue::Many(q);
    }

    #[inline]
    pub(crate) fn pop_front(&mut self) -> Option<M> {
        match self {
            Queue::Many(q) => q.pop_front(),
            Queue::One(_) => match std::mem::take(self) {
                Queue::One(msg) => Some(msg),
                Queue::Many(_) => None,
            },
        }
    }
}

/// What a closed mailbox's queue hands back, in order (`Mailbox::end`'s caller drops it;
/// tests read it).
impl<M> IntoIterator for Queue<M> {
    type Item = M;
    type IntoIter = std::collections::vec_deque::IntoIter<M>;

    fn into_iter(self) -> Self::IntoIter {
        match self {
            Queue::Many(q) => q.into_iter(),
            Queue::One(msg) => VecDeque::from([msg]).into_iter(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Queue;
    use std::collections::VecDeque;

    /// Pushes and pops in every pattern of up to 10 steps behave as a `VecDeque`'s, and the
    /// queue allocates a buffer only once two messages are held at once.
    #[test]
    fn behaves_as_a_vecdeque() {
        for pattern in 0u32..(1 << 10) {
            let mut q = Queue::new();
            let mut model = VecDeque::new();
            let mut held_two = false;
            for step in 0..10 {
                if pattern & (1 << step) != 0 {
                    model.push_back(step);
                    assert_eq!(q.push_back(step), model.len());
                } else {
                    assert_eq!(q.pop_front(), model.pop_front(), "pattern {pattern:b}");
                }
                held_two |= model.len() >= 2;
                assert_eq!(q.len(), model.len());
                assert_eq!(q.is_empty(), model.is_empty());
                let buffered = matches!(&q, Queue::Many(v) if v.capacity() > 0);
                assert_eq!(buffered, held_two, "pattern {pattern:b} step {step}");
            }
            let left: Vec<_> = q.into_iter().collect();
            assert_eq!(left, Vec::from(model));
        }
    }

    /// Every message is dropped once, whichever way it leaves: popped, or with the queue.
    #[test]
    fn drops_each_message_once() {
        use std::rc::Rc;
        let token = Rc::new(());
        for held in 0usize..4 {
            let mut q = Queue::new();
            for _ in 0..held {
                q.push_back(token.clone());
            }
            drop(q.pop_front());
            assert_eq!(Rc::strong_count(&token), 1 + held.saturating_sub(1));
            drop(q);
            assert_eq!(Rc::strong_count(&token), 1);
        }
    }

    /// A message of up to three words adds nothing to a `VecDeque`'s size (the mailbox state's
    /// budget, `state_size`, counts on it).
    #[cfg(target_pointer_width = "64")]
    #[test]
    fn queue_size() {
        use std::mem::size_of;
        assert_eq!(size_of::<Queue<u8>>(), size_of::<VecDeque<u8>>());
        assert_eq!(size_of::<Queue<[u64; 3]>>(), size_of::<VecDeque<u64>>());
        assert_eq!(size_of::<Queue<String>>(), size_of::<VecDeque<u64>>());
    }
}
