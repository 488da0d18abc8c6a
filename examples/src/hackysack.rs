//! The Stackless "hackysack" game (tasklets against OS threads, 10 to 100,000 players passing
//! one sack), with threadlet actors.
//!
//! `players` actors stand in a circle. One sack is kicked from player to player, each time to a
//! random other player, by sending it to that player's mailbox. The player that makes the last
//! of `kicks` kicks sends every player `Exit` instead, and each goes home (its actor ends).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use threadlet::{Actor, ActorBuilder, Addr, Context, JoinHandle, Mailbox};

/// What a player can be sent.
#[derive(Debug)]
pub enum Msg {
    /// The sack, kicked to this player.
    Sack,
    /// Go home.
    Exit,
}

/// What one game measured.
#[derive(Clone, Copy, Debug)]
pub struct Report {
    /// Players in the circle.
    pub players: usize,
    /// Kicks made (always the requested number).
    pub kicks: u64,
    /// Players that went home (always `players`).
    pub went_home: usize,
    /// Spawning the players and handing out the circle.
    pub setup: Duration,
    /// From the first kick until every player went home.
    pub game: Duration,
}

impl Report {
    /// Setup plus game.
    pub fn total(&self) -> Duration {
        self.setup + self.game
    }
}

/// One player's part of the rules, shared by every version of the game (threadlet actors here,
/// OS threads and tokio tasks in the bench CLI), so that they all play the same game: count the
/// kick, and either name the player the sack goes to next (a random other one) or say that this
/// was the last kick.
///
/// Its random generator is a small xorshift kept on the player's own stack, tied to no thread.
pub struct Kicker {
    me: usize,
    rng: u64,
}

/// What a player does with the sack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kick {
    /// Kick it to this player.
    To(usize),
    /// That was the last kick: send every player home.
    Last,
}

impl Kicker {
    /// The rules for player `me`.
    pub fn new(me: usize) -> Kicker {
        Kicker {
            me,
            rng: 0x2545_F491_4F6C_DD1D ^ (me as u64 + 1).wrapping_mul(0x9E37_79B9),
        }
    }

    /// Counts a kick in `kicked` and says what to do, in a circle of `players`.
    pub fn kick(&mut self, kicked: &AtomicU64, kicks: u64, players: usize) -> Kick {
        if kicked.fetch_add(1, Ordering::Relaxed) + 1 >= kicks {
            return Kick::Last;
        }
        let mut to = self.below(players);
        while players > 1 && to == self.me {
            to = self.below(players);
        }
        Kick::To(to)
    }

    fn below(&mut self, n: usize) -> usize {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        (((self.rng >> 32) * n as u64) >> 32) as usize
    }
}

/// One player: wait for the sack, kick it on, until told to go home. Returns `true` when it went
/// home on `Exit`. If the chosen player is gone (it could not start: the runtime ran out of
/// stacks), the game cannot go on: everybody is sent home and the kicker reports the loss.
fn player(mut me: Player, mb: Mailbox<Msg>) -> bool {
    while let Some(msg) = mb.recv() {
        match msg {
            Msg::Exit => return true,
            Msg::Sack => me.take_sack(),
        }
    }
    false
}

/// Which kind of actor plays.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Kind {
    /// Process actors: a loop over the mailbox, on a stack of its own (`spawn_actor`).
    #[default]
    Process,
    /// Handler actors: a value whose `handle` the runtime calls per message, with no stack
    /// between messages (`threadlet::start`).
    Handler,
}

/// A player as a handler actor: the same rules as [`player`], one message at a time.
struct Player {
    kicker: Kicker,
    circle: Arc<OnceLock<Vec<Addr<Msg>>>>,
    kicked: Arc<AtomicU64>,
    kicks: u64,
    went_home: bool,
}

impl Actor for Player {
    type Msg = Msg;

    fn handle(&mut self, msg: Msg, ctx: &mut Context<Self>) {
        match msg {
            Msg::Exit => {
                self.went_home = true;
                ctx.stop();
            }
            Msg::Sack => self.take_sack(),
        }
    }
}

impl Player {
    fn new(
        me: usize,
        circle: Arc<OnceLock<Vec<Addr<Msg>>>>,
        kicked: Arc<AtomicU64>,
        kicks: u64,
    ) -> Player {
        Player {
            kicker: Kicker::new(me),
            circle,
            kicked,
            kicks,
            went_home: false,
        }
    }

    /// The player's turn with the sack, whichever kind of actor it is: kick it on to a random
    /// other player, or, after the last kick, send everybody home. If the chosen player is
    /// gone, everybody is sent home and the game is lost (a panic).
    fn take_sack(&mut self) {
        let circle = self
            .circle
            .get()
            .expect("the circle is formed before the first kick");
        let Kick::To(to) = self.kicker.kick(&self.kicked, self.kicks, circle.len()) else {
            send_everybody_home(circle);
            return;
        };
        if circle[to].send(Msg::Sack).is_err() {
            send_everybody_home(circle);
            panic!("player {to} is gone before the game ended: the sack is lost");
        }
    }
}

