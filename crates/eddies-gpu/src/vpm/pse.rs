//! Particle strength exchange on the GPU (`pse.wgsl`): the diffusion of vorticity and of heat among
//! vortons, [`eddies::vpm::diffusion`]'s exchange with each vorton gathering from its 27 bins. The CPU bins
//! the vortons (its sort, as for its own exchange); the device takes every substep, the contents staying on
//! it between them, in f64 sums with f32 pair weights.

use std::sync::{Arc, Mutex};

use eddies::vpm::diffusion::{Exchange, ExchangeDevice, SharedExchangeDevice};

use super::sized_all;
use crate::device::{copy_bytes, fold_groups, Gpu, GpuError};

/// The kernel's WGSL, after the prelude.
pub(crate) const SOURCE: &str = include_str!("pse.wgsl");

/// Invocations per workgroup.
const WG: u32 = 128;

/// The prelude of the kernel for `width` numbers per vorton.
pub(crate) fn prelude(width: usize) -> String {
    format!("const WG: u32 = {WG}u;\nconst WIDTH: u32 = {width}u;\n")
}

/// The exchanges of `eddies::vpm::VpmSim::set_exchange_device` on the GPU; its buffers grow to the largest
/// set of vortons and are reused.
pub struct GpuExchange {
    gpu: Arc<Gpu>,
    params: wgpu::Buffer,
    buffers: [Option<wgpu::Buffer>; 7],
    /// Host copies of the sorted keys, the sorted vortons, each vorton's key and its position, σ² and
    /// volume, reused.
    keys: Vec<u32>,
    order: Vec<u32>,
    own: Vec<u32>,
    vortons: Vec<f64>,
}

impl GpuExchange {
    /// The device for a simulation, on `gpu`.
    pub fn new(gpu: Arc<Gpu>) -> Self {
        let params = gpu.uniform::<[u32; 4]>("pse params");
        Self {
            gpu,
            params,
            buffers: Default::default(),
            keys: Vec::new(),
            order: Vec::new(),
            own: Vec::new(),
            vortons: Vec::new(),
        }
    }

    /// As the simulation holds it.
    pub fn shared(gpu: Arc<Gpu>) -> SharedExchangeDevice {
        SharedExchangeDevice(Arc::new(Mutex::new(Self::new(gpu))))
    }

    /// The exchange's substeps on the device, or `Ok(false)` where it cannot take them: no double precision,
    /// or more bins or vortons than its 32-bit indices count.
    pub fn run(&mut self, pass: &Exchange<'_>, content: &mut [f64]) -> Result<bool, GpuError> {
        let n = pass.position.len();
        let bins = pass.dims.iter().try_fold(1u64, |a, &d| a.checked_mul(d));
        if !self.gpu.has_f64()
            || bins.is_none_or(|b| b >= u32::MAX as u64)
            || n >= u32::MAX as usize
        {
            return Ok(false);
        }
        if n == 0 || pass.steps == 0 {
            return Ok(true);
        }
        let width = pass.width;
        self.keys.clear();
        self.keys.extend(pass.sorted.iter().map(|&(k, _)| k as u32));
        self.order.clear();
        self.order.extend(pass.sorted.iter().map(|&(_, i)| i));
        self.own.resize(n, 0);
        for &(k, i) in pass.sorted {
            self.own[i as usize] = k as u32;
        }
        self.vortons.clear();
        self.vortons.extend((0..n).flat_map(|i| {
            let (p, r) = (pass.position[i], pass.radius[i]);
            [p.x, p.y, p.z, r * r, pass.volume[i]]
        }));
        let gpu = self.gpu.clone();
        let content_bytes = 8 * (width * n) as u64;
        let sizes = [
            4 * n as u64,
            4 * n as u64,
            4 * n as u64,
            40 * n as u64,
            8,
            content_bytes,
            content_bytes,
        ];
        const LABELS: [&str; 7] = [
            "pse keys",
            "pse order",
            "pse own",
            "pse vortons",
            "pse coefficient",
            "pse content",
            "pse content after",
        ];
        let b = sized_all(
            &gpu,
            "the exchange's vortons",
            &mut self.buffers,
            &LABELS,
            &sizes,
        )?;
        gpu.write(
            &self.params,
            &[[
                n as u32,
                pass.dims[0] as u32,
                pass.dims[1] as u32,
                pass.dims[2] as u32,
            ]],
        );
        gpu.write(&b[0], &self.keys);
        gpu.write(&b[1], &self.order);
        gpu.write(&b[2], &self.own);
        gpu.write(&b[3], &self.vortons);
        gpu.write(&b[4], &[pass.coef]);
        gpu.write(&b[5], content);
        let key = format!("vpm pse {width}");
        let pipeline = gpu.pipeline(&key, &prelude(width), SOURCE)?;
        let groups = fold_groups(
            (n as u64).div_ceil(WG as u64),
            gpu.limits().max_compute_workgroups_per_dimension,
        );
        // Substep s reads content s % 2 and writes the other.
        let launches = (0..pass.steps.min(2))
            .map(|s| {
                let (from, to) = (&b[5 + s % 2], &b[5 + (s + 1) % 2]);
                let buffers = [&self.params, &b[0], &b[1], &b[2], &b[3], &b[4], from, to];
                gpu.launch(&key, pipeline.clone(), &buffers, groups)
            })
            .collect::<Result<Vec<_>, _>>()?;
        gpu.submit_launches("vpm pse", |_| {}, (0..pass.steps).map(|s| &launches[s % 2]));
        gpu.finish()?;
        let last = &b[5 + pass.steps % 2];
        gpu.read_into(&[(last, 0, content_bytes)], |_, bytes| {
            copy_bytes(bytemuck::cast_slice_mut(content), bytes)
        })?;
        Ok(true)
    }
}

impl ExchangeDevice for GpuExchange {
    fn exchange(&mut self, pass: &Exchange<'_>, content: &mut [f64]) -> Result<bool, String> {
        self.run(pass, content).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::validate_wgsl;

    /// Both widths parse and validate without a GPU.
    #[test]
    fn the_kernel_compiles_without_a_gpu() {
        for width in [1, 3] {
            let code = format!("{}\n{SOURCE}", prelude(width));
            validate_wgsl(&code).unwrap_or_else(|e| panic!("width {width}: {e}"));
        }
    }
}
