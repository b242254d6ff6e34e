//! Particle ↔ grid transfers: the counting sort of particles by half cell, the particle-to-grid scatter onto
//! the MAC faces, and the grid-to-particle update (PIC, PIC/FLIP blend, APIC).
//!
//! Eng's particle-to-grid transfer scatters every particle's weighted velocity onto its faces with
//! additive blending. Here the scatter runs over slabs of the sorted particles (the half-cell sort makes each
//! slab of cell rows a contiguous range), even slabs in parallel and then odd ones, so that no two threads
//! ever add into the same face and every face takes its sums in one fixed order.

use super::params::{Boundary, Transfer};
use super::particles::{Particles, Tally, PARTICLE_CHUNK};
use crate::grid::{strides_of, Grid, MacGrid};
use crate::par::{self, SharedSlice};
use crate::shape::Shape;
use multiversion::multiversion;
use rayon::prelude::*;

/// Key of a particle that is to be dropped (left an open domain, drained, thinned).
const DEAD: u32 = u32::MAX;

/// Particles binned by half cell after [`sort_particles`]: the particles of half cell `s` are
/// `start[s]..start[s + 1]`, half cells numbered x fastest on the grid of `2·dims` half cells.
#[derive(Clone, Debug)]
pub(crate) struct HalfCellBins<const D: usize> {
    /// Half cells per axis.
    pub sub_dims: [usize; D],
    /// First particle of each half cell, plus the total at the end.
    pub start: Vec<u32>,
    keys: Vec<u32>,
    order: Vec<u32>,
    tmp: Vec<f32>,
    /// Per chunk of particles, its count (then its first slot) in each bucket of the sort.
    counts: Vec<u32>,
    /// Particle indices grouped by bucket.
    grouped: Vec<u32>,
    /// First slot of each bucket in `grouped` and `order`, plus the total.
    bucket_start: Vec<u32>,
}

impl<const D: usize> HalfCellBins<D> {
    pub fn new(dims: [usize; D]) -> Self {
        let sub_dims = dims.map(|n| 2 * n);
        Self {
            sub_dims,
            start: vec![0; sub_dims.iter().product::<usize>() + 1],
            keys: Vec::new(),
            order: Vec::new(),
            tmp: Vec::new(),
            counts: Vec::new(),
            grouped: Vec::new(),
            bucket_start: Vec::new(),
        }
    }

    /// Particles in cell `c` (the sum over its 2ᴰ half cells): the definition that
    /// [`counts_into`](Self::counts_into) computes row by row.
    #[cfg(test)]
    pub fn cell_count(&self, c: [usize; D]) -> u32 {
        let strides = strides_of(self.sub_dims);
        let mut n = 0;
        for corner in 0..(1usize << D) {
            let mut s = 0;
            for k in 0..D {
                s += (2 * c[k] + ((corner >> k) & 1)) * strides[k];
            }
            n += self.start[s + 1] - self.start[s];
        }
        n
    }

    /// Particles per cell into `count` (a grid of the cells the bins halve), row by row: the half cells of a
    /// cell pair up along x, so each cell sums `start[s + 2] − start[s]` over its 2ᴰ⁻¹ pairs.
    pub fn counts_into(&self, count: &mut Grid<u32, D>) {
        let sub_strides = strides_of(self.sub_dims);
        let start = &self.start;
        count.par_for_rows_mut(|c, row| {
            row.fill(0);
            for pair in 0..(1usize << (D - 1)) {
                let mut base = 0;
                for k in 1..D {
                    base += (2 * c[k] + ((pair >> (k - 1)) & 1)) * sub_strides[k];
                }
                for (x, n) in row.iter_mut().enumerate() {
                    let s = base + 2 * x;
                    *n += start[s + 2] - start[s];
                }
            }
        });
    }

    /// Indices of the particles of cell `c`, half cell by half cell.
    pub fn cell_particles(&self, c: [usize; D]) -> impl Iterator<Item = usize> + '_ {
        let strides = strides_of(self.sub_dims);
        (0..(1usize << D)).flat_map(move |corner| {
            let mut s = 0;
            for k in 0..D {
                s += (2 * c[k] + ((corner >> k) & 1)) * strides[k];
            }
            self.start[s] as usize..self.start[s + 1] as usize
        })
    }

    pub fn bytes(&self) -> usize {
        (self.start.capacity()
            + self.keys.capacity()
            + self.order.capacity()
            + self.tmp.capacity()
            + self.counts.capacity()
            + self.grouped.capacity()
            + self.bucket_start.capacity())
            * 4
    }
}

