//! Reintegration tracking with SPH forces (Moroz 2020).
//!
//! Each cell holds one particle: a position inside the cell, a velocity, and a mass per substance. A step:
//!
//! 1. **emit**: emitters fill their cells, sinks drain theirs;
//! 2. **density** and **forces**: SPH on the grid as neighbour structure — ρ from the cell mass, pressure from
//!    the equation of state, the symmetric pressure force and optional viscosity from the 3^D neighbours;
//! 3. **advance**: `V += Δt (a + g)`, `X' = X + Δt V`, clamped so the spread box stays in the neighbourhood;
//!    particles next to obstacles are pushed out of them;
//! 4. **reintegrate**: every cell gathers the overlap of its neighbours' boxes of half-size r with itself —
//!    mass per substance, centre of mass, momentum — and normalises. Vacuum stays vacuum.
//!
//! Mass is conserved exactly: masses are whole numbers of quanta ([`QUANTA_PER_REST_CELL`]) and a
//! bookkeeping pass hands each particle's rounding remainder to the cell that receives its box centre. Near
//! obstacles a box's shares are renormalised over the fluid cells; closed walls reflect, through mirrored
//! ghost particles, the part of a box that crosses them. Positions, velocities and masses are f32;
//! diagnostics are summed in f64 in a fixed order. Method notes: `docs/reint.md`.
//!
//! Internally lengths are in cells and velocities in cells per second; the public API is in SI units.

// Per-axis loops index several `[_; D]` arrays (position, velocity, normal) together.
#![allow(clippy::needless_range_loop)]

mod device;
mod eos;
mod kernels;
mod params;
mod saved;
mod state;

pub use device::{
    max_dt, DeviceScene, EmitterCells, InteriorState, NearSolidCell, SinkCells, StepConstants,
};
pub use eos::Eos;
pub use kernels::speed_limit;
pub use params::{sink_keep, Boundary, Emitter, ReintConfig, ReintParams, Sink, Substance};
pub use saved::ReintSaved;

use crate::checkpoint::SavedState;
use crate::diag::{Clamp, Quantity, StageTimer};
use crate::par;
use crate::shape::Shape;
use crate::sim::{Advance, Description, Field, FrameSource, SimError, Simulation};
use glam::DVec3;
use kernels::ForceConsts;
use state::{CellLayout, State};

/// Density, as a fraction of the lightest rest density, below which a cell counts as vacuum for the forces.
const RHO_VACUUM: f32 = 1e-4;

/// Mass quanta in a cell at a substance's rest density. Masses are stored as whole numbers of quanta in f32,
/// exact up to 2²⁴, so a cell holds up to 4× its rest mass exactly (beyond, conservation degrades to f32
/// rounding) and the smallest speck is 2.4·10⁻⁷ of a full cell.
pub const QUANTA_PER_REST_CELL: f32 = 4_194_304.0;

/// Most substances a simulation can carry.
pub const MAX_SUBSTANCES: usize = 4;

/// Runs `$body` with `$S` bound to the substance count as a constant, so kernels are compiled per count.
macro_rules! with_substances {
    ($count:expr, $S:ident => $body:expr) => {
        match $count {
            1 => {
                const $S: usize = 1;
                $body
            }
            2 => {
                const $S: usize = 2;
                $body
            }
            3 => {
                const $S: usize = 3;
                $body
            }
            4 => {
                const $S: usize = 4;
                $body
            }
            n => unreachable!("{n} substances passed validation"),
        }
    };
}

/// What the wall ghosts are mirrored for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum GhostStage {
    Forces,
    Gather,
}

/// A fluid cell next to an obstacle, with the obstacle's distance and outward normal at the cell centre.
#[derive(Clone, Debug)]
struct NearSolid<const D: usize> {
    index: usize,
    /// Signed distance of the cell centre to the obstacles (cells).
    distance: f32,
    /// Outward unit normal of the obstacles at the cell centre.
    normal: [f32; D],
}

/// One cell's particle, in SI units.
#[derive(Clone, Debug, PartialEq)]
pub struct Particle<const D: usize> {
    /// Mass of each substance (kg).
    pub masses: Vec<f32>,
    /// Position (m).
    pub position: [f64; D],
    /// Velocity (m/s).
    pub velocity: [f32; D],
}

/// A reintegration-tracking simulation in `D` dimensions.
pub struct ReintSim<const D: usize> {
    cfg: ReintConfig<D>,
    layout: CellLayout<D>,
    /// The state: read at the start of a step, rebuilt by the gather into `next`, then swapped.
    cur: State<D>,
    next: State<D>,
    // Scratch, reused every step.
    rho: Vec<f32>,
    q: Vec<f32>,
    acc: [Vec<f32>; D],
    scale: Vec<f32>,
    deficit: Vec<Vec<f32>>,
    /// Which chunks hold mass, refreshed at the start of every step (see [`kernels::occupancy`]).
    occupied: Vec<bool>,
    /// Each chunk's diagnostic sums from the last gather, indexed like `occupied`.
    totals: Vec<kernels::Totals>,
    /// Mass of one quantum of each substance (kg).
    unit: Vec<f64>,
    // Obstacles.
    solid: Vec<bool>,
    /// 1 for fluid cells and 0 for solid ones. Halo cells count as fluid: behind a closed wall they hold the
    /// mirrored ghosts (and inherit their mirror's solidity), and through an open boundary mass leaves.
    fluid: Vec<f32>,
    solid_cells: Vec<usize>,
    /// Halo cells with the interior cell they mirror and a bit mask of the mirrored axes.
    ghosts: Vec<(usize, usize, u8)>,
    near_solid: Vec<NearSolid<D>>,
    obstacles: Vec<Shape>,
    // Sources and drains, with the cells they cover.
    emitters: Vec<(Emitter<D>, Vec<usize>)>,
    sinks: Vec<(Sink, Vec<usize>)>,
    time: f64,
    steps: u64,
    /// Largest particle speed after the last step (cells/s).
    max_speed: f32,
    /// Mass put in by emitters and taken out by sinks, per substance (kg).
    injected: [f64; MAX_SUBSTANCES],
    removed: [f64; MAX_SUBSTANCES],
}

