//! The Poisson technique's cloud-in-cell splat on the GPU: the vortons' vorticity onto the fitted grid, as
//! [`eddies::vpm::mollify::FittedGrid::splat`] shares it out, without float atomics.
//!
//! The host takes each vorton's stencil with the CPU's own [`FittedGrid::cic`] (in f64: the lowest of its
//! eight grid points, which is its key, and the fractions along each axis, rounded to f32) and uploads them
//! with the strengths. On the device the vortons are sorted by that cell (`splat_count.wgsl` and the
//! device's [`CountingSort`]), and each grid point gathers from the vortons of the eight cells whose
//! stencils reach it (`splat_gather.wgsl`): corner by corner, each cell's vortons in index order, so that
//! a splat repeats bit for bit and the grid's total is the vortons' to f32 rounding. The vorticity comes
//! back to the host for its vector solve, or stays on the device, which forms the GPU solve's right-hand
//! sides from it (`rhs.rs`, [`GpuSplat::share_field`]).
//!
//! The Gaussian splat (`splat = "gaussian"`, [`eddies::vpm::blob_splat`]) goes the same way: the host takes
//! each vorton's stamp with the CPU's own [`BlobStamp`] (its first grid point, which is its key, its points
//! along each axis, and the offset of its first point from the vorton); the device sorts the vortons by key,
//! computes each stamp's weights as the CPU does, in f32, into the sorted order (`blob_stamp.wgsl`), and
//! each grid point gathers from the vortons whose stamps reach it (`blob_gather.wgsl`), in a fixed order.

use std::sync::{Arc, Mutex};

use bytemuck::{Pod, Zeroable};
use eddies::vpm::blob_splat::{stamp_width, BlobStamp, CUT};
use eddies::vpm::mollify::FittedGrid;
use eddies::vpm::poisson::{Blobs, SharedSplatDevice, SplatDevice};
use eddies::vpm::Splat;
use glam::DVec3;
use rayon::prelude::*;

use super::rhs::Rhs;
use super::{dims4, held, sized_all, stencil, taken};
use crate::device::{copy_bytes, fold_groups, Bindable, Gpu, GpuError, Launch, Scratch};
use crate::sort::{self, CountingSort, SortBuffers, SortHeader, WG};

/// The kernels' WGSL, after [`prelude`].
pub(crate) const COUNT: &str = include_str!("splat_count.wgsl");
pub(crate) const GATHER: &str = include_str!("splat_gather.wgsl");
const BLOB_STAMP: &str = include_str!("blob_stamp.wgsl");
const BLOB_GATHER: &str = include_str!("blob_gather.wgsl");

/// The kernels' uniform ([`SplatUniform`]), its first four numbers the sort's header.
const SPLAT: &str = "
struct Splat {
    // Vortons, and grid points (the sort's bins).
    n: u32, bins: u32, pad0: u32, pad1: u32,
    // Grid points per axis.
    dims: vec4<u32>,
    // 1 / cell volume (1/m³); the Gaussian splat's stamps' points a side at most.
    inv_volume: f32, width: u32, pad3: u32, pad4: u32,
}
";

/// The prelude of the kernels: the sort's (`Sort`, `thread_index`), and `Splat`.
fn prelude() -> String {
    format!("{}\n{SPLAT}", sort::prelude(""))
}

/// The prelude of the Gaussian splat's kernels: [`prelude`], the weight's cut and the stamp's points per axis.
fn blob_prelude() -> String {
    format!(
        "{}
const CUT: f32 = {CUT:?};
// The points along x, y and z of a stamp, packed ten bits each into the bits of `packed`.
fn stamp_points(packed: f32) -> vec3<u32> {{
    let b = bitcast<u32>(packed);
    return vec3<u32>(b & 1023u, (b >> 10u) & 1023u, b >> 20u);
}}
",
        prelude()
    )
}

/// Points a side of the widest stamp the Gaussian splat's packing holds (ten bits an axis).
const WIDEST_STAMP: usize = 1023;

