//! The particles kept on the device between the passes
//! ([`TransferDevice::sort_to_grid`](eddies::flip::TransferDevice::sort_to_grid)): the transfer of
//! particle-to-grid, followed in the same submission by the counts per cell (`counts.wgsl`) and the particles
//! moved into their sorted order (`gather.wgsl`, `place.wgsl`), which the grid-to-particle pass then moves
//! in place; the CPU reads them back once a step ([`GpuTransfer::read_kept_on`]), or tallies them here
//! (`tally.wgsl`, [`GpuTransfer::tally_kept_on`]) and reads them back once per output frame.

use std::time::Instant;

use eddies::flip::{KeptParticles, KeptTransfer, Particles, Tally, Transfer};
use eddies::grid::MacGrid;

use super::{GpuTransfer, KeepUniform, TallyUniform, COUNTS, GATHER, PLACE, TALLY, WG};
use crate::device::{copy_bytes, GpuError, Launch};

impl GpuTransfer {
    /// The sort and transfer of the kept particles (see
    /// [`TransferDevice::sort_to_grid`](eddies::flip::TransferDevice::sort_to_grid)), its failures as the
    /// device reports them.
    pub(super) fn sort_to_grid_on<const D: usize>(
        &mut self,
        t: KeptTransfer<'_, D>,
    ) -> Result<Option<usize>, GpuError> {
        let KeptTransfer {
            upload,
            owner,
            grid,
            transfer,
            out,
            count,
        } = t;
        let start = Instant::now();
        let apic = transfer == Transfer::Apic;
        self.forget_sums();
        (self.fill_blocks_of, self.tally_of) = (None, None);
        let n = match upload {
            Some(p) => {
                let n = p.len() as u64;
                self.prepare(n, grid, apic)?;
                self.write_particles(p, apic);
                n
            }
            None => match self.prepare_kept(owner, grid, apic)? {
                Some(n) => n,
                None => return Ok(None),
            },
        };
        self.resident = None;
        self.kept = None;
        if n == 0 {
            out.clear();
            count.data.fill(0);
            self.kept = Some((owner, 0, apic));
            return Ok(Some(0));
        }
        let face_counts = self.face_uniforms(grid)?;
        let faces: u64 = face_counts.iter().sum();
        let cells = count.data.len() as u64;
        self.keep_uniforms::<D>(faces);
        let uploaded = Instant::now();

        let mut launches = self.transfer_launches::<D>(n, apic, &face_counts)?;
        launches.extend(self.keep_launches::<D>(n, cells, apic)?);
        launches.extend(self.derive_launch(grid, &out)?);
        self.submit(&launches, self.scan_clear())?;
        let ran = Instant::now();

        let b = self.buffers.as_ref().expect("buffers ensured");
        let (fields, scan, total_at) = (
            b.fields.clone(),
            b.scan.buffer.clone(),
            b.scan.offset + 4 * b.bins,
        );
        let more = [(&fields, 8 * faces, 4 * cells), (&scan, total_at, 4)];
        let mut live = 0;
        let key = self.read_sums(out, grid, &face_counts, &more, |r, bytes| match r {
            0 => copy_bytes(bytemuck::cast_slice_mut(&mut count.data), bytes),
            _ => live = u32::from_le_bytes(bytes[..4].try_into().expect("4 bytes")) as u64,
        })?;
        self.times.record(start, uploaded, ran);
        self.kept = Some((owner, live, apic));
        self.sums_of = Some(key);
        Ok(Some(live as usize))
    }

    /// `Keep` uniforms for every attribute component of `D` dimensions with APIC, and one that puts the
    /// counts per cell after the `faces` faces' sums in the face fields.
    fn keep_uniforms<const D: usize>(&mut self, faces: u64) {
        let components = D * D;
        while self.keep_uniforms.len() <= components {
            let u = self.gpu.uniform::<KeepUniform>("kept particles");
            self.keep_uniforms.push(u);
        }
        for (c, u) in self.keep_uniforms.iter().enumerate() {
            let keep = if c < components {
                KeepUniform {
                    component: c as u32,
                    ..Default::default()
                }
            } else {
                KeepUniform {
                    base: (2 * faces) as u32,
                    ..Default::default()
                }
            };
            self.gpu.write(u, &[keep]);
        }
    }

