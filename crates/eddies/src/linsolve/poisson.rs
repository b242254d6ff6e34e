//! The Poisson operator `−∇²` on a flagged grid, matrix-free (Bridson 2015, ch. 5).
//!
//! Unknowns live at the centres of fluid cells. A neighbour that is air (or any Dirichlet cell) holds a known
//! value, zero for a free surface; a solid neighbour contributes nothing (zero normal gradient: the solid
//! velocity enters through the right-hand side). In 2D and 3D the row of cell `i` reads
//!
//! ```text
//! (A x)ᵢ = (nᵢ xᵢ − Σⱼ xⱼ) / h²
//! ```
//!
//! with `nᵢ` the number of non-solid neighbours and the sum over the non-solid neighbours `j`. Vectors are laid
//! out on the grid padded by one halo cell per side ([`Layout`]), so that every stencil reads its neighbours
//! without bounds tests; entries outside the unknowns are zero in every vector a solver works on, except that
//! Dirichlet cells may carry their boundary values (then `b − A x` is the residual of the inhomogeneous
//! problem).

use multiversion::multiversion;
use rayon::prelude::*;

use super::vector::{lane_sum, CHUNK};
use super::{LinearOperator, SolveError};
use crate::grid::{coords_of, strides_of, CellFlag, Grid, Real};

/// The role of a cell in a Poisson problem.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum CellKind {
    /// No unknown; its faces carry no flux (Neumann).
    #[default]
    Solid = 0,
    /// A known value (Dirichlet): air at a free surface (zero), or a boundary value.
    Dirichlet = 1,
    /// An unknown of the system.
    Unknown = 2,
}

impl From<CellFlag> for CellKind {
    fn from(f: CellFlag) -> Self {
        match f {
            CellFlag::Fluid => CellKind::Unknown,
            CellFlag::Air => CellKind::Dirichlet,
            CellFlag::Solid => CellKind::Solid,
        }
    }
}

/// What lies beyond the grid's outer faces.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DomainBoundary {
    /// Closed walls: zero normal gradient (Neumann).
    #[default]
    Solid,
    /// Open: the value is zero one cell beyond the grid (Dirichlet).
    Open,
}

impl DomainBoundary {
    fn kind(self) -> CellKind {
        match self {
            DomainBoundary::Solid => CellKind::Solid,
            DomainBoundary::Open => CellKind::Dirichlet,
        }
    }
}

/// One row (along x) of a padded vector in a row loop: its index, the padded coordinates of its first entry, and
/// whether it crosses the interior (is not a halo row). Row loops step the coordinates row by row instead of
/// dividing the index by the dimensions, which cost as much as the stencil on short rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PaddedRow<const D: usize> {
    pub index: usize,
    pub coords: [usize; D],
    pub interior: bool,
}

/// A grid of `dims` cells stored with one halo cell on each side, x fastest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout<const D: usize> {
    /// Cells per axis, without the halo.
    pub dims: [usize; D],
    /// Cells per axis, with the halo (`dims + 2`).
    pub padded: [usize; D],
    /// Distance in memory between neighbours along each axis.
    pub strides: [usize; D],
}

impl<const D: usize> Layout<D> {
    /// The layout of a grid of `dims` cells.
    pub fn new(dims: [usize; D]) -> Self {
        let padded = dims.map(|n| n + 2);
        Layout {
            dims,
            padded,
            strides: strides_of(padded),
        }
    }

    /// Entries of a padded vector.
    pub fn len(&self) -> usize {
        self.padded.iter().product()
    }

    /// Whether the grid has no cells.
    pub fn is_empty(&self) -> bool {
        self.dims.contains(&0)
    }

    /// Entries of one row (along x), halo included.
    pub fn row_len(&self) -> usize {
        self.padded[0]
    }

    /// Number of rows, halo rows included.
    pub fn rows(&self) -> usize {
        self.len() / self.row_len()
    }

    /// Padded index of the interior cell `c` (coordinates from 0 to `dims − 1`).
    #[inline]
    pub fn index(&self, c: [usize; D]) -> usize {
        (0..D).map(|k| (c[k] + 1) * self.strides[k]).sum()
    }

    /// Padded coordinates of the padded index `i`.
    #[inline]
    pub fn padded_coords(&self, i: usize) -> [usize; D] {
        coords_of(self.padded, i)
    }

    /// Whether row `r` crosses the interior (is not a halo row).
    #[inline]
    pub fn is_interior_row(&self, r: usize) -> bool {
        let c = coords_of(self.padded, r * self.row_len());
        (1..D).all(|k| c[k] >= 1 && c[k] <= self.dims[k])
    }

    /// Rows per parallel work item: about [`CHUNK`] entries.
    #[inline]
    pub(crate) fn rows_per_task(&self) -> usize {
        (CHUNK / self.row_len()).max(1)
    }