/// `Splat` of the kernels.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
struct SplatUniform {
    /// Vortons, and grid points (the sort's bins).
    sort: SortHeader,
    dims: [u32; 4],
    inv_volume: f32,
    width: u32,
    pad1: [u32; 2],
}

/// The splat on the GPU; its buffers grow to the largest grid and vorton count and are reused.
pub struct GpuSplat {
    gpu: Arc<Gpu>,
    params: wgpu::Buffer,
    /// Vortons (stencil and strength, or stamp), keys, ranks, sorted vortons, prefix sums, vorticity; the
    /// Gaussian splat's weights and strengths with stamps, in sorted order.
    buffers: [Option<wgpu::Buffer>; 8],
    /// The Gaussian splat's keys, reused.
    keys: Vec<u32>,
    packed: Vec<[f32; 4]>,
    /// The vorticity as read back (f32), reused.
    values: Vec<f32>,
    sort: CountingSort,
    /// The vector solve's right-hand sides from the vorticity kept on the device.
    rhs: Rhs,
}

impl GpuSplat {
    /// The splat on `gpu`.
    pub fn new(gpu: Arc<Gpu>) -> Self {
        let params = gpu.uniform::<SplatUniform>("splat params");
        let rhs = Rhs::new(&gpu);
        Self {
            gpu,
            params,
            buffers: Default::default(),
            packed: Vec::new(),
            keys: Vec::new(),
            values: Vec::new(),
            sort: CountingSort::default(),
            rhs,
        }
    }

    /// As the simulation holds it.
    pub fn shared(gpu: Arc<Gpu>) -> SharedSplatDevice {
        SharedSplatDevice(Arc::new(Mutex::new(Self::new(gpu))))
    }

    /// Offers to keep the vorticity on the device and form the vector solve's right-hand sides from it
    /// there, each written into `field` for the Poisson solver that reads it (`GpuPoisson::share_faces`
    /// with the same field): [`SplatDevice::splat_kept`], [`SplatDevice::right_hand_sides`] and
    /// [`SplatDevice::right_hand_side`] (`rhs.rs`).
    pub fn share_field(&mut self, field: Scratch) {
        self.rhs.share_field(field);
    }

    /// Device memory held (bytes), a shared field aside.
    pub fn bytes(&self) -> u64 {
        held(&self.buffers, &self.params) + self.rhs.bytes()
    }

    /// Vorticity (1/s) at the points of `grid` into `out` (x fastest): each `strength[i]` (m³/s) at
    /// `position[i]` shared out by cloud-in-cell and divided by the cell volume.
    ///
    /// # Errors
    /// [`GpuError::Limit`] for more vortons or grid points than its 32-bit indices count or a buffer
    /// beyond the adapter's binding size; the device's own failures.
    pub fn splat(
        &mut self,
        grid: &FittedGrid,
        position: &[DVec3],
        strength: &[DVec3],
        out: &mut Vec<DVec3>,
    ) -> Result<(), GpuError> {
        assert_eq!(position.len(), strength.len(), "a strength per vorton");
        let kept = self.splat_kept(grid, position, |i| strength[i])?;
        self.read_grid(grid.len(), kept.map(|k| k.grid), out)
    }

    /// Vorticity (1/s) at the points of `grid` into `out` (x fastest): each vorton of `blobs` spread by the
    /// Gaussian of its core as [`eddies::vpm::blob_splat::BlobSplat`] spreads it (its stamp from
    /// [`BlobStamp`], the weights in f32) and divided by the cell volume.
    ///
    /// # Errors
    /// As [`splat`](Self::splat), and [`GpuError::Limit`] for stamps more than 1023 points a side.
    pub fn splat_blobs(
        &mut self,
        grid: &FittedGrid,
        blobs: Blobs,
        out: &mut Vec<DVec3>,
    ) -> Result<(), GpuError> {
        let kept = self.blobs_kept(grid, blobs)?;
        self.read_grid(grid.len(), kept, out)
    }

