//! The cell-centred grid [`Grid`]: layout, indexing, deterministic parallel loops and multilinear sampling.

use std::ops::{Index, IndexMut};

use rayon::prelude::*;

use super::real::{Linear, Real};
use crate::par::{self, SharedSlice};

/// Cells per parallel task in grid loops. Fixed, so that the split never depends on the thread count; each cell
/// is written by exactly one task, which makes every loop over a grid deterministic.
pub const GRID_CHUNK: usize = 4096;

/// A cell-centred field on a uniform grid of cubic cells in `D` dimensions (2 or 3).
///
/// Cell `c = [i, j, k]` covers `origin + c·h ..= origin + (c + 1)·h` and its value lives at the centre
/// `origin + (c + ½)·h`. Values are stored x fastest: `index = i + nx·(j + ny·k)`.
///
/// The fields are public so that solvers can work on `data` as a flat slice; `data.len()` must equal the
/// product of `dims` (constructors ensure it, and every method assumes it).
#[derive(Clone, Debug, PartialEq)]
pub struct Grid<T, const D: usize> {
    /// Number of cells along each axis.
    pub dims: [usize; D],
    /// Lower corner of the domain (m).
    pub origin: [f64; D],
    /// Edge length of a cell (m).
    pub spacing: f64,
    /// Cell values, x fastest.
    pub data: Vec<T>,
}

/// Number of cells of a grid with `dims` cells per axis.
#[inline]
pub fn cell_count<const D: usize>(dims: [usize; D]) -> usize {
    dims.iter().product()
}

/// Distance in `data` between neighbours along each axis: `[1, nx, nx·ny]`.
#[inline]
pub fn strides_of<const D: usize>(dims: [usize; D]) -> [usize; D] {
    let mut s = [1; D];
    for k in 1..D {
        s[k] = s[k - 1] * dims[k - 1];
    }
    s
}

/// Integer coordinates of the linear index `idx` in a grid of `dims` cells.
#[inline]
pub fn coords_of<const D: usize>(dims: [usize; D], mut idx: usize) -> [usize; D] {
    let mut c = [0; D];
    for k in 0..D {
        c[k] = idx % dims[k];
        idx /= dims[k];
    }
    c
}

/// Steps `c` to the next cell in storage order (x fastest).
#[inline]
pub(crate) fn advance<const D: usize>(c: &mut [usize; D], dims: &[usize; D]) {
    for k in 0..D {
        c[k] += 1;
        if c[k] < dims[k] {
            return;
        }
        c[k] = 0;
    }
}

impl<T, const D: usize> Grid<T, D> {
    /// A grid of `dims` cells of edge `spacing` (m) from the lower corner `origin` (m), every cell set to
    /// `value`.
    ///
    /// # Panics
    /// If `spacing` is not positive and finite.
    pub fn new(dims: [usize; D], origin: [f64; D], spacing: f64, value: T) -> Self
    where
        T: Clone,
    {
        Self::from_data(dims, origin, spacing, vec![value; cell_count(dims)])
    }

    /// A grid over existing values (x fastest).
    ///
    /// # Panics
    /// If `data.len()` is not the product of `dims`, or `spacing` is not positive and finite.
    pub fn from_data(dims: [usize; D], origin: [f64; D], spacing: f64, data: Vec<T>) -> Self {
        assert!(
            spacing > 0.0 && spacing.is_finite(),
            "grid spacing must be positive and finite, got {spacing}"
        );
        assert_eq!(
            data.len(),
            cell_count(dims),
            "grid data length does not match dims {dims:?}"
        );
        Self {
            dims,
            origin,
            spacing,
            data,
        }
    }

    /// A grid whose cell values are `f(index, coords)`, evaluated in parallel.
    ///
    /// # Panics
    /// If `spacing` is not positive and finite.
    pub fn from_fn(
        dims: [usize; D],
        origin: [f64; D],
        spacing: f64,
        f: impl Fn(usize, [usize; D]) -> T + Sync + Send,
    ) -> Self
    where
        T: Send,
    {
        let n = cell_count(dims);
        let data: Vec<T> = (0..par::chunk_count(n, GRID_CHUNK))
            .into_par_iter()
            .flat_map_iter(|ch| {
                let range = par::chunk_range(n, GRID_CHUNK, ch);
                let mut c = coords_of(dims, range.start);
                let f = &f;
                range.map(move |idx| {
                    let v = f(idx, c);
                    advance(&mut c, &dims);
                    v
                })
            })
            .collect();
        Self::from_data(dims, origin, spacing, data)
    }