/// Sorts the particles by half cell with a counting sort (stable, so the order is a function of the particle
/// data alone) and drops those whose position is not finite or outside the domain `[origin, origin + dims·h)`.
/// Returns the number dropped.
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2+fma"))]
pub(crate) fn sort_particles<const D: usize>(
    p: &mut Particles<D>,
    bins: &mut HalfCellBins<D>,
    origin: [f64; D],
    h: f64,
) -> usize {
    let n = p.len();
    let sub = bins.sub_dims;
    let strides = strides_of(sub);
    let inv = 2.0 / h;
    bins.keys.resize(n, 0);
    {
        let keys = SharedSlice::new(&mut bins.keys);
        let pos = &p.pos;
        par::for_each_chunk(n, PARTICLE_CHUNK, |r| {
            // SAFETY: chunks are disjoint.
            let out = unsafe { keys.slice_mut(r.clone()) };
            let x: [&[f32]; D] = std::array::from_fn(|k| &pos[k][r.clone()]);
            // Branch-free, so that the loop vectorises.
            for (j, o) in out.iter_mut().enumerate() {
                let mut key = 0usize;
                let mut alive = true;
                for k in 0..D {
                    let s = (x[k][j] as f64 - origin[k]) * inv;
                    let inside = s >= 0.0 && s < sub[k] as f64;
                    alive &= inside;
                    let s = if inside { s } else { 0.0 };
                    // SAFETY: `s` is in [0, sub[k]), so its truncation fits a usize (`as` would saturate,
                    // which does not vectorise).
                    key += unsafe { s.to_int_unchecked::<usize>() }.min(sub[k] - 1) * strides[k];
                }
                *o = if alive { key as u32 } else { DEAD };
            }
        });
    }
    // A stable counting sort, in parallel: the keys are cut into buckets, one slab of half cells along the
    // slowest axis each. Each chunk of particles counts its particles per bucket; the chunks then copy their
    // particle indices into the buckets, chunk after chunk (so each bucket holds its particles in index
    // order); each bucket then sorts its own particles by key, in its own range of `start` and `order`. The
    // result is the serial sort's: by key, ties in index order, for any thread count.
    let slab = strides[D - 1];
    let buckets = sub[D - 1];
    let chunks = par::chunk_count(n, PARTICLE_CHUNK);
    let keys = &bins.keys;
    bins.counts.clear();
    bins.counts.resize(chunks * buckets, 0);
    bins.counts
        .par_chunks_mut(buckets)
        .enumerate()
        .for_each(|(c, count)| {
            // The particles were sorted at the last step and have moved little, so their keys come in long
            // runs of one bucket: a run is counted in a register, and a division finds the bucket only where
            // a run starts.
            let (mut b, mut keys_of_b, mut run) = (0, 0..0, 0);
            for &k in &keys[par::chunk_range(n, PARTICLE_CHUNK, c)] {
                if k == DEAD {
                    continue;
                }
                let k = k as usize;
                if !keys_of_b.contains(&k) {
                    count[b] += run;
                    b = k / slab;
                    keys_of_b = b * slab..(b + 1) * slab;
                    run = 0;
                }
                run += 1;
            }
            count[b] += run;
        });
    // Each (bucket, chunk) pair's first slot: buckets in order, chunks in order within a bucket.
    let bucket_start = &mut bins.bucket_start;
    bucket_start.resize(buckets + 1, 0);
    let mut next = 0u32;
    for b in 0..buckets {
        bucket_start[b] = next;
        for c in 0..chunks {
            let slot = &mut bins.counts[c * buckets + b];
            let m = *slot;
            *slot = next;
            next += m;
        }
    }
    bucket_start[buckets] = next;
    let alive = next as usize;
    bins.grouped.resize(alive, 0);
    {
        let grouped = SharedSlice::new(&mut bins.grouped);
        bins.counts
            .par_chunks_mut(buckets)
            .enumerate()
            .for_each(|(c, cursor)| {
                // As for the counts: the cursor of a run's bucket stays in a register until the run ends.
                let (mut b, mut keys_of_b, mut at) = (0, 0..0, cursor[0]);
                for i in par::chunk_range(n, PARTICLE_CHUNK, c) {
                    let k = keys[i];
                    if k == DEAD {
                        continue;
                    }
                    let k = k as usize;
                    if !keys_of_b.contains(&k) {
                        cursor[b] = at;
                        b = k / slab;
                        keys_of_b = b * slab..(b + 1) * slab;
                        at = cursor[b];
                    }
                    // SAFETY: slot `at` lies in the range of pair (b, c), which only this task writes, and
                    // the cursor visits each slot of it once.
                    unsafe { grouped.slice_mut(at as usize..at as usize + 1)[0] = i as u32 };
                    at += 1;
                }
                cursor[b] = at;
            });
    }
    bins.order.resize(alive, 0);
    let total = bins.start.len() - 1;
    bins.start[total] = next;
    {
        let order = SharedSlice::new(&mut bins.order);
        let grouped = &bins.grouped;
        bins.start[..total]
            .par_chunks_mut(slab)
            .enumerate()
            .for_each_init(Vec::new, |cursor, (b, start)| {
                let (first, end) = (bucket_start[b], bucket_start[b + 1]);
                let base = (b * slab) as u32;
                // Counts, then cursors, in a bucket-sized scratch (which stays in cache) rather than in
                // `start` (one write pass over it instead of three).
                cursor.clear();
                cursor.resize(start.len(), 0u32);
                let members = &grouped[first as usize..end as usize];
                for &i in members {
                    cursor[(keys[i as usize] - base) as usize] += 1;
                }
                // Exclusive prefix sums from the bucket's first slot: each key's start and cursor.
                let mut at = first;
                for (s, c) in start.iter_mut().zip(cursor.iter_mut()) {
                    let m = *c;
                    *s = at;
                    *c = at - first;
                    at += m;
                }
                // SAFETY: the bucket's slots `first..end` are written by this task only.
                let out = unsafe { order.slice_mut(first as usize..end as usize) };
                for &i in members {
                    let c = &mut cursor[(keys[i as usize] - base) as usize];
                    out[*c as usize] = i;
                    *c += 1;
                }
            });
    }
    p.permute(&bins.order, &mut bins.tmp);
    n - alive
}

/// Cells per slab of the particle-to-grid scatter, along the slowest axis. A particle writes to faces at
/// most one cell below and two above its cell's row there, so slabs two cells thick that are two slabs apart
/// never share a face; fixed, so that the passes never depend on the thread count.
const SLAB: usize = 2;

/// Particles per batch of the particle-to-grid scatter: a batch's weights are computed together, in loops
/// across its particles that the compiler vectorises, and then added to the faces one particle at a time.
const BATCH: usize = 32;

/// The tent weights of a batch of particles along one axis, for one kind of face position (integer or
/// half-integer): per particle the lower face of its 2-face window, clamped into an axis of `n` faces so that
/// both faces exist (a face the kernel reaches beyond the array then lies in the window with weight 0), the
/// offset `d = i0 − t` (cells) of that face from the particle at `t`, and the two faces' weights.
#[derive(Clone, Copy)]
struct AxisWeights {
    i0: [usize; BATCH],
    d: [f64; BATCH],
    w: [[f64; BATCH]; 2],
}

impl AxisWeights {
    #[inline(always)]
    fn new(t: &[f64; BATCH], n: usize) -> Self {
        let mut out = Self {
            i0: [0; BATCH],
            d: [0.0; BATCH],
            w: [[0.0; BATCH]; 2],
        };
        for j in 0..BATCH {
            // `max` maps NaN to 0, so `i0` is an integer in [0, n − 2].
            let i0 = t[j].floor().max(0.0).min((n - 2) as f64);
            let d = i0 - t[j];
            // SAFETY: `i0` is a whole number in [0, n − 2], so it fits a usize (`as` would saturate, which
            // does not vectorise).
            out.i0[j] = unsafe { i0.to_int_unchecked::<usize>() };
            out.d[j] = d;
            out.w[0][j] = (1.0 - d.abs()).max(0.0);
            out.w[1][j] = (1.0 - (d + 1.0).abs()).max(0.0);
        }
        out
    }
}

