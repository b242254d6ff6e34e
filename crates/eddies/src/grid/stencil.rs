//! Finite-difference stencils on cell-centred and staggered grids: gradient, divergence, curl, Laplacian.
//!
//! Each stencil is written once for one cell and run over the grid with [`Grid::par_for_each_mut`], so every
//! operator is parallel and bit-identical for any thread count. Allocating versions return a new grid; the
//! `_into` versions write into a caller-owned grid, for solvers that reuse their buffers across steps.
//!
//! Derivatives of cell-centred fields use the second-order central difference `(f[i+1] − f[i−1]) / 2h` inside
//! and the first-order one-sided difference `(f[1] − f[0]) / h` (resp. `(f[n−1] − f[n−2]) / h`) in the first
//! and last cell of an axis, so they need no boundary condition. Stencils that do reach outside the grid (the
//! Laplacian, the gradient onto faces) take a [`BoundaryCondition`] that fixes the ghost values.

use super::cell::Grid;
use super::mac::MacGrid;
use super::real::Real;

/// How a stencil fills the ghost cell just outside the grid, next to boundary cell `f_b`.
///
/// Both rules are the usual first-order ghost-cell treatments of a pressure-type unknown (Bridson, ch. 5;
/// McAdams et al. 2010, §3): the boundary lies at the face between the last cell and its ghost.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BoundaryCondition {
    /// Ghost value `0`: a homogeneous Dirichlet condition at the ghost cell's centre, half a cell outside the
    /// domain (the free-surface "p = 0 in air cells" rule).
    DirichletZero,
    /// Ghost value `f_b` (clamp): a homogeneous Neumann condition, zero normal derivative across the boundary
    /// face (the solid-wall rule, no flux through the wall).
    NeumannZero,
}

impl BoundaryCondition {
    /// The ghost value next to a boundary cell holding `boundary`.
    #[inline]
    pub fn ghost<T: Real>(self, boundary: T) -> T {
        match self {
            BoundaryCondition::DirichletZero => T::ZERO,
            BoundaryCondition::NeumannZero => boundary,
        }
    }
}

/// `∂f/∂x_k` at cell `idx` (coords `c`) of the component `comp` of a field: central inside, one-sided in the
/// first and last cell of the axis, zero on an axis of a single cell.
#[inline]
fn partial<V: Copy, T: Real, const D: usize>(
    g: &Grid<V, D>,
    comp: impl Fn(V) -> T,
    idx: usize,
    c: &[usize; D],
    k: usize,
    stride: usize,
    inv_h: T,
) -> T {
    let n = g.dims[k];
    if n < 2 {
        T::ZERO
    } else if c[k] == 0 {
        (comp(g.data[idx + stride]) - comp(g.data[idx])) * inv_h
    } else if c[k] + 1 == n {
        (comp(g.data[idx]) - comp(g.data[idx - stride])) * inv_h
    } else {
        (comp(g.data[idx + stride]) - comp(g.data[idx - stride])) * (T::from_f64(0.5) * inv_h)
    }
}

/// Sets `out`'s layout to `f`'s after checking that their dims agree.
fn adopt_layout<T, U, const D: usize>(out: &mut Grid<U, D>, f: &Grid<T, D>, what: &str) {
    assert_eq!(
        out.dims, f.dims,
        "{what}: output dims differ from input dims"
    );
    out.origin = f.origin;
    out.spacing = f.spacing;
}

/// Gradient `∇f` of a cell-centred scalar at cell centres (units of `f` per metre): second-order central
/// differences inside, first-order one-sided differences in boundary cells.
pub fn gradient<T: Real, const D: usize>(f: &Grid<T, D>) -> Grid<[T; D], D> {
    let mut out = f.same_shape([T::ZERO; D]);
    gradient_into(f, &mut out);
    out
}

/// [`gradient`] into an existing grid.
///
/// # Panics
/// If `out.dims != f.dims`.
pub fn gradient_into<T: Real, const D: usize>(f: &Grid<T, D>, out: &mut Grid<[T; D], D>) {
    adopt_layout(out, f, "gradient");
    let strides = f.strides();
    let inv_h = T::from_f64(1.0 / f.spacing);
    out.par_for_each_mut(|i, c, g| {
        *g = std::array::from_fn(|k| partial(f, |v| v, i, &c, k, strides[k], inv_h));
    });
}

