//! Unit tests of the multigrid parts against their definitions: the coarse cells' kinds, prolongation and
//! restriction cell by cell, and the in-place red-black sweeps against Gauss–Seidel one cell at a time.

use super::hierarchy::{coarsen, inverse_diagonal};
use super::smooth::{red_black_sweep, red_black_sweep_from_zero, Colour};
use super::transfer::{prolong, restrict, Fine, Prolong};
use super::Restriction;
use crate::grid::Real;
use crate::linsolve::poisson::{CellKind, PoissonOperator};
use crate::linsolve::DomainBoundary;
use crate::rng::SplitMix64;

/// Red-black Gauss–Seidel by its definition, one cell at a time: every cell of `first`, then every cell of
/// the other colour, each from the current values (the neighbour sum in `neighbour_sum`'s order).
fn reference_sweep<T: Real, const D: usize>(
    op: &PoissonOperator<D>,
    inv: &[T],
    b: &[T],
    x: &mut [T],
    first: Colour,
) {
    let l = op.layout();
    let h2 = T::from_f64(1.0 / op.scale());
    for colour in [first, first.other()] {
        for i in 0..l.len() {
            let c = l.padded_coords(i);
            if (0..D).any(|k| c[k] == 0 || c[k] > l.dims[k]) || inv[i] <= T::ZERO {
                continue;
            }
            let red = c.iter().map(|&v| v - 1).sum::<usize>() % 2 == 0;
            if red != (colour == Colour::Red) {
                continue;
            }
            let mut sum = T::ZERO;
            for (k, &s) in l.strides.iter().enumerate() {
                let pair = x[i - s] + x[i + s];
                sum = if k == 0 { pair } else { sum + pair };
            }
            let update = inv[i] * (h2 * b[i] + sum);
            x[i] = x[i] + (update - x[i]);
        }
    }
}

fn check_sweep<T: Real, const D: usize>(dims: [usize; D]) {
    // Kinds drawn cell by cell (the closure runs in parallel, so each cell seeds its own draw).
    let op = PoissonOperator::new(dims, 0.1, DomainBoundary::Solid, |c| {
        let i = c.iter().fold(0, |a, &v| a * 1000 + v as u64);
        match SplitMix64::new(i).next_f64() {
            v if v < 0.1 => CellKind::Solid,
            v if v < 0.2 => CellKind::Dirichlet,
            _ => CellKind::Unknown,
        }
    })
    .expect("some unknowns");
    let inv: Vec<T> = inverse_diagonal(&op);
    let n = op.layout().len();
    let mut rng = SplitMix64::new(2);
    let b: Vec<T> = (0..n).map(|_| T::from_f64(rng.range(-0.5, 0.5))).collect();
    let x0: Vec<T> = (0..n).map(|_| T::from_f64(rng.range(-0.5, 0.5))).collect();
    for first in [Colour::Red, Colour::Black] {
        let mut want = x0.clone();
        reference_sweep(&op, &inv, &b, &mut want, first);
        reference_sweep(&op, &inv, &b, &mut want, first);
        // Thread counts give different slab widths (and one slab for one thread on few planes).
        for threads in [1, 2, 7] {
            let got = crate::par::with_threads(threads, || {
                let mut x = x0.clone();
                red_black_sweep(&op, &inv, &b, &mut x, first);
                red_black_sweep(&op, &inv, &b, &mut x, first);
                x
            });
            let same = got
                .iter()
                .zip(&want)
                .all(|(g, w)| g.to_f64().to_bits() == w.to_f64().to_bits());
            assert!(
                same,
                "{dims:?}, {first:?} first, {threads} threads: differs from the definition"
            );
        }
        // From a zero guess with the right-hand side in f64: the conversion, the zero fill and one
        // sweep by the definition. The vectors start out holding garbage, which must all be overwritten.
        let r: Vec<f64> = (0..n).map(|_| rng.range(-0.5, 0.5)).collect();
        let want_b: Vec<T> = r.iter().map(|&v| T::from_f64(v)).collect();
        let mut want_x = vec![T::ZERO; n];
        reference_sweep(&op, &inv, &want_b, &mut want_x, first);
        for threads in [1, 2, 7] {
            let (got_b, got_x) = crate::par::with_threads(threads, || {
                let (mut b, mut x) = (x0.clone(), b.clone());
                red_black_sweep_from_zero(&op, &inv, &r, &mut b, &mut x, first);
                (b, x)
            });
            let bits = |v: &[T]| v.iter().map(|x| x.to_f64().to_bits()).collect::<Vec<_>>();
            assert!(
                bits(&got_b) == bits(&want_b) && bits(&got_x) == bits(&want_x),
                "{dims:?}, {first:?} first, {threads} threads: the sweep from zero differs"
            );
        }
    }
}

