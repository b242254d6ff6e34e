//! The scene format: what a scene file (TOML) may contain, its defaults, and the checks on its values.
//!
//! Every key has a default (shape dimensions excepted: a sphere needs its radius) and a doc comment here, and
//! unknown keys are errors. The structs deserialise with serde; [`Scene::resolve`] then fills in the
//! defaults that depend on the dimension and [`Scene::validate`] checks every value, naming the key of the
//! first bad one. [`crate::load`] turns those key paths into file, line and column.
//!
//! ```toml
//! method = "reint"
//! dim = 2
//! [domain]
//! size = [1.0, 1.0]
//! resolution = [256, 256]
//! [[region]]
//! shape = { box = { min = [0.0, 0.0], max = [0.3, 0.6] } }
//! ```

use eddies::flip::FlipParams;
use eddies::reint::{ReintParams, MAX_SUBSTANCES};
use eddies::vpm::{VelocityMethod, VpmParams};
use eddies::Shape;
use eddies::{Description, FrameSource};
use glam::{DQuat, DVec3};
use serde::{Deserialize, Serialize};

use crate::keypath::KeyPath;

/// Fewest cells per axis: the SPH kernel and the reintegration gather need a few cells of room.
pub const MIN_RESOLUTION: i64 = 4;
/// Most cells per axis accepted before the memory check (keeps the cell count within 64 bits).
pub const MAX_RESOLUTION: i64 = 1 << 20;
/// Most output frames.
pub const MAX_FRAMES: i64 = 10_000_000;
/// Largest density fraction of a region or emitter: beyond a few times rest density the pressure law
/// explodes on the first step.
pub const MAX_DENSITY_FRACTION: f64 = 10.0;

/// A value that is out of range, of the wrong shape, or inconsistent with another value.
#[derive(Clone, Debug, PartialEq)]
pub struct Invalid {
    /// The key the problem is with.
    pub path: KeyPath,
    /// What is wrong.
    pub what: String,
    /// What would be accepted.
    pub allowed: String,
}

impl Invalid {
    /// A problem the library found with a value of the table at `table`.
    pub fn from_library(table: KeyPath, e: eddies::Invalid) -> Self {
        let path = e.key_path().fold(table, |p, k| p.key(k));
        Self::new(path, e.what, e.allowed)
    }

    /// A problem with the value at `path`.
    pub fn new(path: KeyPath, what: impl Into<String>, allowed: impl Into<String>) -> Self {
        Self {
            path,
            what: what.into(),
            allowed: allowed.into(),
        }
    }
}

/// Result of a check.
pub type Check = Result<(), Invalid>;

/// What frames of a method whose pictures are made of particles show by default: its tracers (or its
/// particles where there are none), splatted and projected along z.
pub const TRACERS: &str = "tracers";

/// The keys a table of the scene format takes, for tables whose serde errors do not list them (`[vpm]`,
/// whose parameter keys come from [`VpmParams`]); `None` for other tables.
pub fn keys_of(path: &KeyPath) -> Option<Vec<String>> {
    if *path != KeyPath::root().key("vpm") {
        return None;
    }
    let params = toml::Table::try_from(VpmParams::default()).ok()?;
    let bodies = [
        "ring",
        "tube",
        "sheet",
        "noise",
        "jet",
        "ball",
        "block",
        "heat_source",
    ];
    Some(
        params
            .keys()
            .cloned()
            .chain(bodies.iter().map(|k| k.to_string()))
            .collect(),
    )
}

/// Simulation method.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Method {
    /// Reintegration tracking with SPH forces (`eddies::reint`).
    #[default]
    Reint,
    /// PIC/FLIP/APIC liquid (`eddies::flip`).
    Flip,
    /// Vortex particle method (`eddies::vpm`), 3D.
    Vpm,
}

impl Method {
    /// The name used in scene files.
    pub fn name(self) -> &'static str {
        match self {
            Method::Reint => "reint",
            Method::Flip => "flip",
            Method::Vpm => "vpm",
        }
    }
}

/// A scene: the method, the domain, the time line, the method's parameters, the initial fluid, sources, sinks
/// and obstacles, and what to write.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Scene {
    /// Simulation method: "reint" (reintegration tracking), "flip" (PIC/FLIP/APIC liquid) or "vpm" (vortex
    /// particles, dim = 3). Default "reint".
    pub method: Method,
    /// Number of space dimensions, 2 or 3. Default 2.
    pub dim: i64,
    /// Seed for methods with random initial states (flip: the jitter of seeded particles; reint has none).
    /// Default 1.
    pub seed: i64,
    /// The box the simulation runs in.
    pub domain: Domain,
    /// Frames and time stepping.
    pub time: Time,
    /// Parameters of reintegration tracking.
    pub reint: ReintParams,
    /// Parameters and initial vorticity of the vortex particle method.
    pub vpm: Vpm,
    /// Parameters of the PIC/FLIP/APIC liquid.
    pub flip: FlipParams,
    /// The substances (1 to 4), referred to by index from regions and emitters. Default: one, water-like.
    pub substance: Vec<SubstanceSpec>,
    /// Initial fluid, filled in order (a later region replaces an earlier one where they overlap).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub region: Vec<Region>,
    /// Solid obstacles.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub obstacle: Vec<Obstacle>,
    /// Sources of fluid.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub emitter: Vec<EmitterSpec>,
    /// Drains.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sink: Vec<SinkSpec>,
    /// What the frames show and which arrays are written.
    pub output: Output,
}

impl Default for Scene {
    fn default() -> Self {
        Self {
            method: Method::Reint,
            dim: 2,
            seed: 1,
            domain: Domain::default(),
            time: Time::default(),
            reint: ReintParams::default(),
            vpm: Vpm::default(),
            flip: FlipParams::default(),
            substance: Vec::new(),
            region: Vec::new(),
            obstacle: Vec::new(),
            emitter: Vec::new(),
            sink: Vec::new(),
            output: Output::default(),
        }
    }
}

/// Domain edges.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BoundaryKind {
    /// Solid walls that keep the fluid in.
    #[default]
    Closed,
    /// Fluid that leaves is gone.
    Open,
}

/// `[domain]`: the simulated box, its lower corner at the origin.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Domain {
    /// Edge lengths (m), one per axis; cells must be cubes, so `size` is proportional to `resolution`.
    /// Default 1.0 along x and `resolution`-proportional along the other axes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<Vec<f64>>,
    /// Cells per axis, 4 to 2²⁰ each. Default 128 per axis.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resolution: Option<Vec<i64>>,
    /// "closed" (walls) or "open". Default "closed".
    pub boundary: BoundaryKind,
    /// Gravity (m/s²), y is up. Default [0, -9.81] (2D) or [0, -9.81, 0] (3D).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gravity: Option<Vec<f64>>,
}

/// `[time]`: output frames and time stepping.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Time {
    /// Number of output frames; frame k shows the state after (k + 1) / fps seconds. Default 60.
    pub frames: i64,
    /// Output frames per simulated second. Default 30.
    pub fps: f64,
    /// Steps per frame; 0 chooses the step from `cfl` (adaptive). Default 0.
    pub steps_per_frame: i64,
    /// Largest fraction of a cell the fluid may move per step (and the matching sound-speed limit), in
    /// (0, 1]. Default 0.5.
    pub cfl: f64,
}

impl Default for Time {
    fn default() -> Self {
        Self {
            frames: 60,
            fps: 30.0,
            steps_per_frame: 0,
            cfl: 0.5,
        }
    }
}

