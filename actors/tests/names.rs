//! `register`, `whereis`, `unregister`: names lead to live actors only.

mod common;

use threadlet::{Actor, Context, Mailbox, RegisterError, Runtime, RuntimeExt};

#[test]
fn whereis_finds_a_live_actor_and_not_an_ended_one() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let (addr, h) = rt.spawn_actor(|mb: Mailbox<u32>| mb.iter().sum::<u32>());
    threadlet::register("names-test-summer", &addr).unwrap();
    // Being registered does not keep the actor alive: the last counted address ends it.
    for n in [1, 2, 3] {
        threadlet::whereis::<u32>("names-test-summer")
            .unwrap()
            .send(n)
            .unwrap();
    }
    drop(addr);
    assert_eq!(h.join().unwrap(), 6);
    assert!(threadlet::whereis::<u32>("names-test-summer").is_none());
}

#[test]
fn a_name_of_a_live_actor_cannot_be_taken_but_one_of_an_ended_actor_can() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let (first, h1) = rt.spawn_actor(|mb: Mailbox<u8>| mb.recv());
    let (second, h2) = rt.spawn_actor(|mb: Mailbox<u8>| mb.recv());
    threadlet::register("names-test-taken", &first).unwrap();
    threadlet::register("names-test-taken", &first).unwrap(); // the same actor again: fine
    assert_eq!(
        threadlet::register("names-test-taken", &second),
        Err(RegisterError::Taken("names-test-taken".into()))
    );
    first.send(1).unwrap();
    h1.join().unwrap();
    threadlet::register("names-test-taken", &second).unwrap();
    let found = threadlet::whereis::<u8>("names-test-taken").unwrap();
    assert!(found.same_mailbox(&second));
    // The wrong message type finds nothing.
    assert!(threadlet::whereis::<String>("names-test-taken").is_none());
    second.send(2).unwrap();
    assert_eq!(h2.join().unwrap(), Some(2));
    assert!(threadlet::whereis::<u8>("names-test-taken").is_none());
}

struct Registrar;

impl Actor for Registrar {
    type Msg = ();
    fn started(&mut self, ctx: &mut Context<Self>) {
        threadlet::register("names-test-handler", &ctx.addr()).unwrap();
    }
    fn handle(&mut self, _: (), ctx: &mut Context<Self>) {
        ctx.stop();
    }
}

#[test]
fn a_handler_actor_registers_itself_and_is_gone_after_it_stops() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let (addr, h) = rt.start(Registrar);
    // `started` may not have run yet: wait for the name.
    let found = loop {
        if let Some(a) = threadlet::whereis::<()>("names-test-handler") {
            break a;
        }
        std::thread::yield_now();
    };
    assert!(found.same_mailbox(&addr));
    found.send(()).unwrap();
    h.join().unwrap();
    assert!(threadlet::whereis::<()>("names-test-handler").is_none());
}

/// An actor that has ended cannot take a name: the registration says so (it answered `Ok`,
/// and the name was gone at once).
#[test]
fn an_ended_actor_cannot_be_registered() {
    let rt = Runtime::builder().workers(1).build().unwrap();
    let (addr, h) = rt.spawn_actor(|mb: Mailbox<u8>| mb.recv());
    addr.send(1).unwrap();
    assert_eq!(h.join().unwrap(), Some(1));
    assert_eq!(
        threadlet::register("names-test-ended", &addr),
        Err(RegisterError::Ended("names-test-ended".into()))
    );
    assert!(threadlet::whereis::<u8>("names-test-ended").is_none());
}

/// Two registrations of one ended actor under one name at the same moment: neither may answer
/// `Ok` (one found the other's entry, inserted just before that one's hook removed it, and
/// answered `Ok` for an actor already gone).
#[test]
fn an_ended_actor_is_refused_even_by_two_registrations_at_once() {
    use std::sync::{Arc, Barrier};
    let rt = Runtime::builder().workers(1).build().unwrap();
    let (addr, h) = rt.spawn_actor(|mb: Mailbox<u8>| mb.recv());
    addr.send(1).unwrap();
    h.join().unwrap();
    const ROUNDS: usize = 10_000;
    let go = Arc::new(Barrier::new(2));
    let register_all = |addr: threadlet::Addr<u8>, go: Arc<Barrier>| {
        (0..ROUNDS)
            .filter(|i| {
                go.wait();
                threadlet::register(format!("names-test-race-{i}"), &addr).is_ok()
            })
            .count()
    };
    let other = {
        let (addr, go) = (addr.clone(), go.clone());
        std::thread::spawn(move || register_all(addr, go))
    };
    let mine = register_all(addr, go);
    assert_eq!(
        mine + other.join().unwrap(),
        0,
        "Ok answers for an ended actor"
    );
}