    /// The splat of [`splat_blobs`](Self::splat_blobs), submitted and kept on the device: the buffer of
    /// its vorticity; `None` without vortons.
    fn blobs_kept(
        &mut self,
        grid: &FittedGrid,
        blobs: Blobs,
    ) -> Result<Option<wgpu::Buffer>, GpuError> {
        self.rhs.forget();
        let Blobs {
            position,
            strength,
            radius,
        } = blobs;
        assert_eq!(position.len(), strength.len(), "a strength per vorton");
        assert_eq!(position.len(), radius.len(), "a radius per vorton");
        let n = position.len() as u64;
        let points = grid.len() as u64;
        // The most points a stamp can have along an axis.
        let bound = stamp_width(grid, radius);
        if points + 1 >= u32::MAX as u64 || 3 * bound as u64 * n >= u32::MAX as u64 {
            return Err(GpuError::Limit(format!(
                "{n} vortons with stamps of up to {bound} points a side on {points} grid points: too many \
                 for the splat's 32-bit indices"
            )));
        }
        if bound > WIDEST_STAMP {
            return Err(GpuError::Limit(format!(
                "stamps of up to {bound} points a side (cores of {} cells): more than the splat's \
                 {WIDEST_STAMP}",
                radius.iter().fold(0.0, |m: f64, &r| m.max(r)) / grid.spacing
            )));
        }
        if n == 0 {
            return Ok(None);
        }
        let [nx, ny, _] = grid.dims;
        self.packed.resize(3 * position.len(), [0.0; 4]);
        self.keys.resize(position.len(), 0);
        // The most points a stamp has along an axis (at most `bound`): the gather scans that many cells back
        // along each axis.
        let width = self
            .packed
            .par_chunks_mut(3)
            .zip(self.keys.par_iter_mut())
            .enumerate()
            .with_min_len(1024)
            .map(|(i, (v, k))| {
                let stamp = BlobStamp::new(grid, position[i], radius[i]);
                let [x, y, z] = stamp.lo;
                let key = (x + nx * (y + ny * z)) as u32;
                *k = key;
                let offset = |a: usize| (stamp.lo[a] as f64 - stamp.centre[a]) as f32;
                let [px, py, pz] = stamp.n.map(|n| n as u32);
                let a = strength[i];
                v[0] = [offset(0), offset(1), offset(2), f32::from_bits(key)];
                v[1] = [
                    a.x as f32,
                    a.y as f32,
                    a.z as f32,
                    f32::from_bits(px | py << 10 | pz << 20),
                ];
                v[2] = [stamp.inv_s2 as f32, 0.0, 0.0, 0.0];
                stamp.n.into_iter().max().unwrap_or(1)
            })
            .max()
            .unwrap_or(1);
        let gpu = self.gpu.clone();
        let entries = CountingSort::entries(points);
        let sizes = [
            48 * n,
            4 * n,
            4 * n,
            4 * n,
            4 * entries,
            12 * points,
            12 * width as u64 * n,
            32 * n,
        ];
        let b = sized_all(
            &gpu,
            "the splat's vortons",
            &mut self.buffers,
            &LABELS,
            &sizes,
        )?;
        self.upload(grid, n, width, &b[0]);
        gpu.write(&b[1], &self.keys);
        let per_axis = gpu.limits().max_compute_workgroups_per_dimension;
        let launch = launcher(&gpu, blob_prelude());
        let buffers = sort_buffers(&self.params, &b);
        let mut launches = self
            .sort
            .launches_for_keys(&gpu, per_axis, &buffers, n, points)?;
        launches.push(launch(
            "blob stamp",
            BLOB_STAMP,
            &[&self.params, &b[0], &b[3], &b[6], &b[7]],
            n.div_ceil(WG),
        )?);
        launches.push(launch(
            "blob gather",
            BLOB_GATHER,
            &[&self.params, &b[6], &b[7], &b[4], &b[5]],
            points.div_ceil(WG),
        )?);
        submit_cleared(&gpu, "vpm blob splat", (&b[4], points), &launches);
        Ok(Some(b[5].clone()))
    }

