//! Deterministic parallelism (DESIGN, "Shared foundations"): every reduction in `eddies::par` gives the same
//! bits for any thread count, and those bits are the ones of a plain sequential sum over the same fixed chunks.

use eddies::par::{self, REDUCE_CHUNK};
use eddies::rng::SplitMix64;
use std::sync::OnceLock;

/// Ten million values: enough chunks (611, the last one ragged) for every worker to take many.
const N: usize = 10_000_000;

/// Thread counts to compare: serial, even, and an odd count that does not divide the chunk count.
const THREADS: [usize; 3] = [1, 2, 7];

/// Pseudo-random values of both signs spanning 2⁻²⁰..2²⁰ in magnitude, so that floating-point addition is far
/// from associative on them: any change in summation order changes the low bits of the result.
fn values() -> &'static [f64] {
    static VALUES: OnceLock<Vec<f64>> = OnceLock::new();
    VALUES.get_or_init(|| {
        let mut g = SplitMix64::new(0x5EED);
        (0..N)
            .map(|_| {
                let r = g.next_u64();
                let mantissa = (r >> 11) as f64 / (1u64 << 53) as f64;
                let exponent = ((r >> 3) % 41) as i32 - 20;
                let sign = if r & 1 == 0 { 1.0 } else { -1.0 };
                sign * (1.0 + mantissa) * 2f64.powi(exponent)
            })
            .collect()
    })
}

fn values_f32() -> &'static [f32] {
    static VALUES: OnceLock<Vec<f32>> = OnceLock::new();
    VALUES.get_or_init(|| values().iter().map(|&v| v as f32).collect())
}

/// The sum `par::sum` promises: sequential within each chunk of `REDUCE_CHUNK`, then the partials added
/// left to right starting from the identity.
fn chunked_sum_by_hand(v: impl ExactSizeIterator<Item = f64> + Clone) -> f64 {
    let v: Vec<f64> = v.collect();
    v.chunks(REDUCE_CHUNK)
        .map(|c| c.iter().fold(0.0, |a, &x| a + x))
        .fold(0.0, |a, p| a + p)
}

/// Runs `f` on pools of 1, 2 and 7 workers.
fn on_each_pool<R: Send>(f: impl Fn() -> R + Send + Sync) -> Vec<R> {
    THREADS.iter().map(|&t| par::with_threads(t, &f)).collect()
}

#[test]
fn data_is_order_sensitive() {
    // Guard for the tests below: on these values a different order really gives different bits, so a
    // schedule-dependent reduction could not pass them by luck.
    let v = values();
    let forward = v.iter().fold(0.0, |a, &x| a + x);
    let backward = v.iter().rev().fold(0.0, |a, &x| a + x);
    let chunked = chunked_sum_by_hand(v.iter().copied());
    assert_ne!(forward.to_bits(), backward.to_bits());
    assert_ne!(forward.to_bits(), chunked.to_bits());
}

#[test]
fn sum_f64_is_bit_identical_across_thread_counts() {
    let v = values();
    let sums = on_each_pool(|| par::sum(v.len(), |i| v[i]));
    let expected = chunked_sum_by_hand(v.iter().copied());
    for (s, t) in sums.iter().zip(THREADS) {
        assert_eq!(
            s.to_bits(),
            expected.to_bits(),
            "{t} threads: {s} vs {expected}"
        );
    }
}

#[test]
fn sum_of_f32_values_is_bit_identical_across_thread_counts() {
    let v = values_f32();
    let sums = on_each_pool(|| par::sum(v.len(), |i| v[i] as f64));
    let expected = chunked_sum_by_hand(v.iter().map(|&x| x as f64));
    for (s, t) in sums.iter().zip(THREADS) {
        assert_eq!(s.to_bits(), expected.to_bits(), "{t} threads");
    }
}

#[test]
fn sum_n_is_bit_identical_across_thread_counts() {
    let v = values();
    let f = |i: usize| [v[i], v[i] * v[i], (v[i] as f32) as f64];
    let sums = on_each_pool(|| par::sum_n(v.len(), f));
    // Each component must be the hand-chunked sum of that component alone.
    let expected: [f64; 3] =
        std::array::from_fn(|k| chunked_sum_by_hand((0..v.len()).map(|i| f(i)[k])));
    for (s, t) in sums.iter().zip(THREADS) {
        assert_eq!(
            s.map(f64::to_bits),
            expected.map(f64::to_bits),
            "{t} threads"
        );
    }
}

#[test]
fn reduce_with_f32_partials_is_bit_identical_across_thread_counts() {
    // A caller-chosen chunk (not REDUCE_CHUNK) and an f32 accumulator, where rounding is 2²⁹ times coarser.
    let v = values_f32();
    let chunk = 1000;
    let run = || {
        par::reduce(
            v.len(),
            chunk,
            0.0f32,
            |r| v[r].iter().fold(0.0f32, |a, &x| a + x),
            |a, b| a + b,
        )
    };
    let expected = v
        .chunks(chunk)
        .map(|c| c.iter().fold(0.0f32, |a, &x| a + x))
        .fold(0.0f32, |a, p| a + p);
    for (s, t) in on_each_pool(run).iter().zip(THREADS) {
        assert_eq!(s.to_bits(), expected.to_bits(), "{t} threads");
    }
}

#[test]
fn max_is_bit_identical_and_equals_sequential_max() {
    let v = values();
    let expected = v.iter().fold(f64::NEG_INFINITY, |a, &x| a.max(x.abs()));
    for (m, t) in on_each_pool(|| par::max(v.len(), |i| v[i].abs()))
        .iter()
        .zip(THREADS)
    {
        assert_eq!(m.to_bits(), expected.to_bits(), "{t} threads");
    }
    // Empty range: the identity.
    assert_eq!(par::max(0, |_| 1.0), f64::NEG_INFINITY);
}
