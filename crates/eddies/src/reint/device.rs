//! The hand-off to a device backend (the GPU backend of `eddies-gpu`): everything a backend that runs the
//! steps elsewhere needs from a [`ReintSim`] that was built and filled here, and the way back.
//!
//! The host simulation stays the one place where a scene is set up and read: its checks, obstacle lists,
//! emitter cells and constants are taken from it ([`ReintSim::device_scene`]), and a backend puts its state
//! back ([`ReintSim::set_interior_state`]) to read fields, particles and checksums through the host's own
//! code. Arrays cover the interior cells only (no halo), x fastest; lengths are in cells, velocities in
//! cells per second and masses in quanta ([`QUANTA_PER_REST_CELL`]).

use super::{Boundary, Eos, ReintSim, QUANTA_PER_REST_CELL, RHO_VACUUM};

/// The particle state over the interior cells, in the method's units.
#[derive(Clone, Debug, PartialEq)]
pub struct InteriorState<const D: usize> {
    /// Position relative to the cell centre (cells, each component in [−½, ½]).
    pub pos: [Vec<f32>; D],
    /// Velocity (cells/s).
    pub vel: [Vec<f32>; D],
    /// Mass of each substance (quanta, whole numbers).
    pub mass: Vec<Vec<f32>>,
}

/// A fluid cell next to an obstacle: its interior index, the obstacles' signed distance at its centre
/// (cells) and their outward unit normal.
#[derive(Clone, Debug, PartialEq)]
pub struct NearSolidCell<const D: usize> {
    pub cell: u32,
    pub distance: f32,
    pub normal: [f32; D],
}

/// An emitter with the interior cells it fills.
#[derive(Clone, Debug, PartialEq)]
pub struct EmitterCells<const D: usize> {
    pub substance: usize,
    /// Quanta each cell is filled up to.
    pub target: f32,
    /// Velocity given to the cells (cells/s).
    pub velocity: [f32; D],
    /// Simulated times (s) between which it runs (start inclusive, end exclusive).
    pub active: (f64, f64),
    pub cells: Vec<u32>,
}

impl<const D: usize> EmitterCells<D> {
    /// Whether the emitter runs in a step that starts at `time` (as [`super::Emitter::active_at`]).
    pub fn active_at(&self, time: f64) -> bool {
        super::params::runs_at(self.active, time)
    }
}

/// A sink with the interior cells it drains.
#[derive(Clone, Debug, PartialEq)]
pub struct SinkCells {
    /// Fraction of each cell's mass removed per second (the rate at f32 precision, as the host takes it).
    pub rate: f32,
    pub cells: Vec<u32>,
}

impl SinkCells {
    /// The factor a sink's cells keep of their mass over a step of `dt` seconds ([`super::sink_keep`]).
    pub fn keep(&self, dt: f64) -> f32 {
        super::sink_keep(self.rate, dt)
    }
}

/// The constants of a step, in the method's units.
#[derive(Clone, Debug, PartialEq)]
pub struct StepConstants<const D: usize> {
    /// Half-size r of the spread box (cells).
    pub diffusion_radius: f32,
    /// Whether SPH forces act.
    pub forces: bool,
    pub eos: Eos,
    /// Speed of sound squared (m²/s²) and the Tait exponent.
    pub c2: f32,
    pub gamma: f32,
    pub tension: bool,
    /// Densities below this count as vacuum in the forces (kg/m^D).
    pub rho_min: f32,
    /// 1 / cell volume (m^−D).
    pub inv_cell_volume: f32,
    /// 1 / [`QUANTA_PER_REST_CELL`].
    pub inv_quanta_per_rest: f32,
    /// Kernel support radius (cells) and the force constants of the pressure and viscous terms.
    pub kernel_h: f32,
    pub k_pressure: f32,
    pub k_viscosity: f32,
    /// Gravity (cells/s²).
    pub gravity: [f32; D],
    /// Closed walls mirror the fluid; open ones let it leave.
    pub closed: bool,
    /// Mass of one quantum of each substance (kg).
    pub unit: Vec<f64>,
}

/// Everything a device backend takes over from a host simulation.
#[derive(Clone, Debug)]
pub struct DeviceScene<const D: usize> {
    /// Interior cells per axis.
    pub resolution: [usize; D],
    pub state: InteriorState<D>,
    /// 1 for fluid cells, 0 for solid ones; `None` without obstacles.
    pub fluid: Option<Vec<u32>>,
    pub near_solid: Vec<NearSolidCell<D>>,
    pub emitters: Vec<EmitterCells<D>>,
    pub sinks: Vec<SinkCells>,
    pub constants: StepConstants<D>,
    /// Largest particle speed known (cells/s), for the first time step.
    pub max_speed: f32,
}

impl<const D: usize> ReintSim<D> {
    /// Interior index of padded index `i` (which must be interior).
    fn interior_index(&self, i: usize) -> u32 {
        let c = self.layout.coords(i).expect("an interior cell");
        let mut idx = 0;
        for a in (0..D).rev() {
            idx = idx * self.cfg.resolution[a] + c[a];
        }
        idx as u32
    }

