//! The per-cell stages of reintegration tracking, as gathers over the 3^D neighbourhood.
//!
//! Every stage is written once for one row of cells and run over rows in parallel; each cell writes only its
//! own outputs, so results are independent of the thread count. Inner loops run over chunks of [`LANES`]
//! cells of a row with fixed-size accumulators, so the compiler vectorises across cells (no float
//! reassociation is involved: each lane computes exactly what the scalar loop would).

// Lane loops index several same-length arrays at `l` on purpose: written so, they vectorise, and the
// iterator forms clippy suggests would zip up to eight slices for no gain in clarity.
#![allow(clippy::needless_range_loop)]

use super::eos::{EosTerm, S_FLOOR};
use super::state::{CellLayout, State};
use super::{MAX_SUBSTANCES, QUANTA_PER_REST_CELL};
use crate::par::SharedSlice;
use multiversion::multiversion;
use rayon::prelude::*;
use std::sync::atomic::{AtomicU64, Ordering};

/// Cells per inner chunk: the accumulators of one chunk stay in L1 and the loop vectorises over it.
pub(crate) const LANES: usize = 128;

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

/// Copies a chunk's `dst.len()` (at most [`LANES`]) values out of a lane array. A full chunk copies a
/// fixed-size block, which compiles to a few vector moves rather than a call to `memcpy`.
#[inline(always)]
fn store(dst: &mut [f32], src: &[f32; LANES]) {
    match <&mut [f32; LANES]>::try_from(&mut *dst) {
        Ok(full) => *full = *src,
        Err(_) => dst.copy_from_slice(&src[..dst.len()]),
    }
}

/// Copies a chunk's `src.len()` (at most [`LANES`]) values into the front of a lane array, as [`store`].
#[inline(always)]
fn load(dst: &mut [f32; LANES], src: &[f32]) {
    match <&[f32; LANES]>::try_from(src) {
        Ok(full) => *dst = *full,
        Err(_) => dst[..src.len()].copy_from_slice(src),
    }
}

/// Runs `f(scratch, first_index, len)` over the chunks of every interior row, rows in parallel. Each worker
/// job builds its scratch once with `init`; kernels overwrite every scratch value they read, so results do
/// not depend on which job ran which row.
fn for_each_chunk<const D: usize, T>(
    layout: &CellLayout<D>,
    init: impl Fn() -> T + Sync + Send,
    f: impl Fn(&mut T, usize, usize) + Sync + Send,
) {
    let nx = layout.n[0];
    (0..layout.rows())
        .into_par_iter()
        .with_min_len(grain(nx))
        .for_each_init(init, |scratch, row| {
            let start = layout.row_start(row);
            let mut x = 0;
            while x < nx {
                let w = LANES.min(nx - x);
                f(scratch, start + x, w);
                x += w;
            }
        });
}

/// Chunks of [`LANES`] cells per row (the last one may be shorter).
fn chunks_per_row<const D: usize>(layout: &CellLayout<D>) -> usize {
    layout.n[0].div_ceil(LANES)
}

/// Length of the occupancy map: one flag per chunk of every padded row, halo rows included.
pub(crate) fn occupancy_len<const D: usize>(layout: &CellLayout<D>) -> usize {
    layout.len() / layout.padded[0] * chunks_per_row(layout)
}

/// The occupancy flag of the chunk that starts at padded index `i0`.
#[inline]
fn chunk_index<const D: usize>(layout: &CellLayout<D>, i0: usize) -> usize {
    let (row, x) = (i0 / layout.padded[0], i0 % layout.padded[0] - 1);
    row * chunks_per_row(layout) + x / LANES
}

/// Marks which chunks of [`LANES`] cells along x hold any mass. Halo rows count as occupied: closed walls
/// put mirrored mass there (the halo cells at the ends of a row mirror the row's own first and last cells,
/// so they hold mass only where the first or last chunk does). Kernels skip chunks whose neighbourhood is
/// empty, writing what the computation would give (vacuum), so a sparse scene costs less than a full one
/// and the result does not change.
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2+fma"))]
pub(crate) fn occupancy<const D: usize>(
    layout: &CellLayout<D>,
    state: &State<D>,
    occupied: &mut [bool],
) {
    occupied.fill(true);
    let (nx, cpr) = (layout.n[0], chunks_per_row(layout));
    let rows: Vec<(usize, Vec<bool>)> = (0..layout.rows())
        .into_par_iter()
        .with_min_len(grain(nx))
        .map(|row| {
            let start = layout.row_start(row);
            let any = (0..cpr)
                .map(|c| {
                    let (a, b) = (start + c * LANES, start + ((c + 1) * LANES).min(nx));
                    state.mass.iter().any(|m| m[a..b].iter().any(|&q| q > 0.0))
                })
                .collect();
            (start / layout.padded[0], any)
        })
        .collect();
    for (row, any) in rows {
        occupied[row * cpr..(row + 1) * cpr].copy_from_slice(&any);
    }
}

/// Whether the chunk starting at padded index `i0` holds mass.
#[inline]
fn chunk_occupied<const D: usize>(layout: &CellLayout<D>, occupied: &[bool], i0: usize) -> bool {
    occupied[chunk_index(layout, i0)]
}

