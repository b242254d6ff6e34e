//! Stage "forces" of reintegration tracking: the SPH pressure and viscous accelerations of every particle from
//! its 3^D neighbours (Moroz 2020).

use super::{
    chunk_occupied, for_each_chunk, load, pos_part, row_members, store, windows, CellLayout, State,
    SumOrder, LANES, SPAN,
};
use crate::par::SharedSlice;
use crate::reint::eos::S_FLOOR;
use multiversion::multiversion;

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

/// Padded source windows of a short chunk in the force stage: positions, velocities, and ρ with q.
type ForcePads<const D: usize> = ([[f32; SPAN]; D], [[f32; SPAN]; D], [[f32; SPAN]; 2]);

/// Scratch of the force stage.
#[derive(Clone)]
struct ForceScratch<const D: usize> {
    pressure: [SumOrder; D],
    viscous: [SumOrder; D],
    pads: ForcePads<D>,
}

/// Stage "forces": SPH pressure and viscous accelerations (cells/s²) of every particle from its 3^D
/// neighbours (Moroz 2020 with the symmetric pressure force of Monaghan 1992, the viscous term of Morris et al.
/// 1997, and the spiky kernel W = σ (h − r)³ of Desbrun and Gascuel 1996, whose gradient does not vanish at
/// short range and so does not let particles clump).
///
/// aᵢ = k_p Σⱼ ρⱼ (qᵢ + qⱼ)(h − r)² d/r − k_ν Σⱼ [ρⱼ>0] (1 + ρⱼ/ρᵢ)(h − r)² r/(r² + 0.01h²) vᵢⱼ,
/// with d = Xᵢ − Xⱼ in cells, r = |d| < h, and ρⱼ Δx^D = mⱼ. The ratio ρⱼ/ρᵢ, which makes the pair force
/// symmetric, is capped at 1/S_FLOOR: for a speck next to liquid it would exceed the explicit stability limit
/// of the viscous term by orders of magnitude.
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2+fma"))]
pub(crate) fn sph_forces<const D: usize>(
    layout: &CellLayout<D>,
    state: &State<D>,
    rho: &[f32],
    q: &[f32],
    k: ForceConsts,
    occupied: &[bool],
    acc: &mut [Vec<f32>; D],
) {
    let pos: [&[f32]; D] = std::array::from_fn(|a| state.pos[a].as_slice());
    let vel: [&[f32]; D] = std::array::from_fn(|a| state.vel[a].as_slice());
    let out: Vec<SharedSlice<f32>> = acc.iter_mut().map(|v| SharedSlice::new(v)).collect();
    let (h, eps2, viscous) = (k.h, 0.01 * k.h * k.h, k.viscosity > 0.0);
    let rows = layout.neighbours.len() / 3;
    let init = || {
        Box::new(ForceScratch {
            pressure: std::array::from_fn(|_| SumOrder::new()),
            viscous: std::array::from_fn(|_| SumOrder::new()),
            pads: ([[0.0; SPAN]; D], [[0.0; SPAN]; D], [[0.0; SPAN]; 2]),
        })
    };
    for_each_chunk(layout, init, |sc, i0, w| {
        let w = w.min(LANES);
        if !chunk_occupied(layout, occupied, i0) {
            // Vacuum feels no force that matters: it has no mass to move.
            for o in &out {
                // SAFETY: chunks of distinct rows are disjoint.
                unsafe { o.slice_mut(i0..i0 + w) }.fill(0.0);
            }
            return;
        }
        // This chunk's particles, in fixed-size arrays (zero past `w`) so that the lane loops vectorise.
        let mut xi = [[0.0f32; LANES]; D];
        let mut vi = [[0.0f32; LANES]; D];
        for a in 0..D {
            load(&mut xi[a], &pos[a][i0..i0 + w]);
            load(&mut vi[a], &vel[a][i0..i0 + w]);
        }
        let (mut rho_i, mut q_i) = ([0.0f32; LANES], [0.0f32; LANES]);
        load(&mut rho_i, &rho[i0..i0 + w]);
        load(&mut q_i, &q[i0..i0 + w]);
        let mut inv_rho_i = [0.0f32; LANES];
        for l in 0..LANES {
            inv_rho_i[l] = if rho_i[l] > 0.0 { 1.0 / rho_i[l] } else { 0.0 };
        }
        for ro in 0..rows {
            let (delta, roff) = layout.neighbours[3 * ro + 1];
            // The row's sources j0 − 1 ..= j0 + w, seen by its three x-offsets shifted by 0, 1 and 2 lanes.
            let jm = (i0 as isize + delta) as usize - 1;
            let span = w + 2;
            let (pad_x, pad_v, pad_rq) = &mut sc.pads;
            let px = windows(pos, jm, span, pad_x);
            let pv = windows(vel, jm, span, pad_v);
            let [prho, pq] = windows([rho, q], jm, span, pad_rq);
            for (slot, shift, off) in row_members(roff) {
                let first = slot == 0;
                let lanes = shift..shift + LANES;
                let xj: [&[f32; LANES]; D] =
                    std::array::from_fn(|a| px[a][lanes.clone()].try_into().unwrap());
                let rho_j: &[f32; LANES] = prho[lanes.clone()].try_into().unwrap();
                let q_j: &[f32; LANES] = pq[lanes.clone()].try_into().unwrap();
                // d = Xᵢ − Xⱼ, with Xⱼ measured from cell i's centre.
                let mut d = [[0.0f32; LANES]; D];
                let mut r2 = [0.0f32; LANES];
                for a in 0..D {
                    for l in 0..LANES {
                        d[a][l] = xi[a][l] - (off[a] + xj[a][l]);
                        r2[l] += d[a][l] * d[a][l];
                    }
                }
                let mut fp = [0.0f32; LANES];
                let mut fv = [0.0f32; LANES];
                for l in 0..LANES {
                    let r = r2[l].sqrt();
                    let t = pos_part(h - r);
                    let t2 = t * t;
                    let inv_r = if r > 0.0 { 1.0 / r } else { 0.0 };
                    fp[l] = rho_j[l] * (q_i[l] + q_j[l]) * t2 * inv_r;
                    let present = if rho_j[l] > 0.0 { 1.0 } else { 0.0 };
                    let ratio = (rho_j[l] * inv_rho_i[l]).min(1.0 / S_FLOOR);
                    fv[l] = present * (1.0 + ratio) * t2 * r / (r2[l] + eps2);
                }
                for a in 0..D {
                    let da = &d[a];
                    sc.pressure[a].put(ro, first, |l| fp[l] * da[l]);
                    if viscous {
                        let (via, vja): (&[f32; LANES], &[f32; LANES]) =
                            (&vi[a], pv[a][lanes.clone()].try_into().unwrap());
                        sc.viscous[a].put(ro, first, |l| fv[l] * (via[l] - vja[l]));
                    }
                }
            }
            for a in 0..D {
                sc.pressure[a].end_row(ro);
                if viscous {
                    sc.viscous[a].end_row(ro);
                }
            }
        }
        for a in 0..D {
            let mut o = [0.0f32; LANES];
            for l in 0..LANES {
                let viscous_part = if viscous {
                    sc.viscous[a].total::<D>(l)
                } else {
                    0.0
                };
                o[l] = k.pressure * sc.pressure[a].total::<D>(l) - k.viscosity * viscous_part;
            }
            // SAFETY: chunks of distinct rows are disjoint.
            store(unsafe { out[a].slice_mut(i0..i0 + w) }, &o);
        }
    });
}
