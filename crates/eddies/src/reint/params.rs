//! Parameters of reintegration tracking: the domain, the method's knobs and the substances.

use crate::shape::Shape;

/// What happens at the edges of the domain.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Boundary {
    /// Solid walls: mass stays inside (what crosses a wall is reflected back), and the wall pushes on the
    /// fluid like a mirror image of it (free slip).
    #[default]
    Closed,
    /// Mass that leaves the domain is gone (counted as outflow in the diagnostics).
    Open,
}

/// Equation of state: pressure from density. Each is parametrised by its speed of sound `c` (m/s) at rest
/// density, so that switching the law keeps the time step and stiffness comparable. `s = ρ/ρ₀` is the
/// compression; ρ₀ is the rest density of the cell's substance mix.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum Eos {
    /// Ideal gas at constant temperature, `P = k ρ` with `k = c²` (Moroz 2020). Never negative: a gas expands.
    IdealGas,
    /// Tait/Cole, `P = k((ρ/ρ₀)^γ − 1)` with `k = ρ₀ c² / γ` (Moroz 2020; γ = 7 for water).
    Tait { gamma: f32 },
    /// Moroz's liquid law `P = k ρ (ρ − ρ₀)` with `k = c² / ρ₀`, so that `dP/dρ = c²` at rest (Moroz 2020). Its
    /// negative pressure below rest density gives liquids cohesion when [`ReintParams::tension`] is on.
    #[default]
    Quadratic,
}

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

/// The method's parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct ReintParams {
    /// Half-size r of the box each particle is spread into, in cells; in (0, 1]. Below 0.5 the fluid behaves
    /// particle-like (blobs stay compact), above 0.5 field-like (numerical diffusion smooths it), as Moroz 2020
    /// shows. The seed's liquids use 0.55–0.6.
    pub diffusion_radius: f32,
    /// Pressure law.
    pub eos: Eos,
    /// Speed of sound at rest density (m/s): the stiffness of the fluid.
    pub sound_speed: f32,
    /// Support radius of the SPH smoothing kernel, in cells (Moroz 2020: about 1.5).
    pub kernel_radius: f32,
    /// Kinematic viscosity (m²/s); 0 disables the viscous force.
    pub viscosity: f32,
    /// Whether negative pressure (below rest density) acts. It gives liquids cohesion — streams and drops
    /// that hold together, the look of Moroz's paint — but it is what triggers SPH's tensile instability:
    /// particles pair up, density alternates cell by cell and the fluid never comes to rest. Off, negative
    /// pressures are clamped to zero, the usual remedy in weakly compressible SPH.
    pub tension: bool,
    /// Whether SPH forces act at all. Without them the method is pure mass-conserving advection of the
    /// initial velocity field (plus gravity).
    pub forces: bool,
}

impl Default for ReintParams {
    fn default() -> Self {
        Self {
            diffusion_radius: 0.55,
            eos: Eos::Quadratic,
            sound_speed: 10.0,
            kernel_radius: 1.5,
            viscosity: 0.0,
            tension: false,
            forces: true,
        }
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

/// A drain: every step, cells inside `shape` lose the fraction `rate · dt` of their mass (all of it when
/// `rate · dt ≥ 1`).
#[derive(Clone, Debug, PartialEq)]
pub struct Sink {
    /// Where mass leaves.
    pub shape: Shape,
    /// Removal rate (1/s).
    pub rate: f32,
}
