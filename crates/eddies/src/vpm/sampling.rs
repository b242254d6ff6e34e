//! The grid techniques' last stage on a device: the velocity at the grid points (from the Poisson technique's
//! vector potential by its curl, or as the grid techniques of the integrals compute it), sampled at the
//! vortons and tracers with its gradient for stretching, in place of the CPU's
//! [`super::velocity::VelocitySolver`] loops (the GPU backend's `eddies_gpu::vpm::GpuSampling`).
//!
//! What a device computes is the CPU's, term for term: the curl `u = ∇ × A` and the velocity gradient by
//! [`FittedGrid::differences`] (central differences, one-sided at the faces), and both sampled with the
//! trilinear weights of [`FittedGrid::cic`]. A device's sums may round differently, so the two agree to its
//! precision, not bit for bit.

use std::sync::{Arc, Mutex};

use super::mollify::FittedGrid;
use glam::DVec3;

/// The grid values a [`GridDevice`] samples.
#[derive(Clone, Copy, Debug)]
pub enum GridField<'a> {
    /// The vector potential (m²/s) at each grid point, component-major (component `c` of point `i` at
    /// `c·n + i`, as [`super::poisson::PoissonVelocity`] keeps it): the device takes its curl first.
    Potential(&'a [f64]),
    /// The velocity (m/s) at each grid point, x fastest.
    Velocity(&'a [[f64; 3]]),
}

/// Where a [`GridDevice`] samples: the vortons, with the velocity gradient when `gradient`, and the tracers.
#[derive(Clone, Copy, Debug)]
pub struct Samples<'a> {
    /// Vorton positions (m).
    pub vortons: &'a [DVec3],
    /// Whether the velocity gradient at the vortons is wanted.
    pub gradient: bool,
    /// Tracer positions (m).
    pub tracers: &'a [DVec3],
}

/// What a [`GridDevice`] writes: one entry per vorton in `u` (and in `jac` with the gradient, row-major
/// `∂uᵢ/∂x_k`, else `jac` is empty) and one per tracer in `u_tracers`.
#[derive(Debug)]
pub struct Sampled<'a> {
    /// Velocity at the vortons (m/s).
    pub u: &'a mut [DVec3],
    /// Velocity gradient at the vortons (1/s).
    pub jac: &'a mut [[f64; 9]],
    /// Velocity at the tracers (m/s).
    pub u_tracers: &'a mut [DVec3],
}

/// A device that samples the grid's velocity at the vortons and tracers (the GPU backend).
pub trait GridDevice: Send {
    /// The velocity of `field` on `grid` at the points of `at` into `out` (see the module's text for what is
    /// computed). `Ok(false)` leaves the stage to the CPU (a device that cannot take it: no double
    /// precision, a buffer beyond its limits); the error says how the device failed.
    fn sample(
        &mut self,
        grid: &FittedGrid,
        field: GridField,
        at: Samples,
        out: Sampled,
    ) -> Result<bool, String>;
}

/// A [`GridDevice`] shared by the simulation's copies.
#[derive(Clone)]
pub struct SharedGridDevice(pub Arc<Mutex<dyn GridDevice>>);

impl std::fmt::Debug for SharedGridDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SharedGridDevice")
    }
}

impl SharedGridDevice {
    /// [`GridDevice::sample`] on the shared device.
    pub fn sample(
        &self,
        grid: &FittedGrid,
        field: GridField,
        at: Samples,
        out: Sampled,
    ) -> Result<bool, String> {
        let mut device = self.0.lock().unwrap_or_else(|p| p.into_inner());
        device.sample(grid, field, at, out)
    }
}
