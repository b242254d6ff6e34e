//! Cell classification (Eng "Mark-Cells"; Bridson, §4.3): solid where an obstacle covers the cell
//! centre, fluid where a particle lies, air elsewhere.

use crate::grid::{to_dvec3, CellFlag, Grid};
use crate::shape::Shape;
use multiversion::multiversion;

/// Rasterises the obstacles: `solid_id` becomes `i + 1` on cells whose centre lies inside obstacle `i` (the
/// first that does), 0 elsewhere.
pub(crate) fn mark_solids<const D: usize>(shapes: &[Shape], solid_id: &mut Grid<u16, D>) {
    let (o, h) = (solid_id.origin, solid_id.spacing);
    solid_id.par_for_each_mut(|_, c, id| {
        let x: [f64; D] = std::array::from_fn(|k| o[k] + (c[k] as f64 + 0.5) * h);
        let p = to_dvec3(x);
        *id = shapes
            .iter()
            .position(|s| s.sdf(p) <= 0.0)
            .map_or(0, |i| i as u16 + 1);
    });
}

/// Marks every cell: [`CellFlag::Solid`] where `solid_id` is set, [`CellFlag::Fluid`] where the cell holds at
/// least one particle (`count`, the particles per cell of the last sort, [`super::transfer::HalfCellBins::counts_into`]),
/// [`CellFlag::Air`] elsewhere.
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2+fma"))]
pub(crate) fn mark_cells<const D: usize>(
    solid_id: &Grid<u16, D>,
    flags: &mut Grid<CellFlag, D>,
    count: &Grid<u32, D>,
) {
    flags.par_for_each_mut(|i, _, f| {
        *f = if solid_id.data[i] != 0 {
            CellFlag::Solid
        } else if count.data[i] > 0 {
            CellFlag::Fluid
        } else {
            CellFlag::Air
        };
    });
}

