//! The CPU-bound seed workloads (docs/benchmarks.md, "The seeds, reproduced"): Beazley's `count` and the
//! Stackless `factorial` demo, each with a preemption safe point in its loop.

use std::hint::black_box;

/// Hides `x` from the optimiser, so that a counting loop is not folded away, without a trip
/// through memory. (`black_box` stores its argument and loads it back: the loop then carries
/// its counter through a store and a load, and on the AMD EPYC machine we measure on, each step
/// took either 0.5 or 2.6 ns, flipping between runs and within one, with or without a safe
/// point, depending on whether the CPU forwarded the store. That bimodality was the loop's, not
/// the safe point's; see docs/preemption.md, "What a safe point costs".)
#[inline(always)]
fn opaque(mut x: u64) -> u64 {
    // SAFETY: an empty assembly block: it executes no instruction and touches no memory, stack
    // or flags; it only tells the compiler that `x` may have changed in its register.
    unsafe {
        std::arch::asm!("/* {0} */", inout(reg) x, options(nomem, nostack, preserves_flags));
    }
    x
}

/// Counts `n` down to zero with a safe point per step, like Beazley's `count(n)`.
pub fn count(n: u64) {
    let mut n = opaque(n);
    while n > 0 {
        n = opaque(n - 1);
        threadlet::checkpoint();
    }
}

/// Counts `n` down to zero with no safe point: the baseline the checkpoint overhead is measured
/// against.
pub fn count_without_safe_points(n: u64) {
    let mut n = opaque(n);
    while n > 0 {
        n = opaque(n - 1);
    }
}

/// The seed's factorial loop: `n` multiplications, wrapping in `u64`, with a safe point per
/// multiplication, as its factorial tasklets do. Returns the product. Each factor `i` is made
/// odd (`i | 1`): `n!` itself wraps to zero from `n = 66` on (it holds 2^64), and a product that
/// is always zero would let a broken loop pass every check of its result.
pub fn factorial(n: u64) -> u64 {
    let mut acc = 1u64;
    for i in 1..=n {
        acc = black_box(acc.wrapping_mul(i | 1));
        threadlet::checkpoint();
    }
    acc
}
