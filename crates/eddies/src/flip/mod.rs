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
//! A step longer than [`FlipParams::substep_cfl`] cells of travel is split into substeps. The liquid surface
//! is available as a Zhu–Bridson signed distance (field `surface`). Method notes: `docs/flip.md`.

// Per-axis loops index several `[_; D]` arrays (position, velocity, window) together.
#![allow(clippy::needless_range_loop)]

mod advect;
mod extrapolate;
mod mark;
mod params;
mod particles;
mod project;
mod surface;
mod transfer;

pub use params::{Boundary, Emitter, FlipConfig, FlipParams, Obstacle, Sink, Transfer};
pub use particles::Particles;
pub use surface::{SURFACE_KERNEL_RADIUS, SURFACE_PARTICLE_RADIUS};

use crate::diag::{Quantity, StageTimer};
use crate::grid::{to_dvec3, CellFlag, Grid, MacGrid};
use crate::linsolve::{DomainBoundary, PcgParams, PoissonSolver};
use crate::par;
use crate::rng::SplitMix64;
use crate::shape::Shape;
use crate::sim::{Advance, Description, Field, FrameSource, SimError, Simulation};
use particles::Tally;
use transfer::HalfCellBins;

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
    emitters: Vec<(Emitter<D>, Vec<[usize; D]>)>,
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
    /// the particles' own precision.
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
    disp: MacGrid<D>,
    /// The face fields of the particle pass (`advect::pack`).
    packed: advect::Packed<D>,
    /// The flags of the volume correction's solve: fluid stays fluid, air becomes solid.
    closed_flags: Grid<CellFlag, D>,
    solver: Option<PoissonSolver<D>>,
    closed_solver: Option<PoissonSolver<D>>,
    bins: HalfCellBins<D>,
    valid: [Vec<u8>; D],
    front: extrapolate::Front,
    shapes_now: Vec<Shape>,
    last_iterations: usize,
    last_residual: f64,
    last_substep_dt: f64,
}

/// What [`FlipSim::cell_tally`] finds in one pass over the cells.
#[derive(Clone, Copy)]
struct CellTally {
    /// Cells marked fluid.
    fluid_cells: usize,
    /// [`FlipSim::fluid_volume`] (m³, m² in 2D).
    fluid_volume: f64,
    /// [`FlipSim::count_volume`] (m³, m² in 2D).
    count_volume: f64,
    /// The largest |∇·u| after projection over the fluid cells (1/s), −∞ for none.
    max_divergence: f64,
}

/// What [`FlipSim::measure`] finds in one pass over the particles.
pub(crate) struct Measured<const D: usize> {
    /// Kinetic energy (J, or J/m in 2D).
    kinetic: f64,
    /// Momentum (kg·m/s, or per metre of depth in 2D).
    momentum: [f64; D],
    /// Largest speed (m/s).
    pub(crate) max_speed: f64,
    /// Whether a velocity, or with closed walls a position, is not finite.
    broken: bool,
}

/// Relative residual of the volume correction's solve (see [`FlipSim::volume_correction`]).
const VOLUME_TOLERANCE: f64 = 3e-2;

/// A deterministic uniform number in [0, 1) from a seed and three counters.
fn hash01(seed: u64, a: u64, b: u64, c: u64) -> f64 {
    let mut g = SplitMix64::new(
        seed ^ a.wrapping_mul(0x9e37_79b9_7f4a_7c15)
            ^ b.wrapping_mul(0xc2b2_ae3d_27d4_eb4f)
            ^ c.wrapping_mul(0x1656_67b1_9e37_79f9),
    );
    g.next_u64();
    g.next_f64()
}

impl<const D: usize> FlipSim<D> {
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
            disp: MacGrid::new(dims, origin, h),
            packed: advect::Packed::default(),
            closed_flags: Grid::new(dims, origin, h, CellFlag::Air),
            solver: None,
            closed_solver: None,
            bins: HalfCellBins::new(dims),
            valid: std::array::from_fn(|_| Vec::new()),
            front: extrapolate::Front::default(),
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

    /// The grid velocity of the last substep (m/s), after projection and extrapolation.
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