    /// Copies a grid's values (storage order of [`Grid`]) into the interior of padded vector `out`.
    pub fn pad(&self, values: &[f64], out: &mut [f64]) {
        assert_eq!(values.len(), self.dims.iter().product::<usize>());
        self.pad_from(|i| values[i], out);
    }

    /// Fills the interior of padded vector `out` with `value(i)` for every cell `i` of a grid (storage order
    /// of [`Grid`]), and its halo with zeros: [`pad`](Self::pad) from any field.
    pub fn pad_from(&self, value: impl Fn(usize) -> f64 + Sync + Send, out: &mut [f64]) {
        assert_eq!(out.len(), self.len());
        let n = self.dims[0];
        self.for_rows(out, |r, row| {
            if !r.interior {
                row.fill(0.0);
                return;
            }
            let src = self.interior_row_of(r.index) * n;
            row[0] = 0.0;
            row[n + 1] = 0.0;
            for (k, o) in row[1..=n].iter_mut().enumerate() {
                *o = value(src + k);
            }
        });
    }

    /// Copies the interior of padded vector `v` into `out` (storage order of [`Grid`]).
    pub fn unpad(&self, v: &[f64], out: &mut [f64]) {
        self.unpad_into(v, out, |o, x| *o = x);
    }

    /// `set(&mut out[i], v)` with the interior value `v` of cell `i` of the padded vector `v`, for every cell
    /// of a grid (storage order of [`Grid`]): [`unpad`](Self::unpad) into any field.
    pub fn unpad_into<T: Send>(
        &self,
        v: &[f64],
        out: &mut [T],
        set: impl Fn(&mut T, f64) + Sync + Send,
    ) {
        assert_eq!(out.len(), self.dims.iter().product::<usize>());
        let n = self.dims[0];
        out.par_chunks_mut(n).enumerate().for_each(|(k, dst)| {
            let mut c = coords_of(self.dims, k * n);
            c[0] = 0;
            let src = self.index(c);
            for (o, &x) in dst.iter_mut().zip(&v[src..src + n]) {
                set(o, x);
            }
        });
    }

    /// Index among the interior rows of the interior row `r`.
    fn interior_row_of(&self, r: usize) -> usize {
        let c = coords_of(self.padded, r * self.row_len());
        let mut idx = 0;
        let mut stride = 1;
        for (&ck, &dk) in c.iter().zip(&self.dims).skip(1) {
            idx += (ck - 1) * stride;
            stride *= dk;
        }
        idx
    }

    /// Row `r`: its index, coordinates and whether it crosses the interior.
    pub(crate) fn row(&self, r: usize) -> PaddedRow<D> {
        let coords = coords_of(self.padded, r * self.row_len());
        PaddedRow {
            index: r,
            coords,
            interior: self.interior_coords(&coords),
        }
    }

    /// Steps `row` to the next row in storage order, without a division.
    #[inline]
    pub(crate) fn next_row(&self, row: &mut PaddedRow<D>) {
        row.index += 1;
        for k in 1..D {
            row.coords[k] += 1;
            if row.coords[k] < self.padded[k] || k == D - 1 {
                break;
            }
            row.coords[k] = 0;
        }
        row.interior = self.interior_coords(&row.coords);
    }