    /// Writes the kernels' uniform for `n` vortons on `grid` (`width`: the Gaussian stamps' points a side, 0
    /// for cloud-in-cell) and the packed vortons into `vortons`.
    fn upload(&self, grid: &FittedGrid, n: u64, width: usize, vortons: &wgpu::Buffer) {
        self.gpu.write(
            &self.params,
            &[SplatUniform {
                sort: SortHeader::new(n, grid.len() as u64),
                dims: dims4(grid.dims.map(|d| d as u64)),
                inv_volume: (1.0 / grid.spacing.powi(3)) as f32,
                width: width as u32,
                ..Default::default()
            }],
        );
        self.gpu.write(vortons, &self.packed);
    }

    /// The splatted values in `splatted` (three f32 for each of `points` grid points; `None`: zero
    /// everywhere) into `out`.
    fn read_grid(
        &mut self,
        points: usize,
        splatted: Option<wgpu::Buffer>,
        out: &mut Vec<DVec3>,
    ) -> Result<(), GpuError> {
        out.clear();
        let Some(splatted) = splatted else {
            out.resize(points, DVec3::ZERO);
            return Ok(());
        };
        let points = points as u64;
        let values = &mut self.values;
        values.resize(3 * points as usize, 0.0);
        self.gpu
            .read_into(&[(&splatted, 0, 12 * points)], |_, bytes| {
                copy_bytes(bytemuck::cast_slice_mut(values), bytes)
            })?;
        out.par_extend(
            values
                .par_chunks_exact(3)
                .map(|w| DVec3::new(w[0] as f64, w[1] as f64, w[2] as f64)),
        );
        Ok(())
    }

    /// The splat of [`splat`](Self::splat), `strength(i)` the strength of vorton `i`, submitted and kept on
    /// the device for the kernels that follow; `None` without vortons.
    ///
    /// # Errors
    /// As [`splat`](Self::splat).
    pub(crate) fn splat_kept(
        &mut self,
        grid: &FittedGrid,
        position: &[DVec3],
        strength: impl Fn(usize) -> DVec3 + Sync,
    ) -> Result<Option<Kept>, GpuError> {
        self.rhs.forget();
        let n = position.len() as u64;
        let points = grid.len() as u64;
        if points + 1 >= u32::MAX as u64 || n >= u32::MAX as u64 {
            return Err(GpuError::Limit(format!(
                "{n} vortons on {points} grid points: too many for the splat's 32-bit indices"
            )));
        }
        if n == 0 {
            return Ok(None);
        }
        self.packed.resize(2 * position.len(), [0.0; 4]);
        self.packed
            .par_chunks_mut(2)
            .zip(position)
            .enumerate()
            .with_min_len(1024)
            .for_each(|(i, (v, &p))| {
                let a = strength(i);
                v[0] = stencil(grid, p);
                v[1] = [a.x as f32, a.y as f32, a.z as f32, 0.0];
            });
        let gpu = self.gpu.clone();
        let entries = CountingSort::entries(points);
        let sizes = [32 * n, 4 * n, 4 * n, 4 * n, 4 * entries, 12 * points];
        let b = sized_all(
            &gpu,
            "the splat's vortons",
            &mut self.buffers[..6],
            &LABELS[..6],
            &sizes,
        )?;
        self.upload(grid, n, 0, &b[0]);
        let per_axis = gpu.limits().max_compute_workgroups_per_dimension;
        let launch = launcher(&gpu, prelude());
        let mut launches = vec![launch(
            "count",
            COUNT,
            &[&self.params, &b[0], &b[1], &b[2], &b[4]],
            n.div_ceil(WG),
        )?];
        let buffers = sort_buffers(&self.params, &b);
        launches.extend(self.sort.launches(&gpu, per_axis, &buffers, n, points)?);
        launches.push(launch(
            "gather",
            GATHER,
            &[&self.params, &b[0], &b[4], &b[3], &b[5]],
            points.div_ceil(WG),
        )?);
        submit_cleared(&gpu, "vpm splat", (&b[4], points), &launches);
        Ok(Some(Kept {
            vortons: b[0].clone(),
            grid: b[5].clone(),
        }))
    }
}

