//! The scene format: what a scene file (TOML) may contain, its defaults, and the checks on its values.
//!
//! The parameter sections `[reint]`, `[flip]` and `[vpm]`'s parameter keys are the library's own types
//! ([`ReintParams`], [`FlipParams`], [`VpmParams`]), with their defaults and checks; this module holds what is
//! the program's: the domain, the time line, shapes, sources, outputs and panels, one file per concept.
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

mod check;
mod output;
mod shapes;
mod sources;
mod vpm;

pub use output::{AnimationFormat, CameraSpec, Colormap, MeshFormat, Output, RendererChoice, View};
pub use shapes::{
    BoxSpec, CylinderSpec, DifferenceSpec, PlaneSpec, ShapeSpec, SphereSpec, TransformSpec,
    SHAPE_KINDS,
};
pub use sources::{EmitterSpec, ObstacleSpec, Region, SinkSpec, SubstanceSpec};
pub use vpm::{
    BallSpec, BlockSpec, HeatSourceSpec, JetSpec, NoiseSpec, RingSpec, SheetSpec, TubeSpec, Vpm,
};

use eddies::flip::FlipParams;
use eddies::linsolve::PreconditionerKind;
use eddies::reint::{ReintParams, MAX_SUBSTANCES};
use eddies::vpm::VpmParams;
use eddies::{Boundary, Description, FrameSource};
use glam::DVec3;
use serde::{Deserialize, Serialize};

use crate::keypath::KeyPath;
use check::{finite_all, int_range, positive, range, vector};

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
pub struct BadValue {
    /// The key the problem is with.
    pub path: KeyPath,
    /// What is wrong.
    pub what: String,
    /// What would be accepted.
    pub allowed: String,
}

impl BadValue {
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
pub type ValueCheck = Result<(), BadValue>;

/// What frames of a method whose pictures are made of particles show by default: its tracers (or its
/// particles where there are none), splatted and projected along z.
pub const TRACERS: &str = "tracers";

/// The views of a particle method's frames besides its grid fields: [`TRACERS`], and the vortons' |ω| V.
pub const PARTICLE_VIEWS: [&str; 2] = [TRACERS, "vorticity_magnitude"];

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

/// Where the simulation runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Backend {
    /// The CPU, on all its cores (every method).
    #[default]
    Cpu,
    /// The GPU through wgpu (Vulkan, Metal or DirectX 12): all of reintegration tracking; FLIP's particle
    /// passes and pressure solves and the vortex method's velocity and exchanges, the CPU running the rest
    /// (docs/gpu.md).
    Gpu,
}