    /// The rows of plane `p` (padded coordinate along the slowest axis), in storage order.
    #[inline(always)]
    pub(crate) fn plane_rows(&self, p: usize) -> impl Iterator<Item = PaddedRow<D>> + '_ {
        let rows = self.strides[D - 1] / self.row_len();
        let mut row = self.row(p * rows);
        (0..rows).map(move |i| {
            if i > 0 {
                self.next_row(&mut row);
            }
            row
        })
    }

    /// Whether a row at padded coordinates `c` (x ignored) crosses the interior.
    #[inline]
    fn interior_coords(&self, c: &[usize; D]) -> bool {
        (1..D).all(|k| c[k] >= 1 && c[k] <= self.dims[k])
    }

    /// Calls `f(row, values)` for every row of `out`, in parallel over fixed groups of rows.
    pub(crate) fn for_rows<T: Send>(
        &self,
        out: &mut [T],
        f: impl Fn(PaddedRow<D>, &mut [T]) + Sync + Send,
    ) {
        let rl = self.row_len();
        self.for_row_groups(out, |first, group| {
            let mut row = self.row(first);
            for values in group.chunks_mut(rl) {
                f(row, values);
                self.next_row(&mut row);
            }
        });
    }

    /// Sets `out[i] = f(i)` for every padded index `i`, in parallel.
    pub(crate) fn for_cells<T: Send>(&self, out: &mut [T], f: impl Fn(usize) -> T + Sync + Send) {
        self.for_row_groups(out, |first, group| {
            let start = first * self.row_len();
            for (k, o) in group.iter_mut().enumerate() {
                *o = f(start + k);
            }
        });
    }

    /// Calls `f(first_row, rows)` for fixed groups of consecutive rows of `out`, in parallel (for kernels that
    /// keep a buffer per group).
    pub(crate) fn for_row_groups<T: Send>(
        &self,
        out: &mut [T],
        f: impl Fn(usize, &mut [T]) + Sync + Send,
    ) {
        let rl = self.row_len();
        let per = self.rows_per_task();
        out.par_chunks_mut(per * rl)
            .enumerate()
            .for_each(|(t, chunk)| f(t * per, chunk));
    }

    /// Like [`for_rows`](Self::for_rows), returning the sum of the rows' results, added in row order within a
    /// group and group by group: the same for any thread count.
    pub(crate) fn sum_rows<T: Send>(
        &self,
        out: &mut [T],
        f: impl Fn(PaddedRow<D>, &mut [T]) -> f64 + Sync + Send,
    ) -> f64 {
        let rl = self.row_len();
        let per = self.rows_per_task();
        let partials: Vec<f64> = out
            .par_chunks_mut(per * rl)
            .enumerate()
            .map(|(t, chunk)| {
                let mut s = 0.0;
                let mut row = self.row(t * per);
                for values in chunk.chunks_mut(rl) {
                    s += f(row, values);
                    self.next_row(&mut row);
                }
                s
            })
            .collect();
        partials.into_iter().fold(0.0, |a, b| a + b)
    }
}

/// `out[i] = Σ_axes x[start + i − s] + x[start + i + s]` for `i < out.len()`: the neighbour sum of a run of
/// cells along x.
#[inline(always)]
pub(crate) fn neighbour_sum<T: Real, const D: usize>(
    x: &[T],
    start: usize,
    strides: &[usize; D],
    out: &mut [T],
) {
    let n = out.len();
    for (d, &s) in strides.iter().enumerate() {
        let lo = &x[start - s..start - s + n];
        let hi = &x[start + s..start + s + n];
        if d == 0 {
            for ((o, &a), &b) in out.iter_mut().zip(lo).zip(hi) {
                *o = a + b;
            }
        } else {
            for ((o, &a), &b) in out.iter_mut().zip(lo).zip(hi) {
                *o += a + b;
            }
        }
    }
}

/// Connected groups of unknowns that touch no Dirichlet cell: there the operator is singular (the constant is
/// in its null space, as for the pressure in a closed container).
#[derive(Clone, Debug, Default)]
struct NullSpace {
    /// Component of each padded cell among the singular ones (`u32::MAX`: none).
    labels: Vec<u32>,
    /// Cells of each singular component.
    sizes: Vec<usize>,
}

const NO_LABEL: u32 = u32::MAX;

/// The matrix-free Poisson operator `−∇²` of a flagged grid (see the module documentation).
#[derive(Clone, Debug)]
pub struct PoissonOperator<const D: usize> {
    layout: Layout<D>,
    kind: Vec<CellKind>,
    /// Diagonal of each unknown cell in units of `1/h²`: its non-solid neighbours, each Dirichlet one counted
    /// with its link weight; 0 for every other cell.
    diag: Vec<f32>,
    /// Weight of the link from each cell to its Dirichlet neighbour on each side (`2D` entries per cell:
    /// axis-major, lower side first); empty when every weight is 1. Coarse multigrid levels use it to place a
    /// boundary where the finest level has it.
    link_weight: Vec<f32>,
    /// `1 / h²` (1/m²).
    scale: f64,
    spacing: f64,
    outside: DomainBoundary,
    unknowns: usize,
    null: NullSpace,
}

impl<const D: usize> PoissonOperator<D> {
    /// The operator on a grid of `dims` cells of size `spacing` (m), the role of each cell given by `kind`
    /// (interior coordinates) and the cells beyond the grid by `outside`.
    ///
    /// Unknown cells whose neighbours are all solid are made solid: their value is undetermined and irrelevant.
    ///
    /// # Errors
    /// [`SolveError::BadInput`] for an empty grid, a spacing that is not positive and finite, or no unknown
    /// cell.
    pub fn new(
        dims: [usize; D],
        spacing: f64,
        outside: DomainBoundary,
        kind: impl Fn([usize; D]) -> CellKind + Sync + Send,
    ) -> Result<Self, SolveError> {
        let mut op = Self::unlabelled(dims, spacing, outside, kind)?;
        op.label_null_space();
        Ok(op)
    }

