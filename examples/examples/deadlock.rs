//! A deadlock, reported: three bank tellers in a ring, each of which, asked to confirm a
//! transfer, first asks the next one, inside its own `handle`. The first ask goes round the
//! ring and comes back to a teller that is still waiting: every actor waits on another.
//!
//! ```text
//! cargo run --release --example deadlock            # the report on stderr, then a dump
//! cargo run --release --example deadlock -- --panic # block_on panics with the report, as Go exits
//! ```
//!
//! The runtime notices within three monitor samples (7.5 ms with the default time slice) of
//! the last worker going idle, prints the waits-for cycle and every actor's wait, and keeps
//! running (`Builder::panic_on_deadlock` makes `block_on` panic instead).
//! `docs/diagnostics.md` walks through the output.

use std::time::Duration;

use threadlet::{Actor, ActorBuilder, Addr, Context, Reply, Runtime};

enum Msg {
    /// Who to ask before confirming.
    SetNext(Addr<Msg>),
    /// Confirm a transfer: answered once the next teller has confirmed.
    Confirm(Reply<bool>),
}

struct Teller {
    next: Option<Addr<Msg>>,
}

impl Actor for Teller {
    type Msg = Msg;
    fn handle(&mut self, msg: Msg, _: &mut Context<Self>) {
        match msg {
            Msg::SetNext(next) => self.next = Some(next),
            Msg::Confirm(reply) => {
                // Waits inside `handle`: this teller takes no other message meanwhile.
                let ok = self
                    .next
                    .as_ref()
                    .is_some_and(|n| n.ask(Msg::Confirm) == Ok(true));
                reply.send(ok);
            }
        }
    }
}

/// Starts the ring and asks the first teller; returns what it answered (never, here).
fn transfer() -> bool {
    let tellers: Vec<Addr<Msg>> = (0..3)
        .map(|i| {
            let (addr, _handle) = ActorBuilder::new()
                .name(format!("teller-{i}"))
                .start(Teller { next: None })
                .expect("start a teller");
            addr
        })
        .collect();
    for (i, t) in tellers.iter().enumerate() {
        t.send(Msg::SetNext(tellers[(i + 1) % 3].clone())).unwrap();
    }
    tellers[0].ask(Msg::Confirm).unwrap_or(false)
}

fn main() {
    if std::env::args().any(|a| a == "--panic") {
        let rt = Runtime::builder()
            .workers(2)
            .on_deadlock(|_| {}) // the panic carries the report
            .panic_on_deadlock()
            .build()
            .expect("runtime");
        rt.block_on(transfer);
        unreachable!("block_on panics with the report");
    }
    let rt = Runtime::builder().workers(2).build().expect("runtime");
    // The default hook prints the report on stderr; the runtime runs on.
    let clerk = rt.spawn(transfer);
    std::thread::sleep(Duration::from_millis(200));
    println!("--- Runtime::dump() a moment later ---\n{}", rt.dump());
    println!(
        "the clerk is still waiting: finished = {}",
        clerk.is_finished()
    );
    // Dropping the runtime unwinds every actor still waiting.
}
