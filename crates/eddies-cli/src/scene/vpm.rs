//! `[vpm]`: the vortex particle method's parameters (the library's) and the scene's vortons, jets, balls and
//! heat sources, with their checks.

use eddies::vpm::{VelocityMethod, VpmParams};
use serde::{Deserialize, Serialize};

use super::check::{box_corners, deviations, direction, int_range, positive, range, vector};
use super::{BadValue, Scene, ValueCheck};
use crate::keypath::KeyPath;

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

impl Scene {
    /// Checks `dim`, `[vpm]` and its distributions.
    pub(super) fn validate_vpm(&self) -> ValueCheck {
        let root = KeyPath::root();
        if self.dim != 3 {
            return Err(BadValue::new(
                root.key("dim"),
                format!("method \"vpm\" is 3D only, dim = {}", self.dim),
                "3",
            ));
        }
        let v = &self.vpm;
        let p = root.key("vpm");
        v.params
            .validate()
            .map_err(|e| BadValue::from_library(p.clone(), e))?;
        let res = self.resolution();
        if v.params.velocity == VelocityMethod::Poisson && res.iter().any(|&n| n < 3) {
            return Err(BadValue::new(
                root.key("domain").key("resolution"),
                format!("{res:?} points per axis leave no interior for the Poisson solve"),
                "at least 3 points per axis with velocity = \"poisson\"",
            ));
        }
        if res.iter().any(|&n| n > 1024) {
            return Err(BadValue::new(
                root.key("domain").key("resolution"),
                format!("{res:?} points per axis for the vpm grid"),
                "at most 1024 per axis for vpm",
            ));
        }
        let nonzero = |path: &KeyPath, x: f64, unit: &str| {
            if x.is_finite() && x != 0.0 {
                Ok(())
            } else {
                Err(BadValue::new(
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
                return Err(BadValue::new(
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
                return Err(BadValue::new(
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
            return Err(BadValue::new(
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
            return Err(BadValue::new(
                root.key("obstacle"),
                "obstacles are not supported by method \"vpm\" yet",
                "no [[obstacle]] with method = \"vpm\"",
            ));
        }
        Ok(())
    }
}
