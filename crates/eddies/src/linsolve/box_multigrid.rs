//! Multigrid for the Poisson equation on a box of grid points whose outer layer holds Dirichlet values, for
//! several right-hand sides at once: the vector potential of the vortex particle method (`∇²A = −ω` for the
//! three components of `A`, Gourlay part 20).
//!
//! [`Multigrid`](super::Multigrid) handles any flagged domain (solid, air, moving walls): it pays per cell for
//! the flags, the ghost cells around the unknowns and the per-cell diagonal, and solves one component at a
//! time. On the vortex method's box none of that varies: every interior point is an unknown with the same
//! 7-point stencil, and the three components share every pass. This solver is that special case: the same
//! V-cycle (red-black Gauss–Seidel, restriction, multilinear prolongation that adds corrections to the
//! interior only, so boundary values are never overwritten), matrix-free with constant coefficients, on the
//! three components stacked as one array. On the `dye-drop` scene (32³) the vector potential's solves went
//! from 5.0 to 1.6 ms per step with it, and to about 0.9 ms with one initial sweep before the cycles and the
//! solutions exchanged with the caller's history instead of copied (docs/PERFORMANCE.md).
//!
//! **Hierarchy.** The points are vertices: a level of `n` points along an axis spans the same interval as the
//! finest, so its boundary layer lies on the finest one's. A coarser level has `n/2 + 1` points along each
//! axis of at least 5 points (others are kept), which nests exactly when `n` is odd (`2m + 1 → m + 1`) and
//! otherwise spaces the coarse points slightly more than twice as far apart. The stencil of each level uses
//! its own spacing per axis, and the transfers interpolate linearly between the two levels' points, so any
//! box size works.
//!
//! **Transfers.** Prolongation is linear interpolation along each axis (weights ½, ½ or ¾, ¼ … between
//! non-nested points). Restriction is either its transpose with each coarse point's weights normalised to a
//! sum of 1 (full weighting: (¼, ½, ¼) per axis on nested levels), or the plain mean of the fine values
//! within half a coarse spacing (part 20's down-sampling by nearest values; (⅓, ⅓, ⅓) on nested levels).
//! The nearest value alone (injection) makes the cycle diverge after red-black sweeps, which leave the
//! residual on one colour only; the mean costs as much as full weighting here and converges a little slower
//! (about 0.25 against 0.18 per cycle at 33³).
//!
//! **Smoothing** is in place, one pass per red-black sweep: the first colour on plane `k`, then the second on
//! plane `k − 1`, whose first-colour neighbours are final by then. That is exactly red-black Gauss–Seidel,
//! with each point read and written once per sweep instead of twice.
//!
//! **Determinism.** The smoother runs the components in parallel, each in a fixed plane order; every other
//! pass is parallel over planes of points and writes only its own plane; the residual norms add one partial
//! per plane in plane order. Results are bit-identical for any thread count.

use super::{Info, Restriction, SolveError, StopReason};
use multiversion::multiversion;
use rayon::prelude::*;

/// Right-hand sides solved together (the components of a vector field).
pub const COMPONENTS: usize = 3;

/// Planes of points per parallel task: enough work per task that waking a thread pays at 32³.
const PLANES_PER_TASK: usize = 4;

/// Parameters of [`BoxMultigrid`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BoxMultigridParams {
    /// Stop when the residual of the three components together, `(Σ_c ‖b_c − A x_c‖²)^½`, falls to this
    /// fraction of its value for the boundary values alone (interior zero).
    pub tolerance: f64,
    /// Give up after this many V-cycles.
    pub max_cycles: usize,
    /// Red-black Gauss–Seidel sweeps before the coarse correction.
    pub pre_sweeps: usize,
    /// Sweeps after it (black first: the adjoint order).
    pub post_sweeps: usize,
    /// How residuals go to the coarser level.
    pub restriction: Restriction,
    /// Symmetric sweeps that solve the coarsest level (at most 4 points per axis, so a few suffice).
    pub coarsest_sweeps: usize,
    /// Sweeps of the finest level alone before the first V-cycle, when the initial guess misses the
    /// tolerance. An initial guess that is already close, such as one extrapolated from earlier solutions,
    /// is often off by rough error that a sweep removes at a fraction of a cycle's cost; the cycles follow
    /// only if the tolerance is still missed. 0 turns this off.
    pub initial_sweeps: usize,
}

impl Default for BoxMultigridParams {
    fn default() -> Self {
        Self {
            tolerance: 1e-6,
            max_cycles: 100,
            pre_sweeps: 2,
            post_sweeps: 2,
            restriction: Restriction::FullWeighting,
            coarsest_sweeps: 16,
            initial_sweeps: 0,
        }
    }
}

/// A linear map along one axis whose outputs are each a weighted sum of a contiguous run of inputs: output
/// `o` is `Σ_t weights[offset[o] + t] · input[first[o] + t]`.
#[derive(Clone, Debug, Default)]
struct AxisMap {
    first: Vec<usize>,
    offset: Vec<usize>,
    weights: Vec<f64>,
}

impl AxisMap {
    fn outputs(&self) -> usize {
        self.first.len()
    }

