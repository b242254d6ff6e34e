//! Initial distributions: vortex ring, vortex tube, vortex sheet, noise, density and heat balls and blocks;
//! the jet emits rings, a puff emits balls, a heat source warms the vortons inside it.
//!
//! Every distribution is divergence-free where the method allows (rings, sheets, and tubes away from their
//! open ends) and lays its vortons out deterministically; random placements come from [`SplitMix64`] with the
//! distribution's seed. [`random_vortons`] is the random set (a thick ring in a uniform cloud) on which the
//! treecode's tests and the benchmarks measure the far field.

use super::state::{Tracers, Vortons};
use crate::rng::SplitMix64;
use glam::DVec3;

/// Blob radius over vorton spacing in the distributions with more than one vorton across the core. Blobs
/// must overlap for the particle field to converge to the continuous one (Beale & Majda 1985); with a ratio of
/// 1 an inviscid ring with stretching breaks up within a few core rotations, with 1.5 it stays smooth.
pub const OVERLAP: f64 = 1.5;

/// The golden angle (rad), for Vogel's spiral over a disk.
const GOLDEN_ANGLE: f64 = 2.399_963_229_728_653;

/// Two unit vectors that make a right-handed frame `(e1, e2, n)` with unit `n`.
pub fn frame(n: DVec3) -> (DVec3, DVec3) {
    let n = n.normalize();
    let helper = if n.x.abs() < 0.9 { DVec3::X } else { DVec3::Y };
    let e1 = helper.cross(n).normalize();
    (e1, n.cross(e1))
}

/// A vortex ring (Gourlay part 3's "vortex ring" initial condition).
#[derive(Clone, Debug, PartialEq)]
pub struct Ring {
    /// Centre (m).
    pub center: DVec3,
    /// Direction of travel (unit vector; normalised on use).
    pub axis: DVec3,
    /// Ring radius R (m).
    pub radius: f64,
    /// Core radius a (m).
    pub core_radius: f64,
    /// Circulation Γ (m²/s); positive travels along `axis`.
    pub circulation: f64,
    /// Number of vortons (about; rounded to whole layers).
    pub vortons: usize,
    /// Put all vortons on the core's centre line, as blobs of radius a (a vortex filament), instead of
    /// spreading them over the core's cross-section.
    pub filament: bool,
    /// Tracers seeded in the torus of radius 2a around the core.
    pub tracers: usize,
    /// Seed of the tracer placement.
    pub seed: u64,
}

impl Default for Ring {
    fn default() -> Self {
        Self {
            center: DVec3::ZERO,
            axis: DVec3::X,
            radius: 0.5,
            core_radius: 0.1,
            circulation: 1.0,
            vortons: 1000,
            filament: false,
            tracers: 0,
            seed: 1,
        }
    }
}

/// Points of Vogel's spiral: `k` offsets (radial, axial) spread evenly over a disk of radius `a`.
fn disk_points(k: usize, a: f64) -> Vec<(f64, f64)> {
    if k <= 1 {
        return vec![(0.0, 0.0)];
    }
    (0..k)
        .map(|j| {
            let r = a * ((j as f64 + 0.5) / k as f64).sqrt();
            let phi = j as f64 * GOLDEN_ANGLE;
            (r * phi.cos(), r * phi.sin())
        })
        .collect()
}

