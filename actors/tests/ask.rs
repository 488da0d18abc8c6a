//! Request/reply: `Addr::ask`, `Addr::ask_timeout`, `Reply`, and `channel::oneshot` under them.

mod common;

use std::time::Duration;

use common::within_watchdog;
use threadlet::{Actor, AskError, Context, Mailbox, Reply, Runtime, RuntimeExt};

enum Req {
    Echo(u64, Reply<u64>),
    Ignore(Reply<u64>),
    Panic(Reply<u64>),
}

struct Server;

impl Actor for Server {
    type Msg = Req;

    fn handle(&mut self, msg: Req, _ctx: &mut Context<Self>) {
        match msg {
            Req::Echo(n, reply) => reply.send(n),
            Req::Ignore(reply) => drop(reply),
            Req::Panic(_reply) => panic!("the server panics holding a reply"),
        }
    }
}

#[test]
fn ask_answers_from_handler_and_process_actors() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let (handler, _h) = rt.start(Server);
    let (process, _p) = rt.spawn_actor(|mb: Mailbox<(u64, Reply<u64>)>| {
        for (n, reply) in &mb {
            reply.send(n * 2);
        }
    });
    assert_eq!(handler.ask(|r| Req::Echo(7, r)), Ok(7));
    assert_eq!(process.ask(|r| (7, r)), Ok(14));
    // From inside an actor too.
    let answers = rt.block_on(move || (handler.ask(|r| Req::Echo(1, r)), process.ask(|r| (1, r))));
    assert_eq!(answers, (Ok(1), Ok(2)));
}

#[test]
fn a_reply_dropped_unsent_fails_the_ask_at_once() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let (server, _h) = rt.start(Server);
    // No timeout: the drop itself must end the wait (the watchdog catches a hang).
    let got = within_watchdog("ask with a dropped reply", move || server.ask(Req::Ignore));
    assert_eq!(got, Err(AskError::Dropped));
}

#[test]
fn a_panic_while_holding_the_reply_fails_the_ask() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let (server, h) = rt.start(Server);
    let got = within_watchdog("ask of a panicking actor", move || {
        let got = server.ask(Req::Panic);
        // The reply dropped in the unwind answers at once, maybe before the actor has closed
        // its mailbox; once it has ended, requests are refused.
        assert!(h.join().is_err());
        (got, server.ask(|r| Req::Echo(1, r)))
    });
    assert_eq!(got, (Err(AskError::Dropped), Err(AskError::Closed)));
}

#[test]
fn asks_queued_when_the_target_ends_fail_with_dropped_and_later_ones_with_closed() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let (go_tx, go_rx) = threadlet::channel::bounded::<()>(1);
    // Answers one request, then ends with more requests queued behind it.
    let (server, h) = rt.spawn_actor(move |mb: Mailbox<(u64, Reply<u64>)>| {
        go_rx.recv().unwrap();
        if let Some((n, reply)) = mb.recv() {
            reply.send(n);
        }
    });
    let askers: Vec<_> = (0..4u64)
        .map(|n| {
            let server = server.clone();
            rt.spawn(move || server.ask(|r| (n, r)))
        })
        .collect();
    while server.len() < 4 {
        std::thread::yield_now();
    }
    go_tx.send(()).unwrap();
    h.join().unwrap();
    let got: Vec<_> = within_watchdog("asks of an ending actor", move || {
        askers.into_iter().map(|a| a.join().unwrap()).collect()
    });
    // One was answered; the other three were dropped with the mailbox, at once.
    assert_eq!(got.iter().filter(|r| r.is_ok()).count(), 1);
    assert_eq!(
        got.iter().filter(|r| **r == Err(AskError::Dropped)).count(),
        3
    );
    assert_eq!(server.ask(|r| (9, r)), Err(AskError::Closed));
}

#[test]
fn a_late_answer_is_dropped_and_never_taken_by_a_later_ask() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    // A request marked `true` is answered only once the asker has timed out (a go from it, not
    // a fixed delay, which a crowded machine could make shorter than the asker's wait).
    let (go_tx, go) = threadlet::channel::unbounded::<()>();
    let (slow, _h) = rt.spawn_actor(move |mb: Mailbox<(u64, bool, Reply<u64>)>| {
        for (n, late, reply) in &mb {
            if late {
                go.recv().unwrap();
            }
            reply.send(n);
        }
    });
    let first = slow.ask_timeout(Duration::from_millis(5), |r| (1, true, r));
    assert_eq!(first, Err(AskError::Timeout));
    go_tx.send(()).unwrap();
    for n in 2..20 {
        assert_eq!(slow.ask(|r| (n, false, r)), Ok(n), "answer {n}");
    }
}