/// Sends every player `Exit`. A player that already left hands the message back, which is
/// ignored. With a million players this loop runs for a tenth of a second or more, so it
/// passes a safe point per send: the worker's other actors get their turn, and the runtime's
/// watchdog has no actor to warn about.
fn send_everybody_home(circle: &[Addr<Msg>]) {
    for p in circle {
        let _ = p.send(Msg::Exit);
        threadlet::checkpoint();
    }
}

/// A player's join handle, of either kind.
enum Home {
    Process(JoinHandle<bool>),
    Handler(JoinHandle<Player>),
}

impl Home {
    /// Whether the player went home on `Exit`.
    fn join(self) -> Result<bool, threadlet::JoinError> {
        match self {
            Home::Process(h) => h.join(),
            Home::Handler(h) => h.join().map(|p| p.went_home),
        }
    }
}

/// Plays one game; call it from inside an actor (for example in `Runtime::block_on`).
///
/// `kicks` must be at least 1: the first kick into the circle counts as one.
///
/// # Panics
///
/// If the game could not be played to the end; [`try_play`] returns the reason instead.
pub fn play(players: usize, kicks: u64) -> Report {
    try_play(players, kicks).unwrap_or_else(|e| panic!("hackysack: {e}"))
}

/// Plays one game, or says why it could not be finished (a player that could not start, for
/// example when the kernel's map count limits the number of guarded stacks).
pub fn try_play(players: usize, kicks: u64) -> Result<Report, String> {
    try_play_with(players, kicks, &ActorBuilder::new())
}

/// [`try_play`], with every player spawned with `opts` (the bench CLI's `--migrate` passes the
/// `unsafe` migration opt-in; the players keep nothing thread-affine on their stacks).
pub fn try_play_with(players: usize, kicks: u64, opts: &ActorBuilder) -> Result<Report, String> {
    try_play_kind(players, kicks, Kind::Process, opts)
}

/// [`try_play_with`], with players of the given [`Kind`] (`opts` names them; its stack size
/// and migration opt-in apply to process actors only).
pub fn try_play_kind(
    players: usize,
    kicks: u64,
    kind: Kind,
    opts: &ActorBuilder,
) -> Result<Report, String> {
    assert!(players >= 1 && kicks >= 1, "need a player and a kick");
    let start = Instant::now();
    let circle: Arc<OnceLock<Vec<Addr<Msg>>>> = Arc::new(OnceLock::new());
    let kicked = Arc::new(AtomicU64::new(0));
    let mut addrs: Vec<Addr<Msg>> = Vec::with_capacity(players);
    let mut handles: Vec<Home> = Vec::with_capacity(players);
    for me in 0..players {
        let player_me = Player::new(me, circle.clone(), kicked.clone(), kicks);
        let spawned = match kind {
            Kind::Process => opts
                .clone()
                .spawn_actor(move |mb| player(player_me, mb))
                .map(|(addr, h)| (addr, Home::Process(h))),
            Kind::Handler => opts
                .clone()
                .start(player_me)
                .map(|(addr, h)| (addr, Home::Handler(h))),
        };
        let (addr, h) = match spawned {
            Ok(pair) => pair,
            Err(e) => {
                // Send the players already spawned home before reporting.
                send_everybody_home(&addrs);
                for h in handles {
                    let _ = h.join();
                }
                return Err(format!("cannot spawn player {me}: {e}"));
            }
        };
        addrs.push(addr);
        handles.push(h);
        // Forming a circle of a million takes a second: a safe point per player keeps the
        // loop preemptible (see `send_everybody_home`).
        threadlet::checkpoint();
    }
    let first = addrs[0].clone();
    circle
        .set(addrs)
        .unwrap_or_else(|_| unreachable!("set once"));
    let setup = start.elapsed();

    let game_start = Instant::now();
    if first.send(Msg::Sack).is_err() {
        // Player 0 never started; send everybody home so the joins below end.
        send_everybody_home(circle.get().expect("set above"));
    }
    drop(first);
    let mut went_home = 0;
    let mut failure = None;
    for h in handles {
        match h.join() {
            Ok(true) => went_home += 1,
            Ok(false) => {}
            Err(e) => {
                if failure.is_none() {
                    // A player that never started may have taken the sack with it: the game
                    // cannot end by itself, so send everybody home.
                    send_everybody_home(circle.get().expect("set above"));
                    failure = Some(e.to_string());
                }
            }
        }
    }
    let game = game_start.elapsed();
    // The players are gone and this holds the circle's last reference: letting go of a
    // million addresses frees a million mailboxes, a tenth of a second, so a safe point per
    // address here too.
    if let Some(addrs) = Arc::into_inner(circle).and_then(OnceLock::into_inner) {
        for addr in addrs {
            drop(addr);
            threadlet::checkpoint();
        }
    }
    if let Some(e) = failure {
        return Err(e);
    }
    Ok(Report {
        players,
        kicks: kicked.load(Ordering::Relaxed),
        went_home,
        setup,
        game,
    })
}