/// Every halo cell, the interior cell nearest to it, and the axes along which it lies beyond the domain.
fn ghost_cells<const D: usize>(layout: &CellLayout<D>) -> Vec<(usize, usize, u8)> {
    let mut ghosts = Vec::new();
    for idx in 0..layout.len() {
        if layout.coords(idx).is_some() {
            continue;
        }
        let mut source = 0;
        let mut mask = 0u8;
        for a in 0..D {
            let p = (idx / layout.stride[a]) % layout.padded[a];
            let c = p.clamp(1, layout.n[a]);
            if c != p {
                mask |= 1 << a;
            }
            source += c * layout.stride[a];
        }
        ghosts.push((idx, source, mask));
    }
    ghosts
}

impl<const D: usize> ReintSim<D> {
    /// Builds an empty (vacuum) simulation, or says which parameter is out of range.
    pub fn new(cfg: ReintConfig<D>) -> Result<Self, SimError> {
        Self::check(&cfg)?;
        let layout = CellLayout::new(cfg.resolution);
        let len = layout.len();
        let substances = cfg.substances.len();
        Ok(Self {
            cur: State::new(len, substances),
            // The step's buffers are made by the first step (see `ensure_scratch`): a simulation that a
            // device backend runs never needs them.
            next: State::new(0, substances),
            rho: Vec::new(),
            q: Vec::new(),
            acc: std::array::from_fn(|_| Vec::new()),
            scale: Vec::new(),
            occupied: vec![true; kernels::occupancy_len(&layout)],
            totals: vec![kernels::Totals::default(); kernels::occupancy_len(&layout)],
            deficit: (0..substances).map(|_| Vec::new()).collect(),
            unit: cfg
                .substances
                .iter()
                .map(|s| {
                    s.rest_density as f64 * cfg.cell_size.powi(D as i32)
                        / QUANTA_PER_REST_CELL as f64
                })
                .collect(),
            solid: vec![false; len],
            fluid: vec![1.0; len],
            solid_cells: Vec::new(),
            ghosts: ghost_cells(&layout),
            near_solid: Vec::new(),
            obstacles: Vec::new(),
            emitters: Vec::new(),
            sinks: Vec::new(),
            time: 0.0,
            steps: 0,
            max_speed: 0.0,
            injected: [0.0; MAX_SUBSTANCES],
            removed: [0.0; MAX_SUBSTANCES],
            layout,
            cfg,
        })
    }

    /// Allocates the buffers of a step, once.
    fn ensure_scratch(&mut self) {
        let len = self.layout.len();
        if self.rho.len() == len {
            return;
        }
        self.next = State::new(len, self.cur.mass.len());
        self.rho = vec![0.0; len];
        self.q = vec![0.0; len];
        self.acc = std::array::from_fn(|_| vec![0.0; len]);
        self.scale = vec![0.0; len];
        self.deficit = (0..self.cur.mass.len()).map(|_| vec![0.0; len]).collect();
    }

    fn check(cfg: &ReintConfig<D>) -> Result<(), SimError> {
        let bad = |m: String| Err(SimError::InvalidInput(m));
        if !(D == 2 || D == 3) {
            return bad(format!(
                "reintegration tracking runs in 2 or 3 dimensions, not {D}"
            ));
        }
        if cfg.resolution.iter().any(|&n| n < 4) {
            return bad(format!(
                "resolution {:?}: every axis needs at least 4 cells",
                cfg.resolution
            ));
        }
        if !(cfg.cell_size.is_finite() && cfg.cell_size > 0.0) {
            return bad(format!("cell size {} m: must be positive", cfg.cell_size));
        }
        cfg.params
            .validate()
            .map_err(|e| SimError::InvalidParameter(e.within("params")))?;
        if cfg.substances.is_empty() || cfg.substances.len() > MAX_SUBSTANCES {
            return bad(format!(
                "{} substances: allowed 1 to {MAX_SUBSTANCES}",
                cfg.substances.len()
            ));
        }
        if let Some(s) = cfg
            .substances
            .iter()
            .find(|s| s.rest_density.is_nan() || s.rest_density <= 0.0)
        {
            return bad(format!(
                "substance rest density {}: must be positive",
                s.rest_density
            ));
        }
        if cfg.gravity.iter().any(|g| !g.is_finite()) {
            return bad("gravity must be finite".into());
        }
        Ok(())
    }

