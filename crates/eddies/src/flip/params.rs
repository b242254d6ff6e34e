//! Parameters of the PIC/FLIP/APIC liquid: the domain, the method's knobs, obstacles, emitters and sinks.

use crate::check::{self, Check, Invalid};
use crate::linsolve::PreconditionerKind;
use crate::shape::Shape;
pub use crate::sim::{Boundary, Sink};
use glam::{DQuat, DVec3};

/// How velocities go from the grid back to the particles (Eng; Zhu & Bridson 2005; Jiang et al. 2015).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "kebab-case"))]
pub enum Transfer {
    /// Particle-in-cell: particles take the interpolated grid velocity (stable, strongly dissipative).
    Pic,
    /// FLIP blended with PIC: particles add the grid's change of velocity, with a fraction
    /// [`FlipParams::pic_ratio`] of PIC mixed in (Zhu & Bridson 2005, §3.2).
    #[default]
    Flip,
    /// Affine particle-in-cell (Jiang et al. 2015): PIC plus a per-particle velocity gradient, which keeps
    /// rotation and angular momentum without FLIP's noise.
    Apic,
}

impl Transfer {
    /// The name used in scene files.
    pub fn name(self) -> &'static str {
        match self {
            Transfer::Pic => "pic",
            Transfer::Flip => "flip",
            Transfer::Apic => "apic",
        }
    }
}

/// The method's parameters: the `[flip]` section of a scene file, key for key (with the `serde` feature),
/// with their defaults and [`FlipParams::validate`] as the one statement of what each accepts.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields, default))]
pub struct FlipParams {
    /// Grid-to-particle transfer: "pic", "flip" (PIC/FLIP blend) or "apic". Default "flip".
    pub transfer: Transfer,
    /// Fraction of PIC in the PIC/FLIP blend, 0 to 1 (Eng and Bridson use 0.05). Used with
    /// [`Transfer::Flip`]. Default 0.05.
    pub pic_ratio: f64,
    /// Preconditioner of the pressure solve: "none", "jacobi", "ic0", "mic0", "incomplete-poisson" or
    /// "multigrid". Default "multigrid" (MGPCG).
    pub preconditioner: PreconditionerKind,
    /// Relative residual `‖b − A p‖ / ‖b‖` at which the pressure solve stops, in (0, 0.1]. Default 1e-6.
    pub tolerance: f64,
    /// Most PCG iterations of one pressure solve, 1 to 100000. Default 1000.
    pub max_iterations: usize,
    /// Liquid density ρ (kg/m³ in 3D, kg/m² in 2D); scales pressure and particle mass. Not a key of its
    /// own in scene files: the rest density of substance 0. Default 1000.
    #[cfg_attr(feature = "serde", serde(skip))]
    pub density: f64,
    /// Particles per cell per axis at seeding, 1 to 4 (2: the usual 2ᴰ per cell of Eng and Bridson).
    /// Default 2.
    pub seeds_per_axis: usize,
    /// Random displacement of seeded particles, as a fraction of their lattice spacing, 0 to 1 (0: a regular
    /// lattice, which aliases; 1: anywhere in their sub-cell). Default 1.
    pub jitter: f64,
    /// Reseeding band, lower end (particles per cell), 0 to 1000: fluid cells surrounded by fluid that hold
    /// fewer get new particles. 0 disables adding. Default 0.
    pub min_per_cell: usize,
    /// Reseeding band, upper end (particles per cell), 0 to 1000: cells holding more lose the excess. 0
    /// disables removal. Default 0.
    pub max_per_cell: usize,
    /// Layers of faces (cells) into the air that receive extrapolated velocities (Bridson, §4.4), 1 to 64.
    /// Default 4.
    pub extrapolation_layers: usize,
    /// Strength κ of the volume correction (dimensionless, 0 to 1; 0 turns it off). A fluid cell holding
    /// `n` particles, more than the seeding count `n₀`, is compressed by `n/n₀ − 1`; the projection then
    /// asks for the divergence `κ (n/n₀ − 1)/Δt` there instead of 0, which spreads the excess over the
    /// next step (a particle-count form of the density constraint of Kugelstadt et al. 2019, *Implicit
    /// Density Projection for Volume Conserving Liquids*). Without it a FLIP liquid loses about 10% of its
    /// volume to particle clumping in a 3 s dam break (docs/flip.md). Default 1.
    pub volume_correction: f64,
    /// Most cells a particle may travel in one substep, in (0, 10]: [`super::FlipSim`] splits a longer step
    /// into substeps (the CFL number of Eng's adaptive stepping). Default 1.
    pub substep_cfl: f64,
}

impl Default for FlipParams {
    fn default() -> Self {
        Self {
            transfer: Transfer::Flip,
            pic_ratio: 0.05,
            preconditioner: PreconditionerKind::Multigrid,
            tolerance: 1e-6,
            max_iterations: 1000,
            density: 1000.0,
            seeds_per_axis: 2,
            jitter: 1.0,
            min_per_cell: 0,
            max_per_cell: 0,
            extrapolation_layers: 4,
            volume_correction: 1.0,
            substep_cfl: 1.0,
        }
    }
}

