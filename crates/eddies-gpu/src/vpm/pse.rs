//! Particle strength exchange on the GPU (`pse.wgsl`): the diffusion of vorticity and of heat among
//! vortons, [`eddies::vpm::diffusion`]'s exchange with each vorton gathering from its 27 bins.
//!
//! The CPU gives each vorton its bin's key (its own binning, computed once a step); the device sorts the
//! vortons by bin with its counting sort (each bin's vortons in index order, the order of the CPU's sorted
//! list) and keeps the sorted vortons for every exchange of that binning: a step's exchanges of heat and of
//! vorticity upload and sort the vortons once. Each exchange takes every substep on the device, the
//! contents staying on it between them, in f64 sums with f32 pair weights.
//!
//! The substeps run in the bins' order: the vortons (once a binning) and the contents (once an exchange)
//! are moved into it (`pse_order.wgsl`) and the contents back after the last substep, so that neighbouring
//! invocations take neighbouring vortons, which read the same bins, in sequence (in the vortons' own order
//! each invocation read its 27 bins' vortons through the sorted list, scattered). Each sum keeps its order,
//! so the results are the same bits either way.

use std::sync::{Arc, Mutex};

use bytemuck::{Pod, Zeroable};
use eddies::vpm::diffusion::{Exchange, ExchangeDevice, SharedExchangeDevice};
use rayon::prelude::*;

use super::{dims4, held, sized_all, taken};
use crate::device::{copy_bytes, fold_groups, Bindable, Gpu, GpuError, Launch};
use crate::sort::{CountingSort, SortBuffers, SortHeader};

/// The kernel's WGSL, after the prelude.
pub(crate) const SOURCE: &str = include_str!("pse.wgsl");

/// The kernel that moves records into the bins' order and back, after its prelude ([`order_prelude`]).
const ORDER: &str = include_str!("pse_order.wgsl");

/// Invocations per workgroup.
const WG: u32 = 128;

/// Numbers per vorton of the uploaded vortons: position, σ², volume.
const STRIDE: usize = 5;

/// The kernels' uniform, its first four numbers the sort's header (`Params` of `pse.wgsl`).
const PARAMS: &str = "
struct Params {
    // Vortons, and bins (the sort's).
    n: u32, bins: u32, pad0: u32, pad1: u32,
    // Bins per axis.
    dims: vec4<u32>,
}
";

/// The prelude of the kernel for `width` numbers per vorton.
pub(crate) fn prelude(width: usize) -> String {
    format!("const WG: u32 = {WG}u;\nconst WIDTH: u32 = {width}u;\nconst STRIDE: u32 = {STRIDE}u;\n{PARAMS}")
}

/// The prelude of `pse_order.wgsl` for records of `w` numbers, into the bins' order (`gather`) or back.
fn order_prelude(w: usize, gather: bool) -> String {
    format!(
        "const WG: u32 = {WG}u;\nconst W: u32 = {w}u;\nconst GATHER: bool = {gather};\n{PARAMS}"
    )
}

/// `Params` of `pse.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
struct PseUniform {
    sort: SortHeader,
    dims: [u32; 4],
}

/// The most bins the device sorts for `n` vortons: the prefix sums run over every bin, so bins far more
/// numerous than vortons (a few vortons strewn over a wide space, each bin a few core radii across) would
/// cost more than the exchange; the CPU bins those by its comparison sort.
pub fn max_exchange_bins(n: usize) -> u64 {
    (16 * n as u64).max(1 << 20)
}

/// The exchanges of `eddies::vpm::VpmSim::set_exchange_device` on the GPU; its buffers grow to the largest
/// set of vortons and are reused.
pub struct GpuExchange {
    gpu: Arc<Gpu>,
    params: wgpu::Buffer,
    /// Keys, ranks, prefix sums, the sorted list, the vortons, the coefficient, the content in the vortons'
    /// order, the content before and after a substep in the bins' order, and the vortons in the bins' order.
    buffers: [Option<wgpu::Buffer>; 10],
    /// The binning whose vortons the device holds, sorted ([`Exchange::binning`]).
    binned: Option<u64>,
    /// Host copies of the keys and the vortons (position, σ², volume), reused.
    keys: Vec<u32>,
    vortons: Vec<f64>,
    sort: CountingSort,
}

impl GpuExchange {
    /// The device for a simulation, on `gpu`.
    pub fn new(gpu: Arc<Gpu>) -> Self {
        let params = gpu.uniform::<PseUniform>("pse params");
        Self {
            gpu,
            params,
            buffers: Default::default(),
            binned: None,
            keys: Vec::new(),
            vortons: Vec::new(),
            sort: CountingSort::default(),
        }
    }

    /// As the simulation holds it.
    pub fn shared(gpu: Arc<Gpu>) -> SharedExchangeDevice {
        SharedExchangeDevice(Arc::new(Mutex::new(Self::new(gpu))))
    }

    /// Device memory held (bytes).
    pub fn bytes(&self) -> u64 {
        held(&self.buffers, &self.params)
    }

