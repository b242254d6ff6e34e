//! The Poisson problem of a flagged grid with its preconditioner and scratch memory: what a simulation keeps
//! between steps.

use super::multigrid::{Multigrid, MultigridParams, MultigridPreconditioner};
use super::pcg::{pcg, PcgParams};
use super::poisson::{DomainBoundary, PoissonOperator};
use super::precond::{IncompleteCholesky, IncompletePoisson, Jacobi};
use super::{Identity, Info, Preconditioner, SolveError};
use crate::grid::{CellFlag, Grid};
use std::sync::Arc;

/// A fresh [`PoissonSolver::operator_id`].
fn next_operator_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// The preconditioner of a [`PoissonSolver`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "kebab-case"))]
pub enum PreconditionerKind {
    /// Plain conjugate gradients.
    None,
    /// Diagonal scaling.
    Jacobi,
    /// Incomplete Cholesky, IC(0) (`ic0` in scene files).
    #[cfg_attr(feature = "serde", serde(rename = "ic0"))]
    IncompleteCholesky,
    /// Modified incomplete Cholesky, MIC(0) (τ = 0.97, σ = 0.25; `mic0` in scene files).
    #[cfg_attr(feature = "serde", serde(rename = "mic0"))]
    ModifiedIncompleteCholesky,
    /// Incomplete Poisson (Eng).
    IncompletePoisson,
    /// One multigrid V-cycle (MGPCG).
    #[default]
    Multigrid,
}

impl PreconditionerKind {
    /// Every preconditioner, in the order of the benchmark tables.
    pub const ALL: [PreconditionerKind; 6] = [
        PreconditionerKind::None,
        PreconditionerKind::Jacobi,
        PreconditionerKind::IncompleteCholesky,
        PreconditionerKind::ModifiedIncompleteCholesky,
        PreconditionerKind::IncompletePoisson,
        PreconditionerKind::Multigrid,
    ];

    /// The name used in scene files and tables.
    pub fn name(self) -> &'static str {
        match self {
            PreconditionerKind::None => "none",
            PreconditionerKind::Jacobi => "jacobi",
            PreconditionerKind::IncompleteCholesky => "ic0",
            PreconditionerKind::ModifiedIncompleteCholesky => "mic0",
            PreconditionerKind::IncompletePoisson => "incomplete-poisson",
            PreconditionerKind::Multigrid => "multigrid",
        }
    }

    /// The preconditioner called `name` (as [`name`](Self::name) gives).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.name() == name)
    }
}

/// A built preconditioner.
#[derive(Clone, Debug)]
enum BuiltPreconditioner<const D: usize> {
    None(Identity),
    Jacobi(Jacobi),
    Cholesky(IncompleteCholesky),
    IncompletePoisson(IncompletePoisson<D>),
    Multigrid(Box<MultigridPreconditioner<D>>),
}

impl<const D: usize> BuiltPreconditioner<D> {
    fn new(
        op: &Arc<PoissonOperator<D>>,
        kind: PreconditionerKind,
        mg: MultigridParams,
    ) -> Result<Self, SolveError> {
        Ok(match kind {
            PreconditionerKind::None => BuiltPreconditioner::None(Identity),
            PreconditionerKind::Jacobi => BuiltPreconditioner::Jacobi(Jacobi::new(op)),
            PreconditionerKind::IncompleteCholesky => {
                BuiltPreconditioner::Cholesky(IncompleteCholesky::ic0(op))
            }
            PreconditionerKind::ModifiedIncompleteCholesky => {
                BuiltPreconditioner::Cholesky(IncompleteCholesky::mic0(op))
            }
            PreconditionerKind::IncompletePoisson => {
                BuiltPreconditioner::IncompletePoisson(IncompletePoisson::new(op))
            }
            PreconditionerKind::Multigrid => {
                BuiltPreconditioner::Multigrid(Box::new(MultigridPreconditioner::deferred(mg)?))
            }
        })
    }
}

impl<const D: usize> Preconditioner for BuiltPreconditioner<D> {
    fn apply(&mut self, r: &[f64], z: &mut [f64]) {
        match self {
            BuiltPreconditioner::None(m) => m.apply(r, z),
            BuiltPreconditioner::Jacobi(m) => m.apply(r, z),
            BuiltPreconditioner::Cholesky(m) => m.apply(r, z),
            BuiltPreconditioner::IncompletePoisson(m) => m.apply(r, z),
            BuiltPreconditioner::Multigrid(m) => m.apply(r, z),
        }
    }

