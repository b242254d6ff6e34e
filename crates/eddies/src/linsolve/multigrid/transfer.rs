//! The multigrid transfers between levels: multilinear prolongation, restriction by full weighting or
//! nearest (Gourlay part 20 on keeping boundary values), the restriction of boundary values for full
//! multigrid, and the extension of a coarse correction into the ghost cells around the unknowns (and its
//! transpose).

use super::hierarchy::{Ghosts, MultigridLevel};
use super::{convert, Restriction};
use crate::grid::Real;
use crate::linsolve::poisson::{residual_row, CellKind, Layout, PaddedRow, PoissonOperator};
use multiversion::multiversion;
use rayon::prelude::*;

/// `out = E x`: unknowns kept, the cells around them extended by the [`ghost_coefficients`]. In full multigrid
/// (`keep_dirichlet`) Dirichlet cells keep their boundary values. Every other cell of `x` is zero already.
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2+fma"))]
pub(super) fn extend<T: Real, const D: usize>(
    op: &PoissonOperator<D>,
    ghost: &Ghosts,
    x: &[T],
    out: &mut [T],
    keep_dirichlet: bool,
) {
    convert(x, out);
    let strides = op.layout().strides;
    for (k, (&i, &dirichlet)) in ghost.index.iter().zip(&ghost.dirichlet).enumerate() {
        if dirichlet && keep_dirichlet {
            continue;
        }
        let g = &ghost.coef[k * 2 * D..(k + 1) * 2 * D];
        let mut sum = T::ZERO;
        for (a, &s) in strides.iter().enumerate() {
            if g[2 * a] != 0.0 {
                sum += T::from_f64(g[2 * a]) * x[i - s];
            }
            if g[2 * a + 1] != 0.0 {
                sum += T::from_f64(g[2 * a + 1]) * x[i + s];
            }
        }
        out[i] = sum;
    }
}

/// `out = Eᵀ v` on the unknowns (zero elsewhere): each ghost cell's value is handed back to the unknowns it was
/// extended from, with the same coefficients (in the fixed order of the ghost list).
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2+fma"))]
fn fold<T: Real, const D: usize>(op: &PoissonOperator<D>, ghost: &Ghosts, v: &[T], out: &mut [T]) {
    let l = op.layout();
    let kind = op.kinds();
    l.for_cells(out, |i| {
        if kind[i] == CellKind::Unknown {
            v[i]
        } else {
            T::ZERO
        }
    });
    for (k, &i) in ghost.index.iter().enumerate() {
        let g = &ghost.coef[k * 2 * D..(k + 1) * 2 * D];
        let value = v[i];
        for (a, &s) in l.strides.iter().enumerate() {
            if g[2 * a] != 0.0 {
                out[i - s] += T::from_f64(g[2 * a]) * value;
            }
            if g[2 * a + 1] != 0.0 {
                out[i + s] += T::from_f64(g[2 * a + 1]) * value;
            }
        }
    }
}

/// What [`restrict`] restricts.
#[derive(Clone, Copy)]
pub(super) enum Fine<'a, T> {
    /// A fine field, zero outside the unknowns.
    Field(&'a [T]),
    /// The fine level's residual `b − A x`, computed a row at a time as it is restricted (never stored): the
    /// same values as [`residual`] gives, without the pass that writes them and the one that reads them back.
    Residual { b: &'a [T], x: &'a [T] },
}

/// Restricts `r` to the unknowns of `coarse` (its `b`): [`restrict`], then [`fold`].
pub(super) fn restrict_to<T: Real, const D: usize>(
    fine: &PoissonOperator<D>,
    r: Fine<'_, T>,
    coarse: &mut MultigridLevel<D, T>,
    how: Restriction,
) {
    restrict(fine, r, &coarse.op, &mut coarse.half, &mut coarse.t, how);
    fold(&coarse.op, &coarse.ghost, &coarse.t, &mut coarse.b);
}