    /// Bytes a simulation of this size will hold, for refusing scenes too large for memory before allocating.
    pub fn estimate_bytes(resolution: [usize; D], substances: usize) -> usize {
        let padded: usize = resolution
            .iter()
            .map(|&n| n.saturating_add(2))
            .fold(1, usize::saturating_mul);
        // Two states (positions, velocities, masses); density, pressure term, acceleration, scale, deficits,
        // fluid mask and solid flag.
        let per_cell = 2 * (2 * D + substances) * 4 + (2 + D + 1 + substances + 1) * 4 + 1;
        padded.saturating_mul(per_cell)
    }

    /// The configuration the simulation was built with.
    pub fn config(&self) -> &ReintConfig<D> {
        &self.cfg
    }

    fn cell_volume(&self) -> f64 {
        self.cfg.cell_size.powi(D as i32)
    }

    /// Centre of interior cell `c` (m). 2D points lie in the plane z = 0.
    fn cell_centre(&self, c: [usize; D]) -> DVec3 {
        let mut p = DVec3::ZERO;
        for a in 0..D {
            p[a] = (c[a] as f64 + 0.5) * self.cfg.cell_size;
        }
        p
    }

    /// Interior cells whose centre lies inside `shape`, as padded indices in index order.
    fn cells_inside(&self, shape: &Shape) -> Vec<usize> {
        let mut cells = Vec::new();
        self.layout.for_each_cell(|i, c| {
            if shape.contains(self.cell_centre(c)) {
                cells.push(i);
            }
        });
        cells
    }

    /// Fills cells whose centre is inside `shape` (and not inside an obstacle) with `substance` at `density` ×
    /// its rest density, at rest at the cell centre and moving at `velocity` (m/s). Mass already there is
    /// replaced. Returns the number of cells filled: 0 when the shape covers no fluid cell of the grid.
    ///
    /// # Panics
    /// If `substance` is not a configured substance.
    pub fn fill(
        &mut self,
        shape: &Shape,
        substance: usize,
        density: f32,
        velocity: [f32; D],
    ) -> usize {
        assert!(
            substance < self.cfg.substances.len(),
            "substance {substance} is not configured"
        );
        let m = (density * QUANTA_PER_REST_CELL).round();
        let v = velocity.map(|x| x / self.cfg.cell_size as f32);
        let mut filled = 0;
        for i in self.cells_inside(shape) {
            if self.solid[i] {
                continue;
            }
            for (k, mk) in self.cur.mass.iter_mut().enumerate() {
                mk[i] = if k == substance { m } else { 0.0 };
            }
            for a in 0..D {
                self.cur.pos[a][i] = 0.0;
                self.cur.vel[a][i] = v[a];
            }
            filled += 1;
        }
        if filled > 0 {
            self.note_speed(v);
        }
        filled
    }

    /// Makes [`Simulation::max_dt`] see a particle placed at velocity `v` (cells/s) before the first step
    /// has measured the state.
    fn note_speed(&mut self, v: [f32; D]) {
        let speed = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        self.max_speed = self.max_speed.max(speed);
    }

    /// Adds a static obstacle. Cells whose centre is inside become solid: they never hold mass, and the fluid
    /// next to them slides along the surface. Mass already in those cells is removed (build obstacles before
    /// filling).
    pub fn add_obstacle(&mut self, shape: Shape) {
        for i in self.cells_inside(&shape) {
            self.solid[i] = true;
            self.fluid[i] = 0.0;
            for m in &mut self.cur.mass {
                m[i] = 0.0;
            }
        }
        // Behind a closed wall, a ghost is what its mirror is: a box part reflected into a solid cell must be
        // paid for by the fluid cells, like one that lands in the solid directly.
        if self.cfg.boundary == Boundary::Closed {
            for &(ghost, source, _) in &self.ghosts {
                self.solid[ghost] = self.solid[source];
                self.fluid[ghost] = self.fluid[source];
            }
        }
        self.obstacles.push(shape);
        self.rebuild_obstacle_lists();
    }

    fn rebuild_obstacle_lists(&mut self) {
        let union = Shape::Union(self.obstacles.clone());
        let h = self.cfg.cell_size;
        let mut solid_cells = Vec::new();
        let mut near = Vec::new();
        self.layout.for_each_cell(|i, c| {
            if self.solid[i] {
                solid_cells.push(i);
                return;
            }
            let touches = self
                .layout
                .neighbours
                .iter()
                .any(|&(d, _)| self.solid[(i as isize + d) as usize]);
            if touches {
                let p = self.cell_centre(c);
                let n = union.normal(p, 0.25 * h);
                near.push(NearSolid {
                    index: i,
                    distance: (union.sdf(p) / h) as f32,
                    normal: std::array::from_fn(|a| n[a] as f32),
                });
            }
        });
        self.solid_cells = solid_cells;
        self.near_solid = near;
    }

    /// Adds an emitter.
    ///
    /// # Panics
    /// If the emitter's substance is not configured.
    pub fn add_emitter(&mut self, emitter: Emitter<D>) {
        assert!(
            emitter.substance < self.cfg.substances.len(),
            "substance {} is not configured",
            emitter.substance
        );
        let cells = self
            .cells_inside(&emitter.shape)
            .into_iter()
            .filter(|&i| !self.solid[i])
            .collect();
        self.emitters.push((emitter, cells));
    }

    /// Adds a sink.
    pub fn add_sink(&mut self, sink: Sink) {
        let cells = self.cells_inside(&sink.shape);
        self.sinks.push((sink, cells));
    }