/// `[vpm]`: the parameters of the vortex particle method (the library's [`VpmParams`], whose keys sit
/// directly in the table) and its initial vorticity and sources. The domain's `resolution` is the grid that
/// follows the vortons; its `size` is the region the frames show.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Vpm {
    /// The method's parameters: `velocity`, `theta`, `poisson_tolerance`… (see `eddies::vpm::VpmParams`
    /// and docs/vpm.md).
    #[serde(flatten)]
    pub params: VpmParams,
    /// Vortex rings.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ring: Vec<RingSpec>,
    /// Vortex tubes.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tube: Vec<TubeSpec>,
    /// Vortex sheets.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sheet: Vec<SheetSpec>,
    /// Random vorticity.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub noise: Vec<NoiseSpec>,
    /// Nozzles that emit rings periodically.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub jet: Vec<JetSpec>,
    /// Balls of heavy, light or hot fluid, once or periodically.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ball: Vec<BallSpec>,
    /// Boxes of heavy, light or hot fluid.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub block: Vec<BlockSpec>,
    /// Heat sources.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub heat_source: Vec<HeatSourceSpec>,
}

/// `[[vpm.ball]]`: a ball of fluid heavier, lighter or hotter than ambient, at rest, wrapped in a shell of
/// neutral vortons that carry the vorticity born outside it; emitted once, or every `period` seconds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BallSpec {
    /// Centre (m). Default [0.5, 0.5, 0.5].
    pub center: Vec<f64>,
    /// Radius (m), > 0. Default 0.1.
    pub radius: f64,
    /// Density deviation from ambient (kg/m³). Default 0.
    pub density_deviation: f64,
    /// Temperature deviation from ambient (K). Default 0.
    pub temperature_deviation: f64,
    /// Vortons in the ball and its shell, 1 to 10⁷. Default 4000.
    pub vortons: i64,
    /// Thickness of the neutral shell as a fraction of the radius, in [0, 10]. Default 0.3.
    pub halo: f64,
    /// Tracers (dye) in the ball, 0 to 10⁷. Default 0.
    pub tracers: i64,
    /// Time between emissions (s), ≥ 0; 0 emits once, at `start`. Default 0.
    pub period: f64,
    /// First emission (s), ≥ 0. Default 0.
    pub start: f64,
    /// No emission after this time (s), ≥ start; `inf` for never. Default inf.
    pub stop: f64,
}

impl Default for BallSpec {
    fn default() -> Self {
        Self {
            center: vec![0.5, 0.5, 0.5],
            radius: 0.1,
            density_deviation: 0.0,
            temperature_deviation: 0.0,
            vortons: 4000,
            halo: 0.3,
            tracers: 0,
            period: 0.0,
            start: 0.0,
            stop: f64::INFINITY,
        }
    }
}

/// `[[vpm.block]]`: a box of fluid heavier, lighter or hotter than ambient, vortons on a jittered lattice.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BlockSpec {
    /// Lower corner (m). Default [0.25, 0.25, 0.25].
    pub min: Vec<f64>,
    /// Upper corner (m), above `min` on every axis. Default [0.75, 0.75, 0.75].
    pub max: Vec<f64>,
    /// Density deviation from ambient (kg/m³). Default 0.
    pub density_deviation: f64,
    /// Temperature deviation from ambient (K). Default 0.
    pub temperature_deviation: f64,
    /// Vortons, 1 to 10⁷. Default 4000.
    pub vortons: i64,
    /// Random displacement of each vorton as a fraction of the lattice spacing, in [0, 0.5]. Default 0.05.
    pub jitter: f64,
    /// Tracers (dye) in the box, 0 to 10⁷. Default 0.
    pub tracers: i64,
}

impl Default for BlockSpec {
    fn default() -> Self {
        Self {
            min: vec![0.25; 3],
            max: vec![0.75; 3],
            density_deviation: 0.0,
            temperature_deviation: 0.0,
            vortons: 4000,
            jitter: 0.05,
            tracers: 0,
        }
    }
}

/// `[[vpm.heat_source]]`: vortons inside the sphere warm at `rate` up to `temperature`, and it releases smoke
/// (tracers). Heat needs
/// vortons to carry it: surround the source with a `[[vpm.block]]` of neutral fluid.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HeatSourceSpec {
    /// Centre (m). Default [0.5, 0.1, 0.5].
    pub center: Vec<f64>,
    /// Radius (m), > 0. Default 0.05.
    pub radius: f64,
    /// Heating rate (K/s), ≥ 0. Default 100.
    pub rate: f64,
    /// Temperature deviation of the source (K): vortons inside warm towards it, never past it. Default 50.
    pub temperature: f64,
    /// Smoke: tracers released per second at random points of the sphere, 0 to 10⁶. Default 0.
    pub smoke: f64,
}

impl Default for HeatSourceSpec {
    fn default() -> Self {
        Self {
            center: vec![0.5, 0.1, 0.5],
            radius: 0.05,
            rate: 100.0,
            temperature: 50.0,
            smoke: 0.0,
        }
    }
}

/// `[[vpm.ring]]`: a vortex ring with a Gaussian core.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RingSpec {
    /// Centre (m). Default [0.5, 0.5, 0.5].
    pub center: Vec<f64>,
    /// Direction of travel (non-zero; normalised). Default [1, 0, 0].
    pub axis: Vec<f64>,
    /// Ring radius (m), > 0. Default 0.1.
    pub radius: f64,
    /// Core radius (m), in (0, radius]. Default 0.02.
    pub core_radius: f64,
    /// Circulation (m²/s), non-zero; positive travels along `axis`. Default 0.1.
    pub circulation: f64,
    /// Number of vortons, 3 to 10⁷. Default 2000.
    pub vortons: i64,
    /// All vortons on the core's centre line (a filament of blobs of radius core_radius). Default false.
    pub filament: bool,
    /// Tracers seeded around the core, 0 to 10⁷. Default 0.
    pub tracers: i64,
}

impl Default for RingSpec {
    fn default() -> Self {
        Self {
            center: vec![0.5, 0.5, 0.5],
            axis: vec![1.0, 0.0, 0.0],
            radius: 0.1,
            core_radius: 0.02,
            circulation: 0.1,
            vortons: 2000,
            filament: false,
            tracers: 0,
        }
    }
}

/// `[[vpm.tube]]`: a straight vortex tube (open ends), optionally wiggled.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TubeSpec {
    /// Centre (m). Default [0.5, 0.5, 0.5].
    pub center: Vec<f64>,
    /// Direction of the vorticity (non-zero). Default [0, 0, 1].
    pub axis: Vec<f64>,
    /// Length (m), > 0. Default 0.6.
    pub length: f64,
    /// Core radius (m), > 0. Default 0.03.
    pub core_radius: f64,
    /// Circulation (m²/s), non-zero. Default 0.1.
    pub circulation: f64,
    /// Number of vortons, 2 to 10⁷. Default 3000.
    pub vortons: i64,
    /// Amplitude of a two-wavelength sine displacement of the centre line (m), ≥ 0. Default 0.
    pub wiggle: f64,
    /// Tracers seeded around the core, 0 to 10⁷. Default 0.
    pub tracers: i64,
}

