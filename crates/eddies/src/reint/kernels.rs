//! The per-cell stages of reintegration tracking, as gathers over the 3^D neighbourhood.
//!
//! Every stage is written once for one row of cells and run over rows in parallel; each cell writes only its
//! own outputs, so results are independent of the thread count. Inner loops run over chunks of [`LANES`]
//! cells of a row with fixed-size accumulators, so the compiler vectorises across cells (no float
//! reassociation is involved: each lane computes exactly what the scalar loop would).

use super::state::{Layout, State};
use crate::par::{self, SharedSlice};

/// Cells per inner chunk: the accumulators of one chunk stay in L1 and the loop vectorises over it.
pub(crate) const LANES: usize = 64;

/// Rows per parallel task: enough work to amortise scheduling, small enough to balance.
fn grain(row_len: usize) -> usize {
    (4096 / row_len.max(1)).max(1)
}

/// `max(x, 0)` written so that it compiles to one vector instruction.
#[inline(always)]
fn pos_part(x: f32) -> f32 {
    if x > 0.0 {
        x
    } else {
        0.0
    }
}

/// Runs `f(first_index, len)` over the chunks of every interior row, rows in parallel.
fn for_each_chunk<const D: usize>(layout: &Layout<D>, f: impl Fn(usize, usize) + Sync + Send) {
    let nx = layout.n[0];
    par::for_each(layout.rows(), grain(nx), |row| {
        let start = layout.row_start(row);
        let mut x = 0;
        while x < nx {
            let w = LANES.min(nx - x);
            f(start + x, w);
            x += w;
        }
    });
}

/// Equation of state in the form the force needs: `q = P/ρ²`, with `ρ = ρ₀ s` where s is the compression
/// (cell mass over rest mass) and ρ₀ the rest density of the cell's substance mix. See [`super::Eos`].
///
/// In `q` the compression is floored at [`S_FLOOR`]: a nearly empty cell is a speck of fluid, not a particle
/// of a cell's volume, and its true `P/ρ²`, growing as 1/ρ, would fling it at any speed. Any per-particle q
/// keeps the pair forces equal and opposite, so momentum is still conserved.
#[derive(Clone, Copy, Debug)]
pub(crate) enum EosTerm {
    /// `P = c² ρ`.
    IdealGas { c2: f32 },
    /// `P = (ρ₀ c²/γ)(s^γ − 1)`.
    Tait { c2: f32, gamma: f32 },
    /// `P = ρ₀ c² s (s − 1)`.
    Quadratic { c2: f32 },
}

/// Compression below which a cell's pressure term is computed as if it were this full.
pub(crate) const S_FLOOR: f32 = 0.5;

impl EosTerm {
    /// `P / (ρ₀ max(s, S_FLOOR))²` times ρ₀, i.e. the pressure term q multiplied by the mix's rest density.
    /// Without `tension`, negative pressure is clamped to zero.
    #[inline(always)]
    fn q_times_rest(self, s: f32, tension: bool) -> f32 {
        let sf = if s > S_FLOOR { s } else { S_FLOOR };
        let inv = 1.0 / (sf * sf);
        let q = match self {
            EosTerm::IdealGas { c2 } => c2 * s * inv,
            EosTerm::Tait { c2, gamma } => c2 / gamma * (s.powf(gamma) - 1.0) * inv,
            EosTerm::Quadratic { c2 } => c2 * s * (s - 1.0) * inv,
        };
        if tension || q > 0.0 {
            q
        } else {
            0.0
        }
    }
}

