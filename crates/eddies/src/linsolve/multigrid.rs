//! Geometric multigrid for the Poisson operator on cell-centred flagged grids (Briggs, Henson & McCormick
//! 2000, *A Multigrid Tutorial*; the coarsening of flags after McAdams, Sifakis & Teran 2010, §4).
//!
//! **Hierarchy.** Each level halves the resolution (rounding up). A coarse cell is Dirichlet if any of its
//! `2^D` children is, otherwise an unknown if any child is, otherwise solid; its operator is the same
//! Laplacian re-discretised with spacing `2h`. Coarsening stops when no axis has more than
//! [`MultigridParams::coarsest_size`] cells (or nothing would be left to solve).
//!
//! **Cycle.** A V-cycle in the correction scheme: smooth, restrict the residual, solve for the correction on
//! the coarser level (recursively), interpolate it back and add it, smooth again. The post-smoother runs the
//! pre-smoother's sweeps in the reverse order and restriction is the scaled transpose of prolongation, so the
//! V-cycle with a zero initial guess is a symmetric positive definite operator: a valid preconditioner for
//! conjugate gradients ([`MultigridPreconditioner`], MGPCG).
//!
//! **Transfers.** Prolongation is multilinear (weights 3/4 and 1/4 per axis); a Dirichlet value is never
//! overwritten unless [`MultigridParams::preserve_boundary`] is off (the naive up-sampler that Gourlay's part
//! 20, part 20, warns against). Restriction is full weighting (the transpose of prolongation, weights
//! (1, 3, 3, 1)/8 per axis) or nearest (the mean of the `2^D` children: "faster, less accurate", part 20).

use super::poisson::{CellKind, Layout, PoissonOperator, Row};
use multiversion::multiversion;
use rayon::prelude::*;
use std::sync::Arc;

use super::poisson::{residual, residual_row};
use super::vector::CHUNK;
use super::{check_vector, Info, LinearOperator, Preconditioner, SolveError, StopReason};
use crate::grid::Real;

/// The smoother of each level.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Smoother {
    /// Red-black Gauss–Seidel: red cells (even coordinate sum) first, then black; reversed after the coarse
    /// correction.
    RedBlackGaussSeidel,
    /// Weighted (damped) Jacobi with the given weight (2/3 is the classic choice for 2D, 6/7 for 3D).
    WeightedJacobi {
        /// Fraction of the Jacobi update applied, in (0, 1].
        weight: f64,
    },
}

/// How residuals (and, in full multigrid, right-hand sides and boundary values) go to the coarser level.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Restriction {
    /// The transpose of multilinear prolongation: weights (1, 3, 3, 1)/8 per axis over a `4^D` block.
    #[default]
    FullWeighting,
    /// The mean of the `2^D` children: cheaper, and not the transpose of prolongation.
    Nearest,
}

/// Parameters of [`Multigrid`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MultigridParams {
    /// Stop when `‖b − A x‖ / ‖b − A x₀‖` (with `x₀` the boundary values alone) falls to this.
    pub tolerance: f64,
    /// Give up after this many cycles.
    pub max_cycles: usize,
    /// The smoother of every level.
    pub smoother: Smoother,
    /// Smoothing sweeps before the coarse correction (a red-black sweep is a red and a black half-sweep).
    pub pre_sweeps: usize,
    /// Smoothing sweeps after the coarse correction.
    pub post_sweeps: usize,
    /// How residuals are restricted.
    pub restriction: Restriction,
    /// Start from a full-multigrid guess (solve the coarsest level, interpolate, one V-cycle per level).
    pub full_multigrid: bool,
    /// Leave Dirichlet values alone when interpolating a full solution to a finer level (part 20).
    pub preserve_boundary: bool,
    /// Coarsen until no axis has more cells than this.
    pub coarsest_size: usize,
    /// Symmetric Gauss–Seidel sweeps that solve the coarsest level.
    pub coarsest_sweeps: usize,
}

impl Default for MultigridParams {
    fn default() -> Self {
        MultigridParams {
            tolerance: 1e-6,
            max_cycles: 100,
            smoother: Smoother::RedBlackGaussSeidel,
            pre_sweeps: 2,
            post_sweeps: 2,
            restriction: Restriction::FullWeighting,
            full_multigrid: false,
            preserve_boundary: true,
            coarsest_size: 4,
            coarsest_sweeps: 24,
        }
    }
}

/// One level of the hierarchy: its operator and vectors, in precision `T`.
#[derive(Clone, Debug)]
struct Level<const D: usize, T> {
    /// The level's operator; the finest is shared with the solver that owns the hierarchy.
    op: Arc<PoissonOperator<D>>,
    /// The cells around the unknowns that a correction is extended into ([`extend`]); none on the finest level.
    ghost: Ghosts,
    b: Vec<T>,
    x: Vec<T>,
    /// Residual and smoothing ping-pong buffer.
    t: Vec<T>,
    /// Restriction's intermediate: coarse along x, fine across (empty on the finest level).
    half: Vec<T>,
    /// `1 / A_ii` in units of `h²` for the unknowns, 0 elsewhere (the smoother multiplies by it).
    inv: Vec<T>,
}

/// A geometric multigrid solver (see the module documentation): standalone via [`solve`](Self::solve) and
/// [`solve_vector`](Self::solve_vector), or as the preconditioner of MGPCG.
///
/// `T` is the precision of the cycle's vectors: f64 for the standalone solver, f32 for MGPCG's preconditioner
/// (which halves its memory traffic; the outer conjugate gradients stay in f64, as in McAdams et al. 2010).
#[derive(Clone, Debug)]
pub struct Multigrid<const D: usize, T = f64> {
    levels: Vec<Level<D, T>>,
    params: MultigridParams,
}

/// Checks the parameters that [`Multigrid`] cannot work with.
fn check_params(params: &MultigridParams) -> Result<(), SolveError> {
    if let Smoother::WeightedJacobi { weight } = params.smoother {
        if !(weight > 0.0 && weight <= 1.0) {
            return Err(SolveError::BadInput(format!(
                "the Jacobi weight must be in (0, 1], got {weight}"
            )));
        }
    }
    if params.pre_sweeps + params.post_sweeps == 0 {
        return Err(SolveError::BadInput(
            "multigrid needs at least one smoothing sweep".into(),
        ));
    }
    if params.coarsest_size == 0 {
        return Err(SolveError::BadInput(
            "the coarsest size must be at least 1".into(),
        ));
    }
    Ok(())
}

impl<const D: usize> Multigrid<D> {
    /// The hierarchy of `op` (which it keeps as its finest level), in double precision.
    ///
    /// # Errors
    /// [`SolveError::BadInput`] for parameters out of range.
    pub fn new(op: PoissonOperator<D>, params: MultigridParams) -> Result<Self, SolveError> {
        Self::build(Arc::new(op), params)
    }
}

impl<const D: usize, T: Real> Multigrid<D, T> {
    /// The hierarchy of `op` in precision `T`.
    fn build(op: Arc<PoissonOperator<D>>, params: MultigridParams) -> Result<Self, SolveError> {
        check_params(&params)?;
        let mut mg = Multigrid {
            levels: Vec::new(),
            params,
        };
        mg.set_shared_operator(op);
        Ok(mg)
    }

    /// Rebuilds the hierarchy for a new finest operator (new cell flags), keeping the vectors of every level
    /// whose size is unchanged: a simulation calls this each step instead of allocating a new solver.
    pub fn set_operator(&mut self, op: PoissonOperator<D>) {
        self.set_shared_operator(Arc::new(op));
    }