impl Default for TubeSpec {
    fn default() -> Self {
        Self {
            center: vec![0.5, 0.5, 0.5],
            axis: vec![0.0, 0.0, 1.0],
            length: 0.6,
            core_radius: 0.03,
            circulation: 0.1,
            vortons: 3000,
            wiggle: 0.0,
            tracers: 0,
        }
    }
}

/// `[[vpm.sheet]]`: a square shear layer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SheetSpec {
    /// Centre (m). Default [0.5, 0.5, 0.5].
    pub center: Vec<f64>,
    /// Normal of the sheet (non-zero). Default [0, 1, 0].
    pub normal: Vec<f64>,
    /// Velocity jump across the sheet (m/s), its in-plane part is used. Default [0.1, 0, 0].
    pub velocity_jump: Vec<f64>,
    /// Edge length (m), > 0. Default 0.5.
    pub size: f64,
    /// Vortons per edge, 1 to 3000. Default 40.
    pub vortons_per_edge: i64,
}

impl Default for SheetSpec {
    fn default() -> Self {
        Self {
            center: vec![0.5, 0.5, 0.5],
            normal: vec![0.0, 1.0, 0.0],
            velocity_jump: vec![0.1, 0.0, 0.0],
            size: 0.5,
            vortons_per_edge: 40,
        }
    }
}

/// `[[vpm.noise]]`: random vortons in a box.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NoiseSpec {
    /// Lower corner (m). Default [0.25, 0.25, 0.25].
    pub min: Vec<f64>,
    /// Upper corner (m), above `min` on every axis. Default [0.75, 0.75, 0.75].
    pub max: Vec<f64>,
    /// Largest vorticity component (1/s), ≥ 0. Default 1.
    pub amplitude: f64,
    /// Number of vortons, 1 to 10⁷. Default 1000.
    pub vortons: i64,
}

impl Default for NoiseSpec {
    fn default() -> Self {
        Self {
            min: vec![0.25; 3],
            max: vec![0.75; 3],
            amplitude: 1.0,
            vortons: 1000,
        }
    }
}

/// `[[vpm.jet]]`: a nozzle that emits a vortex ring every `period` seconds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct JetSpec {
    /// Nozzle centre (m). Default [0.1, 0.5, 0.5].
    pub center: Vec<f64>,
    /// Direction of the jet (non-zero). Default [1, 0, 0].
    pub axis: Vec<f64>,
    /// Radius of the emitted rings (m), > 0. Default 0.05.
    pub radius: f64,
    /// Core radius of the rings (m), in (0, radius]. Default 0.015.
    pub core_radius: f64,
    /// Circulation of each ring (m²/s), non-zero. Default 0.05.
    pub circulation: f64,
    /// Vortons per ring, 3 to 10⁶. Default 400.
    pub vortons: i64,
    /// Tracers per ring, 0 to 10⁶. Default 400.
    pub tracers: i64,
    /// Time between rings (s), > 0. Default 0.25.
    pub period: f64,
    /// First ring (s), ≥ 0. Default 0.
    pub start: f64,
    /// No rings after this time (s), > start; `inf` for never. Default inf.
    pub stop: f64,
}

impl Default for JetSpec {
    fn default() -> Self {
        Self {
            center: vec![0.1, 0.5, 0.5],
            axis: vec![1.0, 0.0, 0.0],
            radius: 0.05,
            core_radius: 0.015,
            circulation: 0.05,
            vortons: 400,
            tracers: 400,
            period: 0.25,
            start: 0.0,
            stop: f64::INFINITY,
        }
    }
}

/// `[[substance]]`: one fluid.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SubstanceSpec {
    /// Rest density (kg/m³ in 3D, kg/m² in 2D), > 0. Default 1000.
    pub rest_density: f64,
    /// Display colour, linear RGB, each in [0, 1]. Default [0.15, 0.45, 0.95].
    pub color: Vec<f64>,
}

impl Default for SubstanceSpec {
    fn default() -> Self {
        Self {
            rest_density: 1000.0,
            color: vec![0.15, 0.45, 0.95],
        }
    }
}

/// `[[region]]`: initial fluid.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Region {
    /// Where the fluid is (required).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shape: Option<ShapeSpec>,
    /// Substance index. Default 0.
    pub substance: i64,
    /// Density as a fraction of the substance's rest density, in (0, 10]. Default 1.
    pub density: f64,
    /// Initial velocity (m/s). Default zero.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub velocity: Option<Vec<f64>>,
}

impl Default for Region {
    fn default() -> Self {
        Self {
            shape: None,
            substance: 0,
            density: 1.0,
            velocity: None,
        }
    }
}

/// `[[obstacle]]`: a solid.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Obstacle {
    /// The solid's shape (required).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shape: Option<ShapeSpec>,
    /// Velocity of a moving obstacle (m/s); reint supports static obstacles only, so it must be zero.
    /// Default zero.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub velocity: Option<Vec<f64>>,
    /// Angular velocity (rad/s) about `center` (flip only): `[w]` about z in 2D, `[x, y, z]` in 3D. Default
    /// zero.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub angular_velocity: Option<Vec<f64>>,
    /// Centre of rotation at time 0 (m), moving with `velocity` (flip only). Default: the centre of the
    /// shape's bounds (the origin for unbounded shapes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub center: Option<Vec<f64>>,
}

/// `[[emitter]]`: a source of fluid that keeps its cells filled while active.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EmitterSpec {
    /// Where fluid enters (required).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shape: Option<ShapeSpec>,
    /// Substance index. Default 0.
    pub substance: i64,
    /// Velocity of the emitted fluid (m/s). Default zero.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub velocity: Option<Vec<f64>>,
    /// Density it fills to, as a fraction of rest density, in (0, 10]. Default 1.
    pub density: f64,
    /// Simulated time it starts (s), ≥ 0. Default 0.
    pub start: f64,
    /// Simulated time it stops (s), > start; `inf` for never. Default inf.
    pub stop: f64,
}

impl Default for EmitterSpec {
    fn default() -> Self {
        Self {
            shape: None,
            substance: 0,
            velocity: None,
            density: 1.0,
            start: 0.0,
            stop: f64::INFINITY,
        }
    }
}

/// `[[sink]]`: a drain.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SinkSpec {
    /// Where fluid leaves (required).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shape: Option<ShapeSpec>,
    /// Fraction of the mass inside removed per second (1/s), ≥ 0. Default 10.
    pub rate: f64,
}

impl Default for SinkSpec {
    fn default() -> Self {
        Self {
            shape: None,
            rate: 10.0,
        }
    }
}

/// Colour map of frames that show a field other than `density`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Colormap {
    /// "diverging" for signed fields, "viridis" otherwise.
    #[default]
    Auto,
    /// Perceptually uniform, dark blue to yellow.
    Viridis,
    /// Perceptually uniform, black to pale yellow.
    Inferno,
    /// Blue (negative) – white (zero) – red (positive), symmetric about zero.
    Diverging,
}

/// How a 3D scene becomes a 2D frame.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum View {
    /// Looking along −z through the whole depth (column density, or the density-weighted mean of a field).
    #[default]
    Projection,
    /// The cells of the middle z layer.
    Slice,
}

