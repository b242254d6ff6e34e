//! PIC/FLIP/APIC liquids on a MAC grid, 2D and 3D (Austin Eng's WebGL PIC/FLIP, after Zhu &
//! Bridson 2005 and Bridson's *Fluid Simulation for Computer Graphics*; APIC after Jiang et al. 2015).
//!
//! The liquid is a set of marker particles carrying velocity; the grid is rebuilt from them every step to
//! make the velocity divergence-free. One step ([`FlipSim::step`]), in the seed's order:
//!
//! 1. **sort**: counting sort of the particles by half cell (drains, emitters and reseeding act here);
//! 2. `particles_to_grid`: weighted average of particle velocities onto the
//!    MAC faces, as a scatter over slabs of the sorted particles in two passes (no atomics, bit-identical
//!    for any thread count);
//! 3. **save velocities**: copy of the grid for the FLIP update;
//! 4. `mark_cells`: fluid / air / solid, and the `fill_fraction`
//!    (smoothed particle density) of every cell;
//! 5. `apply_forces`: gravity;
//! 6. `enforce_boundary`: solid and moving-obstacle velocities on their faces;
//! 7. `project`: PCG pressure solve (none / Jacobi / MIC(0) / Incomplete Poisson /
//!    multigrid preconditioner, MGPCG by default) and velocity update;
//!    then the volume correction (`volume_displacement`, after Kugelstadt
//!    et al. 2019): a displacement field that moves particles out of over-full cells;
//! 8. `extrapolate`: velocities into the air, then the boundary conditions again;
//! 9. `grid_to_particles`: PIC, PIC/FLIP blend (5% PIC) or APIC;
//! 10. advect (`transfer_and_advect`, fused with 9 in one pass over the
//!     particles): RK2 through the grid velocity plus the volume correction's displacement, solid push-out.
//!
//! A [`TransferDevice`] ([`FlipSim::set_transfer_device`]) may run stages 2 and 9–10, and a
//! [`PoissonDevice`] ([`FlipSim::set_pressure_device`]) the solves of stage 7: the GPU backend. A device
//! that keeps the particles ([`TransferDevice::keeps_particles`]) runs stage 1 too when the scene adds and
//! removes none (no drains, emitters or reseeding band): the particles then stay on it from one substep to
//! the next, and come back once a step, or with [`FlipSim::read_particles_per_frame`] only when a caller
//! needs them ([`Simulation::complete_records`]). Such a device runs stage 8 too in a scene without
//! obstacles ([`TransferDevice::extrapolates`]); the host then extrapolates its own copy of the velocity only
//! when the state is read. Where it also forms stages 3, 5, 6 and the projection of 7 on its own copy of the
//! grid and tallies the step's cell quantities there ([`TransferDevice::tallies_grid`]), the host leaves
//! those on its own copy until the state is read too.
//!
//! A step longer than [`FlipParams::substep_cfl`] cells of travel is split into substeps. The liquid surface
//! is available as a Zhu–Bridson signed distance (field `surface`). Method notes: `docs/flip.md`.

// Per-axis loops index several `[_; D]` arrays (position, velocity, window) together.
#![allow(clippy::needless_range_loop)]

mod advect;
mod extrapolate;
mod fields;
mod mark;
mod measure;
mod params;
mod particles;
mod project;
mod resume;
mod seed;
mod surface;
mod transfer;
mod volume;

pub use fields::{describe, STAGES};
pub use measure::GridTally;
pub use params::{Boundary, FlipConfig, FlipParams, Inflow, Obstacle, Sink, Transfer};
pub use particles::{Particles, Tally};
pub use surface::{SURFACE_KERNEL_RADIUS, SURFACE_PARTICLE_RADIUS};
pub use transfer::{
    Advection, CpuTransfer, Derived, Displacement, GridSums, KeptParticles, KeptTransfer,
    Projection, TransferDevice,
};

use crate::checkpoint::SavedState;
use crate::diag::{Quantity, StageTimer, StepRecord};
use crate::grid::{CellFlag, Grid, MacGrid};
use crate::linsolve::{Info, PcgParams, PoissonDevice, PoissonSolver};
use crate::shape::Shape;
use crate::sim::{Advance, Description, Field, SimError, Simulation};
use measure::{CellTally, Measured};
use transfer::HalfCellBins;
use volume::Correction;