/// Once every counted address of a registered actor has gone, its name gives no new address:
/// the actor has seen them all go (`recv` returned `None`) and is ending, and a message sent
/// through an address made then would be accepted and dropped with the mailbox, unreceived.
/// Here the actor waits on a gate after that `None`, holding the window open.
#[test]
fn a_name_does_not_revive_an_actor_whose_addresses_have_all_gone() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let (saw_none_tx, saw_none) = std::sync::mpsc::channel();
    let (gate, gate_rx) = threadlet::channel::unbounded::<()>();
    let (addr, h) = rt.spawn_actor(move |mb: Mailbox<u32>| {
        saw_none_tx.send(mb.recv()).unwrap();
        let _ = gate_rx.recv();
    });
    threadlet::register("names-test-no-revival", &addr).unwrap();
    drop(addr);
    assert_eq!(saw_none.recv().unwrap(), None);
    let revived = threadlet::whereis::<u32>("names-test-no-revival");
    let accepted = revived.as_ref().is_some_and(|a| a.send(7).is_ok());
    drop(revived);
    gate.send(()).unwrap();
    h.join().unwrap();
    assert!(
        !accepted,
        "a send through the name was accepted after every address had gone (and dropped)"
    );
}

/// A live actor whose counted addresses have all gone keeps its name: `whereis` gives no
/// address for it (a message sent then might never be received), and no other actor may take
/// the name; once the actor makes itself an address again, the name leads to it again.
#[test]
fn a_live_actor_without_addresses_keeps_its_name_and_is_found_once_it_has_one() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let (step_tx, step) = std::sync::mpsc::channel();
    let (gate, gate_rx) = threadlet::channel::unbounded::<()>();
    let (addr, h) = rt.spawn_actor(move |mb: Mailbox<u32>| {
        // Registered through an address of its own that goes at once.
        threadlet::register("names-test-limbo", &mb.addr()).unwrap();
        step_tx.send(()).unwrap();
        gate_rx.recv().unwrap();
        let _again = mb.addr();
        step_tx.send(()).unwrap();
        mb.recv()
    });
    step.recv().unwrap();
    drop(addr); // the last counted address, while the actor runs on
    assert!(threadlet::whereis::<u32>("names-test-limbo").is_none());
    let (other, other_h) = rt.spawn_actor(|mb: Mailbox<u32>| mb.recv());
    assert_eq!(
        threadlet::register("names-test-limbo", &other),
        Err(RegisterError::Taken("names-test-limbo".into()))
    );
    gate.send(()).unwrap();
    step.recv().unwrap();
    let found = threadlet::whereis::<u32>("names-test-limbo").expect("found again");
    found.send(5).unwrap();
    assert_eq!(h.join().unwrap(), Some(5));
    drop(other);
    assert_eq!(other_h.join().unwrap(), None);
}

/// An actor that closed its mailbox to drain it (close, then drain) is live and keeps its
/// name: `whereis` finds nothing meanwhile (its mailbox takes no message), but another
/// actor's `register` is refused with `Taken`, whether `whereis` looked first or not, until
/// the actor ends. Process and handler actors, under every scheduler.
#[test]
fn an_actor_draining_its_closed_mailbox_keeps_its_name_until_it_ends() {
    struct Closer {
        closed: std::sync::mpsc::Sender<()>,
        gate: threadlet::channel::Receiver<()>,
    }
    impl Actor for Closer {
        type Msg = ();
        fn handle(&mut self, _: (), ctx: &mut Context<Self>) {
            ctx.close();
            self.closed.send(()).unwrap();
            let _ = self.gate.recv();
        }
    }
    for handler in [false, true] {
        for (scheduler, rt) in common::under_each_scheduler(2) {
            let name = format!("names-test-draining-{scheduler:?}-{handler}");
            let (closed_tx, closed) = std::sync::mpsc::channel();
            let (gate, gate_rx) = threadlet::channel::unbounded::<()>();
            let (addr, ended) = if handler {
                let (addr, h) = rt.start(Closer {
                    closed: closed_tx,
                    gate: gate_rx,
                });
                (
                    addr,
                    Box::new(move || drop(h.join().unwrap())) as Box<dyn FnOnce()>,
                )
            } else {
                let (addr, h) = rt.spawn_actor(move |mb: Mailbox<()>| {
                    mb.recv();
                    mb.close();
                    closed_tx.send(()).unwrap();
                    let _ = gate_rx.recv();
                    mb.iter().count()
                });
                (
                    addr,
                    Box::new(move || _ = h.join().unwrap()) as Box<dyn FnOnce()>,
                )
            };
            threadlet::register(name.clone(), &addr).unwrap();
            addr.send(()).unwrap();
            closed.recv().unwrap();
            let (other, other_h) = rt.spawn_actor(|mb: Mailbox<()>| mb.recv());
            let what = format!("{scheduler:?}, handler actor: {handler}");
            assert_eq!(
                threadlet::register(name.clone(), &other),
                Err(RegisterError::Taken(name.clone())),
                "{what}"
            );
            assert!(threadlet::whereis::<()>(&name).is_none(), "{what}");
            // Still taken after `whereis` found nothing.
            assert_eq!(
                threadlet::register(name.clone(), &other),
                Err(RegisterError::Taken(name.clone())),
                "{what}"
            );
            gate.send(()).unwrap();
            ended();
            // Ended: the name is free.
            threadlet::register(name.clone(), &other).unwrap();
            assert!(
                threadlet::whereis::<()>(&name)
                    .unwrap()
                    .same_mailbox(&other),
                "{what}"
            );
            other.send(()).unwrap();
            other_h.join().unwrap();
            drop(addr);
        }
    }
}