/// Stage "density": ρ = M / V_cell and the pressure term q = P/ρ² of every cell, from its substance masses.
///
/// Masses are in quanta: `unit[k]` is the mass of one quantum of substance k (kg) and `quanta_per_rest` the
/// quanta of a cell at rest density, so `s = Σₖ mₖ / quanta_per_rest` is the compression of the cell against
/// the rest density of its own substance mix. Cells lighter than `rho_min` count as vacuum. Without `tension`
/// negative pressures are clamped to zero (see [`super::ReintParams::tension`]).
#[allow(clippy::too_many_arguments)]
pub(crate) fn density<const D: usize, const S: usize>(
    layout: &Layout<D>,
    state: &State<D>,
    inv_cell_volume: f32,
    unit: [f32; S],
    inv_quanta_per_rest: f32,
    rho_min: f32,
    eos: EosTerm,
    tension: bool,
    rho: &mut [f32],
    q: &mut [f32],
) {
    let mass: [&[f32]; S] = std::array::from_fn(|k| state.mass[k].as_slice());
    let rho_out = SharedSlice::new(rho);
    let q_out = SharedSlice::new(q);
    for_each_chunk(layout, |i0, w| {
        // SAFETY: chunks of distinct rows are disjoint.
        let (rho, q) = unsafe { (rho_out.slice_mut(i0..i0 + w), q_out.slice_mut(i0..i0 + w)) };
        let m: [&[f32]; S] = std::array::from_fn(|k| &mass[k][i0..i0 + w]);
        for l in 0..w {
            let mut total = 0.0;
            let mut s = 0.0;
            for k in 0..S {
                total += m[k][l] * unit[k];
                s += m[k][l];
            }
            let s = s * inv_quanta_per_rest;
            // Specks thinner than rho_min take no part in the forces.
            let r = total * inv_cell_volume;
            let present = r > rho_min;
            rho[l] = if present { r } else { 0.0 };
            // ρ₀ = ρ/s for the mix, so q = (q·ρ₀)·s/ρ.
            q[l] = if present { eos.q_times_rest(s, tension) * s / r } else { 0.0 };
        }
    });
}

/// Constants of the SPH force, in cell units (see [`sph_forces`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct ForceConsts {
    /// Kernel support radius h (cells).
    pub h: f32,
    /// `3 σ / Δx²` with σ the spiky kernel's normalisation in cells (1/s² per unit of ρ q).
    pub pressure: f32,
    /// `3 σ ν / Δx²` (1/s); zero disables viscosity.
    pub viscosity: f32,
}

/// Stage "forces": SPH pressure and viscous accelerations (cells/s²) of every particle from its 3^D
/// neighbours (seed 000 with the symmetric pressure force of Monaghan 1992, the viscous term of Morris et al.
/// 1997, and the spiky kernel W = σ (h − r)³ of Desbrun and Gascuel 1996, whose gradient does not vanish at
/// short range and so does not let particles clump).
///
/// aᵢ = Σⱼ ρⱼ (qᵢ + qⱼ) 3σ(h − r)² d̂/Δx² − Σⱼ [ρⱼ>0] ν (1 + ρⱼ/ρᵢ) 3σ(h − r)² r/(r² + 0.01h²) vᵢⱼ/Δx²,
/// with d = Xᵢ − Xⱼ in cells, r = |d| < h, and ρⱼ Δx^D = mⱼ.
pub(crate) fn sph_forces<const D: usize>(
    layout: &Layout<D>,
    state: &State<D>,
    rho: &[f32],
    q: &[f32],
    k: ForceConsts,
    acc: &mut [Vec<f32>; D],
) {
    let pos: [&[f32]; D] = std::array::from_fn(|a| state.pos[a].as_slice());
    let vel: [&[f32]; D] = std::array::from_fn(|a| state.vel[a].as_slice());
    let out: Vec<SharedSlice<f32>> = acc.iter_mut().map(|v| SharedSlice::new(v)).collect();
    let h = k.h;
    let eps2 = 0.01 * h * h;
    let viscous = k.viscosity > 0.0;
    for_each_chunk(layout, |i0, w| {
        let xi: [&[f32]; D] = std::array::from_fn(|a| &pos[a][i0..i0 + w]);
        let vi: [&[f32]; D] = std::array::from_fn(|a| &vel[a][i0..i0 + w]);
        let rho_i = &rho[i0..i0 + w];
        let q_i = &q[i0..i0 + w];
        let mut inv_rho_i = [0.0f32; LANES];
        for l in 0..w {
            inv_rho_i[l] = if rho_i[l] > 0.0 { 1.0 / rho_i[l] } else { 0.0 };
        }
        let mut ap = [[0.0f32; LANES]; D];
        let mut av = [[0.0f32; LANES]; D];
        for &(delta, off) in &layout.neighbours {
            if delta == 0 {
                continue;
            }
            let j0 = (i0 as isize + delta) as usize;
            let xj: [&[f32]; D] = std::array::from_fn(|a| &pos[a][j0..j0 + w]);
            let vj: [&[f32]; D] = std::array::from_fn(|a| &vel[a][j0..j0 + w]);
            let rho_j = &rho[j0..j0 + w];
            let q_j = &q[j0..j0 + w];
            for l in 0..w {
                // d = Xᵢ − Xⱼ, with Xⱼ measured from cell i's centre.
                let mut d = [0.0f32; D];
                let mut r2 = 0.0;
                for a in 0..D {
                    d[a] = xi[a][l] - (off[a] + xj[a][l]);
                    r2 += d[a] * d[a];
                }
                let r = r2.sqrt();
                let t = pos_part(h - r);
                let t2 = t * t;
                let inv_r = if r > 0.0 { 1.0 / r } else { 0.0 };
                let fp = rho_j[l] * (q_i[l] + q_j[l]) * t2 * inv_r;
                for a in 0..D {
                    ap[a][l] += fp * d[a];
                }
                if viscous {
                    let present = if rho_j[l] > 0.0 { 1.0 } else { 0.0 };
                    let fv = present * (1.0 + rho_j[l] * inv_rho_i[l]) * t2 * r / (r2 + eps2);
                    for a in 0..D {
                        av[a][l] += fv * (vi[a][l] - vj[a][l]);
                    }
                }
            }
        }
        for a in 0..D {
            // SAFETY: chunks of distinct rows are disjoint.
            let o = unsafe { out[a].slice_mut(i0..i0 + w) };
            for l in 0..w {
                o[l] = k.pressure * ap[a][l] - k.viscosity * av[a][l];
            }
        }
    });
}

