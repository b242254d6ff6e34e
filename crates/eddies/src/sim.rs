//! The interface every method offers to drivers (the CLI, a game loop, the validation suite).

use crate::diag::StepRecord;

/// A grid field copied out of a simulation for output: `shape` is `[ny, nx]` in 2D and `[nz, ny, nx]` in 3D
/// (C order, x fastest), values in the field's SI unit.
#[derive(Clone, Debug, PartialEq)]
pub struct Field {
    /// Array shape, slowest axis first.
    pub shape: Vec<usize>,
    /// Values, x fastest.
    pub data: Vec<f32>,
    /// Whether the field has a meaningful sign (use a diverging colour map).
    pub signed: bool,
}

/// Why a step failed.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum SimError {
    /// The state holds NaN or Inf, or a speed beyond the method's limit.
    #[error("simulation diverged in stage `{stage}` at step {step}: {detail}")]
    Diverged {
        stage: &'static str,
        step: u64,
        detail: String,
    },
    /// A parameter or input the method cannot work with.
    #[error("{0}")]
    InvalidInput(String),
}

/// A running simulation of any method, as a driver sees it.
pub trait Simulation: Send {
    /// 2 or 3.
    fn dim(&self) -> usize;
    /// Cells per axis `[nx, ny, nz]` (`nz = 1` in 2D).
    fn resolution(&self) -> [usize; 3];
    /// Edge length of a cell (m).
    fn cell_size(&self) -> f64;
    /// Lower corner of the grid that [`Simulation::field`] samples (m): the domain's origin for methods on
    /// a fixed grid, the fitted grid's corner for methods whose grid follows the particles.
    fn grid_origin(&self) -> [f64; 3] {
        [0.0; 3]
    }
    /// Simulated time (s).
    fn time(&self) -> f64;
    /// Steps taken.
    fn steps(&self) -> u64;
    /// Largest time step (s) that keeps the method's CFL number at or below `cfl`.
    fn max_dt(&self, cfl: f64) -> f64;
    /// Advances by `dt` seconds.
    fn step(&mut self, dt: f64) -> Result<StepRecord, SimError>;
    /// Names of the grid fields [`Simulation::field`] can return.
    fn field_names(&self) -> Vec<&'static str>;
    /// A grid field by name, or `None` for an unknown name.
    fn field(&self, name: &str) -> Option<Field>;
    /// Particle positions (m), `dim` values per particle.
    fn particle_positions(&self) -> Vec<f32>;
    /// Positions (m) of passive tracer particles, `dim` values per tracer; empty when the method has none.
    fn tracer_positions(&self) -> Vec<f32> {
        Vec::new()
    }
    /// A per-particle quantity by name, one value per particle of [`Simulation::particle_positions`], or
    /// `None` for a name the method does not offer.
    fn particle_values(&self, name: &str) -> Option<Vec<f32>> {
        let _ = name;
        None
    }
    /// Colours (linear RGB, 0–1) of the substances, for frames coloured by substance; empty when the method
    /// has no substances.
    fn substance_colors(&self) -> Vec<[f32; 3]> {
        Vec::new()
    }
    /// Memory held by the state and scratch buffers (bytes).
    fn memory_bytes(&self) -> usize;
}