    /// A grid with the same dims, origin and spacing, every cell set to `value`.
    pub fn same_shape<U: Clone>(&self, value: U) -> Grid<U, D> {
        Grid::new(self.dims, self.origin, self.spacing, value)
    }

    /// Whether `other` has the same dims, origin and spacing.
    pub fn same_layout<U>(&self, other: &Grid<U, D>) -> bool {
        self.dims == other.dims && self.origin == other.origin && self.spacing == other.spacing
    }

    /// Number of cells.
    #[inline]
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// Whether the grid has no cells.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Distance in `data` between neighbours along each axis: `[1, nx, nx·ny]`.
    #[inline]
    pub fn strides(&self) -> [usize; D] {
        strides_of(self.dims)
    }

    /// Linear index of the cell at integer coordinates `c` (x fastest).
    #[inline]
    pub fn index(&self, c: [usize; D]) -> usize {
        debug_assert!(
            (0..D).all(|k| c[k] < self.dims[k]),
            "cell {c:?} outside {:?}",
            self.dims
        );
        let mut idx = 0;
        for k in (0..D).rev() {
            idx = idx * self.dims[k] + c[k];
        }
        idx
    }

    /// Integer coordinates of the cell with linear index `idx`.
    #[inline]
    pub fn coords(&self, idx: usize) -> [usize; D] {
        coords_of(self.dims, idx)
    }

    /// Position (m) of the centre of the cell at integer coordinates `c`: `origin + (c + ½)·h`.
    #[inline]
    pub fn center_of(&self, c: [usize; D]) -> [f64; D] {
        std::array::from_fn(|k| self.origin[k] + (c[k] as f64 + 0.5) * self.spacing)
    }

    /// Position (m) of the centre of the cell with linear index `idx`.
    #[inline]
    pub fn cell_center(&self, idx: usize) -> [f64; D] {
        self.center_of(self.coords(idx))
    }

    /// Upper corner of the domain (m): `origin + dims·h`.
    pub fn upper(&self) -> [f64; D] {
        std::array::from_fn(|k| self.origin[k] + self.dims[k] as f64 * self.spacing)
    }

    /// Whether the cell at `c` lies in the outermost layer of the grid.
    #[inline]
    pub fn is_boundary(&self, c: [usize; D]) -> bool {
        (0..D).any(|k| c[k] == 0 || c[k] + 1 == self.dims[k])
    }

    /// The cell containing position `p` (m), or `None` outside the domain.
    pub fn cell_at(&self, p: [f64; D]) -> Option<[usize; D]> {
        let mut c = [0; D];
        for k in 0..D {
            let s = ((p[k] - self.origin[k]) / self.spacing).floor();
            if !(s >= 0.0 && s < self.dims[k] as f64) {
                return None;
            }
            c[k] = s as usize;
        }
        Some(c)
    }

    /// The value at cell `c`.
    #[inline]
    pub fn get(&self, c: [usize; D]) -> &T {
        &self.data[self.index(c)]
    }

    /// Mutable access to the value at cell `c`.
    #[inline]
    pub fn get_mut(&mut self, c: [usize; D]) -> &mut T {
        let i = self.index(c);
        &mut self.data[i]
    }

    /// Sets the value at cell `c`.
    #[inline]
    pub fn set(&mut self, c: [usize; D], value: T) {
        let i = self.index(c);
        self.data[i] = value;
    }

    /// Sets every cell to `value`.
    pub fn fill(&mut self, value: T)
    where
        T: Clone,
    {
        self.data.fill(value);
    }

    /// A new grid with the same layout whose values are `f(value)`, computed in parallel.
    pub fn map<U: Send>(&self, f: impl Fn(&T) -> U + Sync + Send) -> Grid<U, D>
    where
        T: Sync,
    {
        let data = self
            .data
            .par_iter()
            .with_min_len(GRID_CHUNK)
            .map(f)
            .collect();
        Grid::from_data(self.dims, self.origin, self.spacing, data)
    }

