//! The per-cell stages of reintegration tracking, as gathers over the 3^D neighbourhood.
//!
//! Every stage is written once for one row of cells and run over rows in parallel; each cell writes only its
//! own outputs, so results are independent of the thread count. Inner loops run over chunks of [`LANES`]
//! cells of a row with fixed-size accumulators, so the compiler vectorises across cells (no float
//! reassociation is involved: each lane computes exactly what the scalar loop would).

use super::state::{Layout, State};
use super::MAX_SUBSTANCES;
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

/// Per-lane sums of one quantity over the 3^D neighbourhood, added in mirror-symmetric order: within a row
/// `(left + right) + centre`, then rows and planes the same way. Float addition is commutative, so a cell and
/// its mirror image add the very same numbers in the very same pairs and get the same bits — a
/// mirror-symmetric scene stays exactly symmetric, however long it runs.
pub(crate) struct Tree {
    row: [[f32; LANES]; 3],
    plane: [[f32; LANES]; 3],
}

impl Tree {
    pub(crate) const fn new() -> Self {
        Self { row: [[0.0; LANES]; 3], plane: [[0.0; LANES]; 3] }
    }

    /// Stores the triplet sum `(left + right) + centre` of row `dy` for lane `l`.
    #[inline(always)]
    fn set(&mut self, ro: usize, l: usize, left: f32, right: f32, centre: f32) {
        self.row[ro % 3][l] = (left + right) + centre;
    }