/// Stage "advance" (first half of reintegration): `V += Δt (a + g)`, speed limited to what one step can
/// carry, then `X' = X + Δt V` clamped to `[−1.5 + r, 1.5 − r]` (cells, from the cell centre) so that the
/// spread box lands inside the 3^D neighbourhood that the gather visits (seed 000's finite search radius).
pub(crate) fn advance<const D: usize>(
    layout: &Layout<D>,
    state: &mut State<D>,
    acc: Option<&[Vec<f32>; D]>,
    gravity: [f32; D],
    dt: f32,
    r: f32,
) {
    let reach = 1.5 - r;
    // Past this speed a particle would be clamped anyway; limiting V keeps the momentum it carries honest.
    let vmax = (reach + 0.5) / dt;
    let pos: Vec<SharedSlice<f32>> = state.pos.iter_mut().map(|v| SharedSlice::new(v)).collect();
    let vel: Vec<SharedSlice<f32>> = state.vel.iter_mut().map(|v| SharedSlice::new(v)).collect();
    for_each_chunk(layout, |i0, w| {
        for a in 0..D {
            // SAFETY: chunks of distinct rows are disjoint.
            let (x, v) = unsafe { (pos[a].slice_mut(i0..i0 + w), vel[a].slice_mut(i0..i0 + w)) };
            let g = gravity[a];
            match acc {
                Some(acc) => {
                    let f = &acc[a][i0..i0 + w];
                    for l in 0..w {
                        v[l] = (v[l] + dt * (f[l] + g)).clamp(-vmax, vmax);
                    }
                }
                None => {
                    for l in 0..w {
                        v[l] = (v[l] + dt * g).clamp(-vmax, vmax);
                    }
                }
            }
            for l in 0..w {
                x[l] = (x[l] + dt * v[l]).clamp(-reach, reach);
            }
        }
    });
}

/// Overlap of a box of half-size `r` centred at `x` with the cell [−½, ½] (one axis): length and centre.
#[inline(always)]
fn overlap(x: f32, r: f32) -> (f32, f32) {
    let lo = (x - r).max(-0.5);
    let hi = (x + r).min(0.5);
    (pos_part(hi - lo), 0.5 * (lo + hi))
}

/// Whether a box centred at `x` (in a cell's frame, one axis) has its centre in the cell. Half-open, and
/// exact for the offsets the gather uses, so exactly one cell of the neighbourhood owns each box centre.
#[inline(always)]
fn centre_in_cell(x: f32) -> bool {
    (-0.5..0.5).contains(&x)
}

/// A nonnegative f32 rounded to the nearest whole number (ties to even), by the add-and-subtract of 2²³
/// that every SIMD unit runs at full width. Values from 2²³ on are whole already.
#[inline(always)]
fn round_whole(x: f32) -> f32 {
    const TWO_23: f32 = 8_388_608.0;
    if x < TWO_23 {
        (x + TWO_23) - TWO_23
    } else {
        x
    }
}

/// The mass a source hands to one target: `round(frac · scale · m)` quanta. The normalise pass and the
/// gather call this same function on the same inputs, so both see the very same parts.
#[inline(always)]
fn part(frac_scaled: f32, quanta: f32) -> f32 {
    round_whole(frac_scaled * quanta)
}

