//! A small supervised service: a pool of parser workers (handler actors) that panic on bad
//! input, and an auditor (a process actor that waits on a slow store, as I/O would), under one
//! supervisor. A worker that panics is restarted on the same mailbox; the others, and the
//! auditor, keep serving meanwhile. The auditor is registered by name in each incarnation, and
//! one more worker, with a bounded mailbox, joins the pool while the supervisor runs.
//!
//! ```text
//! cargo run --release --example supervision -- --requests 30 --bad-every 7
//! ```

use std::num::NonZeroUsize;
use std::time::Duration;

use clap::Parser;
use threadlet::supervisor::{Child, Restart, Strategy, Supervisor, SupervisorMsg};
use threadlet::{Actor, Addr, AskError, Context, Mailbox, Reply, Runtime, whereis};

/// A supervised pool of parsers.
#[derive(Parser)]
struct Args {
    /// Requests to send.
    #[arg(long, default_value_t = 30)]
    requests: usize,
    /// Every this-many-th request is bad input (the worker handling it panics); at least 1.
    #[arg(long, default_value_t = NonZeroUsize::new(7).unwrap())]
    bad_every: NonZeroUsize,
    /// Parser workers in the pool (at least 1).
    #[arg(long, default_value_t = NonZeroUsize::new(3).unwrap())]
    workers: NonZeroUsize,
}

/// Parses numbers; panics on anything else ("let it crash").
struct NumberParser {
    audit: Addr<String>,
}

impl Actor for NumberParser {
    type Msg = (String, Reply<u64>);

    fn handle(&mut self, (text, reply): Self::Msg, ctx: &mut Context<Self>) {
        let n: u64 = text.parse().expect("bad input");
        let _ = self.audit.send(format!("{} parsed {n}", ctx.id()));
        reply.send(n);
    }
}

fn main() {
    let args = Args::parse();
    let rt = Runtime::builder().workers(2).build().expect("a runtime");

    // The auditor: a process actor whose every write waits on a slow store.
    let (auditor, audit) = Child::process("auditor", |mb: Mailbox<String>| {
        let mut written = 0usize;
        while let Some(line) = mb.recv() {
            threadlet::sleep(Duration::from_millis(1)); // the store's latency
            written += 1;
            if written.is_multiple_of(10) {
                println!("auditor: {written} lines written (last: {line})");
            }
        }
    });

    let mut sup = Supervisor::new(Strategy::OneForOne).intensity(100, Duration::from_secs(10));
    sup.add(auditor.register("auditor"));
    let mut pool = Vec::new();
    for i in 0..args.workers.get() {
        let audit = audit.clone();
        let (child, addr) = Child::handler(format!("parser-{i}"), move || NumberParser {
            audit: audit.clone(),
        });
        sup.add(child.restart(Restart::Permanent));
        pool.push(addr);
    }
    let (sup_addr, sup_handle) = sup.start(&rt.handle()).expect("the supervisor starts");

    // One more worker, added while the supervisor runs, with a bounded mailbox: a sender waits
    // while 16 requests are queued for it.
    let (late, late_addr) = Child::builder("parser-late")
        .mailbox_capacity(16)
        .handler(move || NumberParser {
            audit: audit.clone(),
        });
    sup_addr
        .ask(|r| SupervisorMsg::Add(late, r))
        .expect("the supervisor runs")
        .expect("the late worker starts");
    pool.push(late_addr);

    let (mut served, mut failed) = (0, 0);
    for i in 1..=args.requests {
        let worker = &pool[i % pool.len()];
        let text = if i.is_multiple_of(args.bad_every.get()) {
            format!("bad-{i}")
        } else {
            i.to_string()
        };
        match worker.ask_timeout(Duration::from_secs(10), |r| (text.clone(), r)) {
            Ok(n) => {
                assert_eq!(n, i as u64);
                served += 1;
            }
            // The worker panicked holding the request: it is restarted on the same address.
            Err(AskError::Dropped) => {
                println!("request {i} ({text:?}): the worker crashed; the supervisor restarts it");
                failed += 1;
            }
            Err(e) => panic!("request {i}: {e}"),
        }
    }
    println!("{served} requests served, {failed} crashed a worker (each restarted)");
    // Found by its name, whichever incarnation runs now.
    if let Some(auditor) = whereis::<String>("auditor") {
        let _ = auditor.send(format!("{served} served, {failed} crashed"));
    }
    assert_eq!(failed, args.requests / args.bad_every.get());
    assert_eq!(served + failed, args.requests);

    // The late worker is retired at run time (OTP's `terminate_child`, then `delete_child`):
    // it drains what it accepted and ends, and its address hands later requests back.
    let late = pool.pop().expect("added above");
    for msg in [SupervisorMsg::Terminate, SupervisorMsg::Delete] {
        sup_addr
            .ask(|r| msg("parser-late".to_string(), r))
            .expect("the supervisor runs")
            .expect("a child of that name, stopped before its delete");
    }
    assert!(late.ask(|r| ("1".to_string(), r)).is_err());
    let children = sup_addr
        .ask(SupervisorMsg::WhichChildren)
        .expect("the supervisor runs");
    println!(
        "children left: {:?}",
        children.iter().map(|c| c.name.as_str()).collect::<Vec<_>>()
    );

    sup_addr
        .send(SupervisorMsg::Stop)
        .expect("the supervisor runs");
    sup_handle.join().expect("a clean stop");
}