/// `[output]`: frames and arrays.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Output {
    /// Field the PNG frames show. "density" colours the fluid by substance over a dark background; other
    /// fields ("speed", "pressure", "vorticity", ...) use `colormap`. Default "density".
    pub field: String,
    /// Whether to write `particles_NNNNN.npy` and the field arrays per frame (`field_mass_NNNNN.npy` for
    /// reint, `field_pressure_NNNNN.npy` and `field_divergence_NNNNN.npy` for flip). Default false.
    pub npy: bool,
    /// "auto", "viridis", "inferno" or "diverging". Default "auto".
    pub colormap: Colormap,
    /// 3D only: "projection" or "slice". Default "projection".
    pub view: View,
    /// Side-by-side variants of the scene (vpm, with field "tracers" or "vorticity_magnitude"): each entry
    /// is one panel, a list of `key=value` overrides separated by `;` (as `--set` takes them) applied to
    /// this scene; the frames show the panels left to right, and `stats.jsonl` the first panel's
    /// diagnostics. Up to 4. Default none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub panels: Vec<String>,
}

impl Default for Output {
    fn default() -> Self {
        Self {
            field: "density".to_string(),
            npy: false,
            colormap: Colormap::Auto,
            view: View::Projection,
            panels: Vec::new(),
        }
    }
}

/// A box.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BoxSpec {
    /// Lower corner (m). In 2D the box extends through all z.
    pub min: Vec<f64>,
    /// Upper corner (m).
    pub max: Vec<f64>,
}

/// A ball (a disc in 2D).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SphereSpec {
    /// Centre (m).
    pub center: Vec<f64>,
    /// Radius (m), > 0.
    pub radius: f64,
}

/// A capped cylinder (a rectangle in 2D).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CylinderSpec {
    /// Middle of the axis (m).
    pub center: Vec<f64>,
    /// Direction of the axis (any length but zero).
    pub axis: Vec<f64>,
    /// Radius (m), > 0.
    pub radius: f64,
    /// Length along the axis (m), > 0.
    pub height: f64,
}

/// A half-space: everything behind the plane through `point` facing `normal`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlaneSpec {
    /// A point on the plane (m).
    pub point: Vec<f64>,
    /// Outward normal (any length but zero): the inside is where `(p − point)·normal ≤ 0`.
    pub normal: Vec<f64>,
}

/// Two shapes: the points of `base` outside `cut`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DifferenceSpec {
    /// The shape cut from.
    pub base: Box<ShapeSpec>,
    /// The shape removed.
    pub cut: Box<ShapeSpec>,
}

/// A shape scaled (about the origin), then rotated, then translated.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TransformSpec {
    /// The shape moved.
    pub shape: Box<ShapeSpec>,
    /// Rotation in degrees: 2D `[angle]` about z; 3D `[x, y, z]` about the axes, applied x first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rotate_deg: Option<Vec<f64>>,
    /// 3D: axis of an axis–angle rotation (default z); use with `angle_deg`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub axis: Option<Vec<f64>>,
    /// Angle of an axis–angle rotation (degrees, counter-clockwise about `axis`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub angle_deg: Option<f64>,
    /// Translation (m). Default zero.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub translate: Option<Vec<f64>>,
    /// Uniform scale factor, > 0. Default 1.
    #[serde(default = "one")]
    pub scale: f64,
}

fn one() -> f64 {
    1.0
}

/// A shape as written in a scene: `shape = { box = { min = [..], max = [..] } }`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ShapeSpec {
    /// `box = { min, max }`.
    Box(BoxSpec),
    /// `sphere = { center, radius }`.
    Sphere(SphereSpec),
    /// `cylinder = { center, axis, radius, height }`.
    Cylinder(CylinderSpec),
    /// `plane = { point, normal }`.
    Plane(PlaneSpec),
    /// `union = [ {shape}, {shape}, .. ]`.
    Union(Vec<ShapeSpec>),
    /// `difference = { base = {shape}, cut = {shape} }`.
    Difference(DifferenceSpec),
    /// `transform = { shape = {shape}, rotate_deg | axis + angle_deg, translate, scale }`.
    Transform(TransformSpec),
}

/// The shape kinds, for error messages.
pub const SHAPE_KINDS: &str = "box, sphere, cylinder, plane, union, difference, transform";

fn pad3(v: &[f64]) -> DVec3 {
    DVec3::new(
        v.first().copied().unwrap_or(0.0),
        v.get(1).copied().unwrap_or(0.0),
        v.get(2).copied().unwrap_or(0.0),
    )
}

impl ShapeSpec {
    /// Checks the shape's vectors have `dim` components and its sizes are positive.
    pub fn validate(&self, path: &KeyPath, dim: usize) -> Check {
        match self {
            ShapeSpec::Box(b) => {
                let p = path.key("box");
                vector(&p.key("min"), &b.min, dim)?;
                vector(&p.key("max"), &b.max, dim)?;
                for k in 0..dim {
                    if b.max[k] <= b.min[k] {
                        return Err(Invalid::new(
                            p.key("max"),
                            format!(
                                "max[{k}] = {} is not above min[{k}] = {}",
                                b.max[k], b.min[k]
                            ),
                            "max greater than min on every axis",
                        ));
                    }
                }
                Ok(())
            }
            ShapeSpec::Sphere(s) => {
                let p = path.key("sphere");
                vector(&p.key("center"), &s.center, dim)?;
                positive(&p.key("radius"), s.radius, "m")
            }
            ShapeSpec::Cylinder(c) => {
                let p = path.key("cylinder");
                vector(&p.key("center"), &c.center, dim)?;
                direction(&p.key("axis"), &c.axis, dim)?;
                positive(&p.key("radius"), c.radius, "m")?;
                positive(&p.key("height"), c.height, "m")
            }
            ShapeSpec::Plane(pl) => {
                let p = path.key("plane");
                vector(&p.key("point"), &pl.point, dim)?;
                direction(&p.key("normal"), &pl.normal, dim)
            }
            ShapeSpec::Union(shapes) => {
                let p = path.key("union");
                if shapes.is_empty() {
                    return Err(Invalid::new(
                        p,
                        "the union is empty",
                        format!("a list of shapes ({SHAPE_KINDS})"),
                    ));
                }
                shapes
                    .iter()
                    .enumerate()
                    .try_for_each(|(i, s)| s.validate(&p.index(i), dim))
            }
            ShapeSpec::Difference(d) => {
                let p = path.key("difference");
                d.base.validate(&p.key("base"), dim)?;
                d.cut.validate(&p.key("cut"), dim)
            }
            ShapeSpec::Transform(t) => {
                let p = path.key("transform");
                t.shape.validate(&p.key("shape"), dim)?;
                if let Some(r) = &t.rotate_deg {
                    let want = if dim == 2 { 1 } else { 3 };
                    let rp = p.key("rotate_deg");
                    if r.len() != want {
                        let allowed = if dim == 2 {
                            "[angle] (degrees about z)"
                        } else {
                            "[x, y, z] (degrees)"
                        };
                        return Err(Invalid::new(
                            rp,
                            format!("expected {want} number(s) (dim = {dim}), found {}", r.len()),
                            allowed,
                        ));
                    }
                    finite_all(&rp, r)?;
                    if t.angle_deg.is_some() || t.axis.is_some() {
                        return Err(Invalid::new(
                            rp,
                            "both rotate_deg and axis/angle_deg are given",
                            "either rotate_deg or axis with angle_deg",
                        ));
                    }
                }
                if let Some(axis) = &t.axis {
                    if dim == 2 {
                        return Err(Invalid::new(
                            p.key("axis"),
                            "2D rotations are about z and take no axis",
                            "angle_deg or rotate_deg = [angle]",
                        ));
                    }
                    direction(&p.key("axis"), axis, 3)?;
                    if t.angle_deg.is_none() {
                        return Err(Invalid::new(
                            p.key("axis"),
                            "axis without angle_deg",
                            "axis with angle_deg",
                        ));
                    }
                }
                if let Some(a) = t.angle_deg {
                    finite(&p.key("angle_deg"), a)?;
                }
                if let Some(tr) = &t.translate {
                    vector(&p.key("translate"), tr, dim)?;
                }
                positive(&p.key("scale"), t.scale, "factor")
            }
        }
    }