/// A PIC/FLIP/APIC liquid simulation.
///
/// ```
/// use eddies::flip::{FlipConfig, FlipSim};
/// use eddies::{Shape, Simulation};
///
/// let cfg = FlipConfig::<2> { resolution: [32, 32], cell_size: 1.0 / 32.0, ..Default::default() };
/// let mut sim = FlipSim::new(cfg)?;
/// sim.fill(&Shape::box2([0.0, 0.0], [0.4, 0.6]), [0.0, 0.0]);
/// for _ in 0..10 {
///     let record = sim.step(sim.max_dt(1.0))?;
///     assert!(record.scalar("pressure_residual").unwrap() <= 1e-6);
/// }
/// let surface = sim.field("surface").expect("the liquid's signed distance"); // [ny, nx], m
/// assert_eq!(surface.shape, vec![32, 32]);
/// # Ok::<(), eddies::SimError>(())
/// ```
pub struct FlipSim<const D: usize> {
    cfg: FlipConfig<D>,
    // State.
    particles: Particles<D>,
    obstacles: Vec<Obstacle<D>>,
    emitters: Vec<(Inflow<D>, Vec<[usize; D]>)>,
    sinks: Vec<Sink>,
    time: f64,
    steps: u64,
    substeps_total: u64,
    /// Mass of one particle (kg in 3D, kg/m in 2D): ρ h^D over the seeding count per cell.
    particle_mass: f64,
    max_speed: f64,
    // Grid quantities of the last substep (derived from the particles; kept for output and as scratch).
    u: MacGrid<D>,
    u_old: MacGrid<D>,
    /// Per face, the particle-to-grid sums `[Σ w, Σ w u]` (the weights also give the fill fraction), in f32,
    /// the particles' own precision; of the CPU's transfers only (a device derives `u` and `fill` itself).
    weight: [Grid<[f32; 2], D>; D],
    flags: Grid<CellFlag, D>,
    solid_id: Grid<u16, D>,
    count: Grid<u32, D>,
    pressure: Grid<f64, D>,
    rhs: Grid<f64, D>,
    div_before: Grid<f64, D>,
    div_after: Grid<f64, D>,
    /// Fill fraction of each cell from the particle-to-grid weights (dimensionless, 1 at the seeding
    /// density; [`mark::fill_fraction`]).
    fill: Grid<f64, D>,
    /// Relative volume excess of each fluid cell, times the correction's strength (dimensionless).
    excess: Grid<f64, D>,
    /// Potential (m²) and displacement (m) of the volume correction.
    excess_potential: Grid<f64, D>,
    /// The token under which the pressure device keeps the volume correction's last potential
    /// ([`PoissonDevice::solve_gradient`]), which `excess_potential` then lags.
    potential_kept: Option<u64>,
    disp: MacGrid<D>,
    /// The face fields of the particle pass (`advect::pack`).
    packed: advect::Packed<D>,
    /// The flags of the volume correction's solve: fluid stays fluid, air becomes solid.
    closed_flags: Grid<CellFlag, D>,
    solver: Option<PoissonSolver<D>>,
    closed_solver: Option<PoissonSolver<D>>,
    /// Where the pressure and volume-correction solves iterate (the GPU backend), or this CPU.
    pressure_device: Option<Box<dyn PoissonDevice<D>>>,
    /// Where the particle passes run (the GPU backend), or this CPU.
    transfer_device: Option<Box<dyn TransferDevice<D>>>,
    bins: HalfCellBins<D>,
    /// Whether `bins` index other particles than `particles` (the sort ran on the device, or on a copy).
    bins_stale: bool,
    /// The name of the particles the transfer device keeps for this simulation.
    owner: KeptParticles,
    /// Whether the transfer device keeps this simulation's particles (as `particles` holds them, or moved
    /// since when `host_behind`).
    kept: bool,
    /// Whether `particles` are older than those the device keeps (within a step, or across steps with
    /// `per_frame`).
    host_behind: bool,
    /// How many particles the device keeps (its last sort's live ones).
    kept_len: usize,
    /// Whether the particles the device keeps stay there after a step, until
    /// [`Simulation::complete_records`] or a change on the CPU needs them
    /// ([`FlipSim::read_particles_per_frame`]).
    per_frame: bool,
    /// A device failure met where it could not be returned (a read-back before a change on the CPU):
    /// the next step reports it.
    failed: Option<SimError>,
    valid: [Vec<u8>; D],
    front: extrapolate::Front,
    /// Whether the transfer device extrapolated its copy of `u` in the last substep and the host has not
    /// ([`TransferDevice::extrapolates`]): `read_kept` extrapolates `u` on the host too.
    extrapolation_behind: bool,
    /// The host's grid stages of the last substep that the devices ran on their own copy and the host has
    /// not: `read_kept` catches up ([`FlipSim::catch_up_grid`]).
    grid_behind: Option<GridBehind>,
    shapes_now: Vec<Shape>,
    last_iterations: usize,
    last_residual: f64,
    last_substep_dt: f64,
}

/// The host's grid stages of a substep left to catch up with the devices' copy
/// ([`TransferDevice::tallies_grid`]): `u` holds the transfer's velocity; the saving of `u_old`, the body
/// force and the walls wait, and with `projected` the divergences and the pressure gradient (the pressure
/// solved) too.
#[derive(Clone, Copy, Debug)]
struct GridBehind {
    /// The substep (s).
    dt: f64,
    projected: bool,
}

impl<const D: usize> FlipSim<D> {
    /// Runs the iterations of the pressure projection and of the volume correction on `device` (the GPU
    /// backend); every other stage stays on this CPU. A device failure ends the step with
    /// [`SimError::Device`].
    pub fn set_pressure_device(&mut self, device: Box<dyn PoissonDevice<D>>) {
        // The volume correction's potential that the old device kept comes back first.
        if let Err(e) = self.read_potential() {
            self.failed.get_or_insert(e);
        }
        self.pressure_device = Some(device);
    }

    /// Runs the particle passes (the particle-to-grid transfer; the grid-to-particle transfer with advection)
    /// on `device` (the GPU backend), where it takes them. A device failure ends the step with
    /// [`SimError::Device`].
    ///
    /// A device that keeps the particles ([`TransferDevice::keeps_particles`]) keeps them from one substep to
    /// the next when the scene adds and removes none (no emitters, drains or reseeding band): it sorts them
    /// by half cell too, and the CPU reads them back once a step (or once per frame,
    /// [`read_particles_per_frame`](Self::read_particles_per_frame)).
    pub fn set_transfer_device(&mut self, device: Box<dyn TransferDevice<D>>) {
        self.bring_back();
        self.transfer_device = Some(device);
        self.forget_kept();
    }

    /// With `on`, the particles that the transfer device keeps stay there after each step: the step's
    /// diagnostics of the particles (energy, momentum, largest speed, the finiteness check) are added up on
    /// the device in the CPU's order ([`TransferDevice::tally_kept`]), with the same bits, and the particles
    /// come back only in [`Simulation::complete_records`] (once per output frame in `eddies run`) or before a
    /// change on the CPU (an impulse, a fill, an obstacle, an emitter's first step). Until then, what reads
    /// the particles ([`Simulation::particle_positions`], [`particles`](Self::particles), the `surface`
    /// field, the checksum) sees them as of the last read, and where the device also tallies the grid
    /// ([`TransferDevice::tallies_grid`]) what reads the grid ([`grid_velocity`](Self::grid_velocity),
    /// [`divergence`](Self::divergence), the velocity, divergence and residual fields) sees the last
    /// substep's transferred velocity without its body force and projection; [`Simulation::save_state`]
    /// refuses. Off by
    /// default; `eddies run`, the viewer and Python turn it on for the GPU backend. A device that cannot
    /// tally the particles bit for bit (no double precision) has them read back each step as before.
    pub fn read_particles_per_frame(&mut self, on: bool) {
        self.per_frame = on;
    }

