//! The volume correction (after Kugelstadt et al. 2019): the relative excess of the fill fraction in the
//! fluid cells, and where there is some, a Poisson solve in the liquid closed by the air whose gradient
//! displaces the particles out of over-full cells ([`project::volume_displacement`]).

use super::{project, FlipSim};
use crate::grid::CellFlag;
use crate::linsolve::{DomainBoundary, PcgParams, PoissonDevice, PoissonSolver};
use crate::sim::SimError;

/// Relative residual of the volume correction's solve (see [`FlipSim::volume_correction`]).
const VOLUME_TOLERANCE: f64 = 3e-2;

impl<const D: usize> FlipSim<D> {
    /// The volume correction of this substep ([`project::volume_displacement`]): sets `excess` from the
    /// particle counts and, where some cell holds more than the seeding count, the displacement `disp`.
    /// Returns where the particles' displacement is, if any. `solved` says whether the projection ran (there
    /// was liquid). With `on_device`, the displacement may stay on the devices
    /// ([`FlipSim::faces_on_device`]), the potential too, as the next solve's guess; with `projected` too
    /// (the transfer device formed this substep's projected velocity), the transfer device forms the
    /// solve's right-hand side itself ([`TransferDevice::excess_to_faces`]).
    ///
    /// [`TransferDevice::excess_to_faces`]: super::TransferDevice::excess_to_faces
    pub(super) fn volume_correction(
        &mut self,
        solved: bool,
        on_device: bool,
        projected: bool,
    ) -> Result<Correction, SimError> {
        let kappa = self.cfg.params.volume_correction;
        let (flags, fill) = (&self.flags, &self.fill);
        let (dims, strides) = (flags.dims, flags.strides());
        let fluid = |j: usize| flags.data[j] == CellFlag::Fluid;
        // A cell next to the air may be partly empty because the surface cuts it: only its excess counts. A
        // cell surrounded by liquid that holds too few particles has a gap, which the correction closes (a
        // negative target pulls particles in), so that the excess of its neighbours fills it instead of
        // pushing the free surface out. Next to an obstacle the fill fraction reads low (the kernel reaches
        // into the solid), so there too only an excess counts.
        let target = |i: usize, interior: bool| {
            let rel = fill.data[i] - 1.0;
            kappa * if interior { rel } else { rel.max(0.0) }
        };
        // One cell, any position: neighbours outside the domain do not count.
        let cell = |i: usize, c: [usize; D]| -> f64 {
            if kappa == 0.0 || !fluid(i) {
                return 0.0;
            }
            let interior = (0..D).all(|k| {
                (c[k] == 0 || fluid(i - strides[k]))
                    && (c[k] + 1 == dims[k] || fluid(i + strides[k]))
            });
            target(i, interior)
        };
        let n = dims[0];
        self.excess.par_for_rows_mut(|mut c, row| {
            let base = flags.index(c);
            // Rows away from the walls across x: cells 1 ..= n − 2 have all their neighbours in the domain.
            let clear = n >= 3 && kappa != 0.0 && (1..D).all(|a| c[a] > 0 && c[a] + 1 < dims[a]);
            if !clear {
                for (x, e) in row.iter_mut().enumerate() {
                    c[0] = x;
                    *e = cell(base + x, c);
                }
                return;
            }
            for x in [0, n - 1] {
                c[0] = x;
                row[x] = cell(base + x, c);
            }
            for (x, e) in row.iter_mut().enumerate().take(n - 1).skip(1) {
                let i = base + x;
                *e = if fluid(i) {
                    target(i, strides.iter().all(|&s| fluid(i - s) && fluid(i + s)))
                } else {
                    0.0
                };
            }
        });
        if !(solved && kappa > 0.0 && self.excess.data.iter().any(|&e| e != 0.0)) {
            return Ok(Correction::None);
        }
        // The correction moves liquid within the liquid: air counts as a wall (see
        // `project::volume_displacement`).
        let flags = &self.flags;
        self.closed_flags.par_for_each_mut(|i, _, f| {
            *f = match flags.data[i] {
                CellFlag::Air => CellFlag::Solid,
                other => other,
            };
        });
        let step = self.steps + 1;
        let diverged = |source| SimError::solve_failed("volume_correction", step, source);
        let pcg = PcgParams {
            // The correction repeats every substep, so a loose solve suffices: what a 3% residual leaves is
            // taken up by the next substep. In the 1M-cell dam break that is 2 MGPCG iterations, against 3 for
            // 10⁻² and 5 for 10⁻³; the volume drift of `dam-break-3d` over 60 frames and of the test
            // `dam_break_3d_volume` is the same to three digits.
            tolerance: self.cfg.params.tolerance.max(VOLUME_TOLERANCE),
            max_iterations: self.cfg.params.max_iterations,
        };
        let kind = self.cfg.params.preconditioner;
        let solver = match &mut self.closed_solver {
            Some(s) if s.preconditioner() == kind => {
                s.set_flags(&self.closed_flags, DomainBoundary::Solid)
                    .map_err(diverged)?;
                s.params = pcg;
                s
            }
            slot => slot.insert(
                PoissonSolver::from_flags(&self.closed_flags, DomainBoundary::Solid, kind, pcg)
                    .map_err(diverged)?,
            ),
        };
        // The last substep's potential is the initial guess: the liquid compresses in the same places from
        // one substep to the next.
        if on_device {
            let in_faces = match self.transfer_device.as_mut().filter(|_| projected) {
                Some(d) => d
                    .excess_to_faces(&self.u, kappa, self.owner)
                    .map_err(|detail| SimError::Device { step, detail })?,
                None => false,
            };
            let device = self.pressure_device.as_mut().expect("faces on the device");
            let (q, kept) = (&self.excess_potential, self.potential_kept);
            if let Some((_, token)) = solver
                .solve_gradient_on(&mut **device, &self.excess, q, kept, in_faces)
                .map_err(diverged)?
            {
                self.potential_kept = Some(token);
                return Ok(Correction::Device);
            }
        }
        self.read_potential()?;
        let solver = self.closed_solver.as_mut().expect("made above");
        project::volume_displacement(
            &mut self.disp,
            &self.closed_flags,
            &self.excess,
            &mut self.excess_potential,
            solver,
            self.pressure_device
                .as_mut()
                .map(|d| &mut **d as &mut dyn PoissonDevice<D>),
        )
        .map_err(diverged)?;
        Ok(Correction::Host)
    }