/// Whether any cell within one cell of the chunk starting at padded index `i0` may hold mass: the chunk and
/// its two neighbours along x in each of the 3^(D−1) rows around.
#[inline]
fn neighbourhood_occupied<const D: usize>(
    layout: &CellLayout<D>,
    occupied: &[bool],
    i0: usize,
) -> bool {
    let cpr = chunks_per_row(layout);
    let rows = layout.neighbours.len() / 3;
    let c = (i0 % layout.padded[0] - 1) / LANES;
    (0..rows).any(|ro| {
        let delta = layout.neighbours[3 * ro + 1].0;
        let first = (i0 as isize + delta) as usize / layout.padded[0] * cpr;
        (c.saturating_sub(1)..(c + 2).min(cpr)).any(|k| occupied[first + k])
    })
}

/// Stage "density": ρ = M / V_cell and the pressure term q = P/ρ² of every cell, from its substance masses.
///
/// Masses are in quanta: `unit[k]` is the mass of one quantum of substance k (kg) and `quanta_per_rest` the
/// quanta of a cell at rest density, so `s = Σₖ mₖ / quanta_per_rest` is the compression of the cell against
/// the rest density of its own substance mix. Cells lighter than `rho_min` count as vacuum. Without `tension`
/// negative pressures are clamped to zero (see [`super::ReintParams::tension`]).
#[allow(clippy::too_many_arguments)]
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2+fma"))]
pub(crate) fn density<const D: usize, const S: usize>(
    layout: &CellLayout<D>,
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
    for_each_chunk(
        layout,
        || (),
        |_, i0, w| {
            // SAFETY: chunks of distinct rows are disjoint.
            let (rho, q) = unsafe { (rho_out.slice_mut(i0..i0 + w), q_out.slice_mut(i0..i0 + w)) };
            let m: [&[f32]; S] = std::array::from_fn(|k| &mass[k][i0..i0 + w]);
            let chunk = |law: EosTerm| {
                density_chunk(
                    rho,
                    q,
                    m,
                    unit,
                    inv_cell_volume,
                    inv_quanta_per_rest,
                    rho_min,
                    |s| law.q_times_rest(s, tension),
                )
            };
            // One loop per law: the choice is not made per cell.
            eos.specialise(chunk)
        },
    );
}

/// [`density`] over one chunk, with `q·ρ₀` from `q_rest(s)`. A function of its own so that the compiler
/// knows `rho` and `q` (from shared slices) do not overlap, and vectorises the loop.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn density_chunk<const S: usize>(
    rho: &mut [f32],
    q: &mut [f32],
    m: [&[f32]; S],
    unit: [f32; S],
    inv_cell_volume: f32,
    inv_quanta_per_rest: f32,
    rho_min: f32,
    q_rest: impl Fn(f32) -> f32,
) {
    let w = rho.len().min(q.len());
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
        q[l] = if present { q_rest(s) * s / r } else { 0.0 };
    }
}

/// Per-lane sums of one quantity over the 3^D neighbourhood, added in mirror-symmetric order: within a row
/// `(left + right) + centre`, then rows and planes the same way. Float addition is commutative, so a cell and
/// its mirror image add the very same numbers in the very same pairs and get the same bits — a
/// mirror-symmetric scene stays exactly symmetric, however long it runs.
#[derive(Clone)]
pub(crate) struct SumOrder {
    row: [[f32; LANES]; 3],
    plane: [[f32; LANES]; 3],
}

impl SumOrder {
    pub(crate) const fn new() -> Self {
        Self {
            row: [[0.0; LANES]; 3],
            plane: [[0.0; LANES]; 3],
        }
    }

    /// Adds one x-offset's values `value(lane)` to neighbour row `ro`, in the order left, right, centre
    /// (`first` for the left one), giving the row sum `(left + right) + centre`.
    #[inline(always)]
    fn put(&mut self, ro: usize, first: bool, mut value: impl FnMut(usize) -> f32) {
        // Values are computed in place (not copied from a scratch array, which compiles to a memcpy call).
        let row = &mut self.row[ro % 3];
        if first {
            for l in 0..LANES {
                row[l] = value(l);
            }
        } else {
            for l in 0..LANES {
                row[l] += value(l);
            }
        }
    }

    /// Folds the plane's three rows `(row₀ + row₂) + row₁` once row `ro` completes it (after [`SumOrder::put`]).
    #[inline(always)]
    fn end_row(&mut self, ro: usize) {
        if ro % 3 == 2 {
            let plane = &mut self.plane[ro / 3];
            for l in 0..LANES {
                plane[l] = (self.row[0][l] + self.row[2][l]) + self.row[1][l];
            }
        }
    }

    /// The neighbourhood sum of lane `l` (after every row has been set and folded).
    #[inline(always)]
    fn total<const D: usize>(&self, l: usize) -> f32 {
        if D == 2 {
            self.plane[0][l]
        } else {
            (self.plane[0][l] + self.plane[2][l]) + self.plane[1][l]
        }
    }
}

