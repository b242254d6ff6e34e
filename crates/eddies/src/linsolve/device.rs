//! The seam through which a [`PoissonSolver`]'s solve runs elsewhere than on this CPU (the GPU backend): the
//! solver keeps building the operator and the preconditioner's hierarchy, the device runs the iterations.

use super::{Info, PoissonSolver, SolveError};

/// A device that runs the preconditioned conjugate gradients of a [`PoissonSolver`]: the same operator, the
/// same preconditioner (built by the solver: its multigrid hierarchy is
/// [`PoissonSolver::multigrid`]), the same stopping rule ([`PoissonSolver::params`]) and the same [`Info`],
/// so that a simulation reads one record whichever runs it.
pub trait PoissonDevice<const D: usize>: Send {
    /// Solves `A x = b` for `solver`'s problem on padded vectors ([`PoissonSolver::solve`]), from the guess
    /// in `x`: `Ok(None)` when this device does not take this problem (a preconditioner it does not offer, a
    /// null space it does not handle), which the CPU then solves.
    ///
    /// # Errors
    /// As [`PoissonSolver::solve`]; [`SolveError::Device`] when the device itself fails.
    fn solve(
        &mut self,
        solver: &PoissonSolver<D>,
        b: &[f64],
        x: &mut [f64],
    ) -> Result<Option<Info>, SolveError>;
}
