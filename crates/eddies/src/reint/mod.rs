//! Reintegration tracking with SPH forces (Moroz 2020, seed 000).
//!
//! UNDER CONSTRUCTION: the API below is fixed; bodies are being written.

mod params;
pub mod validation;

pub use params::{Boundary, Emitter, Eos, ReintConfig, ReintParams, Sink, Substance};

use crate::diag::StepRecord;
use crate::shape::Shape;
use crate::sim::{Field, SimError, Simulation};

/// Most substances a simulation can carry.
pub const MAX_SUBSTANCES: usize = 4;

/// A reintegration-tracking simulation in `D` dimensions.
pub struct ReintSim<const D: usize> {
    cfg: ReintConfig<D>,
}

impl<const D: usize> ReintSim<D> {
    /// Builds an empty (vacuum) simulation.
    pub fn new(cfg: ReintConfig<D>) -> Result<Self, SimError> {
        Ok(Self { cfg })
    }
    /// Bytes a simulation of this size will hold, for refusing scenes too large for memory before allocating.
    pub fn estimate_bytes(resolution: [usize; D], substances: usize) -> usize {
        let _ = (resolution, substances);
        todo!()
    }
    /// Fills cells whose centre is inside `shape` with `substance` at `density` × its rest density, moving at
    /// `velocity` (m/s). Mass already there is replaced.
    pub fn fill(&mut self, shape: &Shape, substance: usize, density: f32, velocity: [f32; D]) {
        let _ = (shape, substance, density, velocity);
        todo!()
    }
    /// Adds a static obstacle.
    pub fn add_obstacle(&mut self, shape: Shape) {
        let _ = shape;
        todo!()
    }
    /// Adds an emitter.
    pub fn add_emitter(&mut self, emitter: Emitter<D>) {
        let _ = emitter;
        todo!()
    }
    /// Adds a sink.
    pub fn add_sink(&mut self, sink: Sink) {
        let _ = sink;
        todo!()
    }
    /// Adds `velocity` (m/s) to the fluid within `radius` (m) of `center` (m), with a smooth falloff.
    pub fn apply_impulse(&mut self, center: [f64; D], radius: f64, velocity: [f32; D]) {
        let _ = (center, radius, velocity);
        todo!()
    }
}

impl<const D: usize> Simulation for ReintSim<D> {
    fn dim(&self) -> usize { D }
    fn resolution(&self) -> [usize; 3] { todo!() }
    fn cell_size(&self) -> f64 { self.cfg.cell_size }
    fn time(&self) -> f64 { todo!() }
    fn steps(&self) -> u64 { todo!() }
    fn max_dt(&self, cfl: f64) -> f64 { let _ = cfl; todo!() }
    fn step(&mut self, dt: f64) -> Result<StepRecord, SimError> { let _ = dt; todo!() }
    fn field_names(&self) -> Vec<&'static str> { todo!() }
    fn field(&self, name: &str) -> Option<Field> { let _ = name; todo!() }
    fn particle_positions(&self) -> Vec<f32> { todo!() }
    fn memory_bytes(&self) -> usize { todo!() }
}