/// The three members of neighbour row `ro`: `(slot, shift, offset)` for the x-offsets −1, +1 and 0 — `slot`
/// is where their results go (left, right, centre), `shift` their first source index from `j0 − 1`, and
/// `offset` the centre offset (cells) of the source's cell.
#[inline(always)]
fn row_members<const D: usize>(roff: [f32; D]) -> [(usize, usize, [f32; D]); 3] {
    let with_x =
        |ox: f32| -> [f32; D] { std::array::from_fn(|a| if a == 0 { ox } else { roff[a] }) };
    [
        (0, 0, with_x(-1.0)),
        (1, 2, with_x(1.0)),
        (2, 1, with_x(0.0)),
    ]
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

/// Stage "advance" (first half of reintegration): `V += Δt (a + g)`, speed limited to what one step can
/// carry, then `X' = X + Δt V` clamped to `[−1.5 + r, 1.5 − r]` (cells, from the cell centre) so that the
/// spread box lands inside the 3^D neighbourhood that the gather visits (Moroz's finite search radius).
///
/// Returns how many velocity components of particles that hold mass were held at the speed limit: each one
/// is motion the physics asked for and the step could not carry. The count is an integer sum, the same for
/// any schedule.
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2+fma"))]
pub(crate) fn advance<const D: usize>(
    layout: &CellLayout<D>,
    state: &mut State<D>,
    acc: Option<&[Vec<f32>; D]>,
    gravity: [f32; D],
    dt: f32,
    r: f32,
) -> u64 {
    let vmax = speed_limit(dt, r);
    let reach = 1.5 - r;
    let limited = AtomicU64::new(0);
    let mass = &state.mass;
    let pos: Vec<SharedSlice<f32>> = state.pos.iter_mut().map(|v| SharedSlice::new(v)).collect();
    let vel: Vec<SharedSlice<f32>> = state.vel.iter_mut().map(|v| SharedSlice::new(v)).collect();
    for_each_chunk(
        layout,
        || (),
        |_, i0, w| {
            let mut held = 0;
            for a in 0..D {
                // SAFETY: chunks of distinct rows are disjoint.
                let (x, v) =
                    unsafe { (pos[a].slice_mut(i0..i0 + w), vel[a].slice_mut(i0..i0 + w)) };
                let f = acc.map(|acc| &acc[a][i0..i0 + w]);
                if advance_axis(x, v, f, gravity[a], dt, vmax, reach) >= vmax {
                    // Rare: only now look at which of the chunk's particles hold mass.
                    held += (0..w)
                        .filter(|&l| v[l].abs() >= vmax && mass.iter().any(|m| m[i0 + l] > 0.0))
                        .count() as u64;
                }
            }
            if held > 0 {
                limited.fetch_add(held, Ordering::Relaxed);
            }
        },
    );
    limited.into_inner()
}

/// The largest speed (cells per second) that one step of `dt` seconds can carry with boxes of half-size
/// `r`: past it a particle's box would land beyond the neighbourhood that the gather visits.
pub(crate) fn speed_limit(dt: f32, r: f32) -> f32 {
    (1.5 - r + 0.5) / dt
}

/// [`advance`] along one axis of a chunk; returns the largest |V| before the limit. A function of its own
/// so that the compiler knows `x`, `v` and `f` do not overlap (they come from shared slices) and vectorises
/// the loops.
#[inline(always)]
fn advance_axis(
    x: &mut [f32],
    v: &mut [f32],
    f: Option<&[f32]>,
    g: f32,
    dt: f32,
    vmax: f32,
    reach: f32,
) -> f32 {
    let w = x.len().min(v.len());
    let mut peak = 0.0f32;
    match f {
        Some(f) => {
            let f = &f[..w];
            for l in 0..w {
                let u = v[l] + dt * (f[l] + g);
                peak = peak.max(u.abs());
                v[l] = u.clamp(-vmax, vmax);
            }
        }
        None => {
            for l in 0..w {
                let u = v[l] + dt * g;
                peak = peak.max(u.abs());
                v[l] = u.clamp(-vmax, vmax);
            }
        }
    }
    for l in 0..w {
        x[l] = (x[l] + dt * v[l]).clamp(-reach, reach);
    }
    peak
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
/// (exact below 2²⁴); the gather hands each target `round(lenₓ · (Πₐ₌₁ lenₐ · scale) · m)` quanta, the
/// overlap along x times the overlaps across x (which the gather computes once for the three x-offsets of
/// a neighbour row), and this pass makes the parts add up to exactly `m`:
///
/// * `scale = 1 / Σ frac` over the fluid cells of the neighbourhood (`fluid[t] = 1`, solid cells 0), so the
///   parts are the box's overlaps renormalised to the fluid cells (the parts that fall on solid cells are
///   discarded by the gather, having been paid for by the others);
/// * `deficit = m − Σ parts` over the fluid cells, with the parts computed exactly as the gather computes
///   them: the few quanta lost or gained by rounding, which the gather adds to the target that holds the
///   box centre.
///
/// Mass is then conserved exactly, in integer arithmetic, step after step: there is no float rounding in the
/// totals to accumulate into a drift.
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2+fma"))]
pub(crate) fn normalise<const D: usize, const S: usize>(
    layout: &CellLayout<D>,
    state: &State<D>,
    fluid: Option<&[f32]>,
    r: f32,
    occupied: &[bool],
    scale: &mut [f32],
    deficit: &mut [Vec<f32>],
) {
    let pos: [&[f32]; D] = std::array::from_fn(|a| state.pos[a].as_slice());
    let mass: [&[f32]; S] = std::array::from_fn(|k| state.mass[k].as_slice());
    let scale_out = SharedSlice::new(scale);
    let deficit_out: Vec<SharedSlice<f32>> =
        deficit.iter_mut().map(|v| SharedSlice::new(v)).collect();
    let rows = layout.neighbours.len() / 3;
    let init = || {
        Box::new((
            SumOrder::new(),
            [
                SumOrder::new(),
                SumOrder::new(),
                SumOrder::new(),
                SumOrder::new(),
            ],
            [[0.0f32; LANES]; 9],
        ))
    };
    for_each_chunk(layout, init, |sc, i0, w| {
        let w = w.min(LANES);
        if !chunk_occupied(layout, occupied, i0) {
            // No mass to hand out: nothing to scale, no rounding remainder.
            // SAFETY: chunks of distinct rows are disjoint.
            unsafe { scale_out.slice_mut(i0..i0 + w) }.fill(0.0);
            for d in &deficit_out {
                unsafe { d.slice_mut(i0..i0 + w) }.fill(0.0);
            }
            return;
        }
        let (total, handed, sc_across) = &mut **sc;
        // The chunk's inputs in fixed-size arrays, zero past `w`: every lane loop below then runs over all
        // LANES lanes and compiles to whole vectors, with no remainder or aliasing checks. Lanes past `w`
        // hold no mass and are not written out.
        let mut x = [[0.0f32; LANES]; D];
        for a in 0..D {
            load(&mut x[a], &pos[a][i0..i0 + w]);
        }
        let mut m = [[0.0f32; LANES]; S];
        for k in 0..S {
            load(&mut m[k], &mass[k][i0..i0 + w]);
        }
        // The overlap of this source's box with each target. The gather of target t = j − delta sees this
        // source at centre offset `off` and computes `overlap(off + x)` per axis; the per-axis overlaps
        // depend only on the offset along that axis, so they are computed once here (for −1, 0, +1) and
        // multiplied as the gather multiplies them, giving the gather's bits.
        let mut lens = [[[0.0f32; LANES]; 3]; D];
        for a in 0..D {
            for (o, len) in lens[a].iter_mut().enumerate() {
                let off = o as f32 - 1.0;
                for l in 0..LANES {
                    len[l] = overlap(off + x[a][l], r).0;
                }
            }
        }
        // Per neighbour row, the product of the overlaps along the axes after x, in axis order.
        let across = &mut sc_across[..rows];
        for (ro, acr) in across.iter_mut().enumerate() {
            let roff = layout.neighbours[3 * ro + 1].1;
            acr.fill(1.0);
            for a in 1..D {
                let len = &lens[a][(roff[a] + 1.0) as usize];
                for l in 0..LANES {
                    acr[l] *= len[l];
                }
            }
        }
        // Whether the target of a row and x-offset is fluid (only with solids about; zero past the chunk).
        let wet = |t0: usize, shift: usize, into: &mut [f32; LANES]| {
            if let Some(f) = fluid {
                // The target that sees this source at x-offset −1 lies at +1 from it, and so on.
                let t = t0 + 1 - shift;
                load(into, &f[t..t + w]);
                into[w..].fill(0.0);
            }
        };
        let mut frac = [0.0f32; LANES];
        let mut fluid_here = [1.0f32; LANES];
        // Σ frac over the fluid targets. Without solids every target counts and the sum factors into the
        // product of the per-axis sums (the scale need only be the same number in this pass and the
        // gather, which reads it; the rounding remainder corrects the rest). Each axis adds
        // `(len₋₁ + len₊₁) + len₀`, so mirror images get the same bits.
        let mut t = [1.0f32; LANES];
        if fluid.is_none() {
            for a in 0..D {
                let [minus, zero, plus] = &lens[a];
                for l in 0..LANES {
                    t[l] *= (minus[l] + plus[l]) + zero[l];
                }
            }
        } else {
            for ro in 0..rows {
                let (delta, roff) = layout.neighbours[3 * ro + 1];
                let t0 = (i0 as isize - delta) as usize;
                for (slot, shift, off) in row_members(roff) {
                    let len = &lens[0][(off[0] + 1.0) as usize];
                    wet(t0, shift, &mut fluid_here);
                    let acr = &across[ro];
                    total.put(ro, slot == 0, |l| (len[l] * acr[l]) * fluid_here[l]);
                }
                total.end_row(ro);
            }
            for l in 0..LANES {
                t[l] = total.total::<D>(l);
            }
        }
        let mut inv = [0.0f32; LANES];
        for l in 0..LANES {
            inv[l] = if t[l] > 0.0 { 1.0 / t[l] } else { 0.0 };
        }
        // The parts with the gather's arithmetic: x-overlap times (overlaps across x times scale); a part
        // that lands on a solid cell is not handed out (the fluid cells' parts cover it through `scale`).
        for ro in 0..rows {
            let (delta, roff) = layout.neighbours[3 * ro + 1];
            let t0 = (i0 as isize - delta) as usize;
            let mut scaled = [0.0f32; LANES];
            for l in 0..LANES {
                scaled[l] = across[ro][l] * inv[l];
            }
            for (slot, shift, off) in row_members(roff) {
                let len = &lens[0][(off[0] + 1.0) as usize];
                wet(t0, shift, &mut fluid_here);
                for l in 0..LANES {
                    frac[l] = (len[l] * scaled[l]) * fluid_here[l];
                }
                for (k, tree) in handed.iter_mut().enumerate().take(S) {
                    let mk = &m[k];
                    tree.put(ro, slot == 0, |l| part(frac[l], mk[l]));
                }
            }
            for tree in handed.iter_mut().take(S) {
                tree.end_row(ro);
            }
        }
        // SAFETY: chunks of distinct rows are disjoint.
        store(unsafe { scale_out.slice_mut(i0..i0 + w) }, &inv);
        for k in 0..S {
            let mut d = [0.0f32; LANES];
            for l in 0..LANES {
                d[l] = m[k][l] - handed[k].total::<D>(l);
            }
            store(unsafe { deficit_out[k].slice_mut(i0..i0 + w) }, &d);
        }
    });
}

/// Sums over one chunk of the new state, for the step's diagnostics: quanta per substance, kinetic energy
/// (kg·cells²/s²), momentum (kg·cells/s) and the largest squared speed (cells²/s²) among cells holding at
/// least [`SPECK`] quanta. The gather computes them while the chunk's new particles are still in cache;
/// added chunk by chunk in index order they give totals that do not depend on the thread count.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Totals {
    pub quanta: [f64; MAX_SUBSTANCES],
    pub kinetic: f64,
    pub momentum: [f64; 3],
    pub max_speed2: f64,
}

impl Totals {
    /// Adds `other`'s sums and keeps the larger squared speed.
    pub(crate) fn add(&mut self, other: &Totals) {
        for (a, b) in self.quanta.iter_mut().zip(&other.quanta) {
            *a += b;
        }
        self.kinetic += other.kinetic;
        for (a, b) in self.momentum.iter_mut().zip(&other.momentum) {
            *a += b;
        }
        self.max_speed2 = self.max_speed2.max(other.max_speed2);
    }
}

/// Cells with fewer quanta than this (1% of a cell at rest density) are specks whose speed does not set the
/// time step: their velocities carry no weight.
pub(crate) const SPECK: f32 = 0.01 * QUANTA_PER_REST_CELL;

/// Eight running accumulators over the first `w` lanes, `acc[j] = op(acc[j], x[8i + j])` from 0, so that the
/// loop vectorises and the result depends on nothing but the values.
#[inline(always)]
fn lanes8(x: &[f64; LANES], w: usize, op: impl Fn(f64, f64) -> f64) -> [f64; 8] {
    let mut acc = [0.0f64; 8];
    let full = w / 8 * 8;
    for c in x[..full].chunks_exact(8) {
        for j in 0..8 {
            acc[j] = op(acc[j], c[j]);
        }
    }
    for (j, &v) in x[full..w].iter().enumerate() {
        acc[j] = op(acc[j], v);
    }
    acc
}

/// The largest of the first `w` lanes (nonnegative).
#[inline(always)]
fn lane_max(x: &[f64; LANES], w: usize) -> f64 {
    let max = |a: f64, v: f64| if v > a { v } else { a };
    lanes8(x, w, max).into_iter().fold(0.0, max)
}

/// The sum of the first `w` lanes, in a fixed order (eight running sums, then pairwise).
#[inline(always)]
fn lane_sum(x: &[f64; LANES], w: usize) -> f64 {
    let acc = lanes8(x, w, |a, v| a + v);
    ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]))
}