/// Particle-to-grid transfer (Eng "Particle-to-Grid"; Bridson, §7.6): every face velocity becomes the
/// weighted average `u_f = Σ_p w_fp u_p / Σ_p w_fp` with the multilinear (tent) weight `w_fp`, over the
/// particles within one cell of the face; 0 where no particle is near. With APIC the particle velocity at the
/// face is `v_p + C_p (x_f − x_p)` (Jiang et al. 2015, eq. 11 with the momentum divided by the mass).
///
/// Each particle computes its weights once and adds them to its 2ᴰ faces per component, as the scatter of
/// Eng does, but without atomics: the sorted particles are cut into slabs of [`SLAB`] cells along the
/// slowest axis, the even slabs run in parallel, then the odd ones. Slabs of one pass touch disjoint faces,
/// and every face receives its sums in one fixed order (sorted particles, even slab before odd), so the
/// result is bit-identical for any thread count. `sums` receives `[Σ_p w_fp, Σ_p w_fp u_fp]` per face, side by
/// side so that one read-modify-write adds both.
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2+fma"))]
pub(crate) fn particles_to_grid<const D: usize>(
    p: &Particles<D>,
    bins: &HalfCellBins<D>,
    u: &mut MacGrid<D>,
    sums: &mut [Grid<[f32; 2], D>; D],
    transfer: Transfer,
) {
    let (origin, h) = (u.origin, u.spacing);
    let inv_h = 1.0 / h;
    let dims = u.dims;
    let last = D - 1;
    let sub_strides = strides_of(bins.sub_dims);
    let apic = transfer == Transfer::Apic;
    let face_dims: [[usize; D]; D] = std::array::from_fn(|k| u.u[k].dims);
    let face_strides: [[usize; D]; D] = std::array::from_fn(|k| u.u[k].strides());
    for (g, f) in sums.iter_mut().zip(&u.u) {
        g.data.clear();
        g.data.resize(f.data.len(), [0.0f32; 2]);
    }
    {
        let shared: [SharedSlice<[f32; 2]>; D] = {
            let mut it = sums.iter_mut();
            std::array::from_fn(|_| SharedSlice::new(&mut it.next().expect("D components").data))
        };
        let slabs = dims[last].div_ceil(SLAB);
        for parity in 0..2 {
            par::for_each(slabs.div_ceil(2), 1, |j| {
                let slab = 2 * j + parity;
                if slab >= slabs {
                    return;
                }
                let (c_lo, c_hi) = (slab * SLAB, ((slab + 1) * SLAB).min(dims[last]));
                let first = bins.start[2 * c_lo * sub_strides[last]] as usize;
                let end = bins.start[2 * c_hi * sub_strides[last]] as usize;
                // The faces this slab may touch: rows c_lo − 1 ..= c_hi of the slowest axis (a particle of
                // row c reaches rows c − 1 ..= c + 1 of the other components' faces and c ..= c + 1 of its own).
                let rows_lo = c_lo.saturating_sub(1);
                let mut out: [&mut [[f32; 2]]; D] = [(); D].map(|_| &mut [][..]);
                for k in 0..D {
                    let rows_hi = c_hi.min(face_dims[k][last] - 1);
                    let r = rows_lo * face_strides[k][last]..(rows_hi + 1) * face_strides[k][last];
                    // SAFETY: slabs of one pass are two slabs apart, so their face rows never overlap.
                    out[k] = unsafe { shared[k].slice_mut(r) };
                }
                let mut i = first;
                while i < end {
                    let m = BATCH.min(end - i);
                    // Per axis, the weights of the faces at half-integer positions along it (those of the
                    // other components) and at integer positions (its own component's). Slots past the
                    // batch's end hold a particle at the origin and are not scattered.
                    let at: [[AxisWeights; 2]; D] = std::array::from_fn(|a| {
                        let mut t = [0.0; BATCH];
                        for (tj, &x) in t.iter_mut().zip(&p.pos[a][i..i + m]) {
                            *tj = (x as f64 - origin[a]) * inv_h;
                        }
                        let half = t.map(|t| t - 0.5);
                        [
                            AxisWeights::new(&half, dims[a]),
                            AxisWeights::new(&t, dims[a] + 1),
                        ]
                    });
                    for k in 0..D {
                        let axis: [&AxisWeights; D] =
                            std::array::from_fn(|a| &at[a][(a == k) as usize]);
                        let strides = face_strides[k];
                        // The particles' lower window corners (bit a: upper face along axis a) in this slab's
                        // rows.
                        let base = |j: usize| -> usize {
                            let mut base = 0;
                            for (a, ax) in axis.iter().enumerate() {
                                let row = if a == last {
                                    ax.i0[j] - rows_lo
                                } else {
                                    ax.i0[j]
                                };
                                base += row * strides[a];
                            }
                            base
                        };
                        let o = &mut *out[k];
                        if !apic {
                            // Without APIC every face of the window takes the particle's own velocity, so a
                            // window row's two faces along x (adjacent in memory) are added together: the
                            // weights `(w_x w_y) w_z` of both and their products with `v`, as four lanes.
                            for j in 0..m {
                                let v = p.vel[k][i + j] as f64;
                                let (w0, w1) = (axis[0].w[0][j], axis[0].w[1][j]);
                                let b = base(j);
                                for r in 0..(1usize << (D - 1)) {
                                    let mut w = [w0, w0, w1, w1];
                                    let mut at = b;
                                    for (a, ax) in axis.iter().enumerate().skip(1) {
                                        let up = (r >> (a - 1)) & 1;
                                        at += up * strides[a];
                                        for wl in w.iter_mut() {
                                            *wl *= ax.w[up][j];
                                        }
                                    }
                                    let add = [w[0], w[1] * v, w[2], w[3] * v].map(|x| x as f32);
                                    let pair = &mut o[at..at + 2];
                                    pair[0][0] += add[0];
                                    pair[0][1] += add[1];
                                    pair[1][0] += add[2];
                                    pair[1][1] += add[3];
                                }
                            }
                            continue;
                        }
                        // Per corner of the window, its weight and weighted velocity for each particle; with
                        // APIC the velocity at the face is `v + Σ_a C_ka (x_f − x_p)_a`.
                        let mut w = [[0.0f64; BATCH]; 8];
                        let mut wv = [[0.0f64; BATCH]; 8];
                        let mut vk = [0.0f64; BATCH];
                        for (v, &x) in vk.iter_mut().zip(&p.vel[k][i..i + m]) {
                            *v = x as f64;
                        }
                        let mut offset = [0usize; 8];
                        for corner in 0..(1usize << D) {
                            let mut wc = [1.0f64; BATCH];
                            let mut vc = vk;
                            for (a, ax) in axis.iter().enumerate() {
                                let up = (corner >> a) & 1;
                                offset[corner] += up * strides[a];
                                for j in 0..BATCH {
                                    wc[j] *= ax.w[up][j];
                                }
                                if apic {
                                    let c = &p.affine[k][a][i..i + m];
                                    for j in 0..m {
                                        vc[j] += c[j] as f64 * h * (ax.d[j] + up as f64);
                                    }
                                }
                            }
                            for j in 0..BATCH {
                                w[corner][j] = wc[j];
                                wv[corner][j] = wc[j] * vc[j];
                            }
                        }
                        for j in 0..m {
                            let base = base(j);
                            for corner in 0..(1usize << D) {
                                let f = &mut o[base + offset[corner]];
                                f[0] += w[corner][j] as f32;
                                f[1] += wv[corner][j] as f32;
                            }
                        }
                    }
                    i += m;
                }
            });
        }
    }
    velocities_from_sums(u, sums);
}

/// The face velocities of the particle-to-grid transfer from its sums `[Σ w, Σ w u]`: their quotient, 0 on
/// a face no particle reaches.
pub(crate) fn velocities_from_sums<const D: usize>(
    u: &mut MacGrid<D>,
    sums: &[Grid<[f32; 2], D>; D],
) {
    for (g, f) in u.u.iter_mut().zip(sums.iter()) {
        g.par_for_each_mut(|i, _, v| {
            let [w, m] = f.data[i].map(f64::from);
            *v = if w > 0.0 { m / w } else { 0.0 };
        });
    }
}