    /// The buffers and constants for the particles kept for `owner` on `grid` (with their APIC matrices
    /// when `apic`), and how many they are; `None` when the buffers keep none of `owner`'s, or lost them
    /// when reallocated for `grid`.
    pub(super) fn prepare_kept<const D: usize>(
        &mut self,
        owner: KeptParticles,
        grid: &MacGrid<D>,
        apic: bool,
    ) -> Result<Option<u64>, GpuError> {
        let Some((o, n, a)) = self.kept else {
            return Ok(None);
        };
        if o != owner || (apic && !a) {
            return Ok(None);
        }
        self.prepare(n, grid, apic)?;
        Ok(self.kept.map(|_| n))
    }

    /// After the transfer of `n` particles on `cells` cells: the counts per cell, and each attribute array
    /// (positions, velocities, with `apic` the affine matrices) into the sorted order, component after
    /// component.
    fn keep_launches<const D: usize>(
        &self,
        n: u64,
        cells: u64,
        apic: bool,
    ) -> Result<Vec<Launch>, GpuError> {
        let b = self.buffers.as_ref().expect("buffers ensured");
        let counts = &self.keep_uniforms[D * D];
        let mut launches = vec![self.launch::<D>(
            "counts",
            COUNTS,
            "",
            &[&b.params, counts, &b.scan, &b.fields],
            cells.div_ceil(WG),
        )?];
        let mut arrays = vec![(&b.pos, D), (&b.vel, D)];
        if apic {
            arrays.push((&b.affine, D * D));
        }
        for (values, components) in arrays {
            for uniform in &self.keep_uniforms[..components] {
                launches.push(self.launch::<D>(
                    "gather",
                    GATHER,
                    "",
                    &[&b.params, uniform, &b.scan, &b.sorted, values, &b.keys],
                    n.div_ceil(WG),
                )?);
                launches.push(self.launch::<D>(
                    "place",
                    PLACE,
                    "",
                    &[&b.params, uniform, &b.scan, &b.keys, values],
                    n.div_ceil(WG),
                )?);
            }
        }
        Ok(launches)
    }

    /// The particles kept for `owner` into `particles` (see
    /// [`TransferDevice::read_kept`](eddies::flip::TransferDevice::read_kept)).
    pub(super) fn read_kept_on<const D: usize>(
        &mut self,
        owner: KeptParticles,
        particles: &mut Particles<D>,
    ) -> Result<bool, GpuError> {
        let Some((o, n, apic)) = self.kept else {
            return Ok(false);
        };
        if o != owner {
            return Ok(false);
        }
        let start = Instant::now();
        let len = n as usize;
        for a in 0..D {
            particles.pos[a].resize(len, 0.0);
            particles.vel[a].resize(len, 0.0);
            for c in 0..D {
                let affine = &mut particles.affine[a][c];
                if apic {
                    affine.resize(len, 0.0);
                } else {
                    affine.clear();
                }
            }
        }
        if n == 0 {
            return Ok(true);
        }
        self.read_particles(n, apic, particles)?;
        let ms = start.elapsed().as_secs_f64() * 1e3;
        self.times.download_ms += ms;
        Ok(true)
    }

    /// The first `n` particles' positions and velocities (with `apic`, their affine matrices) from the
    /// buffers into `particles`, whose arrays hold `n` each.
    pub(super) fn read_particles<const D: usize>(
        &self,
        n: u64,
        apic: bool,
        particles: &mut Particles<D>,
    ) -> Result<(), GpuError> {
        let b = self.buffers.as_ref().expect("buffers ensured");
        let bytes = n * 4;
        let mut ranges = Vec::new();
        for a in 0..D {
            ranges.push((&b.pos, a as u64 * bytes, bytes));
            ranges.push((&b.vel, a as u64 * bytes, bytes));
        }
        if apic {
            for c in 0..D * D {
                ranges.push((&b.affine, c as u64 * bytes, bytes));
            }
        }
        self.gpu.read_into(&ranges, |r, bytes| {
            let into = if r < 2 * D {
                let a = r / 2;
                if r % 2 == 0 {
                    &mut particles.pos[a]
                } else {
                    &mut particles.vel[a]
                }
            } else {
                let c = r - 2 * D;
                &mut particles.affine[c / D][c % D]
            };
            copy_bytes(bytemuck::cast_slice_mut(into), bytes);
        })
    }
}