    /// An empty tank, or the parameter that is out of range.
    pub fn new(cfg: FlipConfig<D>) -> Result<Self, SimError> {
        Self::check(&cfg)?;
        let dims = cfg.resolution;
        let h = cfg.cell_size;
        let origin = [0.0; D];
        let u = MacGrid::new(dims, origin, h);
        let seeds = cfg.params.seeds_per_axis.pow(D as u32) as f64;
        Ok(Self {
            particles: Particles::new(),
            obstacles: Vec::new(),
            emitters: Vec::new(),
            sinks: Vec::new(),
            time: 0.0,
            steps: 0,
            substeps_total: 0,
            particle_mass: cfg.params.density * h.powi(D as i32) / seeds,
            max_speed: 0.0,
            weight: std::array::from_fn(|k| u.u[k].same_shape([0.0f32; 2])),
            u_old: u.clone(),
            u,
            flags: Grid::new(dims, origin, h, CellFlag::Air),
            solid_id: Grid::new(dims, origin, h, 0u16),
            count: Grid::new(dims, origin, h, 0u32),
            pressure: Grid::new(dims, origin, h, 0.0),
            rhs: Grid::new(dims, origin, h, 0.0),
            div_before: Grid::new(dims, origin, h, 0.0),
            div_after: Grid::new(dims, origin, h, 0.0),
            fill: Grid::new(dims, origin, h, 0.0),
            excess: Grid::new(dims, origin, h, 0.0),
            excess_potential: Grid::new(dims, origin, h, 0.0),
            potential_kept: None,
            disp: MacGrid::new(dims, origin, h),
            packed: advect::Packed::default(),
            closed_flags: Grid::new(dims, origin, h, CellFlag::Air),
            solver: None,
            closed_solver: None,
            pressure_device: None,
            transfer_device: None,
            bins: HalfCellBins::new(dims),
            bins_stale: false,
            owner: KeptParticles::unique(),
            kept: false,
            host_behind: false,
            kept_len: 0,
            per_frame: false,
            failed: None,
            valid: std::array::from_fn(|_| Vec::new()),
            front: extrapolate::Front::default(),
            extrapolation_behind: false,
            grid_behind: None,
            shapes_now: Vec::new(),
            last_iterations: 0,
            last_residual: 0.0,
            last_substep_dt: 0.0,
            cfg,
        })
    }

    fn check(cfg: &FlipConfig<D>) -> Result<(), SimError> {
        let bad = |m: String| Err(SimError::InvalidInput(m));
        if !(D == 2 || D == 3) {
            return bad(format!("FLIP runs in 2 or 3 dimensions, not {D}"));
        }
        if cfg.resolution.iter().any(|&n| n < 2) {
            return bad(format!(
                "resolution {:?}: every axis needs at least 2 cells",
                cfg.resolution
            ));
        }
        let sub: usize = cfg.resolution.iter().map(|n| 2 * n).product();
        if sub >= u32::MAX as usize {
            return bad(format!("resolution {:?}: too many cells", cfg.resolution));
        }
        if !(cfg.cell_size.is_finite() && cfg.cell_size > 0.0) {
            return bad(format!("cell size {} m: must be positive", cfg.cell_size));
        }
        cfg.params
            .validate()
            .map_err(|e| SimError::InvalidParameter(e.within("params")))?;
        if cfg.gravity.iter().any(|g| !g.is_finite()) {
            return bad("gravity must be finite".into());
        }
        Ok(())
    }

    /// Bytes a simulation of `resolution` cells with parameters `params` holds at most: every cell and the
    /// particles of a domain seeded full (`seeds_per_axis^D` per cell), for refusing scenes too large for
    /// memory before allocating. In f64, so that absurd sizes cannot overflow.
    pub fn estimate_bytes(resolution: [usize; D], params: &FlipParams) -> f64 {
        let cells: f64 = resolution.iter().map(|&n| n as f64).product();
        let per_cell = (params.seeds_per_axis.clamp(1, 4) as f64).powi(D as i32);
        let particle = Self::bytes_per_particle(params.transfer == Transfer::Apic) as f64;
        cells * (Self::bytes_per_cell() as f64 + per_cell * particle)
    }

    /// Bytes per particle: position and velocity (f32 × 2D), the APIC matrix (f32 × D²), and the sort's key,
    /// bucket list, order and permutation buffer (4 bytes each).
    pub fn bytes_per_particle(apic: bool) -> usize {
        4 * 2 * D + (if apic { 4 * D * D } else { 0 }) + 16
    }

    /// Bytes per cell: velocity and saved velocity (2 × D f64), the particle-to-grid weights and weighted
    /// velocities (2 × D f32), the volume correction's displacement (D f64), the packed face fields of the
    /// particle pass (5 × D f32), flags, obstacle id and particle count, pressure, right-hand side, two
    /// divergences, the volume excess and its potential (6 f64), the volume correction's flags, the half-cell
    /// bins (2ᴰ u32), the extrapolation's known-face masks (its layer buffers hold a band around the surface,
    /// not the grid), and two pressure solvers, the projection's and the volume correction's (each about 8
    /// padded f64 vectors plus the multigrid levels, ≈ 1/7 more).
    pub fn bytes_per_cell() -> usize {
        2 * D * 8 + 2 * D * 4 + D * 8 + D * 20 + 1 + 2 + 4 + 6 * 8 + 1 + (1 << D) * 4 + D + 2 * 80
    }

    /// The configuration.
    pub fn config(&self) -> &FlipConfig<D> {
        &self.cfg
    }

    /// The particles.
    pub fn particles(&self) -> &Particles<D> {
        &self.particles
    }

    /// Mass of one particle (kg in 3D, kg per metre of depth in 2D).
    pub fn particle_mass(&self) -> f64 {
        self.particle_mass
    }

    /// The grid velocity of the last substep (m/s), after projection and extrapolation; where the GPU
    /// extrapolated it ([`TransferDevice::extrapolates`]) and the particles stay there between steps
    /// ([`read_particles_per_frame`](Self::read_particles_per_frame)), the host's copy is extrapolated by
    /// [`Simulation::complete_records`] (before it, it is the projected velocity).
    pub fn grid_velocity(&self) -> &MacGrid<D> {
        &self.u
    }

    /// Cell flags of the last substep.
    pub fn flags(&self) -> &Grid<CellFlag, D> {
        &self.flags
    }