/// Gradient of a cell-centred scalar onto the faces of a staggered grid: `(f[c] − f[c − e_k]) / h` on face `c`
/// of component `k`, a second-order central difference at the face centre. Boundary faces use the ghost value
/// of `bc`, so `NeumannZero` gives zero there.
///
/// The divergence of this gradient ([`MacGrid::divergence`]) is exactly the [`laplacian`] with the same `bc`,
/// the pair that a pressure projection needs to be consistent (Bridson, ch. 5).
pub fn gradient_to_faces<const D: usize>(f: &Grid<f64, D>, bc: BoundaryCondition) -> MacGrid<D> {
    let mut out = MacGrid::new(f.dims, f.origin, f.spacing);
    gradient_to_faces_into(f, bc, &mut out);
    out
}

/// [`gradient_to_faces`] into an existing staggered grid.
///
/// # Panics
/// If `out.dims != f.dims`.
pub fn gradient_to_faces_into<const D: usize>(
    f: &Grid<f64, D>,
    bc: BoundaryCondition,
    out: &mut MacGrid<D>,
) {
    assert_eq!(
        out.dims, f.dims,
        "gradient_to_faces: output dims differ from input dims"
    );
    out.origin = f.origin;
    out.spacing = f.spacing;
    let inv_h = 1.0 / f.spacing;
    let strides = f.strides();
    for k in 0..D {
        let n = f.dims[k];
        out.u[k].origin = MacGrid::<D>::face_origin(f.origin, f.spacing, k);
        out.u[k].spacing = f.spacing;
        out.u[k].par_for_each_mut(|_, c, g| {
            let mut cell = c;
            cell[k] = c[k].min(n - 1);
            let i = f.index(cell);
            let (below, above) = if c[k] == 0 {
                (bc.ghost(f.data[i]), f.data[i])
            } else if c[k] == n {
                (f.data[i], bc.ghost(f.data[i]))
            } else {
                (f.data[i - strides[k]], f.data[i])
            };
            *g = (above - below) * inv_h;
        });
    }
}

/// Divergence `∇·v` of a cell-centred vector field (1/s for a velocity in m/s): the sum of the central (inside)
/// or one-sided (boundary) differences of each component along its own axis.
///
/// For a staggered field use [`MacGrid::divergence`].
pub fn divergence<T: Real, const D: usize>(v: &Grid<[T; D], D>) -> Grid<T, D> {
    let mut out = v.same_shape(T::ZERO);
    divergence_into(v, &mut out);
    out
}

/// [`divergence`] into an existing grid.
///
/// # Panics
/// If `out.dims != v.dims`.
pub fn divergence_into<T: Real, const D: usize>(v: &Grid<[T; D], D>, out: &mut Grid<T, D>) {
    adopt_layout(out, v, "divergence");
    let strides = v.strides();
    let inv_h = T::from_f64(1.0 / v.spacing);
    out.par_for_each_mut(|i, c, d| {
        let mut sum = T::ZERO;
        for k in 0..D {
            sum += partial(v, |x| x[k], i, &c, k, strides[k], inv_h);
        }
        *d = sum;
    });
}

/// Laplacian `∇²f` of a cell-centred scalar (units of `f` per m²): the second-order 5-point (2D) or 7-point
/// (3D) stencil `Σ_k (f[c + e_k] − 2 f[c] + f[c − e_k]) / h²`, with ghost values from `bc` outside the grid.
pub fn laplacian<T: Real, const D: usize>(f: &Grid<T, D>, bc: BoundaryCondition) -> Grid<T, D> {
    let mut out = f.same_shape(T::ZERO);
    laplacian_into(f, bc, &mut out);
    out
}