/// Values per chunk in `tally.wgsl`'s output.
const TALLY_STRIDE: u64 = 6;
/// Threads per workgroup of `tally.wgsl`.
const TALLY_WG: u64 = 64;

/// The constants of `tally.wgsl`: the CPU's chunks and lanes ([`Tally::CHUNK`], [`Tally::LANES`]), the
/// values per chunk and the threads per workgroup, and whether the positions are added.
pub(super) fn tally_consts(positions: bool) -> String {
    format!(
        "const CHUNK: u32 = {}u;\nconst LANES: u32 = {}u;\nconst STRIDE: u32 = {TALLY_STRIDE}u;\n\
         const TALLY_WG: u32 = {TALLY_WG}u;\nconst POSITIONS: bool = {positions};",
        Tally::<3>::CHUNK,
        Tally::<3>::LANES
    )
}

impl GpuTransfer {
    /// The tally of the particles kept for `owner` (see
    /// [`TransferDevice::tally_kept`](eddies::flip::TransferDevice::tally_kept)); `None` without double
    /// precision or without particles kept for `owner`.
    pub(super) fn tally_kept_on<const D: usize>(
        &mut self,
        owner: KeptParticles,
        positions: bool,
    ) -> Result<Option<Tally<D>>, GpuError> {
        let Some((o, n, _)) = self.kept else {
            return Ok(None);
        };
        if o != owner || !self.gpu.has_f64() {
            return Ok(None);
        }
        let start = Instant::now();
        let chunks = n.div_ceil(Tally::<D>::CHUNK as u64);
        if chunks == 0 {
            return Ok(Some(Tally::EMPTY));
        }
        let bytes = chunks * TALLY_STRIDE * 8;
        if self.tallies.as_ref().is_none_or(|(b, _)| b.size() < bytes) {
            let gpu = &self.gpu;
            self.tallies = Some(gpu.allocating("the particles' tallies", || {
                (
                    gpu.buffer("particle tallies", bytes),
                    gpu.uniform::<TallyUniform>("particle tally"),
                )
            })?);
        }
        let (out, uniform) = self.tallies.as_ref().expect("allocated");
        let t = TallyUniform {
            n: n as u32,
            chunks: chunks as u32,
            ..Default::default()
        };
        self.gpu.write(uniform, &[t]);
        let b = self
            .buffers
            .as_ref()
            .expect("buffers of the kept particles");
        let threads = chunks * Tally::<D>::LANES as u64;
        let launch = self.launch::<D>(
            "tally",
            TALLY,
            &tally_consts(positions),
            &[uniform, &b.pos, &b.vel, out],
            threads.div_ceil(TALLY_WG),
        )?;
        self.submit(&[launch], 0)?;
        let ran = Instant::now();
        // The chunks in chunk order, straight from the read-back.
        let mut total = Tally::EMPTY;
        self.gpu.read_into(&[(out, 0, bytes)], |_, b| {
            let chunk = |c: &[u8]| {
                let v =
                    |k: usize| f64::from_le_bytes(c[8 * k..8 * k + 8].try_into().expect("8 bytes"));
                Tally {
                    sum: std::array::from_fn(v),
                    squares: v(3),
                    // −1 stands for no particle's −∞ in the kernel.
                    max2: if v(4) < 0.0 { f64::NEG_INFINITY } else { v(4) },
                    positions: v(5),
                }
            };
            total = Tally::fold(b.chunks_exact(8 * TALLY_STRIDE as usize).map(chunk));
        })?;
        self.times.record(start, start, ran);
        Ok(Some(total))
    }
}