    /// Calls `f(c, row)` for every row of cells along x, in parallel (groups of rows of about [`GRID_CHUNK`]
    /// values), with `c` the coordinates of the row's first cell (`c[0] = 0`). For kernels that walk a row
    /// with indices counted along it rather than computed from coordinates per cell.
    pub fn par_for_rows_mut(&mut self, f: impl Fn([usize; D], &mut [T]) + Sync + Send)
    where
        T: Send,
    {
        let dims = self.dims;
        let nx = dims[0];
        if nx == 0 {
            return;
        }
        let per = (GRID_CHUNK / nx).max(1);
        self.data
            .par_chunks_mut(per * nx)
            .enumerate()
            .for_each(|(t, rows)| {
                for (r, row) in rows.chunks_mut(nx).enumerate() {
                    f(coords_of(dims, (t * per + r) * nx), row);
                }
            });
    }

    /// Calls `f(index, coords, &mut value)` for every cell, in parallel over fixed chunks of [`GRID_CHUNK`]
    /// cells. Each cell is visited once by one task, so the result does not depend on the thread count as
    /// long as `f` only reads shared data besides its own cell.
    pub fn par_for_each_mut(&mut self, f: impl Fn(usize, [usize; D], &mut T) + Sync + Send)
    where
        T: Send,
    {
        let dims = self.dims;
        let n = self.data.len();
        let cells = SharedSlice::new(&mut self.data);
        par::for_each_chunk(n, GRID_CHUNK, |range| {
            let start = range.start;
            // SAFETY: `for_each_chunk` hands out disjoint chunks of `0..n`, one per task.
            let values = unsafe { cells.slice_mut(range) };
            let mut c = coords_of(dims, start);
            for (j, v) in values.iter_mut().enumerate() {
                f(start + j, c, v);
                advance(&mut c, &dims);
            }
        });
    }
}

impl<T: Linear, const D: usize> Grid<T, D> {
    /// Multilinear (linear, bilinear, trilinear) interpolation of the cell values at position `p` (m).
    ///
    /// With `s = (p − origin)/h − ½` the continuous cell coordinate, the result is
    /// `Σ_corners Π_k (1 − |s_k − c_k|) · value(c)` over the 2ᴰ cells around `s`: exact for fields linear in
    /// each coordinate, second-order accurate (error `O(h²)`) for smooth ones. Positions outside the hull of
    /// the cell centres are clamped onto it, so they take the nearest boundary value (constant
    /// extrapolation). A NaN coordinate gives a NaN result.
    ///
    /// # Panics
    /// If the grid has no cells.
    #[inline]
    pub fn sample(&self, p: [f64; D]) -> T {
        let (idx, w) = self.stencil(p);
        self.sample_at(&idx, &w)
    }

    /// The 2ᴰ cells and weights of [`sample`](Self::sample) at `p` (corner bit `k` set: upper along axis `k`;
    /// entries past 2ᴰ unused), for sampling several grids of the same shape at one point.
    ///
    /// # Panics
    /// If the grid has no cells.
    // Always inlined: a call per sample costs as much as the sampling (seen in `perf` when LLVM declined).
    #[inline(always)]
    pub fn stencil(&self, p: [f64; D]) -> ([usize; 8], [f64; 8]) {
        let strides = self.strides();
        let mut lo = [0usize; D];
        let mut hi = [0usize; D];
        let mut frac = [0.0f64; D];
        for k in 0..D {
            let n = self.dims[k];
            assert!(n > 0, "cannot sample a grid with no cells");
            let s = ((p[k] - self.origin[k]) / self.spacing - 0.5).clamp(0.0, (n - 1) as f64);
            let i0 = (s.floor() as usize).min(n.saturating_sub(2));
            lo[k] = i0 * strides[k];
            hi[k] = (i0 + 1).min(n - 1) * strides[k];
            frac[k] = s - i0 as f64;
        }
        let mut idx = [0usize; 8];
        let mut weight = [0.0f64; 8];
        for corner in 0..(1usize << D) {
            let mut w = 1.0;
            for k in 0..D {
                if (corner >> k) & 1 == 1 {
                    w *= frac[k];
                    idx[corner] += hi[k];
                } else {
                    w *= 1.0 - frac[k];
                    idx[corner] += lo[k];
                }
            }
            weight[corner] = w;
        }
        (idx, weight)
    }

