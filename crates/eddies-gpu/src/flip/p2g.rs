//! Stage "particles_to_grid" on the device: the counting sort by half cell (`keys.wgsl` and the device's
//! [`CountingSort`](crate::sort::CountingSort)), the gathered transfer (`p2g.wgsl`), and what the step
//! derives from its sums, the face velocities and the fill fraction (`derive.wgsl`).

use std::time::Instant;

use std::cmp::Ordering;

use eddies::flip::{Derived, GridSums, Particles, Transfer};
use eddies::grid::MacGrid;
use rayon::prelude::*;

use super::{
    face_layout, grid_key, DeriveUniform, FaceUniform, GpuTransfer, DERIVE, KEYS, P2G, WG,
};
use crate::device::{copy_bytes, BufferRange, GpuError, Launch};
use crate::sort::SortBuffers;

impl GpuTransfer {
    /// The transfer (see [`TransferDevice::particles_to_grid`](eddies::flip::TransferDevice::particles_to_grid)), its failures as the device reports them.
    pub(super) fn particles_to_grid_on<const D: usize>(
        &mut self,
        particles: &Particles<D>,
        grid: &MacGrid<D>,
        transfer: Transfer,
        out: GridSums<'_, D>,
    ) -> Result<(), GpuError> {
        let start = Instant::now();
        let apic = transfer == Transfer::Apic;
        self.forget_sums();
        (self.fill_blocks_of, self.tally_of) = (None, None);
        self.upload(particles, grid, apic, apic, false)?;
        self.kept = None;
        self.resident = Some((particles.pos[0].as_ptr() as usize, particles.len() as u64));
        let face_counts = self.face_uniforms(grid)?;
        let uploaded = Instant::now();

        let mut launches =
            self.transfer_launches::<D>(particles.len() as u64, apic, &face_counts)?;
        launches.extend(self.derive_launch(grid, &out)?);
        self.submit(&launches, self.scan_clear())?;
        let ran = Instant::now();
        let key = self.read_sums(out, grid, &face_counts, &[], |_, _| {})?;
        self.sums_of = Some(key);
        self.times.record(start, uploaded, ran);
        Ok(())
    }

    /// Each component's face uniform for the faces of `grid`, and the prefix sums' range of the scratch
    /// buffer (the solves may have grown it since the last transfer); the faces of each component.
    pub(super) fn face_uniforms<const D: usize>(
        &mut self,
        grid: &MacGrid<D>,
    ) -> Result<[u64; D], GpuError> {
        let face_counts: [u64; D] = std::array::from_fn(|k| grid.u[k].data.len() as u64);
        let gpu = self.gpu.clone();
        let b = self.buffers.as_mut().expect("buffers ensured");
        b.scan.buffer = self
            .scratch
            .get(&gpu, "the sort's prefix sums", b.scan.size)?
            .0;
        let mut base = 0;
        for (k, (g, &faces)) in grid.u.iter().zip(&face_counts).enumerate() {
            let mut dims = [1; 4];
            for (d, &n) in dims.iter_mut().zip(&g.dims) {
                *d = n as u32;
            }
            gpu.write(
                &b.faces_uniform[k],
                &[FaceUniform {
                    k: k as u32,
                    faces: faces as u32,
                    base: base as u32,
                    pad: 0,
                    dims,
                }],
            );
            base += faces;
        }
        Ok(face_counts)
    }

    /// Where the derive launch leaves what it forms ([`GridSums::Derived`]), in memory dead by then, so that
    /// it takes none of its own: the velocities of every face in the displacement's face field (the volume
    /// correction of this substep writes it later), the fill fraction of every cell over the first of the
    /// prefix sums (the sort's last readers before it need only their total, which lies beyond them).
    fn derived_ranges<const D: usize>(
        &self,
        grid: &MacGrid<D>,
    ) -> Result<(BufferRange, BufferRange), GpuError> {
        let b = self.buffers.as_ref().expect("buffers ensured");
        let faces: usize = grid.u.iter().map(|g| g.data.len()).sum();
        let cells: usize = grid.dims.iter().product();
        let (faces_buffer, _) = self.faces.get(
            &self.gpu,
            "the volume correction's displacement",
            4 * faces as u64,
        )?;
        debug_assert!(
            cells as u64 <= b.bins,
            "the fill fraction leaves the total alone"
        );
        Ok((
            BufferRange {
                buffer: faces_buffer,
                offset: 0,
                size: 4 * faces as u64,
            },
            self.fill_range(grid),
        ))
    }

