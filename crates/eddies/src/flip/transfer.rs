//! Particle ↔ grid transfers: the counting sort of particles by half cell, the particle-to-grid gather onto
//! the MAC faces, and the grid-to-particle update (PIC, PIC/FLIP blend, APIC).
//!
//! The particle-to-grid transfer of seed 001 scatters every particle's weighted velocity onto its faces with
//! additive blending; here it is a gather, so that no two threads ever add into the same face and the sum is
//! taken in one fixed order: particles are sorted by the half-cell (a cell of edge h/2) they lie in, and each
//! face sums over the particles of the 4ᴰ half cells its tent kernel can reach, in sorted order. Every particle
//! is then visited by exactly the 2ᴰ faces of each component it influences, as in the scatter.

use super::params::Transfer;
use super::particles::Particles;
use crate::grid::{strides_of, Grid, MacGrid};
use crate::par::{self, SharedSlice};

/// Particles per task in particle loops: fixed, so that work splitting never depends on the thread count.
pub(crate) const PARTICLE_CHUNK: usize = 8192;

/// Key of a particle that is to be dropped (left an open domain, drained, thinned).
const DEAD: u32 = u32::MAX;

/// Particles binned by half cell after [`sort_particles`]: the particles of half cell `s` are
/// `start[s]..start[s + 1]`, half cells numbered x fastest on the grid of `2·dims` half cells.
#[derive(Clone, Debug)]
pub(crate) struct Bins<const D: usize> {
    /// Half cells per axis.
    pub sub_dims: [usize; D],
    /// First particle of each half cell, plus the total at the end.
    pub start: Vec<u32>,
    keys: Vec<u32>,
    order: Vec<u32>,
    tmp: Vec<f32>,
}

impl<const D: usize> Bins<D> {
    pub fn new(dims: [usize; D]) -> Self {
        let sub_dims = dims.map(|n| 2 * n);
        Self {
            sub_dims,
            start: vec![0; sub_dims.iter().product::<usize>() + 1],
            keys: Vec::new(),
            order: Vec::new(),
            tmp: Vec::new(),
        }
    }

    /// Particles in cell `c` (the sum over its 2ᴰ half cells).
    #[inline]
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
        (self.start.capacity() + self.keys.capacity() + self.order.capacity() + self.tmp.capacity())
            * 4
    }
}

/// Sorts the particles by half cell with a counting sort (stable, so the order is a function of the particle
/// data alone) and drops those whose position is not finite or outside the domain `[origin, origin + dims·h)`.
/// Returns the number dropped.
pub(crate) fn sort_particles<const D: usize>(
    p: &mut Particles<D>,
    bins: &mut Bins<D>,
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
            for (o, i) in out.iter_mut().zip(r) {
                let mut key = 0usize;
                let mut alive = true;
                for k in 0..D {
                    let s = (pos[k][i] as f64 - origin[k]) * inv;
                    if !(s >= 0.0 && s < sub[k] as f64) {
                        alive = false;
                        break;
                    }
                    key += (s as usize).min(sub[k] - 1) * strides[k];
                }
                *o = if alive { key as u32 } else { DEAD };
            }
        });
    }
    let start = &mut bins.start;
    start.fill(0);
    for &k in &bins.keys {
        if k != DEAD {
            start[k as usize + 1] += 1;
        }
    }
    for s in 1..start.len() {
        start[s] += start[s - 1];
    }
    let alive = *start.last().unwrap_or(&0) as usize;
    bins.order.resize(alive, 0);
    // The cursor of each half cell is its start, advanced as particles are placed; `start` is restored below.
    for (i, &k) in bins.keys.iter().enumerate() {
        if k != DEAD {
            let c = &mut start[k as usize];
            bins.order[*c as usize] = i as u32;
            *c += 1;
        }
    }
    // After placement start[s] holds the end of half cell s, i.e. the start of s + 1: shift back by one.
    for s in (1..start.len()).rev() {
        start[s] = start[s - 1];
    }
    start[0] = 0;
    p.permute(&bins.order, &mut bins.tmp);
    n - alive
}

