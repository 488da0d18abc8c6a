//! skynet: a tree of actors. The root covers the indices `0..size`; an actor with more than one
//! index splits them into `fanout` nearly equal runs, spawns a child for each and returns the
//! sum of what its children return; an actor with one index returns it. The root's result must
//! be `size * (size - 1) / 2`.
//!
//! `total_s` runs from spawning the root to joining it (every actor joins its children);
//! `per_op_ns` is wall time per actor in the tree (`actors` in the record, the root included).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use clap::Args;
use serde_json::json;
use threadlet::{Actor, Addr, Context, channel};

use super::Figure;
use crate::Opts;
use crate::measure::{Sample, Spec, check, measure, rss};
use crate::output::Out;
use crate::plot::{Field, quantity, thousands};
use crate::runtimes::{self, ActorKind, Rt, RtConfig};

/// skynet's options.
#[derive(Args, Clone, Debug)]
pub struct Params {
    /// Leaves of the tree (indices summed).
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub size: u64,
    /// Children per inner actor.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(2..))]
    pub fanout: u64,
    /// Which kind of threadlet actor makes up the tree.
    #[arg(long, value_enum, default_value_t = ActorKind::Process)]
    pub actor: ActorKind,
}

/// Whether skynet has a version for `rt`.
pub fn supports(rt: Rt) -> bool {
    rt != Rt::Sequential
}

/// Every runtime and worker count of `opts`.
pub fn main(out: &mut Out, opts: &Opts, p: &Params) -> Result<(), String> {
    let nodes = nodes(p.size, p.fanout);
    let supported = |rt: Rt| supports(rt) && p.actor.runs_on(rt);
    let figure = figure(p, nodes);
    super::for_each(out, opts, "skynet", supported, figure, |out, rt, w| {
        let mut params = vec![
            ("size", json!(p.size)),
            ("fanout", json!(p.fanout)),
            ("actors", json!(nodes)),
        ];
        if rt.scheduler().is_some() {
            params.push(("actor", json!(p.actor.name())));
        }
        let spec = Spec {
            scenario: "skynet",
            runtime: rt,
            workers: w,
            migrate: opts.migrate,
            params,
        };
        measure(out, spec, opts.repeat, || run(rt, w, opts.migrate, p))
    })
}

/// The plot against workers: time per actor of the tree (`nodes` of them).
fn figure(p: &Params, nodes: u64) -> Figure {
    Figure {
        title: format!(
            "skynet: size {}, fanout {}: {}",
            thousands(p.size),
            p.fanout,
            quantity(nodes, &format!("{} actor", p.actor.name()))
        ),
        y: Field::per_op_ns("ns per actor"),
    }
}

/// The children of the actor covering `num..num + size`: `(first index, count)` each.
fn children(num: u64, size: u64, fanout: u64) -> impl Iterator<Item = (u64, u64)> {
    let chunk = size.div_ceil(fanout);
    (0..size)
        .step_by(chunk as usize)
        .map(move |off| (num + off, chunk.min(size - off)))
}

/// Actors in a tree over `size` indices, the root included.
pub fn nodes(size: u64, fanout: u64) -> u64 {
    if size == 1 {
        return 1;
    }
    let chunk = size.div_ceil(fanout);
    let full = size / chunk;
    let rest = size % chunk;
    1 + full * nodes(chunk, fanout) + if rest > 0 { nodes(rest, fanout) } else { 0 }
}

/// Where a handler node reports its sum.
enum Parent {
    Node(Addr<u64>),
    Driver(channel::Sender<u64>),
}

/// A skynet node as a handler actor: starts its children in `started`, adds up what they
/// report, reports the sum and stops.
struct Node {
    num: u64,
    size: u64,
    fanout: u64,
    parent: Option<Parent>,
    pending: u64,
    sum: u64,
}

impl Node {
    fn new(num: u64, size: u64, fanout: u64, parent: Parent) -> Node {
        Node {
            num,
            size,
            fanout,
            parent: Some(parent),
            pending: 0,
            sum: 0,
        }
    }

    fn report(&mut self, ctx: &mut Context<Self>) {
        match self.parent.take().expect("reports once") {
            Parent::Node(a) => a.send(self.sum).expect("the parent waits"),
            Parent::Driver(tx) => tx.send(self.sum).expect("the driver waits"),
        }
        ctx.stop();
    }
}

impl Actor for Node {
    type Msg = u64;

    fn started(&mut self, ctx: &mut Context<Self>) {
        if self.size == 1 {
            self.sum = self.num;
            return self.report(ctx);
        }
        for (num, size) in children(self.num, self.size, self.fanout) {
            let parent = Parent::Node(ctx.addr());
            drop(threadlet::start(Node::new(num, size, self.fanout, parent)));
            self.pending += 1;
        }
    }

    fn handle(&mut self, v: u64, ctx: &mut Context<Self>) {
        self.sum += v;
        self.pending -= 1;
        if self.pending == 0 {
            self.report(ctx);
        }
    }
}