/// Bookkeeping pass before the gather, per source particle. Masses are whole numbers of quanta held in f32
/// (exact below 2²⁴); the gather hands each target `round(frac · scale · m)` quanta, and this pass makes the
/// parts add up to exactly `m`:
///
/// * `scale = 1 / Σ frac` over the fluid cells of the neighbourhood (`fluid[t] = 1`, solid cells 0), computed
///   with the gather's arithmetic, so the parts are the box's overlaps renormalised to the fluid cells (the
///   parts that fall on solid cells are discarded by the caller, having been paid for by the others);
/// * `deficit = m − Σ parts`, the few quanta lost or gained by rounding, which the gather adds to the target
///   that holds the box centre.
///
/// Mass is then conserved exactly, in integer arithmetic, step after step: there is no float rounding in the
/// totals to accumulate into a drift.
pub(crate) fn normalise<const D: usize, const S: usize>(
    layout: &Layout<D>,
    state: &State<D>,
    fluid: Option<&[f32]>,
    r: f32,
    scale: &mut [f32],
    deficit: &mut [Vec<f32>],
) {
    let pos: [&[f32]; D] = std::array::from_fn(|a| state.pos[a].as_slice());
    let mass: [&[f32]; S] = std::array::from_fn(|k| state.mass[k].as_slice());
    let scale_out = SharedSlice::new(scale);
    let deficit_out: Vec<SharedSlice<f32>> = deficit.iter_mut().map(|v| SharedSlice::new(v)).collect();
    let count = layout.neighbours.len();
    for_each_chunk(layout, |i0, w| {
        let x: [&[f32]; D] = std::array::from_fn(|a| &pos[a][i0..i0 + w]);
        let m: [&[f32]; S] = std::array::from_fn(|k| &mass[k][i0..i0 + w]);
        let mut fracs = [[0.0f32; LANES]; 27];
        let mut total = [0.0f32; LANES];
        for (n, &(delta, off)) in layout.neighbours.iter().enumerate() {
            // The gather of target t = j − delta sees this source at offset `off`.
            let t0 = (i0 as isize - delta) as usize;
            for l in 0..w {
                let mut frac = 1.0;
                for a in 0..D {
                    frac *= overlap(off[a] + x[a][l], r).0;
                }
                let frac = match fluid {
                    Some(f) => frac * f[t0 + l],
                    None => frac,
                };
                fracs[n][l] = frac;
                total[l] += frac;
            }
        }
        let mut inv = [0.0f32; LANES];
        for l in 0..w {
            inv[l] = if total[l] > 0.0 { 1.0 / total[l] } else { 0.0 };
        }
        let mut handed = [[0.0f32; LANES]; S];
        for frac in fracs.iter().take(count) {
            for l in 0..w {
                let fs = frac[l] * inv[l];
                for k in 0..S {
                    handed[k][l] += part(fs, m[k][l]);
                }
            }
        }
        // SAFETY: chunks of distinct rows are disjoint.
        unsafe { scale_out.slice_mut(i0..i0 + w) }.copy_from_slice(&inv[..w]);
        for k in 0..S {
            let d = unsafe { deficit_out[k].slice_mut(i0..i0 + w) };
            for l in 0..w {
                d[l] = m[k][l] - handed[k][l];
            }
        }
    });
}

