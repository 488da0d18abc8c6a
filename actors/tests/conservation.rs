//! Message conservation: 1,000 actors pass messages along a random topology until each message
//! has used up its hop budget and reaches a collector. Every message must arrive exactly once,
//! and the actors together must see exactly `messages x hops` deliveries.

mod common;

use std::sync::{Arc, OnceLock};
use std::time::Instant;

use threadlet::{Addr, Mailbox, Runtime, Scheduler, channel};

const ACTORS: usize = 1_000;
const NEIGHBOURS: usize = 8;
const MESSAGES: usize = 10_000;
const HOPS: u32 = 100;
/// Each message is delivered to an actor once per hop.
const DELIVERIES: u64 = MESSAGES as u64 * HOPS as u64;

enum Msg {
    /// Message `id`, with `hops` deliveries left including this one.
    Hop { id: u32, hops: u32 },
    /// Stop and report how many deliveries this actor saw.
    Stop,
}

/// xorshift64*: a fixed seed gives a fixed topology; no dependency needed.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let x = self.0.wrapping_mul(0x2545_F491_4F6C_DD1D);
        (((x >> 32) * n as u64) >> 32) as usize
    }
}

/// One forwarding actor: on each message, count the delivery, then pass it on to a random
/// neighbour, or to the collector when its hops are used up.
fn forwarder(
    me: usize,
    mb: Mailbox<Msg>,
    neighbours: Vec<usize>,
    table: Arc<OnceLock<Vec<Addr<Msg>>>>,
    collector: Addr<u32>,
) -> u64 {
    let mut rng = Rng::new(0xC0FFEE ^ me as u64);
    let mut deliveries = 0u64;
    for msg in &mb {
        match msg {
            Msg::Stop => break,
            Msg::Hop { id, hops } => {
                deliveries += 1;
                let hops = hops - 1;
                if hops == 0 {
                    collector
                        .send(id)
                        .expect("the collector outlives every message");
                } else {
                    let table = table.get().expect("the table is set before any message");
                    let to = neighbours[rng.below(neighbours.len())];
                    table[to]
                        .send(Msg::Hop { id, hops })
                        .expect("forwarders stay until every message is collected");
                }
            }
        }
    }
    deliveries
}

struct Outcome {
    seen: Vec<u32>,
    deliveries: u64,
    per_actor_max: u64,
}

fn play(seed: u64) -> Outcome {
    let table: Arc<OnceLock<Vec<Addr<Msg>>>> = Arc::new(OnceLock::new());
    // The collector tells us when the last message is in, and then keeps listening until every
    // forwarder has stopped, so that a late duplicate would still be counted.
    let (all_in_tx, all_in_rx) = channel::bounded::<()>(1);
    let (collector, collected) = threadlet::spawn_actor(move |mb: Mailbox<u32>| {
        let mut seen = vec![0u32; MESSAGES];
        let mut count = 0;
        for id in &mb {
            seen[id as usize] += 1;
            count += 1;
            if count == MESSAGES {
                all_in_tx.send(()).unwrap();
            }
        }
        seen
    });

    let mut topo = Rng::new(seed);
    let mut addrs = Vec::with_capacity(ACTORS);
    let mut handles = Vec::with_capacity(ACTORS);
    for me in 0..ACTORS {
        let neighbours: Vec<usize> = (0..NEIGHBOURS)
            .map(|_| {
                loop {
                    let n = topo.below(ACTORS);
                    if n != me {
                        break n;
                    }
                }
            })
            .collect();
        let (table, collector) = (table.clone(), collector.clone());
        let (addr, h) =
            threadlet::spawn_actor(move |mb| forwarder(me, mb, neighbours, table, collector));
        addrs.push(addr);
        handles.push(h);
    }
    drop(collector);
    table
        .set(addrs)
        .unwrap_or_else(|_| unreachable!("set once"));
    let addrs = table.get().unwrap();

    for id in 0..MESSAGES as u32 {
        let to = topo.below(ACTORS);
        addrs[to]
            .send(Msg::Hop { id, hops: HOPS })
            .unwrap_or_else(|_| panic!("forwarder {to} ended early"));
    }
    all_in_rx
        .recv()
        .expect("every message reaches the collector");
    for a in addrs {
        a.send(Msg::Stop)
            .unwrap_or_else(|_| panic!("a forwarder ended early"));
    }
    drop(table);
    let per_actor: Vec<u64> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    Outcome {
        seen: collected.join().unwrap(),
        deliveries: per_actor.iter().sum(),
        per_actor_max: per_actor.iter().copied().max().unwrap_or(0),
    }
}

fn conservation(workers: usize, seed: u64) {
    for (scheduler, rt) in common::under_each_scheduler(workers) {
        conservation_on(rt, workers, scheduler, seed);
    }
}

fn conservation_on(rt: Runtime, workers: usize, scheduler: Scheduler, seed: u64) {
    let start = Instant::now();
    let out = rt.block_on(move || play(seed));
    eprintln!(
        "conservation on {workers} worker(s), {scheduler:?}: {DELIVERIES} deliveries in {:?}",
        start.elapsed()
    );
    let lost: Vec<usize> = (0..MESSAGES).filter(|&i| out.seen[i] == 0).collect();
    let dup: Vec<usize> = (0..MESSAGES).filter(|&i| out.seen[i] > 1).collect();
    assert!(
        lost.is_empty(),
        "{} messages lost, first {:?}",
        lost.len(),
        &lost[..lost.len().min(10)]
    );
    assert!(
        dup.is_empty(),
        "{} messages collected more than once, first {:?}",
        dup.len(),
        &dup[..dup.len().min(10)]
    );
    assert_eq!(out.deliveries, DELIVERIES);
    // Sanity: the load is spread over the topology, not stuck in one actor.
    assert!(out.per_actor_max < DELIVERIES / 10, "{}", out.per_actor_max);
}

#[test]
fn every_message_is_collected_exactly_once_one_worker() {
    conservation(1, 1);
}

#[test]
fn every_message_is_collected_exactly_once_two_workers() {
    conservation(2, 2);
}