impl Ring {
    /// Adds the ring's vortons and tracers.
    ///
    /// The core has a Gaussian vorticity profile `ω ∝ exp(−ρ²/a²)` (ρ: distance from the core centre line, a:
    /// `core_radius`), the profile of Saffman's (1970) viscous ring. With N `vortons`, each of `m` stations
    /// around the ring carries `k` vortons spread over the disk ρ ≤ 2a (Vogel's spiral), `k` chosen so that the
    /// spacing across the core, `h = 2a √(π/k)`, matches the spacing `2πR/m` around it; each vorton's strength
    /// is its Gaussian share of Γ times the local arc length, along the ring's tangent (so the discrete ring is
    /// divergence-free), and its blob radius is σ = [`OVERLAP`] h, so that neighbours overlap. The discrete
    /// core is the Gaussian smoothed by the blobs, whose cross-section has second moment σ²: an effective
    /// Gaussian radius `√(a² + σ²)`, see [`Ring::effective_core_radius`]. With `k = 1` the ring is a single filament of blobs
    /// of radius a.
    pub fn add_to(&self, v: &mut Vortons, t: &mut Tracers) {
        let (r, a) = (self.radius, self.core_radius);
        let (k, m, h) = self.layout();
        let axis = self.axis.normalize();
        let (e1, e2) = frame(axis);
        let ds = 2.0 * std::f64::consts::PI * r / m as f64;
        let disk = disk_points(k, 2.0 * a);
        let weights: Vec<f64> = disk
            .iter()
            .map(|&(x, y)| (-(x * x + y * y) / (a * a)).exp())
            .collect();
        let total: f64 = weights.iter().sum();
        let cell_area = if k == 1 {
            std::f64::consts::PI * a * a
        } else {
            4.0 * std::f64::consts::PI * a * a / k as f64
        };
        for s in 0..m {
            let th = 2.0 * std::f64::consts::PI * (s as f64 + 0.5) / m as f64;
            let er = e1 * th.cos() + e2 * th.sin();
            let tangent = axis.cross(er);
            for (&(dr, dz), &w) in disk.iter().zip(&weights) {
                let local = (r + dr) / r;
                let alpha = tangent * (self.circulation * w / total * ds * local);
                let volume = cell_area * ds * local;
                v.push(
                    self.center + er * (r + dr) + axis * dz,
                    alpha / volume,
                    h,
                    volume,
                );
            }
        }
        let mut rng = SplitMix64::new(self.seed);
        for _ in 0..self.tracers {
            let th = rng.range(0.0, 2.0 * std::f64::consts::PI);
            let rho = 2.0 * a * rng.next_f64().sqrt();
            let phi = rng.range(0.0, 2.0 * std::f64::consts::PI);
            let er = e1 * th.cos() + e2 * th.sin();
            t.position
                .push(self.center + er * (r + rho * phi.cos()) + axis * (rho * phi.sin()));
        }
    }

    /// Vortons per cross-section k, stations around the ring m, and blob radius (m).
    pub fn layout(&self) -> (usize, usize, f64) {
        let (r, a) = (self.radius, self.core_radius);
        let n = self.vortons.max(3) as f64;
        // N = m k with 2πR/m = 2a √(π/k)  ⇒  k = (N a / (R √π))^{2/3}.
        let k = ((n * a / (r * std::f64::consts::PI.sqrt()))
            .powf(2.0 / 3.0)
            .round() as usize)
            .max(1);
        if k <= 2 || self.filament {
            return (1, self.vortons.max(3), a);
        }
        let m = (self.vortons / k).max(3);
        (
            k,
            m,
            OVERLAP * 2.0 * a * (std::f64::consts::PI / k as f64).sqrt(),
        )
    }

    /// Radius of the Gaussian core that has the discrete core's second moment: `√(a² + σ²)` with σ the blob
    /// radius (the high-order algebraic blob's cross-section has second moment h²), or the blob radius a for a
    /// filament.
    pub fn effective_core_radius(&self) -> f64 {
        let (k, _, h) = self.layout();
        if k == 1 {
            h
        } else {
            (self.core_radius * self.core_radius + h * h).sqrt()
        }
    }
}

/// A straight vortex tube with open ends, optionally with a sinusoidal wiggle of its centre line.
#[derive(Clone, Debug, PartialEq)]
pub struct Tube {
    /// Centre (m).
    pub center: DVec3,
    /// Direction of the vorticity (unit vector).
    pub axis: DVec3,
    /// Length (m).
    pub length: f64,
    /// Core radius (m).
    pub core_radius: f64,
    /// Circulation (m²/s).
    pub circulation: f64,
    /// Number of vortons (about).
    pub vortons: usize,
    /// Amplitude of the centre line's displacement (m), two wavelengths along the tube.
    pub wiggle: f64,
    /// Tracers seeded around the core (within 2 core radii).
    pub tracers: usize,
    /// Seed of the tracer placement.
    pub seed: u64,
}

impl Tube {
    /// Adds the tube's vortons and tracers.
    pub fn add_to(&self, v: &mut Vortons, t: &mut Tracers) {
        let (l, a) = (self.length, self.core_radius);
        let n = self.vortons.max(2) as f64;
        let h = (l * std::f64::consts::PI * a * a / n).cbrt();
        let m = ((l / h).round() as usize).max(2);
        let k = (self.vortons / m).max(1);
        let sigma = if k == 1 {
            a
        } else {
            OVERLAP * h.max(a / (k as f64).sqrt())
        };
        let axis = self.axis.normalize();
        let (e1, e2) = frame(axis);
        let ds = l / m as f64;
        let volume = std::f64::consts::PI * a * a * ds / k as f64;
        let line = |s: f64| {
            let w = 2.0 * std::f64::consts::TAU / l;
            (
                self.center + axis * s + e1 * (self.wiggle * (w * s).sin()),
                (axis + e1 * (self.wiggle * w * (w * s).cos())).normalize(),
            )
        };
        for s in 0..m {
            let z = -0.5 * l + (s as f64 + 0.5) * ds;
            let (p, tangent) = line(z);
            for &(dx, dy) in &disk_points(k, a) {
                let alpha = tangent * (self.circulation / k as f64 * ds);
                v.push(p + e1 * dx + e2 * dy, alpha / volume, sigma, volume);
            }
        }
        let mut rng = SplitMix64::new(self.seed);
        for _ in 0..self.tracers {
            let (p, _) = line(rng.range(-0.5 * l, 0.5 * l));
            let rho = 2.0 * a * rng.next_f64().sqrt();
            let phi = rng.range(0.0, std::f64::consts::TAU);
            t.position
                .push(p + e1 * (rho * phi.cos()) + e2 * (rho * phi.sin()));
        }
    }
}