/// A launcher of the splat's kernels after `prelude` on `gpu`: `(name, source, bindings, workgroups)`.
fn launcher(
    gpu: &Gpu,
    prelude: String,
) -> impl Fn(&str, &str, &[&dyn Bindable], u64) -> Result<Launch, GpuError> + '_ {
    let per_axis = gpu.limits().max_compute_workgroups_per_dimension;
    move |name, source, args, groups| {
        let key = format!("vpm splat {name}");
        let pipeline = gpu.pipeline(&key, &prelude, source)?;
        gpu.launch_args(&key, pipeline, args, fold_groups(groups, per_axis))
    }
}

/// The sort's buffers among the splat's `b` (in [`LABELS`]' order), its header the uniform `params`.
fn sort_buffers<'a>(params: &'a wgpu::Buffer, b: &'a [wgpu::Buffer]) -> SortBuffers<'a> {
    SortBuffers {
        header: params,
        keys: &b[1],
        rank: &b[2],
        scan: &b[4],
        sorted: &b[3],
    }
}

/// Submits `launches` after clearing the counts of the `points` cells in `scan`, the prefix sums' buffer.
fn submit_cleared(
    gpu: &Gpu,
    label: &str,
    (scan, points): (&wgpu::Buffer, u64),
    launches: &[Launch],
) {
    let clear = |encoder: &mut wgpu::CommandEncoder| {
        encoder.clear_buffer(scan, 0, Some((points + 1) * 4));
    };
    gpu.submit_launches(label, clear, launches);
}

/// The splat's buffers' labels, in the order of [`GpuSplat`]'s.
const LABELS: [&str; 8] = [
    "splat vortons",
    "splat keys",
    "splat ranks",
    "splat sorted vortons",
    "splat prefix sums",
    "splat vorticity",
    "splat weights",
    "splat sorted stamps",
];

/// What [`GpuSplat::splat_kept`] leaves on the device.
pub(crate) struct Kept {
    /// Two `vec4<f32>` per vorton: its stencil's fractions and, in `w`, the bits of its lowest grid point's
    /// index; its strength.
    pub vortons: wgpu::Buffer,
    /// The splatted values, three f32 per grid point, x fastest.
    pub grid: wgpu::Buffer,
}

impl SplatDevice for GpuSplat {
    fn splat(
        &mut self,
        grid: &FittedGrid,
        position: &[DVec3],
        strength: &[DVec3],
        out: &mut Vec<DVec3>,
    ) -> Result<bool, String> {
        // Beyond the device's indices or bindings: the CPU splats.
        taken(GpuSplat::splat(self, grid, position, strength, out).map(|()| true))
    }

    fn splat_blobs(
        &mut self,
        grid: &FittedGrid,
        blobs: Blobs,
        out: &mut Vec<DVec3>,
    ) -> Result<bool, String> {
        taken(GpuSplat::splat_blobs(self, grid, blobs, out).map(|()| true))
    }

    fn rhs_field(&self) -> Option<u64> {
        // The right-hand sides are formed in f64.
        self.rhs.field().filter(|_| self.gpu.has_f64())
    }

    fn splat_kept(
        &mut self,
        grid: &FittedGrid,
        blobs: Blobs,
        splat: Splat,
    ) -> Result<bool, String> {
        if self.rhs_field().is_none() || blobs.position.is_empty() {
            return Ok(false);
        }
        let kept = match splat {
            Splat::Cic => {
                let strength = blobs.strength;
                assert_eq!(
                    blobs.position.len(),
                    strength.len(),
                    "a strength per vorton"
                );
                self.splat_kept(grid, blobs.position, |i| strength[i])
                    .map(|k| k.map(|k| k.grid))
            }
            Splat::Gaussian => self.blobs_kept(grid, blobs),
        };
        match kept {
            Ok(Some(vorticity)) => {
                self.rhs.keep(grid.dims, vorticity);
                Ok(true)
            }
            other => taken(other.map(|_| false)),
        }
    }

    fn kept_vorticity(&mut self, out: &mut Vec<DVec3>) -> Result<(), String> {
        let Some((dims, vorticity)) = self.rhs.kept().cloned() else {
            return Err("the splat device keeps no vorticity".into());
        };
        let points = dims.iter().product();
        self.read_grid(points, Some(vorticity), out)
            .map_err(|e| e.to_string())
    }