/// One run on `rt`.
pub fn run(rt: Rt, workers: Option<usize>, migrate: bool, p: &Params) -> Result<Sample, String> {
    let (size, fanout) = (p.size, p.fanout);
    let mut stats = None;
    let window;
    let (took, sum) = match rt {
        Rt::WorkStealing | Rt::GlobalQueue | Rt::Gil => {
            let sched = rt.scheduler().expect("a threadlet runtime");
            let runtime = runtimes::threadlet(sched, super::workers(workers), RtConfig::default());
            window = rss::Window::start();
            let actor = p.actor;
            let r = runtime.block_on(move || {
                let start = Instant::now();
                let sum = match actor {
                    ActorKind::Process => {
                        let root =
                            runtimes::spawn(migrate, move || actor_node(0, size, fanout, migrate));
                        root.join().expect("skynet actors do not panic")
                    }
                    ActorKind::Handler => {
                        let (tx, rx) = channel::bounded(1);
                        let _root =
                            threadlet::start(Node::new(0, size, fanout, Parent::Driver(tx)));
                        rx.recv().expect("the root reports")
                    }
                };
                (start.elapsed(), sum)
            });
            stats = Some(runtimes::stats_json(&runtime.stats()));
            r
        }
        Rt::OsThreads => {
            window = rss::Window::start();
            let total = nodes(size, fanout) as usize;
            let created = Arc::new(AtomicUsize::new(0));
            let start = Instant::now();
            let sum = thread_node(0, size, fanout, created, total)?;
            (start.elapsed(), sum)
        }
        Rt::Tokio => {
            let runtime = runtimes::tokio(super::workers(workers));
            window = rss::Window::start();
            runtime
                .block_on(runtime.spawn(async move {
                    let start = Instant::now();
                    let sum = tokio::spawn(task_node(0, size, fanout))
                        .await
                        .expect("skynet tasks do not panic");
                    (start.elapsed(), sum)
                }))
                .expect("the tokio skynet driver does not panic")
        }
        Rt::Sequential => unreachable!("skynet has no sequential version"),
    };
    let want = (size as u128 * (size as u128 - 1) / 2) as u64;
    check(sum == want, || format!("skynet summed {sum}, want {want}"));
    let actors = nodes(size, fanout);
    let s = window.finish(Sample::new(took).per_op(actors, took));
    Ok(match stats {
        Some(st) => s.with("stats", st),
        None => s,
    })
}

/// A threadlet actor of the tree.
fn actor_node(num: u64, size: u64, fanout: u64, migrate: bool) -> u64 {
    if size == 1 {
        return num;
    }
    let handles: Vec<_> = children(num, size, fanout)
        .map(|(n, s)| runtimes::spawn(migrate, move || actor_node(n, s, fanout, migrate)))
        .collect();
    handles
        .into_iter()
        .map(|h| h.join().expect("skynet actors do not panic"))
        .sum()
}

/// An OS thread of the tree (the caller's thread for the root).
fn thread_node(
    num: u64,
    size: u64,
    fanout: u64,
    created: Arc<AtomicUsize>,
    total: usize,
) -> Result<u64, String> {
    if size == 1 {
        return Ok(num);
    }
    let mut handles = Vec::with_capacity(fanout as usize);
    let mut failed = None;
    for (n, s) in children(num, size, fanout) {
        let index = created.fetch_add(1, Ordering::Relaxed);
        let c = created.clone();
        match runtimes::os_thread("skynet node", index, total, move || {
            thread_node(n, s, fanout, c, total)
        }) {
            Ok(h) => handles.push(h),
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    let mut sum = 0;
    for h in handles {
        match h.join().expect("skynet threads do not panic") {
            Ok(s) => sum += s,
            Err(e) => failed = failed.or(Some(e)),
        }
    }
    match failed {
        Some(e) => Err(e),
        None => Ok(sum),
    }
}

/// A tokio task of the tree.
fn task_node(num: u64, size: u64, fanout: u64) -> Pin<Box<dyn Future<Output = u64> + Send>> {
    Box::pin(async move {
        if size == 1 {
            return num;
        }
        let handles: Vec<_> = children(num, size, fanout)
            .map(|(n, s)| tokio::spawn(task_node(n, s, fanout)))
            .collect();
        let mut sum = 0;
        for h in handles {
            sum += h.await.expect("skynet tasks do not panic");
        }
        sum
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tree_shape() {
        assert_eq!(nodes(1, 10), 1);
        assert_eq!(nodes(10, 10), 11);
        assert_eq!(nodes(1_000_000, 10), 1_111_111);
        assert_eq!(nodes(7, 2), 13); // 7 -> 4 + 3 -> (2+2) + (2+1) -> ...
        let leaves: Vec<_> = children(5, 7, 3).collect();
        assert_eq!(leaves, vec![(5, 3), (8, 3), (11, 1)]);
    }
}
