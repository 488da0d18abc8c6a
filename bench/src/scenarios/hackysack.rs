//! hackysack: the Stackless seed's `runit()`. Spawn a circle of `players`, kick
//! one sack `kicks` times from player to random other player, then send every player exit and
//! wait for all of them.
//!
//! `total_s` = setup (spawning the circle) + game (first kick until every player went home:
//! the players' first runs, the kicks, the exits and the joins); `per_op_ns` is game time per
//! kick, so with few kicks per player it is dominated by starting and ending players.
//! `rss_bytes` is the peak resident memory during the run.
//!
//! The threadlet version is `threadlet_examples::hackysack::try_play_with`, whose players are
//! spawned migratable under `--migrate`. The os-threads version is the seed's threaded
//! hackysack (a thread and a `std::sync::mpsc` channel per player), the tokio one uses tasks and
//! unbounded tokio channels.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, mpsc};
use std::time::{Duration, Instant};

use clap::Args;
use serde_json::json;
use threadlet_examples::hackysack::{Kick, Kicker, Kind, Msg, Report};

use super::Figure;
use crate::Opts;
use crate::measure::{Sample, Spec, check, measure, rss};
use crate::output::Out;
use crate::plot::{Field, quantity};
use crate::runtimes::{self, ActorKind, Rt, RtConfig};

/// hackysack's options.
#[derive(Args, Clone, Debug)]
pub struct Params {
    /// Players in the circle (one actor each).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    pub players: u64,
    /// Kicks before everybody goes home.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    pub kicks: u64,
    /// Play one untimed game of the same size in the same runtime first, so that the timed
    /// game finds warm stacks (threadlet) and a warm allocator (threadlet, tokio): the steady
    /// state of a long-running program rather than a cold start. No effect on os-threads.
    #[arg(long)]
    pub warm: bool,
    /// Which kind of threadlet actor plays (handler actors are threadlet's alone; the other
    /// runtimes are skipped for them).
    #[arg(long, value_enum, default_value_t = ActorKind::Process)]
    pub actor: ActorKind,
}

/// Whether hackysack has a version for `rt`.
pub fn supports(rt: Rt) -> bool {
    rt != Rt::Sequential
}

/// The record's identifying fields.
pub fn spec(
    rt: Rt,
    workers: Option<usize>,
    migrate: bool,
    players: u64,
    kicks: u64,
) -> Spec<'static> {
    Spec {
        scenario: "hackysack",
        runtime: rt,
        workers,
        migrate,
        params: vec![("players", json!(players)), ("kicks", json!(kicks))],
    }
}

/// [`spec`] with the `warm` and `actor` parameters.
fn spec_warm(rt: Rt, w: Option<usize>, migrate: bool, p: &Params) -> Spec<'static> {
    let mut s = spec(rt, w, migrate, p.players, p.kicks);
    s.params.push(("warm", json!(p.warm)));
    if rt.scheduler().is_some() {
        s.params.push(("actor", json!(p.actor.name())));
    }
    s
}

/// Every runtime and worker count of `opts`.
pub fn main(out: &mut Out, opts: &Opts, p: &Params) -> Result<(), String> {
    let supported = |rt: Rt| supports(rt) && p.actor.runs_on(rt);
    let figure = figure(p);
    super::for_each(out, opts, "hackysack", supported, figure, |out, rt, w| {
        measure(out, spec_warm(rt, w, opts.migrate, p), opts.repeat, || {
            run_with(
                rt,
                w,
                opts.migrate,
                p.players as usize,
                p.kicks,
                p.warm,
                p.actor,
            )
        })
    })
}

/// The plot against workers: the whole run.
fn figure(p: &Params) -> Figure {
    let warm = if p.warm { ", warm" } else { "" };
    Figure {
        title: format!(
            "hackysack: {} x {}, {} actors{warm}",
            quantity(p.players, "player"),
            quantity(p.kicks, "kick"),
            p.actor.name()
        ),
        y: Field::total_ms("whole run (ms)"),
    }
}