impl FlipParams {
    /// Checks every value; the first one out of range is named by its key.
    pub fn validate(&self) -> Check {
        check::range("pic_ratio", self.pic_ratio, 0.0, 1.0, false)?;
        check::range("tolerance", self.tolerance, 0.0, 0.1, true)?;
        check::int_range("max_iterations", self.max_iterations as i128, 1, 100_000)?;
        check::int_range("seeds_per_axis", self.seeds_per_axis as i128, 1, 4)?;
        check::range("jitter", self.jitter, 0.0, 1.0, false)?;
        check::range("volume_correction", self.volume_correction, 0.0, 1.0, false)?;
        check::int_range("min_per_cell", self.min_per_cell as i128, 0, 1000)?;
        check::int_range("max_per_cell", self.max_per_cell as i128, 0, 1000)?;
        if self.max_per_cell != 0 && self.max_per_cell < self.min_per_cell {
            return Err(Invalid::new(
                "max_per_cell",
                format!(
                    "{} is below min_per_cell = {}",
                    self.max_per_cell, self.min_per_cell
                ),
                "0 (off) or at least min_per_cell",
            ));
        }
        check::int_range(
            "extrapolation_layers",
            self.extrapolation_layers as i128,
            1,
            64,
        )?;
        check::range("substep_cfl", self.substep_cfl, 0.0, 10.0, true)?;
        check::positive("density", self.density, "kg/m^D")
    }
}

/// Everything needed to build a [`super::FlipSim`].
#[derive(Clone, Debug, PartialEq)]
pub struct FlipConfig<const D: usize> {
    /// Cells per axis (x first).
    pub resolution: [usize; D],
    /// Edge length of a cell (m); the domain's lower corner is the origin.
    pub cell_size: f64,
    /// Domain faces.
    pub boundary: Boundary,
    /// Gravity (m/s²); y is up.
    pub gravity: [f64; D],
    /// Method parameters.
    pub params: FlipParams,
    /// Seed of the jitter of seeded and reseeded particles.
    pub seed: u64,
}

impl<const D: usize> Default for FlipConfig<D> {
    fn default() -> Self {
        let mut gravity = [0.0; D];
        gravity[1] = -9.81;
        Self {
            resolution: [64; D],
            cell_size: 1.0 / 64.0,
            boundary: Boundary::Closed,
            gravity,
            params: FlipParams::default(),
            seed: 1,
        }
    }
}

/// A solid, static or moving rigidly with a prescribed velocity: it pushes the liquid through the boundary
/// condition `u·n = u_solid·n` on its faces (Bridson, §5.1).
#[derive(Clone, Debug, PartialEq)]
pub struct Obstacle<const D: usize> {
    /// The solid at time 0.
    pub shape: Shape,
    /// Linear velocity (m/s) of its reference point.
    pub velocity: [f64; D],
    /// Angular velocity (rad/s) about the reference point; 2D uses the z component only.
    pub angular_velocity: [f64; 3],
    /// Reference point (m) at time 0: the centre of rotation, moving with `velocity`.
    pub center: [f64; D],
}

impl<const D: usize> Obstacle<D> {
    /// A static obstacle.
    pub fn fixed(shape: Shape) -> Self {
        Self {
            shape,
            velocity: [0.0; D],
            angular_velocity: [0.0; 3],
            center: [0.0; D],
        }
    }

    /// Whether it moves.
    pub fn is_moving(&self) -> bool {
        self.velocity
            .iter()
            .chain(&self.angular_velocity)
            .any(|&v| v != 0.0)
    }

    fn center3(&self, t: f64) -> DVec3 {
        let mut c = DVec3::ZERO;
        for k in 0..D {
            c[k] = self.center[k] + self.velocity[k] * t;
        }
        c
    }

    fn omega(&self) -> DVec3 {
        if D == 2 {
            DVec3::new(0.0, 0.0, self.angular_velocity[2])
        } else {
            DVec3::from_array(self.angular_velocity)
        }
    }

    /// The solid at time `t` (s): rotated by `ω t` about its reference point, which has moved by `v t`.
    pub fn shape_at(&self, t: f64) -> Shape {
        if !self.is_moving() {
            return self.shape.clone();
        }
        let w = self.omega();
        let angle = w.length() * t;
        let rotation = if angle > 0.0 {
            DQuat::from_axis_angle(w.normalize(), angle)
        } else {
            DQuat::IDENTITY
        };
        let c0 = self.center3(0.0);
        let centred = Shape::Transform {
            shape: Box::new(self.shape.clone()),
            rotation: DQuat::IDENTITY,
            translation: -c0,
            scale: 1.0,
        };
        Shape::Transform {
            shape: Box::new(centred),
            rotation,
            translation: self.center3(t),
            scale: 1.0,
        }
    }

    /// Velocity (m/s) of the solid's material at `x` (m) and time `t` (s): `v + ω × (x − c(t))`.
    pub fn velocity_at(&self, x: [f64; D], t: f64) -> [f64; D] {
        let mut p = DVec3::ZERO;
        for k in 0..D {
            p[k] = x[k];
        }
        let v = self.omega().cross(p - self.center3(t));
        std::array::from_fn(|k| self.velocity[k] + v[k])
    }
}

/// A source: while active, the cells whose centres lie inside `shape` are kept filled with particles moving
/// at `velocity` (an inflow; the volume flux is `velocity` through the shape's cross-section).
#[derive(Clone, Debug, PartialEq)]
pub struct Inflow<const D: usize> {
    /// Where liquid enters.
    pub shape: Shape,
    /// Velocity of the emitted liquid (m/s).
    pub velocity: [f64; D],
    /// Simulated times (s) between which it runs.
    pub active: (f64, f64),
}