    fn is_identity(&self) -> bool {
        matches!(self, BuiltPreconditioner::None(_))
    }
}

/// A Poisson problem on a flagged grid, solved by preconditioned conjugate gradients: the operator, its
/// preconditioner and the work vectors, reused across solves.
///
/// ```
/// use eddies::grid::{CellFlag, Grid};
/// use eddies::linsolve::{DomainBoundary, PcgParams, PoissonSolver, PreconditionerKind};
///
/// // A 32² box of fluid under air: solve −∇²p = 1.
/// let flags = Grid::new([32, 32], [0.0, 0.0], 1.0 / 32.0, CellFlag::Fluid);
/// let mut solver =
///     PoissonSolver::from_flags(&flags, DomainBoundary::Open, PreconditionerKind::Multigrid, PcgParams::default())?;
/// let rhs = flags.same_shape(1.0);
/// let mut p = flags.same_shape(0.0);
/// let info = solver.solve_grid(&rhs, &mut p)?;
/// assert!(info.residual <= 1e-6 && info.iterations < 15);
/// # Ok::<(), eddies::linsolve::SolveError>(())
/// ```
#[derive(Clone, Debug)]
pub struct PoissonSolver<const D: usize> {
    /// The operator, shared with a multigrid preconditioner's finest level.
    op: Arc<PoissonOperator<D>>,
    /// Identifies the operator and its preconditioner: new for every one built ([`operator_id`](Self::operator_id)).
    operator_id: u64,
    kind: PreconditionerKind,
    precond: BuiltPreconditioner<D>,
    /// Whether `precond` belongs to `op`. A multigrid hierarchy is built when a solve on this CPU first needs
    /// it ([`prepare`](Self::prepare)): a device that builds its own (the GPU backend) spares the CPU the
    /// work.
    prepared: bool,
    mg: MultigridParams,
    /// Stopping rule of every solve.
    pub params: PcgParams,
    /// Iterations of the last solve ([`expected_iterations`](Self::expected_iterations)).
    expected: Option<usize>,
    b: Vec<f64>,
    x: Vec<f64>,
    scratch: Vec<Vec<f64>>,
}

impl<const D: usize> PoissonSolver<D> {
    /// A solver for `op` with preconditioner `kind` (multigrid with [`MultigridParams::default`]).
    ///
    /// # Errors
    /// As [`MultigridPreconditioner::new`].
    pub fn new(
        op: PoissonOperator<D>,
        kind: PreconditionerKind,
        params: PcgParams,
    ) -> Result<Self, SolveError> {
        Self::with_multigrid(op, kind, params, MultigridParams::default())
    }

    /// As [`new`](Self::new), with the V-cycle of the multigrid preconditioner set by `mg`.
    ///
    /// # Errors
    /// As [`MultigridPreconditioner::new`].
    pub fn with_multigrid(
        op: PoissonOperator<D>,
        kind: PreconditionerKind,
        params: PcgParams,
        mg: MultigridParams,
    ) -> Result<Self, SolveError> {
        let op = Arc::new(op);
        let precond = BuiltPreconditioner::new(&op, kind, mg)?;
        let n = op.layout().len();
        Ok(PoissonSolver {
            operator_id: next_operator_id(),
            prepared: kind != PreconditionerKind::Multigrid,
            mg,
            op,
            kind,
            precond,
            params,
            expected: None,
            b: vec![0.0; n],
            x: vec![0.0; n],
            scratch: Vec::new(),
        })
    }

    /// The iterations the next solve is expected to take: the last solve's through this solver
    /// ([`solve`](Self::solve), [`solve_on`](Self::solve_on), [`solve_grid_on`](Self::solve_grid_on)) or
    /// what [`expect_iterations`](Self::expect_iterations) set; `None` before either. A simulation's solves
    /// change little from step to step, so a device that submits its iterations in batches (the GPU backend)
    /// sizes its first batch by it, launching no iterations past the solution's.
    pub fn expected_iterations(&self) -> Option<usize> {
        self.expected
    }

    /// Sets [`expected_iterations`](Self::expected_iterations), for a solve that ran on a device directly
    /// ([`PoissonDevice::solve`]). It changes no result, only how a device batches its iterations.
    pub fn expect_iterations(&mut self, iterations: Option<usize>) {
        self.expected = iterations;
    }

