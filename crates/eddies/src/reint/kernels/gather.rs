//! The second half of reintegration tracking (Moroz 2020, "Using particle distributions"): the bookkeeping
//! pass that makes every particle's parts add up to its mass in whole quanta, the gather of the parts into
//! each cell's new particle, and the per-chunk totals the step's diagnostics read.

use super::{
    chunk_index, chunk_occupied, for_each_chunk, load, neighbourhood_occupied, pos_part,
    row_members, store, windows, CellLayout, NeighbourRow, State, SumOrder, LANES, SPAN,
};
use crate::par::SharedSlice;
use crate::reint::{MAX_SUBSTANCES, QUANTA_PER_REST_CELL};
use multiversion::multiversion;

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
/// Expects `src.pos` to hold the advanced positions X' from [`advance`](fn@super::advance), and
/// `scale`/`deficit` from [`normalise`]; `unit[k]` is the mass of one quantum of substance k (kg). Writes the
/// new state into `dst` (solid cells, `fluid[i] = 0`, left empty) and each chunk's [`Totals`] into `totals`,
/// indexed like the occupancy map.
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
    use crate::reint::kernels::{occupancy, occupancy_len};

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
