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
    /// The vector potential that the device holds already, taken from the Poisson device's solutions
    /// ([`GridDevice::potential_component`]) since the last [`GridDevice::begin_potential`] on this grid:
    /// the device takes its curl first.
    KeptPotential,
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

    /// The field from which [`potential_component`](Self::potential_component) reads: an id that a Poisson
    /// device writing its solutions there reports as its
    /// [`PoissonDevice::face_field`](crate::linsolve::PoissonDevice::face_field). `None` (the default):
    /// this device takes no potential from a solver.
    fn potential_field(&self) -> Option<u64> {
        None
    }

    /// Starts a vector potential on a grid of `dims` points kept on the device for
    /// [`GridField::KeptPotential`]: its outer layer's values are `boundary` (one per point in storage
    /// order: z, then y, then x slowest to fastest), its interior comes from
    /// [`potential_component`](Self::potential_component). `Ok(false)` (the default): not offered.
    fn begin_potential(&mut self, dims: [usize; 3], boundary: &[DVec3]) -> Result<bool, String> {
        let _ = (dims, boundary);
        Ok(false)
    }

    /// Takes component `component` of the potential's interior from the field, where the Poisson device
    /// left its last solution ([`PoissonDevice::solution_to_faces`](crate::linsolve::PoissonDevice::
    /// solution_to_faces): f64 in the padded layout of a box of the grid's shape), or zeros where `solved`
    /// is false (a component without a right-hand side).
    fn potential_component(&mut self, component: usize, solved: bool) -> Result<(), String> {
        let _ = (component, solved);
        Err("this grid device keeps no potential".into())
    }
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