    /// Divergence (1/s) of the grid velocity before and after the last projection.
    pub fn divergence(&self) -> (&Grid<f64, D>, &Grid<f64, D>) {
        (&self.div_before, &self.div_after)
    }

    /// The volume correction's target of the last substep: `κ (n/n₀ − 1)` in fluid cells holding more than
    /// the seeding count `n₀`, 0 elsewhere (see [`FlipParams::volume_correction`]; dimensionless).
    pub fn volume_excess(&self) -> &Grid<f64, D> {
        &self.excess
    }

    fn apic(&self) -> bool {
        self.cfg.params.transfer == Transfer::Apic
    }

    /// Sorts the particles and refreshes the counts (drops dead ones).
    fn resort(&mut self) {
        transfer::sort_particles(
            &mut self.particles,
            &mut self.bins,
            self.u.origin,
            self.cfg.cell_size,
        );
        self.bins.counts_into(&mut self.count);
        self.bins_stale = false;
        self.forget_kept();
    }

    /// A copy of the particles, sorted into `bins`; the particles themselves keep their order.
    fn sorted_copy(&self, bins: &mut HalfCellBins<D>) -> Particles<D> {
        let mut copy = self.particles.clone();
        transfer::sort_particles(&mut copy, bins, self.u.origin, self.cfg.cell_size);
        copy
    }

    /// The counts of the particles as they are, their order left alone: the bins then index a sorted copy.
    fn count_in_place(&mut self) {
        let mut bins = std::mem::replace(&mut self.bins, HalfCellBins::new(self.cfg.resolution));
        self.sorted_copy(&mut bins);
        bins.counts_into(&mut self.count);
        self.bins = bins;
        self.bins_stale = true;
    }

    /// The Zhu–Bridson signed distance of the particles into `g` (shaped as the cells), from the bins of the
    /// last sort or, where those index other particles, of a sorted copy.
    fn surface_distance(&self, g: &mut Grid<f64, D>) {
        if self.bins_stale {
            let mut bins = HalfCellBins::new(self.cfg.resolution);
            let copy = self.sorted_copy(&mut bins);
            surface::surface_distance(&copy, &bins, g);
        } else {
            surface::surface_distance(&self.particles, &self.bins, g);
        }
    }

    /// Whether the particles stay on the transfer device from one substep to the next: a device that keeps
    /// them, and a scene that adds and removes none on the CPU.
    fn keep_on_device(&self) -> bool {
        let p = &self.cfg.params;
        self.transfer_device
            .as_ref()
            .is_some_and(|d| d.keeps_particles())
            && self.sinks.is_empty()
            && self.emitters.is_empty()
            && p.min_per_cell == 0
            && p.max_per_cell == 0
    }

    /// The device's copy of the particles is not to be used any more: the host's replaces it (a new device,
    /// a sort, new or changed particles, a restored state).
    fn forget_kept(&mut self) {
        self.kept = false;
        self.host_behind = false;
    }

    /// The error of a device that no longer holds the particles it moved, which the host has not.
    fn lost_particles(&self) -> SimError {
        SimError::Device {
            step: self.steps + 1,
            detail: "the GPU no longer holds the particles it moved".into(),
        }
    }

    /// The particles the device moved, back into `particles` where a change on the CPU is to be made to
    /// them; a failure is reported by the next step.
    fn bring_back(&mut self) {
        if let Err(e) = self.read_kept() {
            self.failed.get_or_insert(e);
        }
    }

    /// How many particles there are (the device's count where the host's copy is behind).
    fn particle_count(&self) -> usize {
        if self.host_behind {
            self.kept_len
        } else {
            self.particles.len()
        }
    }

    /// With `per_frame`, the tally of the particles the device kept and moved, added up on it; `None` when
    /// they are to come back instead (not `per_frame`, not behind, or a device that cannot).
    fn tally_kept(&mut self) -> Result<Option<Tally<D>>, SimError> {
        if !(self.per_frame && self.host_behind) {
            return Ok(None);
        }
        let closed = self.cfg.boundary == Boundary::Closed;
        let device = self.transfer_device.as_mut().expect("a device keeps them");
        device
            .tally_kept(self.owner, closed)
            .map_err(|detail| SimError::Device {
                step: self.steps + 1,
                detail,
            })
    }

    /// Whether the volume correction's displacement may stay on the devices this substep: the particles stay
    /// on the transfer device, and the pressure device writes the face field that it reads.
    fn faces_on_device(&self, keep: bool) -> bool {
        let pressure = self.pressure_device.as_ref().and_then(|d| d.face_field());
        let transfer = self.transfer_device.as_ref().and_then(|d| d.face_field());
        keep && pressure.is_some() && pressure == transfer
    }

    /// The particles the device moved, back into `particles` (a no-op unless they are behind), and the
    /// volume correction's potential that the pressure device kept.
    fn read_kept(&mut self) -> Result<(), SimError> {
        self.read_potential()?;
        self.catch_up_grid();
        if self.extrapolation_behind {
            self.extrapolate_on_host();
        }
        if !self.host_behind {
            return Ok(());
        }
        let device = self.transfer_device.as_mut().expect("a device keeps them");
        let read = device
            .read_kept(self.owner, &mut self.particles)
            .map_err(|detail| SimError::Device {
                step: self.steps + 1,
                detail,
            })?;
        if !read {
            return Err(self.lost_particles());
        }
        self.host_behind = false;
        Ok(())
    }

    /// The sort and the particle-to-grid transfer of the particles the device keeps (sent to it first when
    /// it keeps none of this simulation's, or older ones), with the counts per cell.
    fn sort_to_grid_kept(&mut self, transfer: Transfer) -> Result<(), SimError> {
        let step = self.steps + 1;
        let failed = |detail| SimError::Device { step, detail };
        let lost = self.lost_particles();
        let (owner, kept, host_behind) = (self.owner, self.kept, self.host_behind);
        let (closed, seeds) = self.derived_settings();
        let device = self.transfer_device.as_mut().expect("a device keeps them");
        let mut sort = |upload| {
            device
                .sort_to_grid(KeptTransfer {
                    upload,
                    owner,
                    // (Its values are not read: `u_old`, of the same shape, leaves `u` free to be written.)
                    grid: &self.u_old,
                    transfer,
                    out: GridSums::Derived(Derived {
                        u: &mut self.u,
                        fill: &mut self.fill,
                        closed,
                        seeds,
                    }),
                    count: &mut self.count,
                })
                .map_err(failed)
        };
        // The particles the device keeps; when it keeps none of this simulation's (another's took their
        // place), the host's, unless the device had moved them since.
        let mut taken = if kept { sort(None)? } else { None };
        if taken.is_none() {
            if host_behind {
                return Err(lost);
            }
            taken = sort(Some(&self.particles))?;
        }
        let Some(live) = taken else {
            return Err(failed("the GPU did not take the particles".into()));
        };
        self.kept_len = live;
        // The device's particles are now in its sorted order, which the host's copy is not.
        self.kept = true;
        self.host_behind = true;
        self.bins_stale = true;
        Ok(())
    }

