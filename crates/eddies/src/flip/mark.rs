//! Cell classification (seed 001 "Mark-Cells"; Bridson, §4.3): solid where an obstacle covers the cell
//! centre, fluid where a particle lies, air elsewhere.

use crate::grid::{to_dvec3, CellFlag, Grid};
use crate::shape::Shape;

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
/// least one particle (`count`, the particles per cell of the last sort, [`super::transfer::Bins::counts_into`]),
/// [`CellFlag::Air`] elsewhere.
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
pub(crate) fn fill_fraction<const D: usize>(
    weight: &[Grid<[f64; 2], D>; D],
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
    fill.par_for_each_mut(|_, c, v| {
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
                sum += g.data[j][0] / m;
            }
        }
        *v = sum * scale;
    });
}