    /// Fills `shape` with liquid at velocity `velocity` (m/s): particles seeded `seeds_per_axis`ᴰ per cell,
    /// jittered from the scene seed, wherever they fall inside the shape and outside every obstacle.
    /// Particles already inside the shape are replaced. Returns the number of particles seeded: 0 when the
    /// shape holds no seed position of the grid.
    pub fn fill(&mut self, shape: &Shape, velocity: [f64; D]) -> usize {
        self.fill_with(shape, |_| velocity)
    }

    /// As [`fill`](Self::fill), with the velocity (m/s) a function of the position (m).
    pub fn fill_with(&mut self, shape: &Shape, velocity: impl Fn([f64; D]) -> [f64; D]) -> usize {
        // Replace: drop the particles already inside.
        for i in 0..self.particles.len() {
            if shape.sdf(to_dvec3(self.particles.position(i))) <= 0.0 {
                self.particles.pos[0][i] = f32::NAN;
            }
        }
        let dims = self.cfg.resolution;
        let n: usize = dims.iter().product();
        let m = self.cfg.params.seeds_per_axis;
        let per_cell = m.pow(D as u32);
        let apic = self.apic();
        let shapes: Vec<Shape> = self
            .obstacles
            .iter()
            .map(|o| o.shape_at(self.time))
            .collect();
        let mut seeded = 0;
        for cell in 0..n {
            let c = crate::grid::coords_of(dims, cell);
            for j in 0..per_cell {
                let x = self.seed_position(c, j, m, 0);
                let q = to_dvec3(x);
                if shape.sdf(q) <= 0.0 && shapes.iter().all(|s| s.sdf(q) > 0.0) {
                    self.particles.push(x, velocity(x), apic);
                    seeded += 1;
                }
            }
        }
        self.resort();
        self.max_speed = self.measure().max_speed;
        seeded
    }

    /// Position (m) of seed `j` of cell `c` on an `m`ᴰ lattice, jittered by the scene seed and `salt`.
    fn seed_position(&self, c: [usize; D], j: usize, m: usize, salt: u64) -> [f64; D] {
        let h = self.cfg.cell_size;
        let jitter = self.cfg.params.jitter;
        let cell = self.count.index(c) as u64;
        let mut rest = j;
        std::array::from_fn(|k| {
            let lattice = rest % m;
            rest /= m;
            let r = hash01(self.cfg.seed, cell, (j * D + k) as u64, salt);
            let t = (lattice as f64 + 0.5 + jitter * (r - 0.5)) / m as f64;
            (c[k] as f64 + t) * h
        })
    }

    /// Adds an obstacle (static, or moving with a prescribed velocity); particles inside it are removed.
    pub fn add_obstacle(&mut self, obstacle: Obstacle<D>) {
        let s = obstacle.shape_at(self.time);
        for i in 0..self.particles.len() {
            if s.sdf(to_dvec3(self.particles.position(i))) <= 0.0 {
                self.particles.pos[0][i] = f32::NAN;
            }
        }
        self.obstacles.push(obstacle);
        self.resort();
    }

    /// Adds an emitter.
    pub fn add_emitter(&mut self, emitter: Emitter<D>) {
        let mut cells = Vec::new();
        let (o, h) = (self.count.origin, self.count.spacing);
        for i in 0..self.count.len() {
            let c = self.count.coords(i);
            let x: [f64; D] = std::array::from_fn(|k| o[k] + (c[k] as f64 + 0.5) * h);
            if emitter.shape.sdf(to_dvec3(x)) <= 0.0 {
                cells.push(c);
            }
        }
        self.emitters.push((emitter, cells));
    }

    /// Adds a sink.
    pub fn add_sink(&mut self, sink: Sink) {
        self.sinks.push(sink);
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
    }

    /// Total particle kinetic energy, momentum and largest speed, and whether a particle holds a non-finite
    /// velocity (or, with closed walls, position), in one pass over the particles ([`Tally::over`]); the
    /// largest speed is the square root of the largest squared speed, the same bits as the largest root since
    /// rounding is monotonic.
    pub(crate) fn measure(&self) -> Measured<D> {
        let closed = self.cfg.boundary == Boundary::Closed;
        let t = Tally::over(&self.particles, closed);
        let mass = self.particle_mass;
        Measured {
            kinetic: 0.5 * mass * t.squares,
            momentum: t.sum.map(|x| mass * x),
            max_speed: if self.particles.is_empty() {
                0.0
            } else {
                t.max_square().sqrt()
            },
            broken: t.broken(),
        }
    }