/// A fine operator with random solid, Dirichlet and unknown cells, and its coarse level.
fn random_pair<const D: usize>(dims: [usize; D]) -> (PoissonOperator<D>, PoissonOperator<D>) {
    let fine = PoissonOperator::new(dims, 0.1, DomainBoundary::Solid, |c| {
        let i = c.iter().fold(0, |a, &v| a * 1000 + v as u64);
        match SplitMix64::new(i ^ 77).next_f64() {
            v if v < 0.3 => CellKind::Solid,
            v if v < 0.35 => CellKind::Dirichlet,
            _ => CellKind::Unknown,
        }
    })
    .expect("some unknowns");
    let coarse = coarsen(&fine).expect("a coarse level");
    (fine, coarse)
}

fn check_coarse_kinds<const D: usize>(dims: [usize; D]) {
    let (fine, coarse) = random_pair(dims);
    let (fl, cl) = (fine.layout(), coarse.layout());
    assert_eq!(cl.dims, dims.map(|n| n.div_ceil(2)));
    for i in 0..cl.len() {
        let c = cl.padded_coords(i);
        if (0..D).any(|k| c[k] == 0 || c[k] > cl.dims[k]) {
            continue;
        }
        // The children that exist: Dirichlet if one is, else unknown if one is, else solid.
        let children: Vec<CellKind> = (0..1usize << D)
            .filter_map(|corner| {
                let f: [usize; D] = std::array::from_fn(|k| 2 * (c[k] - 1) + ((corner >> k) & 1));
                (0..D)
                    .all(|k| f[k] < fl.dims[k])
                    .then(|| fine.kinds()[fl.index(f)])
            })
            .collect();
        let want = if children.contains(&CellKind::Dirichlet) {
            CellKind::Dirichlet
        } else if children.contains(&CellKind::Unknown) {
            CellKind::Unknown
        } else {
            CellKind::Solid
        };
        let got = coarse.kinds()[i];
        // An unknown cut off from every other cell (all its neighbours solid) becomes solid.
        let isolated = want == CellKind::Unknown
            && cl.strides.iter().all(|&s| {
                coarse.kinds()[i - s] == CellKind::Solid && coarse.kinds()[i + s] == CellKind::Solid
            });
        assert!(
            got == want || (isolated && got == CellKind::Solid),
            "{dims:?}, coarse cell {c:?}: {got:?}, children {children:?}"
        );
    }
}