    /// Where the derive launch leaves the fill fraction ([`derived_ranges`](Self::derived_ranges)).
    pub(super) fn fill_range<const D: usize>(&self, grid: &MacGrid<D>) -> BufferRange {
        let b = self.buffers.as_ref().expect("buffers ensured");
        let cells: u64 = grid.dims.iter().map(|&n| n as u64).product();
        BufferRange {
            buffer: b.scan.buffer.clone(),
            offset: b.scan.offset,
            size: 4 * cells,
        }
    }

    /// After the transfer and the kept particles' counts, the launch that forms what `out` derives from the
    /// sums (`derive.wgsl`); none when it asks for the sums themselves.
    pub(super) fn derive_launch<const D: usize>(
        &self,
        grid: &MacGrid<D>,
        out: &GridSums<'_, D>,
    ) -> Result<Option<Launch>, GpuError> {
        let GridSums::Derived(d) = out else {
            return Ok(None);
        };
        let (dims, base, faces) = face_layout(grid);
        let mut uniform = DeriveUniform {
            dims,
            base,
            scale: (1.0 / (2.0 * D as f64 * d.seeds)) as f32,
            closed: d.closed as u32,
            cells: [1; 4],
            ..Default::default()
        };
        for k in 0..D {
            uniform.cells[k] = grid.dims[k] as u32;
        }
        uniform.cells[3] = faces as u32;
        let cells: usize = grid.dims.iter().product();
        let (velocity, fill) = self.derived_ranges(grid)?;
        let b = self.buffers.as_ref().expect("buffers ensured");
        self.gpu.write(&b.derive, &[uniform]);
        let launch = self.launch::<D>(
            "derive",
            DERIVE,
            "",
            &[&b.derive, &b.fields, &velocity, &fill],
            (faces + cells as u64).div_ceil(WG),
        )?;
        Ok(Some(launch))
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

    /// Reads the transfer's results into `out` (the sums, or what the derive launch formed from them) and,
    /// in the same read, the ranges of `more`, each handed to `take(index in more, bytes)`. Returns the key
    /// ([`grid_key`]) of the grid whose sums the face fields now hold (`out`'s velocities where it derives
    /// them, the simulation's own; else `grid`), and counts the grid's bytes read.
    pub(super) fn read_sums<const D: usize>(
        &mut self,
        out: GridSums<'_, D>,
        grid: &MacGrid<D>,
        face_counts: &[u64; D],
        more: &[(&wgpu::Buffer, u64, u64)],
        mut take: impl FnMut(usize, &[u8]),
    ) -> Result<usize, GpuError> {
        let b = self.buffers.as_ref().expect("buffers ensured");
        let derived = matches!(out, GridSums::Derived(_));
        let (key, grid_bytes) = match out {
            GridSums::Sums(sums) => {
                let mut ranges: Vec<_> = (0..D)
                    .scan(0, |at, k| {
                        let r = (&b.fields, *at * 8, face_counts[k] * 8);
                        *at += face_counts[k];
                        Some(r)
                    })
                    .collect();
                let grid_bytes = ranges.iter().map(|r| r.2).sum::<u64>();
                ranges.extend_from_slice(more);
                self.gpu.read_into(&ranges, |r, bytes| {
                    if r < D {
                        copy_bytes(bytemuck::cast_slice_mut(&mut sums[r].data), bytes);
                    } else {
                        take(r - D, bytes);
                    }
                })?;
                (grid_key(grid), grid_bytes)
            }
            GridSums::Derived(d) => {
                // Each component's faces, then the cells.
                let (velocity, fill_range) = self.derived_ranges(grid)?;
                let mut ranges: Vec<_> = (0..D)
                    .scan(velocity.offset, |at, k| {
                        let r = (&velocity.buffer, *at, face_counts[k] * 4);
                        *at += face_counts[k] * 4;
                        Some(r)
                    })
                    .collect();
                ranges.push((&fill_range.buffer, fill_range.offset, fill_range.size));
                ranges.extend_from_slice(more);
                let grid_bytes = velocity.size + fill_range.size;
                let Derived { u, fill, .. } = d;
                self.gpu.read_into(&ranges, |r, bytes| {
                    let widen = |to: &mut [f64]| {
                        to.par_iter_mut()
                            .zip(bytes.par_chunks_exact(4))
                            .for_each(|(t, f)| {
                                *t = f64::from(f32::from_le_bytes(f.try_into().expect("4 bytes")));
                            });
                    };
                    match r.cmp(&D) {
                        Ordering::Less => widen(&mut u.u[r].data),
                        Ordering::Equal => widen(&mut fill.data),
                        Ordering::Greater => take(r - D - 1, bytes),
                    }
                })?;
                (grid_key(u), grid_bytes)
            }
        };
        self.times.grid_bytes_down += grid_bytes;
        self.fill_of = derived.then_some(key);
        Ok(key)
    }
}