    /// Adds `velocity` (m/s) to the fluid within `radius` (m) of `center` (m), weighted by the smooth
    /// falloff `(1 − (d/radius)²)²`: a push from a mouse or a game event. It visits the cells around the
    /// push only, so that a viewer's drag, many small pushes a frame, costs little on a large grid.
    pub fn apply_impulse(&mut self, center: [f64; D], radius: f64, velocity: [f32; D]) {
        let h = self.cfg.cell_size;
        let v = velocity.map(|x| x / h as f32);
        // The particle of cell c lies within [c h, (c + 1) h] on each axis: only the cells of the box around
        // the push can be within `radius` of its centre (a cell more on each side against rounding).
        let reach = radius.abs();
        let lo = center.map(|x| (((x - reach) / h).floor() - 1.0).max(0.0) as usize);
        let hi = center.map(|x| (((x + reach) / h).floor() + 1.0).max(0.0) as usize);
        let layout = &self.layout;
        let mut hits = Vec::new();
        layout.for_each_cell_in(lo, hi, |i, c| {
            let d2: f64 = (0..D)
                .map(|a| {
                    let x = (c[a] as f64 + 0.5 + self.cur.pos[a][i] as f64) * h;
                    (x - center[a]).powi(2)
                })
                .sum();
            if d2 < radius * radius {
                let w = (1.0 - d2 / (radius * radius)).powi(2) as f32;
                hits.push((i, w));
            }
        });
        for (i, w) in hits {
            for a in 0..D {
                self.cur.vel[a][i] += w * v[a];
            }
        }
    }

    /// Overwrites the particle of interior cell `c` (coordinates in `0..resolution`): `masses` per substance
    /// (kg, rounded to whole quanta, see [`QUANTA_PER_REST_CELL`]), `offset` from the cell centre (cells, each in [−½, ½]) and `velocity` (m/s).
    ///
    /// # Panics
    /// If `c` is outside the grid or `masses` has the wrong length.
    pub fn set_particle(
        &mut self,
        c: [usize; D],
        masses: &[f32],
        offset: [f32; D],
        velocity: [f32; D],
    ) {
        assert!(
            (0..D).all(|a| c[a] < self.cfg.resolution[a]),
            "cell {c:?} outside the grid"
        );
        assert_eq!(masses.len(), self.cfg.substances.len());
        let i = self.layout.index(c);
        for (k, &m) in masses.iter().enumerate() {
            self.cur.mass[k][i] = (m as f64 / self.unit[k]).round() as f32;
        }
        let v = velocity.map(|x| x / self.cfg.cell_size as f32);
        for a in 0..D {
            self.cur.pos[a][i] = offset[a].clamp(-0.5, 0.5);
            self.cur.vel[a][i] = v[a];
        }
        self.note_speed(v);
    }

    /// The particle of interior cell `c`, in SI units.
    pub fn particle(&self, c: [usize; D]) -> Particle<D> {
        let i = self.layout.index(c);
        let h = self.cfg.cell_size;
        Particle {
            masses: self
                .cur
                .mass
                .iter()
                .zip(&self.unit)
                .map(|(m, u)| (m[i] as f64 * u) as f32)
                .collect(),
            position: std::array::from_fn(|a| (c[a] as f64 + 0.5 + self.cur.pos[a][i] as f64) * h),
            velocity: std::array::from_fn(|a| self.cur.vel[a][i] * h as f32),
        }
    }

    /// Total mass of each substance (kg), summed in f64 in a fixed order.
    pub fn substance_masses(&self) -> Vec<f64> {
        // Whole quanta add exactly in f64, so these totals are exact.
        self.cur
            .mass
            .iter()
            .zip(&self.unit)
            .map(|(m, u)| par::sum(m.len(), |i| m[i] as f64) * u)
            .collect()
    }

    /// Total mass (kg).
    pub fn total_mass(&self) -> f64 {
        self.substance_masses().iter().sum()
    }

    /// Mass put in by emitters and taken out by sinks so far, per substance (kg).
    pub fn mass_exchanged(&self) -> (Vec<f64>, Vec<f64>) {
        let s = self.cfg.substances.len();
        (self.injected[..s].to_vec(), self.removed[..s].to_vec())
    }