/// A square vortex sheet: a shear layer across which the velocity jumps by `velocity_jump`.
#[derive(Clone, Debug, PartialEq)]
pub struct Sheet {
    /// Centre (m).
    pub center: DVec3,
    /// Normal of the sheet (unit vector).
    pub normal: DVec3,
    /// Velocity on the normal's side minus velocity on the other side (m/s), in the sheet's plane.
    pub velocity_jump: DVec3,
    /// Edge length of the square sheet (m).
    pub size: f64,
    /// Vortons per edge.
    pub vortons_per_edge: usize,
}

impl Sheet {
    /// Adds the sheet's vortons: one layer on a square lattice, vorticity `n × ΔU` per unit area.
    pub fn add_to(&self, v: &mut Vortons) {
        let n = self.normal.normalize();
        let jump = self.velocity_jump - n * self.velocity_jump.dot(n);
        let (e1, e2) = frame(n);
        let m = self.vortons_per_edge.max(1);
        let h = self.size / m as f64;
        let alpha = n.cross(jump) * (h * h);
        let volume = h * h * h;
        for j in 0..m {
            for i in 0..m {
                let p = self.center
                    + e1 * ((i as f64 + 0.5) * h - 0.5 * self.size)
                    + e2 * ((j as f64 + 0.5) * h - 0.5 * self.size);
                v.push(p, alpha / volume, h, volume);
            }
        }
    }
}

/// Random vortons in a box: uniform positions, vorticity components uniform in ±`amplitude`.
#[derive(Clone, Debug, PartialEq)]
pub struct Noise {
    /// Lower corner of the box (m).
    pub min: DVec3,
    /// Upper corner of the box (m).
    pub max: DVec3,
    /// Largest vorticity component (1/s).
    pub amplitude: f64,
    /// Number of vortons.
    pub vortons: usize,
    /// Seed.
    pub seed: u64,
}

impl Noise {
    /// Adds the noise's vortons, each of volume box/N and core radius its cube root.
    pub fn add_to(&self, v: &mut Vortons) {
        let n = self.vortons.max(1);
        let size = self.max - self.min;
        let volume = (size.x * size.y * size.z).abs() / n as f64;
        let sigma = volume.cbrt();
        let mut rng = SplitMix64::new(self.seed);
        for _ in 0..n {
            let p = self.min + size * DVec3::new(rng.next_f64(), rng.next_f64(), rng.next_f64());
            let w = DVec3::new(
                rng.range(-1.0, 1.0),
                rng.range(-1.0, 1.0),
                rng.range(-1.0, 1.0),
            ) * self.amplitude;
            v.push(p, w, sigma, volume);
        }
    }
}

/// A jet: a nozzle that emits a vortex ring every `period` seconds while active.
#[derive(Clone, Debug, PartialEq)]
pub struct Jet {
    /// The ring emitted each time (its centre is the nozzle).
    pub ring: Ring,
    /// Time between rings (s).
    pub period: f64,
    /// First emission (s).
    pub start: f64,
    /// No emission after this time (s).
    pub stop: f64,
}