/// Stage "reintegrate" (seed 000, "Using particle distributions"): every cell gathers, from the 3^D
/// neighbours, the part of each advanced particle's box of half-size r that overlaps the cell. The overlap
/// fraction `frac = Πₐ |overlapₐ|` (renormalised by [`normalise`]) carries its share of each substance's
/// mass, its centre of mass is the overlap box's centre, and its momentum is the part's mass times V; the
/// sums are normalised into the cell's new particle. A cell that receives nothing stays vacuum.
///
/// Expects `src.pos` to hold the advanced positions X' from [`advance`], and `scale`/`deficit` from
/// [`normalise`]; `unit[k]` is the mass of one quantum of substance k (kg). Writes the new state into `dst`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn reintegrate<const D: usize, const S: usize>(
    layout: &Layout<D>,
    src: &State<D>,
    scale: &[f32],
    deficit: &[Vec<f32>],
    unit: [f32; S],
    dst: &mut State<D>,
    r: f32,
) {
    let pos: [&[f32]; D] = std::array::from_fn(|a| src.pos[a].as_slice());
    let vel: [&[f32]; D] = std::array::from_fn(|a| src.vel[a].as_slice());
    let mass: [&[f32]; S] = std::array::from_fn(|k| src.mass[k].as_slice());
    let deficit: [&[f32]; S] = std::array::from_fn(|k| deficit[k].as_slice());
    let out_pos: Vec<SharedSlice<f32>> = dst.pos.iter_mut().map(|v| SharedSlice::new(v)).collect();
    let out_vel: Vec<SharedSlice<f32>> = dst.vel.iter_mut().map(|v| SharedSlice::new(v)).collect();
    let out_mass: Vec<SharedSlice<f32>> = dst.mass.iter_mut().map(|v| SharedSlice::new(v)).collect();
    for_each_chunk(layout, |i0, w| {
        let mut am = [[0.0f32; LANES]; S];
        let mut at = [0.0f32; LANES];
        let mut ax = [[0.0f32; LANES]; D];
        let mut av = [[0.0f32; LANES]; D];
        for &(delta, off) in &layout.neighbours {
            let j0 = (i0 as isize + delta) as usize;
            let xj: [&[f32]; D] = std::array::from_fn(|a| &pos[a][j0..j0 + w]);
            let vj: [&[f32]; D] = std::array::from_fn(|a| &vel[a][j0..j0 + w]);
            let mj: [&[f32]; S] = std::array::from_fn(|k| &mass[k][j0..j0 + w]);
            let dj: [&[f32]; S] = std::array::from_fn(|k| &deficit[k][j0..j0 + w]);
            let sj = &scale[j0..j0 + w];
            for l in 0..w {
                let mut frac = 1.0;
                let mut centre = [0.0f32; D];
                let mut owns = true;
                for a in 0..D {
                    let x = off[a] + xj[a][l];
                    let (len, c) = overlap(x, r);
                    frac *= len;
                    centre[a] = c;
                    owns &= centre_in_cell(x);
                }
                let fs = frac * sj[l];
                let mut m = 0.0;
                for k in 0..S {
                    let p = part(fs, mj[k][l]) + if owns { dj[k][l] } else { 0.0 };
                    am[k][l] += p;
                    m += p * unit[k];
                }
                at[l] += m;
                for a in 0..D {
                    ax[a][l] += m * centre[a];
                    av[a][l] += m * vj[a][l];
                }
            }
        }
        let mut inv = [0.0f32; LANES];
        for l in 0..w {
            inv[l] = if at[l] > 0.0 { 1.0 / at[l] } else { 0.0 };
        }
        // SAFETY (all writes below): chunks of distinct rows are disjoint.
        for k in 0..S {
            let o = unsafe { out_mass[k].slice_mut(i0..i0 + w) };
            o.copy_from_slice(&am[k][..w]);
        }
        for a in 0..D {
            let (x, v) = unsafe { (out_pos[a].slice_mut(i0..i0 + w), out_vel[a].slice_mut(i0..i0 + w)) };
            for l in 0..w {
                // The centre of mass of parts that all lie in the cell lies in the cell; the clamp only
                // removes rounding.
                x[l] = (ax[a][l] * inv[l]).clamp(-0.5, 0.5);
                v[l] = av[a][l] * inv[l];
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One particle, advanced by less than a cell, spreads over exactly the cells its box overlaps, and the
    /// gathered parts add up to its mass.
    #[test]
    fn single_particle_spreads_over_overlapped_cells() {
        let layout = Layout::<2>::new([5, 5]);
        let mut src = State::<2>::new(layout.len(), 1);
        let mut dst = State::<2>::new(layout.len(), 1);
        let c = layout.index([2, 2]);
        const Q: f32 = 1_048_576.0;
        src.mass[0][c] = Q;
        src.pos[0][c] = 0.25;
        src.pos[1][c] = -0.1;
        let mut scale = vec![0.0; layout.len()];
        let mut deficit = vec![vec![0.0; layout.len()]];
        normalise::<2, 1>(&layout, &src, None, 0.5, &mut scale, &mut deficit);
        reintegrate::<2, 1>(&layout, &src, &scale, &deficit, [1.0], &mut dst, 0.5);
        // Exactly conserved: the parts are whole quanta and the rounding remainder goes to the box centre.
        let total: f32 = dst.mass[0].iter().sum();
        assert_eq!(total, Q);
        // Box [−0.25, 0.75] × [−0.6, 0.4]: x splits 0.75/0.25, y splits 0.1/0.9.
        let right = dst.mass[0][layout.index([3, 2])];
        let below = dst.mass[0][layout.index([2, 1])];
        assert!((right / Q - 0.25 * 0.9).abs() < 1e-6, "{right}");
        assert!((below / Q - 0.75 * 0.1).abs() < 1e-6, "{below}");
        // The right part's centre of mass is the overlap centre: x ∈ [−0.5, −0.25] → −0.375.
        assert!((dst.pos[0][layout.index([3, 2])] + 0.375).abs() < 1e-6);
    }
}