/// One game on `rt`.
pub fn run(
    rt: Rt,
    workers: Option<usize>,
    migrate: bool,
    players: usize,
    kicks: u64,
) -> Result<Sample, String> {
    run_with(
        rt,
        workers,
        migrate,
        players,
        kicks,
        false,
        ActorKind::Process,
    )
}

/// [`run`] with players of the given kind (threadlet runtimes).
pub fn run_kind(
    rt: Rt,
    workers: Option<usize>,
    migrate: bool,
    players: usize,
    kicks: u64,
    actor: ActorKind,
) -> Result<Sample, String> {
    run_with(rt, workers, migrate, players, kicks, false, actor)
}

/// One game on `rt`, after an untimed one in the same runtime if `warm`.
fn run_with(
    rt: Rt,
    workers: Option<usize>,
    migrate: bool,
    players: usize,
    kicks: u64,
    warm: bool,
    actor: ActorKind,
) -> Result<Sample, String> {
    match rt {
        Rt::WorkStealing | Rt::GlobalQueue | Rt::Gil => {
            let sched = rt.scheduler().expect("a threadlet runtime");
            let runtime = runtimes::threadlet(sched, super::workers(workers), RtConfig::default());
            if warm {
                runtime.block_on(move || play(players, kicks, migrate, actor));
            }
            let window = rss::Window::start();
            let report = runtime.block_on(move || play(players, kicks, migrate, actor));
            let s = window.finish(sample(report, players, kicks));
            Ok(s.with("stats", runtimes::stats_json(&runtime.stats())))
        }
        Rt::OsThreads => {
            let window = rss::Window::start();
            let report = os_play(players, kicks)?;
            Ok(window.finish(sample(report, players, kicks)))
        }
        Rt::Tokio => {
            let runtime = runtimes::tokio(super::workers(workers));
            if warm {
                runtime
                    .block_on(runtime.spawn(tokio_play(players, kicks)))
                    .expect("the tokio hackysack driver does not panic");
            }
            let window = rss::Window::start();
            let report = runtime
                .block_on(runtime.spawn(tokio_play(players, kicks)))
                .expect("the tokio hackysack driver does not panic");
            Ok(window.finish(sample(report, players, kicks)))
        }
        Rt::Sequential => unreachable!("hackysack has no sequential version"),
    }
}

/// Checks a game and turns it into a sample.
fn sample(r: Report, players: usize, kicks: u64) -> Sample {
    check(r.kicks == kicks, || {
        format!("hackysack made {} kicks, asked for {kicks}", r.kicks)
    });
    check(r.went_home == players, || {
        format!("{} of {players} players went home", r.went_home)
    });
    Sample::new(r.total())
        .per_op(kicks, r.game)
        .with_secs("setup_s", r.setup)
        .with_secs("game_s", r.game)
        .with(
            "kicks_per_s",
            kicks as f64 / r.game.as_secs_f64().max(1e-12),
        )
}

/// One game with threadlet actors of the given kind (the examples' game); call it inside an
/// actor. Under `--migrate` process players are spawned with the migration opt-in.
pub fn play(players: usize, kicks: u64, migrate: bool, actor: ActorKind) -> Report {
    let kind = match actor {
        ActorKind::Process => Kind::Process,
        ActorKind::Handler => Kind::Handler,
    };
    threadlet_examples::hackysack::try_play_kind(players, kicks, kind, &runtimes::options(migrate))
        .unwrap_or_else(|e| panic!("hackysack: {e}"))
}

fn finish(
    players: usize,
    kicked: &AtomicU64,
    went_home: usize,
    setup: Duration,
    game: Duration,
) -> Report {
    Report {
        players,
        kicks: kicked.load(Ordering::Relaxed),
        went_home,
        setup,
        game,
    }
}

