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
//!
//! **Code.** This module holds the parameters, the solver's interface and MGPCG's preconditioner;
//! [`hierarchy`] builds the levels, [`smooth`] the smoothers, [`transfer`] the moves between levels and
//! [`cycle`] the V-cycle and full multigrid over them.

mod cycle;
mod hierarchy;
mod smooth;
#[cfg(test)]
mod tests;
mod transfer;

use crate::grid::Real;
use crate::linsolve::poisson::{residual, CellKind, PoissonOperator};
use crate::linsolve::vector::CHUNK;
use crate::linsolve::{check_vector, Info, LinearOperator, Preconditioner, SolveError, StopReason};
use hierarchy::MultigridLevel;
use multiversion::multiversion;
use rayon::prelude::*;
use smooth::{red_black_sweep_from_zero, Colour};
use std::sync::Arc;

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
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "kebab-case"))]
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

impl MultigridParams {
    /// Cells per axis of the levels of a hierarchy whose finest level has `finest` cells, finest first: each
    /// halves the one above it (rounding up) until no axis has more than
    /// [`coarsest_size`](Self::coarsest_size). A hierarchy stops earlier where a level would hold no unknown.
    pub fn level_dims<const D: usize>(&self, finest: [usize; D]) -> Vec<[usize; D]> {
        let mut dims = vec![finest];
        while let Some(&d) = dims
            .last()
            .filter(|d| d.iter().any(|&n| n > self.coarsest_size))
        {
            dims.push(d.map(|n| n.div_ceil(2)));
        }
        dims
    }
}

/// A geometric multigrid solver (see the module documentation): standalone via [`solve`](Self::solve) and
/// [`solve_vector`](Self::solve_vector), or as the preconditioner of MGPCG.
///
/// `T` is the precision of the cycle's vectors: f64 for the standalone solver, f32 for MGPCG's preconditioner
/// (which halves its memory traffic; the outer conjugate gradients stay in f64, as in McAdams et al. 2010).
#[derive(Clone, Debug)]
pub struct Multigrid<const D: usize, T = f64> {
    levels: Vec<MultigridLevel<D, T>>,
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

    /// The operator of level `l` (0: the finest).
    ///
    /// # Panics
    /// If `l` is not below [`levels`](Self::levels).
    pub fn level_operator(&self, l: usize) -> &PoissonOperator<D> {
        &self.levels[l].op
    }

    /// The coefficients by which level `l` extends a correction beyond its unknowns before prolongation (and
    /// folds restricted values back, the transpose), as a dense array: `2D` per padded cell, one per
    /// neighbour (axis-major, lower side first), zero for every cell that is not a ghost. The finest level has
    /// none (all zero). For a device that runs the same V-cycle.
    ///
    /// # Panics
    /// If `l` is not below [`levels`](Self::levels).
    pub fn ghost_coefficients(&self, l: usize) -> Vec<f32> {
        let level = &self.levels[l];
        let mut dense = vec![0.0f32; level.op.layout().len() * 2 * D];
        let g = &level.ghost;
        for (k, &i) in g.index.iter().enumerate() {
            for (o, &c) in dense[i * 2 * D..(i + 1) * 2 * D]
                .iter_mut()
                .zip(&g.coef[k * 2 * D..(k + 1) * 2 * D])
            {
                *o = c as f32;
            }
        }
        dense
    }

    /// The parameters.
    pub fn params(&self) -> &MultigridParams {
        &self.params
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
        let mut m = Self::deferred(params)?;
        m.set_shared_operator(op);
        Ok(m)
    }

    /// A preconditioner with no hierarchy yet: [`set_shared_operator`](Self::set_shared_operator) builds
    /// it, and nothing else may use it before.
    pub(crate) fn deferred(params: MultigridParams) -> Result<Self, SolveError> {
        let sweeps = params.pre_sweeps.max(params.post_sweeps);
        let params = MultigridParams {
            restriction: Restriction::FullWeighting,
            pre_sweeps: sweeps,
            post_sweeps: sweeps,
            ..params
        };
        check_params(&params)?;
        Ok(MultigridPreconditioner {
            mg: Multigrid {
                levels: Vec::new(),
                params,
            },
        })
    }

    /// The parameters of its cycle (see [`new`](Self::new)).
    pub fn params(&self) -> &MultigridParams {
        self.mg.params()
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