/// Where a device's particle-to-grid transfer leaves its results on the host
/// ([`TransferDevice::particles_to_grid`], [`KeptTransfer::out`]).
#[derive(Debug)]
pub enum GridSums<'a, const D: usize> {
    /// The sums themselves, per face `[Σ w, Σ w u]`, one grid per velocity component shaped as its faces.
    Sums(&'a mut [Grid<[f32; 2], D>; D]),
    /// What the step derives from the sums, which the device forms from its own copy of them: only these
    /// come back, 4 bytes a face and 4 a cell instead of the sums' 8 a face.
    Derived(Derived<'a, D>),
}

/// What a FLIP step derives from the particle-to-grid sums ([`GridSums::Derived`]), in single precision on a
/// device: the face velocities of [`velocities_from_sums`] and the fill fraction of
/// [`fill_fraction`](super::mark::fill_fraction), each to the device's own rounding.
#[derive(Debug)]
pub struct Derived<'a, const D: usize> {
    /// The face velocities (m/s): `Σ w u / Σ w`, 0 on a face no particle reaches.
    pub u: &'a mut MacGrid<D>,
    /// The fill fraction of every cell (dimensionless).
    pub fill: &'a mut Grid<f64, D>,
    /// Whether the domain is closed: a kernel cut by a wall is divided by the part of it left inside.
    pub closed: bool,
    /// Particles seeded per cell, the fill fraction's unit.
    pub seeds: f64,
}

impl<const D: usize> GridSums<'_, D> {
    /// Fills `self` from the host's `sums`: copies them, or derives from them as the CPU does (in double
    /// precision).
    pub fn take_from(self, sums: &[Grid<[f32; 2], D>; D]) {
        match self {
            GridSums::Sums(out) => {
                for (o, s) in out.iter_mut().zip(sums) {
                    o.data.copy_from_slice(&s.data);
                }
            }
            GridSums::Derived(d) => {
                velocities_from_sums(d.u, sums);
                super::mark::fill_fraction(sums, d.closed, d.seeds, d.fill);
            }
        }
    }

    /// Sets `self` as for no particles: zero sums, or zero velocities and fill.
    pub fn clear(self) {
        match self {
            GridSums::Sums(out) => out.iter_mut().for_each(|g| g.data.fill([0.0; 2])),
            GridSums::Derived(d) => {
                d.u.u.iter_mut().for_each(|g| g.data.fill(0.0));
                d.fill.data.fill(0.0);
            }
        }
    }
}

/// The CPU's transfers as a [`TransferDevice`]: the reference a device is compared with. Its
/// particle-to-grid transfer sorts a copy of the particles by half cell and scatters them, its
/// grid-to-particle pass moves them, both as a [`FlipSim`](super::FlipSim) does.
#[derive(Clone, Debug, Default)]
pub struct CpuTransfer;

/// What the grid-to-particle pass reads besides the particles: the grids and the step's settings
/// ([`TransferDevice::grid_to_particles_advect`]).
#[derive(Clone, Copy)]
pub struct Advection<'a, const D: usize> {
    /// The grid velocity after projection and extrapolation (m/s).
    pub u: &'a MacGrid<D>,
    /// The grid velocity saved after the particle-to-grid transfer (m/s), for the FLIP update. With
    /// `unchanged`, a device whose own transfer of this substep left its sums in place may derive it from
    /// them instead, to its own division's rounding ([`GridSums::Derived`]).
    pub u_old: &'a MacGrid<D>,
    /// The volume correction's displacement (m) on the faces.
    pub displacement: Displacement<'a, D>,
    pub transfer: Transfer,
    /// The PIC share of the FLIP blend.
    pub pic_ratio: f64,
    /// The obstacles at the end of the step, out of which particles are pushed.
    pub obstacles: &'a [Shape],
    pub boundary: Boundary,
    /// The step (s).
    pub dt: f64,
    /// Whether the particles are those this device's [`TransferDevice::particles_to_grid`] of the same
    /// substep received, unchanged since: a device that kept a copy need not receive them again.
    pub unchanged: bool,
    /// Whose particles the device keeps, when the pass is to move those ([`TransferDevice::sort_to_grid`]
    /// of the same substep) and leave the `particles` it is given as they are.
    pub kept: Option<KeptParticles>,
    /// `Some(layers)`: `u` is the projected velocity before its extrapolation, which the device does itself
    /// before the pass ([`TransferDevice::extrapolates`]): `layers` layers from the faces next to a cell that
    /// holds one of the kept particles, then the closed walls' faces back to 0. Only with `kept` and no
    /// obstacles.
    pub extrapolate: Option<usize>,
    /// Whether the device formed this substep's projected velocity itself
    /// ([`TransferDevice::project_velocity`]): `u` then gives the grid's shape and the host's copy, which
    /// the device need not receive.
    pub projected: bool,
}

/// The stages of the pressure projection, for a device to apply to its own copy of the velocity as the host
/// applies them to `u` (`project.rs`), in double precision: the body force `u += Δt g` on every face (an
/// axis without gravity untouched) and the closed walls' faces set to 0; the right-hand side
/// `scale (Σₖ (u_above − u_below)) inv_h` of each fluid cell ([`TransferDevice::rhs_to_faces`]); after the
/// solve, `u −= coef (p_above − p_below)` on each face between two non-solid cells with fluid on a side,
/// rounded once to single precision ([`TransferDevice::project_velocity`]).
#[derive(Clone, Copy, Debug)]
pub struct Projection<const D: usize> {
    /// `Δt g` per axis (m/s), `None` on an axis without gravity.
    pub force: [Option<f64>; D],
    /// `1 / h` (1/m), the divergence's factor.
    pub inv_h: f64,
    /// `−ρ / Δt` (kg s/m³), the right-hand side's factor.
    pub scale: f64,
    /// `Δt / (ρ h)` (m³ s / kg): the pressure difference's factor.
    pub coef: f64,
    pub boundary: Boundary,
    /// Whose kept particles mark the fluid cells (those holding one; without obstacles the only solids are
    /// the walls).
    pub kept: KeptParticles,
}

/// Where the grid-to-particle pass finds the volume correction's displacement ([`Advection::displacement`]).
#[derive(Clone, Copy)]
pub enum Displacement<'a, const D: usize> {
    /// None: no correction ran this substep.
    None,
    /// On the faces of this grid (m).
    Host(&'a MacGrid<D>),
    /// On the device's face field ([`TransferDevice::face_field`]), where the pressure device's
    /// [`PoissonDevice::solve_gradient`](crate::linsolve::PoissonDevice::solve_gradient) of this substep
    /// left it.
    Device,
}

/// The particles a device keeps between its passes, named by the simulation that keeps them there
/// ([`TransferDevice::sort_to_grid`]): a device shared by several simulations tells theirs apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KeptParticles(pub u64);