    /// A 64-bit FNV-1a hash of the exact bits of the whole state (the particles of the interior cells; the
    /// halo holds nothing a step reads): equal hashes mean (with overwhelming probability) bit-identical
    /// states, for replays, lock-step networking and determinism checks, on either backend and after a
    /// resume.
    pub fn checksum(&self) -> u64 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        let arrays = self
            .cur
            .pos
            .iter()
            .chain(self.cur.vel.iter())
            .chain(self.cur.mass.iter());
        for a in arrays {
            self.layout.for_each_cell(|i, _| {
                h ^= a[i].to_bits() as u64;
                h = h.wrapping_mul(0x0000_0100_0000_01b3);
            });
        }
        h
    }

    /// Advects the fluid by `dt` seconds without forces or gravity: the reintegration pass alone (advance and
    /// gather), e.g. to move mass through a prescribed velocity field.
    pub fn advect(&mut self, dt: f64) {
        self.ensure_scratch();
        let dt = dt as f32;
        let r = self.cfg.params.diffusion_radius;
        kernels::occupancy(&self.layout, &self.cur, &mut self.occupied);
        // A prescribed motion beyond the speed limit is the caller's to choose; it is not reported here.
        kernels::advance(&self.layout, &mut self.cur, None, [0.0; D], dt, r);
        self.keep_in_fluid_region();
        self.gather();
    }

    /// Stage "emit": emitters fill their cells up to their density, sinks drain theirs.
    fn emit(&mut self, dt: f64) {
        let h = self.cfg.cell_size as f32;
        for (e, cells) in &self.emitters {
            if !e.active_at(self.time) {
                continue;
            }
            // Fill up to the target compression s (the rest-relative mass of the cell's mix).
            let target = (e.density * QUANTA_PER_REST_CELL).round();
            for &i in cells {
                let have = self.cur.total_mass(i);
                if have < target {
                    self.cur.mass[e.substance][i] += target - have;
                    self.injected[e.substance] += (target - have) as f64 * self.unit[e.substance];
                }
                for a in 0..D {
                    self.cur.vel[a][i] = e.velocity[a] / h;
                }
            }
        }
        for (s, cells) in &self.sinks {
            let keep = sink_keep(s.rate as f32, dt);
            for &i in cells {
                for (k, m) in self.cur.mass.iter_mut().enumerate() {
                    let kept = (m[i] * keep).round();
                    self.removed[k] += (m[i] - kept) as f64 * self.unit[k];
                    m[i] = kept;
                }
            }
        }
    }

    /// The SPH force constants in cell units.
    fn force_consts(&self) -> ForceConsts {
        let p = &self.cfg.params;
        let h = self.cfg.cell_size;
        // The spiky kernel's 3σ(h − r)² over r, normalised so that on the particle lattice its gradient sum is
        // exact, Σⱼ xⱼ,ₐ² · 3σ(h − |xⱼ|)²/|xⱼ| = 1 (the continuum value). A 3^D stencil truncates the kernel,
        // which would otherwise weaken the pressure gradient (to 0.655 of its value in 2D with h = 1.5).
        let hk = p.kernel_radius as f64;
        let moment: f64 = self
            .layout
            .neighbours
            .iter()
            .map(|(_, off)| {
                let r = off.iter().map(|&o| (o * o) as f64).sum::<f64>().sqrt();
                if r > 0.0 {
                    (off[0] as f64).powi(2) * (hk - r).max(0.0).powi(2) / r
                } else {
                    0.0
                }
            })
            .sum();
        ForceConsts {
            h: p.kernel_radius,
            pressure: (1.0 / (moment * h * h)) as f32,
            viscosity: (p.viscosity as f64 / (moment * h * h)) as f32,
        }
    }

    /// Stages "density" and "forces": SPH accelerations into `self.acc`.
    fn forces(&mut self, timer: &mut StageTimer) {
        let p = &self.cfg.params;
        let volume = self.cell_volume();
        let eos = p.eos.term(p.sound_speed, p.gamma);
        let substances = &self.cfg.substances;
        let tension = p.tension;
        let rho_min = self.rho_min();
        let (layout, cur, rho, q, unit) = (
            &self.layout,
            &self.cur,
            &mut self.rho,
            &mut self.q,
            &self.unit,
        );
        timer.time("density", || {
            with_substances!(substances.len(), S => {
                let unit: [f32; S] = std::array::from_fn(|k| unit[k] as f32);
                let inv_q = 1.0 / QUANTA_PER_REST_CELL;
                kernels::density::<D, S>(layout, cur, (1.0 / volume) as f32, unit, inv_q, rho_min, eos, tension, rho, q)
            })
        });
        let k = self.force_consts();
        if self.cfg.boundary == Boundary::Closed {
            self.mirror_walls(GhostStage::Forces);
        }
        let (layout, cur, rho, q, acc) =
            (&self.layout, &self.cur, &self.rho, &self.q, &mut self.acc);
        let occupied = &self.occupied;
        timer.time("forces", || {
            kernels::sph_forces(layout, cur, rho, q, k, occupied, acc)
        });
    }

    /// Ghost particles for closed walls: each halo cell takes the particle of the fluid cell it faces,
    /// mirrored in the wall (position and velocity components across the wall negated).
    ///
    /// Before the forces, ghosts carry density and pressure, so a wall pushes on the fluid as the fluid would
    /// on itself (the mirror-particle wall of SPH). Before the gather, they also carry mass, scale and
    /// deficit: the part of a boundary particle's box that crosses the wall lands, mirrored, back in the
    /// domain, exactly once (an elastic, free-slip wall that loses no mass and needs no clamping).
    fn mirror_walls(&mut self, stage: GhostStage) {
        for &(ghost, source, mirrored) in &self.ghosts {
            for a in 0..D {
                let sign = if mirrored & (1 << a) != 0 { -1.0 } else { 1.0 };
                self.cur.pos[a][ghost] = sign * self.cur.pos[a][source];
                self.cur.vel[a][ghost] = sign * self.cur.vel[a][source];
            }
            match stage {
                GhostStage::Forces => {
                    self.rho[ghost] = self.rho[source];
                    self.q[ghost] = self.q[source];
                }
                GhostStage::Gather => {
                    self.scale[ghost] = self.scale[source];
                    for k in 0..self.cur.mass.len() {
                        self.cur.mass[k][ghost] = self.cur.mass[k][source];
                        self.deficit[k][ghost] = self.deficit[k][source];
                    }
                }
            }
        }
    }

    /// Obstacles after the advance: particles next to an obstacle lose their velocity into it and are pushed
    /// out of it, and a box whose centre would land in a solid cell is kept in its own cell. The renormalisation
    /// of the shares over the fluid cells happens in [`kernels::normalise`], at the start of the gather.
    fn keep_in_fluid_region(&mut self) {
        let r = self.cfg.params.diffusion_radius;
        let reach = 1.5 - r;
        for ns in &self.near_solid {
            let i = ns.index;
            if self.cur.total_mass(i) <= 0.0 {
                continue;
            }
            let x: [f32; D] = std::array::from_fn(|a| self.cur.pos[a][i]);
            let depth = r - (ns.distance + (0..D).map(|a| ns.normal[a] * x[a]).sum::<f32>());
            if depth > 0.0 {
                let vn: f32 = (0..D).map(|a| self.cur.vel[a][i] * ns.normal[a]).sum();
                for a in 0..D {
                    if vn < 0.0 {
                        self.cur.vel[a][i] -= vn * ns.normal[a];
                    }
                    self.cur.pos[a][i] = (x[a] + depth * ns.normal[a]).clamp(-reach, reach);
                }
            }
            // The box centre must land in a fluid cell: the gather hands the rounding remainder to that
            // cell, and a box with a fluid centre always overlaps fluid. Otherwise stay in the own cell.
            let centre_cell = self.layout.neighbours.iter().position(|&(_, off)| {
                (0..D).all(|a| (-0.5..0.5).contains(&(self.cur.pos[a][i] - off[a])))
            });
            let centre_solid = centre_cell
                .is_none_or(|n| self.solid[(i as isize + self.layout.neighbours[n].0) as usize]);
            if centre_solid {
                for a in 0..D {
                    self.cur.pos[a][i] = self.cur.pos[a][i].clamp(-0.5, 0.49);
                }
            }
        }
    }

    /// Stage "reintegrate": the gather, solid cells emptied, buffers swapped.
    fn gather(&mut self) {
        let r = self.cfg.params.diffusion_radius;
        let (layout, cur) = (&self.layout, &self.cur);
        let fluid = (!self.solid_cells.is_empty()).then_some(self.fluid.as_slice());
        let (scale, deficit) = (&mut self.scale, &mut self.deficit);
        with_substances!(cur.mass.len(), S => kernels::normalise::<D, S>(layout, cur, fluid, r, &self.occupied, scale, deficit));
        let closed = self.cfg.boundary == Boundary::Closed;
        if closed {
            self.mirror_walls(GhostStage::Gather);
        }
        let (layout, cur, next, scale, deficit) = (
            &self.layout,
            &self.cur,
            &mut self.next,
            &self.scale,
            &self.deficit,
        );
        let fluid = (!self.solid_cells.is_empty()).then_some(self.fluid.as_slice());
        with_substances!(cur.mass.len(), S => {
            let unit: [f64; S] = std::array::from_fn(|k| self.unit[k]);
            kernels::reintegrate::<D, S>(
                layout,
                cur,
                fluid,
                scale,
                deficit,
                unit,
                &self.occupied,
                next,
                &mut self.totals,
                r,
            )
        });
        std::mem::swap(&mut self.cur, &mut self.next);
        if closed {
            // The halo of the new state still holds the ghosts of two steps ago: make it vacuum again.
            for &(ghost, _, _) in &self.ghosts {
                for m in &mut self.cur.mass {
                    m[ghost] = 0.0;
                }
            }
        }
    }

    /// The diagnostics of the state the last gather built, from its per-chunk sums added in chunk order
    /// (so the same for any thread count): mass per substance (kg), kinetic energy (kg·cells²/s²), momentum
    /// (kg·cells/s), and the largest speed (cells/s).
    fn measure(&self) -> ([f64; MAX_SUBSTANCES], f64, [f64; D], f64) {
        let mut sum = kernels::Totals::default();
        for t in &self.totals {
            sum.add(t);
        }
        let masses = std::array::from_fn(|k| {
            if k < self.unit.len() {
                sum.quanta[k] * self.unit[k]
            } else {
                0.0
            }
        });
        (
            masses,
            sum.kinetic,
            std::array::from_fn(|a| sum.momentum[a]),
            sum.max_speed2.sqrt(),
        )
    }

    /// The stage where non-finite values first appear, for the divergence report.
    fn broken_stage(&self) -> &'static str {
        let bad = |v: &[f32]| v.iter().any(|x| !x.is_finite());
        if bad(&self.q) || self.acc.iter().any(|a| bad(a)) {
            "forces"
        } else {
            "reintegrate"
        }
    }

    fn interior_field(&self, f: impl Fn(usize, [usize; D]) -> f32) -> Field {
        let mut data = Vec::with_capacity(self.layout.cells());
        self.layout.for_each_cell(|i, c| data.push(f(i, c)));
        let shape = self.cfg.resolution.iter().rev().copied().collect();
        Field {
            shape,
            data,
            signed: false,
        }
    }

    /// Mass of substance `k` in padded cell `i` (kg).
    fn mass_kg(&self, k: usize, i: usize) -> f32 {
        (self.cur.mass[k][i] as f64 * self.unit[k]) as f32
    }

    /// Mass of the particle in padded cell `i` (kg).
    fn cell_mass_kg(&self, i: usize) -> f32 {
        (0..self.unit.len()).map(|k| self.mass_kg(k, i)).sum()
    }

    /// Pressure (Pa) from the equation of state, for output.
    fn pressure_at(&self, i: usize) -> f32 {
        let volume = self.cell_volume() as f32;
        let p = &self.cfg.params;
        let total = self.cell_mass_kg(i);
        if total <= 0.0 {
            return 0.0;
        }
        let rho = total / volume;
        let s = self.cur.total_mass(i) / QUANTA_PER_REST_CELL;
        p.eos.term(p.sound_speed, p.gamma).pressure(rho, s)
    }
}