    fn row(&self, o: usize) -> (usize, &[f64]) {
        (
            self.first[o],
            &self.weights[self.offset[o]..self.offset[o + 1]],
        )
    }

    fn push(&mut self, first: usize, weights: &[f64]) {
        if self.offset.is_empty() {
            self.offset.push(0);
        }
        self.first.push(first);
        self.weights.extend_from_slice(weights);
        self.offset.push(self.weights.len());
    }

    /// Linear interpolation from `coarse` points to `fine` points spanning the same interval.
    fn prolongation(fine: usize, coarse: usize) -> Self {
        let mut map = Self::default();
        for i in 0..fine {
            let (lower, frac) = coarse_position(i, fine, coarse);
            map.push(lower, &[1.0 - frac, frac]);
        }
        map
    }

    /// Restriction from `fine` to `coarse` points: the normalised transpose of
    /// [`prolongation`](Self::prolongation) (`FullWeighting`) or the mean of the fine points within half a
    /// coarse spacing (`Nearest`).
    fn restriction(fine: usize, coarse: usize, how: Restriction) -> Self {
        let mut map = Self::default();
        match how {
            Restriction::FullWeighting => {
                // Transpose: fine point i feeds coarse points lower (1 − f) and lower + 1 (f).
                let mut gathered: Vec<Vec<(usize, f64)>> = vec![Vec::new(); coarse];
                for i in 0..fine {
                    let (lower, frac) = coarse_position(i, fine, coarse);
                    if frac < 1.0 {
                        gathered[lower].push((i, 1.0 - frac));
                    }
                    if frac > 0.0 {
                        gathered[lower + 1].push((i, frac));
                    }
                }
                for run in gathered {
                    let total: f64 = run.iter().map(|&(_, w)| w).sum();
                    let weights: Vec<f64> = run.iter().map(|&(_, w)| w / total).collect();
                    map.push(run[0].0, &weights);
                }
            }
            Restriction::Nearest => {
                for c in 0..coarse {
                    // Fine points i with |i (coarse − 1) − c (fine − 1)| ≤ (fine − 1)/2, in integers.
                    let (centre, half) = (c * (fine - 1) * 2, fine - 1);
                    let run: Vec<usize> = (0..fine)
                        .filter(|&i| (2 * i * (coarse - 1)).abs_diff(centre) <= half)
                        .collect();
                    let w = vec![1.0 / run.len() as f64; run.len()];
                    map.push(run[0], &w);
                }
            }
        }
        map
    }
}

/// Where fine point `i` of `fine` lies among `coarse` points over the same interval: the coarse point at or
/// below it (at most `coarse − 2`) and the fraction of the way to the next, computed exactly.
fn coarse_position(i: usize, fine: usize, coarse: usize) -> (usize, f64) {
    let num = i * (coarse - 1);
    let lower = (num / (fine - 1)).min(coarse - 2);
    let frac = (num - lower * (fine - 1)) as f64 / (fine - 1) as f64;
    (lower, frac)
}

/// The transfers between a level and the next coarser one, per axis.
#[derive(Clone, Debug)]
struct Transfers {
    restrict: [AxisMap; 3],
    prolong: [AxisMap; 3],
}

/// One level: its shape, stencil and vectors (the components stacked: component `c`'s plane `k` is plane
/// `c·nz + k` of the array).
#[derive(Clone, Debug)]
struct BoxLevel {
    dims: [usize; 3],
    /// Coupling to the neighbours along each axis, `(h / H_a)²` with `h` the finest spacing.
    coupling: [f64; 3],
    /// The stencil's centre, `2 Σ_a coupling_a`, and its inverse.
    diagonal: f64,
    inv_diagonal: f64,
    x: Vec<f64>,
    b: Vec<f64>,
    /// The residual.
    t: Vec<f64>,
    /// Which points of a row along x a half-sweep updates, `[even x, odd x]`: interior points of that parity.
    masks: [Vec<bool>; 2],
    /// The interior points of a row along x.
    interior: Vec<bool>,
    /// To the next coarser level (none on the coarsest).
    down: Option<Transfers>,
}

impl BoxLevel {
    fn points(&self) -> usize {
        self.dims.iter().product()
    }
}

/// The solver: a hierarchy of box levels with their vectors, reused from solve to solve (see the module
/// documentation).
#[derive(Clone, Debug)]
pub struct BoxMultigrid {
    levels: Vec<BoxLevel>,
    params: BoxMultigridParams,
    /// Intermediate results of the axis-by-axis transfers.
    scratch: [Vec<f64>; 2],
}