impl KeptParticles {
    /// A name no other simulation of this process has.
    pub fn unique() -> Self {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        Self(NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
    }
}

/// The particle-to-grid transfer of the particles a device keeps ([`TransferDevice::sort_to_grid`]).
#[derive(Debug)]
pub struct KeptTransfer<'a, const D: usize> {
    /// The particles to keep from now on, in place of those kept before; `None` for those kept.
    pub upload: Option<&'a Particles<D>>,
    /// Whose particles they are.
    pub owner: KeptParticles,
    /// The grid (its dimensions, origin and spacing; its values are not read).
    pub grid: &'a MacGrid<D>,
    pub transfer: Transfer,
    /// Where the transfer's results go, as with [`TransferDevice::particles_to_grid`].
    pub out: GridSums<'a, D>,
    /// Particles per cell, as the CPU's sort counts them (by the device's key).
    pub count: &'a mut Grid<u32, D>,
}

/// A device that runs the particle passes of a [`FlipSim`](super::FlipSim) (the GPU backend). Each pass
/// returns `Ok(false)` when the device does not take the problem, which the CPU then runs, and the device's
/// own report when it failed.
pub trait TransferDevice<const D: usize>: Send {
    /// The particle-to-grid transfer: the sums of [`particles_to_grid`] for `particles` (alive and inside
    /// the domain, as the step's sort leaves them) on `grid` (its dimensions, origin and spacing; its values
    /// are not read) — per face `[Σ_p w_fp, Σ_p w_fp u_fp]` with the multilinear tent weight and, with APIC,
    /// the affine velocity at the face — in an order of its own that is fixed, so that a run repeats bit for
    /// bit on one device; into `out` as it asks: the sums, or what the step derives from them.
    ///
    /// # Errors
    /// What the device reported when it failed.
    fn particles_to_grid(
        &mut self,
        particles: &Particles<D>,
        grid: &MacGrid<D>,
        transfer: Transfer,
        out: GridSums<'_, D>,
    ) -> Result<bool, String>;

    /// The grid-to-particle transfer and advection of every particle, as the CPU's pass: the new velocity
    /// (PIC, FLIP blend or APIC with its affine matrix) from `step.u` at the particle, then the midpoint move
    /// through `step.u` plus the volume correction's displacement, out of the obstacles and against the
    /// walls (a particle that left an open domain gets a NaN position).
    ///
    /// # Errors
    /// What the device reported when it failed.
    fn grid_to_particles_advect(
        &mut self,
        particles: &mut Particles<D>,
        step: &Advection<'_, D>,
    ) -> Result<bool, String>;

    /// The face field from which [`grid_to_particles_advect`](Self::grid_to_particles_advect) reads a
    /// [`Displacement::Device`]: the id that a pressure device writing into the same field reports
    /// ([`PoissonDevice::face_field`](crate::linsolve::PoissonDevice::face_field)). `None` (the default): it
    /// reads none.
    fn face_field(&self) -> Option<u64> {
        None
    }

    /// Whether the device extrapolates the grid velocity itself before the pass that moves the particles it
    /// keeps ([`Advection::extrapolate`]), as the CPU's extrapolation does but in single precision, so that
    /// the host need not. The simulation asks for it only without obstacles (the only solids then are the
    /// walls). `false` (the default): the host extrapolates.
    fn extrapolates(&self) -> bool {
        false
    }

    /// Writes the projection's right-hand side into the face field
    /// ([`face_field`](Self::face_field)) as f64 in the pressure solve's padded layout
    /// ([`Layout`](crate::linsolve::Layout)), for the pressure device's
    /// [`PoissonDevice::solve_rhs_in_faces`](crate::linsolve::PoissonDevice::solve_rhs_in_faces), so that
    /// the host need not send it: `step.scale` times the divergence of the velocity of the device's own
    /// particle-to-grid transfer of this substep on `grid` with the body force and the walls (as
    /// [`project_velocity`](Self::project_velocity) forms it before the pressure difference) on each cell
    /// that holds one of `step.kept`'s particles, 0 on the others. Bit for bit the host's, where the device's
    /// double-precision arithmetic rounds as the CPU's. `Ok(false)` (the default): not offered here.
    ///
    /// # Errors
    /// What the device reported when it failed.
    fn rhs_to_faces(&mut self, grid: &MacGrid<D>, step: &Projection<D>) -> Result<bool, String> {
        let _ = (grid, step);
        Ok(false)
    }

    /// Forms the projected velocity of this substep on the device, in the single-precision copy that the
    /// next [`grid_to_particles_advect`](Self::grid_to_particles_advect) reads (with
    /// [`Advection::projected`]), so that the host need not send it: the face velocities of the device's
    /// own particle-to-grid transfer of this substep on `grid` (the sums' quotient, as
    /// [`GridSums::Derived`] gave them), the stages of `step`, and the pressure that the pressure device
    /// left in the face field ([`PoissonDevice::solution_to_faces`]). Bit for bit what the host's stages
    /// give, where the device's double-precision arithmetic rounds as the CPU's. `Ok(false)` (the default):
    /// not offered here (the host then sends its velocity).
    ///
    /// # Errors
    /// What the device reported when it failed.
    ///
    /// [`PoissonDevice::solution_to_faces`]: crate::linsolve::PoissonDevice::solution_to_faces
    fn project_velocity(
        &mut self,
        grid: &MacGrid<D>,
        step: &Projection<D>,
    ) -> Result<bool, String> {
        let _ = (grid, step);
        Ok(false)
    }

    /// Writes the volume correction's right-hand side into the face field, as
    /// [`rhs_to_faces`](Self::rhs_to_faces) writes the projection's, for the pressure device's
    /// [`PoissonDevice::solve_gradient_rhs_in_faces`], so that the host need not send it: on each cell
    /// holding one of `kept`'s particles, `kappa (f − 1)` with `f` the fill fraction that the device
    /// derived in this substep's transfer on `grid` ([`GridSums::Derived`]), or `kappa max(f − 1, 0)` where
    /// a neighbour inside the domain holds none; 0 on the other cells. Called after [`project_velocity`](Self::project_velocity), whose pressure
    /// it writes over. Bit for bit the host's target (without obstacles). `Ok(false)` (the default): not
    /// offered here, or the device did not form this substep's projection.
    ///
    /// # Errors
    /// What the device reported when it failed.
    ///
    /// [`PoissonDevice::solve_gradient_rhs_in_faces`]:
    ///     crate::linsolve::PoissonDevice::solve_gradient_rhs_in_faces
    fn excess_to_faces(
        &mut self,
        grid: &MacGrid<D>,
        kappa: f64,
        kept: KeptParticles,
    ) -> Result<bool, String> {
        let _ = (grid, kappa, kept);
        Ok(false)
    }

    /// Whether the device tallies the step's cell quantities on its own copy of the grid
    /// ([`grid_tally`](Self::grid_tally)) in the substeps whose projection it forms: the simulation then
    /// leaves the body force and the projection of its own copy until the state is read. `false` (the
    /// default): it does not.
    fn tallies_grid(&self) -> bool {
        false
    }