/// Restricts the fine field `r` to every coarse cell: `Pᵀ r / 2^D` (full weighting). Values that land
/// outside the coarse unknowns are handed back to them by [`fold`].
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2+fma"))]
pub(super) fn restrict<T: Real, const D: usize>(
    fine: &PoissonOperator<D>,
    r: Fine<'_, T>,
    coarse: &PoissonOperator<D>,
    half: &mut [T],
    out: &mut [T],
    how: Restriction,
) {
    let (fl, cl) = (fine.layout(), coarse.layout());
    let (frl, crl) = (fl.row_len(), cl.row_len());
    let fine_rows = fl.rows();
    // Every coarse cell, halo included (prolongation reads the halo, so its transpose writes it). A coarse cell
    // at padded coordinate c gathers the fine cells at padded coordinates 2c + offset − 1. The weights are a
    // tensor product, applied one direction at a time: x first, into `half` (coarse along x, fine across).
    let (offsets, weights): (&[isize], &[f64]) = match how {
        Restriction::FullWeighting => (&[-1, 0, 1, 2], &[0.125, 0.375, 0.375, 0.125]),
        Restriction::Nearest => (&[0, 1], &[0.5, 0.5]),
    };
    half[..fine_rows * crl]
        .par_chunks_mut(crl)
        .enumerate()
        .for_each_init(Vec::new, |scratch, (row, h)| {
            let fr = match r {
                Fine::Field(r) => &r[row * frl..(row + 1) * frl],
                Fine::Residual { b, x } => {
                    scratch.resize(frl, T::ZERO);
                    residual_row(fine, b, x, row, scratch);
                    &scratch[..]
                }
            };
            let at = |i: isize| {
                if i >= 0 && (i as usize) < frl {
                    fr[i as usize]
                } else {
                    T::ZERO
                }
            };
            let edge = |cx: usize| -> T {
                let mut v = T::ZERO;
                for (&off, &w) in offsets.iter().zip(weights) {
                    v += T::from_f64(w) * at(2 * cx as isize + off - 1);
                }
                v
            };
            let (eighth, three_eighths, one_half) =
                (T::from_f64(0.125), T::from_f64(0.375), T::from_f64(0.5));
            // Cells whose whole stencil lies in the row, without bounds tests: 2cx − 2 ≥ 0 and 2cx + 1 < frl.
            let inner = 1..((frl - 1) / 2).min(crl);
            for cx in (0..inner.start).chain(inner.end..crl) {
                h[cx] = edge(cx);
            }
            let pairs = &fr[..2 * inner.end];
            match how {
                // Pair by pair (fine cells 2cx − 2 ..= 2cx + 1 are pairs cx − 1 and cx), so that the loops
                // vectorise.
                Restriction::FullWeighting => {
                    let (lo, hi) = (pairs.chunks_exact(2), pairs[2..].chunks_exact(2));
                    for ((h, p), q) in h[inner.clone()].iter_mut().zip(lo).zip(hi) {
                        *h = eighth * (p[0] + q[1]) + three_eighths * (p[1] + q[0]);
                    }
                }
                Restriction::Nearest => {
                    let (lo, hi) = (pairs.chunks_exact(2), pairs[2..].chunks_exact(2));
                    for ((h, p), q) in h[inner.clone()].iter_mut().zip(lo).zip(hi) {
                        *h = one_half * (p[1] + q[0]);
                    }
                }
            }
        });
    let half = &half[..fine_rows * crl];
    cl.for_rows(out, |row, o| {
        o.fill(T::ZERO);
        let c = row.coords;
        let combos = offsets.len().pow(D as u32 - 1);
        for combo in 0..combos {
            let mut w = 1.0;
            let mut frow = 0usize;
            let mut stride = 1usize;
            let mut ok = true;
            let mut rest = combo;
            for (&ck, &fp) in c.iter().zip(&fl.padded).skip(1) {
                let pick = rest % offsets.len();
                rest /= offsets.len();
                let fc = 2 * ck as isize + offsets[pick] - 1;
                ok &= fc >= 0 && (fc as usize) < fp;
                w *= weights[pick];
                frow += fc.max(0) as usize * stride;
                stride *= fp;
            }
            if ok {
                let w = T::from_f64(w);
                for (o, &h) in o.iter_mut().zip(&half[frow * crl..(frow + 1) * crl]) {
                    *o += w * h;
                }
            }
        }
    });
}

/// Sets the Dirichlet cells of the coarse `out` to the mean of their Dirichlet children in `fine_x` (and
/// zeroes everything else): the boundary values of a coarse problem in full multigrid.
pub(super) fn restrict_boundary<T: Real, const D: usize>(
    fine: &PoissonOperator<D>,
    fine_x: &[T],
    coarse: &PoissonOperator<D>,
    out: &mut [T],
) {
    let (fl, cl) = (fine.layout(), coarse.layout());
    let (fk, ck) = (fine.kinds(), coarse.kinds());
    let crl = cl.row_len();
    cl.for_rows(out, |row, o| {
        o.fill(T::ZERO);
        if !row.interior {
            return;
        }
        for (px, o) in o.iter_mut().enumerate().take(cl.dims[0] + 1).skip(1) {
            let i = row.index * crl + px;
            if ck[i] != CellKind::Dirichlet {
                continue;
            }
            let c = cl.padded_coords(i).map(|v| v - 1);
            let (mut sum, mut n) = (0.0, 0);
            for corner in 0..1usize << D {
                let mut f = [0; D];
                let mut inside = true;
                for k in 0..D {
                    f[k] = 2 * c[k] + ((corner >> k) & 1);
                    inside &= f[k] < fl.dims[k];
                }
                if inside {
                    let j = fl.index(f);
                    if fk[j] == CellKind::Dirichlet {
                        sum += fine_x[j].to_f64();
                        n += 1;
                    }
                }
            }
            *o = T::from_f64(if n > 0 { sum / n as f64 } else { 0.0 });
        }
    });
}