impl BoxMultigrid {
    /// The hierarchy for a box of `dims` points (at least 3 along each axis: one interior point).
    ///
    /// # Errors
    /// [`SolveError::BadInput`] for a box without interior points or unusable parameters.
    pub fn new(dims: [usize; 3], params: BoxMultigridParams) -> Result<Self, SolveError> {
        if dims.iter().any(|&n| n < 3) {
            return Err(SolveError::BadInput(format!(
                "a box needs at least 3 points per axis, got {dims:?}"
            )));
        }
        if !(params.tolerance.is_finite() && params.tolerance > 0.0) {
            return Err(SolveError::BadInput(format!(
                "the tolerance must be positive, got {}",
                params.tolerance
            )));
        }
        if params.pre_sweeps + params.post_sweeps == 0 || params.coarsest_sweeps == 0 {
            return Err(SolveError::BadInput(
                "the V-cycle needs at least one smoothing sweep and one coarsest sweep".into(),
            ));
        }
        let fine = dims;
        let mut shapes = vec![dims];
        loop {
            let d = *shapes.last().expect("finest");
            let next = d.map(|n| if n >= 5 { n / 2 + 1 } else { n });
            if next == d {
                break;
            }
            shapes.push(next);
        }
        let levels = shapes
            .iter()
            .enumerate()
            .map(|(l, &d)| {
                let coupling: [f64; 3] = std::array::from_fn(|a| {
                    let ratio = (d[a] - 1) as f64 / (fine[a] - 1) as f64;
                    ratio * ratio
                });
                let len = COMPONENTS * d.iter().product::<usize>();
                let down = shapes.get(l + 1).map(|c| Transfers {
                    restrict: std::array::from_fn(|a| {
                        AxisMap::restriction(d[a], c[a], params.restriction)
                    }),
                    prolong: std::array::from_fn(|a| AxisMap::prolongation(d[a], c[a])),
                });
                let inside = |i: usize| i > 0 && i < d[0] - 1;
                BoxLevel {
                    masks: [0, 1].map(|s| (0..d[0]).map(|i| i % 2 == s && inside(i)).collect()),
                    interior: (0..d[0]).map(inside).collect(),
                    dims: d,
                    coupling,
                    diagonal: 2.0 * coupling.iter().sum::<f64>(),
                    inv_diagonal: 0.5 / coupling.iter().sum::<f64>(),
                    x: vec![0.0; len],
                    b: vec![0.0; len],
                    t: vec![0.0; len],
                    down,
                }
            })
            .collect();
        let len = COMPONENTS * fine.iter().product::<usize>();
        Ok(Self {
            levels,
            params,
            scratch: [vec![0.0; len], vec![0.0; len]],
        })
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        let vectors: usize = self
            .levels
            .iter()
            .map(|l| l.x.capacity() + l.b.capacity() + l.t.capacity())
            .sum::<usize>()
            + self.scratch.iter().map(Vec::capacity).sum::<usize>();
        vectors * 8
    }

    /// The box's points per axis.
    pub fn dims(&self) -> [usize; 3] {
        self.levels[0].dims
    }

    /// The parameters.
    pub fn params(&self) -> &BoxMultigridParams {
        &self.params
    }

    /// The right-hand sides `b` and the solution `x` of the finest level, to be filled before
    /// [`solve`](Self::solve): component `c` of point `i` (x fastest) at `c·N + i`, with `N` the box's points.
    /// `b` is `−h² ∇²x` (unit spacing in the stencil); its boundary entries are ignored. `x` holds the
    /// Dirichlet values on the boundary layer and the initial guess inside, and the solution after the solve.
    pub fn fields_mut(&mut self) -> (&mut [f64], &mut [f64]) {
        let f = &mut self.levels[0];
        (&mut f.b, &mut f.x)
    }

    /// Exchanges the finest level's `x` (see [`fields_mut`](Self::fields_mut)) with `v`, which must have its
    /// length: a caller that keeps solutions (or builds the next initial guess) in buffers of its own moves
    /// them in and out without copying.
    ///
    /// # Panics
    /// If `v` has another length.
    pub fn swap_solution(&mut self, v: &mut Vec<f64>) {
        let x = &mut self.levels[0].x;
        assert_eq!(v.len(), x.len(), "a solution of the box's length");
        std::mem::swap(x, v);
    }

    /// The solution of the finest level (see [`fields_mut`](Self::fields_mut)).
    pub fn solution(&self) -> &[f64] {
        &self.levels[0].x
    }

    /// Solves for the interior by V-cycles from the initial guess in [`fields_mut`](Self::fields_mut)'s `x`
    /// (after the `initial_sweeps`, if any), leaving its boundary values untouched. The returned
    /// [`Info`] counts each V-cycle, and the initial sweeps when they ran, as one iteration, with one entry of
    /// its history each.
    ///
    /// # Errors
    /// [`SolveError::BadInput`] for non-finite data; [`SolveError::NoConvergence`] after `max_cycles`;
    /// [`SolveError::Breakdown`] if the residual becomes non-finite.
    pub fn solve(&mut self) -> Result<Info, SolveError> {
        let [reference, first] = {
            let f = &self.levels[0];
            norms(f, &f.b, &f.x, true).map(f64::sqrt)
        };
        if !reference.is_finite() {
            return Err(SolveError::BadInput(
                "non-finite right-hand side or boundary values".into(),
            ));
        }
        if reference == 0.0 {
            // Zero data: the solution is zero.
            let f = &mut self.levels[0];
            let planes = COMPONENTS * f.dims[2];
            zero_interior(f.dims, planes, &mut f.x);
            return Ok(Info {
                iterations: 0,
                residual: 0.0,
                history: vec![0.0],
                stop: StopReason::ZeroRhs,
            });
        }
        let mut history = vec![first / reference];
        if !history[0].is_finite() {
            return Err(SolveError::BadInput("non-finite initial guess".into()));
        }
        let mut iterations = 0;
        if self.params.initial_sweeps > 0 && history[0] > self.params.tolerance {
            smooth(&mut self.levels[0], self.params.initial_sweeps, false);
            iterations += 1;
            history.push(self.checked_residual(reference, iterations)?);
        }
        let mut cycles = 0;
        while *history.last().expect("history") > self.params.tolerance {
            if cycles >= self.params.max_cycles {
                return Err(SolveError::NoConvergence {
                    iterations,
                    residual: *history.last().expect("history"),
                    tolerance: self.params.tolerance,
                });
            }
            self.vcycle();
            cycles += 1;
            iterations += 1;
            history.push(self.checked_residual(reference, iterations)?);
        }
        Ok(Info {
            iterations,
            residual: *history.last().expect("history"),
            history,
            stop: StopReason::Converged,
        })
    }