/// [`prolong`] (adding the correction) and [`restrict`] against their definitions, cell by cell: the
/// tensor-product weights 3/4 and 1/4 per axis from a child's parent and the coarse cell on its side, and
/// 1/8, 3/8, 3/8, 1/8 (full weighting) or 1/2, 1/2 (nearest) per axis over the fine cells 2c − 2 ..= 2c + 1
/// (padded coordinates, those that exist). The sums are taken in another order: equal to a few roundings.
fn check_transfers<const D: usize>(dims: [usize; D]) {
    let (fine, coarse) = random_pair(dims);
    let (fl, cl) = (fine.layout(), coarse.layout());
    let mut rng = SplitMix64::new(5);
    let xc: Vec<f64> = (0..cl.len()).map(|_| rng.range(-1.0, 1.0)).collect();
    let x0: Vec<f64> = (0..fl.len()).map(|_| rng.range(-1.0, 1.0)).collect();
    let close = |got: f64, want: f64| (got - want).abs() <= 1e-14 * (1.0 + want.abs());
    let mut x = x0.clone();
    prolong(&coarse, &xc, &fine, &mut x, Prolong::AddCorrection);
    for i in 0..fl.len() {
        let c = fl.padded_coords(i);
        let interior = (0..D).all(|k| c[k] >= 1 && c[k] <= fl.dims[k]);
        let mut want = x0[i];
        if interior && fine.kinds()[i] == CellKind::Unknown {
            for combo in 0..1usize << D {
                let (mut w, mut at) = (1.0, 0);
                for (k, &ck) in c.iter().enumerate() {
                    let parent = (ck - 1) / 2 + 1;
                    let side = if (ck - 1) % 2 == 0 {
                        parent - 1
                    } else {
                        parent + 1
                    };
                    let far = (combo >> k) & 1 == 1;
                    w *= if far { 0.25 } else { 0.75 };
                    at += if far { side } else { parent } * cl.strides[k];
                }
                want += w * xc[at];
            }
        }
        assert!(
            close(x[i], want),
            "{dims:?}, prolong at {c:?}: {} vs {want}",
            x[i]
        );
    }
    let r: Vec<f64> = (0..fl.len()).map(|_| rng.range(-1.0, 1.0)).collect();
    for (how, offsets, weights) in [
        (
            Restriction::FullWeighting,
            &[-1isize, 0, 1, 2][..],
            &[0.125, 0.375, 0.375, 0.125][..],
        ),
        (Restriction::Nearest, &[0, 1][..], &[0.5, 0.5][..]),
    ] {
        let mut half = vec![0.0; fl.rows() * cl.row_len()];
        let mut out = vec![0.0; cl.len()];
        restrict(&fine, Fine::Field(&r), &coarse, &mut half, &mut out, how);
        for (i, &got) in out.iter().enumerate() {
            let c = cl.padded_coords(i);
            let mut want = 0.0;
            for combo in 0..offsets.len().pow(D as u32) {
                let (mut w, mut at, mut rest, mut inside) = (1.0, 0, combo, true);
                for (k, &ck) in c.iter().enumerate() {
                    let pick = rest % offsets.len();
                    rest /= offsets.len();
                    let f = 2 * ck as isize + offsets[pick] - 1;
                    inside &= f >= 0 && (f as usize) < fl.padded[k];
                    w *= weights[pick];
                    at += f.max(0) as usize * fl.strides[k];
                }
                if inside {
                    want += w * r[at];
                }
            }
            assert!(
                close(got, want),
                "{dims:?}, {how:?} restriction at {c:?}: {got} vs {want}"
            );
        }
    }
}

#[test]
fn prolongation_and_restriction_match_their_definitions() {
    check_transfers([9, 7, 6]);
    check_transfers([8, 5, 4]);
    check_transfers([11, 6]);
    check_transfers([10, 9]);
}

#[test]
fn coarse_cells_take_the_kind_of_their_children() {
    check_coarse_kinds([9, 7, 6]);
    check_coarse_kinds([8, 5]);
    check_coarse_kinds([3, 4, 5]);
}

#[test]
fn in_place_red_black_sweeps_are_gauss_seidel_by_definition_for_any_split() {
    // 45 and 70 planes: several slabs, cuts between them, and a last slab with the remainder.
    check_sweep::<f32, 3>([9, 7, 45]);
    check_sweep::<f64, 3>([5, 6, 45]);
    check_sweep::<f32, 2>([21, 70]);
    // Fewer planes than two slabs: one task.
    check_sweep::<f32, 3>([6, 5, 9]);
}
