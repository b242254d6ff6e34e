//! Stage "particles_to_grid" on the device: the counting sort by half cell (`keys.wgsl` and the device's
//! [`CountingSort`](crate::sort::CountingSort)) and the gathered transfer (`p2g.wgsl`).

use std::time::Instant;

use eddies::flip::{Particles, Transfer};
use eddies::grid::{Grid, MacGrid};

use super::{FaceUniform, GpuTransfer, KEYS, P2G, WG};
use crate::device::{copy_bytes, GpuError, Launch};
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
        self.sums_of = None;
        self.upload(particles, grid, apic, apic, false)?;
        self.kept = None;
        self.resident = Some((particles.pos[0].as_ptr() as usize, particles.len() as u64));
        let face_counts = self.face_uniforms(sums)?;
        let uploaded = Instant::now();

        let launches = self.transfer_launches::<D>(particles.len() as u64, apic, &face_counts)?;
        self.submit(&launches, self.scan_clear())?;
        let ran = Instant::now();
        self.read_sums(sums, &face_counts, &[], |_, _| {})?;
        self.sums_of = Some(super::grid_key(grid));
        self.times.record(start, uploaded, ran);
        Ok(())
    }

    /// Each component's face uniform for sums shaped as `sums`, and the prefix sums' range of the scratch
    /// buffer (the solves may have grown it since the last transfer); the faces of each component.
    pub(super) fn face_uniforms<const D: usize>(
        &mut self,
        sums: &[Grid<[f32; 2], D>; D],
    ) -> Result<[u64; D], GpuError> {
        let face_counts: [u64; D] = std::array::from_fn(|k| sums[k].data.len() as u64);
        let gpu = self.gpu.clone();
        let b = self.buffers.as_mut().expect("buffers ensured");
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
        Ok(face_counts)
    }

    /// The bytes of the prefix sums to clear before a sort: the counts of every half cell and the total.
    pub(super) fn scan_clear(&self) -> u64 {
        let b = self.buffers.as_ref().expect("buffers ensured");
        (b.bins + 1) * 4
    }

    /// The launches of the transfer of the `n` particles in the buffers: their keys, the sort, and the gather
    /// of each component's faces.
    pub(super) fn transfer_launches<const D: usize>(
        &mut self,
        n: u64,
        apic: bool,
        face_counts: &[u64; D],
    ) -> Result<Vec<Launch>, GpuError> {
        let b = self.buffers.as_ref().expect("buffers ensured");
        let mut launches = vec![self.launch::<D>(
            "keys",
            KEYS,
            "",
            &[&b.params, &b.pos, &b.keys, &b.rank, &b.scan],
            n.div_ceil(WG),
        )?];
        let sort = SortBuffers {
            header: &b.params,
            keys: &b.keys,
            rank: &b.rank,
            scan: &b.scan,
            sorted: &b.sorted,
        };
        launches.extend(
            self.sort
                .launches(&self.gpu, self.per_axis, &sort, n, b.bins)?,
        );
        let b = self.buffers.as_ref().expect("buffers ensured");
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
        Ok(launches)
    }

    /// Reads the transfer's sums into `sums` and, in the same read, the ranges of `more`, each handed to
    /// `take(index in more, bytes)`.
    pub(super) fn read_sums<const D: usize>(
        &self,
        sums: &mut [Grid<[f32; 2], D>; D],
        face_counts: &[u64; D],
        more: &[(&wgpu::Buffer, u64, u64)],
        mut take: impl FnMut(usize, &[u8]),
    ) -> Result<(), GpuError> {
        let b = self.buffers.as_ref().expect("buffers ensured");
        let mut ranges: Vec<_> = (0..D)
            .scan(0, |at, k| {
                let r = (&b.fields, *at * 8, face_counts[k] * 8);
                *at += face_counts[k];
                Some(r)
            })
            .collect();
        ranges.extend_from_slice(more);
        self.gpu.read_into(&ranges, |r, bytes| {
            if r < D {
                copy_bytes(bytemuck::cast_slice_mut(&mut sums[r].data), bytes);
            } else {
                take(r - D, bytes);
            }
        })
    }
}
