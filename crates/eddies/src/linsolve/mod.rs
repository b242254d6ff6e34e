//! Matrix-free linear solvers on flagged grids: the pressure projection of PIC/FLIP (Eng) and the
//! vector-potential solve of the vortex particle method (Gourlay part 20).
//!
//! * [`LinearOperator`] and [`Preconditioner`]: what a Krylov solver needs; the Poisson operator on a flagged
//!   grid ([`PoissonOperator`]) is one implementation, not the only one.
//! * [`pcg`]: preconditioned conjugate gradients with the preconditioners of [`PreconditionerKind`]: none,
//!   Jacobi, IC(0), MIC(0) (Bridson 2015, §5.2), Incomplete Poisson (Ament et al. 2010, as used by Eng)
//!   and a multigrid V-cycle (MGPCG, McAdams, Sifakis & Teran 2010).
//! * [`Multigrid`]: a geometric multigrid solver for scalar and 3-component vector Poisson problems (V-cycles
//!   or full multigrid), with a choice of smoother, of restriction (full weighting, or nearest: "faster, less
//!   accurate", part 20) and a prolongation that can leave Dirichlet boundary values untouched (part 20).
//! * [`BoxMultigrid`]: the same V-cycle specialised to a box of points with Dirichlet faces and three
//!   right-hand sides (the vortex method's vector potential): matrix-free, the components in the same passes.
//! * [`PoissonSolver`]: the operator, a preconditioner and scratch memory together, fed and read as
//!   [`Grid`](crate::grid::Grid)s; what the simulation methods call once per step.
//!
//! * [`PoissonDevice`]: where a [`PoissonSolver`]'s iterations run when not on this CPU (the GPU backend).
//!
//! Every solve returns an [`Info`] (iterations, residual history, stop reason) or a [`SolveError`] (no
//! convergence, breakdown, bad input); none of them panics or loops forever on bad input. Every kernel is
//! parallel over fixed chunks of grid rows and adds its partial sums in a fixed order, so results are
//! bit-identical for any thread count. The incomplete-Cholesky triangular solves are sequential by nature and
//! run on one thread, in storage order (see [`IncompleteCholesky`]).

mod box_multigrid;
mod multigrid;
mod pcg;
mod poisson;
mod precond;
mod solver;
pub mod vector;

pub use box_multigrid::{BoxMultigrid, BoxMultigridParams};
pub use multigrid::{Multigrid, MultigridParams, MultigridPreconditioner, Restriction, Smoother};
pub use pcg::{pcg, PcgParams};
pub use poisson::{CellKind, DomainBoundary, Layout, PoissonOperator};
pub use precond::{IncompleteCholesky, IncompletePoisson, Jacobi, MIC_SAFETY, MIC_TUNING};
pub use solver::{Guess, PoissonDevice, PoissonSolver, PreconditionerKind};

/// A symmetric linear operator `y = A x` on vectors of [`len`](LinearOperator::len) entries.
pub trait LinearOperator: Sync {
    /// Number of entries of the vectors the operator acts on.
    fn len(&self) -> usize;

    /// Whether the operator acts on empty vectors.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `y = A x`.
    fn apply(&self, x: &[f64], y: &mut [f64]);

    /// `y = A x`, returning `x · y` (fused into one pass where the operator can; conjugate gradients need
    /// both).
    fn apply_dot(&self, x: &[f64], y: &mut [f64]) -> f64 {
        self.apply(x, y);
        vector::dot(x, y)
    }

    /// `r −= A x`, in one pass where the operator can; `scratch` (as long as `x`) may be used for `A x`.
    fn subtract_apply(&self, x: &[f64], r: &mut [f64], scratch: &mut [f64]) {
        self.apply(x, scratch);
        vector::axpy(-1.0, scratch, r);
    }

    /// Removes from `v` its component in the operator's null space (e.g. the constant pressure of a closed
    /// container), so that a singular but consistent system can be solved. The default does nothing.
    fn remove_null_space(&self, _v: &mut [f64]) {}
}

/// An approximate inverse `z = M⁻¹ r`, symmetric positive definite on the operator's unknowns.
pub trait Preconditioner {
    /// `z = M⁻¹ r`. Takes `&mut self` so that a preconditioner can keep its scratch memory.
    fn apply(&mut self, r: &[f64], z: &mut [f64]);

    /// Whether `M = I`: then conjugate gradients skip the copy `z = r` and the product `r · z`.
    fn is_identity(&self) -> bool {
        false
    }
}

/// The identity preconditioner: plain conjugate gradients.
#[derive(Clone, Copy, Debug, Default)]
pub struct Identity;

impl Preconditioner for Identity {
    fn apply(&mut self, r: &[f64], z: &mut [f64]) {
        vector::copy(r, z);
    }

    fn is_identity(&self) -> bool {
        true
    }
}

/// Why an iterative solve stopped successfully.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// The relative residual reached the tolerance.
    Converged,
    /// The right-hand side is zero (after removing its null-space part): the solution is zero.
    ZeroRhs,
}

/// What a successful solve did.
#[derive(Clone, Debug, PartialEq)]
pub struct Info {
    /// Iterations (PCG) or cycles (multigrid) performed.
    pub iterations: usize,
    /// Final relative residual `‖b − A x‖ / ‖b‖` (2-norm over the unknowns).
    pub residual: f64,
    /// Relative residual after each iteration; entry 0 is the starting residual.
    pub history: Vec<f64>,
    /// Why the solve stopped.
    pub stop: StopReason,
}

/// Why a solve failed.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum SolveError {
    /// The iteration limit was reached above the tolerance.
    #[error(
        "no convergence after {iterations} iterations: relative residual {residual:.3e} above the tolerance \
         {tolerance:.1e}"
    )]
    NoConvergence {
        /// Iterations performed.
        iterations: usize,
        /// Relative residual reached.
        residual: f64,
        /// Tolerance asked for.
        tolerance: f64,
    },
    /// The iteration cannot continue: a non-positive curvature `pᵀ A p` or `rᵀ M⁻¹ r` (the operator or the
    /// preconditioner is not positive definite), or a NaN.
    #[error("breakdown at iteration {iteration}: {detail}")]
    Breakdown {
        /// Iteration at which it happened.
        iteration: usize,
        /// What went wrong.
        detail: String,
    },
    /// The problem is malformed: mismatched sizes, no unknowns, NaN or infinite data.
    #[error("bad input: {0}")]
    BadInput(String),
    /// The device the solve ran on failed (lost, out of memory); see [`PoissonDevice`].
    #[error("the device failed: {0}")]
    Device(String),
}

/// Checks that `v` has `len` entries; `what` names it in the error.
pub(crate) fn check_length(what: &str, v: &[f64], len: usize) -> Result<(), SolveError> {
    if v.len() != len {
        return Err(SolveError::BadInput(format!(
            "{what} has {} entries, the operator {len}",
            v.len()
        )));
    }
    Ok(())
}

/// Checks that `v` has `len` entries, all finite; `what` names it in the error.
pub(crate) fn check_vector(what: &str, v: &[f64], len: usize) -> Result<(), SolveError> {
    check_length(what, v, len)?;
    if let Some(i) = vector::first_non_finite(v) {
        return Err(SolveError::BadInput(format!(
            "{what} holds a non-finite value ({}) at entry {i}",
            v[i]
        )));
    }
    Ok(())
}
