//! Buoyancy: baroclinic generation of vorticity from density deviations (Gourlay part 8) and
//! thermal buoyancy through the Boussinesq density of temperature.
//!
//! The fluid's density is the ambient ρ₀ plus a deviation carried by the vortons; only the deviation has a
//! gradient. Taking the curl of the momentum equation gives the baroclinic term `(∇ρ × ∇p)/ρ²`; in the
//! Boussinesq approximation the pressure is hydrostatic, `∇p ≈ ρ₀ g`, and the density in the denominator is
//! the ambient one, so
//!
//! `Dω/Dt = (∇ρ × g) / ρ₀`.
//!
//! We store vorticity itself (not angular velocity ω/2, which carries part 8's factor ½). A stage:
//! 1. each vorton's density deviation is `ρ'ᵢ − ρ₀ β T'ᵢ` (its own deviation plus the thermal expansion of
//!    its temperature deviation T', β the expansion coefficient);
//! 2. the deviations times the vortons' volumes — masses — are splatted onto a grid fitted to the vortons by
//!    cloud-in-cell, whose weights sum to one: the grid holds exactly the vortons' deviation mass;
//! 3. the gradient by central differences, one-sided at the grid's faces;
//! 4. each vorton gains `Δt (∇ρ × g)/ρ₀` with ∇ρ interpolated at its position.
//!
//! The stage is skipped when gravity has no component across the vortons' extent (a flat layer normal to g
//! has no horizontal density gradient to turn).
//!
//! Stages 2 to 4 may run on a device ([`DensityGradientDevice`], the GPU backend's
//! `eddies_gpu::vpm::GpuBaroclinic`): the CPU gives it the masses and takes back ∇ρ at the vortons.

use std::sync::{Arc, Mutex};

use super::mollify::FittedGrid;
use super::params::VpmParams;
use super::state::Vortons;
use crate::par;
use glam::DVec3;

/// A device that takes the baroclinic stage's grid work in place of the CPU (the GPU backend).
pub trait DensityGradientDevice: Send {
    /// The density gradient (kg/m⁴) at each of the points `position` into `out`: the masses `mass[i]` (kg)
    /// at `position[i]` splatted onto `grid` by cloud-in-cell and divided by the cell volume, the gradient
    /// taken by central differences (one-sided at the faces) and sampled trilinearly, as
    /// [`Buoyancy::apply`] does. `Ok(false)` leaves the stage to the CPU (a device that cannot take it); the
    /// error says how the device failed.
    fn density_gradient(
        &mut self,
        grid: &FittedGrid,
        position: &[DVec3],
        mass: &[f64],
        out: &mut [DVec3],
    ) -> Result<bool, String>;
}

/// A [`DensityGradientDevice`] shared by the simulation's copies.
#[derive(Clone)]
pub struct SharedDensityGradientDevice(pub Arc<Mutex<dyn DensityGradientDevice>>);

impl std::fmt::Debug for SharedDensityGradientDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SharedDensityGradientDevice")
    }
}

/// Vortons per parallel chunk.
const CHUNK: usize = 1024;

/// The buoyancy stage's buffers, reused across steps.
#[derive(Clone, Debug)]
pub struct Buoyancy {
    /// The grid of the last stage.
    pub grid: FittedGrid,
    /// Density deviation at the grid points (kg/m³).
    pub density: Vec<f64>,
    /// Its gradient (kg/m⁴).
    pub gradient: Vec<[f64; 3]>,
    /// Where stages 2 to 4 run: a device (the GPU), or the CPU without one. After a stage on the device,
    /// [`density`](Self::density) and [`gradient`](Self::gradient) are empty.
    pub device: Option<SharedDensityGradientDevice>,
    /// How the device failed at the last stage, if it did (the stage then changed nothing).
    pub device_error: Option<String>,
    deviation: Vec<f64>,
    /// The masses and the gradient at the vortons, for the device.
    mass: Vec<f64>,
    at_vortons: Vec<DVec3>,
}

impl Default for Buoyancy {
    fn default() -> Self {
        Self {
            grid: FittedGrid {
                dims: [2, 2, 2],
                origin: [0.0; 3],
                spacing: 1.0,
            },
            density: Vec::new(),
            gradient: Vec::new(),
            device: None,
            device_error: None,
            deviation: Vec::new(),
            mass: Vec::new(),
            at_vortons: Vec::new(),
        }
    }
}

impl Buoyancy {
    /// Bytes held.
    pub fn bytes(&self) -> usize {
        (self.density.capacity() + self.deviation.capacity() + self.mass.capacity()) * 8
            + (self.gradient.capacity() + self.at_vortons.capacity()) * 24
    }

    /// Density deviation of each vorton (kg/m³): its own plus the Boussinesq expansion of its temperature.
    fn deviations(&mut self, v: &Vortons, params: &VpmParams) {
        let (rho0, beta) = (params.ambient_density, params.buoyancy.thermal_expansion);
        self.deviation.clear();
        self.deviation
            .extend((0..v.len()).map(|i| v.buoyant_density(i, rho0, beta)));
    }