    /// The library shape. 2D vectors are padded with z = 0 and 2D boxes extend through all z. Call after
    /// [`ShapeSpec::validate`].
    pub fn to_shape(&self, dim: usize) -> Shape {
        match self {
            ShapeSpec::Box(b) if dim == 2 => {
                Shape::box2([b.min[0], b.min[1]], [b.max[0], b.max[1]])
            }
            ShapeSpec::Box(b) => Shape::Box {
                min: pad3(&b.min),
                max: pad3(&b.max),
            },
            ShapeSpec::Sphere(s) => Shape::Sphere {
                center: pad3(&s.center),
                radius: s.radius,
            },
            ShapeSpec::Cylinder(c) => Shape::Cylinder {
                center: pad3(&c.center),
                axis: pad3(&c.axis),
                radius: c.radius,
                height: c.height,
            },
            ShapeSpec::Plane(p) => Shape::HalfSpace {
                point: pad3(&p.point),
                normal: pad3(&p.normal),
            },
            ShapeSpec::Union(shapes) => {
                Shape::Union(shapes.iter().map(|s| s.to_shape(dim)).collect())
            }
            ShapeSpec::Difference(d) => Shape::Difference {
                base: Box::new(d.base.to_shape(dim)),
                cut: Box::new(d.cut.to_shape(dim)),
            },
            ShapeSpec::Transform(t) => {
                let rotation = match (&t.rotate_deg, t.angle_deg) {
                    (Some(r), _) if dim == 2 => DQuat::from_rotation_z(r[0].to_radians()),
                    (Some(r), _) => {
                        DQuat::from_rotation_z(r[2].to_radians())
                            * DQuat::from_rotation_y(r[1].to_radians())
                            * DQuat::from_rotation_x(r[0].to_radians())
                    }
                    (None, Some(a)) => {
                        let axis = t
                            .axis
                            .as_deref()
                            .map(pad3)
                            .unwrap_or(DVec3::Z)
                            .normalize_or(DVec3::Z);
                        DQuat::from_axis_angle(axis, a.to_radians())
                    }
                    (None, None) => DQuat::IDENTITY,
                };
                Shape::Transform {
                    shape: Box::new(t.shape.to_shape(dim)),
                    rotation,
                    translation: t.translate.as_deref().map(pad3).unwrap_or(DVec3::ZERO),
                    scale: t.scale,
                }
            }
        }
    }
}

fn finite(path: &KeyPath, x: f64) -> Check {
    if x.is_finite() {
        Ok(())
    } else {
        Err(Invalid::new(
            path.clone(),
            format!("{x} is not a finite number"),
            "a finite number",
        ))
    }
}

fn finite_all(path: &KeyPath, v: &[f64]) -> Check {
    v.iter()
        .enumerate()
        .try_for_each(|(i, &x)| finite(&path.index(i), x))
}

/// A position or velocity: `dim` finite numbers.
fn vector(path: &KeyPath, v: &[f64], dim: usize) -> Check {
    if v.len() != dim {
        return Err(Invalid::new(
            path.clone(),
            format!("expected {dim} numbers (dim = {dim}), found {}", v.len()),
            format!("a list of {dim} numbers"),
        ));
    }
    finite_all(path, v)
}

/// A direction: a vector that is not zero.
fn direction(path: &KeyPath, v: &[f64], dim: usize) -> Check {
    vector(path, v, dim)?;
    if v.iter().all(|&x| x == 0.0) {
        return Err(Invalid::new(
            path.clone(),
            "the direction is zero",
            "a non-zero vector",
        ));
    }
    Ok(())
}

fn positive(path: &KeyPath, x: f64, unit: &str) -> Check {
    if x.is_finite() && x > 0.0 {
        Ok(())
    } else {
        Err(Invalid::new(
            path.clone(),
            format!("{x} is not positive"),
            format!("a finite number > 0 ({unit})"),
        ))
    }
}

/// `lo < x ≤ hi` (`lo_open`) or `lo ≤ x ≤ hi`.
fn range(path: &KeyPath, x: f64, lo: f64, hi: f64, lo_open: bool) -> Check {
    let ok = x.is_finite() && (if lo_open { x > lo } else { x >= lo }) && x <= hi;
    if ok {
        Ok(())
    } else {
        let bracket = if lo_open { "(" } else { "[" };
        Err(Invalid::new(
            path.clone(),
            format!("{x} is out of range"),
            format!("{bracket}{lo}, {hi}]"),
        ))
    }
}

fn int_range(path: &KeyPath, x: i64, lo: i64, hi: i64) -> Check {
    if (lo..=hi).contains(&x) {
        Ok(())
    } else {
        Err(Invalid::new(
            path.clone(),
            format!("{x} is out of range"),
            format!("integers from {lo} to {hi}"),
        ))
    }
}

/// `min` and `max` corners of a 3D box (keys `min`, `max` under `path`), `max > min` on every axis.
fn box_corners(path: &KeyPath, min: &[f64], max: &[f64]) -> Check {
    vector(&path.key("min"), min, 3)?;
    vector(&path.key("max"), max, 3)?;
    for k in 0..3 {
        if max[k] <= min[k] {
            return Err(Invalid::new(
                path.key("max").index(k),
                format!("max {} is not above min {}", max[k], min[k]),
                "max > min on every axis",
            ));
        }
    }
    Ok(())
}

/// The `density_deviation` (kg/m³) and `temperature_deviation` (K) of a body of fluid under `path`.
fn deviations(path: &KeyPath, density: f64, temperature: f64) -> Check {
    range(&path.key("density_deviation"), density, -1e9, 1e9, false)?;
    range(
        &path.key("temperature_deviation"),
        temperature,
        -1e6,
        1e6,
        false,
    )
}

impl Scene {
    /// Dimension as a count (call after [`Scene::resolve`] has checked it).
    pub fn dim(&self) -> usize {
        if self.dim == 3 {
            3
        } else {
            2
        }
    }

    /// Cells per axis, the default where unset.
    pub fn resolution(&self) -> Vec<usize> {
        match &self.domain.resolution {
            Some(r) => r.iter().map(|&n| n.max(0) as usize).collect(),
            None => vec![128; self.dim()],
        }
    }

    /// Domain edge lengths (m), the default where unset (1 m along x, cubic cells).
    pub fn size(&self) -> Vec<f64> {
        match &self.domain.size {
            Some(s) => s.clone(),
            None => {
                let res = self.resolution();
                res.iter().map(|&n| n as f64 / res[0] as f64).collect()
            }
        }
    }

    /// Gravity (m/s²), the default where unset.
    pub fn gravity(&self) -> Vec<f64> {
        match &self.domain.gravity {
            Some(g) => g.clone(),
            None => {
                let mut g = vec![0.0; self.dim()];
                g[1] = -9.81;
                g
            }
        }
    }

    /// Edge length of a cell (m).
    pub fn cell_size(&self) -> f64 {
        self.size()[0] / self.resolution()[0] as f64
    }