/// Adds vortons on a cubic lattice of spacing `h` at the points `inside` accepts among the lattice of the box
/// `lo..hi`, each with zero vorticity, volume h³ and blob radius [`OVERLAP`] h, and `deviation(p)` as
/// (density, temperature) deviation; `jitter` moves each point by up to that fraction of h (seeded).
fn lattice(
    v: &mut Vortons,
    (lo, hi): (DVec3, DVec3),
    h: f64,
    jitter: f64,
    seed: u64,
    inside: impl Fn(DVec3) -> bool,
    deviation: impl Fn(DVec3) -> (f64, f64),
) {
    let n = ((hi - lo) / h).round().max(DVec3::ONE).as_uvec3();
    let mut rng = SplitMix64::new(seed);
    for k in 0..n.z {
        for j in 0..n.y {
            for i in 0..n.x {
                let c = lo + (DVec3::new(i as f64, j as f64, k as f64) + 0.5) * h;
                if !inside(c) {
                    continue;
                }
                let shake = DVec3::new(
                    rng.range(-1.0, 1.0),
                    rng.range(-1.0, 1.0),
                    rng.range(-1.0, 1.0),
                ) * (jitter * h);
                let p = c + shake;
                let (rho, temp) = deviation(c);
                v.push(p, DVec3::ZERO, OVERLAP * h, h * h * h);
                let last = v.len() - 1;
                v.density[last] = rho;
                v.temperature[last] = temp;
            }
        }
    }
}

/// A ball of fluid heavier or lighter (or hotter) than ambient, at rest: part 8's dye drop.
///
/// Baroclinic vorticity is born where the density changes, which after splatting to a grid is a band a few
/// cells wide around the ball's surface, half of it outside the ball. Vorticity can only live on vortons, so
/// the ball is wrapped in a `halo` of neutral vortons (zero deviation) that catch the outer half.
#[derive(Clone, Debug, PartialEq)]
pub struct Ball {
    /// Centre (m).
    pub center: DVec3,
    /// Radius (m).
    pub radius: f64,
    /// Density deviation inside (kg/m³).
    pub density_deviation: f64,
    /// Temperature deviation inside (K).
    pub temperature_deviation: f64,
    /// Number of vortons in the ball and its halo (about).
    pub vortons: usize,
    /// Thickness of the neutral shell around the ball, as a fraction of its radius.
    pub halo: f64,
    /// Tracers (dye) seeded uniformly in the ball.
    pub tracers: usize,
    /// Seed of the tracer placement.
    pub seed: u64,
}

impl Default for Ball {
    fn default() -> Self {
        Self {
            center: DVec3::ZERO,
            radius: 0.1,
            density_deviation: 10.0,
            temperature_deviation: 0.0,
            vortons: 4000,
            halo: 0.3,
            tracers: 0,
            seed: 1,
        }
    }
}

impl Ball {
    /// Lattice spacing (m): `vortons` lattice points fill the ball with its halo.
    pub fn spacing(&self) -> f64 {
        let outer = self.radius * (1.0 + self.halo.max(0.0));
        (4.0 / 3.0 * std::f64::consts::PI * outer.powi(3) / self.vortons.max(1) as f64).cbrt()
    }

    /// Adds the ball's vortons (zero vorticity) and tracers.
    pub fn add_to(&self, v: &mut Vortons, t: &mut Tracers) {
        let outer = self.radius * (1.0 + self.halo.max(0.0));
        let h = self.spacing();
        let reach = DVec3::splat(outer);
        let (c, r) = (self.center, self.radius);
        lattice(
            v,
            (c - reach, c + reach),
            h,
            0.0,
            self.seed,
            |p| (p - c).length() <= outer,
            |p| {
                if (p - c).length() <= r {
                    (self.density_deviation, self.temperature_deviation)
                } else {
                    (0.0, 0.0)
                }
            },
        );
        let mut rng = SplitMix64::new(self.seed);
        let mut added = 0;
        while added < self.tracers {
            let d = DVec3::new(
                rng.range(-1.0, 1.0),
                rng.range(-1.0, 1.0),
                rng.range(-1.0, 1.0),
            );
            if d.length_squared() <= 1.0 {
                t.position.push(c + d * r);
                added += 1;
            }
        }
    }
}

/// A box of fluid on a jittered lattice with a density and temperature deviation: layers for
/// Rayleigh–Taylor, a hot floor.
#[derive(Clone, Debug, PartialEq)]
pub struct Block {
    /// Lower corner (m).
    pub min: DVec3,
    /// Upper corner (m).
    pub max: DVec3,
    /// Density deviation (kg/m³).
    pub density_deviation: f64,
    /// Temperature deviation (K).
    pub temperature_deviation: f64,
    /// Number of vortons (about).
    pub vortons: usize,
    /// Random displacement of each vorton, as a fraction of the lattice spacing (breaks the symmetry that
    /// an instability grows from).
    pub jitter: f64,
    /// Tracers seeded uniformly in the box.
    pub tracers: usize,
    /// Seed of the jitter and tracers.
    pub seed: u64,
}