/// The step record's clamps for `count` velocity components held at the speed limit in a step of `dt`
/// seconds with boxes of half-size `r` cells of `h` metres: none when `count` is 0.
pub fn speed_clamps(count: u64, dt: f64, r: f32, h: f64) -> Vec<Clamp> {
    if count == 0 {
        return Vec::new();
    }
    vec![Clamp {
        name: "speed",
        count,
        limit: kernels::speed_limit(dt as f32, r) as f64 * h,
        unit: "m/s",
        remedy: "a box may move at most 2 − r cells per step: take smaller steps (time.cfl, --steps-per-frame)",
    }]
}

/// Stages of a step, in order ([`Description::stages`]).
pub const STAGES: &[&str] = &[
    "emit",
    "density",
    "forces",
    "advance",
    "reintegrate",
    "diagnostics",
];

/// What a `dim`-dimensional reintegration-tracking simulation of `substances` substances offers: its grid
/// fields (`density`, coloured by substance in pictures, `mass`, `speed`, the velocity components,
/// `pressure`, `vorticity` in 2D, and each substance's mass fraction `substance_k`), its stages and arrays.
pub fn describe(dim: usize, substances: usize) -> Description {
    let mut fields = vec!["density", "mass", "speed", "velocity_x", "velocity_y"];
    if dim == 3 {
        fields.push("velocity_z");
    }
    fields.push("pressure");
    if dim == 2 {
        fields.push("vorticity");
    }
    const SUBSTANCE: [&str; MAX_SUBSTANCES] =
        ["substance_0", "substance_1", "substance_2", "substance_3"];
    fields.extend_from_slice(&SUBSTANCE[..substances.min(MAX_SUBSTANCES)]);
    Description {
        method: "reint",
        fields,
        particle_values: if dim == 3 {
            vec![
                "velocity_x",
                "velocity_y",
                "velocity_z",
                "mass",
                "substance",
            ]
        } else {
            vec!["velocity_x", "velocity_y", "mass", "substance"]
        },
        stages: STAGES,
        array_fields: &["mass"],
        picture: FrameSource::Grid,
        default_view: "density",
    }
}

