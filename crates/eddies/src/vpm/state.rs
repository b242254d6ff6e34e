//! The simulation state: vortons and tracers as structs of arrays (one `Vec` per attribute).

use glam::DVec3;

/// Vortex particles (Gourlay part 3): each carries a blob of vorticity.
///
/// The vorton's strength, its vorticity times its volume α = ω V (m³/s), is what the Biot–Savart sum uses;
/// advection moves the vorton and leaves α unchanged, stretching and diffusion change ω.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Vortons {
    /// Position (m).
    pub position: Vec<DVec3>,
    /// Vorticity ω (1/s).
    pub vorticity: Vec<DVec3>,
    /// Core radius σ of the blob (m).
    pub radius: Vec<f64>,
    /// Volume V (m³).
    pub volume: Vec<f64>,
    /// Density deviation from the ambient density (kg/m³), for baroclinic generation (part 8).
    pub density: Vec<f64>,
    /// Temperature deviation from ambient (K), for thermal buoyancy (part 10).
    pub temperature: Vec<f64>,
}

impl Vortons {
    /// Number of vortons.
    pub fn len(&self) -> usize {
        self.position.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.position.is_empty()
    }

    /// Appends a vorton with zero density and temperature deviation.
    pub fn push(&mut self, position: DVec3, vorticity: DVec3, radius: f64, volume: f64) {
        self.position.push(position);
        self.vorticity.push(vorticity);
        self.radius.push(radius);
        self.volume.push(volume);
        self.density.push(0.0);
        self.temperature.push(0.0);
    }

    /// Strength α = ω V of vorton `i` (m³/s).
    #[inline]
    pub fn strength(&self, i: usize) -> DVec3 {
        self.vorticity[i] * self.volume[i]
    }

    /// Density deviation of vorton `i` (kg/m³) in the Boussinesq sense: its own deviation plus the thermal
    /// expansion `−ρ₀ β T'` of its temperature deviation (ambient density `rho0`, expansion coefficient `beta`).
    #[inline]
    pub fn buoyant_density(&self, i: usize, rho0: f64, beta: f64) -> f64 {
        self.density[i] - rho0 * beta * self.temperature[i]
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.len() * (3 * 2 * 8 + 4 * 8)
    }
}

/// Passive tracer particles: advected by the same velocity as the vortons, used for dye.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Tracers {
    /// Position (m).
    pub position: Vec<DVec3>,
}

impl Tracers {
    /// Number of tracers.
    pub fn len(&self) -> usize {
        self.position.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.position.is_empty()
    }
}