/// Sources of one neighbour row of a chunk: its cells and one more on each side.
const SPAN: usize = LANES + 2;

/// The inputs of a neighbour row's sources as fixed-size windows (`P = &[f32; SPAN]`), or the scratch
/// (`P = [f32; SPAN]`) that holds zero-padded copies of them for a chunk shorter than [`LANES`].
#[derive(Clone)]
struct NeighbourRow<P, const D: usize, const S: usize> {
    pos: [P; D],
    vel: [P; D],
    mass: [P; S],
    deficit: [P; S],
    scale: [P; 1],
}

impl<const D: usize, const S: usize> NeighbourRow<[f32; SPAN], D, S> {
    const fn new() -> Self {
        Self {
            pos: [[0.0; SPAN]; D],
            vel: [[0.0; SPAN]; D],
            mass: [[0.0; SPAN]; S],
            deficit: [[0.0; SPAN]; S],
            scale: [[0.0; SPAN]; 1],
        }
    }
}

/// The values `start..start + SPAN` of each of `inputs` as fixed-size windows, so that lane loops over
/// them compile to whole vectors. A full chunk (`span == SPAN`) reads the inputs in place; a shorter one
/// gets zero-padded copies in `pads`.
#[inline(always)]
fn windows<'a, const K: usize>(
    inputs: [&'a [f32]; K],
    start: usize,
    span: usize,
    pads: &'a mut [[f32; SPAN]; K],
) -> [&'a [f32; SPAN]; K] {
    if span == SPAN {
        inputs.map(|x| x[start..start + SPAN].try_into().unwrap())
    } else {
        for (pad, x) in pads.iter_mut().zip(inputs) {
            pad[..span].copy_from_slice(&x[start..start + span]);
            pad[span..].fill(0.0);
        }
        let pads: &'a [[f32; SPAN]; K] = pads;
        std::array::from_fn(|k| &pads[k])
    }
}

