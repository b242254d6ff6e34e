//! The multigrid smoothers: red-black Gauss–Seidel (in place, in slabs of planes so that its result does not
//! depend on the thread count) and weighted Jacobi, and the symmetric Gauss–Seidel solve of the coarsest
//! level.

use super::Smoother;
use crate::grid::Real;
use crate::linsolve::poisson::{Layout, PoissonOperator};
use multiversion::multiversion;
use rayon::prelude::*;

/// `sweeps` smoothing sweeps of `A x = b` on the unknowns. Red-black sweeps run red then black, or black then
/// red when `reverse` (the adjoint order, after the correction), in place; weighted Jacobi uses `t` as the
/// ping-pong buffer.
#[allow(clippy::too_many_arguments)]
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2+fma"))]
pub(super) fn smooth<T: Real, const D: usize>(
    op: &PoissonOperator<D>,
    inv: &[T],
    b: &[T],
    x: &mut [T],
    t: &mut [T],
    smoother: Smoother,
    sweeps: usize,
    reverse: bool,
) {
    match smoother {
        Smoother::RedBlackGaussSeidel => {
            let first = if reverse { Colour::Black } else { Colour::Red };
            for _ in 0..sweeps {
                red_black_sweep(op, inv, b, x, first);
            }
        }
        Smoother::WeightedJacobi { weight } => {
            for _ in 0..sweeps {
                jacobi(op, inv, b, x, t, weight);
                jacobi(op, inv, b, t, x, weight);
            }
        }
    }
}

/// One weighted Jacobi relaxation, out of place: `out = x` with every unknown replaced by
/// `(1 − ω) xᵢ + ω (h² bᵢ + Σⱼ xⱼ) / nᵢ`, with `1/nᵢ` from `inv` (0 outside the unknowns, whose values are
/// kept).
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2+fma"))]
fn jacobi<T: Real, const D: usize>(
    op: &PoissonOperator<D>,
    inv: &[T],
    b: &[T],
    x: &[T],
    out: &mut [T],
    weight: f64,
) {
    let l = op.layout();
    let n = l.dims[0];
    let rl = l.row_len();
    let h2 = T::from_f64(1.0 / op.scale());
    let w = T::from_f64(weight);
    l.for_rows(out, |row, o| {
        let start_row = row.index * rl;
        if !row.interior {
            o.copy_from_slice(&x[start_row..start_row + rl]);
            return;
        }
        o[0] = x[start_row];
        o[n + 1] = x[start_row + n + 1];
        let start = start_row + 1;
        let oi = &mut o[1..=n];
        crate::linsolve::poisson::neighbour_sum(x, start, &l.strides, oi);
        let (inv, xc, bc) = (
            &inv[start..start + n],
            &x[start..start + n],
            &b[start..start + n],
        );
        for i in 0..n {
            let update = inv[i] * (h2 * bc[i] + oi[i]);
            oi[i] = if inv[i] > T::ZERO {
                xc[i] + w * (update - xc[i])
            } else {
                xc[i]
            };
        }
    });
}

/// The colours of red-black Gauss–Seidel: a cell is red when the sum of its coordinates is even. A cell's
/// neighbours all have the other colour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Colour {
    Red,
    Black,
}

impl Colour {
    pub(super) fn other(self) -> Self {
        match self {
            Colour::Red => Colour::Black,
            Colour::Black => Colour::Red,
        }
    }
}

/// One red-black Gauss–Seidel sweep in place: the cells of colour `first`, then those of the other, each set to
/// `(h² bᵢ + Σⱼ xⱼ) / nᵢ` (unknowns only), with `1/nᵢ` from `inv`.
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2+fma"))]
pub(super) fn red_black_sweep<T: Real, const D: usize>(
    op: &PoissonOperator<D>,
    inv: &[T],
    b: &[T],
    x: &mut [T],
    first: Colour,
) {
    let l = op.layout();
    let plane_len = l.strides[D - 1];
    let h2 = T::from_f64(1.0 / op.scale());
    let shared = crate::par::SharedSlice::new(x);
    let every_other = every_other(l);
    sweep_planes(l, first, |colour, p, sum: &mut Vec<T>| {
        let base = (p - 1) * plane_len;
        let planes = base..base + 3 * plane_len;
        // SAFETY: `sweep_planes` makes this task the only one touching these planes now.
        let view = unsafe { shared.slice_mut(planes.clone()) };
        relax_plane(
            l,
            inv,
            &b[planes],
            h2,
            &every_other,
            view,
            base,
            p,
            colour,
            sum,
        );
    });
}