    /// The exchange's substeps on the device, or `Ok(false)` where it cannot take them: no double precision,
    /// more vortons than its 32-bit indices count, or more bins than [`max_exchange_bins`].
    pub fn run(&mut self, pass: &Exchange<'_>, content: &mut [f64]) -> Result<bool, GpuError> {
        let n = pass.position.len();
        assert_eq!(pass.keys.len(), n, "a key per vorton");
        assert_eq!(content.len(), pass.width * n, "the content of every vorton");
        let bins = pass.dims.iter().try_fold(1u64, |a, &d| a.checked_mul(d));
        let Some(bins) = bins.filter(|&b| b <= max_exchange_bins(n)) else {
            return Ok(false);
        };
        if !self.gpu.has_f64() || n >= u32::MAX as usize {
            return Ok(false);
        }
        if n == 0 || pass.steps == 0 {
            return Ok(true);
        }
        let width = pass.width;
        let gpu = self.gpu.clone();
        let content_bytes = 8 * (width * n) as u64;
        let (n64, entries) = (n as u64, CountingSort::entries(bins));
        let sizes = [
            4 * n64,
            4 * n64,
            4 * entries,
            4 * n64,
            8 * STRIDE as u64 * n64,
            8,
            content_bytes,
            content_bytes,
            content_bytes,
            8 * STRIDE as u64 * n64,
        ];
        const LABELS: [&str; 10] = [
            "pse keys",
            "pse ranks",
            "pse prefix sums",
            "pse sorted list",
            "pse vortons",
            "pse coefficient",
            "pse content",
            "pse content by bin",
            "pse content by bin after",
            "pse vortons by bin",
        ];
        let b = sized_all(
            &gpu,
            "the exchange's vortons",
            &mut self.buffers,
            &LABELS,
            &sizes,
        )?;
        let per_axis = gpu.limits().max_compute_workgroups_per_dimension;
        let fresh = self.binned != Some(pass.binning);
        // Forgotten until the device has them: a failure below leaves nothing to reuse.
        self.binned = None;
        let mut launches: Vec<Launch> = Vec::new();
        if fresh {
            gpu.write(
                &self.params,
                &[PseUniform {
                    sort: SortHeader::new(n64, bins),
                    dims: dims4(pass.dims),
                }],
            );
            self.keys.clear();
            self.keys
                .par_extend(pass.keys.par_iter().map(|&k| k as u32));
            self.vortons.resize(STRIDE * n, 0.0);
            self.vortons
                .par_chunks_mut(STRIDE)
                .enumerate()
                .with_min_len(1024)
                .for_each(|(i, v)| {
                    let (p, r) = (pass.position[i], pass.radius[i]);
                    v.copy_from_slice(&[p.x, p.y, p.z, r * r, pass.volume[i]]);
                });
            gpu.write(&b[0], &self.keys);
            gpu.write(&b[4], &self.vortons);
            let buffers = SortBuffers {
                header: &self.params,
                keys: &b[0],
                rank: &b[1],
                scan: &b[2],
                sorted: &b[3],
            };
            launches = self
                .sort
                .launches_for_keys(&gpu, per_axis, &buffers, n64, bins)?;
        }
        let groups = fold_groups(n64.div_ceil(WG as u64), per_axis);
        // Records of `w` numbers from `from` into `to`, into the bins' order or back.
        let order = |w: usize, gather: bool, from: &wgpu::Buffer, to: &wgpu::Buffer| {
            let key = format!("vpm pse order {w} {gather}");
            let pipeline = gpu.pipeline(&key, &order_prelude(w, gather), ORDER)?;
            gpu.launch_args(&key, pipeline, &[&self.params, &b[3], from, to], groups)
        };
        if fresh {
            launches.push(order(STRIDE, true, &b[4], &b[9])?);
        }
        gpu.write(&b[5], &[pass.coef]);
        gpu.write(&b[6], content);
        launches.push(order(width, true, &b[6], &b[7])?);
        let key = format!("vpm pse {width}");
        let pipeline = gpu.pipeline(&key, &prelude(width), SOURCE)?;
        // Substep s reads content 7 + s % 2 and writes the other.
        let substeps = (0..pass.steps.min(2))
            .map(|s| {
                let (from, to) = (&b[7 + s % 2], &b[7 + (s + 1) % 2]);
                let args: [&dyn Bindable; 8] =
                    [&self.params, &b[0], &b[2], &b[3], &b[9], &b[5], from, to];
                gpu.launch_args(&key, pipeline.clone(), &args, groups)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let back = order(width, false, &b[7 + pass.steps % 2], &b[6])?;
        let clear = |encoder: &mut wgpu::CommandEncoder| {
            if fresh {
                encoder.clear_buffer(&b[2], 0, Some((bins + 1) * 4));
            }
        };
        let all = launches
            .iter()
            .chain((0..pass.steps).map(|s| &substeps[s % 2]))
            .chain([&back]);
        gpu.submit_launches("vpm pse", clear, all);
        gpu.finish()?;
        gpu.read_into(&[(&b[6], 0, content_bytes)], |_, bytes| {
            copy_bytes(bytemuck::cast_slice_mut(content), bytes)
        })?;
        self.binned = Some(pass.binning);
        Ok(true)
    }
}

impl ExchangeDevice for GpuExchange {
    fn exchange(&mut self, pass: &Exchange<'_>, content: &mut [f64]) -> Result<bool, String> {
        // Beyond the adapter's bindings: the CPU exchanges.
        taken(self.run(pass, content))
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
        for w in [1, 3, STRIDE] {
            for gather in [true, false] {
                let code = format!("{}\n{ORDER}", order_prelude(w, gather));
                validate_wgsl(&code).unwrap_or_else(|e| panic!("order {w} {gather}: {e}"));
            }
        }
    }

    /// The uniform has the size the shader gives it, the sort's header first.
    #[test]
    fn the_uniform_matches_the_shader() {
        assert_eq!(std::mem::size_of::<PseUniform>(), 32);
    }
}