impl<const D: usize> Simulation for ReintSim<D> {
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

    /// The step that moves the fastest particle, or a sound wave, `cfl` cells (and gravity's speed-up over one
    /// cell), whichever is shortest.
    fn max_dt(&self, cfl: f64) -> f64 {
        max_dt(self, self.max_speed, cfl)
    }

    fn describe(&self) -> Description {
        describe(D, self.cfg.substances.len())
    }

    fn advance(&mut self, dt: f64, timer: &mut StageTimer) -> Result<Advance, SimError> {
        let h = self.cfg.cell_size;
        let r = self.cfg.params.diffusion_radius;
        let gravity = self.cfg.gravity.map(|g| (g / h) as f32);
        self.ensure_scratch();

        if !(self.emitters.is_empty() && self.sinks.is_empty()) {
            timer.time("emit", || self.emit(dt));
        }
        kernels::occupancy(&self.layout, &self.cur, &mut self.occupied);
        if self.cfg.params.forces {
            self.forces(timer);
        }
        let limited = timer.time("advance", || {
            let acc = self.cfg.params.forces.then_some(&self.acc);
            let limited = kernels::advance(&self.layout, &mut self.cur, acc, gravity, dt as f32, r);
            self.keep_in_fluid_region();
            limited
        });
        timer.time("reintegrate", || self.gather());
        let (masses, kinetic, momentum, max_speed) = timer.time("diagnostics", || self.measure());
        self.time += dt;
        self.steps += 1;
        let total: f64 = masses.iter().sum();
        if !(total.is_finite() && kinetic.is_finite() && max_speed.is_finite()) {
            return Err(SimError::Diverged {
                stage: self.broken_stage(),
                step: self.steps,
                detail: format!("mass {total}, kinetic energy {kinetic}, max speed {max_speed}"),
            });
        }
        self.max_speed = max_speed as f32;
        let s = self.cfg.substances.len();
        let speed_si = max_speed.max(0.0) * h;
        Ok(Advance {
            substeps: 1,
            quantities: vec![
                ("mass", Quantity::Scalar(total)),
                ("substance_mass", Quantity::Vector(masses[..s].to_vec())),
                (
                    "mass_injected",
                    Quantity::Scalar(self.injected.iter().sum()),
                ),
                ("mass_removed", Quantity::Scalar(self.removed.iter().sum())),
                ("kinetic_energy", Quantity::Scalar(kinetic * h * h)),
                (
                    "momentum",
                    Quantity::Vector(momentum.iter().map(|p| p * h).collect()),
                ),
                ("max_speed", Quantity::Scalar(speed_si)),
                ("cfl", Quantity::Scalar(max_speed.max(0.0) * dt)),
            ],
            clamps: speed_clamps(limited, dt, r, h),
        })
    }