    /// A solver for the cell flags of `flags` (fluid: unknown, air: zero, solid: no flux).
    ///
    /// # Errors
    /// [`SolveError::BadInput`] when there is no fluid cell.
    pub fn from_flags(
        flags: &Grid<CellFlag, D>,
        outside: DomainBoundary,
        kind: PreconditionerKind,
        params: PcgParams,
    ) -> Result<Self, SolveError> {
        Self::new(PoissonOperator::from_flags(flags, outside)?, kind, params)
    }

    /// Replaces the problem's cell flags (a new step of a simulation), rebuilding the operator and the
    /// preconditioner (a multigrid hierarchy when a solve on this CPU first needs it,
    /// [`prepare`](Self::prepare)) but keeping the work vectors and, for multigrid, the vectors of every
    /// level whose size is unchanged.
    ///
    /// # Errors
    /// [`SolveError::BadInput`] when there is no fluid cell; the solver is then unchanged.
    pub fn set_flags(
        &mut self,
        flags: &Grid<CellFlag, D>,
        outside: DomainBoundary,
    ) -> Result<(), SolveError> {
        self.set_operator(PoissonOperator::from_flags(flags, outside)?)
    }

    /// Replaces the operator (see [`set_flags`](Self::set_flags)).
    ///
    /// # Errors
    /// As [`MultigridPreconditioner::new`].
    pub fn set_operator(&mut self, op: PoissonOperator<D>) -> Result<(), SolveError> {
        let op = Arc::new(op);
        match &mut self.precond {
            // Rebuilt at the next CPU solve, in the memory of this one.
            BuiltPreconditioner::Multigrid(_) => self.prepared = false,
            _ => self.precond = BuiltPreconditioner::new(&op, self.kind, self.mg)?,
        }
        let n = op.layout().len();
        self.b.resize(n, 0.0);
        self.x.resize(n, 0.0);
        self.op = op;
        self.operator_id = next_operator_id();
        Ok(())
    }

    /// The operator.
    pub fn operator(&self) -> &PoissonOperator<D> {
        &self.op
    }

    /// The preconditioner in use.
    pub fn preconditioner(&self) -> PreconditionerKind {
        self.kind
    }

    /// A number that changes whenever the operator (and with it the preconditioner) is rebuilt, unique in this
    /// process: a device that keeps a copy of the operator re-sends it only when this changes.
    pub fn operator_id(&self) -> u64 {
        self.operator_id
    }

    /// Builds the preconditioner for the current operator now, if it is not yet: a multigrid hierarchy is
    /// otherwise built by the first solve on this CPU that needs it (a benchmark times it apart this way).
    pub fn prepare(&mut self) {
        if !self.prepared {
            if let BuiltPreconditioner::Multigrid(m) = &mut self.precond {
                m.set_shared_operator(self.op.clone());
            }
            self.prepared = true;
        }
    }

    /// The multigrid hierarchy of the preconditioner, when it is [`PreconditionerKind::Multigrid`], built
    /// first if it is not ([`prepare`](Self::prepare)).
    pub fn multigrid(&mut self) -> Option<&Multigrid<D, f32>> {
        self.prepare();
        match &self.precond {
            BuiltPreconditioner::Multigrid(m) => Some(m.multigrid()),
            _ => None,
        }
    }

    /// The parameters of the multigrid V-cycle, when the preconditioner is [`PreconditionerKind::Multigrid`]:
    /// with equal pre- and post-smoothing and full weighting, as the preconditioner runs it (a device that
    /// builds the hierarchy itself coarsens and cycles by them).
    pub fn multigrid_params(&self) -> Option<MultigridParams> {
        match &self.precond {
            BuiltPreconditioner::Multigrid(m) => Some(*m.params()),
            _ => None,
        }
    }

    /// Solves `A x = b` on padded vectors ([`PoissonOperator::layout`]), from the guess in `x`.
    ///
    /// # Errors
    /// As [`pcg`].
    pub fn solve(&mut self, b: &[f64], x: &mut [f64]) -> Result<Info, SolveError> {
        self.solve_on(None, b, x)
    }

    /// As [`solve`](Self::solve), the iterations on `device` when one is given and takes the problem
    /// ([`PoissonDevice::solve`]), on this CPU otherwise.
    ///
    /// # Errors
    /// As [`solve`](Self::solve); [`SolveError::Device`] when the device fails.
    pub fn solve_on(
        &mut self,
        device: Option<&mut dyn PoissonDevice<D>>,
        b: &[f64],
        x: &mut [f64],
    ) -> Result<Info, SolveError> {
        self.solve_from(device, false, b, x)
    }