    /// Folds the three rows of plane `dz` once they are complete.
    #[inline(always)]
    fn fold_rows(&mut self, dz: usize, w: usize) {
        for l in 0..w {
            self.plane[dz][l] = (self.row[0][l] + self.row[2][l]) + self.row[1][l];
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

/// Runs `row(ro, delta, off)` for each of the 3^(D−1) neighbour rows of a cell, in order (`ro`: the row's
/// ordinal, whose `ro % 3` is the tree row to set; `delta`, `off`: index step and centre offset of the row's
/// x = 0 member), folding every completed plane of the given trees.
#[inline(always)]
fn for_each_row<const D: usize>(
    layout: &Layout<D>,
    w: usize,
    trees: &mut [&mut Tree],
    mut row: impl FnMut(usize, isize, [f32; D], &mut [&mut Tree]),
) {
    let rows = layout.neighbours.len() / 3;
    for ro in 0..rows {
        let (delta, off) = layout.neighbours[3 * ro + 1];
        row(ro, delta, off, trees);
        if ro % 3 == 2 {
            for t in trees.iter_mut() {
                t.fold_rows(ro / 3, w);
            }
        }
    }
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
        // Pressure and viscous sums per axis: trees 0..D and D..2D.
        let mut trees: [Tree; 6] = std::array::from_fn(|_| Tree::new());
        let mut refs: Vec<&mut Tree> = trees.iter_mut().take(2 * D).collect();
        for_each_row(layout, w, &mut refs, |ro, delta, roff, t| {
            let j0 = (i0 as isize + delta) as usize;
            // The pair term of neighbour j (at centre offset `off`) on lane l: pressure and viscous parts.
            let pair = |j: usize, ox: f32, l: usize| -> ([f32; D], [f32; D]) {
                let mut d = [0.0f32; D];
                let mut r2 = 0.0;
                for a in 0..D {
                    let off = if a == 0 { ox } else { roff[a] };
                    // d = Xᵢ − Xⱼ, with Xⱼ measured from cell i's centre.
                    d[a] = xi[a][l] - (off + pos[a][j]);
                    r2 += d[a] * d[a];
                }
                let r = r2.sqrt();
                let t = pos_part(h - r);
                let t2 = t * t;
                let inv_r = if r > 0.0 { 1.0 / r } else { 0.0 };
                let fp = rho[j] * (q_i[l] + q[j]) * t2 * inv_r;
                let mut fv = 0.0;
                if viscous {
                    let present = if rho[j] > 0.0 { 1.0 } else { 0.0 };
                    // (1 + ρⱼ/ρᵢ) is what makes the pair force symmetric; for a speck next to liquid it
                    // would exceed the explicit stability limit of the viscous term by orders of
                    // magnitude, so the ratio is capped at the floor of the pressure term (1/S_FLOOR).
                    let ratio = (rho[j] * inv_rho_i[l]).min(1.0 / S_FLOOR);
                    fv = present * (1.0 + ratio) * t2 * r / (r2 + eps2);
                }
                (
                    std::array::from_fn(|a| fp * d[a]),
                    std::array::from_fn(|a| fv * (vi[a][l] - vel[a][j])),
                )
            };
            for l in 0..w {
                let (pl, vl) = pair(j0 + l - 1, -1.0, l);
                let (pr, vr) = pair(j0 + l + 1, 1.0, l);
                let (pc, vc) = pair(j0 + l, 0.0, l);
                for a in 0..D {
                    t[a].set(ro, l, pl[a], pr[a], pc[a]);
                    t[D + a].set(ro, l, vl[a], vr[a], vc[a]);
                }
            }
        });
        for a in 0..D {
            // SAFETY: chunks of distinct rows are disjoint.
            let o = unsafe { out[a].slice_mut(i0..i0 + w) };
            for l in 0..w {
                o[l] = k.pressure * trees[a].total::<D>(l) - k.viscosity * trees[D + a].total::<D>(l);
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
    for_each_chunk(layout, |i0, w| {
        let x: [&[f32]; D] = std::array::from_fn(|a| &pos[a][i0..i0 + w]);
        let m: [&[f32]; S] = std::array::from_fn(|k| &mass[k][i0..i0 + w]);
        // The overlap of this source's box with the target at each neighbour offset. The gather of target
        // t = j − delta sees this source at centre offset `off`, so the same arithmetic gives the same bits.
        let frac_of = |l: usize, ox: f32, roff: [f32; D], t: usize| -> f32 {
            let mut frac = 1.0;
            for a in 0..D {
                let off = if a == 0 { ox } else { roff[a] };
                frac *= overlap(off + x[a][l], r).0;
            }
            match fluid {
                Some(f) => frac * f[t],
                None => frac,
            }
        };
        let mut fracs = [[[0.0f32; LANES]; 3]; 9];
        let mut total = Tree::new();
        for_each_row(layout, w, &mut [&mut total], |ro, delta, roff, t| {
            let t0 = (i0 as isize - delta) as usize;
            for l in 0..w {
                // Target at x-offset −1 from this source sees it at +1, and so on.
                let left = frac_of(l, -1.0, roff, t0 + l + 1);
                let right = frac_of(l, 1.0, roff, t0 + l - 1);
                let centre = frac_of(l, 0.0, roff, t0 + l);
                fracs[ro][0][l] = left;
                fracs[ro][1][l] = centre;
                fracs[ro][2][l] = right;
                t[0].set(ro, l, left, right, centre);
            }
        });
        let mut inv = [0.0f32; LANES];
        for l in 0..w {
            let total = total.total::<D>(l);
            inv[l] = if total > 0.0 { 1.0 / total } else { 0.0 };
        }
        let mut handed: [Tree; MAX_SUBSTANCES] = std::array::from_fn(|_| Tree::new());
        let mut refs: Vec<&mut Tree> = handed.iter_mut().take(S).collect();
        for_each_row(layout, w, &mut refs, |ro, _, _, t| {
            for l in 0..w {
                let [left, centre, right] = [0, 1, 2].map(|c| fracs[ro][c][l] * inv[l]);
                for k in 0..S {
                    t[k].set(ro, l, part(left, m[k][l]), part(right, m[k][l]), part(centre, m[k][l]));
                }
            }
        });
        // SAFETY: chunks of distinct rows are disjoint.
        unsafe { scale_out.slice_mut(i0..i0 + w) }.copy_from_slice(&inv[..w]);
        for k in 0..S {
            let d = unsafe { deficit_out[k].slice_mut(i0..i0 + w) };
            for l in 0..w {
                d[l] = m[k][l] - handed[k].total::<D>(l);
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
        // Trees: mass per substance (0..S), total mass (S), centre (S+1..S+1+D), momentum (S+1+D..).
        let mut trees: [Tree; MAX_SUBSTANCES + 7] = std::array::from_fn(|_| Tree::new());
        let mut refs: Vec<&mut Tree> = trees.iter_mut().take(S + 1 + 2 * D).collect();
        for_each_row(layout, w, &mut refs, |ro, delta, roff, t| {
            let j0 = (i0 as isize + delta) as usize;
            // What source j, at centre offset (ox, roff), hands this cell: masses, total, centre and momentum
            // weights.
            let hand = |j: usize, ox: f32| -> ([f32; S], f32, [f32; D], [f32; D]) {
                let mut frac = 1.0;
                let mut centre = [0.0f32; D];
                let mut owns = true;
                for a in 0..D {
                    let x = if a == 0 { ox } else { roff[a] } + pos[a][j];
                    let (len, c) = overlap(x, r);
                    frac *= len;
                    centre[a] = c;
                    owns &= centre_in_cell(x);
                }
                let fs = frac * scale[j];
                let mut masses = [0.0f32; S];
                let mut m = 0.0;
                for k in 0..S {
                    masses[k] = part(fs, mass[k][j]) + if owns { deficit[k][j] } else { 0.0 };
                    m += masses[k] * unit[k];
                }
                (masses, m, std::array::from_fn(|a| m * centre[a]), std::array::from_fn(|a| m * vel[a][j]))
            };
            for l in 0..w {
                let (ml, tl, xl, vl) = hand(j0 + l - 1, -1.0);
                let (mr, tr, xr, vr) = hand(j0 + l + 1, 1.0);
                let (mc, tc, xc, vc) = hand(j0 + l, 0.0);
                for k in 0..S {
                    t[k].set(ro, l, ml[k], mr[k], mc[k]);
                }
                t[S].set(ro, l, tl, tr, tc);
                for a in 0..D {
                    t[S + 1 + a].set(ro, l, xl[a], xr[a], xc[a]);
                    t[S + 1 + D + a].set(ro, l, vl[a], vr[a], vc[a]);
                }
            }
        });
        let mut inv = [0.0f32; LANES];
        for l in 0..w {
            let at = trees[S].total::<D>(l);
            inv[l] = if at > 0.0 { 1.0 / at } else { 0.0 };
        }
        // SAFETY (all writes below): chunks of distinct rows are disjoint.
        for k in 0..S {
            let o = unsafe { out_mass[k].slice_mut(i0..i0 + w) };
            for l in 0..w {
                o[l] = trees[k].total::<D>(l);
            }
        }
        for a in 0..D {
            let (x, v) = unsafe { (out_pos[a].slice_mut(i0..i0 + w), out_vel[a].slice_mut(i0..i0 + w)) };
            for l in 0..w {
                // The centre of mass of parts that all lie in the cell lies in the cell; the clamp only
                // removes rounding.
                x[l] = (trees[S + 1 + a].total::<D>(l) * inv[l]).clamp(-0.5, 0.5);
                v[l] = trees[S + 1 + D + a].total::<D>(l) * inv[l];
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