    /// `‖b − A x‖ / reference` of the finest level after iteration `iteration`, or the breakdown if it is not
    /// finite.
    fn checked_residual(&self, reference: f64, iteration: usize) -> Result<f64, SolveError> {
        let f = &self.levels[0];
        let r = norms(f, &f.b, &f.x, false)[1].sqrt() / reference;
        if r.is_finite() {
            Ok(r)
        } else {
            Err(SolveError::Breakdown {
                iteration,
                detail: format!("the residual became {r}"),
            })
        }
    }

    /// One V-cycle on the finest level's vectors.
    fn vcycle(&mut self) {
        let p = self.params;
        let last = self.levels.len() - 1;
        let [s0, s1] = &mut self.scratch;
        for l in 0..last {
            let (lo, hi) = self.levels.split_at_mut(l + 1);
            let (fine, coarse) = (&mut lo[l], &mut hi[0]);
            smooth(fine, p.pre_sweeps, false);
            let mut t = std::mem::take(&mut fine.t);
            residual(fine, &fine.b, &fine.x, &mut t);
            let down = fine.down.as_ref().expect("a coarser level");
            let [rx, ry, rz] = &down.restrict;
            let d = fine.dims;
            let d1 = [rx.outputs(), d[1], d[2]];
            let d2 = [d1[0], ry.outputs(), d[2]];
            apply_axis(rx, 0, d, &t, s0, false);
            apply_axis(ry, 1, d1, s0, s1, false);
            apply_axis(rz, 2, d2, s1, &mut coarse.b, false);
            fine.t = t;
            coarse.x.fill(0.0);
        }
        {
            let c = &mut self.levels[last];
            let half = p.coarsest_sweeps.div_ceil(2);
            smooth(c, half, false);
            smooth(c, half, true);
        }
        for l in (0..last).rev() {
            let (lo, hi) = self.levels.split_at_mut(l + 1);
            let (fine, coarse) = (&mut lo[l], &hi[0]);
            let down = fine.down.as_ref().expect("a coarser level");
            let [px, py, pz] = &down.prolong;
            let c = coarse.dims;
            let c1 = [px.outputs(), c[1], c[2]];
            let c2 = [c1[0], py.outputs(), c[2]];
            apply_axis(px, 0, c, &coarse.x, s0, false);
            apply_axis(py, 1, c1, s0, s1, false);
            // The correction is exactly zero on the boundary layer (it interpolates the coarse level's zero
            // boundary), so adding it everywhere leaves the boundary values as they are.
            apply_axis(pz, 2, c2, s1, &mut fine.x, true);
            smooth(fine, p.post_sweeps, true);
        }
    }
}

/// Zeroes the interior points of every component of `v`.
fn zero_interior(dims: [usize; 3], planes: usize, v: &mut [f64]) {
    let [nx, ny, nz] = dims;
    v.par_chunks_mut(nx * ny)
        .take(planes)
        .enumerate()
        .for_each(|(p, plane)| {
            let k = p % nz;
            if k == 0 || k == nz - 1 {
                return;
            }
            for row in plane.chunks_mut(nx).take(ny - 1).skip(1) {
                row[1..nx - 1].fill(0.0);
            }
        });
}

/// `sweeps` red-black Gauss–Seidel sweeps of the level's `x` (red then black, or black then red when
/// `reverse`), in place, the components in parallel. One pass over the planes does a whole sweep: the first
/// colour on plane `k`, then the second on plane `k − 1`, whose neighbours of the first colour (planes
/// `k − 2` to `k`) are then all updated. That is the same arithmetic as two half-sweeps over the whole box,
/// with each point read and written once per sweep instead of twice.
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2+fma"))]
fn smooth(level: &mut BoxLevel, sweeps: usize, reverse: bool) {
    let (first, second) = if reverse { (1, 0) } else { (0, 1) };
    let n = level.points();
    let nz = level.dims[2];
    let (b, x) = (&level.b, &mut level.x);
    let level = Stencil {
        dims: level.dims,
        coupling: level.coupling,
        inv_diagonal: level.inv_diagonal,
        masks: &level.masks,
    };
    x.par_chunks_mut(n).zip(b.par_chunks(n)).for_each(|(x, b)| {
        let mut plane = vec![0.0; level.dims[0] * level.dims[1]];
        for _ in 0..sweeps {
            for k in 1..nz {
                if k < nz - 1 {
                    relax_plane(&level, x, b, k, first, &mut plane);
                }
                if k >= 2 {
                    relax_plane(&level, x, b, k - 1, second, &mut plane);
                }
            }
        }
    });
}

