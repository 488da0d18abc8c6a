//! Links: an abnormal end takes linked actors down with it, unless they trap exits; a normal
//! end does not.

mod common;

use std::time::Duration;

use common::within_watchdog;
use threadlet::{ExitReason, JoinError, Mailbox, Runtime, RuntimeExt};

fn waiter(rt: &Runtime) -> (threadlet::Addr<u8>, threadlet::JoinHandle<Option<u8>>) {
    rt.spawn_actor(|mb: Mailbox<u8>| {
        let got = mb.recv();
        if got == Some(0) {
            panic!("told to fail");
        }
        got
    })
}

#[test]
fn an_abnormal_end_kills_linked_actors_along_a_chain_both_ways() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let (a, ha) = waiter(&rt);
    let (b, hb) = waiter(&rt);
    let (c, hc) = waiter(&rt);
    a.link(&b);
    c.link(&b); // b sits in the middle: c's link is the other way round
    b.send(0).unwrap(); // the middle one fails
    let (ra, rb, rc) = within_watchdog("link chain", move || (ha.join(), hb.join(), hc.join()));
    assert!(rb.as_ref().is_err_and(JoinError::is_panic));
    assert!(ra.as_ref().is_err_and(JoinError::is_killed));
    assert!(rc.as_ref().is_err_and(JoinError::is_killed));
}

#[test]
fn a_kill_propagates_but_a_normal_end_does_not() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let (a, ha) = waiter(&rt);
    let (b, hb) = waiter(&rt);
    a.link(&b);
    a.send(1).unwrap(); // ends normally
    assert_eq!(ha.join().unwrap(), Some(1));
    std::thread::sleep(Duration::from_millis(10));
    b.send(2).unwrap(); // still alive
    assert_eq!(hb.join().unwrap(), Some(2));

    let (c, hc) = waiter(&rt);
    let (d, hd) = waiter(&rt);
    c.link(&d);
    assert!(c.kill());
    assert!(hc.join().is_err_and(|e| e.is_killed()));
    assert!(within_watchdog("kill propagates", move || hd.join()).is_err_and(|e| e.is_killed()));
    drop(d);
}

#[test]
fn linking_to_an_actor_that_already_failed_signals_at_once() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let (dead, hdead) = waiter(&rt);
    dead.send(0).unwrap();
    assert!(hdead.join().is_err());
    let (late, hlate) = waiter(&rt);
    late.link(&dead);
    assert!(within_watchdog("late link", move || hlate.join()).is_err_and(|e| e.is_killed()));
}

#[test]
fn a_trapping_actor_survives_and_hears_every_linked_failure() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let children: Vec<_> = (0..3).map(|_| waiter(&rt)).collect();
    let addrs: Vec<_> = children.iter().map(|(a, _)| a.clone()).collect();
    let (_sup, hs) = rt.spawn_actor(move |mb: Mailbox<()>| {
        let exits = mb.trap_exits();
        let me = mb.addr();
        for a in &addrs {
            me.link(a);
        }
        addrs[0].send(0).unwrap(); // fails
        addrs[1].send(1).unwrap(); // ends normally: no signal
        addrs[2].kill();
        let mut reasons: Vec<ExitReason> = (0..2).map(|_| exits.recv().unwrap().reason).collect();
        reasons.sort_by_key(|r| format!("{r:?}"));
        reasons
    });
    let reasons = within_watchdog("trap exits", move || hs.join().unwrap());
    assert_eq!(
        reasons,
        [
            ExitReason::Killed,
            ExitReason::Panicked("told to fail".into())
        ]
    );
    for (_, h) in children {
        let _ = h.join();
    }
}

/// As in Erlang, a link is one link however often it is made: linking again, or from the
/// other side, adds nothing, and a failure is heard once (it was heard once per call).
#[test]
fn linking_again_or_from_the_other_side_makes_no_second_link() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let (child, hc) = waiter(&rt);
    let (_me, h) = rt.spawn_actor(move |mb: Mailbox<()>| {
        let exits = mb.trap_exits();
        let me = mb.addr();
        me.link(&child);
        me.link(&child);
        child.link(&me);
        me.link(&me); // oneself: nothing
        child.send(0).unwrap(); // fails
        let first = exits.recv().map(|d| d.reason);
        let second = exits.recv_timeout(Duration::from_millis(200)).ok();
        (first, second)
    });
    let (first, second) = within_watchdog("one link", move || h.join().unwrap());
    assert_eq!(first, Ok(ExitReason::Panicked("told to fail".into())));
    assert_eq!(second, None);
    assert!(hc.join().unwrap_err().is_panic());
}