/// The seed's threaded hackysack: a thread and a channel per player.
fn os_play(players: usize, kicks: u64) -> Result<Report, String> {
    let start = Instant::now();
    let circle: Arc<OnceLock<Vec<mpsc::Sender<Msg>>>> = Arc::new(OnceLock::new());
    let kicked = Arc::new(AtomicU64::new(0));
    let mut senders = Vec::with_capacity(players);
    let mut handles = Vec::with_capacity(players);
    for me in 0..players {
        let (tx, rx) = mpsc::channel::<Msg>();
        let (circle, kicked) = (circle.clone(), kicked.clone());
        let spawned = runtimes::os_thread("hackysack player", me, players, move || {
            let mut kicker = Kicker::new(me);
            while let Ok(msg) = rx.recv() {
                match msg {
                    Msg::Exit => return true,
                    Msg::Sack => {
                        let circle = circle
                            .get()
                            .expect("the circle is formed before the first kick");
                        match kicker.kick(&kicked, kicks, circle.len()) {
                            Kick::Last => {
                                for p in circle {
                                    let _ = p.send(Msg::Exit);
                                }
                            }
                            Kick::To(to) => circle[to]
                                .send(Msg::Sack)
                                .expect("players stay until told to go home"),
                        }
                    }
                }
            }
            false
        });
        match spawned {
            Ok(h) => {
                senders.push(tx);
                handles.push(h);
            }
            Err(e) => {
                // Close every channel: the players already started see it and return.
                drop(senders);
                for h in handles {
                    let _ = h.join();
                }
                return Err(e);
            }
        }
    }
    let first = senders[0].clone();
    circle
        .set(senders)
        .unwrap_or_else(|_| unreachable!("set once"));
    let setup = start.elapsed();
    let game_start = Instant::now();
    first.send(Msg::Sack).expect("player 0 is waiting");
    drop(first);
    let went_home = handles
        .into_iter()
        .map(|h| h.join().expect("players do not panic"))
        .filter(|&home| home)
        .count();
    Ok(finish(
        players,
        &kicked,
        went_home,
        setup,
        game_start.elapsed(),
    ))
}

/// hackysack with tokio tasks and unbounded tokio channels; run it as a task.
async fn tokio_play(players: usize, kicks: u64) -> Report {
    use tokio::sync::mpsc::{UnboundedSender, unbounded_channel};
    let start = Instant::now();
    let circle: Arc<OnceLock<Vec<UnboundedSender<Msg>>>> = Arc::new(OnceLock::new());
    let kicked = Arc::new(AtomicU64::new(0));
    let mut senders = Vec::with_capacity(players);
    let mut handles = Vec::with_capacity(players);
    for me in 0..players {
        let (tx, mut rx) = unbounded_channel::<Msg>();
        let (circle, kicked) = (circle.clone(), kicked.clone());
        handles.push(tokio::spawn(async move {
            let mut kicker = Kicker::new(me);
            while let Some(msg) = rx.recv().await {
                match msg {
                    Msg::Exit => return true,
                    Msg::Sack => {
                        let circle = circle
                            .get()
                            .expect("the circle is formed before the first kick");
                        match kicker.kick(&kicked, kicks, circle.len()) {
                            Kick::Last => {
                                for p in circle {
                                    let _ = p.send(Msg::Exit);
                                }
                            }
                            Kick::To(to) => circle[to]
                                .send(Msg::Sack)
                                .expect("players stay until told to go home"),
                        }
                    }
                }
            }
            false
        }));
        senders.push(tx);
    }
    let first = senders[0].clone();
    circle
        .set(senders)
        .unwrap_or_else(|_| unreachable!("set once"));
    let setup = start.elapsed();
    let game_start = Instant::now();
    first.send(Msg::Sack).expect("player 0 is waiting");
    drop(first);
    let mut went_home = 0;
    for h in handles {
        if h.await.expect("players do not panic") {
            went_home += 1;
        }
    }
    finish(players, &kicked, went_home, setup, game_start.elapsed())
}