/// What a sweep needs of a level.
struct Stencil<'a> {
    dims: [usize; 3],
    coupling: [f64; 3],
    inv_diagonal: f64,
    masks: &'a [Vec<bool>; 2],
}

/// The Gauss–Seidel update of the points of plane `k` (of one component's box `x`) whose coordinate sum has
/// the parity `colour`, in place. They read only points of the other colour. Whole rows are computed (the
/// masks keep the boundary points), so that rows of a multiple of the vector width need no scalar tail;
/// `update` is scratch for one plane.
fn relax_plane(
    level: &Stencil,
    x: &mut [f64],
    b: &[f64],
    k: usize,
    colour: usize,
    update: &mut [f64],
) {
    let [nx, ny, _] = level.dims;
    let plane = nx * ny;
    let [wx, wy, wz] = level.coupling;
    let inv = level.inv_diagonal;
    // The new plane from the values before it, then written back at once. Point (i, j, k) is updated when
    // i + j + k has the parity `colour`; its neighbours have the other parity, which this pass leaves alone,
    // so computing every row of the plane before writing any back changes nothing.
    for j in 1..ny - 1 {
        let r = RowNeighbours::new(x, level.dims, k, j);
        let rhs = &b[k * plane + j * nx..][..nx];
        let mask = &level.masks[(colour + j + k) % 2][..nx];
        for (i, u) in update[j * nx..][..nx].iter_mut().enumerate() {
            let new = (rhs[i]
                + wx * (r.west[i] + r.east[i])
                + wy * (r.south[i] + r.north[i])
                + wz * (r.down[i] + r.up[i]))
                * inv;
            *u = if mask[i] { new } else { r.centre[i] };
        }
    }
    let interior_rows = nx..(ny - 1) * nx;
    x[k * plane..][interior_rows.clone()].copy_from_slice(&update[interior_rows]);
}

/// The neighbours of every point of a row along x: the row itself, the points before and after each
/// (west, east: the first and last reach into the rows beside it), and the rows beside it in y (south,
/// north) and z (down, up). Each has the row's length.
struct RowNeighbours<'a> {
    centre: &'a [f64],
    west: &'a [f64],
    east: &'a [f64],
    south: &'a [f64],
    north: &'a [f64],
    down: &'a [f64],
    up: &'a [f64],
}

impl<'a> RowNeighbours<'a> {
    /// Row `j` of plane `p` (plane offsets within `v`); the caller ensures it is an interior row of an
    /// interior plane.
    #[inline(always)]
    fn new(v: &'a [f64], dims: [usize; 3], p: usize, j: usize) -> Self {
        let [nx, ny, _] = dims;
        let plane = nx * ny;
        let start = p * plane + j * nx;
        let at = |s: usize| &v[s..s + nx];
        RowNeighbours {
            centre: at(start),
            west: at(start - 1),
            east: at(start + 1),
            south: at(start - nx),
            north: at(start + nx),
            down: at(start - plane),
            up: at(start + plane),
        }
    }
}

/// The residual `b − A x` of row `j` of plane `p` into `out` (the row's length), zero at the row's ends.
#[inline(always)]
fn row_residual(level: &BoxLevel, b: &[f64], x: &[f64], p: usize, j: usize, out: &mut [f64]) {
    let [nx, ny, _] = level.dims;
    let [wx, wy, wz] = level.coupling;
    let diagonal = level.diagonal;
    let interior = &level.interior[..nx];
    let r = RowNeighbours::new(x, level.dims, p, j);
    let rhs = &b[p * nx * ny + j * nx..][..nx];
    let out = &mut out[..nx];
    for i in 0..nx {
        let value = rhs[i]
            + wx * (r.west[i] + r.east[i])
            + wy * (r.south[i] + r.north[i])
            + wz * (r.down[i] + r.up[i])
            - diagonal * r.centre[i];
        out[i] = if interior[i] { value } else { 0.0 };
    }
}

/// `r = b − A x` on the interior points (zero on the boundary layer).
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2+fma"))]
fn residual(level: &BoxLevel, b: &[f64], x: &[f64], r: &mut [f64]) {
    let [nx, ny, nz] = level.dims;
    let plane = nx * ny;
    r[..COMPONENTS * nz * plane]
        .par_chunks_mut(plane)
        .enumerate()
        .with_min_len(PLANES_PER_TASK)
        .for_each(|(p, o)| {
            let k = p % nz;
            for (j, o) in o.chunks_exact_mut(nx).enumerate() {
                if k == 0 || k == nz - 1 || j == 0 || j == ny - 1 {
                    o.fill(0.0);
                } else {
                    row_residual(level, b, x, p, j, o);
                }
            }
        });
}