    /// As [`set_operator`](Self::set_operator), for an operator that its caller keeps too (no copy).
    pub(crate) fn set_shared_operator(&mut self, op: Arc<PoissonOperator<D>>) {
        let params = self.params;
        let mut old = std::mem::take(&mut self.levels).into_iter();
        // `half` is 0 on the finest level, which is never extended into (only coarse corrections are).
        let mut level = |op: Arc<PoissonOperator<D>>, half: usize| {
            let n = op.layout().len();
            let ghost = if half == 0 {
                Ghosts::default()
            } else {
                ghost_coefficients(&op)
            };
            let inv = inverse_diagonal(&op);
            match old.next() {
                Some(l) if l.x.len() == n && l.half.len() == half => Level {
                    op,
                    ghost,
                    inv,
                    ..l
                },
                _ => Level {
                    ghost,
                    inv,
                    op,
                    b: vec![T::ZERO; n],
                    x: vec![T::ZERO; n],
                    t: vec![T::ZERO; n],
                    half: vec![T::ZERO; half],
                },
            }
        };
        let mut levels = vec![level(op, 0)];
        loop {
            let fine = &levels.last().expect("the finest level").op;
            if fine
                .layout()
                .dims
                .iter()
                .all(|&d| d <= params.coarsest_size)
            {
                break;
            }
            let fine_rows = fine.layout().rows();
            let Some(op) = coarsen(fine) else { break };
            let half = fine_rows * op.layout().row_len();
            levels.push(level(Arc::new(op), half));
        }
        // Only the coarsest level projects out its null space (the finest has its own labels).
        if levels.len() > 1 {
            let coarsest = &mut levels.last_mut().expect("a coarse level").op;
            Arc::get_mut(coarsest)
                .expect("coarse operators are the hierarchy's own")
                .label_null_space();
        }
        self.levels = levels;
    }

    /// The finest level's operator.
    pub fn operator(&self) -> &PoissonOperator<D> {
        &self.levels[0].op
    }

    /// Number of levels, the finest included.
    pub fn levels(&self) -> usize {
        self.levels.len()
    }

    /// Cells per axis of each level, finest first.
    pub fn level_dims(&self) -> Vec<[usize; D]> {
        self.levels.iter().map(|l| l.op.layout().dims).collect()
    }

    /// The parameters.
    pub fn params(&self) -> &MultigridParams {
        &self.params
    }

    /// Switches the full-multigrid start on or off (the hierarchy does not depend on it): off when the caller
    /// has a good initial guess, such as the last step's solution.
    pub fn set_full_multigrid(&mut self, on: bool) {
        self.params.full_multigrid = on;
    }

    /// `‖b − A x‖` of the finest level's vectors (the residual is left in its `t`).
    fn fine_residual(&mut self) -> f64 {
        let f = &mut self.levels[0];
        residual(&f.op, &f.b, &f.x, &mut f.t).sqrt()
    }

    /// Solves `A x = b` by V-cycles (after a full-multigrid start if asked). Dirichlet cells of `x` hold the
    /// boundary values (zero for a free surface) and are left as they are; unknown cells hold the initial
    /// guess. Vectors are padded ([`PoissonOperator::layout`]); solid cells of `x` must be zero. Stops when
    /// `‖b − A x‖` falls to `tolerance` times its value for the boundary values alone (unknowns zero).
    ///
    /// # Errors
    /// [`SolveError::BadInput`] for wrong lengths or non-finite values; [`SolveError::NoConvergence`] after
    /// `max_cycles`; [`SolveError::Breakdown`] if the residual becomes non-finite or grows a thousandfold.
    pub fn solve(&mut self, b: &[f64], x: &mut [f64]) -> Result<Info, SolveError> {
        let reference = self.reference_residual(b, x)?;
        self.solve_checked(b, x, reference)
    }

    /// `‖b − A x₀‖` with `x₀` the boundary values of `x` and zero unknowns: what [`solve`](Self::solve)
    /// measures its residual against.
    ///
    /// # Errors
    /// [`SolveError::BadInput`] for wrong lengths or non-finite values.
    pub fn reference_residual(&mut self, b: &[f64], x: &[f64]) -> Result<f64, SolveError> {
        let n = self.levels[0].op.layout().len();
        check_vector("the right-hand side", b, n)?;
        check_vector("the initial guess", x, n)?;
        self.load_rhs(b);
        let f = &mut self.levels[0];
        let kinds = f.op.kinds();
        f.x.par_chunks_mut(CHUNK)
            .zip(x.par_chunks(CHUNK))
            .zip(kinds.par_chunks(CHUNK))
            .for_each(|((d, s), k)| {
                for ((d, &s), &k) in d.iter_mut().zip(s).zip(k) {
                    *d = if k == CellKind::Unknown {
                        T::ZERO
                    } else {
                        T::from_f64(s)
                    };
                }
            });
        Ok(self.fine_residual())
    }

    /// Loads `b` into the finest level, without its null-space part when the operator is singular.
    fn load_rhs(&mut self, b: &[f64]) {
        let f = &mut self.levels[0];
        if f.op.is_singular() {
            let mut b = b.to_vec();
            f.op.remove_null_space(&mut b);
            convert(&b, &mut f.b);
        } else {
            convert(b, &mut f.b);
        }
    }

    /// Like [`solve`](Self::solve), stopping when the residual falls to `tolerance × reference`: with one
    /// reference for several right-hand sides (the components of a vector), each is solved to the same
    /// absolute accuracy, and a component that is nearly zero takes no cycles to reach it.
    ///
    /// # Errors
    /// As [`solve`](Self::solve); [`SolveError::BadInput`] also for a negative or non-finite reference.
    pub fn solve_relative_to(
        &mut self,
        b: &[f64],
        x: &mut [f64],
        reference: f64,
    ) -> Result<Info, SolveError> {
        let n = self.levels[0].op.layout().len();
        check_vector("the right-hand side", b, n)?;
        check_vector("the initial guess", x, n)?;
        self.solve_checked(b, x, reference)
    }

    /// [`solve_relative_to`](Self::solve_relative_to) for vectors already checked (by
    /// [`reference_residual`](Self::reference_residual)).
    fn solve_checked(
        &mut self,
        b: &[f64],
        x: &mut [f64],
        reference: f64,
    ) -> Result<Info, SolveError> {
        let p = self.params;
        if !(p.tolerance.is_finite() && p.tolerance > 0.0) {
            return Err(SolveError::BadInput(format!(
                "the tolerance must be positive, got {}",
                p.tolerance
            )));
        }
        if !(reference.is_finite() && reference >= 0.0) {
            return Err(SolveError::BadInput(format!(
                "the reference residual must be finite and non-negative, got {reference}"
            )));
        }
        self.load_rhs(b);
        if reference == 0.0 {
            self.levels[0].op.mask_unknowns_out(x);
            return Ok(Info {
                iterations: 0,
                residual: 0.0,
                history: vec![0.0],
                stop: StopReason::ZeroRhs,
            });
        }
        convert(x, &mut self.levels[0].x);
        let mut history = vec![self.fine_residual() / reference];
        let mut cycles = 0;
        if p.full_multigrid {
            self.full_multigrid();
            cycles += 1;
            history.push(self.fine_residual() / reference);
        }
        while *history.last().expect("history") > p.tolerance {
            if cycles >= p.max_cycles {
                return Err(SolveError::NoConvergence {
                    iterations: cycles,
                    residual: *history.last().expect("history"),
                    tolerance: p.tolerance,
                });
            }
            self.vcycle_from(0, 0);
            let f = &mut self.levels[0];
            f.op.remove_null_space_unknowns(&mut f.x);
            cycles += 1;
            let r = self.fine_residual() / reference;
            if !r.is_finite() || r > 1e3 * history[0].max(1.0) {
                return Err(SolveError::Breakdown {
                    iteration: cycles,
                    detail: format!(
                        "the residual grew to {r:e} (is the smoother weight too large?)"
                    ),
                });
            }
            history.push(r);
        }
        convert(&self.levels[0].x, x);
        Ok(Info {
            iterations: cycles,
            residual: *history.last().expect("history"),
            history,
            stop: StopReason::Converged,
        })
    }