    /// Substances, the default one where none are given.
    pub fn substances(&self) -> Vec<SubstanceSpec> {
        if self.substance.is_empty() {
            vec![SubstanceSpec::default()]
        } else {
            self.substance.clone()
        }
    }

    /// What the scene's method is and offers (its fields, stages, pictures), before it is built.
    pub fn describe(&self) -> Description {
        match self.method {
            Method::Reint => eddies::reint::describe(self.dim(), self.substances().len()),
            Method::Flip => eddies::flip::describe(self.dim()),
            Method::Vpm => eddies::vpm::describe(),
        }
    }

    /// What `output.field` accepts: the method's grid fields, and with pictures made of particles their
    /// `tracers` too.
    pub fn field_names(&self) -> Vec<String> {
        let d = self.describe();
        let particles = (d.picture == FrameSource::Particles).then_some(TRACERS);
        particles
            .into_iter()
            .chain(d.fields)
            .map(str::to_string)
            .collect()
    }

    /// Checks `dim` and fills in every default that depends on it, so that the scene serialises fully
    /// resolved.
    pub fn resolve(&mut self) -> Check {
        if self.dim != 2 && self.dim != 3 {
            return Err(Invalid::new(
                KeyPath::root().key("dim"),
                format!("{} is not a dimension", self.dim),
                "2, 3",
            ));
        }
        let dim = self.dim();
        // Size defaults from the resolution, so check the resolution's shape first.
        if let Some(r) = &self.domain.resolution {
            resolution(r, dim)?;
        }
        self.domain.resolution = Some(self.resolution().iter().map(|&n| n as i64).collect());
        self.domain.size = Some(self.size());
        self.domain.gravity = Some(self.gravity());
        self.substance = self.substances();
        if self.output.field == Output::default().field {
            self.output.field = self.describe().default_view.to_string();
        }
        let zero = || Some(vec![0.0; dim]);
        for r in &mut self.region {
            r.velocity = r.velocity.take().or_else(zero);
        }
        for o in &mut self.obstacle {
            o.velocity = o.velocity.take().or_else(zero);
            let spin = if dim == 2 { 1 } else { 3 };
            o.angular_velocity = o.angular_velocity.take().or_else(|| Some(vec![0.0; spin]));
            if o.center.is_none() {
                if let Some(shape) = o
                    .shape
                    .as_ref()
                    .filter(|s| s.validate(&KeyPath::root(), dim).is_ok())
                {
                    let (lo, hi) = shape.to_shape(dim).bounds();
                    let c = (lo + hi) * 0.5;
                    let c = if c.is_finite() { c } else { DVec3::ZERO };
                    o.center = Some(c.to_array()[..dim].to_vec());
                }
            }
        }
        for e in &mut self.emitter {
            e.velocity = e.velocity.take().or_else(zero);
        }
        Ok(())
    }

    /// Checks every value; the first problem found is returned. Call after [`Scene::resolve`].
    pub fn validate(&self) -> Check {
        let root = KeyPath::root();
        let dim = self.dim();

        // [domain]
        let d = root.key("domain");
        let res = self.resolution();
        let size = self.size();
        vector(&d.key("size"), &size, dim)?;
        for (k, &s) in size.iter().enumerate() {
            if s <= 0.0 {
                return Err(Invalid::new(
                    d.key("size").index(k),
                    format!("{s} is not positive"),
                    "edge lengths > 0 (m)",
                ));
            }
        }
        let h = size[0] / res[0] as f64;
        for k in 1..dim {
            let hk = size[k] / res[k] as f64;
            if ((hk - h) / h).abs() > 1e-9 {
                return Err(Invalid::new(
                    d.key("size"),
                    format!(
                        "cells are not cubes: size/resolution is {h} m along x but {hk} m along {}",
                        ["x", "y", "z"][k]
                    ),
                    "size proportional to resolution, e.g. size = [2.0, 1.0] with resolution = [256, 128]",
                ));
            }
        }
        vector(&d.key("gravity"), &self.gravity(), dim)?;

        // [time]
        let t = root.key("time");
        int_range(&t.key("frames"), self.time.frames, 1, MAX_FRAMES)?;
        positive(&t.key("fps"), self.time.fps, "frames per second")?;
        int_range(
            &t.key("steps_per_frame"),
            self.time.steps_per_frame,
            0,
            1_000_000,
        )?;
        range(&t.key("cfl"), self.time.cfl, 0.0, 1.0, true)?;

        // [reint], [vpm], [flip]: the library's checks, each key placed in its section.
        let section = |name: &str, check: eddies::check::Check| {
            check.map_err(|e| Invalid::from_library(root.key(name), e))
        };
        section("reint", self.reint.validate())?;
        if self.method == Method::Vpm {
            self.validate_vpm()?;
        }
        section("flip", self.flip.validate())?;

        // [[substance]]
        let subs = self.substances();
        if subs.len() > MAX_SUBSTANCES {
            return Err(Invalid::new(
                root.key("substance").index(MAX_SUBSTANCES),
                format!("{} substances given", subs.len()),
                format!("1 to {MAX_SUBSTANCES} substances"),
            ));
        }
        for (i, s) in self.substance.iter().enumerate() {
            let p = root.key("substance").index(i);
            positive(
                &p.key("rest_density"),
                s.rest_density,
                "kg/m³ in 3D, kg/m² in 2D",
            )?;
            if s.color.len() != 3 {
                return Err(Invalid::new(
                    p.key("color"),
                    format!("expected 3 numbers, found {}", s.color.len()),
                    "[r, g, b], each in [0, 1]",
                ));
            }
            for (k, &c) in s.color.iter().enumerate() {
                range(&p.key("color").index(k), c, 0.0, 1.0, false)?;
            }
        }
        let substance = |path: &KeyPath, k: i64| {
            if (0..subs.len() as i64).contains(&k) {
                Ok(())
            } else {
                Err(Invalid::new(
                    path.clone(),
                    format!("there is no substance {k}"),
                    format!(
                        "0 to {} (the [[substance]] tables, counted from 0)",
                        subs.len() - 1
                    ),
                ))
            }
        };
        let velocity = |path: &KeyPath, v: &Option<Vec<f64>>| match v {
            Some(v) => vector(path, v, dim),
            None => Ok(()),
        };

        // Regions, obstacles, emitters, sinks.
        for (i, reg) in self.region.iter().enumerate() {
            let p = root.key("region").index(i);
            shape(&p, &reg.shape, dim)?;
            substance(&p.key("substance"), reg.substance)?;
            range(
                &p.key("density"),
                reg.density,
                0.0,
                MAX_DENSITY_FRACTION,
                true,
            )?;
            velocity(&p.key("velocity"), &reg.velocity)?;
        }
        for (i, o) in self.obstacle.iter().enumerate() {
            let p = root.key("obstacle").index(i);
            shape(&p, &o.shape, dim)?;
            velocity(&p.key("velocity"), &o.velocity)?;
            if let Some(w) = &o.angular_velocity {
                let want = if dim == 2 { 1 } else { 3 };
                if w.len() != want {
                    return Err(Invalid::new(
                        p.key("angular_velocity"),
                        format!("expected {want} number(s) (dim = {dim}), found {}", w.len()),
                        if dim == 2 {
                            "[w] (rad/s about z)"
                        } else {
                            "[x, y, z] (rad/s)"
                        },
                    ));
                }
                finite_all(&p.key("angular_velocity"), w)?;
            }
            velocity(&p.key("center"), &o.center)?;
            let moving = o
                .velocity
                .iter()
                .chain(o.angular_velocity.iter())
                .flatten()
                .any(|&v| v != 0.0);
            if self.method != Method::Flip && moving {
                return Err(Invalid::new(
                    p.key("velocity"),
                    "moving obstacles are not supported by method \"reint\"",
                    "zero velocity",
                ));
            }
        }
        for (i, e) in self.emitter.iter().enumerate() {
            let p = root.key("emitter").index(i);
            shape(&p, &e.shape, dim)?;
            substance(&p.key("substance"), e.substance)?;
            velocity(&p.key("velocity"), &e.velocity)?;
            range(
                &p.key("density"),
                e.density,
                0.0,
                MAX_DENSITY_FRACTION,
                true,
            )?;
            if !(e.start.is_finite() && e.start >= 0.0) {
                return Err(Invalid::new(
                    p.key("start"),
                    format!("{} is out of range", e.start),
                    "a time ≥ 0 (s)",
                ));
            }
            if e.stop.is_nan() || e.stop <= e.start {
                return Err(Invalid::new(
                    p.key("stop"),
                    format!("stop = {} is not after start = {}", e.stop, e.start),
                    "a time after start (s), or inf",
                ));
            }
        }
        for (i, s) in self.sink.iter().enumerate() {
            let p = root.key("sink").index(i);
            shape(&p, &s.shape, dim)?;
            range(&p.key("rate"), s.rate, 0.0, 1e9, false)?;
        }

        // [output]
        let names = self.field_names();
        if !names.contains(&self.output.field) {
            return Err(Invalid::new(
                root.key("output").key("field"),
                format!(
                    "no field named \"{}\" in a {dim}D {} scene",
                    self.output.field,
                    self.method.name()
                ),
                names.join(", "),
            ));
        }
        if !self.output.panels.is_empty() {
            let key = root.key("output").key("panels");
            if self.method != Method::Vpm
                || !["tracers", "vorticity_magnitude"].contains(&self.output.field.as_str())
            {
                return Err(Invalid::new(
                    key,
                    "side-by-side panels show particles",
                    "panels with method = \"vpm\" and output.field = \"tracers\" or \"vorticity_magnitude\"",
                ));
            }
            if self.output.panels.len() > 4 {
                return Err(Invalid::new(
                    key,
                    format!("{} panels", self.output.panels.len()),
                    "at most 4 panels",
                ));
            }
        }
        Ok(())
    }
}