    /// The settings of the fill fraction that a device derives ([`Derived`]): whether the domain is closed,
    /// and the particles seeded per cell.
    fn derived_settings(&self) -> (bool, f64) {
        let p = &self.cfg.params;
        (
            self.cfg.boundary == Boundary::Closed,
            p.seeds_per_axis.pow(D as u32) as f64,
        )
    }

    /// Stage `extrapolate` on the host: the known faces' velocities into the air, then the boundary
    /// conditions again.
    fn extrapolate_on_host(&mut self) {
        extrapolate::mark_valid(&self.u, &self.flags, &mut self.valid);
        extrapolate::extrapolate(
            &mut self.u,
            &mut self.valid,
            self.cfg.params.extrapolation_layers,
            &mut self.front,
        );
        self.enforce_boundary();
        self.extrapolation_behind = false;
    }

    /// The host's grid stages that the substep left to the devices ([`GridBehind`]), on the host's copy, as
    /// the substep runs them: the same bits. A no-op where none wait.
    fn catch_up_grid(&mut self) {
        let Some(GridBehind { dt, projected }) = self.grid_behind.take() else {
            return;
        };
        self.save_velocities();
        self.apply_forces(dt);
        if projected {
            self.u.divergence_into(&mut self.div_before);
            let c = dt / self.cfg.params.density;
            project::subtract_gradient(
                &mut self.u,
                &self.flags,
                self.cfg.boundary,
                c,
                &self.pressure,
            );
            self.u.divergence_into(&mut self.div_after);
        }
    }

    /// Stage `save_velocities`: `u_old` = `u`, for the FLIP update.
    fn save_velocities(&mut self) {
        for k in 0..D {
            crate::linsolve::vector::copy(&self.u.u[k].data, &mut self.u_old.u[k].data);
        }
    }

    /// Stage `forces`: the body force over `dt` seconds, then the walls' and obstacles' velocities.
    fn apply_forces(&mut self, dt: f64) {
        project::apply_forces(&mut self.u, self.cfg.gravity, dt);
        self.enforce_boundary();
    }

    /// The walls' and the obstacles' velocities on their faces of `u` ([`project::enforce_boundary`]).
    fn enforce_boundary(&mut self) {
        project::enforce_boundary(
            &mut self.u,
            &self.solid_id,
            &self.obstacles,
            self.cfg.boundary,
            self.time,
        );
    }

    /// The projection's stages for the transfer device, with the host's factors
    /// ([`project::apply_forces`], [`project::project`]).
    fn device_projection(&self, dt: f64) -> Projection<D> {
        let (g, density) = (self.cfg.gravity, self.cfg.params.density);
        Projection {
            force: std::array::from_fn(|k| (g[k] != 0.0).then(|| g[k] * dt)),
            inv_h: 1.0 / self.u.spacing,
            scale: -density / dt,
            coef: dt / density / self.u.spacing,
            boundary: self.cfg.boundary,
            kept: self.owner,
        }
    }

    /// With `ready` (the transfer device ran this substep's transfer, keeps the particles, extrapolates
    /// without obstacles, and shares its face field with the pressure device), the projection's right-hand
    /// side formed on the transfer device from its own copy of the velocity, into the face field
    /// ([`TransferDevice::rhs_to_faces`]), so that the host need not send it: the kept particles' counts
    /// are the fluid cells, and the walls the only solids. Returns whether the device did.
    fn rhs_on_device(&mut self, ready: bool, dt: f64) -> Result<bool, SimError> {
        if !ready {
            return Ok(false);
        }
        let projection = self.device_projection(dt);
        let step = self.steps + 1;
        match self.transfer_device.as_mut() {
            Some(d) => d
                .rhs_to_faces(&self.u, &projection)
                .map_err(|detail| SimError::Device { step, detail }),
            None => Ok(false),
        }
    }

    /// With `ready` (the projection ran, and as [`rhs_on_device`](Self::rhs_on_device)), the projected
    /// velocity formed again on the transfer device from its own copy and the pressure that the solve left
    /// in the face field ([`TransferDevice::project_velocity`]), so that the host need not send it.
    /// Returns whether the device did.
    fn project_on_device(&mut self, ready: bool, dt: f64) -> Result<bool, SimError> {
        if !ready {
            return Ok(false);
        }
        let projection = self.device_projection(dt);
        let step = self.steps + 1;
        let failed = |detail: String| SimError::Device { step, detail };
        let (Some(pressure), Some(transfer), Some(solver)) = (
            self.pressure_device.as_mut(),
            self.transfer_device.as_mut(),
            self.solver.as_ref(),
        ) else {
            return Ok(false);
        };
        if !pressure
            .solution_to_faces(solver)
            .map_err(|e| failed(e.to_string()))?
        {
            return Ok(false);
        }
        transfer
            .project_velocity(&self.u, &projection)
            .map_err(failed)
    }

