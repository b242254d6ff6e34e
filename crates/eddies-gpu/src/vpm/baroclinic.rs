//! The baroclinic stage's grid work on the GPU ([`eddies::vpm::buoyancy::DensityGradientDevice`]): the
//! vortons' density deviation masses splatted onto the fitted grid by the splat's kernels ([`GpuSplat`],
//! the mass as the first of its three components), and the density's gradient sampled at the vortons
//! (`baroclinic.wgsl`), the splatted grid and the vortons' stencils staying on the device between the two.
//! Only ∇ρ at the vortons comes back; the CPU adds `Δt (∇ρ × g)/ρ₀` to their vorticity.
//!
//! The splat sums in f32 (as for the vorticity); the gradient's differences and blends are in f64, each
//! vorton one thread's, so a stage repeats bit for bit on one device. A device without double precision
//! leaves the stage to the CPU.

use std::sync::{Arc, Mutex};

use eddies::vpm::buoyancy::{DensityGradientDevice, SharedDensityGradientDevice};
use eddies::vpm::mollify::FittedGrid;
use glam::DVec3;
use rayon::prelude::*;

use super::sampling::{self, SamplingUniform};
use super::{held, sized_all, taken, GpuSplat};
use crate::device::{copy_bytes, fold_groups, Gpu, GpuError};
use crate::sort::WG;

/// The kernel's WGSL, after the sampling's prelude.
pub(crate) const SOURCE: &str = include_str!("baroclinic.wgsl");

/// The baroclinic stage's grid work on the GPU; its buffers grow to the largest grid and vorton count and
/// are reused.
pub struct GpuBaroclinic {
    gpu: Arc<Gpu>,
    splat: GpuSplat,
    params: wgpu::Buffer,
    /// ∇ρ at the vortons.
    gradient: [Option<wgpu::Buffer>; 1],
    /// ∇ρ as read back, reused.
    values: Vec<f32>,
}

impl GpuBaroclinic {
    /// The stage on `gpu`.
    pub fn new(gpu: Arc<Gpu>) -> Self {
        let params = gpu.uniform::<SamplingUniform>("baroclinic params");
        Self {
            splat: GpuSplat::new(gpu.clone()),
            gpu,
            params,
            gradient: Default::default(),
            values: Vec::new(),
        }
    }

    /// As the simulation holds it.
    pub fn shared(gpu: Arc<Gpu>) -> SharedDensityGradientDevice {
        SharedDensityGradientDevice(Arc::new(Mutex::new(Self::new(gpu))))
    }

    /// Device memory held (bytes), the splat's included.
    pub fn bytes(&self) -> u64 {
        held(&self.gradient, &self.params) + self.splat.bytes()
    }

    /// ∇ρ (kg/m⁴) at `position` into `out`, from the masses `mass` (kg) there
    /// ([`DensityGradientDevice::density_gradient`]).
    ///
    /// # Errors
    /// [`GpuError::Limit`] as the splat's and the sampling's; the device's own failures.
    pub fn density_gradient(
        &mut self,
        grid: &FittedGrid,
        position: &[DVec3],
        mass: &[f64],
        out: &mut [DVec3],
    ) -> Result<(), GpuError> {
        assert_eq!(position.len(), mass.len(), "a mass per vorton");
        assert_eq!(position.len(), out.len(), "a gradient per vorton");
        let gpu = self.gpu.clone();
        let n = position.len() as u64;
        sampling::check(&gpu, grid, n)?;
        let [b] = sized_all(
            &gpu,
            "the baroclinic stage's vortons",
            &mut self.gradient,
            &["baroclinic gradient"],
            &[12 * n],
        )?
        .try_into()
        .expect("one buffer");
        let Some(kept) = self
            .splat
            .splat_kept(grid, position, |i| DVec3::new(mass[i], 0.0, 0.0))?
        else {
            return Ok(());
        };
        gpu.write(&self.params, &[SamplingUniform::new(grid, n, n)]);
        let key = "vpm baroclinic gradient";
        let pipeline = gpu.pipeline(key, &sampling::prelude(), SOURCE)?;
        let per_axis = gpu.limits().max_compute_workgroups_per_dimension;
        let launch = gpu.launch_args(
            key,
            pipeline,
            &[&self.params, &kept.vortons, &kept.grid, &b],
            fold_groups(n.div_ceil(WG), per_axis),
        )?;
        gpu.submit_launches(key, |_| {}, [&launch]);
        let values = &mut self.values;
        values.resize(3 * n as usize, 0.0);
        gpu.read_into(&[(&b, 0, 12 * n)], |_, bytes| {
            copy_bytes(bytemuck::cast_slice_mut(values), bytes)
        })?;
        out.par_iter_mut()
            .zip(values.par_chunks_exact(3))
            .with_min_len(1024)
            .for_each(|(o, g)| *o = DVec3::new(g[0] as f64, g[1] as f64, g[2] as f64));
        Ok(())
    }
}

impl DensityGradientDevice for GpuBaroclinic {
    fn density_gradient(
        &mut self,
        grid: &FittedGrid,
        position: &[DVec3],
        mass: &[f64],
        out: &mut [DVec3],
    ) -> Result<bool, String> {
        // No double precision, or beyond the device's indices or bindings: the CPU takes the stage.
        taken(GpuBaroclinic::density_gradient(self, grid, position, mass, out).map(|()| true))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::validate_wgsl;

    /// The kernel parses and validates without a GPU.
    #[test]
    fn the_kernel_compiles_without_a_gpu() {
        let code = format!("{}\n{SOURCE}", sampling::prelude());
        validate_wgsl(&code).unwrap_or_else(|e| panic!("{e}"));
    }
}