    /// As [`new`](Self::new), without looking for singular groups of unknowns (a sequential pass over the
    /// grid): for the intermediate levels of a multigrid hierarchy, which never project the null space out.
    pub(crate) fn unlabelled(
        dims: [usize; D],
        spacing: f64,
        outside: DomainBoundary,
        kind: impl Fn([usize; D]) -> CellKind + Sync + Send,
    ) -> Result<Self, SolveError> {
        Self::from_rows(dims, spacing, outside, |mut c, row| {
            for (x, k) in row.iter_mut().enumerate() {
                c[0] = x;
                *k = kind(c);
            }
        })
    }

    /// As [`unlabelled`](Self::unlabelled), the kinds given a row at a time: `fill(c, row)` sets the cells of
    /// the interior row whose first cell has coordinates `c`.
    pub(crate) fn from_rows(
        dims: [usize; D],
        spacing: f64,
        outside: DomainBoundary,
        fill: impl Fn([usize; D], &mut [CellKind]) + Sync + Send,
    ) -> Result<Self, SolveError> {
        if dims.contains(&0) {
            return Err(SolveError::BadInput(format!(
                "the grid has no cells ({dims:?})"
            )));
        }
        if !(spacing.is_finite() && spacing > 0.0) {
            return Err(SolveError::BadInput(format!(
                "the cell size must be positive and finite, got {spacing}"
            )));
        }
        let layout = Layout::new(dims);
        let mut kinds = vec![outside.kind(); layout.len()];
        let rl = layout.row_len();
        kinds.par_chunks_mut(rl).enumerate().for_each(|(r, row)| {
            if layout.is_interior_row(r) {
                let c = coords_of(layout.padded, r * rl).map(|v| v.saturating_sub(1));
                fill(c, &mut row[1..=dims[0]]);
            }
        });
        Self::from_kinds(layout, kinds, spacing, outside)
    }

    /// The operator of a [`Grid`] of cell flags: fluid cells are the unknowns, air cells Dirichlet (zero),
    /// solid cells Neumann.
    ///
    /// # Errors
    /// As [`new`](Self::new).
    pub fn from_flags(
        flags: &Grid<CellFlag, D>,
        outside: DomainBoundary,
    ) -> Result<Self, SolveError> {
        let mut op = Self::from_rows(flags.dims, flags.spacing, outside, |c, row| {
            let start = flags.index(c);
            let n = row.len();
            for (k, &f) in row.iter_mut().zip(&flags.data[start..start + n]) {
                *k = f.into();
            }
        })?;
        op.label_null_space();
        Ok(op)
    }

    /// Builds the operator from padded kinds (halo included).
    pub(crate) fn from_kinds(
        layout: Layout<D>,
        mut kind: Vec<CellKind>,
        spacing: f64,
        outside: DomainBoundary,
    ) -> Result<Self, SolveError> {
        let strides = layout.strides;
        let (n, rl) = (layout.dims[0], layout.row_len());
        // The diagonal in units of 1/h²: an unknown's neighbours that are not solid, a row at a time.
        let mut diag = vec![0.0f32; layout.len()];
        diag.par_chunks_mut(rl).enumerate().for_each(|(r, row)| {
            if !layout.is_interior_row(r) {
                return;
            }
            let start = r * rl + 1;
            let d = &mut row[1..=n];
            for &s in &strides {
                let (below, above) = (
                    &kind[start - s..start - s + n],
                    &kind[start + s..start + s + n],
                );
                for i in 0..n {
                    d[i] += (below[i] != CellKind::Solid) as u8 as f32
                        + (above[i] != CellKind::Solid) as u8 as f32;
                }
            }
            for (d, &k) in d.iter_mut().zip(&kind[start..start + n]) {
                if k != CellKind::Unknown {
                    *d = 0.0;
                }
            }
        });
        // An unknown with no such neighbour is cut off from everything: it becomes solid.
        let unknowns: usize = kind
            .par_chunks_mut(rl)
            .zip(diag.par_chunks(rl))
            .map(|(kinds, diag)| {
                let mut n = 0;
                for (k, &d) in kinds.iter_mut().zip(diag) {
                    if *k == CellKind::Unknown {
                        if d == 0.0 {
                            *k = CellKind::Solid;
                        } else {
                            n += 1;
                        }
                    }
                }
                n
            })
            .sum();
        if unknowns == 0 {
            return Err(SolveError::BadInput(
                "the problem has no unknowns (no fluid cell)".into(),
            ));
        }
        Ok(PoissonOperator {
            layout,
            kind,
            diag,
            link_weight: Vec::new(),
            scale: 1.0 / (spacing * spacing),
            spacing,
            outside,
            unknowns,
            null: NullSpace::default(),
        })
    }

    /// Finds the groups of unknowns that touch no Dirichlet cell (see [`is_singular`](Self::is_singular)).
    pub(crate) fn label_null_space(&mut self) {
        self.null = find_null_space(&self.layout, &self.kind);
    }