/// The first red-black sweep of a V-cycle from a zero guess, with the right-hand side given in f64: sets
/// `b = r` (converted to `T`), `x = 0`, then sweeps as [`red_black_sweep`], all in the one pass over memory
/// that the sweep alone takes. With the other colour still zero, a cell of colour `first` is set to
/// `h² bᵢ / nᵢ` without reading its neighbours; the result has the bits of the conversion, the fill and the
/// sweep done one after another.
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2+fma"))]
pub(super) fn red_black_sweep_from_zero<T: Real, const D: usize>(
    op: &PoissonOperator<D>,
    inv: &[T],
    r: &[f64],
    b: &mut [T],
    x: &mut [T],
    first: Colour,
) {
    let l = op.layout();
    let planes = l.dims[D - 1];
    let plane_len = l.strides[D - 1];
    let h2 = T::from_f64(1.0 / op.scale());
    // The halo planes, which no sweep writes.
    for p in [0, planes + 1] {
        let range = p * plane_len..(p + 1) * plane_len;
        for (b, &r) in b[range.clone()].iter_mut().zip(&r[range.clone()]) {
            *b = T::from_f64(r);
        }
        x[range].fill(T::ZERO);
    }
    let (sb, sx) = (
        crate::par::SharedSlice::new(b),
        crate::par::SharedSlice::new(x),
    );
    let every_other = every_other(l);
    sweep_planes(l, first, |colour, p, sum: &mut Vec<T>| {
        let base = (p - 1) * plane_len;
        let planes = base..base + 3 * plane_len;
        // SAFETY: as in `red_black_sweep`; `b` is written by plane, like `x`, and read only after its plane's
        // first colour (which writes it), by the planes' second colour.
        let (bv, xv) = unsafe { (sb.slice_mut(planes.clone()), sx.slice_mut(planes)) };
        if colour == first {
            start_plane(l, inv, r, h2, &every_other, bv, xv, base, p, colour);
        } else {
            relax_plane(l, inv, bv, h2, &every_other, xv, base, p, colour, sum);
        }
    });
}

/// From index `shift`, true at every other entry: a row's cells of one colour (one more than a row).
fn every_other<const D: usize>(l: &Layout<D>) -> Vec<bool> {
    (0..=l.dims[0]).map(|i| i % 2 == 0).collect()
}

/// Planes (cells along the slowest axis) per task of a [`sweep_planes`], at least: below twice this a level
/// is swept by one task. At least 6, so that the planes around two cuts never meet.
const SWEEP_SLAB: usize = 8;
const _: () = assert!(SWEEP_SLAB >= 6);

/// Runs `plane(colour, p, scratch)` on every interior plane `p` (padded coordinate along the slowest axis)
/// for colour `first` and then its other, as one red-black sweep in place needs: `plane(c, p, _)` may read
/// and write planes p − 1 ..= p + 1, and the second colour of plane q runs only once the first is done on
/// q − 1, q and q + 1.
///
/// The two half-sweeps share one pass over memory: along the slowest axis, plane `p` gets its first colour
/// just before plane `p − 1` gets its second, which then reads first-colour values that are all final. Every
/// cell is computed from the same values as by two separate half-sweeps, so the result does not depend on how
/// the planes are split among tasks. The planes are cut into slabs: each slab does its inner planes in one
/// task, then the planes around each cut between slabs, whose updates need both slabs' first colour, are done
/// (the cuts in parallel). A task's planes and the planes it reads are never another task's at the same time.
fn sweep_planes<T: Send, const D: usize>(
    l: &Layout<D>,
    first: Colour,
    plane: impl Fn(Colour, usize, &mut Vec<T>) + Sync,
) {
    let planes = l.dims[D - 1];
    let second = first.other();
    // Does `first` on the planes of `firsts` and `second` on those of `seconds` in an order in which each
    // update reads final values: `second` on plane q once `first` is done on q − 1, q and q + 1 (or they are
    // halo planes, or another task did them earlier).
    let run = |firsts: std::ops::Range<usize>, seconds: std::ops::Range<usize>| {
        let mut sum = Vec::new();
        for p in firsts.clone() {
            plane(first, p, &mut sum);
            if p > 1 && seconds.contains(&(p - 1)) {
                plane(second, p - 1, &mut sum);
            }
        }
        for q in seconds.start.max(firsts.end.saturating_sub(1))..seconds.end {
            plane(second, q, &mut sum);
        }
    };
    // Several slabs per thread; the result does not depend on their width.
    let threads = rayon::current_num_threads();
    let slab = (planes / (4 * threads)).max(SWEEP_SLAB);
    let slabs = planes / slab;
    if slabs < 2 {
        run(1..planes + 1, 1..planes + 1);
        return;
    }
    // Slab k holds planes cut(k) .. cut(k + 1); the last takes the remainder.
    let cut = |k: usize| if k == slabs { planes + 1 } else { 1 + k * slab };
    // Inner planes: `first` on all but the slab's outer planes at a cut, `second` on all but two planes on either
    // side of a cut. A slab reads one plane beyond those it writes, so slabs never touch the same plane.
    (0..slabs).into_par_iter().for_each(|k| {
        let (lo, hi) = (cut(k), cut(k + 1));
        let (f_lo, s_lo) = if k == 0 { (lo, lo) } else { (lo + 1, lo + 2) };
        let (f_hi, s_hi) = if k + 1 == slabs {
            (hi, hi)
        } else {
            (hi - 1, hi - 2)
        };
        run(f_lo..f_hi, s_lo..s_hi);
    });
    // Around each cut c: `first` on c − 1 and c, then `second` on c − 2 ..= c + 1, reading c − 3 ..= c + 2; cuts
    // are at least SWEEP_SLAB planes apart, so these never meet.
    (1..slabs).into_par_iter().for_each(|k| {
        let c = cut(k);
        run(c - 1..c + 1, c - 2..c + 2);
    });
}