impl Block {
    /// Adds the block's vortons (zero vorticity) and tracers.
    pub fn add_to(&self, v: &mut Vortons, t: &mut Tracers) {
        let size = self.max - self.min;
        let h = (size.x * size.y * size.z / self.vortons.max(1) as f64).cbrt();
        lattice(
            v,
            (self.min, self.max),
            h,
            self.jitter,
            self.seed,
            |_| true,
            |_| (self.density_deviation, self.temperature_deviation),
        );
        let mut rng = SplitMix64::new(self.seed ^ 0x9e37_79b9);
        for _ in 0..self.tracers {
            t.position
                .push(self.min + size * DVec3::new(rng.next_f64(), rng.next_f64(), rng.next_f64()));
        }
    }
}

/// A heat source: vortons inside its sphere warm at `rate` kelvin per second up to the source's own
/// `temperature` (a hot plate, not an unbounded heater: the Boussinesq density ρ₀(1 − βT') must stay
/// positive), and it releases smoke (tracers) at random points of the sphere.
///
/// Heat needs fluid to carry it: surround the source with neutral vortons (a [`Block`] of zero deviation)
/// that the plume's inflow draws through it.
#[derive(Clone, Debug, PartialEq)]
pub struct HeatSource {
    /// Centre (m).
    pub center: DVec3,
    /// Radius (m).
    pub radius: f64,
    /// Heating rate (K/s), ≥ 0.
    pub rate: f64,
    /// Temperature deviation of the source (K): vortons inside warm towards it, never past it.
    pub temperature: f64,
    /// Tracers released per second.
    pub smoke: f64,
    /// Seed of the smoke's placement.
    pub seed: u64,
}

impl HeatSource {
    /// Warms the vortons inside over `dt` seconds towards the source's temperature, and releases the smoke due between `time` and
    /// `time + dt` (the count is the difference of `⌊smoke · t⌋` at both ends, so no fraction is lost).
    pub fn apply(&self, v: &mut Vortons, t: &mut Tracers, time: f64, dt: f64) {
        let r2 = self.radius * self.radius;
        for i in 0..v.len() {
            if (v.position[i] - self.center).length_squared() <= r2 {
                let t = &mut v.temperature[i];
                if *t < self.temperature {
                    *t = (*t + self.rate * dt).min(self.temperature);
                }
            }
        }
        let (from, to) = (
            (self.smoke * time).floor() as u64,
            (self.smoke * (time + dt)).floor() as u64,
        );
        let mut rng = SplitMix64::new(self.seed ^ from.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let mut added = from;
        while added < to {
            let d = DVec3::new(
                rng.range(-1.0, 1.0),
                rng.range(-1.0, 1.0),
                rng.range(-1.0, 1.0),
            );
            if d.length_squared() <= 1.0 {
                t.position.push(self.center + d * self.radius);
                added += 1;
            }
        }
    }
}

/// A ball emitted again every `period` seconds while active (a puffing source of heavy, light or hot fluid).
#[derive(Clone, Debug, PartialEq)]
pub struct Puff {
    /// The ball emitted each time.
    pub ball: Ball,
    /// Time between balls (s).
    pub period: f64,
    /// First emission (s).
    pub start: f64,
    /// No emission after this time (s).
    pub stop: f64,
}

/// `n` vortons, half on a thick ring and half uniform in a unit box, with random strengths and core radius
/// 0.01 (m): positions, strengths, radii. The treecode checks and the benchmarks use them.
pub fn random_vortons(n: usize, seed: u64) -> (Vec<DVec3>, Vec<DVec3>, Vec<f64>) {
    let mut rng = SplitMix64::new(seed);
    let mut p = Vec::with_capacity(n);
    let mut a = Vec::with_capacity(n);
    let mut s = Vec::with_capacity(n);
    for i in 0..n {
        let x = if i % 2 == 0 {
            // On a torus of radius 0.3 and core 0.05 about the box centre.
            let th = rng.range(0.0, std::f64::consts::TAU);
            let (rho, ph) = (
                0.05 * rng.next_f64().sqrt(),
                rng.range(0.0, std::f64::consts::TAU),
            );
            DVec3::new(0.5, 0.5, 0.5)
                + DVec3::new(th.cos(), th.sin(), 0.0) * (0.3 + rho * ph.cos())
                + DVec3::Z * (rho * ph.sin())
        } else {
            DVec3::new(rng.next_f64(), rng.next_f64(), rng.next_f64())
        };
        p.push(x);
        a.push(
            DVec3::new(
                rng.range(-1.0, 1.0),
                rng.range(-1.0, 1.0),
                rng.range(-1.0, 1.0),
            ) * 1e-4,
        );
        s.push(0.01);
    }
    (p, a, s)
}