    /// The padded layout of the operator's vectors.
    pub fn layout(&self) -> &Layout<D> {
        &self.layout
    }

    /// Cell size (m).
    pub fn spacing(&self) -> f64 {
        self.spacing
    }

    /// What lies beyond the grid.
    pub fn outside(&self) -> DomainBoundary {
        self.outside
    }

    /// Number of unknowns.
    pub fn unknowns(&self) -> usize {
        self.unknowns
    }

    /// Role of each padded cell.
    pub fn kinds(&self) -> &[CellKind] {
        &self.kind
    }

    /// Whether some group of unknowns touches no Dirichlet cell (a closed container): then a solution is
    /// defined up to a constant per group, and the right-hand side must sum to zero over each group (solvers
    /// remove the part that does not).
    pub fn is_singular(&self) -> bool {
        !self.null.sizes.is_empty()
    }

    /// Diagonal in units of `1/h²` (the non-solid neighbour count on the finest level, with the Dirichlet link
    /// weights on coarse multigrid levels; 0 outside the unknowns), per padded cell.
    pub fn diagonal_units(&self) -> &[f32] {
        &self.diag
    }

    /// Weight of the link from padded cell `i` to its neighbour along `axis` on the `upper` side, when that
    /// neighbour is Dirichlet (1 on the finest level).
    pub(crate) fn link_weight(&self, i: usize, axis: usize, upper: bool) -> f64 {
        if self.link_weight.is_empty() {
            1.0
        } else {
            self.link_weight[i * 2 * D + 2 * axis + upper as usize] as f64
        }
    }

    /// Sets the Dirichlet link weights (see the field) and the diagonal that follows from them.
    pub(crate) fn set_link_weights(&mut self, weights: Vec<f32>) {
        assert_eq!(weights.len(), self.kind.len() * 2 * D);
        let strides = self.layout.strides;
        let kind = &self.kind;
        self.diag.par_iter_mut().enumerate().for_each(|(i, d)| {
            if kind[i] != CellKind::Unknown {
                return;
            }
            let mut sum = 0.0;
            for (axis, &s) in strides.iter().enumerate() {
                for (upper, j) in [(false, i - s), (true, i + s)] {
                    sum += match kind[j] {
                        CellKind::Unknown => 1.0,
                        CellKind::Dirichlet => weights[i * 2 * D + 2 * axis + upper as usize],
                        CellKind::Solid => 0.0,
                    };
                }
            }
            *d = sum;
        });
        self.link_weight = weights;
    }

    /// `1/h²` (1/m²).
    pub fn scale(&self) -> f64 {
        self.scale
    }

    /// The groups of unknowns that touch no Dirichlet cell ([`is_singular`](Self::is_singular)): the group of
    /// each padded cell (`u32::MAX` where none) and the cells of each group. Solvers remove each group's mean
    /// from their vectors.
    pub fn null_space(&self) -> (&[u32], &[usize]) {
        (&self.null.labels, &self.null.sizes)
    }

    /// Diagonal entry `A_ii` (0 outside the unknowns).
    pub fn diagonal(&self, i: usize) -> f64 {
        self.diag[i] as f64 * self.scale
    }

    /// `r = b − A x` on the unknowns (0 elsewhere), where Dirichlet cells of `x` may hold boundary values;
    /// returns `r · r`.
    pub fn residual(&self, b: &[f64], x: &[f64], r: &mut [f64]) -> f64 {
        residual(self, b, x, r)
    }

    /// `out` = the grid values `values` (storage order of [`Grid`](crate::grid::Grid)) padded
    /// ([`Layout::pad`]) and then [masked](Self::mask), in one pass.
    pub fn pad_unknowns(&self, values: &[f64], out: &mut [f64]) {
        let l = &self.layout;
        assert_eq!(values.len(), l.dims.iter().product::<usize>());
        assert_eq!(out.len(), l.len());
        let n = l.dims[0];
        let rl = l.row_len();
        l.for_rows(out, |r, row| {
            row.fill(0.0);
            if r.interior {
                let src = l.interior_row_of(r.index) * n;
                let kind = &self.kind[r.index * rl + 1..r.index * rl + 1 + n];
                for ((o, &k), &v) in row[1..=n].iter_mut().zip(kind).zip(&values[src..src + n]) {
                    if k == CellKind::Unknown {
                        *o = v;
                    }
                }
            }
        });
    }

    /// Zeroes the entries of `v` that are not unknowns.
    pub fn mask(&self, v: &mut [f64]) {
        let kind = &self.kind;
        v.par_chunks_mut(CHUNK).enumerate().for_each(|(t, chunk)| {
            let k = &kind[t * CHUNK..t * CHUNK + chunk.len()];
            for (v, &k) in chunk.iter_mut().zip(k) {
                if k != CellKind::Unknown {
                    *v = 0.0;
                }
            }
        });
    }