/// Fill fraction of every cell (dimensionless; 1 where particles lie at the seeding density): the mean over
/// the cell's 2D faces of the particle-to-grid weight `Σ_p w_fp` over the seeding count `n0`. The tent kernel
/// of a face holds one cell's volume, so a uniform seeding of `n0` per cell gives 1 everywhere; a kernel cut
/// by a closed domain wall is divided by the part of it left inside, so that cells against a wall read 1 too.
/// This is a smoothed particle density (the count per cell jumps by 1/n0 whenever a particle crosses a cell
/// boundary; this estimate moves continuously with the particles).
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2+fma"))]
pub(crate) fn fill_fraction<const D: usize>(
    weight: &[Grid<[f32; 2], D>; D],
    closed: bool,
    n0: f64,
    fill: &mut Grid<f64, D>,
) {
    let dims = fill.dims;
    // Kernel mass inside the domain for a face at index `f` of an axis with `n` cells: `along` (integer
    // position, the face's own axis) or across (half-integer position).
    let inside = |along: bool, f: usize, n: usize| -> f64 {
        if !closed {
            1.0
        } else if along {
            if f == 0 || f == n {
                0.5
            } else {
                1.0
            }
        } else if f == 0 || f + 1 == n {
            // ∫ of the tent over the half cell beyond the wall: 1/8.
            0.875
        } else {
            1.0
        }
    };
    let scale = 1.0 / (2.0 * D as f64 * n0);
    // The sum of one cell's faces' weights, each over the kernel mass inside the domain.
    let cell = |c: [usize; D]| -> f64 {
        let mut sum = 0.0;
        for k in 0..D {
            let g = &weight[k];
            let i = g.index(c);
            for (f, j) in [(c[k], i), (c[k] + 1, i + g.strides()[k])] {
                let mut m = inside(true, f, dims[k]);
                for a in 0..D {
                    if a != k {
                        m *= inside(false, c[a], dims[a]);
                    }
                }
                sum += f64::from(g.data[j][0]) / m;
            }
        }
        sum
    };
    let n = dims[0];
    fill.par_for_rows_mut(|mut c, row| {
        // Rows away from the walls across x: inside cells 1 ..= n − 2 every kernel mass is 1 (dividing by it
        // changes no bit), so the faces' weights are added in the same order without it.
        let clear = !closed || (1..D).all(|a| c[a] > 0 && c[a] + 1 < dims[a]);
        if !clear || n < 3 {
            for (x, v) in row.iter_mut().enumerate() {
                c[0] = x;
                *v = cell(c) * scale;
            }
            return;
        }
        for x in [0, n - 1] {
            c[0] = x;
            row[x] = cell(c) * scale;
        }
        c[0] = 0;
        let faces: [[&[[f32; 2]]; 2]; D] = std::array::from_fn(|k| {
            let g = &weight[k];
            let i = g.index(c);
            let (step, len) = (g.strides()[k], n + (k == 0) as usize);
            [&g.data[i..i + len], &g.data[i + step..i + step + n]]
        });
        for x in 1..n - 1 {
            let mut sum = 0.0;
            for k in 0..D {
                // Along x the two faces are neighbours in the first slice; across, one in each.
                let (lo, hi) = if k == 0 {
                    (faces[0][0][x][0], faces[0][0][x + 1][0])
                } else {
                    (faces[k][0][x][0], faces[k][1][x][0])
                };
                sum += f64::from(lo);
                sum += f64::from(hi);
            }
            row[x] = sum * scale;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grid::MacGrid;
    use crate::rng::SplitMix64;

    /// The kernel mass inside the domain of the face of component `k` at face coordinates `f`: the product
    /// over the axes of the part of the tent left inside (1/2 for a face on a wall along its own axis, 7/8
    /// for a face centred half a cell from a wall across it).
    fn mass<const D: usize>(dims: [usize; D], k: usize, f: [usize; D]) -> f64 {
        (0..D)
            .map(|a| {
                if a == k {
                    if f[a] == 0 || f[a] == dims[a] {
                        0.5
                    } else {
                        1.0
                    }
                } else if f[a] == 0 || f[a] + 1 == dims[a] {
                    0.875
                } else {
                    1.0
                }
            })
            .product()
    }

    /// Face weights `value(k, face)`, as particle-to-grid leaves them.
    fn weights<const D: usize>(
        dims: [usize; D],
        mut value: impl FnMut(usize, [usize; D]) -> f64,
    ) -> [Grid<[f32; 2], D>; D] {
        let mac = MacGrid::<D>::new(dims, [0.0; D], 1.0);
        std::array::from_fn(|k| {
            let mut g = mac.u[k].same_shape([0.0; 2]);
            for i in 0..g.data.len() {
                let f = g.coords(i);
                g.data[i][0] = value(k, f) as f32;
            }
            g
        })
    }

    fn check<const D: usize>(dims: [usize; D]) {
        let n0 = 8.0;
        for closed in [true, false] {
            // A uniform seeding: every face holds n0 times its kernel's mass inside the domain.
            let w = weights(dims, |k, f| {
                n0 * if closed { mass(dims, k, f) } else { 1.0 }
            });
            let mut fill = Grid::new(dims, [0.0; D], 1.0, 0.0);
            fill_fraction(&w, closed, n0, &mut fill);
            // Sums of 2D terms of order 1: a few roundings.
            assert!(
                fill.data.iter().all(|&v| (v - 1.0).abs() < 1e-12),
                "{dims:?}, closed {closed}: uniform seeding must read 1"
            );
            // Random weights against the definition: the mean over the cell's faces of weight over mass.
            let mut rng = SplitMix64::new(5);
            let w = weights(dims, |_, _| rng.range(0.0, 20.0));
            fill_fraction(&w, closed, n0, &mut fill);
            for (i, &got) in fill.data.iter().enumerate() {
                let c = fill.coords(i);
                let mut sum = 0.0;
                for k in 0..D {
                    for up in [0, 1] {
                        let mut f = c;
                        f[k] += up;
                        let m = if closed { mass(dims, k, f) } else { 1.0 };
                        sum += f64::from(w[k][f][0]) / m;
                    }
                }
                let want = sum / (2.0 * D as f64 * n0);
                assert!(
                    (got - want).abs() <= 1e-14 * want,
                    "{dims:?}, closed {closed}, cell {c:?}: {got} against {want}"
                );
            }
        }
    }

    #[test]
    fn fill_fraction_is_the_mean_face_weight_over_the_kernel_inside() {
        check([7, 5]);
        check([2, 4]);
        check([6, 5, 4]);
        check([3, 3, 8]);
    }
}