impl Scene {
    /// Checks `dim`, `[vpm]` and its distributions.
    fn validate_vpm(&self) -> Check {
        let root = KeyPath::root();
        if self.dim != 3 {
            return Err(Invalid::new(
                root.key("dim"),
                format!("method \"vpm\" is 3D only, dim = {}", self.dim),
                "3",
            ));
        }
        let v = &self.vpm;
        let p = root.key("vpm");
        v.params
            .validate()
            .map_err(|e| Invalid::from_library(p.clone(), e))?;
        let res = self.resolution();
        if v.params.velocity == VelocityMethod::Poisson && res.iter().any(|&n| n < 3) {
            return Err(Invalid::new(
                root.key("domain").key("resolution"),
                format!("{res:?} points per axis leave no interior for the Poisson solve"),
                "at least 3 points per axis with velocity = \"poisson\"",
            ));
        }
        if res.iter().any(|&n| n > 1024) {
            return Err(Invalid::new(
                root.key("domain").key("resolution"),
                format!("{res:?} points per axis for the vpm grid"),
                "at most 1024 per axis for vpm",
            ));
        }
        let nonzero = |path: &KeyPath, x: f64, unit: &str| {
            if x.is_finite() && x != 0.0 {
                Ok(())
            } else {
                Err(Invalid::new(
                    path.clone(),
                    format!("{x} is zero or not finite"),
                    format!("a finite non-zero number ({unit})"),
                ))
            }
        };
        for (i, r) in v.ring.iter().enumerate() {
            let q = p.key("ring").index(i);
            vector(&q.key("center"), &r.center, 3)?;
            direction(&q.key("axis"), &r.axis, 3)?;
            positive(&q.key("radius"), r.radius, "m")?;
            range(&q.key("core_radius"), r.core_radius, 0.0, r.radius, true)?;
            nonzero(&q.key("circulation"), r.circulation, "m²/s")?;
            int_range(&q.key("vortons"), r.vortons, 3, 10_000_000)?;
            int_range(&q.key("tracers"), r.tracers, 0, 10_000_000)?;
        }
        for (i, t) in v.tube.iter().enumerate() {
            let q = p.key("tube").index(i);
            vector(&q.key("center"), &t.center, 3)?;
            direction(&q.key("axis"), &t.axis, 3)?;
            positive(&q.key("length"), t.length, "m")?;
            positive(&q.key("core_radius"), t.core_radius, "m")?;
            nonzero(&q.key("circulation"), t.circulation, "m²/s")?;
            int_range(&q.key("vortons"), t.vortons, 2, 10_000_000)?;
            range(&q.key("wiggle"), t.wiggle, 0.0, 1e6, false)?;
            int_range(&q.key("tracers"), t.tracers, 0, 10_000_000)?;
        }
        for (i, s) in v.sheet.iter().enumerate() {
            let q = p.key("sheet").index(i);
            vector(&q.key("center"), &s.center, 3)?;
            direction(&q.key("normal"), &s.normal, 3)?;
            vector(&q.key("velocity_jump"), &s.velocity_jump, 3)?;
            positive(&q.key("size"), s.size, "m")?;
            int_range(&q.key("vortons_per_edge"), s.vortons_per_edge, 1, 3000)?;
        }
        for (i, n) in v.noise.iter().enumerate() {
            let q = p.key("noise").index(i);
            box_corners(&q, &n.min, &n.max)?;
            range(&q.key("amplitude"), n.amplitude, 0.0, 1e9, false)?;
            int_range(&q.key("vortons"), n.vortons, 1, 10_000_000)?;
        }
        for (i, j) in v.jet.iter().enumerate() {
            let q = p.key("jet").index(i);
            vector(&q.key("center"), &j.center, 3)?;
            direction(&q.key("axis"), &j.axis, 3)?;
            positive(&q.key("radius"), j.radius, "m")?;
            range(&q.key("core_radius"), j.core_radius, 0.0, j.radius, true)?;
            nonzero(&q.key("circulation"), j.circulation, "m²/s")?;
            int_range(&q.key("vortons"), j.vortons, 3, 1_000_000)?;
            int_range(&q.key("tracers"), j.tracers, 0, 1_000_000)?;
            positive(&q.key("period"), j.period, "s")?;
            range(&q.key("start"), j.start, 0.0, 1e12, false)?;
            if j.stop.is_nan() || j.stop <= j.start {
                return Err(Invalid::new(
                    q.key("stop"),
                    format!("{} is not after start {}", j.stop, j.start),
                    "a time > start (s), or inf",
                ));
            }
        }
        for (i, b) in v.ball.iter().enumerate() {
            let q = p.key("ball").index(i);
            vector(&q.key("center"), &b.center, 3)?;
            positive(&q.key("radius"), b.radius, "m")?;
            deviations(&q, b.density_deviation, b.temperature_deviation)?;
            int_range(&q.key("vortons"), b.vortons, 1, 10_000_000)?;
            range(&q.key("halo"), b.halo, 0.0, 10.0, false)?;
            int_range(&q.key("tracers"), b.tracers, 0, 10_000_000)?;
            range(&q.key("period"), b.period, 0.0, 1e12, false)?;
            range(&q.key("start"), b.start, 0.0, 1e12, false)?;
            if b.stop.is_nan() || b.stop < b.start {
                return Err(Invalid::new(
                    q.key("stop"),
                    format!("{} is before start {}", b.stop, b.start),
                    "a time ≥ start (s), or inf",
                ));
            }
        }
        for (i, b) in v.block.iter().enumerate() {
            let q = p.key("block").index(i);
            box_corners(&q, &b.min, &b.max)?;
            deviations(&q, b.density_deviation, b.temperature_deviation)?;
            int_range(&q.key("vortons"), b.vortons, 1, 10_000_000)?;
            range(&q.key("jitter"), b.jitter, 0.0, 0.5, false)?;
            int_range(&q.key("tracers"), b.tracers, 0, 10_000_000)?;
        }
        for (i, h) in v.heat_source.iter().enumerate() {
            let q = p.key("heat_source").index(i);
            vector(&q.key("center"), &h.center, 3)?;
            positive(&q.key("radius"), h.radius, "m")?;
            range(&q.key("rate"), h.rate, 0.0, 1e9, false)?;
            range(&q.key("temperature"), h.temperature, -1e6, 1e6, false)?;
            range(&q.key("smoke"), h.smoke, 0.0, 1e6, false)?;
        }
        if !self.region.is_empty() || !self.emitter.is_empty() || !self.sink.is_empty() {
            return Err(Invalid::new(
                root.key(if !self.region.is_empty() {
                    "region"
                } else if !self.emitter.is_empty() {
                    "emitter"
                } else {
                    "sink"
                }),
                "method \"vpm\" takes its initial state from [[vpm.ring]], [[vpm.tube]], [[vpm.sheet]], \
                 [[vpm.noise]], [[vpm.jet]], [[vpm.ball]], [[vpm.block]] and [[vpm.heat_source]]",
                "no [[region]], [[emitter]] or [[sink]] with method = \"vpm\"",
            ));
        }
        if !self.obstacle.is_empty() {
            return Err(Invalid::new(
                root.key("obstacle"),
                "obstacles are not supported by method \"vpm\" yet",
                "no [[obstacle]] with method = \"vpm\"",
            ));
        }
        Ok(())
    }
}