    /// [`LinearOperator::remove_null_space`] in any precision (means summed in f64).
    pub(crate) fn remove_null_space_in<T: Real>(&self, v: &mut [T]) {
        let NullSpace { labels, sizes } = &self.null;
        match sizes.len() {
            0 => {}
            1 => {
                // The usual case, one closed container: a deterministic parallel mean.
                let partials: Vec<f64> = v
                    .par_chunks(CHUNK)
                    .enumerate()
                    .map(|(t, c)| {
                        let lab = &labels[t * CHUNK..t * CHUNK + c.len()];
                        lane_sum(c.len(), |i| if lab[i] == 0 { c[i].to_f64() } else { 0.0 })
                    })
                    .collect();
                let mean =
                    T::from_f64(partials.into_iter().fold(0.0, |a, b| a + b) / sizes[0] as f64);
                v.par_chunks_mut(CHUNK).enumerate().for_each(|(t, c)| {
                    let lab = &labels[t * CHUNK..t * CHUNK + c.len()];
                    for (v, &l) in c.iter_mut().zip(lab) {
                        if l == 0 {
                            *v = *v - mean;
                        }
                    }
                });
            }
            _ => {
                let mut sums = vec![0.0; sizes.len()];
                for (&l, &x) in labels.iter().zip(v.iter()) {
                    if l != NO_LABEL {
                        sums[l as usize] += x.to_f64();
                    }
                }
                for (s, &n) in sums.iter_mut().zip(sizes) {
                    *s /= n as f64;
                }
                for (&l, x) in labels.iter().zip(v.iter_mut()) {
                    if l != NO_LABEL {
                        *x = *x - T::from_f64(sums[l as usize]);
                    }
                }
            }
        }
    }

    fn apply_rows(&self, x: &[f64], y: &mut [f64]) -> f64 {
        apply_rows(self, x, y)
    }

    /// `out = (A x)` on the interior run of cells from padded index `start` (one row's worth).
    #[inline(always)]
    fn apply_row(&self, x: &[f64], start: usize, out: &mut [f64]) {
        let n = out.len();
        neighbour_sum(x, start, &self.layout.strides, out);
        let (c, xc) = (&self.diag[start..start + n], &x[start..start + n]);
        for ((o, &c), &x) in out.iter_mut().zip(c).zip(xc) {
            *o = if c > 0.0 {
                self.scale * (c as f64 * x - *o)
            } else {
                0.0
            };
        }
    }
}

impl<const D: usize> LinearOperator for PoissonOperator<D> {
    fn len(&self) -> usize {
        self.layout.len()
    }

    /// `y = A x`, reading `x` at Dirichlet cells as zero only if it is zero there: vectors of the homogeneous
    /// problem are.
    fn apply(&self, x: &[f64], y: &mut [f64]) {
        self.apply_rows(x, y);
    }

    fn apply_dot(&self, x: &[f64], y: &mut [f64]) -> f64 {
        self.apply_rows(x, y)
    }

    /// Row by row: each row of `A x` goes into a buffer the size of a row and is subtracted from `r` at once
    /// (the same bits as `r + (−1)·(A x)`).
    fn subtract_apply(&self, x: &[f64], r: &mut [f64], _scratch: &mut [f64]) {
        subtract_apply(self, x, r);
    }

    fn remove_null_space(&self, v: &mut [f64]) {
        self.remove_null_space_in(v);
    }
}

/// `y = A x` row by row; returns `x · y` (the product the conjugate gradients need next, in the same pass).
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2+fma"))]
fn apply_rows<const D: usize>(op: &PoissonOperator<D>, x: &[f64], y: &mut [f64]) -> f64 {
    let l = &op.layout;
    let n = l.dims[0];
    l.sum_rows(y, |row, out| {
        if !row.interior {
            out.fill(0.0);
            return 0.0;
        }
        out[0] = 0.0;
        out[n + 1] = 0.0;
        let start = row.index * l.row_len() + 1;
        let o = &mut out[1..=n];
        op.apply_row(x, start, o);
        let xc = &x[start..start + n];
        lane_sum(n, |i| xc[i] * o[i])
    })
}

/// `r −= A x`, row by row: each row of `A x` goes into a buffer the size of a row and is subtracted from `r`
/// at once (the same bits as `r + (−1)·(A x)`).
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2+fma"))]
fn subtract_apply<const D: usize>(op: &PoissonOperator<D>, x: &[f64], r: &mut [f64]) {
    let l = &op.layout;
    let n = l.dims[0];
    let rl = l.row_len();
    l.for_row_groups(r, |first, group| {
        let mut ax = vec![0.0; n];
        let mut row = l.row(first);
        for out in group.chunks_mut(rl) {
            if row.interior {
                op.apply_row(x, row.index * rl + 1, &mut ax);
                for (r, a) in out[1..=n].iter_mut().zip(&ax) {
                    *r -= a;
                }
            }
            l.next_row(&mut row);
        }
    });
}

