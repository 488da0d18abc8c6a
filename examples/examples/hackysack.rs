//! The Stackless hackysack game: N players in a circle kick one sack K times.
//!
//! ```text
//! cargo run --release --example hackysack -- --players 100000 --kicks 1000
//! ```

use clap::Parser;
use threadlet::Runtime;
use threadlet_examples::hackysack;

/// Play hackysack with threadlet actors (Stackless tutorial, "Lightweight Threads").
#[derive(Parser)]
struct Args {
    /// Players in the circle (one actor each).
    #[arg(long, default_value_t = 100_000)]
    players: usize,
    /// Kicks before everybody goes home.
    #[arg(long, default_value_t = 1_000)]
    kicks: u64,
    /// Worker threads (default: one per CPU).
    #[arg(long)]
    workers: Option<usize>,
}

fn main() {
    let args = Args::parse();
    let mut builder = Runtime::builder();
    if let Some(w) = args.workers {
        builder = builder.workers(w);
    }
    let rt = match builder.build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("hackysack: {e}");
            std::process::exit(2);
        }
    };
    let (players, kicks) = (args.players, args.kicks);
    if players == 0 || kicks == 0 {
        eprintln!("hackysack: --players and --kicks must be at least 1");
        std::process::exit(2);
    }
    let r = rt.block_on(move || hackysack::play(players, kicks));
    println!(
        "hackysack: {} players, {} kicks on {} workers",
        r.players,
        r.kicks,
        rt.workers()
    );
    println!("  setup  {:>10.3} ms", r.setup.as_secs_f64() * 1e3);
    println!("  game   {:>10.3} ms", r.game.as_secs_f64() * 1e3);
    println!("  total  {:>10.3} ms", r.total().as_secs_f64() * 1e3);
    // The game's time includes sending every player home: with many players and few kicks
    // (the default), going home is most of it.
    println!(
        "  {} players went home; {:.0} kicks/s over the game, going home included",
        r.went_home,
        r.kicks as f64 / r.game.as_secs_f64(),
    );
}