    /// Stage `project` on the host's copy ([`project::project`]) and the divergence after it; only the solve
    /// where the host's copy waits ([`GridBehind`]) and the device holds the right-hand side, unless it
    /// declines (the host's copy then catches up first).
    fn project(
        &mut self,
        rhs_in_faces: bool,
        pcg: PcgParams,
        dt: f64,
    ) -> Result<Option<Info>, SimError> {
        let (kind, density) = (self.cfg.params.preconditioner, self.cfg.params.density);
        let step = self.steps + 1;
        let failed = |source| SimError::solve_failed("project", step, source);
        let liquid = self.flags.data.contains(&CellFlag::Fluid);
        if let (Some(_), true, true, Some(device)) = (
            self.grid_behind,
            rhs_in_faces,
            liquid,
            self.pressure_device.as_mut(),
        ) {
            let solved = project::solve_on_device(
                &self.flags,
                self.cfg.boundary,
                kind,
                pcg,
                &mut self.pressure,
                &mut self.solver,
                &mut **device,
            )
            .map_err(failed)?;
            if solved.is_some() {
                // The pressure is solved: a catch-up projects with it.
                if let Some(behind) = self.grid_behind.as_mut() {
                    behind.projected = true;
                }
                return Ok(solved);
            }
        }
        self.catch_up_grid();
        let info = project::project(
            &mut self.u,
            &self.flags,
            self.cfg.boundary,
            kind,
            pcg,
            density,
            dt,
            &mut self.div_before,
            &mut self.rhs,
            &mut self.pressure,
            &mut self.solver,
            self.pressure_device
                .as_mut()
                .map(|d| &mut **d as &mut dyn PoissonDevice<D>),
            rhs_in_faces,
        )
        .map_err(failed)?;
        self.u.divergence_into(&mut self.div_after);
        Ok(info)
    }

    /// With the host's copy of the last substep's grid behind the devices' ([`GridBehind`]), the step's
    /// cell quantities as the transfer device tallies them on its own ([`TransferDevice::grid_tally`]);
    /// `None` otherwise, or where it did not, and the host's copy then catches up.
    fn grid_tally(&mut self) -> Result<Option<GridTally>, SimError> {
        if !self.grid_behind.is_some_and(|b| b.projected) {
            return Ok(None);
        }
        let step = self.steps + 1;
        let device = self.transfer_device.as_mut().expect("it projected");
        let tally = device
            .grid_tally(&self.u)
            .map_err(|detail| SimError::Device { step, detail })?;
        if tally.is_none() {
            self.catch_up_grid();
        }
        Ok(tally)
    }

    /// One substep of `dt` seconds: Eng's stages in order.
    fn substep(&mut self, dt: f64, timer: &mut StageTimer) -> Result<(), SimError> {
        let p = self.cfg.params.clone();
        let t_end = self.time + dt;

        let keep = self.keep_on_device();
        if !keep {
            // The CPU sorts them: those the device kept after the last step (with `per_frame`, or a scene
            // that has since gained an emitter) come back first.
            timer.time("sort", || self.read_kept())?;
        }
        timer.time("sort", || {
            self.shapes_now.clear();
            self.shapes_now
                .extend(self.obstacles.iter().map(|o| o.shape_at(self.time)));
            if self.steps == 0 || self.obstacles.iter().any(Obstacle::is_moving) {
                mark::mark_solids(&self.shapes_now, &mut self.solid_id);
            }
            if keep {
                // The device sorts them, in the particle-to-grid transfer.
                return;
            }
            self.resort();
            if (!self.sinks.is_empty()
                || !self.emitters.is_empty()
                || p.min_per_cell > 0
                || p.max_per_cell > 0)
                && self.reseed(dt)
            {
                self.resort();
            }
        });

        // The last substep's grids that wait are superseded by this transfer's.
        self.grid_behind = None;
        let transferred_on_device = timer.time("particles_to_grid", || {
            if keep {
                return self.sort_to_grid_kept(p.transfer).map(|()| true);
            }
            let (closed, seeds) = self.derived_settings();
            let on_device = match self.transfer_device.as_mut() {
                Some(d) => d
                    .particles_to_grid(
                        &self.particles,
                        &self.u_old,
                        p.transfer,
                        GridSums::Derived(Derived {
                            u: &mut self.u,
                            fill: &mut self.fill,
                            closed,
                            seeds,
                        }),
                    )
                    .map_err(|detail| SimError::Device {
                        step: self.steps + 1,
                        detail,
                    })?,
                None => false,
            };
            if !on_device {
                transfer::particles_to_grid(
                    &self.particles,
                    &self.bins,
                    &mut self.u,
                    &mut self.weight,
                    p.transfer,
                );
            }
            Ok::<_, SimError>(on_device)
        })?;

        // Without obstacles the device that keeps the particles extrapolates its copy of the velocity itself
        // (the cells holding them are the fluid ones); the host's copy follows only when it is read. Also
        // where the host reads it after every step (without `per_frame`), so that the particles move with
        // the same bits however often they come back.
        let extrapolate_on_device = keep
            && self.obstacles.is_empty()
            && self
                .transfer_device
                .as_ref()
                .is_some_and(|d| d.extrapolates());
        let faces_on_device = self.faces_on_device(keep);
        // That device also forms the projection's right-hand side and the projected velocity from its own
        // copy, where it shares its face field with the pressure device; where it also tallies the step's
        // cell quantities, the host's copy waits for the body force and the projection until it is read.
        let project_on_device = faces_on_device && transferred_on_device && extrapolate_on_device;
        let defer = project_on_device
            && self
                .transfer_device
                .as_ref()
                .is_some_and(|d| d.tallies_grid());
        if defer {
            self.grid_behind = Some(GridBehind {
                dt,
                projected: false,
            });
        }

        timer.time("save_velocities", || {
            if !defer {
                self.save_velocities();
            }
        });

        timer.time("mark_cells", || {
            // `count` is the last sort's (`resort`); nothing has moved the particles since.
            mark::mark_cells(&self.solid_id, &mut self.flags, &self.count);
            if !transferred_on_device {
                // (A device derived it with the velocities.)
                let (closed, seeds) = self.derived_settings();
                mark::fill_fraction(&self.weight, closed, seeds, &mut self.fill);
            }
        });

        timer.time("forces", || {
            if !defer {
                self.apply_forces(dt);
            }
        });

        let rhs_in_faces = timer.time("project", || self.rhs_on_device(project_on_device, dt))?;

        let pcg = PcgParams {
            tolerance: p.tolerance,
            max_iterations: p.max_iterations,
        };
        let info = timer.time("project", || self.project(rhs_in_faces, pcg, dt))?;
        (self.last_iterations, self.last_residual) = info
            .as_ref()
            .map_or((0, 0.0), |i| (i.iterations, i.residual));

        let projected = timer.time("project", || {
            self.project_on_device(info.is_some() && project_on_device, dt)
        })?;
        if self.grid_behind.is_some() && !projected {
            // The device solved but did not project its copy: the host's moves the particles.
            timer.time("project", || self.catch_up_grid());
        }
        let correct = timer.time("volume_correction", || {
            self.volume_correction(info.is_some(), faces_on_device, projected)
        })?;

        // (Without obstacles the boundary conditions do not depend on the time at which they are set.)
        self.extrapolation_behind = extrapolate_on_device;
        timer.time("extrapolate", || {
            if !extrapolate_on_device {
                self.extrapolate_on_host();
            }
        });

        timer.time("grid_to_particles_advect", || {
            self.shapes_now.clear();
            self.shapes_now
                .extend(self.obstacles.iter().map(|o| o.shape_at(t_end)));
            let on_device = match self.transfer_device.as_mut() {
                Some(d) => {
                    let step = Advection {
                        u: &self.u,
                        u_old: &self.u_old,
                        displacement: match correct {
                            Correction::None => Displacement::None,
                            Correction::Host => Displacement::Host(&self.disp),
                            Correction::Device => Displacement::Device,
                        },
                        transfer: p.transfer,
                        pic_ratio: p.pic_ratio,
                        obstacles: &self.shapes_now,
                        boundary: self.cfg.boundary,
                        dt,
                        unchanged: transferred_on_device,
                        kept: keep.then_some(self.owner),
                        extrapolate: extrapolate_on_device.then_some(p.extrapolation_layers),
                        projected,
                    };
                    d.grid_to_particles_advect(&mut self.particles, &step)
                        .map_err(|detail| SimError::Device {
                            step: self.steps + 1,
                            detail,
                        })?
                }
                None => false,
            };
            if on_device && keep {
                self.host_behind = true;
            }
            if !on_device {
                // The CPU moves them: those the device keeps first come back, and are not kept any more.
                self.read_kept()?;
                self.kept = false;
                if correct == Correction::Device {
                    self.displacement_on_host()?;
                }
                advect::transfer_and_advect(
                    &mut self.particles,
                    &self.u,
                    &self.u_old,
                    p.transfer,
                    p.pic_ratio,
                    (correct != Correction::None).then_some(&self.disp),
                    &mut self.packed,
                    &self.shapes_now,
                    self.cfg.boundary,
                    dt,
                );
            }
            Ok::<_, SimError>(())
        })?;
        self.time = t_end;
        self.last_substep_dt = dt;
        self.substeps_total += 1;
        Ok(())
    }
}