/// A link made again to an actor that has failed signals again, at once, as Erlang's link to
/// a process that is gone does (the record of the first link made the second do nothing).
#[test]
fn linking_again_to_an_actor_that_failed_signals_again() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let (child, hc) = waiter(&rt);
    let (_me, h) = rt.spawn_actor(move |mb: Mailbox<()>| {
        let exits = mb.trap_exits();
        let me = mb.addr();
        me.link(&child);
        child.send(0).unwrap(); // fails
        let first = exits.recv().map(|d| d.reason);
        me.link(&child);
        let again = exits
            .recv_timeout(Duration::from_secs(20))
            .map(|d| d.reason);
        (first, again)
    });
    let (first, again) = within_watchdog("a link to a failed actor", move || h.join().unwrap());
    let failed = ExitReason::Panicked("told to fail".into());
    assert_eq!(first, Ok(failed.clone()));
    assert_eq!(again, Ok(failed));
    assert!(hc.join().unwrap_err().is_panic());
}

/// `trap_exits_as`: a linked actor's failure arrives in the trapping actor's own mailbox, made
/// into one of its messages, and an idle handler actor is woken for it (a trap channel it
/// could only look at while handling some other message).
#[test]
fn exits_trapped_as_messages_wake_an_idle_handler_actor() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let (child, c) = waiter(&rt);
    let (watcher, w) = rt.start(Watcher::default());
    watcher.send(Msg::Watch(child.clone())).unwrap();
    child.send(0).unwrap(); // `waiter` panics on 0; the watcher is idle by now, or links later
    let got = within_watchdog("an exit trapped as a message", move || w.join().unwrap());
    assert!(c.join().is_err());
    assert_eq!(got.exits, [ExitReason::Panicked("told to fail".into())]);
}

/// Such a message is queued even in a full bounded mailbox, behind what is there: the end it
/// reports cannot wait for room, and is not refused for want of it.
#[test]
fn an_exit_trapped_as_a_message_is_queued_in_a_full_bounded_mailbox() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    // The child on a runtime of its own: the watcher holds its worker below, and a process
    // actor started there would wait for it.
    let other = Runtime::builder().workers(1).build().unwrap();
    let (child, c) = waiter(&other);
    let (inside, is_inside) = std::sync::mpsc::channel();
    let (release, released) = std::sync::mpsc::channel();
    let (watcher, w) = threadlet::ActorBuilder::new()
        .mailbox_capacity(1)
        .start_on(
            &rt,
            Watcher {
                gate: Some((inside, std::sync::Mutex::new(released))),
                ..Watcher::default()
            },
        )
        .unwrap();
    let got = within_watchdog("an exit trapped into a full mailbox", move || {
        watcher.send(Msg::Watch(child.clone())).unwrap();
        watcher.send(Msg::Hold).unwrap();
        is_inside.recv().unwrap(); // busy in `handle`, no safe point
        watcher.send(Msg::Note(7)).unwrap();
        assert!(
            watcher.try_send(Msg::Note(8)).is_err(),
            "the mailbox is full"
        );
        child.send(0).unwrap();
        assert!(c.join().is_err());
        // Its link's signal is queued by its exit hooks, which may finish a moment after the
        // join returns.
        common::until("the link's signal is queued", || watcher.len() == 2);
        release.send(()).unwrap();
        w.join().unwrap()
    });
    assert_eq!(got.notes, [7]);
    assert_eq!(got.exits, [ExitReason::Panicked("told to fail".into())]);
}

enum Msg {
    Watch(threadlet::Addr<u8>),
    Hold,
    Note(u32),
    Exit(threadlet::Down),
}

/// Traps exits as messages; links to what it is told to watch, and stops at the first exit.
#[derive(Default)]
struct Watcher {
    notes: Vec<u32>,
    exits: Vec<ExitReason>,
    /// For `Msg::Hold`: says it is inside `handle`, then waits on a plain channel.
    gate: Option<(
        std::sync::mpsc::Sender<()>,
        std::sync::Mutex<std::sync::mpsc::Receiver<()>>,
    )>,
}

impl threadlet::Actor for Watcher {
    type Msg = Msg;
    fn started(&mut self, ctx: &mut threadlet::Context<Self>) {
        ctx.trap_exits_as(Msg::Exit);
    }
    fn handle(&mut self, msg: Msg, ctx: &mut threadlet::Context<Self>) {
        match msg {
            Msg::Watch(child) => ctx.addr().link(&child),
            Msg::Hold => {
                if let Some((inside, release)) = &self.gate {
                    inside.send(()).unwrap();
                    release.lock().unwrap().recv().unwrap();
                }
            }
            Msg::Note(n) => self.notes.push(n),
            Msg::Exit(down) => {
                self.exits.push(down.reason);
                ctx.stop();
            }
        }
    }
}