    /// Solves the three components of a vector Poisson problem `∇²A = −ω` (one scalar solve each, on the same
    /// hierarchy), to `tolerance` relative to the vector's reference residual `(Σ_c ‖b_c − A x₀_c‖²)^½`: the
    /// vector field's accuracy, not each component's, so a component much smaller than the others is not
    /// solved to a needlessly small absolute error.
    ///
    /// # Errors
    /// The first component's error, as [`solve`](Self::solve).
    pub fn solve_vector(
        &mut self,
        b: [&[f64]; 3],
        x: [&mut [f64]; 3],
    ) -> Result<[Info; 3], SolveError> {
        let mut squares = 0.0;
        for c in 0..3 {
            squares += self.reference_residual(b[c], x[c])?.powi(2);
        }
        let reference = squares.sqrt();
        let [x0, x1, x2] = x;
        Ok([
            self.solve_checked(b[0], x0, reference)?,
            self.solve_checked(b[1], x1, reference)?,
            self.solve_checked(b[2], x2, reference)?,
        ])
    }

    /// One V-cycle on the homogeneous problem from a zero guess: `z ≈ A⁻¹ r` (the MGPCG preconditioner).
    pub fn precondition(&mut self, r: &[f64], z: &mut [f64]) {
        let p = self.params;
        // The first red-black sweep takes in `r` and the zero guess as it goes (same bits, one pass less).
        let fused = p.smoother == Smoother::RedBlackGaussSeidel
            && p.pre_sweeps > 0
            && self.levels.len() > 1;
        let f = &mut self.levels[0];
        if fused {
            red_black_sweep_from_zero(&f.op, &f.inv, r, &mut f.b, &mut f.x, Colour::Red);
        } else {
            convert(r, &mut f.b);
            fill(&mut f.x, T::ZERO);
        }
        self.vcycle_from(0, fused as usize);
        convert(&self.levels[0].x, z);
    }

    /// A V-cycle on the vectors of level `top` down to the coarsest, whose first `presmoothed` sweeps on level
    /// `top` are done already.
    fn vcycle_from(&mut self, top: usize, presmoothed: usize) {
        let p = self.params;
        let last = self.levels.len() - 1;
        for l in top..last {
            let (lo, hi) = self.levels.split_at_mut(l + 1);
            let (fine, coarse) = (&mut lo[l], &mut hi[0]);
            let done = if l == top { presmoothed } else { 0 };
            smooth(
                &fine.op,
                &fine.inv,
                &fine.b,
                &mut fine.x,
                &mut fine.t,
                p.smoother,
                p.pre_sweeps - done,
                false,
            );
            let r = Fine::Residual {
                b: &fine.b,
                x: &fine.x,
            };
            restrict_to(&fine.op, r, coarse, p.restriction);
            fill(&mut coarse.x, T::ZERO);
        }
        let c = &mut self.levels[last];
        solve_coarsest(&c.op, &c.inv, &c.b, &mut c.x, &mut c.t, p.coarsest_sweeps);
        for l in (top..last).rev() {
            let (lo, hi) = self.levels.split_at_mut(l + 1);
            let (fine, coarse) = (&mut lo[l], &mut hi[0]);
            extend(&coarse.op, &coarse.ghost, &coarse.x, &mut coarse.t, false);
            prolong(
                &coarse.op,
                &coarse.t,
                &fine.op,
                &mut fine.x,
                Prolong::AddCorrection,
            );
            smooth(
                &fine.op,
                &fine.inv,
                &fine.b,
                &mut fine.x,
                &mut fine.t,
                p.smoother,
                p.post_sweeps,
                true,
            );
        }
    }

    /// Full multigrid (Briggs et al., ch. 3): restrict the right-hand side and the boundary values to every
    /// level, solve the coarsest, then on each finer level interpolate the solution and run one V-cycle.
    fn full_multigrid(&mut self) {
        let p = self.params;
        let last = self.levels.len() - 1;
        for l in 0..last {
            let (lo, hi) = self.levels.split_at_mut(l + 1);
            let (fine, coarse) = (&lo[l], &mut hi[0]);
            restrict_to(&fine.op, Fine::Field(&fine.b), coarse, p.restriction);
            restrict_boundary(&fine.op, &fine.x, &coarse.op, &mut coarse.x);
        }
        {
            let c = &mut self.levels[last];
            solve_coarsest(&c.op, &c.inv, &c.b, &mut c.x, &mut c.t, p.coarsest_sweeps);
        }
        let mode = Prolong::Replace {
            boundary_too: !p.preserve_boundary,
        };
        for l in (0..last).rev() {
            let (lo, hi) = self.levels.split_at_mut(l + 1);
            let (fine, coarse) = (&mut lo[l], &mut hi[0]);
            extend(&coarse.op, &coarse.ghost, &coarse.x, &mut coarse.t, true);
            prolong(&coarse.op, &coarse.t, &fine.op, &mut fine.x, mode);
            self.vcycle_from(l, 0);
        }
    }
}

/// MGPCG's preconditioner: one multigrid V-cycle in single precision (McAdams, Sifakis & Teran 2010).
#[derive(Clone, Debug)]
pub struct MultigridPreconditioner<const D: usize> {
    mg: Multigrid<D, f32>,
}

impl<const D: usize> MultigridPreconditioner<D> {
    /// A V-cycle preconditioner for `op`. Only the settings that keep the cycle symmetric are used: full
    /// weighting, and equal pre- and post-smoothing (`max(pre, post)` sweeps each).
    ///
    /// # Errors
    /// As [`Multigrid::new`].
    pub fn new(op: PoissonOperator<D>, params: MultigridParams) -> Result<Self, SolveError> {
        Self::shared(Arc::new(op), params)
    }

    /// As [`new`](Self::new), for an operator that the caller keeps too (no copy).
    pub(crate) fn shared(
        op: Arc<PoissonOperator<D>>,
        params: MultigridParams,
    ) -> Result<Self, SolveError> {
        let sweeps = params.pre_sweeps.max(params.post_sweeps);
        let params = MultigridParams {
            restriction: Restriction::FullWeighting,
            pre_sweeps: sweeps,
            post_sweeps: sweeps,
            ..params
        };
        Ok(MultigridPreconditioner {
            mg: Multigrid::build(op, params)?,
        })
    }

    /// The hierarchy.
    pub fn multigrid(&self) -> &Multigrid<D, f32> {
        &self.mg
    }

    /// Rebuilds the hierarchy for a new operator, reusing its memory (see [`Multigrid::set_operator`]).
    pub fn set_operator(&mut self, op: PoissonOperator<D>) {
        self.mg.set_operator(op);
    }

    /// As [`set_operator`](Self::set_operator), for an operator that the caller keeps too (no copy).
    pub(crate) fn set_shared_operator(&mut self, op: Arc<PoissonOperator<D>>) {
        self.mg.set_shared_operator(op);
    }
}