    /// The volume correction's potential that the pressure device kept, back into `excess_potential` (a
    /// no-op when it kept none).
    pub(super) fn read_potential(&mut self) -> Result<(), SimError> {
        let Some(token) = self.potential_kept else {
            return Ok(());
        };
        let step = self.steps + 1;
        let failed = |detail: String| SimError::Device { step, detail };
        let (Some(device), Some(solver)) =
            (self.pressure_device.as_mut(), self.closed_solver.as_mut())
        else {
            return Err(failed(
                "the volume correction's potential was left on a device that is gone".into(),
            ));
        };
        solver
            .read_solution_from(&mut **device, token, &mut self.excess_potential)
            .map_err(|e| failed(e.to_string()))?;
        self.potential_kept = None;
        Ok(())
    }

    /// The displacement of a correction whose potential the device kept ([`Correction::Device`]), on the
    /// CPU: for a grid-to-particle pass that runs here after all.
    pub(super) fn displacement_on_host(&mut self) -> Result<(), SimError> {
        self.read_potential()?;
        project::displacement_of(&mut self.disp, &self.closed_flags, &self.excess_potential);
        Ok(())
    }
}

/// Where a substep's volume correction left the particles' displacement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Correction {
    /// Nowhere: no cell held an excess, or there was no liquid.
    None,
    /// In `FlipSim::disp`.
    Host,
    /// On the devices' shared face field.
    Device,
}
