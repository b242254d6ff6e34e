//! The staggered (marker-and-cell) velocity grid [`MacGrid`] of Harlow and Welch (1965), as used by Bridson,
//! *Fluid Simulation for Computer Graphics*, ch. 2: component `k` of the velocity lives at the centres of the
//! cell faces normal to axis `k`.

use super::cell::Grid;

/// A staggered velocity field on a grid of `dims` cubic cells.
///
/// `u[k]` holds the velocity component along axis `k` (m/s) at the faces normal to `k`: it has one more entry
/// than there are cells along `k`. Face `c` of `u[k]` sits at `origin + c·h + ½h` along the other axes and at
/// `origin + c_k·h` along `k`, i.e. between cells `c − e_k` and `c`. Each `u[k]` is stored as an ordinary
/// [`Grid`] whose origin is shifted by `−½h` along `k`, so that its "cell centres" are the face centres and
/// [`Grid::sample`] interpolates it directly.
#[derive(Clone, Debug, PartialEq)]
pub struct MacGrid<const D: usize> {
    /// Number of cells along each axis.
    pub dims: [usize; D],
    /// Lower corner of the domain (m).
    pub origin: [f64; D],
    /// Edge length of a cell (m).
    pub spacing: f64,
    /// Face velocities per axis (m/s); `u[k].dims = dims + e_k`.
    pub u: [Grid<f64, D>; D],
}

impl<const D: usize> MacGrid<D> {
    /// Dims of the face array of component `k`: `dims` with one more along `k`.
    pub fn face_dims(dims: [usize; D], k: usize) -> [usize; D] {
        let mut d = dims;
        d[k] += 1;
        d
    }

    /// Origin (m) of the face array of component `k`: the domain origin shifted by `−½h` along `k`.
    pub fn face_origin(origin: [f64; D], spacing: f64, k: usize) -> [f64; D] {
        let mut o = origin;
        o[k] -= 0.5 * spacing;
        o
    }

    /// A zero velocity field over `dims` cells of edge `spacing` (m) from the lower corner `origin` (m).
    ///
    /// # Panics
    /// If `spacing` is not positive and finite.
    pub fn new(dims: [usize; D], origin: [f64; D], spacing: f64) -> Self {
        Self::from_fn(dims, origin, spacing, |_, _| 0.0)
    }

    /// A velocity field whose component `k` at the face centre `x` (m) is `f(k, x)` (m/s).
    ///
    /// # Panics
    /// If `spacing` is not positive and finite.
    pub fn from_fn(
        dims: [usize; D],
        origin: [f64; D],
        spacing: f64,
        f: impl Fn(usize, [f64; D]) -> f64 + Sync + Send,
    ) -> Self {
        let u = std::array::from_fn(|k| {
            let mut g = Grid::new(
                Self::face_dims(dims, k),
                Self::face_origin(origin, spacing, k),
                spacing,
                0.0,
            );
            let (o, h) = (g.origin, g.spacing);
            g.par_for_each_mut(|_, c, v| {
                *v = f(k, std::array::from_fn(|a| o[a] + (c[a] as f64 + 0.5) * h));
            });
            g
        });
        Self {
            dims,
            origin,
            spacing,
            u,
        }
    }

    /// A cell-centred grid with this grid's dims, origin and spacing, every cell set to `value`.
    pub fn cell_grid<T: Clone>(&self, value: T) -> Grid<T, D> {
        Grid::new(self.dims, self.origin, self.spacing, value)
    }

    /// Position (m) of face `c` of component `k`.
    #[inline]
    pub fn face_position(&self, k: usize, c: [usize; D]) -> [f64; D] {
        self.u[k].center_of(c)
    }

    /// Sets every face velocity to zero.
    pub fn clear(&mut self) {
        for g in &mut self.u {
            g.fill(0.0);
        }
    }

    /// Component `k` of the velocity (m/s) at `p` (m), by multilinear interpolation of its faces, clamped at
    /// the boundary (see [`Grid::sample`]).
    #[inline]
    pub fn sample_component(&self, k: usize, p: [f64; D]) -> f64 {
        self.u[k].sample(p)
    }