impl<const D: usize> Preconditioner for MultigridPreconditioner<D> {
    fn apply(&mut self, r: &[f64], z: &mut [f64]) {
        self.mg.precondition(r, z);
    }
}

impl<const D: usize> PoissonOperator<D> {
    /// Zeroes the unknown entries of `v` (keeps boundary values).
    fn mask_unknowns_out<T: Real>(&self, v: &mut [T]) {
        for (v, &k) in v.iter_mut().zip(self.kinds()) {
            if k == CellKind::Unknown {
                *v = T::ZERO;
            }
        }
    }

    /// Removes the null-space part of the unknowns of `x` (its boundary values stay).
    fn remove_null_space_unknowns<T: Real>(&self, x: &mut [T]) {
        if self.is_singular() {
            self.remove_null_space_in(x);
        }
    }
}

/// `1 / A_ii` in units of `h²` for the unknowns of `op`, 0 elsewhere, in precision `T` (the smoother
/// multiplies by it).
fn inverse_diagonal<T: Real, const D: usize>(op: &PoissonOperator<D>) -> Vec<T> {
    op.diagonal_units()
        .par_iter()
        .map(|&d| {
            if d > 0.0 {
                T::from_f64(1.0 / d as f64)
            } else {
                T::ZERO
            }
        })
        .collect()
}

/// `dst = src` converted to `dst`'s precision, in parallel.
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2+fma"))]
fn convert<S: Real, T: Real>(src: &[S], dst: &mut [T]) {
    dst.par_chunks_mut(CHUNK)
        .zip(src.par_chunks(CHUNK))
        .for_each(|(d, s)| {
            for (d, &s) in d.iter_mut().zip(s) {
                *d = T::from_f64(s.to_f64());
            }
        });
}

/// `v = value`, in parallel.
fn fill<T: Real>(v: &mut [T], value: T) {
    v.par_chunks_mut(CHUNK).for_each(|c| c.fill(value));
}

/// The coarse operator of `fine` (see the module documentation), or `None` when it would have no unknowns.
fn coarsen<const D: usize>(fine: &PoissonOperator<D>) -> Option<PoissonOperator<D>> {
    let fl = fine.layout();
    let dims = fl.dims.map(|n| n.div_ceil(2));
    let kinds = fine.kinds();
    // Dirichlet if a child is, else unknown if a child is, else solid.
    let rank = |k: CellKind| match k {
        CellKind::Solid => 0u8,
        CellKind::Unknown => 1,
        CellKind::Dirichlet => 2,
    };
    let fill = |c: [usize; D], row: &mut [CellKind]| {
        row.fill(CellKind::Solid);
        for combo in 0..1usize << (D - 1) {
            let mut f = [0; D];
            let mut inside = true;
            for a in 1..D {
                f[a] = 2 * c[a] + ((combo >> (a - 1)) & 1);
                inside &= f[a] < fl.dims[a];
            }
            if !inside {
                continue;
            }
            let start = fl.index(f);
            let children = &kinds[start..start + fl.dims[0]];
            for (x, k) in row.iter_mut().enumerate() {
                for &child in children.iter().skip(2 * x).take(2) {
                    if rank(child) > rank(*k) {
                        *k = child;
                    }
                }
            }
        }
    };
    let mut coarse =
        PoissonOperator::from_rows(dims, 2.0 * fine.spacing(), fine.outside(), fill).ok()?;
    // The weights only scale links to Dirichlet cells: with none (a closed container) they are all 1, as they
    // start.
    if coarse.kinds().contains(&CellKind::Dirichlet) {
        coarse.set_link_weights(dirichlet_link_weights(fine, &coarse));
    }
    Some(coarse)
}

/// Weights of the coarse links to Dirichlet cells that put the boundary where the fine level has it.
///
/// A Dirichlet value of a cell-centred grid sits at that cell's centre, which moves as cells merge: on the
/// finest level the boundary is one fine spacing `h` from the last unknown, but a coarse Dirichlet cell's centre
/// is `2h` from its neighbour's. A coarse operator that ignored this would solve for a boundary in the wrong
/// place, and the V-cycle would stall near 0.6 per cycle. Instead, the link is weighted `1/θ` with `θ` the true
/// distance in coarse spacings, as in the ghost-fluid treatment of a boundary between cell centres (Gibou et
/// al. 2002): along each column of children facing the Dirichlet neighbour, the distance from the coarse centre
/// to the first fine Dirichlet cell, averaged over the columns as `1/θ`.
fn dirichlet_link_weights<const D: usize>(
    fine: &PoissonOperator<D>,
    coarse: &PoissonOperator<D>,
) -> Vec<f32> {
    let (fl, cl) = (fine.layout(), coarse.layout());
    let (fk, ck) = (fine.kinds(), coarse.kinds());
    let mut weights = vec![1.0f32; cl.len() * 2 * D];
    weights
        .par_chunks_mut(2 * D)
        .enumerate()
        .for_each(|(i, w)| {
            if ck[i] != CellKind::Unknown {
                return;
            }
            let c = cl.padded_coords(i).map(|v| v - 1);
            for axis in 0..D {
                for upper in [false, true] {
                    let j = if upper {
                        i + cl.strides[axis]
                    } else {
                        i - cl.strides[axis]
                    };
                    if ck[j] != CellKind::Dirichlet {
                        continue;
                    }
                    let (mut inverse_theta, mut columns) = (0.0, 0);
                    for t in 0..1usize << D {
                        if (t >> axis) & 1 != 0 {
                            continue;
                        }
                        let mut a = [0; D];
                        let mut inside = true;
                        for k in 0..D {
                            a[k] = 2 * c[k]
                                + if k == axis {
                                    upper as usize
                                } else {
                                    (t >> k) & 1
                                };
                            inside &= a[k] < fl.dims[k];
                        }
                        if !inside {
                            continue;
                        }
                        let ia = fl.index(a);
                        if fk[ia] != CellKind::Unknown {
                            continue;
                        }
                        let step = |k: usize| {
                            if upper {
                                k + fl.strides[axis]
                            } else {
                                k - fl.strides[axis]
                            }
                        };
                        let n1 = step(ia);
                        // Distance (fine spacings) from the child's centre to the boundary along this column.
                        let delta = match fk[n1] {
                            CellKind::Dirichlet => 1.0 / fine.link_weight(ia, axis, upper),
                            CellKind::Unknown if fk[step(n1)] == CellKind::Dirichlet => {
                                1.0 + 1.0 / fine.link_weight(n1, axis, upper)
                            }
                            _ => continue,
                        };
                        inverse_theta += 2.0 / (delta + 0.5);
                        columns += 1;
                    }
                    if columns > 0 {
                        w[2 * axis + upper as usize] = (inverse_theta / columns as f64) as f32;
                    }
                }
            }
        });
    weights
}