    fn field(&self, name: &str) -> Option<Field> {
        let h = self.cfg.cell_size as f32;
        let volume = self.cell_volume() as f32;
        let s = &self.cur;
        let velocity = |a: usize| move |i: usize, _| s.vel[a][i] * h;
        match name {
            "density" => Some(self.interior_field(|i, _| self.cell_mass_kg(i) / volume)),
            "mass" => Some(self.interior_field(|i, _| self.cell_mass_kg(i))),
            "speed" => Some(self.interior_field(|i, _| {
                (0..D).map(|a| s.vel[a][i].powi(2)).sum::<f32>().sqrt() * h
            })),
            "velocity_x" => Some(Field {
                signed: true,
                ..self.interior_field(velocity(0))
            }),
            "velocity_y" => Some(Field {
                signed: true,
                ..self.interior_field(velocity(1))
            }),
            "velocity_z" if D == 3 => Some(Field {
                signed: true,
                ..self.interior_field(velocity(2))
            }),
            "pressure" => Some(Field {
                signed: true,
                ..self.interior_field(|i, _| self.pressure_at(i))
            }),
            "vorticity" if D == 2 => {
                // ∂v/∂x − ∂u/∂y by central differences of the cell velocities, where both neighbours hold
                // fluid; zero elsewhere.
                let (sx, sy) = (self.layout.stride[0], self.layout.stride[1]);
                let f = self.interior_field(|i, _| {
                    let full = [i - sx, i + sx, i - sy, i + sy]
                        .iter()
                        .all(|&j| s.total_mass(j) > 0.0);
                    if !full || s.total_mass(i) <= 0.0 {
                        return 0.0;
                    }
                    let dvdx = (s.vel[1][i + sx] - s.vel[1][i - sx]) * 0.5;
                    let dudy = (s.vel[0][i + sy] - s.vel[0][i - sy]) * 0.5;
                    dvdx - dudy
                });
                Some(Field { signed: true, ..f })
            }
            _ => {
                let k: usize = name.strip_prefix("substance_")?.parse().ok()?;
                if k >= self.cfg.substances.len() {
                    return None;
                }
                Some(self.interior_field(|i, _| {
                    let m = self.cell_mass_kg(i);
                    if m > 0.0 {
                        self.mass_kg(k, i) / m
                    } else {
                        0.0
                    }
                }))
            }
        }
    }

    /// Per particle (each non-empty cell's, in [`Simulation::particle_positions`]' order): `velocity_x`,
    /// `velocity_y` (, `velocity_z`) in m/s, `mass` in kg, and `substance`, the index of the substance with
    /// the most mass in it.
    fn particle_values(&self, name: &str) -> Option<Vec<f32>> {
        let h = self.cfg.cell_size as f32;
        let s = &self.cur;
        let value: Box<dyn Fn(usize) -> f32 + '_> = match name {
            "velocity_x" => Box::new(|i| s.vel[0][i] * h),
            "velocity_y" => Box::new(|i| s.vel[1][i] * h),
            "velocity_z" if D == 3 => Box::new(|i| s.vel[D - 1][i] * h),
            "mass" => Box::new(|i| self.cell_mass_kg(i)),
            "substance" => Box::new(|i| {
                let mut best = 0;
                for (k, m) in s.mass.iter().enumerate() {
                    if m[i] > s.mass[best][i] {
                        best = k;
                    }
                }
                best as f32
            }),
            _ => return None,
        };
        let mut out = Vec::new();
        self.layout.for_each_cell(|i, _| {
            if s.total_mass(i) > 0.0 {
                out.push(value(i));
            }
        });
        Some(out)
    }

    fn particle_positions(&self) -> Vec<f32> {
        let h = self.cfg.cell_size;
        let mut out = Vec::new();
        self.layout.for_each_cell(|i, c| {
            if self.cur.total_mass(i) > 0.0 {
                for a in 0..D {
                    out.push(((c[a] as f64 + 0.5 + self.cur.pos[a][i] as f64) * h) as f32);
                }
            }
        });
        out
    }

    fn substance_colors(&self) -> Vec<[f32; 3]> {
        self.cfg.substances.iter().map(|s| s.color).collect()
    }

    fn save_state(&self) -> Result<SavedState, SimError> {
        Ok(self.saved().to_state())
    }

    fn restore_state(&mut self, state: &SavedState) -> Result<(), SimError> {
        let saved = ReintSaved::from_state(state, self.layout.cells(), self.cfg.substances.len())?;
        self.resume_from(&saved);
        Ok(())
    }

    fn apply_impulse(
        &mut self,
        center: &[f64],
        radius: f64,
        velocity: &[f64],
    ) -> Result<(), SimError> {
        let (c, v) = crate::sim::impulse_vectors::<D>(center, velocity)?;
        ReintSim::apply_impulse(self, c, radius, v.map(|x| x as f32));
        Ok(())
    }

    fn memory_bytes(&self) -> usize {
        let scratch = self.rho.len() + self.q.len() + self.scale.len();
        let vectors: usize = self.acc.iter().chain(&self.deficit).map(Vec::len).sum();
        let len = self.layout.len();
        self.cur.bytes() + self.next.bytes() + (scratch + vectors + len) * 4 + len
    }
}