    /// The velocity (m/s) at `p` (m): each component interpolated from its own faces.
    #[inline]
    pub fn sample(&self, p: [f64; D]) -> [f64; D] {
        std::array::from_fn(|k| self.u[k].sample(p))
    }

    /// Velocity (m/s) at the centre of cell `c`: the mean of the two faces of each axis,
    /// `v_k = ½ (u_k[c] + u_k[c + e_k])`.
    #[inline]
    pub fn cell_velocity(&self, c: [usize; D]) -> [f64; D] {
        std::array::from_fn(|k| {
            let g = &self.u[k];
            let i = g.index(c);
            0.5 * (g.data[i] + g.data[i + g.strides()[k]])
        })
    }

    /// Cell-centred velocities (m/s) of every cell (see [`MacGrid::cell_velocity`]).
    pub fn cell_velocities(&self) -> Grid<[f64; D], D> {
        Grid::from_fn(self.dims, self.origin, self.spacing, |_, c| {
            self.cell_velocity(c)
        })
    }

    /// Discrete divergence (1/s) per cell: `∇·u ≈ Σ_k (u_k[c + e_k] − u_k[c]) / h`, the exact flux balance of
    /// the cell divided by its volume (Bridson, eq. 4.13).
    pub fn divergence(&self) -> Grid<f64, D> {
        let mut out = self.cell_grid(0.0);
        self.divergence_into(&mut out);
        out
    }

    /// [`MacGrid::divergence`] into an existing grid (its layout is set to this grid's).
    ///
    /// # Panics
    /// If `out.dims != self.dims`.
    pub fn divergence_into(&self, out: &mut Grid<f64, D>) {
        assert_eq!(out.dims, self.dims, "divergence output has the wrong dims");
        out.origin = self.origin;
        out.spacing = self.spacing;
        let inv_h = 1.0 / self.spacing;
        // Distance from face c to face c + e_k in the array of component k.
        let step: [usize; D] = std::array::from_fn(|k| self.u[k].strides()[k]);
        out.par_for_each_mut(|_, c, v| {
            let mut div = 0.0;
            for (g, s) in self.u.iter().zip(step) {
                let i = g.index(c);
                div += g.data[i + s] - g.data[i];
            }
            *v = div * inv_h;
        });
    }

    /// Largest absolute face velocity component (m/s), for CFL estimates (deterministic; NaN if any is NaN).
    pub fn max_abs(&self) -> f64 {
        self.u
            .iter()
            .map(Grid::max_abs)
            .fold(f64::NEG_INFINITY, crate::par::nan_max)
    }

    /// Calls `f(k, face coords, &mut value)` for every face of every component, in parallel (see
    /// [`Grid::par_for_each_mut`]).
    pub fn par_for_each_face_mut(&mut self, f: impl Fn(usize, [usize; D], &mut f64) + Sync + Send) {
        for (k, g) in self.u.iter_mut().enumerate() {
            g.par_for_each_mut(|_, c, v| f(k, c, v));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faces_sit_on_cell_boundaries() {
        let m = MacGrid::<2>::new([4, 3], [1.0, 2.0], 0.5);
        assert_eq!(m.u[0].dims, [5, 3]);
        assert_eq!(m.u[1].dims, [4, 4]);
        // Face (0, 0) of u_x is the left face of cell (0, 0): x = origin, y = centre of the row.
        assert_eq!(m.face_position(0, [0, 0]), [1.0, 2.25]);
        assert_eq!(m.face_position(1, [0, 0]), [1.25, 2.0]);
        assert_eq!(m.face_position(0, [4, 2]), [3.0, 3.25]);
    }

    #[test]
    fn divergence_of_uniform_expansion() {
        // u = (x, y, z) has ∇·u = 3 exactly; the flux difference is exact for linear fields.
        let m = MacGrid::<3>::from_fn([5, 4, 3], [0.0, -1.0, 2.0], 0.25, |k, x| x[k]);
        let div = m.divergence();
        assert!(div.data.iter().all(|d| (d - 3.0).abs() < 1e-12));
        let v = m.cell_velocity([2, 1, 0]);
        let x = div.center_of([2, 1, 0]);
        for k in 0..3 {
            assert!((v[k] - x[k]).abs() < 1e-14);
        }
    }
}