/// Coefficients of the extension `E` of a correction beyond the unknowns, so that interpolation near a wall or
/// a free surface follows the boundary condition instead of being pulled towards zero:
/// * a solid cell takes the mean of its unknown neighbours (zero normal gradient);
/// * a Dirichlet cell takes, from each unknown neighbour `j`, `(1 − wⱼ) xⱼ` averaged: the straight line
///   through `xⱼ` that vanishes where the boundary really is, `1/wⱼ` coarse spacings from `j` (see
///   [`dirichlet_link_weights`]); on the finest level `w = 1` and the value is zero.
fn ghost_coefficients<const D: usize>(op: &PoissonOperator<D>) -> Ghosts {
    let l = op.layout();
    let kind = op.kinds();
    let len = l.len();
    // Each task scans a block of rows into its own list; the lists are joined in order. A neighbour index
    // that wraps around a row or a plane lands in the halo, which holds no unknown, so a range test stands
    // in for the cell's coordinates.
    let block = l.rows_per_task() * l.row_len();
    let found: Vec<Vec<(usize, bool, [f64; 6])>> = (0..len.div_ceil(block))
        .into_par_iter()
        .map(|t| {
            let mut out = Vec::new();
            for i in t * block..((t + 1) * block).min(len) {
                if kind[i] == CellKind::Unknown {
                    continue;
                }
                let mut g = [0.0; 6];
                let mut m = 0;
                for a in 0..D {
                    let s = l.strides[a];
                    for upper in [false, true] {
                        let j = if upper { i + s } else { i.wrapping_sub(s) };
                        if j < len && kind[j] == CellKind::Unknown {
                            m += 1;
                            g[2 * a + upper as usize] = match kind[i] {
                                CellKind::Solid => 1.0,
                                // The link seen from j points the other way.
                                _ => 1.0 - op.link_weight(j, a, !upper),
                            };
                        }
                    }
                }
                if m > 0 {
                    for c in g.iter_mut() {
                        *c /= m as f64;
                    }
                    out.push((i, kind[i] == CellKind::Dirichlet, g));
                }
            }
            out
        })
        .collect();
    let found = found.iter().flatten();
    Ghosts {
        index: found.clone().map(|f| f.0).collect(),
        dirichlet: found.clone().map(|f| f.1).collect(),
        coef: found.flat_map(|f| f.2.into_iter().take(2 * D)).collect(),
    }
}

/// The cells next to the unknowns of a level that are not unknowns themselves, with the coefficients of
/// [`ghost_coefficients`]: a thin shell, so [`extend`] and [`fold`] visit it cell by cell.
#[derive(Clone, Debug, Default)]
struct Ghosts {
    /// Padded index of each ghost cell, increasing.
    index: Vec<usize>,
    /// Whether it is a Dirichlet cell (else solid).
    dirichlet: Vec<bool>,
    /// `2D` coefficients per ghost cell, one per neighbour (axis-major, lower side first).
    coef: Vec<f64>,
}

/// `out = E x`: unknowns kept, the cells around them extended by the [`ghost_coefficients`]. In full multigrid
/// (`keep_dirichlet`) Dirichlet cells keep their boundary values. Every other cell of `x` is zero already.
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2+fma"))]
fn extend<T: Real, const D: usize>(
    op: &PoissonOperator<D>,
    ghost: &Ghosts,
    x: &[T],
    out: &mut [T],
    keep_dirichlet: bool,
) {
    convert(x, out);
    let strides = op.layout().strides;
    for (k, (&i, &dirichlet)) in ghost.index.iter().zip(&ghost.dirichlet).enumerate() {
        if dirichlet && keep_dirichlet {
            continue;
        }
        let g = &ghost.coef[k * 2 * D..(k + 1) * 2 * D];
        let mut sum = T::ZERO;
        for (a, &s) in strides.iter().enumerate() {
            if g[2 * a] != 0.0 {
                sum += T::from_f64(g[2 * a]) * x[i - s];
            }
            if g[2 * a + 1] != 0.0 {
                sum += T::from_f64(g[2 * a + 1]) * x[i + s];
            }
        }
        out[i] = sum;
    }
}

/// `out = Eᵀ v` on the unknowns (zero elsewhere): each ghost cell's value is handed back to the unknowns it was
/// extended from, with the same coefficients (in the fixed order of the ghost list).
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2+fma"))]
fn fold<T: Real, const D: usize>(op: &PoissonOperator<D>, ghost: &Ghosts, v: &[T], out: &mut [T]) {
    let l = op.layout();
    let kind = op.kinds();
    l.for_cells(out, |i| {
        if kind[i] == CellKind::Unknown {
            v[i]
        } else {
            T::ZERO
        }
    });
    for (k, &i) in ghost.index.iter().enumerate() {
        let g = &ghost.coef[k * 2 * D..(k + 1) * 2 * D];
        let value = v[i];
        for (a, &s) in l.strides.iter().enumerate() {
            if g[2 * a] != 0.0 {
                out[i - s] += T::from_f64(g[2 * a]) * value;
            }
            if g[2 * a + 1] != 0.0 {
                out[i + s] += T::from_f64(g[2 * a + 1]) * value;
            }
        }
    }
}

/// `sweeps` smoothing sweeps of `A x = b` on the unknowns. Red-black sweeps run red then black, or black then
/// red when `reverse` (the adjoint order, after the correction), in place; weighted Jacobi uses `t` as the
/// ping-pong buffer.
#[allow(clippy::too_many_arguments)]
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2+fma"))]
fn smooth<T: Real, const D: usize>(
    op: &PoissonOperator<D>,
    inv: &[T],
    b: &[T],
    x: &mut [T],
    t: &mut [T],
    smoother: Smoother,
    sweeps: usize,
    reverse: bool,
) {
    match smoother {
        Smoother::RedBlackGaussSeidel => {
            let first = if reverse { Colour::Black } else { Colour::Red };
            for _ in 0..sweeps {
                red_black_sweep(op, inv, b, x, first);
            }
        }
        Smoother::WeightedJacobi { weight } => {
            for _ in 0..sweeps {
                jacobi(op, inv, b, x, t, weight);
                jacobi(op, inv, b, t, x, weight);
            }
        }
    }
}

/// One weighted Jacobi relaxation, out of place: `out = x` with every unknown replaced by
/// `(1 − ω) xᵢ + ω (h² bᵢ + Σⱼ xⱼ) / nᵢ`, with `1/nᵢ` from `inv` (0 outside the unknowns, whose values are
/// kept).
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2+fma"))]
fn jacobi<T: Real, const D: usize>(
    op: &PoissonOperator<D>,
    inv: &[T],
    b: &[T],
    x: &[T],
    out: &mut [T],
    weight: f64,
) {
    let l = op.layout();
    let n = l.dims[0];
    let rl = l.row_len();
    let h2 = T::from_f64(1.0 / op.scale());
    let w = T::from_f64(weight);
    l.for_rows(out, |row, o| {
        let start_row = row.index * rl;
        if !row.interior {
            o.copy_from_slice(&x[start_row..start_row + rl]);
            return;
        }
        o[0] = x[start_row];
        o[n + 1] = x[start_row + n + 1];
        let start = start_row + 1;
        let oi = &mut o[1..=n];
        super::poisson::neighbour_sum(x, start, &l.strides, oi);
        let (inv, xc, bc) = (
            &inv[start..start + n],
            &x[start..start + n],
            &b[start..start + n],
        );
        for i in 0..n {
            let update = inv[i] * (h2 * bc[i] + oi[i]);
            oi[i] = if inv[i] > T::ZERO {
                xc[i] + w * (update - xc[i])
            } else {
                xc[i]
            };
        }
    });
}

/// The colours of red-black Gauss–Seidel: a cell is red when the sum of its coordinates is even. A cell's
/// neighbours all have the other colour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Colour {
    Red,
    Black,
}

impl Colour {
    fn other(self) -> Self {
        match self {
            Colour::Red => Colour::Black,
            Colour::Black => Colour::Red,
        }
    }
}