/// `[‖b − A x₀‖², ‖b − A x‖²]` in one pass without storing the residual, where `x₀` is `x` with a zero
/// interior (its boundary values alone: what the solve measures its residual against); the first is 0 unless
/// `reference`. Only the interior points next to the boundary layer see it.
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2+fma"))]
fn norms(level: &BoxLevel, b: &[f64], x: &[f64], reference: bool) -> [f64; 2] {
    let [nx, ny, nz] = level.dims;
    let plane = nx * ny;
    let [wx, wy, wz] = level.coupling;
    let partials: Vec<[f64; 2]> = (0..COMPONENTS * nz)
        .into_par_iter()
        .with_min_len(PLANES_PER_TASK)
        .map(|p| {
            let k = p % nz;
            if k == 0 || k == nz - 1 {
                return [0.0; 2];
            }
            let mut lanes = [[0.0; 8]; 2];
            let mut row = vec![0.0; nx];
            for j in 1..ny - 1 {
                row_residual(level, b, x, p, j, &mut row);
                add_squares(&row, &mut lanes[1]);
                if !reference {
                    continue;
                }
                let r = RowNeighbours::new(x, level.dims, p, j);
                row.copy_from_slice(&b[p * plane + j * nx..][..nx]);
                row[1] += wx * r.centre[0];
                row[nx - 2] += wx * r.centre[nx - 1];
                let mut add = |w: f64, side: &[f64]| {
                    for (v, &s) in row.iter_mut().zip(side) {
                        *v += w * s;
                    }
                };
                if j == 1 {
                    add(wy, r.south);
                }
                if j == ny - 2 {
                    add(wy, r.north);
                }
                if k == 1 {
                    add(wz, r.down);
                }
                if k == nz - 2 {
                    add(wz, r.up);
                }
                row[0] = 0.0;
                row[nx - 1] = 0.0;
                add_squares(&row, &mut lanes[0]);
            }
            lanes.map(|l| l.iter().sum())
        })
        .collect();
    partials
        .iter()
        .fold([0.0; 2], |a, p| [a[0] + p[0], a[1] + p[1]])
}

/// Adds the squares of `v` to eight running sums, entry `t` to sum `t mod 8` (a fixed order that vectorises).
fn add_squares(v: &[f64], lanes: &mut [f64; 8]) {
    let mut blocks = v.chunks_exact(8);
    for block in &mut blocks {
        for (l, &x) in lanes.iter_mut().zip(block) {
            *l += x * x;
        }
    }
    for (l, &x) in lanes.iter_mut().zip(blocks.remainder()) {
        *l += x * x;
    }
}

/// Applies `map` along `axis` of `input` (shape `dims`, components stacked along z) into `output`, whose
/// shape is `dims` with that axis's length replaced by the map's outputs; adds into `output` when `add`.
fn apply_axis(
    map: &AxisMap,
    axis: usize,
    dims: [usize; 3],
    input: &[f64],
    output: &mut [f64],
    add: bool,
) {
    let mut out_dims = dims;
    out_dims[axis] = map.outputs();
    let [ox, oy, oz] = out_dims;
    let (in_plane, out_plane) = (dims[0] * dims[1], ox * oy);
    output[..COMPONENTS * oz * out_plane]
        .par_chunks_mut(out_plane)
        .enumerate()
        .with_min_len(PLANES_PER_TASK)
        .for_each(|(p, o)| match axis {
            0 => {
                let src = &input[p * in_plane..(p + 1) * in_plane];
                for (orow, irow) in o.chunks_exact_mut(ox).zip(src.chunks_exact(dims[0])) {
                    for (c, o) in orow.iter_mut().enumerate() {
                        let (first, w) = map.row(c);
                        let v = match *w {
                            [a] => a * irow[first],
                            [a, b] => a * irow[first] + b * irow[first + 1],
                            [a, b, c] => {
                                a * irow[first] + b * irow[first + 1] + c * irow[first + 2]
                            }
                            _ => w.iter().zip(&irow[first..]).map(|(&w, &x)| w * x).sum(),
                        };
                        *o = if add { *o + v } else { v };
                    }
                }
            }
            1 => {
                let src = &input[p * in_plane..(p + 1) * in_plane];
                for (c, orow) in o.chunks_exact_mut(ox).enumerate() {
                    let (first, w) = map.row(c);
                    combine(orow, w, add, |t| &src[(first + t) * ox..]);
                }
            }
            _ => {
                let (comp, k) = (p / oz, p % oz);
                let (first, w) = map.row(k);
                let base = comp * dims[2] + first;
                combine(o, w, add, |t| &input[(base + t) * in_plane..]);
            }
        });
}

