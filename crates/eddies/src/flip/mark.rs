//! Cell classification (seed 001 "Mark-Cells"; Bridson, §4.3): solid where an obstacle covers the cell
//! centre, fluid where a particle lies, air elsewhere.

use super::transfer::Bins;
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

/// Marks every cell: [`CellFlag::Solid`] where `solid_id` is set, [`CellFlag::Fluid`] where the sorted
/// particles hold at least one particle, [`CellFlag::Air`] elsewhere. `count` receives the particles per cell.
pub(crate) fn mark_cells<const D: usize>(
    bins: &Bins<D>,
    solid_id: &Grid<u16, D>,
    flags: &mut Grid<CellFlag, D>,
    count: &mut Grid<u32, D>,
) {
    count.par_for_each_mut(|_, c, n| *n = bins.cell_count(c));
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