/// The factors of a neighbour row's parts that do not depend on the x-offset, per source of the row.
#[derive(Clone)]
struct Across<const D: usize> {
    /// Product of the overlaps along the axes after x, times the source's scale.
    frac: [f32; SPAN],
    /// Overlap centres along those axes (index 0 unused).
    centre: [[f32; SPAN]; D],
    /// 1 where the box centre lies in the cell along every axis after x, else 0.
    owns: [f32; SPAN],
}

/// Per-lane terms of a chunk's [`Totals`].
struct LaneSums {
    /// The term being summed.
    lane: [f64; LANES],
    /// Quanta of all substances.
    quanta: [f32; LANES],
    /// Mass (kg).
    mass: [f64; LANES],
    /// Squared speed.
    speed2: [f64; LANES],
}

/// Scratch of the gather.
#[derive(Clone)]
struct GatherScratch<const D: usize, const S: usize> {
    mass: [SumOrder; S],
    total: SumOrder,
    centre: [SumOrder; D],
    momentum: [SumOrder; D],
    src: NeighbourRow<[f32; SPAN], D, S>,
}

/// Stage "reintegrate" (Moroz 2020, "Using particle distributions"): every cell gathers, from the 3^D
/// neighbours, the part of each advanced particle's box of half-size r that overlaps the cell. The overlap
/// fraction `frac = Πₐ |overlapₐ|` (renormalised by [`normalise`]) carries its share of each substance's
/// mass, its centre of mass is the overlap box's centre, and its momentum is the part's mass times V; the
/// sums are normalised into the cell's new particle. A cell that receives nothing stays vacuum.
///
/// Expects `src.pos` to hold the advanced positions X' from [`advance`], and `scale`/`deficit` from
/// [`normalise`]; `unit[k]` is the mass of one quantum of substance k (kg). Writes the new state into `dst`
/// (solid cells, `fluid[i] = 0`, left empty) and each chunk's [`Totals`] into `totals`, indexed like the
/// occupancy map.
#[allow(clippy::too_many_arguments)]
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2+fma"))]
pub(crate) fn reintegrate<const D: usize, const S: usize>(
    layout: &CellLayout<D>,
    src: &State<D>,
    fluid: Option<&[f32]>,
    scale: &[f32],
    deficit: &[Vec<f32>],
    unit: [f64; S],
    occupied: &[bool],
    dst: &mut State<D>,
    totals: &mut [Totals],
    r: f32,
) {
    let unit64 = unit;
    let unit: [f32; S] = unit.map(|u| u as f32);
    let totals_out = SharedSlice::new(totals);
    let pos: [&[f32]; D] = std::array::from_fn(|a| src.pos[a].as_slice());
    let vel: [&[f32]; D] = std::array::from_fn(|a| src.vel[a].as_slice());
    let mass: [&[f32]; S] = std::array::from_fn(|k| src.mass[k].as_slice());
    let deficit: [&[f32]; S] = std::array::from_fn(|k| deficit[k].as_slice());
    let out_pos: Vec<SharedSlice<f32>> = dst.pos.iter_mut().map(|v| SharedSlice::new(v)).collect();
    let out_vel: Vec<SharedSlice<f32>> = dst.vel.iter_mut().map(|v| SharedSlice::new(v)).collect();
    let out_mass: Vec<SharedSlice<f32>> =
        dst.mass.iter_mut().map(|v| SharedSlice::new(v)).collect();
    let rows = layout.neighbours.len() / 3;
    let init = || {
        Box::new(GatherScratch::<D, S> {
            mass: std::array::from_fn(|_| SumOrder::new()),
            total: SumOrder::new(),
            centre: std::array::from_fn(|_| SumOrder::new()),
            momentum: std::array::from_fn(|_| SumOrder::new()),
            src: NeighbourRow::new(),
        })
    };
    for_each_chunk(layout, init, |sc, i0, w| {
        let w = w.min(LANES);
        if !neighbourhood_occupied(layout, occupied, i0) {
            // Nothing can arrive: vacuum stays vacuum.
            // SAFETY: chunks of distinct rows are disjoint.
            for o in out_mass.iter().chain(&out_pos).chain(&out_vel) {
                unsafe { o.slice_mut(i0..i0 + w) }.fill(0.0);
            }
            let c = chunk_index(layout, i0);
            unsafe { totals_out.slice_mut(c..c + 1) }.fill(Totals::default());
            return;
        }
        for ro in 0..rows {
            let (delta, roff) = layout.neighbours[3 * ro + 1];
            // The row's sources j0 − 1 ..= j0 + w; its three x-offsets see them shifted by 0, 1 and 2 lanes.
            // They are copied into fixed-size arrays (zero past the chunk, whose lanes are computed but
            // not written out), so that every lane loop below compiles to whole vectors.
            let jm = (i0 as isize + delta) as usize - 1;
            let span = w + 2;
            let pad = &mut sc.src;
            let src = NeighbourRow::<&[f32; SPAN], D, S> {
                pos: windows(pos, jm, span, &mut pad.pos),
                vel: windows(vel, jm, span, &mut pad.vel),
                mass: windows(mass, jm, span, &mut pad.mass),
                deficit: windows(deficit, jm, span, &mut pad.deficit),
                scale: windows([scale], jm, span, &mut pad.scale),
            };
            // What does not depend on the x-offset is computed once per source: the overlaps across x
            // times the source's scale, their centres, and whether the box centre lies in the cell
            // across x.
            // A local, not scratch: the compiler then knows it aliases nothing and vectorises its loops.
            let mut cross = Across::<D> {
                frac: [1.0; SPAN],
                centre: [[0.0; SPAN]; D],
                owns: [1.0; SPAN],
            };
            for a in 1..D {
                let mut lane = |l: usize| {
                    let x = roff[a] + src.pos[a][l];
                    let (len, c) = overlap(x, r);
                    cross.frac[l] *= len;
                    cross.centre[a][l] = c;
                    cross.owns[l] = if centre_in_cell(x) {
                        cross.owns[l]
                    } else {
                        0.0
                    };
                };
                // The first LANES as one loop (which vectorises; a loop over all SPAN did not), then the
                // two past the chunk.
                for l in 0..LANES {
                    lane(l);
                }
                for l in LANES..SPAN {
                    lane(l);
                }
            }
            for l in 0..SPAN {
                cross.frac[l] *= src.scale[0][l];
            }
            // Each x-offset's parts go straight into the neighbourhood sums, left, right, centre.
            for (slot, shift, off) in row_members(roff) {
                let first = slot == 0;
                let lanes = shift..shift + LANES;
                let mut frac = [0.0f32; LANES];
                let mut owns = [0.0f32; LANES];
                let mut centre = [0.0f32; LANES];
                let (across, owns_across) =
                    (&cross.frac[lanes.clone()], &cross.owns[lanes.clone()]);
                let xj = &src.pos[0][lanes.clone()];
                for l in 0..LANES {
                    let x = off[0] + xj[l];
                    let (len, c) = overlap(x, r);
                    frac[l] = len * across[l];
                    centre[l] = c;
                    owns[l] = if centre_in_cell(x) {
                        owns_across[l]
                    } else {
                        0.0
                    };
                }
                let mut total = [0.0f32; LANES];
                for k in 0..S {
                    let mj: &[f32; LANES] = src.mass[k][lanes.clone()].try_into().unwrap();
                    let dj: &[f32; LANES] = src.deficit[k][lanes.clone()].try_into().unwrap();
                    let u = unit[k];
                    sc.mass[k].put(ro, first, |l| {
                        // The deficit only where this cell holds the box centre: owns is 1 or 0.
                        let p = part(frac[l], mj[l]) + owns[l] * dj[l];
                        total[l] += p * u;
                        p
                    });
                }
                sc.total.put(ro, first, |l| total[l]);
                for a in 0..D {
                    let c: &[f32; LANES] = if a == 0 {
                        &centre
                    } else {
                        cross.centre[a][lanes.clone()].try_into().unwrap()
                    };
                    sc.centre[a].put(ro, first, |l| c[l] * total[l]);
                    let vj: &[f32; LANES] = src.vel[a][lanes.clone()].try_into().unwrap();
                    sc.momentum[a].put(ro, first, |l| total[l] * vj[l]);
                }
            }
            for tree in sc
                .mass
                .iter_mut()
                .chain([&mut sc.total])
                .chain(&mut sc.centre)
                .chain(&mut sc.momentum)
            {
                tree.end_row(ro);
            }
        }
        // Solid cells keep nothing: what the parts brought them was paid for by the fluid cells' parts.
        let mut keep = [1.0f32; LANES];
        if let Some(f) = fluid {
            load(&mut keep, &f[i0..i0 + w]);
        }
        let mut inv = [0.0f32; LANES];
        for l in 0..LANES {
            let t = sc.total.total::<D>(l);
            inv[l] = if t > 0.0 && keep[l] > 0.0 {
                1.0 / t
            } else {
                0.0
            };
        }
        // The new particles and their diagnostic terms are built in local arrays (which the compiler
        // knows alias nothing, so the loops vectorise), then copied out.
        let mut sums = LaneSums {
            lane: [0.0; LANES],
            quanta: [0.0; LANES],
            mass: [0.0; LANES],
            speed2: [0.0; LANES],
        };
        let mut new = [0.0f32; LANES];
        let mut chunk = Totals::default();
        // SAFETY (all writes below): chunks of distinct rows are disjoint.
        for k in 0..S {
            let u = unit64[k];
            for l in 0..LANES {
                let q = if keep[l] > 0.0 {
                    sc.mass[k].total::<D>(l)
                } else {
                    0.0
                };
                new[l] = q;
                sums.lane[l] = q as f64;
                sums.quanta[l] += q;
                sums.mass[l] += q as f64 * u;
            }
            chunk.quanta[k] = lane_sum(&sums.lane, w);
            store(unsafe { out_mass[k].slice_mut(i0..i0 + w) }, &new);
        }
        let mut new_v = [0.0f32; LANES];
        for a in 0..D {
            for l in 0..LANES {
                // The centre of mass of parts that all lie in the cell lies in the cell; the clamp only
                // removes rounding.
                new[l] = (sc.centre[a].total::<D>(l) * inv[l]).clamp(-0.5, 0.5);
                new_v[l] = sc.momentum[a].total::<D>(l) * inv[l];
                let v64 = new_v[l] as f64;
                sums.speed2[l] += v64 * v64;
                sums.lane[l] = sums.mass[l] * v64;
            }
            chunk.momentum[a] = lane_sum(&sums.lane, w);
            store(unsafe { out_pos[a].slice_mut(i0..i0 + w) }, &new);
            store(unsafe { out_vel[a].slice_mut(i0..i0 + w) }, &new_v);
        }
        for l in 0..LANES {
            sums.lane[l] = 0.5 * sums.mass[l] * sums.speed2[l];
        }
        chunk.kinetic = lane_sum(&sums.lane, w);
        for l in 0..LANES {
            sums.lane[l] = if sums.quanta[l] >= SPECK {
                sums.speed2[l]
            } else {
                0.0
            };
        }
        chunk.max_speed2 = lane_max(&sums.lane, w);
        let c = chunk_index(layout, i0);
        unsafe { totals_out.slice_mut(c..c + 1) }.fill(chunk);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One particle, advanced by less than a cell, spreads over exactly the cells its box overlaps, and the
    /// gathered parts add up to its mass.
    #[test]
    fn single_particle_spreads_over_overlapped_cells() {
        let layout = CellLayout::<2>::new([5, 5]);
        let mut src = State::<2>::new(layout.len(), 1);
        let mut dst = State::<2>::new(layout.len(), 1);
        let c = layout.index([2, 2]);
        const Q: f32 = 1_048_576.0;
        src.mass[0][c] = Q;
        src.pos[0][c] = 0.25;
        src.pos[1][c] = -0.1;
        let mut scale = vec![0.0; layout.len()];
        let mut deficit = vec![vec![0.0; layout.len()]];
        let mut occupied = vec![false; occupancy_len(&layout)];
        occupancy(&layout, &src, &mut occupied);
        normalise::<2, 1>(
            &layout,
            &src,
            None,
            0.5,
            &occupied,
            &mut scale,
            &mut deficit,
        );
        let mut totals = vec![Totals::default(); occupancy_len(&layout)];
        reintegrate::<2, 1>(
            &layout,
            &src,
            None,
            &scale,
            &deficit,
            [1.0],
            &occupied,
            &mut dst,
            &mut totals,
            0.5,
        );
        // Exactly conserved: the parts are whole quanta and the rounding remainder goes to the box centre.
        let total: f32 = dst.mass[0].iter().sum();
        assert_eq!(total, Q);
        // The chunk totals count the same quanta.
        let counted: f64 = totals.iter().map(|t| t.quanta[0]).sum();
        assert_eq!(counted, Q as f64);
        // Box [−0.25, 0.75] × [−0.6, 0.4]: x splits 0.75/0.25, y splits 0.1/0.9.
        let right = dst.mass[0][layout.index([3, 2])];
        let below = dst.mass[0][layout.index([2, 1])];
        assert!((right / Q - 0.25 * 0.9).abs() < 1e-6, "{right}");
        assert!((below / Q - 0.75 * 0.1).abs() < 1e-6, "{below}");
        // The right part's centre of mass is the overlap centre: x ∈ [−0.5, −0.25] → −0.375.
        assert!((dst.pos[0][layout.index([3, 2])] + 0.375).abs() < 1e-6);
    }

    /// Skipping empty chunks changes nothing: particles scattered over a grid of several chunks per row, some
    /// at chunk edges so that their boxes cross into empty chunks, gather to the same state (compared as
    /// numbers: a skipped chunk writes +0 where the computation may give −0) as with every chunk computed.
    #[test]
    fn skipping_empty_chunks_gives_the_computed_state() {
        let layout = CellLayout::<2>::new([3 * LANES + 5, 9]);
        let mut src = State::<2>::new(layout.len(), 2);
        let seeds: [([usize; 2], usize, f32, f32); 6] = [
            ([LANES - 1, 4], 0, 0.45, 0.2),
            ([LANES, 0], 1, -0.45, -0.3),
            ([2 * LANES, 8], 0, -0.5, 0.49),
            ([3 * LANES + 4, 3], 1, 0.49, -0.1),
            ([0, 6], 0, -0.49, 0.0),
            ([2 * LANES - 1, 1], 1, 0.3, -0.49),
        ];
        for (c, k, x, y) in seeds {
            let i = layout.index(c);
            src.mass[k][i] = 1_000_000.0;
            src.pos[0][i] = x;
            src.pos[1][i] = y;
            src.vel[0][i] = x - y;
        }
        let gather = |occupied: &[bool]| {
            let mut dst = State::<2>::new(layout.len(), 2);
            let mut scale = vec![0.0; layout.len()];
            let mut deficit = vec![vec![0.0; layout.len()]; 2];
            normalise::<2, 2>(&layout, &src, None, 0.5, occupied, &mut scale, &mut deficit);
            let mut totals = vec![Totals::default(); occupancy_len(&layout)];
            reintegrate::<2, 2>(
                &layout,
                &src,
                None,
                &scale,
                &deficit,
                [1.0, 2.0],
                occupied,
                &mut dst,
                &mut totals,
                0.5,
            );
            (dst, totals)
        };
        let mut occupied = vec![false; occupancy_len(&layout)];
        occupancy(&layout, &src, &mut occupied);
        assert!(
            occupied.iter().filter(|&&o| !o).count() > 10,
            "the test must skip chunks"
        );
        let (skipped, skipped_totals) = gather(&occupied);
        let (computed, computed_totals) = gather(&vec![true; occupancy_len(&layout)]);
        assert_eq!(skipped_totals, computed_totals);
        for (a, b) in skipped
            .mass
            .iter()
            .chain(&skipped.pos)
            .chain(&skipped.vel)
            .zip(
                computed
                    .mass
                    .iter()
                    .chain(&computed.pos)
                    .chain(&computed.vel),
            )
        {
            assert!(a.iter().zip(b).all(|(p, q)| p == q));
        }
    }
}