impl<const D: usize> Simulation for FlipSim<D> {
    fn dim(&self) -> usize {
        D
    }

    fn resolution(&self) -> [usize; 3] {
        std::array::from_fn(|a| if a < D { self.cfg.resolution[a] } else { 1 })
    }

    fn cell_size(&self) -> f64 {
        self.cfg.cell_size
    }

    fn time(&self) -> f64 {
        self.time
    }

    fn steps(&self) -> u64 {
        self.steps
    }

    /// The step in which the fastest particle, or liquid falling from rest for one cell, moves `cfl` cells;
    /// also no faster than any obstacle allows.
    fn max_dt(&self, cfl: f64) -> f64 {
        let h = self.cfg.cell_size;
        let g = self.cfg.gravity.iter().map(|g| g * g).sum::<f64>().sqrt();
        let mut v = self.max_speed + (g * h).sqrt();
        for o in &self.obstacles {
            let lin = o.velocity.iter().map(|x| x * x).sum::<f64>().sqrt();
            let ang = o.angular_velocity.iter().map(|x| x * x).sum::<f64>().sqrt();
            let (lo, hi) = o.shape_at(self.time).bounds();
            let extent = (hi - lo).length();
            let reach = if extent.is_finite() { extent } else { 0.0 };
            v = v.max(lin + ang * reach);
        }
        cfl * h / v.max(1e-12)
    }

    fn describe(&self) -> Description {
        describe(D)
    }

    fn advance(&mut self, dt: f64, timer: &mut StageTimer) -> Result<Advance, SimError> {
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        let h = self.cfg.cell_size;
        let g = self.cfg.gravity.iter().map(|g| g * g).sum::<f64>().sqrt();
        let mut speed = self.max_speed;
        for (e, _) in &self.emitters {
            speed = speed.max(e.velocity.iter().map(|v| v * v).sum::<f64>().sqrt());
        }
        let travel = (speed + g * dt) * dt / h;
        let n = (travel / self.cfg.params.substep_cfl)
            .ceil()
            .clamp(1.0, 1e4) as u32;
        let sub = dt / n as f64;
        let mut iterations = 0;
        let mut residual: f64 = 0.0;
        let mut substeps = || -> Result<(), SimError> {
            for _ in 0..n {
                self.substep(sub, timer)?;
                iterations += self.last_iterations;
                residual = residual.max(self.last_residual);
            }
            Ok(())
        };
        let moved = substeps();
        // With `per_frame`, the device tallies the particles it kept and moved; otherwise (or where it
        // cannot) they come back once a step, for the diagnostics, the outputs and whatever else reads them
        // between steps: after a failed substep as far as they got, if the device still has them, and the
        // substep's error is the one reported.
        let tallied = if moved.is_ok() {
            timer.time("diagnostics", || self.tally_kept())?
        } else {
            None
        };
        if tallied.is_none() {
            let read = timer.time("grid_to_particles_advect", || self.read_kept());
            moved?;
            read?;
        }
        let cells = timer.time("diagnostics", || self.grid_tally())?;
        self.steps += 1;
        let (
            Measured {
                kinetic,
                momentum,
                max_speed,
                broken,
            },
            CellTally {
                fluid_cells,
                fluid_volume: volume,
                count_volume,
                max_divergence: div_after,
            },
        ) = timer.time("diagnostics", || {
            let measured = match tallied {
                Some(t) => self.measured(&t, self.kept_len),
                None => self.measure(),
            };
            (measured, self.cell_tally(cells))
        });
        if !(kinetic.is_finite() && max_speed.is_finite()) || broken {
            return Err(SimError::Diverged {
                stage: "advect",
                step: self.steps,
                detail: format!("kinetic energy {kinetic}, max speed {max_speed}"),
            });
        }
        self.max_speed = max_speed;
        Ok(Advance {
            substeps: n,
            quantities: vec![
                (
                    "particle_count",
                    Quantity::Count(self.particle_count() as u64),
                ),
                ("fluid_volume", Quantity::Scalar(volume)),
                ("count_volume", Quantity::Scalar(count_volume)),
                (
                    "fluid_cell_volume",
                    Quantity::Scalar(fluid_cells as f64 * h.powi(D as i32)),
                ),
                (
                    "particle_volume",
                    Quantity::Scalar(
                        self.particle_count() as f64 * self.particle_mass / self.cfg.params.density,
                    ),
                ),
                ("pressure_iterations", Quantity::Count(iterations as u64)),
                ("pressure_residual", Quantity::Scalar(residual)),
                ("max_divergence", Quantity::Scalar(div_after)),
                ("kinetic_energy", Quantity::Scalar(kinetic)),
                ("momentum", Quantity::Vector(momentum.to_vec())),
                ("max_speed", Quantity::Scalar(max_speed)),
                ("cfl", Quantity::Scalar(max_speed * dt / n as f64 / h)),
            ],
            clamps: Vec::new(),
        })
    }

