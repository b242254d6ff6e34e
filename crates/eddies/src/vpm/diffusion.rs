//! Viscous diffusion by particle strength exchange (PSE; Degond & Mas-Gallic 1989, as in Gourlay parts 3
//! and 12).
//!
//! The Laplacian is replaced by an integral operator that vortons evaluate among their neighbours:
//!
//! `dαᵢ/dt = (ν/ε²) Σⱼ (Vᵢ αⱼ − Vⱼ αᵢ) η_ε(|xᵢ − xⱼ|)`,  `η_ε(r) = 4/(π^{3/2} ε³) · exp(−r²/ε²)`,
//!
//! with `ε² = (σᵢ² + σⱼ²)/2`. The Gaussian η has second moment 2 per axis, so the sum tends to `ν V ∇²ω`; it
//! falls off with distance, so sparse vortons exchange little (part 12's fix for vortons spread over many grid
//! cells), and it is cut off at r = 3ε (η below 10⁻⁴ of its peak). Each pair term is antisymmetric, so the
//! total strength Σ αᵢ is conserved up to rounding.
//!
//! Part 12 makes its scatter loop race-free with odd/even slab passes; here each vorton *gathers* from its
//! neighbours into a new array, which needs no passes at all and is deterministic by construction: the
//! neighbours are visited in a fixed order (27 bins in order, each bin in sorted order).

use super::state::Vortons;
use crate::par;
use glam::DVec3;

/// Vortons per parallel chunk.
const CHUNK: usize = 256;

/// Cut-off of the exchange kernel, in units of ε.
const CUTOFF: f64 = 3.0;

/// Buffers of the PSE stage, reused across steps.
#[derive(Clone, Debug, Default)]
pub struct Pse {
    /// (bin key, vorton) sorted.
    bins: Vec<(u64, u32)>,
    next: Vec<DVec3>,
}

impl Pse {
    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.bins.capacity() * 16 + self.next.capacity() * 24
    }

    /// Number of explicit substeps that keep the exchange stable for viscosity `nu` (m²/s) over `dt` (s).
    pub fn substeps(v: &Vortons, nu: f64, dt: f64) -> usize {
        let s_min = v.radius.iter().copied().fold(f64::INFINITY, f64::min);
        if !(s_min.is_finite() && s_min > 0.0) {
            return 1;
        }
        // Σⱼ Vⱼ η ≈ ∫η = 4 for well-spaced vortons: keep 4 ν dt/ε² ≤ 1/2.
        ((8.0 * nu * dt / (s_min * s_min)).ceil() as usize).max(1)
    }

    /// Diffuses the vortons' vorticity over `dt` seconds with kinematic viscosity `nu` (m²/s).
    pub fn diffuse(&mut self, v: &mut Vortons, nu: f64, dt: f64) {
        let n = v.len();
        if n == 0 || nu <= 0.0 {
            return;
        }
        let s_max = v.radius.iter().copied().fold(0.0f64, f64::max);
        let bin = CUTOFF * s_max;
        let lo = v
            .position
            .iter()
            .fold(DVec3::splat(f64::INFINITY), |a, &p| a.min(p));
        let hi = v
            .position
            .iter()
            .fold(DVec3::splat(f64::NEG_INFINITY), |a, &p| a.max(p));
        let dims = ((hi - lo) / bin).floor().as_u64vec3() + glam::U64Vec3::ONE;
        let cell = |p: DVec3| {
            ((p - lo) / bin)
                .floor()
                .as_u64vec3()
                .min(dims - glam::U64Vec3::ONE)
        };
        let key = |c: glam::U64Vec3| (c.z * dims.y + c.y) * dims.x + c.x;
        self.bins.clear();
        self.bins
            .extend((0..n).map(|i| (key(cell(v.position[i])), i as u32)));
        self.bins.sort_unstable();
        self.next.resize(n, DVec3::ZERO);
        let steps = Self::substeps(v, nu, dt);
        let h = dt / steps as f64;
        let norm = 4.0 / std::f64::consts::PI.powf(1.5);
        for _ in 0..steps {
            let bins = &self.bins;
            let vv = &*v;
            let out = par::SharedSlice::new(&mut self.next);
            par::for_each_chunk(n, CHUNK, |range| {
                // SAFETY: chunks are disjoint.
                let out = unsafe { out.slice_mut(range.clone()) };
                for (o, i) in out.iter_mut().zip(range) {
                    let (xi, vi, si2) = (vv.position[i], vv.volume[i], vv.radius[i] * vv.radius[i]);
                    let ai = vv.strength(i);
                    let c = cell(xi).as_i64vec3();
                    let mut d = DVec3::ZERO;
                    for dz in -1..=1i64 {
                        for dy in -1..=1i64 {
                            for dx in -1..=1i64 {
                                let nc = c + glam::I64Vec3::new(dx, dy, dz);
                                if nc.min_element() < 0 || nc.cmpge(dims.as_i64vec3()).any() {
                                    continue;
                                }
                                let k = key(nc.as_u64vec3());
                                let s = bins.partition_point(|&(b, _)| b < k);
                                for &(b, j) in &bins[s..] {
                                    if b != k {
                                        break;
                                    }
                                    let j = j as usize;
                                    if j == i {
                                        continue;
                                    }
                                    let r2 = (vv.position[j] - xi).length_squared();
                                    let e2 = 0.5 * (si2 + vv.radius[j] * vv.radius[j]);
                                    if r2 > CUTOFF * CUTOFF * e2 {
                                        continue;
                                    }
                                    let eta = norm / (e2 * e2.sqrt()) * (-r2 / e2).exp();
                                    d += (vv.strength(j) * vi - ai * vv.volume[j]) * (eta / e2);
                                }
                            }
                        }
                    }
                    *o = ai + d * (nu * h);
                }
            });
            for i in 0..n {
                v.vorticity[i] = self.next[i] / v.volume[i];
            }
        }
    }
}
