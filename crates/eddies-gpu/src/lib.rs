//! The GPU backend of eddies, on wgpu with WGSL compute shaders.
//!
//! [`Gpu`] is the device layer: it picks an adapter (the best one, or the one `EDDIES_GPU_ADAPTER` names),
//! opens a device, builds each kernel's pipeline once and reads results back in batches. Methods implement
//! the library's [`eddies::Simulation`] on top of it; today [`ReintGpu`], reintegration tracking in 2D and 3D.
//! [`vpm::DirectSum`] evaluates the vortex particle method's Biot–Savart sum on the GPU, and
//! [`vpm::GpuDirect`] hands it to the CPU simulation's velocity stage. [`pressure::GpuPoisson`] runs the
//! pressure solve of PIC/FLIP (preconditioned conjugate gradients, MGPCG included) for the CPU simulation.
//!
//! Kernels use no float atomics and fix the order of every sum: a run repeats bit for bit on one device.
//! Without a usable adapter [`Gpu::new`] says what it looked for; [`adapters`] lists what this machine has.

mod device;
pub mod flip;
pub mod pressure;
pub mod reint;
mod sort;
pub mod vpm;

pub use device::{
    adapters, device_or_skip, dispatch, groups, validate_wgsl, AdapterSummary, Bindable,
    BufferRange, Gpu, GpuError, Scratch, ADAPTER_VAR, PROFILE_VAR, REQUIRE_VAR,
};
pub use reint::ReintGpu;