    /// Splats the vortons' density deviations onto a grid fitted to them (resolution and margin of
    /// `params`), into [`density`](Self::density) (kg/m³). The grid's mass `Σ ρ h³` equals the vortons'
    /// `Σ ρ'ᵢ Vᵢ` up to rounding.
    pub fn splat_density(&mut self, v: &Vortons, params: &VpmParams) {
        self.deviations_and_grid(v, params);
        let h = self.grid.spacing;
        let inv = 1.0 / (h * h * h);
        let (dev, vol) = (&self.deviation, &v.volume);
        self.grid
            .splat(&v.position, |i| dev[i] * vol[i] * inv, &mut self.density);
    }

    /// The vortons' density deviations, and the grid fitted to them.
    fn deviations_and_grid(&mut self, v: &Vortons, params: &VpmParams) {
        self.deviations(v, params);
        self.grid = FittedGrid::fit(&[&v.position], params.grid_resolution, params.grid_margin);
    }

    /// The masses here, and stages 2 to 4 on the device into `at_vortons`: whether it took them (a failure
    /// is kept in `device_error`, and taken as done: the stage changes nothing).
    fn gradient_on_device(&mut self, v: &Vortons, params: &VpmParams) -> bool {
        let Some(device) = self.device.clone() else {
            return false;
        };
        self.deviations_and_grid(v, params);
        self.mass.clear();
        self.mass
            .extend(self.deviation.iter().zip(&v.volume).map(|(d, vol)| d * vol));
        self.at_vortons.resize(v.len(), DVec3::ZERO);
        let mut device = device.0.lock().unwrap_or_else(|p| p.into_inner());
        match device.density_gradient(&self.grid, &v.position, &self.mass, &mut self.at_vortons) {
            Ok(taken) => taken,
            Err(e) => {
                self.device_error = Some(e);
                true
            }
        }
    }

    /// Total deviation mass on the grid (kg).
    pub fn grid_mass(&self) -> f64 {
        let h = self.grid.spacing;
        let d = &self.density;
        par::sum(d.len(), |i| d[i]) * h * h * h
    }

    /// The baroclinic stage over `dt` seconds: adds `Δt (∇ρ × g)/ρ₀` to every vorton's vorticity. Returns
    /// whether anything was generated (false when switched off, without gravity across the vortons, or
    /// without density or temperature deviations).
    pub fn apply(&mut self, v: &mut Vortons, params: &VpmParams, dt: f64) -> bool {
        let b = &params.buoyancy;
        let g = DVec3::from_array(b.gravity);
        if !b.baroclinic || v.is_empty() || g == DVec3::ZERO {
            return false;
        }
        let beta = b.thermal_expansion;
        if !(0..v.len()).any(|i| v.density[i] != 0.0 || (beta != 0.0 && v.temperature[i] != 0.0)) {
            return false;
        }
        // Extent of the vortons along gravity: none means no density gradient across it.
        let (lo, hi) = v.position.iter().fold(
            (DVec3::splat(f64::INFINITY), DVec3::splat(f64::NEG_INFINITY)),
            |(lo, hi), &p| (lo.min(p), hi.max(p)),
        );
        let gn = g.normalize();
        let along = v.position.iter().map(|p| p.dot(gn));
        let spread =
            along.clone().fold(f64::NEG_INFINITY, f64::max) - along.fold(f64::INFINITY, f64::min);
        if spread <= 1e-9 * (hi - lo).max_element() {
            return false;
        }
        let scale = dt / params.ambient_density;
        if self.gradient_on_device(v, params) {
            if self.device_error.is_some() {
                return false;
            }
            self.density.clear();
            self.gradient.clear();
            let grad = &self.at_vortons;
            let w = par::SharedSlice::new(&mut v.vorticity);
            par::for_each_chunk(grad.len(), CHUNK, |range| {
                // SAFETY: chunks are disjoint.
                let w = unsafe { w.slice_mut(range.clone()) };
                for (w, i) in w.iter_mut().zip(range) {
                    *w += grad[i].cross(g) * scale;
                }
            });
            return true;
        }
        self.splat_density(v, params);
        self.density_gradient();
        let grid = self.grid.grid_of(std::mem::take(&mut self.gradient));
        let positions = &v.position;
        let w = par::SharedSlice::new(&mut v.vorticity);
        par::for_each_chunk(positions.len(), CHUNK, |range| {
            // SAFETY: chunks are disjoint.
            let w = unsafe { w.slice_mut(range.clone()) };
            for (w, i) in w.iter_mut().zip(range) {
                let grad = DVec3::from_array(grid.sample(positions[i].to_array()));
                *w += grad.cross(g) * scale;
            }
        });
        self.gradient = grid.data;
        true
    }

    /// ∇ρ of [`density`](Self::density) by central differences (one-sided at the faces) into
    /// [`gradient`](Self::gradient).
    pub fn density_gradient(&mut self) {
        let g = self.grid;
        let d = &self.density;
        let mut data = std::mem::take(&mut self.gradient);
        data.resize(g.len(), [0.0; 3]);
        g.differences(|i| [d[i]], &mut data, |q| [q[0][0], q[1][0], q[2][0]]);
        self.gradient = data;
    }
}