/// [`laplacian`] into an existing grid.
///
/// # Panics
/// If `out.dims != f.dims`.
pub fn laplacian_into<T: Real, const D: usize>(
    f: &Grid<T, D>,
    bc: BoundaryCondition,
    out: &mut Grid<T, D>,
) {
    adopt_layout(out, f, "laplacian");
    let strides = f.strides();
    let inv_h2 = T::from_f64(1.0 / (f.spacing * f.spacing));
    let two = T::from_f64(2.0);
    out.par_for_each_mut(|i, c, l| {
        let center = f.data[i];
        let mut sum = T::ZERO;
        for k in 0..D {
            let s = strides[k];
            let below = if c[k] > 0 {
                f.data[i - s]
            } else {
                bc.ghost(center)
            };
            let above = if c[k] + 1 < f.dims[k] {
                f.data[i + s]
            } else {
                bc.ghost(center)
            };
            sum += above - two * center + below;
        }
        *l = sum * inv_h2;
    });
}

/// Curl `∇×v = (∂_y v_z − ∂_z v_y, ∂_z v_x − ∂_x v_z, ∂_x v_y − ∂_y v_x)` of a cell-centred 3D vector field
/// (1/s for a velocity in m/s), with central differences inside and one-sided ones in boundary cells.
pub fn curl3<T: Real>(v: &Grid<[T; 3], 3>) -> Grid<[T; 3], 3> {
    let mut out = v.same_shape([T::ZERO; 3]);
    curl3_into(v, &mut out);
    out
}

/// [`curl3`] into an existing grid.
///
/// # Panics
/// If `out.dims != v.dims`.
pub fn curl3_into<T: Real>(v: &Grid<[T; 3], 3>, out: &mut Grid<[T; 3], 3>) {
    adopt_layout(out, v, "curl3");
    let s = v.strides();
    let inv_h = T::from_f64(1.0 / v.spacing);
    out.par_for_each_mut(|i, c, w| {
        // d(a, k) = ∂v_a/∂x_k
        let d = |a: usize, k: usize| partial(v, |x| x[a], i, &c, k, s[k], inv_h);
        *w = [d(2, 1) - d(1, 2), d(0, 2) - d(2, 0), d(1, 0) - d(0, 1)];
    });
}

/// Scalar curl `∂v/∂x − ∂u/∂y` of a cell-centred 2D vector field `(u, v)` (the out-of-plane vorticity, 1/s for
/// a velocity in m/s), with central differences inside and one-sided ones in boundary cells.
pub fn curl2<T: Real>(v: &Grid<[T; 2], 2>) -> Grid<T, 2> {
    let mut out = v.same_shape(T::ZERO);
    curl2_into(v, &mut out);
    out
}

/// [`curl2`] into an existing grid.
///
/// # Panics
/// If `out.dims != v.dims`.
pub fn curl2_into<T: Real>(v: &Grid<[T; 2], 2>, out: &mut Grid<T, 2>) {
    adopt_layout(out, v, "curl2");
    let s = v.strides();
    let inv_h = T::from_f64(1.0 / v.spacing);
    out.par_for_each_mut(|i, c, w| {
        *w = partial(v, |x| x[1], i, &c, 0, s[0], inv_h)
            - partial(v, |x| x[0], i, &c, 1, s[1], inv_h);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_sided_gradient_at_boundary_is_exact_for_linear() {
        let f = Grid::from_fn([4, 3], [0.0; 2], 0.5, |_, c| {
            2.0 * c[0] as f64 - 3.0 * c[1] as f64
        });
        let g = gradient(&f);
        for v in &g.data {
            assert!(
                (v[0] - 4.0).abs() < 1e-12 && (v[1] + 6.0).abs() < 1e-12,
                "{v:?}"
            );
        }
    }

    #[test]
    fn boundary_conditions_set_ghosts() {
        let f = Grid::from_data([3], [0.0], 1.0, vec![1.0f64, 1.0, 1.0]);
        let dir = laplacian(&f, BoundaryCondition::DirichletZero);
        let neu = laplacian(&f, BoundaryCondition::NeumannZero);
        assert_eq!(dir.data, vec![-1.0, 0.0, -1.0]);
        assert_eq!(neu.data, vec![0.0, 0.0, 0.0]);
        let faces = gradient_to_faces(&f, BoundaryCondition::DirichletZero);
        assert_eq!(faces.u[0].data, vec![1.0, 0.0, 0.0, -1.0]);
    }
}