impl Backend {
    /// The name used in scene files and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Cpu => "cpu",
            Backend::Gpu => "gpu",
        }
    }
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
    /// Where it runs: "cpu" (every method) or "gpu" (reint). Default "cpu".
    pub backend: Backend,
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
    pub obstacle: Vec<ObstacleSpec>,
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
            backend: Backend::Cpu,
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
    pub boundary: Boundary,
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
    pub fn resolve(&mut self) -> ValueCheck {
        if self.dim != 2 && self.dim != 3 {
            return Err(BadValue::new(
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
    pub fn validate(&self) -> ValueCheck {
        let root = KeyPath::root();
        let dim = self.dim();

        if self.backend == Backend::Gpu
            && self.method == Method::Flip
            && matches!(
                self.flip.preconditioner,
                PreconditionerKind::IncompleteCholesky
                    | PreconditionerKind::ModifiedIncompleteCholesky
            )
        {
            return Err(BadValue::new(
                root.key("flip").key("preconditioner"),
                format!(
                    "\"{}\" with backend \"gpu\": incomplete Cholesky is a sequential triangular solve, which \
                     the GPU does not run",
                    self.flip.preconditioner.name()
                ),
                "\"multigrid\", \"incomplete-poisson\", \"jacobi\" or \"none\" with backend = \"gpu\"",
            ));
        }
        if self.backend == Backend::Gpu
            && self.method == Method::Vpm
            && self.vpm.params.velocity.uses_tree()
        {
            return Err(BadValue::new(
                root.key("vpm").key("velocity"),
                format!(
                    "\"{}\" with backend \"gpu\": on the GPU, vortex particles take their velocity by direct \
                     summation or by the Poisson technique",
                    self.vpm.params.velocity.name()
                ),
                "\"direct-vortons\", \"direct-grid\" or \"poisson\" with backend = \"gpu\"",
            ));
        }

        // [domain]
        let d = root.key("domain");
        let res = self.resolution();
        let size = self.size();
        vector(&d.key("size"), &size, dim)?;
        for (k, &s) in size.iter().enumerate() {
            if s <= 0.0 {
                return Err(BadValue::new(
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
                return Err(BadValue::new(
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
            check.map_err(|e| BadValue::from_library(root.key(name), e))
        };
        section("reint", self.reint.validate())?;
        if self.method == Method::Vpm {
            self.validate_vpm()?;
        }
        section("flip", self.flip.validate())?;

        // [[substance]]
        let subs = self.substances();
        if subs.len() > MAX_SUBSTANCES {
            return Err(BadValue::new(
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
                return Err(BadValue::new(
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
                Err(BadValue::new(
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
                    return Err(BadValue::new(
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
                return Err(BadValue::new(
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
                return Err(BadValue::new(
                    p.key("start"),
                    format!("{} is out of range", e.start),
                    "a time ≥ 0 (s)",
                ));
            }
            if e.stop.is_nan() || e.stop <= e.start {
                return Err(BadValue::new(
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
            return Err(BadValue::new(
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
            if self.method != Method::Vpm || !PARTICLE_VIEWS.contains(&self.output.field.as_str()) {
                return Err(BadValue::new(
                    key,
                    "side-by-side panels show particles",
                    "panels with method = \"vpm\" and output.field = \"tracers\" or \"vorticity_magnitude\"",
                ));
            }
            if self.output.panels.len() > 4 {
                return Err(BadValue::new(
                    key,
                    format!("{} panels", self.output.panels.len()),
                    "at most 4 panels",
                ));
            }
        }
        self.check_exports(&root)
    }

    /// The keys of the files for other tools and of checkpoints.
    fn check_exports(&self, root: &KeyPath) -> ValueCheck {
        let out = root.key("output");
        let dim = self.dim();
        if self.output.mesh != MeshFormat::None {
            if self.method == Method::Vpm || dim != 3 {
                return Err(BadValue::new(
                    out.key("mesh"),
                    format!("a {dim}D {} scene has no liquid surface", self.method.name()),
                    "\"none\", or \"ply\" / \"obj\" with dim = 3 and method = \"flip\" or \"reint\"",
                ));
            }
            range(
                &out.key("mesh_level"),
                self.output.mesh_level,
                0.0,
                4.0,
                true,
            )?;
            int_range(
                &out.key("mesh_smoothing"),
                self.output.mesh_smoothing as i64,
                0,
                100,
            )?;
        }
        self.check_camera(&out.key("camera"))?;
        if self.output.vdb && dim != 3 {
            return Err(BadValue::new(
                out.key("vdb"),
                "OpenVDB holds 3D volumes",
                "false, or true with dim = 3",
            ));
        }
        if !self.output.panels.is_empty() && (self.output.vtk || self.output.ply || self.output.vdb)
        {
            return Err(BadValue::new(
                out.key("panels"),
                "side-by-side panels are pictures: their runs' files would overwrite one another",
                "no panels with output.vtk, output.ply or output.vdb",
            ));
        }
        int_range(
            &out.key("checkpoint_every"),
            self.output.checkpoint_every.min(i64::MAX as u64) as i64,
            0,
            1_000_000,
        )?;
        int_range(
            &out.key("checkpoint_keep"),
            self.output.checkpoint_keep.min(i64::MAX as u64) as i64,
            1,
            1_000_000,
        )
    }
}

impl Scene {
    /// `[output.camera]`: three coordinates each, a field of view that sees, a picture of sensible size,
    /// an eye apart from its target.
    fn check_camera(&self, key: &KeyPath) -> ValueCheck {
        let cam = &self.output.camera;
        for (name, point) in [("position", &cam.position), ("target", &cam.target)] {
            if let Some(p) = point {
                vector(&key.key(name), p, 3)?;
            }
        }
        range(&key.key("fov"), cam.fov, 1.0, 170.0, false)?;
        if cam.pixels.len() != 2 {
            return Err(BadValue::new(
                key.key("pixels"),
                format!("{} numbers", cam.pixels.len()),
                "[width, height] in pixels",
            ));
        }
        for (k, &n) in cam.pixels.iter().enumerate() {
            int_range(&key.key("pixels").index(k), n, 16, 8192)?;
        }
        if let (Some(p), Some(t)) = (&cam.position, &cam.target) {
            if p == t {
                return Err(BadValue::new(
                    key.key("position"),
                    "the camera stands on its target",
                    "a position apart from output.camera.target",
                ));
            }
        }
        Ok(())
    }
}

fn resolution(r: &[i64], dim: usize) -> ValueCheck {
    let p = KeyPath::root().key("domain").key("resolution");
    if r.len() != dim {
        return Err(BadValue::new(
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
            return Err(BadValue::new(
                p.index(k),
                format!("{n} cells is out of range"),
                format!("integers from {MIN_RESOLUTION} to {MAX_RESOLUTION}"),
            ));
        }
    }
    Ok(())
}

fn shape(parent: &KeyPath, s: &Option<ShapeSpec>, dim: usize) -> ValueCheck {
    let p = parent.key("shape");
    match s {
        Some(s) => s.validate(&p, dim),
        None => Err(BadValue::new(
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