/// One red-black Gauss–Seidel sweep in place: the cells of colour `first`, then those of the other, each set to
/// `(h² bᵢ + Σⱼ xⱼ) / nᵢ` (unknowns only), with `1/nᵢ` from `inv`.
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2+fma"))]
fn red_black_sweep<T: Real, const D: usize>(
    op: &PoissonOperator<D>,
    inv: &[T],
    b: &[T],
    x: &mut [T],
    first: Colour,
) {
    let l = op.layout();
    let plane_len = l.strides[D - 1];
    let h2 = T::from_f64(1.0 / op.scale());
    let shared = crate::par::SharedSlice::new(x);
    let every_other = every_other(l);
    sweep_planes(l, first, |colour, p, sum: &mut Vec<T>| {
        let base = (p - 1) * plane_len;
        let planes = base..base + 3 * plane_len;
        // SAFETY: `sweep_planes` makes this task the only one touching these planes now.
        let view = unsafe { shared.slice_mut(planes.clone()) };
        relax_plane(
            l,
            inv,
            &b[planes],
            h2,
            &every_other,
            view,
            base,
            p,
            colour,
            sum,
        );
    });
}

/// The first red-black sweep of a V-cycle from a zero guess, with the right-hand side given in f64: sets
/// `b = r` (converted to `T`), `x = 0`, then sweeps as [`red_black_sweep`], all in the one pass over memory
/// that the sweep alone takes. With the other colour still zero, a cell of colour `first` is set to
/// `h² bᵢ / nᵢ` without reading its neighbours; the result has the bits of the conversion, the fill and the
/// sweep done one after another.
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2+fma"))]
fn red_black_sweep_from_zero<T: Real, const D: usize>(
    op: &PoissonOperator<D>,
    inv: &[T],
    r: &[f64],
    b: &mut [T],
    x: &mut [T],
    first: Colour,
) {
    let l = op.layout();
    let planes = l.dims[D - 1];
    let plane_len = l.strides[D - 1];
    let h2 = T::from_f64(1.0 / op.scale());
    // The halo planes, which no sweep writes.
    for p in [0, planes + 1] {
        let range = p * plane_len..(p + 1) * plane_len;
        for (b, &r) in b[range.clone()].iter_mut().zip(&r[range.clone()]) {
            *b = T::from_f64(r);
        }
        x[range].fill(T::ZERO);
    }
    let (sb, sx) = (
        crate::par::SharedSlice::new(b),
        crate::par::SharedSlice::new(x),
    );
    let every_other = every_other(l);
    sweep_planes(l, first, |colour, p, sum: &mut Vec<T>| {
        let base = (p - 1) * plane_len;
        let planes = base..base + 3 * plane_len;
        // SAFETY: as in `red_black_sweep`; `b` is written by plane, like `x`, and read only after its plane's
        // first colour (which writes it), by the planes' second colour.
        let (bv, xv) = unsafe { (sb.slice_mut(planes.clone()), sx.slice_mut(planes)) };
        if colour == first {
            start_plane(l, inv, r, h2, &every_other, bv, xv, base, p, colour);
        } else {
            relax_plane(l, inv, bv, h2, &every_other, xv, base, p, colour, sum);
        }
    });
}

/// From index `shift`, true at every other entry: a row's cells of one colour (one more than a row).
fn every_other<const D: usize>(l: &Layout<D>) -> Vec<bool> {
    (0..=l.dims[0]).map(|i| i % 2 == 0).collect()
}

/// Planes (cells along the slowest axis) per task of a [`sweep_planes`], at least: below twice this a level
/// is swept by one task. At least 6, so that the planes around two cuts never meet.
const SWEEP_SLAB: usize = 8;
const _: () = assert!(SWEEP_SLAB >= 6);

/// Runs `plane(colour, p, scratch)` on every interior plane `p` (padded coordinate along the slowest axis)
/// for colour `first` and then its other, as one red-black sweep in place needs: `plane(c, p, _)` may read
/// and write planes p − 1 ..= p + 1, and the second colour of plane q runs only once the first is done on
/// q − 1, q and q + 1.
///
/// The two half-sweeps share one pass over memory: along the slowest axis, plane `p` gets its first colour
/// just before plane `p − 1` gets its second, which then reads first-colour values that are all final. Every
/// cell is computed from the same values as by two separate half-sweeps, so the result does not depend on how
/// the planes are split among tasks. The planes are cut into slabs: each slab does its inner planes in one
/// task, then the planes around each cut between slabs, whose updates need both slabs' first colour, are done
/// (the cuts in parallel). A task's planes and the planes it reads are never another task's at the same time.
fn sweep_planes<T: Send, const D: usize>(
    l: &Layout<D>,
    first: Colour,
    plane: impl Fn(Colour, usize, &mut Vec<T>) + Sync,
) {
    let planes = l.dims[D - 1];
    let second = first.other();
    // Does `first` on the planes of `firsts` and `second` on those of `seconds` in an order in which each
    // update reads final values: `second` on plane q once `first` is done on q − 1, q and q + 1 (or they are
    // halo planes, or another task did them earlier).
    let run = |firsts: std::ops::Range<usize>, seconds: std::ops::Range<usize>| {
        let mut sum = Vec::new();
        for p in firsts.clone() {
            plane(first, p, &mut sum);
            if p > 1 && seconds.contains(&(p - 1)) {
                plane(second, p - 1, &mut sum);
            }
        }
        for q in seconds.start.max(firsts.end.saturating_sub(1))..seconds.end {
            plane(second, q, &mut sum);
        }
    };
    // Several slabs per thread; the result does not depend on their width.
    let threads = rayon::current_num_threads();
    let slab = (planes / (4 * threads)).max(SWEEP_SLAB);
    let slabs = planes / slab;
    if slabs < 2 {
        run(1..planes + 1, 1..planes + 1);
        return;
    }
    // Slab k holds planes cut(k) .. cut(k + 1); the last takes the remainder.
    let cut = |k: usize| if k == slabs { planes + 1 } else { 1 + k * slab };
    // Inner planes: `first` on all but the slab's outer planes at a cut, `second` on all but two planes on either
    // side of a cut. A slab reads one plane beyond those it writes, so slabs never touch the same plane.
    (0..slabs).into_par_iter().for_each(|k| {
        let (lo, hi) = (cut(k), cut(k + 1));
        let (f_lo, s_lo) = if k == 0 { (lo, lo) } else { (lo + 1, lo + 2) };
        let (f_hi, s_hi) = if k + 1 == slabs {
            (hi, hi)
        } else {
            (hi - 1, hi - 2)
        };
        run(f_lo..f_hi, s_lo..s_hi);
    });
    // Around each cut c: `first` on c − 1 and c, then `second` on c − 2 ..= c + 1, reading c − 3 ..= c + 2; cuts
    // are at least SWEEP_SLAB planes apart, so these never meet.
    (1..slabs).into_par_iter().for_each(|k| {
        let c = cut(k);
        run(c - 1..c + 1, c - 2..c + 2);
    });
}