    fn right_hand_sides(
        &mut self,
        scale: f64,
        boundary: &[DVec3],
        squares: &mut Vec<f64>,
    ) -> Result<(), String> {
        let gpu = self.gpu.clone();
        self.rhs
            .sums(&gpu, scale, boundary, squares)
            .map_err(|e| e.to_string())
    }

    fn right_hand_side(&mut self, component: usize) -> Result<(), String> {
        let gpu = self.gpu.clone();
        self.rhs.write(&gpu, component).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::{device_or_skip, validate_wgsl};

    /// The device's counting sort leaves each cell's vortons in index order, as a stable sort by cell on the
    /// host does: with cells of a few vortons and of about two thousand (a tube through a coarse grid), and
    /// vortons beyond the grid clamped onto its faces.
    #[test]
    fn the_sort_lists_each_cells_vortons_in_index_order() {
        let Some(gpu) = device_or_skip() else {
            return;
        };
        let mut splat = GpuSplat::new(Arc::new(gpu));
        let n = 12_000;
        let position: Vec<DVec3> = (0..n)
            .map(|i| {
                let t = (i as f64 * 0.618_033_988_7).fract();
                let u = (i as f64 * 0.414_213_562_4).fract();
                let w = (i as f64 * 0.732_050_807_6).fract();
                if i % 3 == 0 {
                    DVec3::new(1.2 * t - 0.1, 0.5 + 0.01 * u, 0.5 + 0.01 * w)
                } else {
                    DVec3::new(t, u, w)
                }
            })
            .collect();
        let strength = vec![DVec3::ONE; n];
        for res in [24, 5] {
            let grid = FittedGrid {
                dims: [res, res, res],
                origin: [0.0; 3],
                spacing: 1.0 / res as f64,
            };
            let mut out = Vec::new();
            splat.splat(&grid, &position, &strength, &mut out).unwrap();
            let points = grid.len() as u64;
            let b = &splat.buffers;
            let gpu = &splat.gpu;
            let (sorted, start) = (b[3].as_ref().unwrap(), b[4].as_ref().unwrap());
            let bytes = gpu
                .read(&[(sorted, 0, 4 * n as u64), (start, 0, 4 * (points + 1))])
                .unwrap();
            let sorted: Vec<u32> = bytemuck::pod_collect_to_vec(&bytes[0]);
            let start: Vec<u32> = bytemuck::pod_collect_to_vec(&bytes[1]);
            // The host's stable sort by the same keys.
            let [nx, ny, _] = grid.dims;
            let mut expected: Vec<(usize, u32)> = position
                .iter()
                .enumerate()
                .map(|(i, &p)| {
                    let (c, _) = grid.cic(p);
                    (c[0] + nx * (c[1] + ny * c[2]), i as u32)
                })
                .collect();
            expected.sort_by_key(|&(key, _)| key);
            let largest = start.windows(2).map(|w| w[1] - w[0]).max().unwrap();
            assert!(
                res == 24 || largest > 1000,
                "{res}: the coarse grid has a cell of {largest}"
            );
            assert_eq!(
                start[points as usize], n as u32,
                "{res}: every vorton placed"
            );
            for (slot, &(key, i)) in expected.iter().enumerate() {
                assert_eq!(sorted[slot], i, "{res}: slot {slot}");
                assert!(
                    (start[key] as usize..start[key + 1] as usize).contains(&slot),
                    "{res}: slot {slot} outside cell {key}"
                );
            }
        }
    }

    /// Both kernels parse and validate without a GPU.
    #[test]
    fn the_kernels_compile_without_a_gpu() {
        for (name, source) in [("count", COUNT), ("gather", GATHER)] {
            let code = format!("{}\n{source}", prelude());
            validate_wgsl(&code).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        for (name, source) in [("blob stamp", BLOB_STAMP), ("blob gather", BLOB_GATHER)] {
            let code = format!("{}\n{source}", blob_prelude());
            validate_wgsl(&code).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        assert_eq!(std::mem::size_of::<SplatUniform>(), 48);
    }
}
