//! Vector kernels of the Krylov solvers: parallel over fixed chunks, reductions summed in a fixed order.
//!
//! Inside a chunk, sums run in [`LANES`] interleaved accumulators (so that they vectorise) that are combined
//! pairwise at the end; chunks are combined left to right. Both orders depend only on the vector length, never
//! on the thread count.

use multiversion::multiversion;
use rayon::prelude::*;

/// Entries per chunk: 128 KiB of f64, large enough to hide scheduling, small enough to balance two threads on
/// 32³ grids.
pub const CHUNK: usize = 1 << 14;

/// Interleaved accumulators of a chunk sum (one 512-bit register of f64).
pub const LANES: usize = 8;

/// Sum of `f(i)` over a chunk of length `n`, in [`LANES`] interleaved partial sums.
#[inline(always)]
pub(crate) fn lane_sum(n: usize, f: impl Fn(usize) -> f64) -> f64 {
    let mut acc = [0.0; LANES];
    let full = n / LANES * LANES;
    for base in (0..full).step_by(LANES) {
        for (l, a) in acc.iter_mut().enumerate() {
            *a += f(base + l);
        }
    }
    for (l, i) in (full..n).enumerate() {
        acc[l] += f(i);
    }
    fold_lanes(acc)
}

/// Combines the lane accumulators pairwise: `((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7))`.
#[inline(always)]
pub(crate) fn fold_lanes(mut acc: [f64; LANES]) -> f64 {
    let mut width = LANES / 2;
    while width > 0 {
        for l in 0..width {
            acc[l] += acc[l + width];
        }
        width /= 2;
    }
    acc[0]
}

/// Adds per-chunk partials in chunk order.
fn ordered_sum(partials: Vec<f64>) -> f64 {
    partials.into_iter().fold(0.0, |a, b| a + b)
}

/// `a · b`.
///
/// # Panics
/// If the lengths differ.
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2+fma"))]
pub fn dot(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len(), "dot of vectors of different lengths");
    let partials = a
        .par_chunks(CHUNK)
        .zip(b.par_chunks(CHUNK))
        .map(|(a, b)| lane_sum(a.len(), |i| a[i] * b[i]))
        .collect();
    ordered_sum(partials)
}

/// `‖a‖₂`.
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2+fma"))]
pub fn norm(a: &[f64]) -> f64 {
    dot(a, a).sqrt()
}

/// `dst = src`, in parallel.
pub fn copy(src: &[f64], dst: &mut [f64]) {
    dst.par_chunks_mut(CHUNK)
        .zip(src.par_chunks(CHUNK))
        .for_each(|(d, s)| d.copy_from_slice(s));
}

/// `v = 0`, in parallel.
pub fn zero(v: &mut [f64]) {
    v.par_chunks_mut(CHUNK).for_each(|c| c.fill(0.0));
}

/// `y += alpha · x`.
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2+fma"))]
pub fn axpy(alpha: f64, x: &[f64], y: &mut [f64]) {
    y.par_chunks_mut(CHUNK)
        .zip(x.par_chunks(CHUNK))
        .for_each(|(y, x)| {
            for (y, x) in y.iter_mut().zip(x) {
                *y += alpha * x;
            }
        });
}

/// The conjugate-gradient update `x += α p`, `r −= α q`, returning `r · r` (one pass over four vectors).
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2+fma"))]
pub fn cg_update(alpha: f64, p: &[f64], q: &[f64], x: &mut [f64], r: &mut [f64]) -> f64 {
    let partials = x
        .par_chunks_mut(CHUNK)
        .zip(r.par_chunks_mut(CHUNK))
        .zip(p.par_chunks(CHUNK).zip(q.par_chunks(CHUNK)))
        .map(|((x, r), (p, q))| {
            for (x, p) in x.iter_mut().zip(p) {
                *x += alpha * p;
            }
            for (r, q) in r.iter_mut().zip(q) {
                *r -= alpha * q;
            }
            lane_sum(r.len(), |i| r[i] * r[i])
        })
        .collect();
    ordered_sum(partials)
}

/// The search-direction update `p = z + β p`.
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2+fma"))]
pub fn xpby(z: &[f64], beta: f64, p: &mut [f64]) {
    p.par_chunks_mut(CHUNK)
        .zip(z.par_chunks(CHUNK))
        .for_each(|(p, z)| {
            for (p, z) in p.iter_mut().zip(z) {
                *p = z + beta * *p;
            }
        });
}

/// Index of the first NaN or infinite entry, if any.
pub fn first_non_finite(v: &[f64]) -> Option<usize> {
    let bad: Vec<Option<usize>> = v
        .par_chunks(CHUNK)
        .enumerate()
        .map(|(c, s)| s.iter().position(|x| !x.is_finite()).map(|i| c * CHUNK + i))
        .collect();
    bad.into_iter().flatten().next()
}