/// Labels the groups of connected unknowns that touch no Dirichlet cell, in the order of each group's first
/// cell in storage order (so the labels are deterministic).
fn find_null_space<const D: usize>(layout: &Layout<D>, kind: &[CellKind]) -> NullSpace {
    // Union–find over runs of unknowns along x: a run joins the runs it overlaps in the row just below it
    // along every other axis. Runs are numbered in index order and a union keeps the smaller number as the
    // root, so each group's root is its first run, and the groups are labelled in the order of their first
    // cell (as a scan-order flood fill would).
    struct Run {
        start: usize,
        end: usize,
        parent: usize,
        touches_dirichlet: bool,
    }
    fn root(runs: &mut [Run], mut r: usize) -> usize {
        while runs[r].parent != r {
            let p = runs[r].parent;
            runs[r].parent = runs[p].parent;
            r = p;
        }
        r
    }
    let strides = layout.strides;
    let rl = layout.row_len();
    let is = |i: usize, k: CellKind| kind[i] == k;
    // The runs of row `r`, in order (parents set below).
    let row_runs = |r: usize, out: &mut Vec<Run>| {
        if !layout.is_interior_row(r) {
            return;
        }
        let row = r * rl;
        let mut x = 1;
        while x <= layout.dims[0] {
            if !is(row + x, CellKind::Unknown) {
                x += 1;
                continue;
            }
            let start = row + x;
            while x <= layout.dims[0] && is(row + x, CellKind::Unknown) {
                x += 1;
            }
            let end = row + x;
            let mut touches = is(start - 1, CellKind::Dirichlet) || is(end, CellKind::Dirichlet);
            for &s in &strides[1..] {
                touches |= (start..end)
                    .any(|i| is(i - s, CellKind::Dirichlet) || is(i + s, CellKind::Dirichlet));
            }
            out.push(Run {
                start,
                end,
                parent: 0,
                touches_dirichlet: touches,
            });
        }
    };
    // Rows are scanned in parallel, in fixed blocks, and the blocks' runs joined in row order.
    const BLOCK: usize = 64;
    let rows = layout.rows();
    let blocks: Vec<(Vec<Run>, Vec<usize>)> = (0..rows.div_ceil(BLOCK))
        .into_par_iter()
        .map(|b| {
            let (mut runs, mut counts) = (Vec::new(), Vec::new());
            for r in b * BLOCK..((b + 1) * BLOCK).min(rows) {
                let before = runs.len();
                row_runs(r, &mut runs);
                counts.push(runs.len() - before);
            }
            (runs, counts)
        })
        .collect();
    let mut runs: Vec<Run> = Vec::with_capacity(blocks.iter().map(|b| b.0.len()).sum());
    // First run of each row, plus the total.
    let mut row_first = Vec::with_capacity(rows + 1);
    let mut total = 0;
    for (block, counts) in blocks {
        for c in counts {
            row_first.push(total);
            total += c;
        }
        runs.extend(block);
    }
    for (id, run) in runs.iter_mut().enumerate() {
        run.parent = id;
    }
    row_first.push(runs.len());
    for r in 0..layout.rows() {
        for id in row_first[r]..row_first[r + 1] {
            for &s in &strides[1..] {
                // The row one step down along this axis: its runs that overlap this one, shifted by `s`.
                let Some(below) = r.checked_sub(s / rl) else {
                    continue;
                };
                let (lo, hi) = (runs[id].start - s, runs[id].end - s);
                for other in row_first[below]..row_first[below + 1] {
                    if runs[other].start < hi && lo < runs[other].end {
                        let (a, b) = (root(&mut runs, id), root(&mut runs, other));
                        let (keep, join) = (a.min(b), a.max(b));
                        runs[join].parent = keep;
                    }
                }
            }
        }
    }
    // Per group (at its root): whether it touches a Dirichlet cell, and its size.
    let mut size = vec![0usize; runs.len()];
    for id in 0..runs.len() {
        let g = root(&mut runs, id);
        size[g] += runs[id].end - runs[id].start;
        if runs[id].touches_dirichlet {
            runs[g].touches_dirichlet = true;
        }
    }
    let mut label = vec![NO_LABEL; runs.len()];
    let mut sizes = Vec::new();
    for id in 0..runs.len() {
        if runs[id].parent == id && !runs[id].touches_dirichlet {
            label[id] = sizes.len() as u32;
            sizes.push(size[id]);
        }
    }
    if sizes.is_empty() {
        return NullSpace::default();
    }
    // Each run's group label, then the cells' labels a row at a time.
    let run_label: Vec<u32> = (0..runs.len())
        .map(|id| label[root(&mut runs, id)])
        .collect();
    let mut labels = vec![NO_LABEL; kind.len()];
    labels.par_chunks_mut(rl).enumerate().for_each(|(r, row)| {
        for id in row_first[r]..row_first[r + 1] {
            let run = &runs[id];
            row[run.start - r * rl..run.end - r * rl].fill(run_label[id]);
        }
    });
    NullSpace { labels, sizes }
}