    /// [`solve_on`](Self::solve_on); with `rhs_in_faces`, the device takes the right-hand side from its face
    /// field ([`PoissonDevice::solve_rhs_in_faces`]).
    fn solve_from(
        &mut self,
        device: Option<&mut dyn PoissonDevice<D>>,
        rhs_in_faces: bool,
        b: &[f64],
        x: &mut [f64],
    ) -> Result<Info, SolveError> {
        let on_device = match device {
            Some(d) if rhs_in_faces => d.solve_rhs_in_faces(self, b, x)?,
            Some(d) => d.solve(self, b, x)?,
            None => None,
        };
        let info = match on_device {
            Some(info) => info,
            None => {
                self.prepare();
                pcg(
                    &*self.op,
                    &mut self.precond,
                    b,
                    x,
                    &self.params,
                    &mut self.scratch,
                )?
            }
        };
        self.expected = Some(info.iterations);
        Ok(info)
    }

    /// As [`solve_on`](Self::solve_on) with [`PoissonDevice::solve_gradient`]: the solution and its gradient
    /// stay on `device`. The initial guess is the solution that the device kept under the token `kept`, or
    /// without one `p` (in [`Grid`] layout). With `rhs_in_faces` the device holds the right-hand side in
    /// its face field already ([`PoissonDevice::solve_gradient_rhs_in_faces`]), and `rhs` serves the
    /// messages of a failed solve. `Ok(None)` when the device declines (the caller then solves with
    /// [`solve_grid_on`](Self::solve_grid_on)).
    ///
    /// # Errors
    /// As [`solve_grid_on`](Self::solve_grid_on).
    pub fn solve_gradient_on(
        &mut self,
        device: &mut dyn PoissonDevice<D>,
        rhs: &Grid<f64, D>,
        p: &Grid<f64, D>,
        kept: Option<u64>,
        rhs_in_faces: bool,
    ) -> Result<Option<(Info, u64)>, SolveError> {
        self.check_grids(rhs, p)?;
        self.op.pad_unknowns(&rhs.data, &mut self.b);
        let guess = match kept {
            Some(token) => Guess::Kept(token),
            None => {
                self.op.pad_unknowns(&p.data, &mut self.x);
                Guess::Given(&self.x)
            }
        };
        let out = if rhs_in_faces {
            device.solve_gradient_rhs_in_faces(self, &self.b, guess)?
        } else {
            device.solve_gradient(self, &self.b, guess)?
        };
        if let Some((info, _)) = &out {
            self.expected = Some(info.iterations);
        }
        Ok(out)
    }

    /// [`SolveError::BadInput`] unless the right-hand side `rhs` and the solution `p` have the operator's
    /// cells.
    fn check_grids(&self, rhs: &Grid<f64, D>, p: &Grid<f64, D>) -> Result<(), SolveError> {
        let dims = self.op.layout().dims;
        for (what, d) in [("the right-hand side", rhs.dims), ("the solution", p.dims)] {
            if d != dims {
                return Err(SolveError::BadInput(format!(
                    "{what} has {d:?} cells, the operator {dims:?}"
                )));
            }
        }
        Ok(())
    }

    /// The solution that `device` kept under `token` ([`solve_gradient_on`](Self::solve_gradient_on)), into
    /// `p` in [`Grid`] layout.
    ///
    /// # Errors
    /// As [`PoissonDevice::read_solution`].
    pub fn read_solution_from(
        &mut self,
        device: &mut dyn PoissonDevice<D>,
        token: u64,
        p: &mut Grid<f64, D>,
    ) -> Result<(), SolveError> {
        device.read_solution(token, &mut self.x)?;
        self.op.layout().unpad(&self.x, &mut p.data);
        Ok(())
    }

    /// Solves `−∇²p = rhs` for grids in [`Grid`] layout: `rhs` is read on the unknowns, `p` is the initial
    /// guess there and receives the solution (zero on every other cell).
    ///
    /// # Errors
    /// [`SolveError::BadInput`] when a grid's size differs from the operator's or `rhs` holds a non-finite
    /// value on an unknown; otherwise as [`pcg`].
    pub fn solve_grid(
        &mut self,
        rhs: &Grid<f64, D>,
        p: &mut Grid<f64, D>,
    ) -> Result<Info, SolveError> {
        self.solve_grid_on(None, rhs, p)
    }