    /// [`GridTally`](super::GridTally) of this substep on `grid`, with its bits: the fill fraction that the
    /// device derived in its transfer, in blocks summed as the host sums them, and the divergence of the
    /// velocity that [`project_velocity`](Self::project_velocity) formed, before its rounding to single
    /// precision, over the cells holding one of its kept particles. `Ok(None)` where the device did not form
    /// both in this substep.
    ///
    /// # Errors
    /// What the device reported when it failed.
    fn grid_tally(&mut self, grid: &MacGrid<D>) -> Result<Option<super::GridTally>, String> {
        let _ = grid;
        Ok(None)
    }

    /// Whether the device keeps the particles between its passes: the simulation then leaves them there
    /// from one substep to the next, sorted by [`sort_to_grid`](Self::sort_to_grid), moved by
    /// [`grid_to_particles_advect`](Self::grid_to_particles_advect) with [`Advection::kept`], and read back by
    /// [`read_kept`](Self::read_kept) once a step, or tallied by [`tally_kept`](Self::tally_kept) and read
    /// back once per output frame.
    fn keeps_particles(&self) -> bool {
        false
    }

    /// The sort and the particle-to-grid transfer of the particles the device keeps for `t.owner` (or of
    /// `t.upload`, which it keeps from now on): the particles in half-cell order as the CPU's sort orders
    /// them (by half cell, each half cell's in index order; those outside the domain or not finite dropped),
    /// by the device's own key (which may put a particle within rounding of a half cell's side in the
    /// neighbouring one), kept in that order; the sums of [`particles_to_grid`](Self::particles_to_grid)
    /// over them into `t.out`, and their count per cell into `t.count`.
    /// Returns how many particles the device keeps, or `None` when it keeps none for `t.owner` (another
    /// simulation's took their place) and `t.upload` is `None`.
    ///
    /// # Errors
    /// What the device reported when it failed.
    fn sort_to_grid(&mut self, t: KeptTransfer<'_, D>) -> Result<Option<usize>, String> {
        let _ = t;
        Ok(None)
    }

    /// The particles the device keeps for `owner`, into `particles` (resized to their number). `Ok(false)`
    /// when it keeps none for `owner`.
    ///
    /// # Errors
    /// What the device reported when it failed.
    fn read_kept(
        &mut self,
        owner: KeptParticles,
        particles: &mut Particles<D>,
    ) -> Result<bool, String> {
        let _ = (owner, particles);
        Ok(false)
    }

    /// [`Tally::over`] of the particles the device keeps for `owner` (positions added when `positions`), with
    /// its bits: each chunk of [`Tally::CHUNK`] particles in their kept order cut into [`Tally::LANES`] lanes
    /// and its lanes combined as [`Tally::over`] does, and the chunks by [`Tally::fold`]. `Ok(None)` when the
    /// device keeps none for `owner`, or cannot add in double precision: the simulation then reads the
    /// particles back and tallies them itself.
    ///
    /// # Errors
    /// What the device reported when it failed.
    fn tally_kept(
        &mut self,
        owner: KeptParticles,
        positions: bool,
    ) -> Result<Option<Tally<D>>, String> {
        let _ = (owner, positions);
        Ok(None)
    }
}

/// Particles per batch of the grid-to-particle pass ([`FaceStencils`]).
pub(crate) const SAMPLE_BATCH: usize = 32;

/// The multilinear stencils of a batch of points on every component's faces: per component the data index
/// of each point's lower stencil corner and its fractions along each axis.
///
/// A point's stencil along an axis is the pair of faces around it, for the faces at half-integer positions
/// along the axis (those of the other components) or at integer ones (the axis' own component), clamped like
/// [`Grid::sample`]. The stencils of a whole batch are found together, in loops across its points that the
/// compiler vectorises; the samples then read them point by point. Batching also lets the processor overlap
/// the memory reads of many points: one point's chain of dependent steps (position, stencil, reads,
/// interpolation) is longer than its out-of-order window reaches.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FaceStencils<const D: usize> {
    base: [[usize; SAMPLE_BATCH]; D],
    frac: [[[f64; SAMPLE_BATCH]; D]; D],
}

impl<const D: usize> FaceStencils<D> {
    /// The stencils of the points `s` (per axis, positions in cell units from the domain's lower corner) on a
    /// grid of `dims` cells (at least 2 per axis, so that the upper face of a pair always exists), whose
    /// component `k` has face strides `strides[k]`.
    #[inline(always)]
    pub fn new(s: &[[f64; SAMPLE_BATCH]; D], dims: [usize; D], strides: &[[usize; D]; D]) -> Self {
        let mut out = Self {
            base: [[0; SAMPLE_BATCH]; D],
            frac: [[[0.0; SAMPLE_BATCH]; D]; D],
        };
        for a in 0..D {
            let n = dims[a];
            // `n` faces at half-integer positions, `n + 1` at integer ones.
            let (mut half, mut whole) = ([0; SAMPLE_BATCH], [0; SAMPLE_BATCH]);
            let (mut half_frac, mut whole_frac) = ([0.0; SAMPLE_BATCH], [0.0; SAMPLE_BATCH]);
            for j in 0..SAMPLE_BATCH {
                let t = s[a][j];
                (half[j], half_frac[j]) =
                    Self::lower((t - 0.5).max(0.0).min((n - 1) as f64), n - 2);
                (whole[j], whole_frac[j]) = Self::lower(t.max(0.0).min(n as f64), n - 1);
            }
            for k in 0..D {
                let (i0, f) = if a == k {
                    (&whole, whole_frac)
                } else {
                    (&half, half_frac)
                };
                for (b, i) in out.base[k].iter_mut().zip(i0) {
                    *b += i * strides[k][a];
                }
                out.frac[k][a] = f;
            }
        }
        out
    }

    /// The lower face of the pair around `t` (`max` has mapped NaN to 0: `t` is in [0, top + 1]), at most
    /// `top`, and the fraction towards the upper one.
    #[inline(always)]
    fn lower(t: f64, top: usize) -> (usize, f64) {
        let i0 = t.floor().min(top as f64);
        // SAFETY: `i0` is a whole number in [0, top], so it fits a usize (`as` would saturate: more
        // instructions).
        (unsafe { i0.to_int_unchecked::<usize>() }, t - i0)
    }

    /// The `L` fields packed side by side in `data`, component `k`'s faces with `strides`, interpolated at
    /// point `j`, in f64 (one load per corner serves all of them): linear interpolation along x in each of the
    /// stencil's 2ᴰ⁻¹ rows, then along the other axes, the slowest first (2ᴰ − 1 lerps, fewer operations than
    /// a sum of 2ᴰ weighted corners).
    #[inline(always)]
    pub fn sample<const L: usize>(
        &self,
        k: usize,
        j: usize,
        data: &[[f32; L]],
        strides: [usize; D],
    ) -> [f64; L] {
        let f: [f64; D] = std::array::from_fn(|a| self.frac[k][a][j]);
        let widen = |x: [f32; L]| x.map(f64::from);
        let mut v = [[0.0f64; L]; 4];
        for (r, vr) in v.iter_mut().enumerate().take(1 << (D - 1)) {
            let mut o = self.base[k][j];
            for a in 1..D {
                if (r >> (a - 1)) & 1 == 1 {
                    o += strides[a];
                }
            }
            let (lo, hi) = (widen(data[o]), widen(data[o + 1]));
            for l in 0..L {
                vr[l] = lo[l] + f[0] * (hi[l] - lo[l]);
            }
        }
        for a in (1..D).rev() {
            let m = 1 << (a - 1);
            for r in 0..m {
                for l in 0..L {
                    v[r][l] += f[a] * (v[r + m][l] - v[r][l]);
                }
            }
        }
        v[0]
    }
}