/// `r = b − A x` on the unknowns of `op` (0 elsewhere), in the vectors' precision; returns `r · r` (summed in
/// f64).
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2+fma"))]
pub(crate) fn residual<T: Real, const D: usize>(
    op: &PoissonOperator<D>,
    b: &[T],
    x: &[T],
    r: &mut [T],
) -> f64 {
    let l = &op.layout;
    let n = l.dims[0];
    l.sum_rows(r, |row, out| {
        residual_row(op, b, x, row.index, out);
        if !row.interior {
            return 0.0;
        }
        let o = &out[1..=n];
        lane_sum(n, |i| o[i].to_f64() * o[i].to_f64())
    })
}

/// Row `row` (padded row index) of `b − A x` into `out` (one padded row): the unknowns' residuals, 0 on every
/// other cell.
#[inline]
pub(crate) fn residual_row<T: Real, const D: usize>(
    op: &PoissonOperator<D>,
    b: &[T],
    x: &[T],
    row: usize,
    out: &mut [T],
) {
    let l = &op.layout;
    let n = l.dims[0];
    out.fill(T::ZERO);
    if !l.is_interior_row(row) {
        return;
    }
    let s = T::from_f64(op.scale);
    let start = row * l.row_len() + 1;
    let o = &mut out[1..=n];
    neighbour_sum(x, start, &l.strides, o);
    let (c, xc, bc) = (
        &op.diag[start..start + n],
        &x[start..start + n],
        &b[start..start + n],
    );
    for (((o, &c), &x), &b) in o.iter_mut().zip(c).zip(xc).zip(bc) {
        *o = if c > 0.0 {
            b - s * (T::from_f64(c as f64) * x - *o)
        } else {
            T::ZERO
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    /// The definition: a breadth-first flood fill from every unlabelled unknown in storage order.
    fn flood_fill<const D: usize>(layout: &Layout<D>, kind: &[CellKind]) -> (Vec<u32>, Vec<usize>) {
        let mut group = vec![NO_LABEL; kind.len()];
        let mut labels = vec![NO_LABEL; kind.len()];
        let mut sizes = Vec::new();
        let mut groups = 0;
        for start in 0..kind.len() {
            if kind[start] != CellKind::Unknown || group[start] != NO_LABEL {
                continue;
            }
            group[start] = groups;
            let (mut queue, mut members, mut dirichlet) = (VecDeque::from([start]), vec![], false);
            while let Some(i) = queue.pop_front() {
                members.push(i);
                for &s in &layout.strides {
                    for j in [i - s, i + s] {
                        dirichlet |= kind[j] == CellKind::Dirichlet;
                        if kind[j] == CellKind::Unknown && group[j] == NO_LABEL {
                            group[j] = groups;
                            queue.push_back(j);
                        }
                    }
                }
            }
            groups += 1;
            if !dirichlet {
                for &i in &members {
                    labels[i] = sizes.len() as u32;
                }
                sizes.push(members.len());
            }
        }
        (labels, sizes)
    }

    fn check<const D: usize>(dims: [usize; D], seed: u64) {
        let layout = Layout::new(dims);
        let mut state = seed;
        let mut next = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 33) % 100
        };
        // Mostly unknowns and solids, few Dirichlet cells: many groups, some of them singular, with
        // overhangs and U shapes that join late in the scan.
        let mut kind = vec![CellKind::Solid; layout.len()];
        for r in 0..layout.rows() {
            if layout.is_interior_row(r) {
                for x in 1..=dims[0] {
                    kind[r * layout.row_len() + x] = match next() {
                        0..=54 => CellKind::Unknown,
                        55..=98 => CellKind::Solid,
                        _ => CellKind::Dirichlet,
                    };
                }
            }
        }
        let (labels, sizes) = flood_fill(&layout, &kind);
        let null = find_null_space(&layout, &kind);
        assert!(
            sizes.len() > 3,
            "the case has several singular groups ({})",
            sizes.len()
        );
        assert_eq!(null.sizes, sizes);
        assert_eq!(null.labels, labels);
    }

    #[test]
    fn null_space_groups_match_a_flood_fill() {
        check([23, 17], 1);
        check([12, 9, 14], 2);
        check([30, 4, 5], 3);
    }
}