    /// As [`solve_grid`](Self::solve_grid), the iterations on `device` when one is given and takes the
    /// problem ([`PoissonDevice::solve`]), on this CPU otherwise.
    ///
    /// # Errors
    /// As [`solve_grid`](Self::solve_grid); [`SolveError::Device`] when the device fails.
    pub fn solve_grid_on(
        &mut self,
        device: Option<&mut dyn PoissonDevice<D>>,
        rhs: &Grid<f64, D>,
        p: &mut Grid<f64, D>,
    ) -> Result<Info, SolveError> {
        self.solve_grid_from(device, false, rhs, p)
    }

    /// As [`solve_grid_on`](Self::solve_grid_on) on `device`, which holds the right-hand side `rhs` in its
    /// face field already ([`PoissonDevice::solve_rhs_in_faces`]): `rhs` serves a solve that the device
    /// declines, and the messages of a failed one.
    ///
    /// # Errors
    /// As [`solve_grid_on`](Self::solve_grid_on).
    pub fn solve_grid_rhs_in_faces(
        &mut self,
        device: &mut dyn PoissonDevice<D>,
        rhs: &Grid<f64, D>,
        p: &mut Grid<f64, D>,
    ) -> Result<Info, SolveError> {
        self.solve_grid_from(Some(device), true, rhs, p)
    }

    /// As [`solve_grid_rhs_in_faces`](Self::solve_grid_rhs_in_faces) without the right-hand side on this
    /// host: `Ok(None)` where `device` declines, and the caller forms it to solve again. A right-hand side
    /// that is not finite is reported without the cell that holds it.
    ///
    /// # Errors
    /// As [`solve_grid_on`](Self::solve_grid_on).
    pub fn solve_grid_rhs_on_device(
        &mut self,
        device: &mut dyn PoissonDevice<D>,
        p: &mut Grid<f64, D>,
    ) -> Result<Option<Info>, SolveError> {
        self.check_grids(p, p)?;
        self.op.pad_unknowns(&p.data, &mut self.x);
        let mut x = std::mem::take(&mut self.x);
        let out = device.solve_rhs_in_faces(self, &[], &mut x);
        self.x = x;
        let Some(info) = out? else {
            return Ok(None);
        };
        self.expected = Some(info.iterations);
        self.op.layout().unpad(&self.x, &mut p.data);
        Ok(Some(info))
    }

    fn solve_grid_from(
        &mut self,
        device: Option<&mut dyn PoissonDevice<D>>,
        rhs_in_faces: bool,
        rhs: &Grid<f64, D>,
        p: &mut Grid<f64, D>,
    ) -> Result<Info, SolveError> {
        self.check_grids(rhs, p)?;
        self.op.pad_unknowns(&rhs.data, &mut self.b);
        self.op.pad_unknowns(&p.data, &mut self.x);
        let (mut b, mut x) = (std::mem::take(&mut self.b), std::mem::take(&mut self.x));
        let info = self.solve_from(device, rhs_in_faces, &b, &mut x);
        std::mem::swap(&mut self.b, &mut b);
        std::mem::swap(&mut self.x, &mut x);
        let info = info?;
        self.op.layout().unpad(&self.x, &mut p.data);
        Ok(info)
    }
}

// The seam through which a solve runs elsewhere than on this CPU (the GPU backend): the solver builds the
// operator, the device the preconditioner's hierarchy and runs the iterations.