/// [`red_black_sweep_from_zero`]'s first colour on plane `p`: `b = r` and `x = 0` on the whole plane, then
/// `x = h² bᵢ / nᵢ` on its unknowns of `colour`. `b` and `x` are views of planes p − 1 ..= p + 1 from padded
/// index `base`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn start_plane<T: Real, const D: usize>(
    l: &Layout<D>,
    inv: &[T],
    r: &[f64],
    h2: T,
    every_other: &[bool],
    b: &mut [T],
    x: &mut [T],
    base: usize,
    p: usize,
    colour: Colour,
) {
    let n = l.dims[0];
    let rl = l.row_len();
    for row in l.plane_rows(p) {
        let local = row.index * rl - base;
        let (bs, xs) = (&mut b[local..local + rl], &mut x[local..local + rl]);
        for (b, &r) in bs.iter_mut().zip(&r[row.index * rl..(row.index + 1) * rl]) {
            *b = T::from_f64(r);
        }
        xs.fill(T::ZERO);
        if !row.interior {
            continue;
        }
        let shift = row_shift(row.coords, colour);
        let start = row.index * rl + 1;
        let (inv, bc, xc) = (&inv[start..start + n], &bs[1..=n], &mut xs[1..=n]);
        let mask = &every_other[shift..shift + n];
        for i in 0..n {
            // The neighbours are all of the other colour, still zero: their sum is +0.
            let update = inv[i] * (h2 * bc[i] + T::ZERO);
            if mask[i] && inv[i] > T::ZERO {
                xc[i] = update;
            }
        }
    }
}

/// Where a row's cells of `colour` start: the parity of the coordinate sum of its first interior cell
/// (padded coordinates `c` are one more than the cell's).
#[inline(always)]
fn row_shift<const D: usize>(c: [usize; D], colour: Colour) -> usize {
    let row_parity = (1..D).map(|k| c[k] - 1).sum::<usize>() & 1;
    match colour {
        Colour::Red => row_parity,
        Colour::Black => 1 - row_parity,
    }
}

/// [`red_black_sweep`]'s update of the cells of `colour` in plane `p` (padded coordinate along the slowest
/// axis). `b` and `view` (of `x`) hold planes p − 1 ..= p + 1 and start at padded index `base`; `every_other`
/// is true at even indices (one more than a row); `sum` is scratch.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn relax_plane<T: Real, const D: usize>(
    l: &Layout<D>,
    inv: &[T],
    b: &[T],
    h2: T,
    every_other: &[bool],
    view: &mut [T],
    base: usize,
    p: usize,
    colour: Colour,
    sum: &mut Vec<T>,
) {
    let n = l.dims[0];
    let rl = l.row_len();
    sum.resize(n, T::ZERO);
    for row in l.plane_rows(p) {
        if !row.interior {
            continue;
        }
        let start = row.index * rl + 1;
        let local = start - base;
        crate::linsolve::poisson::neighbour_sum(view, local, &l.strides, sum);
        // The row's cells of `colour` are every other one from `shift`.
        let shift = row_shift(row.coords, colour);
        let (inv, bc, xc) = (
            &inv[start..start + n],
            &b[local..local + n],
            &mut view[local..local + n],
        );
        // The whole row in one vectorised loop; the other colour's cells are stored back unchanged. The update
        // is applied as the correction `xᵢ + (x̂ᵢ − xᵢ)`, Jacobi's weighted form with ω = 1, so that both
        // smoothers round alike.
        let mask = &every_other[shift..shift + n];
        for i in 0..n {
            let update = inv[i] * (h2 * bc[i] + sum[i]);
            xc[i] = if mask[i] && inv[i] > T::ZERO {
                xc[i] + (update - xc[i])
            } else {
                xc[i]
            };
        }
    }
}

/// Solves the coarsest level by symmetric red-black Gauss–Seidel sweeps (its few cells make that exact
/// enough, and a fixed count keeps the V-cycle a fixed linear operator).
pub(super) fn solve_coarsest<T: Real, const D: usize>(
    op: &PoissonOperator<D>,
    inv: &[T],
    b: &[T],
    x: &mut [T],
    t: &mut [T],
    sweeps: usize,
) {
    let half = sweeps.div_ceil(2);
    smooth(op, inv, b, x, t, Smoother::RedBlackGaussSeidel, half, false);
    smooth(op, inv, b, x, t, Smoother::RedBlackGaussSeidel, half, true);
    op.remove_null_space_unknowns(x);
}