/// Particle-to-grid transfer (seed 001 "Particle-to-Grid"; Bridson, §7.6): every face velocity becomes the
/// weighted average `u_f = Σ_p w_fp u_p / Σ_p w_fp` with the multilinear (tent) weight `w_fp`, over the
/// particles within one cell of the face; 0 where no particle is near. With APIC the particle velocity at the
/// face is `v_p + C_p (x_f − x_p)` (Jiang et al. 2015, eq. 11 with the momentum divided by the mass). Faces
/// are computed in parallel, each a gather over sorted particles, so the result is bit-identical for any
/// thread count. `weight` receives `Σ_p w_fp` per face.
pub(crate) fn particles_to_grid<const D: usize>(
    p: &Particles<D>,
    bins: &Bins<D>,
    u: &mut MacGrid<D>,
    weight: &mut [Grid<f64, D>; D],
    transfer: Transfer,
) {
    let (origin, h) = (u.origin, u.spacing);
    let sub = bins.sub_dims;
    let sub_strides = strides_of(sub);
    let apic = transfer == Transfer::Apic;
    for k in 0..D {
        let (uk, wk) = (&mut u.u[k], &mut weight[k]);
        wk.data.resize(uk.data.len(), 0.0);
        let weights = SharedSlice::new(&mut wk.data);
        uk.par_for_each_mut(|idx, f, val| {
            // Face position in cell units, and its window of half cells [lo, hi) per axis.
            let mut fpos = [0.0; D];
            let mut lo = [0usize; D];
            let mut hi = [0usize; D];
            for a in 0..D {
                let off = if a == k { 0 } else { 1 };
                fpos[a] = f[a] as f64 + 0.5 * off as f64;
                let l = 2 * f[a] as isize - 2 + off as isize;
                lo[a] = l.max(0) as usize;
                hi[a] = ((l + 4).max(0) as usize).min(sub[a]);
            }
            let mut sum_w = 0.0;
            let mut sum_v = 0.0;
            // Rows of half cells along x; the other axes are iterated as a counter over [lo, hi).
            let mut row = lo;
            'rows: loop {
                let mut base = 0;
                for a in 1..D {
                    base += row[a] * sub_strides[a];
                }
                let first = bins.start[base + lo[0]] as usize;
                let last = bins.start[base + hi[0]] as usize;
                for i in first..last {
                    let mut w = 1.0;
                    let mut d = [0.0; D];
                    for a in 0..D {
                        let s = (p.pos[a][i] as f64 - origin[a]) / h;
                        d[a] = fpos[a] - s;
                        w *= (1.0 - d[a].abs()).max(0.0);
                    }
                    if w > 0.0 {
                        let mut v = p.vel[k][i] as f64;
                        if apic {
                            for a in 0..D {
                                v += p.affine[k][a][i] as f64 * d[a] * h;
                            }
                        }
                        sum_w += w;
                        sum_v += w * v;
                    }
                }
                let mut a = 1;
                loop {
                    if a >= D {
                        break 'rows;
                    }
                    row[a] += 1;
                    if row[a] < hi[a] {
                        break;
                    }
                    row[a] = lo[a];
                    a += 1;
                }
            }
            *val = if sum_w > 0.0 { sum_v / sum_w } else { 0.0 };
            // SAFETY: each face index is written by the one task that visits it.
            unsafe { weights.slice_mut(idx..idx + 1)[0] = sum_w };
        });
    }
}

/// Multilinear interpolation stencil of a face grid at `x` (m), clamped like [`Grid::sample`]: the 2ᴰ data
/// indices, their weights and the weights' gradients (1/m).
#[inline]
pub(crate) fn stencil<const D: usize>(
    g: &Grid<f64, D>,
    x: [f64; D],
) -> ([usize; 8], [f64; 8], [[f64; D]; 8]) {
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
    let mut w = [0.0f64; 8];
    let mut grad = [[0.0f64; D]; 8];
    for corner in 0..(1usize << D) {
        let mut wc = 1.0;
        let mut ic = 0;
        let mut f = [0.0; D];
        for k in 0..D {
            let up = (corner >> k) & 1 == 1;
            f[k] = if up { frac[k] } else { 1.0 - frac[k] };
            wc *= f[k];
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
        w[corner] = wc;
    }
    (idx, w, grad)
}

/// Grid-to-particle transfer (seed 001 "Grid-To-Particle"; Zhu & Bridson 2005, §3.2; Jiang et al. 2015):
/// with `u` the new grid velocity and `u_old` the one saved after the particle-to-grid transfer,
///
/// * PIC: `v_p = u(x_p)`;
/// * FLIP blend: `v_p = α u(x_p) + (1 − α) (v_p + u(x_p) − u_old(x_p))`, α = `pic_ratio`;
/// * APIC: `v_p = u(x_p)` and `C_p = Σ_f u_f ∇w_f(x_p)ᵀ` per component (Jiang et al. 2015, eq. 8 with the
///   gradient of the multilinear weights).
pub(crate) fn grid_to_particles<const D: usize>(
    p: &mut Particles<D>,
    u: &MacGrid<D>,
    u_old: &MacGrid<D>,
    transfer: Transfer,
    pic_ratio: f64,
) {
    let n = p.len();
    let pos = &p.pos;
    let vel: [SharedSlice<f32>; D] = {
        let mut it = p.vel.iter_mut();
        std::array::from_fn(|_| SharedSlice::new(it.next().expect("D velocity arrays")))
    };
    let apic = transfer == Transfer::Apic;
    let affine: Vec<SharedSlice<f32>> = if apic {
        p.affine
            .iter_mut()
            .flatten()
            .map(|a| SharedSlice::new(a))
            .collect()
    } else {
        Vec::new()
    };
    par::for_each_chunk(n, PARTICLE_CHUNK, |r| {
        for i in r {
            let x: [f64; D] = std::array::from_fn(|a| pos[a][i] as f64);
            for k in 0..D {
                let (idx, w, grad) = stencil(&u.u[k], x);
                let mut un = 0.0;
                let mut uo = 0.0;
                let mut c = [0.0; D];
                for corner in 0..(1usize << D) {
                    let v = u.u[k].data[idx[corner]];
                    un += w[corner] * v;
                    if apic {
                        for a in 0..D {
                            c[a] += grad[corner][a] * v;
                        }
                    } else if transfer == Transfer::Flip {
                        uo += w[corner] * u_old.u[k].data[idx[corner]];
                    }
                }
                // SAFETY: particle i is visited by this task only.
                let vk = unsafe { &mut vel[k].slice_mut(i..i + 1)[0] };
                *vk = match transfer {
                    Transfer::Pic | Transfer::Apic => un,
                    Transfer::Flip => pic_ratio * un + (1.0 - pic_ratio) * (*vk as f64 + un - uo),
                } as f32;
                if apic {
                    for a in 0..D {
                        // SAFETY: as above.
                        unsafe { affine[k * D + a].slice_mut(i..i + 1)[0] = c[a] as f32 };
                    }
                }
            }
        }
    });
}
