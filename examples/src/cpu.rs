//! The CPU-bound seed workloads (`shared/seeds/003_*`, `004_*`): Beazley's `count` and the
//! Stackless `factorial` demo, each with a preemption safe point in its loop.

use std::hint::black_box;

/// Counts `n` down to zero with a safe point per step, like Beazley's `count(n)`.
pub fn count(n: u64) {
    let mut n = black_box(n);
    while n > 0 {
        n = black_box(n - 1);
        threadlet::checkpoint();
    }
}

/// Counts `n` down to zero with no safe point: the baseline the checkpoint overhead is measured
/// against.
pub fn count_without_safe_points(n: u64) {
    let mut n = black_box(n);
    while n > 0 {
        n = black_box(n - 1);
    }
}

/// `n!` in wrapping `u64` arithmetic with a safe point per multiplication, as the seed's
/// factorial tasklets do. Returns the product.
pub fn factorial(n: u64) -> u64 {
    let mut acc = 1u64;
    for i in 1..=n {
        acc = black_box(acc.wrapping_mul(i));
        threadlet::checkpoint();
    }
    acc
}
