//! Cell classification (fluid, air, solid) and helpers that mark cells from shapes and the domain boundary.

use glam::DVec3;

use super::cell::Grid;
use crate::par;
use crate::shape::Shape;

/// What occupies a cell, as in the marker-and-cell classification (Bridson, ch. 4).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum CellFlag {
    /// Holds fluid: its pressure is an unknown of the projection.
    Fluid,
    /// Empty (free surface side): pressure held at zero.
    #[default]
    Air,
    /// Occupied by an obstacle or the domain wall: no flow through its faces.
    Solid,
}

/// A grid of cell flags.
pub type FlagGrid<const D: usize> = Grid<CellFlag, D>;

/// A position (m) in `D ≤ 3` dimensions as a 3D point for [`Shape::sdf`]: missing coordinates are 0, so 2D
/// positions lie in the plane `z = 0`.
///
/// # Panics
/// If `D > 3`.
#[inline]
pub fn to_dvec3<const D: usize>(p: [f64; D]) -> DVec3 {
    assert!(D <= 3, "positions have at most 3 coordinates");
    DVec3::new(
        p.first().copied().unwrap_or(0.0),
        p.get(1).copied().unwrap_or(0.0),
        p.get(2).copied().unwrap_or(0.0),
    )
}

impl<const D: usize> Grid<CellFlag, D> {
    /// Sets `flag` on every cell whose centre `x` (m) satisfies `inside(x)`; other cells are unchanged.
    pub fn mark_where(&mut self, flag: CellFlag, inside: impl Fn([f64; D]) -> bool + Sync + Send) {
        let (o, h) = (self.origin, self.spacing);
        self.par_for_each_mut(|_, c, f| {
            let x = std::array::from_fn(|k| o[k] + (c[k] as f64 + 0.5) * h);
            if inside(x) {
                *f = flag;
            }
        });
    }

    /// Marks solid every cell whose centre `x` (m) satisfies `inside(x)`, e.g. `|x| sdf(x) <= 0.0`.
    pub fn mark_solid(&mut self, inside: impl Fn([f64; D]) -> bool + Sync + Send) {
        self.mark_where(CellFlag::Solid, inside);
    }

    /// Sets `flag` on every cell whose centre lies inside (or on) `shape`, evaluated at `z = 0` in 2D.
    pub fn mark_shape(&mut self, flag: CellFlag, shape: &Shape) {
        self.mark_where(flag, |x| shape.sdf(to_dvec3(x)) <= 0.0);
    }

    /// Marks solid the outermost `layers` cells along every axis (the domain walls).
    pub fn mark_boundary_solid(&mut self, layers: usize) {
        let dims = self.dims;
        self.par_for_each_mut(|_, c, f| {
            if (0..D).any(|k| c[k] < layers || c[k] + layers >= dims[k]) {
                *f = CellFlag::Solid;
            }
        });
    }

    /// Number of cells holding `flag` (deterministic parallel count).
    pub fn count(&self, flag: CellFlag) -> usize {
        par::reduce(
            self.data.len(),
            par::REDUCE_CHUNK,
            0,
            |r| self.data[r].iter().filter(|&&f| f == flag).count(),
            |a, b| a + b,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boundary_layer_and_shape() {
        let mut f = FlagGrid::<2>::new([6, 5], [0.0; 2], 1.0, CellFlag::Fluid);
        f.mark_boundary_solid(1);
        assert_eq!(f.count(CellFlag::Solid), 6 * 5 - 4 * 3);
        f.mark_shape(CellFlag::Air, &Shape::box2([1.0, 1.0], [2.0, 2.0]));
        assert_eq!(f[[1, 1]], CellFlag::Air);
        assert_eq!(f.count(CellFlag::Air), 1);
    }
}