/// What [`prolong`] does with the interpolated values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Prolong {
    /// Add them to the unknowns (a coarse-grid correction).
    AddCorrection,
    /// Overwrite the unknowns with them (full multigrid), and the Dirichlet cells too when `boundary_too`.
    Replace { boundary_too: bool },
}

/// Multilinear interpolation of the coarse field `xc` to the fine cells: per axis, 3/4 of the parent and 1/4
/// of the coarse neighbour on the child's side.
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2+fma"))]
pub(super) fn prolong<T: Real, const D: usize>(
    coarse: &PoissonOperator<D>,
    xc: &[T],
    fine: &PoissonOperator<D>,
    x: &mut [T],
    mode: Prolong,
) {
    let (fl, cl) = (fine.layout(), coarse.layout());
    let (fk, frl, crl) = (fine.kinds(), fl.row_len(), cl.row_len());
    fl.for_row_groups(x, |first, group| {
        let (mut blended, mut values) = (vec![T::ZERO; crl], vec![T::ZERO; frl]);
        let mut row = fl.row(first);
        for o in group.chunks_mut(frl) {
            prolong_row(
                (cl, xc),
                (fl, fk),
                row,
                o,
                (&mut blended, &mut values),
                mode,
            );
            fl.next_row(&mut row);
        }
    });
}

/// One fine row of [`prolong`]; `buffers` are a coarse row (the blend of the coarse rows around this one) and
/// a fine row (the interpolated values).
fn prolong_row<T: Real, const D: usize>(
    (cl, xc): (&Layout<D>, &[T]),
    (fl, fk): (&Layout<D>, &[CellKind]),
    row: PaddedRow<D>,
    o: &mut [T],
    buffers: (&mut [T], &mut [T]),
    mode: Prolong,
) {
    let (blended, values) = buffers;
    let (nf, frl, crl) = (fl.dims[0], fl.row_len(), cl.row_len());
    {
        if !row.interior {
            return;
        }
        let f = row.coords;
        // The 2^(D−1) coarse rows around this fine row, blended into one.
        blended.fill(T::ZERO);
        for combo in 0..1usize << (D - 1) {
            let mut w = 1.0;
            let mut crow = 0usize;
            let mut stride = 1usize;
            for (k, (&fk, &cp)) in f.iter().zip(&cl.padded).enumerate().skip(1) {
                let fi = fk - 1;
                let parent = fi / 2 + 1; // padded coarse coordinate
                let other = if fi % 2 == 0 { parent - 1 } else { parent + 1 };
                let (cc, wk) = if (combo >> (k - 1)) & 1 == 0 {
                    (parent, 0.75)
                } else {
                    (other, 0.25)
                };
                w *= wk;
                crow += cc * stride;
                stride *= cp;
            }
            let w = T::from_f64(w);
            for (bl, &v) in blended.iter_mut().zip(&xc[crow * crl..(crow + 1) * crl]) {
                *bl += w * v;
            }
        }
        // Fine cells 2k and 2k+1 (interior coordinates) share the parent k: 3/4 of it and 1/4 of the coarse
        // cell on their side (padded coarse coordinates k, k+1, k+2). Pair by pair, so that the loop vectorises.
        let (near, far) = (T::from_f64(0.75), T::from_f64(0.25));
        let mut pairs = values[..nf].chunks_exact_mut(2);
        for (pair, b) in (&mut pairs).zip(blended.windows(3)) {
            pair[0] = near * b[1] + far * b[0];
            pair[1] = near * b[1] + far * b[2];
        }
        if let [last] = pairs.into_remainder() {
            let m = nf / 2;
            *last = near * blended[m + 1] + far * blended[m];
        }
        let start = row.index * frl + 1;
        let (o, values, kinds) = (&mut o[1..=nf], &values[..nf], &fk[start..start + nf]);
        match mode {
            Prolong::AddCorrection => {
                for ((o, &v), &k) in o.iter_mut().zip(values).zip(kinds) {
                    *o += if k == CellKind::Unknown { v } else { T::ZERO };
                }
            }
            Prolong::Replace { boundary_too } => {
                for ((o, &v), &k) in o.iter_mut().zip(values).zip(kinds) {
                    if k == CellKind::Unknown || (boundary_too && k == CellKind::Dirichlet) {
                        *o = v;
                    }
                }
            }
        }
    }
}