/// A device that runs the preconditioned conjugate gradients of a [`PoissonSolver`]: the same operator, the
/// same preconditioner (a multigrid hierarchy coarsened by the rules of
/// [`Multigrid`](super::multigrid::Multigrid), with [`PoissonSolver::multigrid_params`]), the same stopping
/// rule ([`PoissonSolver::params`]) and the same [`Info`], so that a simulation reads one record whichever
/// runs it. The solver builds its own hierarchy only for a solve that the device declines.
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

    /// The face field into which [`solve_gradient`](Self::solve_gradient) writes: an id that a transfer
    /// device reading the same field reports too
    /// ([`TransferDevice::face_field`](crate::flip::TransferDevice::face_field)). `None` (the default): this
    /// device offers no such solve.
    fn face_field(&self) -> Option<u64> {
        None
    }

    /// Solves as [`solve`](Self::solve), but leaves the solution on the device instead of returning it: it
    /// keeps `x` as a later call's guess ([`Guess::Kept`]) and writes `−∇x` to its face field, component
    /// after component, each a grid of the faces with x fastest, as f32: on a face between two unknowns
    /// `0 − (x_above − x_below) / h` in f64 (the CPU's arithmetic), 0 on every other face. Returns the
    /// record and a token that names the kept solution; `Ok(None)` where [`solve`](Self::solve) would.
    ///
    /// # Errors
    /// As [`solve`](Self::solve); [`SolveError::Device`] for a [`Guess::Kept`] whose solution the device no
    /// longer holds.
    fn solve_gradient(
        &mut self,
        solver: &PoissonSolver<D>,
        b: &[f64],
        guess: Guess<'_>,
    ) -> Result<Option<(Info, u64)>, SolveError> {
        let _ = (solver, b, guess);
        Ok(None)
    }

    /// As [`solve_gradient`](Self::solve_gradient), with the right-hand side already in this device's
    /// [`face_field`](Self::face_field), where a particle device formed it
    /// ([`TransferDevice::excess_to_faces`](crate::flip::TransferDevice::excess_to_faces)), as
    /// [`solve_rhs_in_faces`](Self::solve_rhs_in_faces) takes it. The default sends `b` as
    /// [`solve_gradient`](Self::solve_gradient) does.
    ///
    /// # Errors
    /// As [`solve_gradient`](Self::solve_gradient).
    fn solve_gradient_rhs_in_faces(
        &mut self,
        solver: &PoissonSolver<D>,
        b: &[f64],
        guess: Guess<'_>,
    ) -> Result<Option<(Info, u64)>, SolveError> {
        self.solve_gradient(solver, b, guess)
    }

    /// As [`solve`](Self::solve), with the right-hand side already in this device's
    /// [`face_field`](Self::face_field), where a particle device formed it
    /// ([`TransferDevice::rhs_to_faces`](crate::flip::TransferDevice::rhs_to_faces)) with the bits of `b`'s
    /// unknowns, as f64 in the padded layout (the device masks it to the unknowns); `b` serves the messages
    /// of a failed solve, and may be empty where the caller keeps no copy (the vortex particles' vector
    /// solve, whose right-hand sides a splat device formed: [`crate::vpm::poisson::SplatDevice`]). The
    /// default sends `b` as [`solve`](Self::solve) does.
    ///
    /// # Errors
    /// As [`solve`](Self::solve).
    fn solve_rhs_in_faces(
        &mut self,
        solver: &PoissonSolver<D>,
        b: &[f64],
        x: &mut [f64],
    ) -> Result<Option<Info>, SolveError> {
        if b.is_empty() && !x.is_empty() {
            // Declined: the caller keeps no copy to send.
            return Ok(None);
        }
        self.solve(solver, b, x)
    }

    /// Writes the solution of this device's last [`solve`](Self::solve), which must have been of `solver`'s
    /// operator and the device's last work, into its [`face_field`](Self::face_field) as f64 in the padded
    /// layout ([`Layout`](super::Layout); 0 on the halo), for a particle device that applies its gradient
    /// itself ([`TransferDevice::project_velocity`](crate::flip::TransferDevice::project_velocity)).
    /// `Ok(false)` (the default): not offered, or the last solve was not this device's.
    ///
    /// # Errors
    /// [`SolveError::Device`] when the device fails.
    fn solution_to_faces(&mut self, solver: &PoissonSolver<D>) -> Result<bool, SolveError> {
        let _ = solver;
        Ok(false)
    }

    /// The solution that [`solve_gradient`](Self::solve_gradient) kept under `token`, into `x` (padded).
    ///
    /// # Errors
    /// [`SolveError::Device`] when the device fails or holds that solution no longer.
    fn read_solution(&mut self, token: u64, x: &mut [f64]) -> Result<(), SolveError> {
        let _ = (token, x);
        Err(SolveError::Device(
            "this device keeps no solution to read back".into(),
        ))
    }
}

/// The initial guess of [`PoissonDevice::solve_gradient`].
#[derive(Clone, Copy, Debug)]
pub enum Guess<'a> {
    /// This padded vector.
    Given(&'a [f64]),
    /// The solution the device kept under this token, on the unknowns of the new operator (0 elsewhere):
    /// the bits of that solution read back, unpadded and padded again
    /// ([`PoissonOperator::pad_unknowns`](super::PoissonOperator::pad_unknowns)).
    Kept(u64),
}