/// [`red_black_sweep_from_zero`]'s first colour on plane `p`: `b = r` and `x = 0` on the whole plane, then
/// `x = h² bᵢ / nᵢ` on its unknowns of `colour`. `b` and `x` are views of planes p − 1 ..= p + 1 from padded
/// index `base`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn start_plane<T: Real, const D: usize>(
    l: &Layout<D>,
    inv: &[T],
    r: &[f64],
    h2: T,
    every_other: &[bool],
    b: &mut [T],
    x: &mut [T],
    base: usize,
    p: usize,
    colour: Colour,
) {
    let n = l.dims[0];
    let rl = l.row_len();
    for row in l.plane_rows(p) {
        let local = row.index * rl - base;
        let (bs, xs) = (&mut b[local..local + rl], &mut x[local..local + rl]);
        for (b, &r) in bs.iter_mut().zip(&r[row.index * rl..(row.index + 1) * rl]) {
            *b = T::from_f64(r);
        }
        xs.fill(T::ZERO);
        if !row.interior {
            continue;
        }
        let shift = row_shift(row.coords, colour);
        let start = row.index * rl + 1;
        let (inv, bc, xc) = (&inv[start..start + n], &bs[1..=n], &mut xs[1..=n]);
        let mask = &every_other[shift..shift + n];
        for i in 0..n {
            // The neighbours are all of the other colour, still zero: their sum is +0.
            let update = inv[i] * (h2 * bc[i] + T::ZERO);
            if mask[i] && inv[i] > T::ZERO {
                xc[i] = update;
            }
        }
    }
}

/// Where a row's cells of `colour` start: the parity of the coordinate sum of its first interior cell
/// (padded coordinates `c` are one more than the cell's).
#[inline(always)]
fn row_shift<const D: usize>(c: [usize; D], colour: Colour) -> usize {
    let row_parity = (1..D).map(|k| c[k] - 1).sum::<usize>() & 1;
    match colour {
        Colour::Red => row_parity,
        Colour::Black => 1 - row_parity,
    }
}

/// [`red_black_sweep`]'s update of the cells of `colour` in plane `p` (padded coordinate along the slowest
/// axis). `b` and `view` (of `x`) hold planes p − 1 ..= p + 1 and start at padded index `base`; `every_other`
/// is true at even indices (one more than a row); `sum` is scratch.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn relax_plane<T: Real, const D: usize>(
    l: &Layout<D>,
    inv: &[T],
    b: &[T],
    h2: T,
    every_other: &[bool],
    view: &mut [T],
    base: usize,
    p: usize,
    colour: Colour,
    sum: &mut Vec<T>,
) {
    let n = l.dims[0];
    let rl = l.row_len();
    sum.resize(n, T::ZERO);
    for row in l.plane_rows(p) {
        if !row.interior {
            continue;
        }
        let start = row.index * rl + 1;
        let local = start - base;
        super::poisson::neighbour_sum(view, local, &l.strides, sum);
        // The row's cells of `colour` are every other one from `shift`.
        let shift = row_shift(row.coords, colour);
        let (inv, bc, xc) = (
            &inv[start..start + n],
            &b[local..local + n],
            &mut view[local..local + n],
        );
        // The whole row in one vectorised loop; the other colour's cells are stored back unchanged. The update
        // is applied as the correction `xᵢ + (x̂ᵢ − xᵢ)`, Jacobi's weighted form with ω = 1, so that both
        // smoothers round alike.
        let mask = &every_other[shift..shift + n];
        for i in 0..n {
            let update = inv[i] * (h2 * bc[i] + sum[i]);
            xc[i] = if mask[i] && inv[i] > T::ZERO {
                xc[i] + (update - xc[i])
            } else {
                xc[i]
            };
        }
    }
}

/// Solves the coarsest level by symmetric red-black Gauss–Seidel sweeps (its few cells make that exact
/// enough, and a fixed count keeps the V-cycle a fixed linear operator).
fn solve_coarsest<T: Real, const D: usize>(
    op: &PoissonOperator<D>,
    inv: &[T],
    b: &[T],
    x: &mut [T],
    t: &mut [T],
    sweeps: usize,
) {
    let half = sweeps.div_ceil(2);
    smooth(op, inv, b, x, t, Smoother::RedBlackGaussSeidel, half, false);
    smooth(op, inv, b, x, t, Smoother::RedBlackGaussSeidel, half, true);
    op.remove_null_space_unknowns(x);
}

/// What [`restrict`] restricts.
#[derive(Clone, Copy)]
enum Fine<'a, T> {
    /// A fine field, zero outside the unknowns.
    Field(&'a [T]),
    /// The fine level's residual `b − A x`, computed a row at a time as it is restricted (never stored): the
    /// same values as [`residual`] gives, without the pass that writes them and the one that reads them back.
    Residual { b: &'a [T], x: &'a [T] },
}

/// Restricts `r` to the unknowns of `coarse` (its `b`): [`restrict`], then [`fold`].
fn restrict_to<T: Real, const D: usize>(
    fine: &PoissonOperator<D>,
    r: Fine<'_, T>,
    coarse: &mut Level<D, T>,
    how: Restriction,
) {
    restrict(fine, r, &coarse.op, &mut coarse.half, &mut coarse.t, how);
    fold(&coarse.op, &coarse.ghost, &coarse.t, &mut coarse.b);
}

/// Restricts the fine field `r` to every coarse cell: `Pᵀ r / 2^D` (full weighting). Values that land
/// outside the coarse unknowns are handed back to them by [`fold`].
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2+fma"))]
fn restrict<T: Real, const D: usize>(
    fine: &PoissonOperator<D>,
    r: Fine<'_, T>,
    coarse: &PoissonOperator<D>,
    half: &mut [T],
    out: &mut [T],
    how: Restriction,
) {
    let (fl, cl) = (fine.layout(), coarse.layout());
    let (frl, crl) = (fl.row_len(), cl.row_len());
    let fine_rows = fl.rows();
    // Every coarse cell, halo included (prolongation reads the halo, so its transpose writes it). A coarse cell
    // at padded coordinate c gathers the fine cells at padded coordinates 2c + offset − 1. The weights are a
    // tensor product, applied one direction at a time: x first, into `half` (coarse along x, fine across).
    let (offsets, weights): (&[isize], &[f64]) = match how {
        Restriction::FullWeighting => (&[-1, 0, 1, 2], &[0.125, 0.375, 0.375, 0.125]),
        Restriction::Nearest => (&[0, 1], &[0.5, 0.5]),
    };
    half[..fine_rows * crl]
        .par_chunks_mut(crl)
        .enumerate()
        .for_each_init(Vec::new, |scratch, (row, h)| {
            let fr = match r {
                Fine::Field(r) => &r[row * frl..(row + 1) * frl],
                Fine::Residual { b, x } => {
                    scratch.resize(frl, T::ZERO);
                    residual_row(fine, b, x, row, scratch);
                    &scratch[..]
                }
            };
            let at = |i: isize| {
                if i >= 0 && (i as usize) < frl {
                    fr[i as usize]
                } else {
                    T::ZERO
                }
            };
            let edge = |cx: usize| -> T {
                let mut v = T::ZERO;
                for (&off, &w) in offsets.iter().zip(weights) {
                    v += T::from_f64(w) * at(2 * cx as isize + off - 1);
                }
                v
            };
            let (eighth, three_eighths, one_half) =
                (T::from_f64(0.125), T::from_f64(0.375), T::from_f64(0.5));
            // Cells whose whole stencil lies in the row, without bounds tests: 2cx − 2 ≥ 0 and 2cx + 1 < frl.
            let inner = 1..((frl - 1) / 2).min(crl);
            for cx in (0..inner.start).chain(inner.end..crl) {
                h[cx] = edge(cx);
            }
            let pairs = &fr[..2 * inner.end];
            match how {
                // Pair by pair (fine cells 2cx − 2 ..= 2cx + 1 are pairs cx − 1 and cx), so that the loops
                // vectorise.
                Restriction::FullWeighting => {
                    let (lo, hi) = (pairs.chunks_exact(2), pairs[2..].chunks_exact(2));
                    for ((h, p), q) in h[inner.clone()].iter_mut().zip(lo).zip(hi) {
                        *h = eighth * (p[0] + q[1]) + three_eighths * (p[1] + q[0]);
                    }
                }
                Restriction::Nearest => {
                    let (lo, hi) = (pairs.chunks_exact(2), pairs[2..].chunks_exact(2));
                    for ((h, p), q) in h[inner.clone()].iter_mut().zip(lo).zip(hi) {
                        *h = one_half * (p[1] + q[0]);
                    }
                }
            }
        });
    let half = &half[..fine_rows * crl];
    cl.for_rows(out, |row, o| {
        o.fill(T::ZERO);
        let c = row.coords;
        let combos = offsets.len().pow(D as u32 - 1);
        for combo in 0..combos {
            let mut w = 1.0;
            let mut frow = 0usize;
            let mut stride = 1usize;
            let mut ok = true;
            let mut rest = combo;
            for (&ck, &fp) in c.iter().zip(&fl.padded).skip(1) {
                let pick = rest % offsets.len();
                rest /= offsets.len();
                let fc = 2 * ck as isize + offsets[pick] - 1;
                ok &= fc >= 0 && (fc as usize) < fp;
                w *= weights[pick];
                frow += fc.max(0) as usize * stride;
                stride *= fp;
            }
            if ok {
                let w = T::from_f64(w);
                for (o, &h) in o.iter_mut().zip(&half[frow * crl..(frow + 1) * crl]) {
                    *o += w * h;
                }
            }
        }
    });
}