    /// Total momentum of the particles (kg·m/s, per metre of depth in 2D).
    pub fn momentum(&self) -> [f64; D] {
        self.measure().momentum
    }

    /// Total kinetic energy of the particles (J, per metre of depth in 2D).
    pub fn kinetic_energy(&self) -> f64 {
        self.measure().kinetic
    }

    /// Angular momentum about `center` (m) of the particles, z component in 2D, `[x, y, z]` in 3D
    /// (kg·m²/s). APIC's affine part is included: a particle's velocity field `v + C (x − x_p)` over its
    /// volume adds `m (C_yx − C_xy) h²/(4·12)`-order terms, which are small and left out; this is the
    /// point-mass angular momentum `Σ m (x − c) × v`.
    pub fn angular_momentum(&self, center: [f64; D]) -> [f64; 3] {
        let p = &self.particles;
        let m = self.particle_mass;
        let l = par::sum_n::<3>(p.len(), |i| {
            let x = to_dvec3(p.position(i)) - to_dvec3(center);
            let v = to_dvec3(p.velocity(i));
            x.cross(v).to_array()
        });
        l.map(|x| x * m)
    }

    /// Liquid volume (m³, m² in 2D) from the smoothed particle density: `Σ_cells min(1, φ_c) h^D` with `φ_c`
    /// the fill fraction of cell `c` (the particle-to-grid weights over the seeding count; field `fill`).
    /// Particles that bunch up (a FLIP liquid's way of losing volume) count for less. Unlike
    /// [`count_volume`](Self::count_volume) it moves continuously with the particles, so the random
    /// positions of jittered particles do not read as a loss of volume (docs/flip.md, "Volume").
    pub fn fluid_volume(&self) -> f64 {
        self.cell_tally().fluid_volume
    }

    /// Liquid volume (m³, m² in 2D) from the particle count per cell: `Σ_cells min(1, n_c / n₀) h^D` with
    /// `n_c` its particles and `n₀` the seeding count. The count jumps by one whenever a particle crosses a
    /// cell face, and the cap keeps only the deficits, so a liquid whose particles merely move reads about
    /// 7% low (docs/flip.md, "Volume"); kept to show that.
    pub fn count_volume(&self) -> f64 {
        self.cell_tally().count_volume
    }

    /// The step's cell quantities in one pass over the cells: the sums and the largest value add
    /// sequentially within each chunk of [`par::REDUCE_CHUNK`] and then chunk by chunk, as [`par::sum`] and
    /// [`par::max`] do.
    fn cell_tally(&self) -> CellTally {
        let n0 = self.cfg.params.seeds_per_axis.pow(D as u32) as f64;
        let (fill, count, flags, div) = (&self.fill, &self.count, &self.flags, &self.div_after);
        let identity = CellTally {
            fluid_cells: 0,
            fluid_volume: 0.0,
            count_volume: 0.0,
            max_divergence: f64::NEG_INFINITY,
        };
        let then = |a: CellTally, b: CellTally| CellTally {
            fluid_cells: a.fluid_cells + b.fluid_cells,
            fluid_volume: a.fluid_volume + b.fluid_volume,
            count_volume: a.count_volume + b.count_volume,
            max_divergence: par::nan_max(a.max_divergence, b.max_divergence),
        };
        let t = par::reduce(
            fill.len(),
            par::REDUCE_CHUNK,
            identity,
            |r| {
                let mut t = identity;
                for i in r {
                    let f = flags.data[i];
                    // Solid cells add nothing (the sums are never −0, so skipping them keeps the bits).
                    if f != CellFlag::Solid {
                        t.fluid_volume += fill.data[i].min(1.0);
                        t.count_volume += (count.data[i] as f64 / n0).min(1.0);
                    }
                    let fluid = f == CellFlag::Fluid;
                    t.fluid_cells += fluid as usize;
                    let d = if fluid { div.data[i].abs() } else { 0.0 };
                    t.max_divergence = par::nan_max(t.max_divergence, d);
                }
                t
            },
            then,
        );
        let cell = self.cfg.cell_size.powi(D as i32);
        CellTally {
            fluid_volume: t.fluid_volume * cell,
            count_volume: t.count_volume * cell,
            ..t
        }
    }