    fn field(&self, name: &str) -> Option<Field> {
        self.grid_field(name)
    }

    /// Per particle, in [`Simulation::particle_positions`]' order: `velocity_x`, `velocity_y` (,
    /// `velocity_z`) in m/s.
    fn particle_values(&self, name: &str) -> Option<Vec<f32>> {
        let axis = ["velocity_x", "velocity_y", "velocity_z"][..D]
            .iter()
            .position(|&n| n == name)?;
        let p = &self.particles;
        Some(
            (0..p.len())
                .filter(|&i| (0..D).all(|k| p.pos[k][i].is_finite()))
                .map(|i| p.vel[axis][i])
                .collect(),
        )
    }

    fn particle_positions(&self) -> Vec<f32> {
        let p = &self.particles;
        let mut out = Vec::with_capacity(p.len() * D);
        // Particles that left an open domain in the last step are dropped at the next sort; skip them.
        for i in (0..p.len()).filter(|&i| (0..D).all(|k| p.pos[k][i].is_finite())) {
            for k in 0..D {
                out.push(p.pos[k][i]);
            }
        }
        out
    }

    fn substance_colors(&self) -> Vec<[f32; 3]> {
        vec![[0.15, 0.45, 0.95]]
    }

    /// The particles and what else a later step reads:
    ///
    /// - `particles.count` (u64), `particles.position` and `particles.velocity` (f32, `D·n`, axis after axis)
    ///   and, with APIC, `particles.affine` (f32, `D²·n`, `C[k][a]` row after row): every attribute of
    ///   [`Particles`], in their order (the sinks pick particles by their sorted index);
    /// - `time`, `steps` (the jitter and drain hashes read it) and `max_speed` (read by
    ///   [`Simulation::max_dt`] and by the substep count of the next step);
    /// - `grid.pressure` (Pa) and `grid.volume_potential` (m²): the initial guesses of the next projection and
    ///   volume correction solves;
    /// - `grid.velocity` (m/s, the faces of each component in turn), only with a reseeding band
    ///   (`min_per_cell > 0`), whose new particles take the last substep's grid velocity.
    ///
    /// Not saved: the scene (configuration, obstacles, emitters with their cells, sinks, particle mass), which
    /// the resumed simulation is built from; obstacles move as functions of `time`, and emitters, drains and
    /// seeding draw from hashes of the scene seed, `steps` and indices, so none of them carries state, nor is
    /// there a random generator. Every other grid (velocity without the band, saved velocities, weights,
    /// flags, counts, divergences, fill, excess, displacement, packed faces, extrapolation masks) is
    /// rewritten by a step before it is read; the solvers' operators are rebuilt from the flags every
    /// substep; `last_iterations`, `last_residual` and `last_substep_dt` are set by each substep before they
    /// are read, and the substep counter is read by nothing. Obstacle cells and the sort's bins are derived
    /// again on restore.
    fn save_state(&self) -> Result<SavedState, SimError> {
        if self.host_behind
            || self.potential_kept.is_some()
            || self.extrapolation_behind
            || self.grid_behind.is_some()
        {
            return Err(SimError::InvalidInput(
                "the particles, the volume correction's potential or the projected velocity are on the GPU: \
                 complete_records brings them back before a save"
                    .into(),
            ));
        }
        Ok(self.save())
    }

    /// Brings back the particles that the device keeps ([`FlipSim::read_particles_per_frame`]); the step's
    /// quantities are complete already.
    fn complete_records(&mut self, records: &mut [StepRecord]) -> Result<(), SimError> {
        let _ = records;
        self.read_kept()
    }

    /// The step measures its quantities itself (on the device, when the particles stay there).
    fn completes_records_later(&self) -> bool {
        false
    }

    fn restore_state(&mut self, state: &SavedState) -> Result<(), SimError> {
        self.restore(state)
    }

    fn apply_impulse(
        &mut self,
        center: &[f64],
        radius: f64,
        velocity: &[f64],
    ) -> Result<(), SimError> {
        let (c, v) = crate::sim::impulse_vectors::<D>(center, velocity)?;
        self.read_kept()?;
        self.particles.apply_impulse(c, radius, v);
        self.forget_kept();
        Ok(())
    }

    fn memory_bytes(&self) -> usize {
        let grids = self.u.u.iter().chain(&self.u_old.u).chain(&self.disp.u);
        let g: usize = grids.map(|g| g.data.capacity() * 8).sum::<usize>()
            + self
                .weight
                .iter()
                .map(|g| g.data.capacity() * 8)
                .sum::<usize>()
            + self.packed.bytes();
        let n = self.count.len();
        self.particles.bytes()
            + self.bins.bytes()
            + g
            + n * (1 + 2 + 4 + 6 * 8 + 1)
            + self.valid.iter().map(Vec::capacity).sum::<usize>()
            + self.front.bytes()
            + n * 80 * (self.solver.is_some() as usize + self.closed_solver.is_some() as usize)
    }
}