/// `o = Σ_t w_t · line(t)` over whole lines (rows or planes), added to `o` when `add`.
fn combine<'a>(o: &mut [f64], w: &[f64], add: bool, line: impl Fn(usize) -> &'a [f64]) {
    for (t, &w) in w.iter().enumerate() {
        let src = &line(t)[..o.len()];
        if t == 0 && !add {
            for (o, &v) in o.iter_mut().zip(src) {
                *o = w * v;
            }
        } else {
            for (o, &v) in o.iter_mut().zip(src) {
                *o += w * v;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether point `i` of a box of `dims` points lies on its boundary layer.
    fn on_boundary(dims: [usize; 3], i: usize) -> bool {
        let c = [
            i % dims[0],
            (i / dims[0]) % dims[1],
            i / (dims[0] * dims[1]),
        ];
        (0..3).any(|a| c[a] == 0 || c[a] == dims[a] - 1)
    }

    /// Exact solution of a discrete problem: `x = u(p)` at every point for a smooth `u`, `b = A u` inside.
    fn discrete_problem(dims: [usize; 3]) -> (Vec<f64>, Vec<f64>) {
        let n: usize = dims.iter().product();
        let u = |c: usize, i: usize| {
            let (x, y, z) = (
                (i % dims[0]) as f64,
                ((i / dims[0]) % dims[1]) as f64,
                (i / (dims[0] * dims[1])) as f64,
            );
            (0.31 * x + 0.17 * c as f64).sin() * (0.23 * y).cos() + 0.05 * z * (x - y) + c as f64
        };
        let exact: Vec<f64> = (0..COMPONENTS * n).map(|q| u(q / n, q % n)).collect();
        let mut b = vec![0.0; COMPONENTS * n];
        let strides = [1, dims[0], dims[0] * dims[1]];
        for c in 0..COMPONENTS {
            for i in 0..n {
                if on_boundary(dims, i) {
                    continue;
                }
                let q = c * n + i;
                b[q] = (0..3)
                    .map(|a| 2.0 * exact[q] - exact[q - strides[a]] - exact[q + strides[a]])
                    .sum();
            }
        }
        (b, exact)
    }

    /// The largest difference between a solution and the exact one.
    fn max_error(solution: &[f64], exact: &[f64]) -> f64 {
        solution
            .iter()
            .zip(exact)
            .map(|(a, e)| (a - e).abs())
            .fold(0.0, f64::max)
    }

    /// Solves the discrete problem from boundary values and a zero interior; returns the cycles and the
    /// largest error against the exact discrete solution.
    fn solve(dims: [usize; 3], restriction: Restriction) -> (usize, f64, Vec<f64>) {
        let (b, exact) = discrete_problem(dims);
        let mut mg = BoxMultigrid::new(
            dims,
            BoxMultigridParams {
                tolerance: 1e-10,
                restriction,
                ..Default::default()
            },
        )
        .expect("hierarchy");
        let (mb, mx) = mg.fields_mut();
        mb.copy_from_slice(&b);
        mx.copy_from_slice(&exact);
        zero_interior(dims, COMPONENTS * dims[2], mx);
        let info = mg.solve().expect("converges");
        let error = max_error(mg.solution(), &exact);
        (info.iterations, error, info.history)
    }

    /// Nested (odd) and non-nested (even, mixed) box sizes converge at a multigrid rate to the discrete
    /// solution: the error bound is the tolerance times the solution's scale (a few units) with room for the
    /// condition number; the cycle bound allows a factor of about 0.25 per cycle (0.1–0.2 is typical for
    /// V(2,2) with red-black Gauss–Seidel).
    #[test]
    fn converges_on_nested_and_non_nested_boxes() {
        for dims in [[33, 33, 33], [32, 32, 32], [20, 27, 13], [5, 40, 9]] {
            for restriction in [Restriction::FullWeighting, Restriction::Nearest] {
                let (cycles, error, history) = solve(dims, restriction);
                assert!(error < 1e-7, "{dims:?} {restriction:?}: error {error:e}");
                assert!(
                    cycles <= 17,
                    "{dims:?} {restriction:?}: {cycles} cycles, history {history:?}"
                );
            }
        }
    }

    /// Initial sweeps go before the first cycle and count as an iteration. The start is the exact discrete
    /// solution plus rough (pseudo-random, point-to-point) error, as an extrapolated guess has: one
    /// Gauss–Seidel sweep takes most of such a residual (a factor of 2 is a loose bound; the smoothing
    /// factor of red-black Gauss–Seidel is 0.25 for the roughest modes), so a tolerance above what is left
    /// needs no V-cycle at all, and a tight one is still met by the cycles after it.
    #[test]
    fn initial_sweeps_remove_rough_error_first() {
        let dims = [17, 20, 15];
        let (b, exact) = discrete_problem(dims);
        let n: usize = dims.iter().product();
        let start = |tolerance: f64| {
            let params = BoxMultigridParams {
                tolerance,
                initial_sweeps: 1,
                ..Default::default()
            };
            let mut mg = BoxMultigrid::new(dims, params).expect("hierarchy");
            let (mb, mx) = mg.fields_mut();
            mb.copy_from_slice(&b);
            for (q, x) in mx.iter_mut().enumerate() {
                let rough =
                    ((q as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40) as f64 / 16_777_216.0;
                let noise = if on_boundary(dims, q % n) {
                    0.0
                } else {
                    1e-3 * (rough - 0.5)
                };
                *x = exact[q] + noise;
            }
            mg
        };
        let solve = |tolerance: f64| {
            let mut mg = start(tolerance);
            let info = mg.solve().expect("converges");
            let error = max_error(mg.solution(), &exact);
            (info, error, mg.solution().to_vec())
        };
        let (tight, error, _) = solve(1e-10);
        assert_eq!(tight.history.len(), tight.iterations + 1);
        assert!(
            tight.history[1] < 0.5 * tight.history[0],
            "history {:?}",
            tight.history
        );
        assert!(tight.residual <= 1e-10 && error < 1e-7, "error {error:e}");
        let tolerance = 0.5 * tight.history[0];
        let (loose, _, solution) = solve(tolerance);
        assert_eq!(loose.iterations, 1, "history {:?}", loose.history);
        assert!(loose.residual <= tolerance);
        // That iteration was the sweep alone, not a V-cycle.
        let mut swept = start(tolerance);
        smooth(&mut swept.levels[0], 1, false);
        assert!(solution == swept.solution(), "not one sweep's result");
    }

    /// The boundary layer keeps its values bit for bit.
    #[test]
    fn boundary_values_are_left_alone() {
        let dims = [18, 11, 14];
        let (b, exact) = discrete_problem(dims);
        let mut mg = BoxMultigrid::new(dims, BoxMultigridParams::default()).expect("hierarchy");
        let (mb, mx) = mg.fields_mut();
        mb.copy_from_slice(&b);
        mx.fill(0.0);
        let n: usize = dims.iter().product();
        for q in 0..COMPONENTS * n {
            if on_boundary(dims, q % n) {
                mx[q] = exact[q];
            }
        }
        let before = mg.solution().to_vec();
        mg.solve().expect("converges");
        for (q, (&after, &was)) in mg.solution().iter().zip(&before).enumerate() {
            if on_boundary(dims, q % n) {
                assert_eq!(after.to_bits(), was.to_bits(), "point {q}");
            }
        }
    }

    /// The plane-lagged in-place sweep is exactly red-black Gauss–Seidel: two half-sweeps over the whole
    /// box, written plainly, give the same bits.
    #[test]
    fn a_sweep_is_red_black_gauss_seidel() {
        let dims = [9, 7, 6];
        let mut mg = BoxMultigrid::new(dims, BoxMultigridParams::default()).expect("hierarchy");
        let level = &mut mg.levels[0];
        level.coupling = [1.0, 0.7, 1.3];
        level.inv_diagonal = 0.5 / 3.0;
        for (q, (b, x)) in level.b.iter_mut().zip(&mut level.x).enumerate() {
            *b = ((q * 37) % 11) as f64 - 5.0;
            *x = ((q * 13) % 7) as f64 * 0.25;
        }
        let mut expected = level.x.clone();
        let (b, [wx, wy, wz], inv) = (level.b.clone(), level.coupling, level.inv_diagonal);
        let [nx, ny, nz] = dims;
        let n = nx * ny * nz;
        for colour in [1, 0] {
            for c in 0..COMPONENTS {
                for k in 1..nz - 1 {
                    for j in 1..ny - 1 {
                        for i in 1..nx - 1 {
                            if (i + j + k) % 2 != colour {
                                continue;
                            }
                            let q = c * n + i + nx * (j + ny * k);
                            let e = &expected;
                            expected[q] = (b[q]
                                + wx * (e[q - 1] + e[q + 1])
                                + wy * (e[q - nx] + e[q + nx])
                                + wz * (e[q - nx * ny] + e[q + nx * ny]))
                                * inv;
                        }
                    }
                }
            }
        }
        smooth(level, 1, true);
        for (q, (a, e)) in level.x.iter().zip(&expected).enumerate() {
            assert_eq!(a.to_bits(), e.to_bits(), "entry {q}");
        }
    }

    #[test]
    fn bad_input_is_an_error() {
        assert!(BoxMultigrid::new([2, 9, 9], BoxMultigridParams::default()).is_err());
        let mut mg =
            BoxMultigrid::new([5, 5, 5], BoxMultigridParams::default()).expect("hierarchy");
        mg.fields_mut().0[62] = f64::NAN;
        assert!(matches!(mg.solve(), Err(SolveError::BadInput(_))));
    }

    #[test]
    fn transfers_are_linear_interpolation_and_its_normalised_transpose() {
        // Nested: 9 → 5 points.
        let p = AxisMap::prolongation(9, 5);
        assert_eq!(p.row(3), (1, &[0.5, 0.5][..]));
        assert_eq!(p.row(4), (2, &[1.0, 0.0][..]));
        let r = AxisMap::restriction(9, 5, Restriction::FullWeighting);
        assert_eq!(r.row(2), (3, &[0.25, 0.5, 0.25][..]));
        let nearest = AxisMap::restriction(9, 5, Restriction::Nearest);
        assert_eq!(nearest.row(2), (3, &[1.0 / 3.0; 3][..]));
        // Non-nested: 8 → 5 points; every restriction row sums to 1.
        let r = AxisMap::restriction(8, 5, Restriction::FullWeighting);
        for c in 0..5 {
            let s: f64 = r.row(c).1.iter().sum();
            assert!((s - 1.0).abs() < 1e-15);
        }
    }
}