/// Sets the Dirichlet cells of the coarse `out` to the mean of their Dirichlet children in `fine_x` (and
/// zeroes everything else): the boundary values of a coarse problem in full multigrid.
fn restrict_boundary<T: Real, const D: usize>(
    fine: &PoissonOperator<D>,
    fine_x: &[T],
    coarse: &PoissonOperator<D>,
    out: &mut [T],
) {
    let (fl, cl) = (fine.layout(), coarse.layout());
    let (fk, ck) = (fine.kinds(), coarse.kinds());
    let crl = cl.row_len();
    cl.for_rows(out, |row, o| {
        o.fill(T::ZERO);
        if !row.interior {
            return;
        }
        for (px, o) in o.iter_mut().enumerate().take(cl.dims[0] + 1).skip(1) {
            let i = row.index * crl + px;
            if ck[i] != CellKind::Dirichlet {
                continue;
            }
            let c = cl.padded_coords(i).map(|v| v - 1);
            let (mut sum, mut n) = (0.0, 0);
            for corner in 0..1usize << D {
                let mut f = [0; D];
                let mut inside = true;
                for k in 0..D {
                    f[k] = 2 * c[k] + ((corner >> k) & 1);
                    inside &= f[k] < fl.dims[k];
                }
                if inside {
                    let j = fl.index(f);
                    if fk[j] == CellKind::Dirichlet {
                        sum += fine_x[j].to_f64();
                        n += 1;
                    }
                }
            }
            *o = T::from_f64(if n > 0 { sum / n as f64 } else { 0.0 });
        }
    });
}

/// What [`prolong`] does with the interpolated values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Prolong {
    /// Add them to the unknowns (a coarse-grid correction).
    AddCorrection,
    /// Overwrite the unknowns with them (full multigrid), and the Dirichlet cells too when `boundary_too`.
    Replace { boundary_too: bool },
}

/// Multilinear interpolation of the coarse field `xc` to the fine cells: per axis, 3/4 of the parent and 1/4
/// of the coarse neighbour on the child's side.
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2+fma"))]
fn prolong<T: Real, const D: usize>(
    coarse: &PoissonOperator<D>,
    xc: &[T],
    fine: &PoissonOperator<D>,
    x: &mut [T],
    mode: Prolong,
) {
    let (fl, cl) = (fine.layout(), coarse.layout());
    let (fk, frl, crl) = (fine.kinds(), fl.row_len(), cl.row_len());
    fl.for_row_groups(x, |first, group| {
        let (mut blended, mut values) = (vec![T::ZERO; crl], vec![T::ZERO; frl]);
        let mut row = fl.row(first);
        for o in group.chunks_mut(frl) {
            prolong_row(
                (cl, xc),
                (fl, fk),
                row,
                o,
                (&mut blended, &mut values),
                mode,
            );
            fl.next_row(&mut row);
        }
    });
}

/// One fine row of [`prolong`]; `buffers` are a coarse row (the blend of the coarse rows around this one) and
/// a fine row (the interpolated values).
fn prolong_row<T: Real, const D: usize>(
    (cl, xc): (&Layout<D>, &[T]),
    (fl, fk): (&Layout<D>, &[CellKind]),
    row: Row<D>,
    o: &mut [T],
    buffers: (&mut [T], &mut [T]),
    mode: Prolong,
) {
    let (blended, values) = buffers;
    let (nf, frl, crl) = (fl.dims[0], fl.row_len(), cl.row_len());
    {
        if !row.interior {
            return;
        }
        let f = row.coords;
        // The 2^(D−1) coarse rows around this fine row, blended into one.
        blended.fill(T::ZERO);
        for combo in 0..1usize << (D - 1) {
            let mut w = 1.0;
            let mut crow = 0usize;
            let mut stride = 1usize;
            for (k, (&fk, &cp)) in f.iter().zip(&cl.padded).enumerate().skip(1) {
                let fi = fk - 1;
                let parent = fi / 2 + 1; // padded coarse coordinate
                let other = if fi % 2 == 0 { parent - 1 } else { parent + 1 };
                let (cc, wk) = if (combo >> (k - 1)) & 1 == 0 {
                    (parent, 0.75)
                } else {
                    (other, 0.25)
                };
                w *= wk;
                crow += cc * stride;
                stride *= cp;
            }
            let w = T::from_f64(w);
            for (bl, &v) in blended.iter_mut().zip(&xc[crow * crl..(crow + 1) * crl]) {
                *bl += w * v;
            }
        }
        // Fine cells 2k and 2k+1 (interior coordinates) share the parent k: 3/4 of it and 1/4 of the coarse
        // cell on their side (padded coarse coordinates k, k+1, k+2). Pair by pair, so that the loop vectorises.
        let (near, far) = (T::from_f64(0.75), T::from_f64(0.25));
        let mut pairs = values[..nf].chunks_exact_mut(2);
        for (pair, b) in (&mut pairs).zip(blended.windows(3)) {
            pair[0] = near * b[1] + far * b[0];
            pair[1] = near * b[1] + far * b[2];
        }
        if let [last] = pairs.into_remainder() {
            let m = nf / 2;
            *last = near * blended[m + 1] + far * blended[m];
        }
        let start = row.index * frl + 1;
        let (o, values, kinds) = (&mut o[1..=nf], &values[..nf], &fk[start..start + nf]);
        match mode {
            Prolong::AddCorrection => {
                for ((o, &v), &k) in o.iter_mut().zip(values).zip(kinds) {
                    *o += if k == CellKind::Unknown { v } else { T::ZERO };
                }
            }
            Prolong::Replace { boundary_too } => {
                for ((o, &v), &k) in o.iter_mut().zip(values).zip(kinds) {
                    if k == CellKind::Unknown || (boundary_too && k == CellKind::Dirichlet) {
                        *o = v;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
                    let f: [usize; D] =
                        std::array::from_fn(|k| 2 * (c[k] - 1) + ((corner >> k) & 1));
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
                    coarse.kinds()[i - s] == CellKind::Solid
                        && coarse.kinds()[i + s] == CellKind::Solid
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
}