    /// `Σ w · value` over a [`stencil`](Self::stencil) of this grid's shape.
    // Always inlined: a call per sample costs as much as the sampling (seen in `perf` when LLVM declined).
    #[inline(always)]
    pub fn sample_at(&self, idx: &[usize; 8], w: &[f64; 8]) -> T {
        let mut acc = T::zero();
        for corner in 0..(1usize << D) {
            acc = acc.add_scaled(w[corner], self.data[idx[corner]]);
        }
        acc
    }
}

impl<T: Real, const D: usize> Grid<T, D> {
    /// Largest absolute cell value, as f64 (`-inf` for an empty grid, NaN if any value is NaN), by the
    /// deterministic [`par::max`].
    pub fn max_abs(&self) -> f64 {
        par::max(self.data.len(), |i| self.data[i].to_f64().abs())
    }

    /// Sum of the cell values in f64, by the deterministic [`par::sum`] (bit-identical for any thread count).
    pub fn sum(&self) -> f64 {
        par::sum(self.data.len(), |i| self.data[i].to_f64())
    }
}

impl<T, const D: usize> Index<[usize; D]> for Grid<T, D> {
    type Output = T;
    #[inline]
    fn index(&self, c: [usize; D]) -> &T {
        self.get(c)
    }
}

impl<T, const D: usize> IndexMut<[usize; D]> for Grid<T, D> {
    #[inline]
    fn index_mut(&mut self, c: [usize; D]) -> &mut T {
        self.get_mut(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_and_coords_are_inverse_x_fastest() {
        let g = Grid::new([3, 4, 5], [0.0; 3], 1.0, 0.0f64);
        assert_eq!(g.index([1, 0, 0]), 1);
        assert_eq!(g.index([0, 1, 0]), 3);
        assert_eq!(g.index([0, 0, 1]), 12);
        assert_eq!(g.strides(), [1, 3, 12]);
        for i in 0..g.len() {
            assert_eq!(g.index(g.coords(i)), i);
        }
    }

    #[test]
    fn par_for_each_mut_visits_cells_in_order_with_their_coords() {
        // Three chunks and a ragged tail, so the per-chunk coordinate odometer is exercised.
        let mut g = Grid::new([100, 70, 2], [0.0; 3], 0.5, [0usize; 4]);
        g.par_for_each_mut(|i, c, v| *v = [i, c[0], c[1], c[2]]);
        for (i, v) in g.data.iter().enumerate() {
            let c = g.coords(i);
            assert_eq!(*v, [i, c[0], c[1], c[2]]);
        }
        let h = Grid::from_fn([100, 70, 2], [0.0; 3], 0.5, |i, c| [i, c[0], c[1], c[2]]);
        assert_eq!(g, h);
    }

    #[test]
    fn sample_clamps_outside_and_hits_cell_values_at_centres() {
        let g = Grid::from_fn([4, 3], [1.0, -2.0], 0.25, |i, _| i as f64);
        for i in 0..g.len() {
            assert_eq!(g.sample(g.cell_center(i)), i as f64);
        }
        // Far outside the lower-left corner: the corner cell's value.
        assert_eq!(g.sample([-100.0, -100.0]), 0.0);
        assert_eq!(g.sample([100.0, 100.0]), 11.0);
        // A single cell along an axis must not read past it.
        let thin = Grid::from_fn([1, 3], [0.0; 2], 1.0, |i, _| i as f32);
        assert_eq!(thin.sample([0.9, 1.5]), 1.0);
    }

    #[test]
    fn cell_at_finds_containing_cell() {
        let g = Grid::new([4, 3], [1.0, -2.0], 0.25, 0u8);
        assert_eq!(g.cell_at([1.3, -1.6]), Some([1, 1]));
        assert_eq!(g.cell_at([0.99, -1.6]), None);
        assert_eq!(g.cell_at([2.0, -1.6]), None);
    }
}