    /// Values of a padded array at the interior cells, x fastest.
    fn interior(&self, v: &[f32]) -> Vec<f32> {
        let mut out = Vec::with_capacity(self.layout.cells());
        self.layout.for_each_cell(|i, _| out.push(v[i]));
        out
    }

    /// The state over the interior cells.
    pub fn interior_state(&self) -> InteriorState<D> {
        InteriorState {
            pos: std::array::from_fn(|a| self.interior(&self.cur.pos[a])),
            vel: std::array::from_fn(|a| self.interior(&self.cur.vel[a])),
            mass: self.cur.mass.iter().map(|m| self.interior(m)).collect(),
        }
    }

    /// Replaces the state with one a device backend computed (the halo stays vacuum), so that fields,
    /// particles, masses and the checksum read it.
    ///
    /// # Panics
    /// If the arrays do not match the grid and the substances.
    pub fn set_interior_state(&mut self, state: &InteriorState<D>) {
        let cells = self.layout.cells();
        assert!(
            state
                .pos
                .iter()
                .chain(&state.vel)
                .chain(&state.mass)
                .all(|v| v.len() == cells)
                && state.mass.len() == self.cur.mass.len(),
            "the state does not match the grid"
        );
        let mut k = 0;
        let layout = &self.layout;
        let cur = &mut self.cur;
        layout.for_each_cell(|i, _| {
            for a in 0..D {
                cur.pos[a][i] = state.pos[a][k];
                cur.vel[a][i] = state.vel[a][k];
            }
            for (m, s) in cur.mass.iter_mut().zip(&state.mass) {
                m[i] = s[k];
            }
            k += 1;
        });
    }

    /// The constants of a step.
    pub fn step_constants(&self) -> StepConstants<D> {
        let p = &self.cfg.params;
        let k = self.force_consts();
        StepConstants {
            diffusion_radius: p.diffusion_radius,
            forces: p.forces,
            eos: p.eos,
            c2: p.sound_speed * p.sound_speed,
            gamma: p.gamma,
            tension: p.tension,
            rho_min: self.rho_min(),
            inv_cell_volume: (1.0 / self.cell_volume()) as f32,
            inv_quanta_per_rest: 1.0 / QUANTA_PER_REST_CELL,
            kernel_h: k.h,
            k_pressure: k.pressure,
            k_viscosity: k.viscosity,
            gravity: self.cfg.gravity.map(|g| (g / self.cfg.cell_size) as f32),
            closed: self.cfg.boundary == Boundary::Closed,
            unit: self.unit.clone(),
        }
    }

    /// Everything a device backend needs to run this simulation from its present state.
    pub fn device_scene(&self) -> DeviceScene<D> {
        let h = self.cfg.cell_size as f32;
        DeviceScene {
            resolution: self.cfg.resolution,
            state: self.interior_state(),
            fluid: (!self.solid_cells.is_empty()).then(|| {
                self.interior(&self.fluid)
                    .iter()
                    .map(|&f| f as u32)
                    .collect()
            }),
            near_solid: self
                .near_solid
                .iter()
                .map(|n| NearSolidCell {
                    cell: self.interior_index(n.index),
                    distance: n.distance,
                    normal: n.normal,
                })
                .collect(),
            emitters: self
                .emitters
                .iter()
                .map(|(e, cells)| EmitterCells {
                    substance: e.substance,
                    target: (e.density * QUANTA_PER_REST_CELL).round(),
                    velocity: e.velocity.map(|v| v / h),
                    active: e.active,
                    cells: cells.iter().map(|&i| self.interior_index(i)).collect(),
                })
                .collect(),
            sinks: self
                .sinks
                .iter()
                .map(|(s, cells)| SinkCells {
                    rate: s.rate as f32,
                    cells: cells.iter().map(|&i| self.interior_index(i)).collect(),
                })
                .collect(),
            constants: self.step_constants(),
            max_speed: self.max_speed,
        }
    }

    /// Densities below this count as vacuum in the forces (kg/m^D).
    pub(super) fn rho_min(&self) -> f32 {
        RHO_VACUUM
            * self
                .cfg
                .substances
                .iter()
                .map(|s| s.rest_density)
                .fold(f32::INFINITY, f32::min)
    }
}

/// The time step for a fastest particle speed of `max_speed` (cells/s) at Courant number `cfl`: what
/// [`crate::Simulation::max_dt`] of a reintegration-tracking simulation returns, for backends that track
/// the speed themselves.
pub fn max_dt<const D: usize>(sim: &ReintSim<D>, max_speed: f32, cfl: f64) -> f64 {
    let h = sim.cfg.cell_size;
    let speed = max_speed as f64 * h;
    let sound = if sim.cfg.params.forces {
        sim.cfg.params.sound_speed as f64
    } else {
        0.0
    };
    let g = sim.cfg.gravity.iter().map(|g| g * g).sum::<f64>().sqrt();
    let fall = (g * h).sqrt();
    let v = speed.max(sound).max(fall).max(1e-12);
    cfl * h / v
}
