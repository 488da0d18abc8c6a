//! The hackysack game ends with every kick made and every player gone home.

use threadlet::{Runtime, Scheduler};
use threadlet_examples::hackysack::{Report, play};

fn game(workers: usize, scheduler: Scheduler, players: usize, kicks: u64) -> Report {
    let rt = Runtime::builder()
        .workers(workers)
        .scheduler(scheduler)
        .build()
        .unwrap();
    rt.block_on(move || play(players, kicks))
}

/// Plays the game under every scheduler: the rules do not depend on which one runs it.
fn check(workers: usize, players: usize, kicks: u64) {
    for s in [
        Scheduler::WorkStealing,
        Scheduler::GlobalQueue,
        Scheduler::Gil,
    ] {
        let r = game(workers, s, players, kicks);
        assert_eq!(r.players, players);
        assert_eq!(
            r.kicks, kicks,
            "{s:?} on {workers} worker(s), {players} players"
        );
        assert_eq!(
            r.went_home, players,
            "{s:?} on {workers} worker(s), {kicks} kicks"
        );
    }
}

/// `n` actors alive at once need `n` guarded stacks. With `mprotect` guards (no
/// `MADV_GUARD_INSTALL`, before Linux 6.13) each costs two kernel mappings and the runtime
/// refuses stacks past 90% of `vm.max_map_count`; players that cannot start make `play` wait
/// with a "cannot spawn" panic. Fail at once with the reason and the sysctl instead.
fn assert_room_for_stacks(n: usize) {
    let rt = Runtime::builder().workers(1).build().unwrap();
    if rt.stats().madvise_guards {
        return;
    }
    let max_map_count: usize = std::fs::read_to_string("/proc/sys/vm/max_map_count")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(65_530);
    let needed = n * 2 * 100 / 90 + 1_000;
    assert!(
        max_map_count >= needed,
        "{n} actors need {n} guarded stacks: without MADV_GUARD_INSTALL (Linux 6.13+) that \
         takes vm.max_map_count >= {needed}, and it is {max_map_count}"
    );
}

/// The Stackless tutorial's game: 100,000 players, 1,000 kicks.
#[test]
fn hundred_thousand_players_thousand_kicks() {
    assert_room_for_stacks(100_000);
    check(2, 100_000, 1000);
}

#[test]
fn one_player_kicks_to_itself() {
    check(1, 1, 1);
    check(1, 1, 50);
    check(2, 1, 1);
    check(2, 1, 50);
}

#[test]
fn two_players() {
    check(1, 2, 1);
    check(1, 2, 1000);
    check(2, 2, 1);
    check(2, 2, 1000);
}

#[test]
fn a_single_kick_ends_the_game() {
    check(1, 1000, 1);
    check(2, 1000, 1);
}

#[test]
fn small_circles_many_kicks() {
    for workers in [1, 2] {
        for players in [3, 10, 100] {
            check(workers, players, 5_000);
        }
    }
}

#[test]
#[should_panic(expected = "need a player and a kick")]
fn zero_kicks_is_refused() {
    game(1, Scheduler::WorkStealing, 10, 0);
}