/// The gradients (1/m) of the multilinear interpolation weights of a face grid at `x` (m), clamped like
/// [`Grid::sample`], with the 2ᴰ data indices they belong to.
#[inline]
fn gradient_stencil<const D: usize>(g: &Grid<f64, D>, x: [f64; D]) -> ([usize; 8], [[f64; D]; 8]) {
    let strides = g.strides();
    let h = g.spacing;
    let mut lo = [0usize; D];
    let mut hi = [0usize; D];
    let mut frac = [0.0f64; D];
    let mut inside = [true; D];
    for k in 0..D {
        let n = g.dims[k];
        let raw = (x[k] - g.origin[k]) / h - 0.5;
        let s = raw.clamp(0.0, (n - 1) as f64);
        inside[k] = raw == s;
        let i0 = (s.floor() as usize).min(n.saturating_sub(2));
        lo[k] = i0 * strides[k];
        hi[k] = (i0 + 1).min(n - 1) * strides[k];
        frac[k] = s - i0 as f64;
    }
    let mut idx = [0usize; 8];
    let mut grad = [[0.0f64; D]; 8];
    for corner in 0..(1usize << D) {
        let mut ic = 0;
        let mut f = [0.0; D];
        for k in 0..D {
            let up = (corner >> k) & 1 == 1;
            f[k] = if up { frac[k] } else { 1.0 - frac[k] };
            ic += if up { hi[k] } else { lo[k] };
        }
        for a in 0..D {
            if !inside[a] {
                continue;
            }
            let mut gsum = if (corner >> a) & 1 == 1 { 1.0 } else { -1.0 } / h;
            for b in 0..D {
                if b != a {
                    gsum *= f[b];
                }
            }
            grad[corner][a] = gsum;
        }
        idx[corner] = ic;
    }
    (idx, grad)
}

