//! Stage "particles_to_grid" on the device: the counting sort by half cell (`keys.wgsl` and the device's
//! [`CountingSort`](crate::sort::CountingSort)) and the gathered transfer (`p2g.wgsl`).

use std::time::Instant;

use eddies::flip::{Particles, Transfer};
use eddies::grid::{Grid, MacGrid};

use super::{FaceUniform, GpuTransfer, KEYS, P2G, WG};
use crate::device::{copy_bytes, GpuError};
use crate::sort::SortBuffers;

impl GpuTransfer {
    /// The transfer (see [`TransferDevice::particles_to_grid`](eddies::flip::TransferDevice::particles_to_grid)), its failures as the device reports them.
    pub(super) fn particles_to_grid_on<const D: usize>(
        &mut self,
        particles: &Particles<D>,
        grid: &MacGrid<D>,
        transfer: Transfer,
        sums: &mut [Grid<[f32; 2], D>; D],
    ) -> Result<(), GpuError> {
        let start = Instant::now();
        let apic = transfer == Transfer::Apic;
        self.upload(particles, grid, apic, apic, false)?;
        self.resident = Some((particles.pos[0].as_ptr() as usize, particles.len() as u64));
        let n = particles.len() as u64;
        let bins: u64 = grid.dims.iter().map(|&c| 2 * c as u64).product();
        let face_counts: [u64; D] = std::array::from_fn(|k| sums[k].data.len() as u64);
        let gpu = self.gpu.clone();
        let b = self.buffers.as_mut().expect("buffers ensured");
        // The solves may have grown the shared scratch buffer since the last transfer.
        b.scan.buffer = self
            .scratch
            .get(&gpu, "the sort's prefix sums", b.scan.size)?
            .0;
        let mut base = 0;
        for k in 0..D {
            let mut dims = [1; 4];
            for (d, &n) in dims.iter_mut().zip(&sums[k].dims) {
                *d = n as u32;
            }
            gpu.write(
                &b.faces_uniform[k],
                &[FaceUniform {
                    k: k as u32,
                    faces: face_counts[k] as u32,
                    base: base as u32,
                    pad: 0,
                    dims,
                }],
            );
            base += face_counts[k];
        }
        let uploaded = Instant::now();

        let b = self.buffers.as_ref().expect("buffers ensured");
        let particle_groups = n.div_ceil(WG);
        let mut launches = vec![self.launch::<D>(
            "keys",
            KEYS,
            "",
            &[&b.params, &b.pos, &b.keys, &b.rank, &b.scan],
            particle_groups,
        )?];
        let sort = SortBuffers {
            header: &b.params,
            keys: &b.keys,
            rank: &b.rank,
            scan: &b.scan,
            sorted: &b.sorted,
        };
        launches.extend(self.sort.launches(&gpu, self.per_axis, &sort, n, bins)?);
        let apic_const = format!("const APIC: bool = {apic};");
        for (uniform, faces) in b.faces_uniform.iter().zip(face_counts) {
            launches.push(self.launch::<D>(
                "p2g",
                P2G,
                &apic_const,
                &[
                    &b.params, uniform, &b.pos, &b.vel, &b.affine, &b.scan, &b.sorted, &b.fields,
                ],
                faces.div_ceil(WG),
            )?);
        }
        self.submit(&launches, (bins + 1) * 4)?;
        let ran = Instant::now();

        let ranges: Vec<_> = (0..D)
            .scan(0, |at, k| {
                let r = (&b.fields, *at * 8, face_counts[k] * 8);
                *at += face_counts[k];
                Some(r)
            })
            .collect();
        gpu.read_into(&ranges, |k, bytes| {
            copy_bytes(bytemuck::cast_slice_mut(&mut sums[k].data), bytes)
        })?;
        self.times.record(start, uploaded, ran);
        Ok(())
    }
}