#[test]
fn many_askers_each_get_their_own_answers() {
    const ASKERS: u64 = 50;
    const ASKS: u64 = 200;
    let rt = Runtime::builder().workers(2).build().unwrap();
    let (server, _h) = rt.start(Server);
    let askers: Vec<_> = (0..ASKERS)
        .map(|a| {
            let server = server.clone();
            rt.spawn(move || {
                (0..ASKS)
                    .map(|i| {
                        let n = a * ASKS + i;
                        assert_eq!(server.ask(|r| Req::Echo(n, r)), Ok(n));
                    })
                    .count() as u64
            })
        })
        .collect();
    let answered: u64 = askers.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(answered, ASKERS * ASKS);
}

#[test]
fn an_abandoned_reply_says_so() {
    let rt = Runtime::builder().workers(1).build().unwrap();
    let (tx, rx) = threadlet::channel::oneshot::<bool>();
    let (go_tx, go) = threadlet::channel::unbounded::<()>();
    let (slow, _h) = rt.spawn_actor(move |mb: Mailbox<Reply<u64>>| {
        let reply = mb.recv().unwrap();
        // Wait until the asker has timed out (it says so), then look.
        go.recv().unwrap();
        tx.send(reply.is_abandoned()).unwrap();
    });
    assert_eq!(
        slow.ask_timeout(Duration::from_millis(1), |r| r),
        Err(AskError::Timeout)
    );
    go_tx.send(()).unwrap();
    assert_eq!(rx.recv(), Ok(true));
}

/// The timeout of `ask_timeout` covers the whole ask: the wait for room in a full bounded
/// mailbox too. Before, the request was sent with no deadline, and an ask to an actor that was
/// busy (or waiting on the asker) with its mailbox full waited for as long as that lasted.
#[test]
fn ask_timeout_gives_up_on_a_full_bounded_mailbox() {
    enum Msg {
        Fill,
        Get(Reply<u32>),
    }
    let rt = Runtime::builder().workers(1).build().unwrap();
    let (go, gate) = threadlet::channel::bounded::<()>(1);
    let (addr, h) = threadlet::ActorBuilder::new()
        .mailbox_capacity(1)
        .spawn_actor_on(&rt, move |mb: Mailbox<Msg>| {
            let _ = gate.recv(); // busy until told
            let mut answered = 0;
            for m in &mb {
                if let Msg::Get(reply) = m {
                    reply.send(1);
                    answered += 1;
                }
            }
            answered
        })
        .unwrap();
    addr.send(Msg::Fill).unwrap(); // the one place is taken
    let asker = addr.clone();
    let asked = within_watchdog("ask_timeout on a full mailbox", move || {
        asker.ask_timeout(Duration::from_millis(20), Msg::Get)
    });
    assert_eq!(asked, Err(AskError::Timeout));
    // The request was handed back and dropped, not left in line: once the actor reads, it
    // answers only the ask made now.
    go.send(()).unwrap();
    assert_eq!(addr.ask_timeout(Duration::from_secs(10), Msg::Get), Ok(1));
    drop(addr);
    assert_eq!(h.join().unwrap(), 1);
}

/// A handler actor that asks its own mailbox could never be answered (it takes its next
/// message only once `handle` returns): the ask fails at once, with or without a timeout,
/// and makes no request. Asks to it from others, and its own asks to others, still work.
#[test]
fn a_handler_actor_that_asks_itself_fails_at_once() {
    enum Msg {
        AskSelf(Reply<Vec<Result<u64, AskError>>>),
        Get(Reply<u64>),
    }
    struct Selfish {
        requests_seen: u64,
    }
    impl Actor for Selfish {
        type Msg = Msg;
        fn handle(&mut self, msg: Msg, ctx: &mut Context<Self>) {
            match msg {
                Msg::AskSelf(reply) => {
                    let me = ctx.addr();
                    reply.send(vec![
                        me.ask(Msg::Get),
                        me.ask_timeout(Duration::from_secs(3600), Msg::Get),
                    ]);
                }
                Msg::Get(reply) => {
                    self.requests_seen += 1;
                    reply.send(self.requests_seen);
                }
            }
        }
    }
    let rt = Runtime::builder().workers(2).build().unwrap();
    let (selfish, _h) = rt.start(Selfish { requests_seen: 0 });
    let asked = within_watchdog("asks to itself", {
        let selfish = selfish.clone();
        move || selfish.ask(Msg::AskSelf)
    });
    assert_eq!(
        asked,
        Ok(vec![Err(AskError::CallingSelf), Err(AskError::CallingSelf)])
    );
    // No request was made: the first one it sees is this.
    assert_eq!(selfish.ask(Msg::Get), Ok(1));
    // Another handler actor asks it from its own `handle`: answered.
    struct Relay(threadlet::Addr<Msg>);
    impl Actor for Relay {
        type Msg = Reply<Result<u64, AskError>>;
        fn handle(&mut self, reply: Self::Msg, _ctx: &mut Context<Self>) {
            reply.send(self.0.ask(Msg::Get));
        }
    }
    let (relay, _r) = rt.start(Relay(selfish));
    assert_eq!(relay.ask(|r| r), Ok(Ok(2)));
}
