//! Parameters of reintegration tracking: the domain, the method's knobs and the substances.

use super::Eos;
use crate::check::{self, Check};
use crate::shape::Shape;
pub use crate::sim::{Boundary, Sink};

/// One substance: a liquid or gas with its own rest density and colour, advected with its own mass so that
/// each substance is conserved separately.
#[derive(Clone, Debug, PartialEq)]
pub struct Substance {
    /// Rest density ρ₀ (kg/m³ in 3D, kg/m² in 2D).
    pub rest_density: f32,
    /// Display colour, linear RGB in 0–1.
    pub color: [f32; 3],
}

impl Default for Substance {
    fn default() -> Self {
        Self {
            rest_density: 1000.0,
            color: [0.15, 0.45, 0.95],
        }
    }
}

/// The method's parameters: the `[reint]` section of a scene file, key for key (with the `serde` feature),
/// with their defaults and [`ReintParams::validate`] as the one statement of what each accepts.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields, default))]
pub struct ReintParams {
    /// Half-size r of the box each particle is spread into, in cells; in (0, 1]. Below 0.5 the fluid behaves
    /// particle-like (blobs stay compact), above 0.5 field-like (numerical diffusion smooths it), as Moroz
    /// shows. His liquids use 0.55–0.6. Default 0.55.
    pub diffusion_radius: f32,
    /// Pressure law: "quadratic", "tait" or "ideal-gas" ([`Eos`]). Default "quadratic".
    pub eos: Eos,
    /// Exponent γ of the Tait law, 1 to 20 (used with [`Eos::Tait`]). Default 7.
    pub gamma: f32,
    /// Speed of sound at rest density (m/s), > 0: the stiffness of the fluid. Default 10.
    pub sound_speed: f32,
    /// Support radius of the SPH smoothing kernel, in cells, 1 to 1.5 (Moroz: about 1.5). The forces sum
    /// over the 3^D neighbours, which a wider kernel would overreach. Default 1.5.
    pub kernel_radius: f32,
    /// Kinematic viscosity (m²/s), ≥ 0; 0 disables the viscous force. Default 0.
    pub viscosity: f32,
    /// Whether negative pressure (below rest density) acts. It gives liquids cohesion — streams and drops
    /// that hold together, the look of Moroz's paint — but it is what triggers SPH's tensile instability:
    /// particles pair up, density alternates cell by cell and the fluid never comes to rest. Off, negative
    /// pressures are clamped to zero, the usual remedy in weakly compressible SPH. Default false.
    pub tension: bool,
    /// Whether SPH forces act at all. Without them the method is pure mass-conserving advection of the
    /// initial velocity field (plus gravity). Default true.
    pub forces: bool,
}

impl Default for ReintParams {
    fn default() -> Self {
        Self {
            diffusion_radius: 0.55,
            eos: Eos::Quadratic,
            gamma: 7.0,
            sound_speed: 10.0,
            kernel_radius: 1.5,
            viscosity: 0.0,
            tension: false,
            forces: true,
        }
    }
}

impl ReintParams {
    /// Checks every value; the first one out of range is named by its key.
    pub fn validate(&self) -> Check {
        check::range("diffusion_radius", self.diffusion_radius, 0.0, 1.0, true)?;
        check::range("gamma", self.gamma, 1.0, 20.0, false)?;
        check::positive("sound_speed", self.sound_speed, "m/s")?;
        check::range("kernel_radius", self.kernel_radius, 1.0, 1.5, false)?;
        check::range("viscosity", self.viscosity, 0.0, 1e6, false)
    }
}

/// Everything needed to build a [`super::ReintSim`].
#[derive(Clone, Debug, PartialEq)]
pub struct ReintConfig<const D: usize> {
    /// Cells per axis (x first).
    pub resolution: [usize; D],
    /// Edge length of a cell (m).
    pub cell_size: f64,
    /// Domain edges.
    pub boundary: Boundary,
    /// Gravity (m/s²); y is up.
    pub gravity: [f64; D],
    /// Method parameters.
    pub params: ReintParams,
    /// Substances (1 to [`super::MAX_SUBSTANCES`]).
    pub substances: Vec<Substance>,
}

impl<const D: usize> Default for ReintConfig<D> {
    fn default() -> Self {
        let mut gravity = [0.0; D];
        gravity[1] = -9.81;
        Self {
            resolution: [64; D],
            cell_size: 1.0 / 64.0,
            boundary: Boundary::Closed,
            gravity,
            params: ReintParams::default(),
            substances: vec![Substance::default()],
        }
    }
}

/// A source of mass: every step, cells inside `shape` are filled up to `density` with `substance` moving at
/// `velocity` (a paint stream, a tap).
#[derive(Clone, Debug, PartialEq)]
pub struct Emitter<const D: usize> {
    /// Where mass enters.
    pub shape: Shape,
    /// Index of the substance emitted.
    pub substance: usize,
    /// Velocity of the emitted fluid (m/s).
    pub velocity: [f32; D],
    /// Density the emitter fills its cells to, as a fraction of the substance's rest density.
    pub density: f32,
    /// Simulated times (s) between which the emitter runs.
    pub active: (f64, f64),
}

impl<const D: usize> Emitter<D> {
    /// Whether the emitter runs in a step that starts at `time` (s).
    pub fn active_at(&self, time: f64) -> bool {
        runs_at(self.active, time)
    }
}

/// Whether a source active between `active.0` (inclusive) and `active.1` (exclusive) runs at `time`.
pub(super) fn runs_at(active: (f64, f64), time: f64) -> bool {
    time >= active.0 && time < active.1
}

/// The fraction of its mass a sink's cell keeps over a step of `dt` seconds at `rate` per second (then
/// rounded to whole quanta). Reint's state and parameters are f32: the rate is taken at that precision.
pub fn sink_keep(rate: f32, dt: f64) -> f32 {
    (1.0 - rate as f64 * dt).max(0.0) as f32
}