    /// Volume (m³, m² in 2D) inside the Zhu–Bridson surface: the cells whose centre has a negative signed
    /// distance (see the `surface` field). Costs a surface reconstruction.
    pub fn surface_volume(&self) -> f64 {
        let mut g = self.pressure.clone();
        surface::surface_distance(&self.particles, &self.bins, &mut g);
        let n = par::sum(g.len(), |i| (g.data[i] < 0.0) as u8 as f64);
        n * self.cfg.cell_size.powi(D as i32)
    }

    /// A 64-bit FNV-1a hash of the exact bits of the particle state: equal hashes mean (with overwhelming
    /// probability) bit-identical states.
    pub fn checksum(&self) -> u64 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        let p = &self.particles;
        for a in p.pos.iter().chain(&p.vel).chain(p.affine.iter().flatten()) {
            for x in a {
                h ^= x.to_bits() as u64;
                h = h.wrapping_mul(0x0000_0100_0000_01b3);
            }
        }
        h
    }

    /// Drains, emitters and the reseeding band, on freshly sorted particles. Returns whether particles were
    /// added or removed (the caller then sorts again).
    fn reseed(&mut self, dt: f64) -> bool {
        let mut changed = false;
        let apic = self.apic();
        // Drains: remove with probability rate·dt, decided per particle by a hash of its sorted index.
        for (si, s) in self.sinks.iter().enumerate() {
            let prob = s.rate * dt;
            for i in 0..self.particles.len() {
                let x = self.particles.position(i);
                if x[0].is_finite()
                    && s.shape.sdf(to_dvec3(x)) <= 0.0
                    && hash01(self.cfg.seed, self.steps, i as u64, 1000 + si as u64) < prob
                {
                    self.particles.pos[0][i] = f32::NAN;
                    changed = true;
                }
            }
        }
        let m = self.cfg.params.seeds_per_axis;
        let per_cell = m.pow(D as u32);
        // Emitters: top their cells up to the seeding count and set the velocity of what is inside.
        for e in 0..self.emitters.len() {
            let (emitter, cells) = &self.emitters[e];
            if !(self.time >= emitter.active.0 && self.time < emitter.active.1) {
                continue;
            }
            let mut add = Vec::new();
            for &c in cells {
                if self.solid_id[c] != 0 {
                    continue;
                }
                let members: Vec<usize> = self.bins.cell_particles(c).collect();
                for &i in &members {
                    for k in 0..D {
                        self.particles.vel[k][i] = emitter.velocity[k] as f32;
                    }
                }
                for j in members.len()..per_cell {
                    add.push((
                        self.seed_position(c, j, m, 1 + self.steps),
                        emitter.velocity,
                    ));
                }
            }
            for (x, v) in add {
                self.particles.push(x, v, apic);
                changed = true;
            }
        }
        // Reseeding band.
        let (lo, hi) = (self.cfg.params.min_per_cell, self.cfg.params.max_per_cell);
        if lo > 0 || hi > 0 {
            let dims = self.cfg.resolution;
            let strides = self.count.strides();
            let mut add = Vec::new();
            for ci in 0..self.count.len() {
                let n = self.count.data[ci] as usize;
                let c = self.count.coords(ci);
                if hi > 0 && n > hi {
                    let extra: Vec<usize> = self.bins.cell_particles(c).skip(hi).collect();
                    for i in extra {
                        self.particles.pos[0][i] = f32::NAN;
                    }
                    changed = true;
                } else if n < lo && n > 0 && self.solid_id.data[ci] == 0 {
                    // Only cells deep in the liquid: every neighbour holds particles or is solid.
                    let interior = (0..D).all(|k| {
                        c[k] > 0
                            && c[k] + 1 < dims[k]
                            && [ci - strides[k], ci + strides[k]]
                                .iter()
                                .all(|&j| self.count.data[j] > 0 || self.solid_id.data[j] != 0)
                    });
                    if interior {
                        for j in n..lo {
                            let x = self.seed_position(c, j, m, 1 + self.steps);
                            add.push((x, self.u.sample(x)));
                        }
                    }
                }
            }
            for (x, v) in add {
                self.particles.push(x, v, apic);
                changed = true;
            }
        }
        changed
    }

    /// One substep of `dt` seconds: Eng's stages in order.
    fn substep(&mut self, dt: f64, timer: &mut StageTimer) -> Result<(), SimError> {
        let p = self.cfg.params.clone();
        let t_end = self.time + dt;

        timer.time("sort", || {
            self.shapes_now.clear();
            self.shapes_now
                .extend(self.obstacles.iter().map(|o| o.shape_at(self.time)));
            if self.steps == 0 || self.obstacles.iter().any(Obstacle::is_moving) {
                mark::mark_solids(&self.shapes_now, &mut self.solid_id);
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

        timer.time("particles_to_grid", || {
            transfer::particles_to_grid(
                &self.particles,
                &self.bins,
                &mut self.u,
                &mut self.weight,
                p.transfer,
            );
        });

        timer.time("save_velocities", || {
            for k in 0..D {
                crate::linsolve::vector::copy(&self.u.u[k].data, &mut self.u_old.u[k].data);
            }
        });

        timer.time("mark_cells", || {
            // `count` is the last sort's (`resort`); nothing has moved the particles since.
            mark::mark_cells(&self.solid_id, &mut self.flags, &self.count);
            mark::fill_fraction(
                &self.weight,
                self.cfg.boundary == Boundary::Closed,
                p.seeds_per_axis.pow(D as u32) as f64,
                &mut self.fill,
            );
        });

        timer.time("forces", || {
            project::apply_forces(&mut self.u, self.cfg.gravity, dt);
            project::enforce_boundary(
                &mut self.u,
                &self.solid_id,
                &self.obstacles,
                self.cfg.boundary,
                self.time,
            );
        });

        let pcg = PcgParams {
            tolerance: p.tolerance,
            max_iterations: p.max_iterations,
        };
        let info = timer.time("project", || {
            project::project(
                &mut self.u,
                &self.flags,
                self.cfg.boundary,
                p.preconditioner,
                pcg,
                p.density,
                dt,
                &mut self.div_before,
                &mut self.rhs,
                &mut self.pressure,
                &mut self.solver,
            )
            .map_err(|source| SimError::SolveFailed {
                stage: "project",
                step: self.steps + 1,
                source,
            })
        })?;
        (self.last_iterations, self.last_residual) = info
            .as_ref()
            .map_or((0, 0.0), |i| (i.iterations, i.residual));
        timer.time("project", || self.u.divergence_into(&mut self.div_after));

        let correct = timer.time("volume_correction", || {
            self.volume_correction(info.is_some())
        })?;

        timer.time("extrapolate", || {
            extrapolate::mark_valid(&self.u, &self.flags, &mut self.valid);
            extrapolate::extrapolate(
                &mut self.u,
                &mut self.valid,
                p.extrapolation_layers,
                &mut self.front,
            );
            project::enforce_boundary(
                &mut self.u,
                &self.solid_id,
                &self.obstacles,
                self.cfg.boundary,
                self.time,
            );
        });

        timer.time("grid_to_particles_advect", || {
            self.shapes_now.clear();
            self.shapes_now
                .extend(self.obstacles.iter().map(|o| o.shape_at(t_end)));
            advect::transfer_and_advect(
                &mut self.particles,
                &self.u,
                &self.u_old,
                p.transfer,
                p.pic_ratio,
                correct.then_some(&self.disp),
                &mut self.packed,
                &self.shapes_now,
                self.cfg.boundary,
                dt,
            );
        });
        self.time = t_end;
        self.last_substep_dt = dt;
        self.substeps_total += 1;
        Ok(())
    }

    /// The volume correction of this substep ([`project::volume_displacement`]): sets `excess` from the
    /// particle counts and, where some cell holds more than the seeding count, the displacement `disp`.
    /// Returns whether particles are to be moved by it. `solved` says whether the projection ran (there was
    /// liquid).
    fn volume_correction(&mut self, solved: bool) -> Result<bool, SimError> {
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
            return Ok(false);
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
        let diverged = |source| SimError::SolveFailed {
            stage: "volume_correction",
            step: self.steps + 1,
            source,
        };
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
        project::volume_displacement(
            &mut self.disp,
            &self.closed_flags,
            &self.excess,
            &mut self.excess_potential,
            solver,
        )
        .map_err(diverged)?;
        Ok(true)
    }

    fn interior_field(&self, signed: bool, f: impl Fn(usize) -> f64) -> Field {
        Field {
            shape: self.cfg.resolution.iter().rev().copied().collect(),
            data: (0..self.count.len()).map(|i| f(i) as f32).collect(),
            signed,
        }
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
        for _ in 0..n {
            self.substep(sub, timer)?;
            iterations += self.last_iterations;
            residual = residual.max(self.last_residual);
        }
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
        ) = timer.time("diagnostics", || (self.measure(), self.cell_tally()));
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
                    Quantity::Count(self.particles.len() as u64),
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
                        self.particles.len() as f64 * self.particle_mass / self.cfg.params.density,
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
        let cv = |i: usize| self.u.cell_velocity(self.count.coords(i));
        let rho = self.cfg.params.density;
        let per_cell = self.cfg.params.seeds_per_axis.pow(D as u32) as f64;
        Some(match name {
            "density" => self.interior_field(false, |i| {
                (self.count.data[i] as f64 / per_cell).min(1.0) * rho
            }),
            "substance_0" => self.interior_field(false, |i| (self.count.data[i] > 0) as u8 as f64),
            "speed" => {
                self.interior_field(false, |i| cv(i).iter().map(|x| x * x).sum::<f64>().sqrt())
            }
            "velocity_x" => self.interior_field(true, |i| cv(i)[0]),
            "velocity_y" => self.interior_field(true, |i| cv(i)[1]),
            "velocity_z" if D == 3 => self.interior_field(true, |i| cv(i)[2]),
            "cell_type" => self.interior_field(false, |i| match self.flags.data[i] {
                CellFlag::Air => 0.0,
                CellFlag::Fluid => 1.0,
                CellFlag::Solid => 2.0,
            }),
            "divergence_before" => self.interior_field(true, |i| {
                if self.flags.data[i] == CellFlag::Fluid {
                    self.div_before.data[i]
                } else {
                    0.0
                }
            }),
            "divergence" => self.interior_field(true, |i| {
                if self.flags.data[i] == CellFlag::Fluid {
                    self.div_after.data[i]
                } else {
                    0.0
                }
            }),
            "pressure" => self.interior_field(true, |i| self.pressure.data[i]),
            "fill" => self.interior_field(false, |i| self.fill.data[i]),
            "volume_excess" => self.interior_field(false, |i| self.excess.data[i]),
            "residual" => {
                // b − A p of the last solve. With the velocity update matching the operator, A p − b equals
                // (ρ/Δt) times the divergence left after projection, so it is read off that divergence.
                let dt = self.last_substep_dt;
                let rho = self.cfg.params.density;
                self.interior_field(true, |i| {
                    if self.flags.data[i] == CellFlag::Fluid && dt > 0.0 {
                        -rho / dt * self.div_after.data[i]
                    } else {
                        0.0
                    }
                })
            }
            "surface" => {
                let mut g = self.pressure.clone();
                surface::surface_distance(&self.particles, &self.bins, &mut g);
                self.interior_field(true, |i| g.data[i])
            }
            _ => return None,
        })
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

/// Stages of a step, in order ([`Description::stages`]).
pub const STAGES: &[&str] = &[
    "sort",
    "particles_to_grid",
    "save_velocities",
    "mark_cells",
    "forces",
    "project",
    "volume_correction",
    "extrapolate",
    "grid_to_particles_advect",
    "diagnostics",
];

/// The grid fields of a `dim`-dimensional FLIP simulation, Eng's debug views among them:
/// `density` (kg/m^D, particle count over the seeding count, capped at ρ), `substance_0` (1 where liquid),
/// `speed` and `velocity_*` (m/s, cell-centred), `cell_type` (0 air, 1 fluid, 2 solid), `divergence_before`
/// and `divergence` (1/s, before and after projection), `pressure` (Pa), `fill` (1, the smoothed particle density
/// over the seeding density), `volume_excess` (1, the relative
/// excess the volume correction removes), `residual` (Pa/m², the pressure
/// solve's `b − A p`) and `surface` (m, the Zhu–Bridson signed distance, negative inside).
pub fn describe(dim: usize) -> Description {
    let mut names = vec![
        "density",
        "substance_0",
        "speed",
        "velocity_x",
        "velocity_y",
    ];
    if dim == 3 {
        names.push("velocity_z");
    }
    names.extend([
        "cell_type",
        "divergence_before",
        "divergence",
        "pressure",
        "fill",
        "volume_excess",
        "residual",
        "surface",
    ]);
    Description {
        method: "flip",
        fields: names,
        particle_values: Vec::new(),
        stages: STAGES,
        array_fields: &["pressure", "divergence"],
        picture: FrameSource::Grid,
        default_view: "density",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 2D sim whose particles carry varied velocities: enough of them for several reduction chunks.
    fn sim_with_velocities(boundary: Boundary) -> FlipSim<2> {
        let cfg = FlipConfig::<2> {
            resolution: [128, 128],
            cell_size: 1.0 / 128.0,
            boundary,
            ..Default::default()
        };
        let mut sim = FlipSim::new(cfg).expect("valid config");
        sim.fill_with(&Shape::box2([0.0, 0.0], [1.0, 0.8]), |x| {
            [(7.0 * x[1]).sin(), x[0] * x[0] - 0.3]
        });
        assert!(sim.particles.len() > 2 * par::REDUCE_CHUNK);
        sim
    }

    #[test]
    fn one_pass_measure_matches_its_definitions() {
        let sim = sim_with_velocities(Boundary::Closed);
        let p = &sim.particles;
        let m = sim.particle_mass;
        let mut kinetic = 0.0;
        let mut momentum = [0.0; 2];
        let mut max_speed: f64 = 0.0;
        for i in 0..p.len() {
            let v = p.velocity(i);
            let v2 = v[0] * v[0] + v[1] * v[1];
            kinetic += 0.5 * m * v2;
            momentum[0] += m * v[0];
            momentum[1] += m * v[1];
            max_speed = max_speed.max(v2.sqrt());
        }
        let got = sim.measure();
        // The reduction adds in chunks, the loop above in one run: the same sums up to rounding (1e-12
        // relative over ~5·10⁴ terms of one sign for the energy; the momentum sums are O(1) with cancellation,
        // so they are compared against the total mass times the largest speed).
        assert!((got.kinetic - kinetic).abs() <= 1e-12 * kinetic);
        let scale = m * p.len() as f64 * max_speed;
        for k in 0..2 {
            assert!((got.momentum[k] - momentum[k]).abs() <= 1e-12 * scale);
        }
        // The largest speed is one particle's: exactly equal.
        assert_eq!(got.max_speed, max_speed);
        assert!(!got.broken);
    }

    #[test]
    fn one_pass_measure_flags_non_finite_particles() {
        // A non-finite velocity is a blow-up; it also poisons the largest speed.
        let mut sim = sim_with_velocities(Boundary::Closed);
        let last = sim.particles.len() - 1;
        sim.particles.vel[1][last] = f32::INFINITY;
        let got = sim.measure();
        assert!(got.broken);
        assert!(!got.kinetic.is_finite());

        let mut sim = sim_with_velocities(Boundary::Closed);
        sim.particles.vel[0][5] = f32::NAN;
        assert!(sim.measure().max_speed.is_nan());

        // A non-finite position is a blow-up behind closed walls; through open ones it is a particle that
        // left the domain (dropped at the next sort).
        for (boundary, broken) in [(Boundary::Closed, true), (Boundary::Open, false)] {
            let mut sim = sim_with_velocities(boundary);
            sim.particles.pos[0][last / 2] = f32::NAN;
            let got = sim.measure();
            assert_eq!(got.broken, broken, "{boundary:?}");
            assert!(got.kinetic.is_finite());
        }
    }
}
