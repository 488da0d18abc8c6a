//! Message conservation through a supervisor's storms: children killed every few hundred
//! microseconds, poisoned into panics, stopped and restarted by `Terminate` and `Restart`,
//! under every strategy, mailbox capacity and scheduler, while two threads send with `send`,
//! `send_timeout` and `try_send`. Every message sent is handled by some incarnation or handed
//! back to its sender: a supervised child's queue waits for its next incarnation, a stop
//! drains what was accepted, and a stopped child's address refuses the rest.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::time::{Duration, Instant};

use common::{under_each_scheduler, within};
use threadlet::supervisor::{Child, ChildError, Strategy, Supervisor, SupervisorMsg};
use threadlet::{Actor, Addr, Context, Mailbox, Runtime, Scheduler};

/// The message that makes its handler panic after counting it (a crash the supervisor
/// restarts from; the message itself was handled).
const POISON: u64 = u64::MAX;

/// Stop-and-restart rounds per storm.
const ROUNDS: usize = 60;

/// A sender waits while its target holds this many messages: the children, in a debug build
/// on a loaded machine, fall behind two threads sending flat out, and the drain at the end
/// should take milliseconds, not seconds.
const BACKLOG: usize = 1_000;

/// How long the handled count may stand still, with messages outstanding, before the test
/// calls them lost.
const STALL: Duration = Duration::from_secs(10);

/// A handler child that counts what it handles.
struct Counting(Arc<AtomicU64>);

impl Actor for Counting {
    type Msg = u64;
    fn handle(&mut self, n: u64, _: &mut Context<Self>) {
        self.0.fetch_add(1, SeqCst);
        if n == POISON {
            panic!("poisoned");
        }
    }
}

/// The three children: a process child and a handler child on mailboxes of capacity `cap`,
/// and a handler child on an unbounded one; all count into `handled`.
fn children(handled: &Arc<AtomicU64>, cap: Option<usize>) -> (Vec<Child>, [Addr<u64>; 3]) {
    let builder = |name| match cap {
        Some(c) => Child::builder(name).mailbox_capacity(c),
        None => Child::builder(name),
    };
    let counted = handled.clone();
    let (p, p_addr) = builder("p").process(move |mb: Mailbox<u64>| {
        for n in &mb {
            counted.fetch_add(1, SeqCst);
            if n == POISON {
                panic!("poisoned");
            }
        }
    });
    let counted = handled.clone();
    let (h, h_addr) = builder("h").handler(move || Counting(counted.clone()));
    let counted = handled.clone();
    let (q, q_addr) = Child::handler("q", move || Counting(counted.clone()));
    (vec![p, h, q], [p_addr, h_addr, q_addr])
}

/// One sender: every third message to each child in turn, one in 97 poisoned, by `send`,
/// `send_timeout` and `try_send` in turn. Returns what it sent and what came back.
fn sender(addrs: [Addr<u64>; 3], done: Arc<AtomicBool>, which: u64) -> (u64, u64) {
    let (mut sent, mut back) = (0u64, 0u64);
    while !done.load(SeqCst) {
        let to = &addrs[(sent % 3) as usize];
        if to.len() >= BACKLOG {
            std::thread::yield_now();
            continue;
        }
        let msg = if sent % 97 == 13 { POISON } else { sent };
        let refused = match (sent / 3 + which) % 3 {
            0 => to.send(msg).is_err(),
            1 => to.send_timeout(msg, Duration::from_millis(1)).is_err(),
            _ => to.try_send(msg).is_err(),
        };
        sent += 1;
        back += u64::from(refused);
    }
    (sent, back)
}

fn storm(rt: &Runtime, scheduler: Scheduler, strategy: Strategy, cap: Option<usize>) {
    let what = format!("{scheduler:?}, {strategy:?}, capacity {cap:?}");
    let handled = Arc::new(AtomicU64::new(0));
    let (kids, addrs) = children(&handled, cap);
    let mut sup = Supervisor::new(strategy).intensity(1_000_000, Duration::from_secs(1));
    for kid in kids {
        sup.add(kid);
    }
    let (sup_addr, sup_h) = sup.start(&rt.handle()).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let senders: Vec<_> = (0..2)
        .map(|which| {
            let (addrs, done) = (addrs.clone(), done.clone());
            std::thread::spawn(move || sender(addrs, done, which))
        })
        .collect();
    let killer = {
        let (addrs, done) = (addrs.clone(), done.clone());
        std::thread::spawn(move || {
            for i in 0.. {
                if done.load(SeqCst) {
                    break;
                }
                addrs[i % 3].kill();
                std::thread::sleep(Duration::from_micros(200));
            }
        })
    };
    type Request = fn(String, threadlet::Reply<Result<(), ChildError>>) -> SupervisorMsg;
    let ask = |request: Request, name: &str| {
        let answer = sup_addr.ask(|reply| request(name.to_string(), reply));
        let answer = answer.unwrap_or_else(|e| panic!("{what}: the supervisor is gone: {e:?}"));
        answer.unwrap_or_else(|e| panic!("{what}: {name}: {e}"));
    };
    for round in 0..ROUNDS {
        let name = ["p", "h", "q"][round % 3];
        ask(SupervisorMsg::Terminate, name);
        sup_addr.ask(SupervisorMsg::WhichChildren).unwrap();
        std::thread::sleep(Duration::from_micros(300));
        ask(SupervisorMsg::Restart, name);
    }
    done.store(true, SeqCst);
    killer.join().unwrap();
    let (mut sent, mut back) = (0, 0);
    for s in senders {
        let (s, b) = s.join().unwrap();
        sent += s;
        back += b;
    }
    // Every child runs again: what was accepted drains. Lost messages are the handled count
    // standing still short of it.
    let accepted = sent - back;
    assert!(accepted > 0, "{what}: nothing was accepted ({sent} sent)");
    let (mut last, mut since) = (handled.load(SeqCst), Instant::now());
    while last < accepted {
        std::thread::sleep(Duration::from_millis(1));
        let now = handled.load(SeqCst);
        if now != last {
            (last, since) = (now, Instant::now());
        } else if since.elapsed() > STALL {
            let lens = addrs.each_ref().map(|a| a.len());
            panic!("{what}: handled {now} of {accepted} accepted ({sent} sent); queued {lens:?}");
        }
    }
    let handled = handled.load(SeqCst);
    assert_eq!(handled, accepted, "{what}: more handled than accepted");
    // Both ways out were taken: stopped children refused sends, running ones handled them.
    assert!(back > 0 && handled > 0, "{what}: {sent} sent, {back} back");
    sup_addr.send(SupervisorMsg::Stop).unwrap();
    sup_h.join().unwrap();
}

#[test]
fn every_message_is_handled_or_handed_back_through_kills_stops_and_restarts() {
    within(Duration::from_secs(300), "supervisor storms", || {
        for (scheduler, rt) in under_each_scheduler(2) {
            for strategy in [
                Strategy::OneForOne,
                Strategy::OneForAll,
                Strategy::RestForOne,
            ] {
                for cap in [None, Some(0), Some(1)] {
                    storm(&rt, scheduler, strategy, cap);
                }
            }
        }
    });
}