/// Grid-to-particle transfer of a batch of particles (Eng "Grid-To-Particle"; Zhu & Bridson 2005, §3.2;
/// Jiang et al. 2015): with `u` the new grid velocity and `u_old` the one saved after the particle-to-grid
/// transfer,
///
/// * PIC: `v_p = u(x_p)`;
/// * FLIP blend: `v_p = α u(x_p) + (1 − α) (v_p + (u − u_old)(x_p))`, α = `pic_ratio`;
/// * APIC: `v_p = u(x_p)` and `C_p = Σ_f u_f ∇w_f(x_p)ᵀ` per component (Jiang et al. 2015, eq. 8 with the
///   gradient of the multilinear weights).
///
/// The batch is the particles `batch` of the arrays given: particle `p` has position `x[k][p]` (m), from which
/// APIC's gradient stencil is taken on `u`, velocity `vel[k][p]` (m/s, updated in place) and affine matrix
/// `affine[k·D + a][p]` (1/s, written with APIC); `un[k][j]` and `du[k][j]` are `u` and `u − u_old`
/// interpolated at its `j`-th particle. PIC and the blend run in loops across the batch that the compiler
/// vectorises.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2+fma"))]
pub(crate) fn grid_to_particles<const D: usize>(
    u: &MacGrid<D>,
    transfer: Transfer,
    pic_ratio: f64,
    batch: std::ops::Range<usize>,
    x: &[&mut [f32]; D],
    un: &[[f64; SAMPLE_BATCH]; D],
    du: &[[f64; SAMPLE_BATCH]; D],
    vel: &mut [&mut [f32]; D],
    affine: &mut [&mut [f32]],
) {
    match transfer {
        Transfer::Pic => {
            for (v, un) in vel.iter_mut().zip(un) {
                for (v, &un) in v[batch.clone()].iter_mut().zip(un) {
                    *v = un as f32;
                }
            }
        }
        Transfer::Flip => {
            for ((v, un), du) in vel.iter_mut().zip(un).zip(du) {
                for ((v, &un), &du) in v[batch.clone()].iter_mut().zip(un).zip(du) {
                    *v = (pic_ratio * un + (1.0 - pic_ratio) * (*v as f64 + du)) as f32;
                }
            }
        }
        Transfer::Apic => {
            for (j, p) in batch.enumerate() {
                let xp: [f64; D] = std::array::from_fn(|k| x[k][p] as f64);
                for k in 0..D {
                    let g = &u.u[k];
                    let (idx, grad) = gradient_stencil(g, xp);
                    let mut c = [0.0; D];
                    for corner in 0..(1usize << D) {
                        let v = g.data[idx[corner]];
                        for a in 0..D {
                            c[a] += grad[corner][a] * v;
                        }
                    }
                    for a in 0..D {
                        affine[k * D + a][p] = c[a] as f32;
                    }
                    vel[k][p] = un[k][j] as f32;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grid::coords_of;
    use crate::rng::SplitMix64;

    /// [`FaceStencils::sample`] against its definition, [`Grid::sample`] on each component, at random points
    /// in and beyond a small grid (the clamping) and at NaN (read as the corner), on fields of random f32 values;
    /// the batch's last slots stay unused. Both interpolate the same f32 values in f64, in a different order
    /// of operations: they agree to a few f64 roundings of values of order 1.
    fn check_face_stencils<const D: usize>(dims: [usize; D]) {
        let (origin, h) = ([0.25; D], 0.5);
        let mut rng = SplitMix64::new(7);
        let mut u = MacGrid::<D>::new(dims, origin, h);
        for g in &mut u.u {
            for v in &mut g.data {
                *v = rng.range(-1.0, 1.0) as f32 as f64;
            }
        }
        let data: [Vec<[f32; 1]>; D] =
            std::array::from_fn(|k| u.u[k].data.iter().map(|&v| [v as f32]).collect());
        let strides: [[usize; D]; D] = std::array::from_fn(|k| u.u[k].strides());
        for round in 0..20 {
            let used = SAMPLE_BATCH - round % 3;
            let mut s = [[0.0; SAMPLE_BATCH]; D];
            for j in 0..used {
                for (k, sk) in s.iter_mut().enumerate() {
                    // From a cell outside the domain to a cell beyond it.
                    sk[j] = rng.range(-1.0, dims[k] as f64 + 1.0);
                }
            }
            if round == 0 {
                s[0][1] = f64::NAN;
            }
            let at = FaceStencils::new(&s, dims, &strides);
            for j in 0..used {
                let x: [f64; D] = std::array::from_fn(|k| {
                    let t = if s[k][j].is_nan() { 0.0 } else { s[k][j] };
                    origin[k] + t * h
                });
                for k in 0..D {
                    let got = at.sample(k, j, &data[k], strides[k])[0];
                    let want = u.u[k].sample(x);
                    assert!(
                        (got - want).abs() < 1e-14,
                        "{got} vs {want} at {x:?}, component {k}"
                    );
                }
            }
        }
    }

    #[test]
    fn face_stencils_sample_as_the_grid_does() {
        check_face_stencils([5, 4]);
        check_face_stencils([4, 3, 5]);
    }

    #[test]
    fn sort_is_stable_by_half_cell_and_drops_the_outside() {
        // Enough particles for several chunks, many sharing a half cell (ties keep their index order), some
        // outside the domain or not finite (dropped).
        let dims = [6usize, 5, 7];
        let (origin, h) = ([0.5, -1.0, 0.0], 0.25);
        let mut p = Particles::<3>::new();
        let n = 3 * PARTICLE_CHUNK + 123;
        let mut state = 12345u64;
        let mut next = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        for i in 0..n {
            let mut x: [f64; 3] =
                std::array::from_fn(|k| origin[k] + (1.1 * next() - 0.05) * dims[k] as f64 * h);
            if i % 997 == 0 {
                x[1] = f64::NAN;
            }
            // The velocity records the particle's original index.
            p.push(x, [i as f64, 0.0, 0.0], false);
        }
        let before = p.clone();
        let mut bins = HalfCellBins::new(dims);
        let dropped = sort_particles(&mut p, &mut bins, origin, h);

        // The definition: a stable sort of the particles inside the domain by half-cell index.
        let sub = bins.sub_dims;
        let strides = strides_of(sub);
        let key = |x: [f64; 3]| -> Option<usize> {
            let mut key = 0;
            for k in 0..3 {
                let s = (x[k] - origin[k]) * 2.0 / h;
                if !(s >= 0.0 && s < sub[k] as f64) {
                    return None;
                }
                key += (s as usize).min(sub[k] - 1) * strides[k];
            }
            Some(key)
        };
        let mut want: Vec<(usize, usize)> = (0..n)
            .filter_map(|i| key(before.position(i)).map(|k| (k, i)))
            .collect();
        want.sort_by_key(|&(k, _)| k);
        assert!(dropped > n / 20, "the case drops particles ({dropped})");
        assert_eq!(p.len(), want.len());
        assert_eq!(dropped, n - want.len());
        for (j, &(k, i)) in want.iter().enumerate() {
            assert_eq!(p.velocity(j)[0], i as f64, "particle {j}");
            assert!(bins.start[k] as usize <= j && j < bins.start[k + 1] as usize);
        }
        assert_eq!(*bins.start.last().unwrap() as usize, want.len());
        assert!(bins.start.windows(2).all(|w| w[0] <= w[1]));
        let mut count = Grid::new(dims, origin, h, u32::MAX);
        bins.counts_into(&mut count);
        for (i, &m) in count.data.iter().enumerate() {
            assert_eq!(m, bins.cell_count(coords_of(dims, i)), "cell {i}");
        }
        assert_eq!(count.data.iter().sum::<u32>() as usize, want.len());
    }

    /// Particle-to-grid by its definition, face by face: `u_f = Σ_p w_fp u_fp / Σ_p w_fp` with the tent weight
    /// `w_fp = Π_a max(0, 1 − |t_a − f_a|)` (positions in cells, faces at integer positions along their own
    /// axis and half-integer ones across) and `u_fp = v_p + C_p (x_f − x_p)` (C = 0 without APIC).
    fn reference<const D: usize>(p: &Particles<D>, u: &MacGrid<D>, apic: bool) -> [Vec<f64>; D] {
        std::array::from_fn(|k| {
            let g = &u.u[k];
            (0..g.data.len())
                .map(|i| {
                    let f = coords_of(g.dims, i);
                    let xf: [f64; D] =
                        std::array::from_fn(|a| f[a] as f64 + if a == k { 0.0 } else { 0.5 });
                    let (mut sw, mut swv) = (0.0, 0.0);
                    for j in 0..p.len() {
                        let x = p.position(j);
                        let t: [f64; D] = std::array::from_fn(|a| (x[a] - u.origin[a]) / u.spacing);
                        let w: f64 = (0..D)
                            .map(|a| (1.0 - (t[a] - xf[a]).abs()).max(0.0))
                            .product();
                        let mut v = p.velocity(j)[k];
                        if apic {
                            for a in 0..D {
                                v += p.affine[k][a][j] as f64 * (xf[a] - t[a]) * u.spacing;
                            }
                        }
                        sw += w;
                        swv += w * v;
                    }
                    if sw > 0.0 {
                        swv / sw
                    } else {
                        0.0
                    }
                })
                .collect()
        })
    }

    fn check_particles_to_grid<const D: usize>(dims: [usize; D], transfer: Transfer) {
        let (origin, h) = ([0.25; D], 0.5);
        let apic = transfer == Transfer::Apic;
        let mut p = Particles::<D>::new();
        let mut rng = SplitMix64::new(99);
        let mut next = || rng.next_f64();
        // About two particles per cell, some empty cells, some against the walls.
        let cells: usize = dims.iter().product();
        for _ in 0..2 * cells {
            let x: [f64; D] = std::array::from_fn(|k| origin[k] + next() * dims[k] as f64 * h);
            let v: [f64; D] = std::array::from_fn(|_| 2.0 * next() - 1.0);
            p.push(x, v, apic);
        }
        if apic {
            for row in p.affine.iter_mut() {
                for c in row.iter_mut() {
                    for x in c.iter_mut() {
                        *x = (4.0 * next() - 2.0) as f32;
                    }
                }
            }
        }
        let mut bins = HalfCellBins::new(dims);
        sort_particles(&mut p, &mut bins, origin, h);
        let mut u = MacGrid::<D>::new(dims, origin, h);
        let mut sums: [Grid<[f32; 2], D>; D] =
            std::array::from_fn(|k| Grid::new(u.u[k].dims, origin, h, [0.0; 2]));
        particles_to_grid(&p, &bins, &mut u, &mut sums, transfer);
        let want = reference(&p, &u, apic);
        for k in 0..D {
            for (i, (&got, &want)) in u.u[k].data.iter().zip(&want[k]).enumerate() {
                // The sums add the same terms in f32, the particles' precision (|u| ≲ 1 without APIC, a few
                // with it; up to 2ᴰ·2 terms of one sign in the weight sum, a few f32 roundings of 6·10⁻⁸).
                assert!(
                    (got - want).abs() <= 2e-6,
                    "{dims:?} {transfer:?}: component {k} face {i}: {got} against {want}"
                );
            }
        }
    }

    #[test]
    fn particles_to_grid_is_the_weighted_average_of_its_definition() {
        // Enough cells along the slowest axis for several slabs of each parity.
        for transfer in [Transfer::Flip, Transfer::Apic] {
            check_particles_to_grid::<3>([5, 4, 9], transfer);
            check_particles_to_grid::<2>([7, 10], transfer);
        }
    }
}