fn resolution(r: &[i64], dim: usize) -> Check {
    let p = KeyPath::root().key("domain").key("resolution");
    if r.len() != dim {
        return Err(Invalid::new(
            p,
            format!(
                "expected {dim} cell counts (dim = {dim}), found {}",
                r.len()
            ),
            format!("a list of {dim} integers from {MIN_RESOLUTION} to {MAX_RESOLUTION}"),
        ));
    }
    for (k, &n) in r.iter().enumerate() {
        if !(MIN_RESOLUTION..=MAX_RESOLUTION).contains(&n) {
            return Err(Invalid::new(
                p.index(k),
                format!("{n} cells is out of range"),
                format!("integers from {MIN_RESOLUTION} to {MAX_RESOLUTION}"),
            ));
        }
    }
    Ok(())
}

fn shape(parent: &KeyPath, s: &Option<ShapeSpec>, dim: usize) -> Check {
    let p = parent.key("shape");
    match s {
        Some(s) => s.validate(&p, dim),
        None => Err(Invalid::new(
            p,
            "missing",
            format!("a shape: {{ box = {{ min, max }} }}, or one of {SHAPE_KINDS}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Scene {
        let mut scene: Scene = toml::from_str(s).unwrap();
        scene.resolve().unwrap();
        scene
    }

    #[test]
    fn defaults_validate() {
        let s = parse("");
        s.validate().unwrap();
        assert_eq!(s.resolution(), vec![128, 128]);
        assert_eq!(s.gravity(), vec![0.0, -9.81]);
        assert_eq!(s.substance.len(), 1);
    }

    #[test]
    fn three_d_defaults_follow_dim() {
        let s = parse("dim = 3\n[domain]\nresolution = [64, 32, 16]");
        s.validate().unwrap();
        assert_eq!(s.size(), vec![1.0, 0.5, 0.25]);
        assert_eq!(s.gravity(), vec![0.0, -9.81, 0.0]);
    }

    #[test]
    fn non_cubic_cells_name_size() {
        let s = parse("[domain]\nsize = [1.0, 1.0]\nresolution = [64, 32]");
        let e = s.validate().unwrap_err();
        assert_eq!(e.path.to_string(), "domain.size");
    }

    #[test]
    fn bad_values_name_their_key() {
        let cases = [
            ("[reint]\ndiffusion_radius = 0.0", "reint.diffusion_radius"),
            ("[time]\nframes = 0", "time.frames"),
            ("[time]\ncfl = 1.5", "time.cfl"),
            ("[[region]]\nsubstance = 0", "region[0].shape"),
            ("[[region]]\nsubstance = 2\nshape = { sphere = { center = [0.5, 0.5], radius = 0.1 } }", "region[0].substance"),
            ("[[region]]\nshape = { sphere = { center = [0.5, 0.5, 0.5], radius = 0.1 } }", "region[0].shape.sphere.center"),
            ("[[region]]\nshape = { box = { min = [0.5, 0.5], max = [0.4, 0.9] } }", "region[0].shape.box.max"),
            ("[output]\nfield = \"vorticity_z\"", "output.field"),
            ("[[emitter]]\nshape = { sphere = { center = [0.5, 0.5], radius = 0.1 } }\nstart = 2.0\nstop = 1.0", "emitter[0].stop"),
        ];
        for (src, key) in cases {
            let e = parse(src).validate().unwrap_err();
            assert_eq!(e.path.to_string(), key, "{src}");
        }
    }

    #[test]
    fn bad_resolution_is_caught_by_resolve() {
        let mut s: Scene = toml::from_str("[domain]\nresolution = [64, -64]").unwrap();
        assert_eq!(
            s.resolve().unwrap_err().path.to_string(),
            "domain.resolution[1]"
        );
        let mut s: Scene = toml::from_str("dim = 4").unwrap();
        assert_eq!(s.resolve().unwrap_err().path.to_string(), "dim");
    }

    #[test]
    fn transform_rotates_a_2d_box() {
        let s = parse(
            "[[region]]\nshape = { transform = { shape = { box = { min = [-0.1, -0.01], max = [0.1, 0.01] } }, \
             rotate_deg = [90.0], translate = [0.5, 0.5] } }",
        );
        s.validate().unwrap();
        let shape = s.region[0].shape.as_ref().unwrap().to_shape(2);
        assert!(shape.contains(DVec3::new(0.5, 0.59, 0.0)));
        assert!(!shape.contains(DVec3::new(0.59, 0.5, 0.0)));
    }

    #[test]
    fn resolved_scene_round_trips() {
        let s = parse(
            "[[region]]\nshape = { union = [ { sphere = { center = [0.5, 0.5], radius = 0.1 } }, \
             { box = { min = [0.0, 0.0], max = [1.0, 0.1] } } ] }\n[[emitter]]\n\
             shape = { sphere = { center = [0.5, 0.9], radius = 0.05 } }",
        );
        let text = toml::to_string(&s).unwrap();
        let back: Scene = toml::from_str(&text).unwrap();
        assert_eq!(back, s);
    }
}
