//! The fast multipole method over the treecode's octree: cell-to-cell far field with local expansions.
//!
//! **Why.** The treecode of [`super::tree`] evaluates every accepted supervorton at every target: at 10⁵
//! vortons and the θ that keeps the RMS error under 10⁻³, about 1 200 supervortons per target. Here a
//! well-separated pair of cells (one of targets, one of vortons) interacts once, through a Taylor
//! expansion of the far field about the target cell's centre that all its targets then share; the
//! expansions pass down the target tree to the leaves (Greengard & Rokhlin 1987, in the Cartesian form of
//! Dehnen 2002).
//!
//! **The expansion.** Far from a vorton the mollified kernel is the singular one: the velocity kernel of
//! [`super::biot_savart`] is `|r|⁻³ (1 − 15/8 (σ/|r|)⁴ + …)` (the σ² terms cancel), so a pair is accepted
//! only when the gap between the cells is at least [`GAP`] core radii, where that factor is below 3·10⁻³.
//! The singular velocity is `u = (1/4π) ∇ × ψ` with `ψ(x) = Σⱼ αⱼ / |x − xⱼ|`: three Laplace potentials whose
//! charges are the strength's components. With multi-indices `n` (`|n|` the order, `n! = n₁! n₂! n₃!`):
//! - multipole of a cell about its centre `c` (the circulation-weighted centre of the treecode):
//!   `Mⁿ = Σⱼ αⱼ (c − xⱼ)ⁿ / n!`, shifted to a parent's centre exactly;
//! - cell-to-cell: `Lᵏ += Σₙ Mⁿ ∂ⁿ⁺ᵏ(1/|R|)` at `R = z − c` (z the target cell's centre), the terms with
//!   `|n| + |k| ≤ p` ([`ORDER`]);
//! - local to child: `L'ᵏ = Σₘ tᵐ/m! Lᵏ⁺ᵐ`, `t` the child's centre minus the parent's;
//! - at a target `z + y`: `∂ⱼψ = Σₖ yᵏ/k! Lᵏ⁺ᵉʲ`, and the gradient from `Lᵏ⁺ᵉʲ⁺ᵉˡ`.
//!
//! The derivatives of `1/|R|` come from the recurrence `D⁽ᵐ⁾ₙ₊ₑᵢ = Rᵢ D⁽ᵐ⁺¹⁾ₙ + nᵢ D⁽ᵐ⁺¹⁾ₙ₋ₑᵢ` with
//! `D⁽ᵐ⁾₀ = (−1)ᵐ (2m − 1)!! |R|⁻⁽²ᵐ⁺¹⁾` (the Hermite recurrence of McMurchie & Davidson 1978).
//!
//! **Acceptance.** A target cell of radius `r_a` and a vorton cell of radius `r_b` (the farthest vorton from
//! the expansion centre) interact through expansions when `r_a + r_b < θ |z − c|` and the gap is wide
//! enough for the singular kernel; otherwise the larger cell is split, and two leaves sum their pairs
//! directly with the mollified kernel (the vectorised loops of [`super::biot_savart`]).
//!
//! **Determinism.** The target tree is cut into subtrees of at most [`TASK_TARGETS`] targets, a cut that
//! depends on the targets alone; each subtree runs the dual traversal against the whole vorton tree, then
//! applies its cell-to-cell list in traversal order, shifts the expansions down in a fixed order and sums
//! each target's near pairs in range order. Subtrees run in parallel and share nothing, so results do not
//! depend on the thread count.

use super::biot_savart::{self, Sources, FOUR_PI_INV, TILE};
use super::tree::Node;
use glam::DVec3;
use rayon::prelude::*;
use std::sync::OnceLock;

/// Expansion order p: the cell-to-cell terms keep `|n| + |k| ≤ p`, so the potential is accurate to about
/// `θᵖ⁺¹` and the velocity to `θᵖ`.
pub const ORDER: usize = 5;

/// Multi-indices of order ≤ [`ORDER`].
const NT: usize = (ORDER + 1) * (ORDER + 2) * (ORDER + 3) / 6;

/// Least gap between accepted cells, in core radii of the vorton cell: beyond it the mollified kernel
/// differs from the singular one by less than `15/8 · 5⁻⁴ = 3·10⁻³` of the nearest vorton's share.
pub const GAP: f64 = 5.0;

/// Most targets in a leaf of the target tree. Its cells share one local expansion each, so larger leaves
/// mean fewer cell-to-cell terms and more direct pairs: at 10⁵ vortons (`vpm_tree_sweep`, θ = 0.8) 128
/// measured fastest of 64, 96, 128, 192 and 256.
pub const TARGET_LEAF: usize = 128;

/// Target subtrees of at most this many targets are the parallel tasks (a cut that depends on the targets
/// alone, so the results do not depend on the thread count).
pub const TASK_TARGETS: usize = 2048;

/// Coefficients per multi-index for the three components (the fourth lane pads the loops to four wide).
type Coeffs = [[f64; 4]; NT];

/// Multi-index bookkeeping, built once.
struct Tables {
    /// Order `|n|` of each multi-index (they are listed by order).
    degree: [usize; NT],
    /// `upto[q]`: how many multi-indices have order ≤ q.
    upto: [usize; ORDER + 1],
    /// `sum[k][n]`: the index of `k + n` where `|k| + |n| ≤ ORDER`.
    sum: Vec<[u16; NT]>,
    /// For `n ≠ 0`: an axis `i` with `nᵢ > 0`, the index of `n − eᵢ`, of `n − 2eᵢ` (or `NT`), and `nᵢ`.
    step: [(usize, usize, usize, f64); NT],
    /// The derivative recurrence as one flat list over the table `D[j · NT + n]` (`j` the order of `D⁽ʲ⁾`,
    /// plus a zero entry at [`ZERO`]): entry `out = r_axis · D[back1] + factor · D[back2]`, in an order in
    /// which every entry read was written before.
    recurrence: Vec<Step>,
}

/// One step of the derivative recurrence (see [`Tables::recurrence`]).
#[derive(Clone, Copy)]
struct Step {
    out: u16,
    axis: u16,
    back1: u16,
    back2: u16,
    factor: f32,
}

/// Entries of the flat derivative table: `D⁽ʲ⁾ₙ` at `j · NT + n`, then a zero.
const DTABLE: usize = (ORDER + 1) * NT + 1;

/// The zero entry of the flat derivative table.
const ZERO: usize = DTABLE - 1;

fn tables() -> &'static Tables {
    static T: OnceLock<Tables> = OnceLock::new();
    T.get_or_init(|| {
        let mut list = Vec::with_capacity(NT);
        for d in 0..=ORDER {
            for a in (0..=d).rev() {
                for b in (0..=d - a).rev() {
                    list.push([a, b, d - a - b]);
                }
            }
        }
        let index = |n: [usize; 3]| list.iter().position(|&m| m == n);
        let mut degree = [0; NT];
        let mut step = [(0, 0, NT, 0.0); NT];
        for (k, &n) in list.iter().enumerate() {
            degree[k] = n.iter().sum();
            if let Some(i) = (0..3).find(|&i| n[i] > 0) {
                let mut m = n;
                m[i] -= 1;
                let back1 = index(m).expect("lower order listed");
                let back2 = if n[i] >= 2 {
                    m[i] -= 1;
                    index(m).expect("lower order listed")
                } else {
                    NT
                };
                step[k] = (i, back1, back2, n[i] as f64);
            }
        }
        let mut upto = [0; ORDER + 1];
        for (q, u) in upto.iter_mut().enumerate() {
            *u = degree.iter().filter(|&&d| d <= q).count();
        }
        let sum = list
            .iter()
            .map(|&k| {
                let mut row = [NT as u16; NT];
                for (j, &n) in list.iter().enumerate() {
                    if let Some(s) = index([k[0] + n[0], k[1] + n[1], k[2] + n[2]]) {
                        row[j] = s as u16;
                    }
                }
                row
            })
            .collect();
        let mut recurrence = Vec::new();
        for n in 1..NT {
            let (i, back1, back2, ni) = step[n];
            for j in 0..=ORDER - degree[n] {
                let below = (j + 1) * NT;
                recurrence.push(Step {
                    out: (j * NT + n) as u16,
                    axis: i as u16,
                    back1: (below + back1) as u16,
                    back2: if back2 < NT { below + back2 } else { ZERO } as u16,
                    factor: ni as f32 - 1.0,
                });
            }
        }
        Tables {
            degree,
            upto,
            sum,
            step,
            recurrence,
        }
    })
}

/// `yⁿ / n!` for every multi-index.
#[inline]
fn monomials(t: &Tables, y: DVec3) -> [f64; NT] {
    let y = y.to_array();
    let mut m = [0.0; NT];
    m[0] = 1.0;
    for n in 1..NT {
        let (i, back, _, ni) = t.step[n];
        m[n] = m[back] * y[i] / ni;
    }
    m
}

/// `∂ⁿ (1/|r|)` for every multi-index, in f64: the reference the tests check the batched f32 recurrence
/// against.
#[cfg(test)]
fn derivatives(t: &Tables, r: DVec3) -> [f64; NT] {
    let inv_r2 = 1.0 / r.length_squared();
    let r = r.to_array();
    // d[m][n] = ∂ⁿ D⁽ᵐ⁾, needed for |n| ≤ ORDER − m.
    let mut d = [[0.0; NT]; ORDER + 1];
    let mut a = inv_r2.sqrt();
    for (m, dm) in d.iter_mut().enumerate() {
        dm[0] = a;
        a *= -((2 * m + 1) as f64) * inv_r2;
    }
    for n in 1..NT {
        let (i, back1, back2, ni) = t.step[n];
        for m in 0..=ORDER - t.degree[n] {
            let mut v = r[i] * d[m + 1][back1];
            if back2 < NT {
                v = (ni - 1.0).mul_add(d[m + 1][back2], v);
            }
            d[m][n] = v;
        }
    }
    d[0]
}

/// `out[k + m] += weight[m] · c[k]` over `|k| + |m| ≤ ORDER`: a multipole's shift to a new centre (with
/// the monomials of the old centre minus the new).
fn shift_up(t: &Tables, c: &Coeffs, weight: &[f64; NT], out: &mut Coeffs) {
    for k in 0..NT {
        let row = &t.sum[k][..t.upto[ORDER - t.degree[k]]];
        for (&s, &w) in row.iter().zip(weight) {
            let o = &mut out[s as usize];
            for q in 0..4 {
                o[q] = w.mul_add(c[k][q], o[q]);
            }
        }
    }
}

/// Vorton cells whose cell-to-cell terms are computed side by side, one per f32 lane.
const BATCH: usize = 16;

/// Half a batch: the derivative recurrence runs on eight lanes at a time, whose stores the next steps'
/// loads can take straight from the store buffer (sixteen-lane stores made it several times slower).
const HALF: usize = BATCH / 2;

/// One value per lane of a batch.
type Lanes = [f32; BATCH];

/// One value per lane of half a batch.
type Half = [f32; HALF];

/// Buffers of [`expand_batch`], reused: the batch's multipoles lane by lane and the derivative table.
struct BatchScratch {
    stage: [[[f32; 4]; BATCH]; NT],
    m: [[Lanes; 3]; NT],
    d: [[Half; DTABLE]; 2],
}

impl BatchScratch {
    fn new() -> Box<Self> {
        Box::new(BatchScratch {
            stage: [[[0.0; 4]; BATCH]; NT],
            m: [[[0.0; BATCH]; 3]; NT],
            d: [[[0.0; HALF]; DTABLE]; 2],
        })
    }
}

/// The cell-to-cell terms of [`BATCH`] vorton cells (padded with [`EMPTY`]) for the target cell centred at
/// `z`, added lane by lane to `acc` (`acc[k][q][lane]`; the caller sums the lanes in a fixed order):
/// `Lᵏ += Σₙ Mⁿ ∂ⁿ⁺ᵏ(1/|R|)`, `|n| + |k| ≤ ORDER`, each lane its own R, plus the cores' correction.
fn expand_batch(
    t: &Tables,
    z: DVec3,
    cells: &[&SourceCell; BATCH],
    scratch: &mut BatchScratch,
    acc: &mut [[Lanes; 3]; NT],
) {
    let BatchScratch { stage, m, d } = scratch;
    let mut r = [[[0f32; HALF]; 3]; 2];
    let mut core = [[0f32; BATCH]; 3];
    for (l, c) in cells.iter().enumerate() {
        let rc = (z - c.centre).to_array();
        for i in 0..3 {
            r[l / HALF][i][l % HALF] = rc[i] as f32;
            core[i][l] = -0.125 * c.core32[i];
        }
    }
    // The multipoles, copied a row at a time and then turned lane by lane.
    for (n, sn) in stage.iter_mut().enumerate() {
        for (sl, c) in sn.iter_mut().zip(cells) {
            *sl = c.multipole32[n];
        }
    }
    for (mn, sn) in m.iter_mut().zip(stage.iter()) {
        for q in 0..3 {
            for l in 0..BATCH {
                mn[q][l] = sn[l][q];
            }
        }
    }
    // D⁽ʲ⁾ₙ = ∂ⁿ D⁽ʲ⁾ for |n| ≤ ORDER − j, by the recurrence of the module's doc, half a batch at a time.
    for (dh, rh) in d.iter_mut().zip(&r) {
        let mut inv_r2 = [0f32; HALF];
        for l in 0..HALF {
            inv_r2[l] = 1.0 / rh[0][l].mul_add(rh[0][l], rh[1][l].mul_add(rh[1][l], rh[2][l] * rh[2][l]));
            dh[0][l] = inv_r2[l].sqrt();
        }
        for j in 1..=ORDER {
            let f = -((2 * j - 1) as f32);
            for l in 0..HALF {
                dh[j * NT][l] = f * dh[(j - 1) * NT][l] * inv_r2[l];
            }
        }
        dh[ZERO] = [0.0; HALF];
        for st in &t.recurrence {
            let v = recur(
                &rh[st.axis as usize],
                &dh[st.back1 as usize],
                &dh[st.back2 as usize],
                st.factor,
            );
            dh[st.out as usize] = v;
        }
    }
    // The cores' correction, −(3/8) σ⁴ α / |R|⁵ = −(1/8) σ⁴ α D⁽²⁾, as a monopole; then the multipole
    // terms. Both read the derivatives in the halves they were written in.
    let m = &*m;
    for (h, dh) in d.iter().enumerate() {
        let lanes = h * HALF..(h + 1) * HALF;
        for (k, ak) in acc.iter_mut().enumerate().take(t.upto[ORDER - 2]) {
            let dk = &dh[2 * NT + k];
            for q in 0..3 {
                let (a, c) = (&mut ak[q][lanes.clone()], &core[q][lanes.clone()]);
                for l in 0..HALF {
                    a[l] = c[l].mul_add(dk[l], a[l]);
                }
            }
        }
        for (k, ak) in acc.iter_mut().enumerate() {
            let row = &t.sum[k][..t.upto[ORDER - t.degree[k]]];
            let mut a: [Half; 3] = std::array::from_fn(|q| {
                let mut v = [0f32; HALF];
                v.copy_from_slice(&ak[q][lanes.clone()]);
                v
            });
            for (&s, mn) in row.iter().zip(m.iter()) {
                let dv = &dh[s as usize];
                for q in 0..3 {
                    let mq = &mn[q][lanes.clone()];
                    for l in 0..HALF {
                        a[q][l] = mq[l].mul_add(dv[l], a[q][l]);
                    }
                }
            }
            for q in 0..3 {
                ak[q][lanes.clone()].copy_from_slice(&a[q]);
            }
        }
    }
}

/// `a · b1 + f · b2`, lane by lane: one step of the derivative recurrence.
#[inline(always)]
fn recur(a: &Half, b1: &Half, b2: &Half, f: f32) -> Half {
    let mut v = [0f32; HALF];
    for l in 0..HALF {
        v[l] = f.mul_add(b2[l], a[l] * b1[l]);
    }
    v
}

/// `out[k] += Σₘ w[m] · c[k + m]` with scalar weights and vector coefficients: a local expansion shifted
/// to a child's centre (w the monomials of the offset).
fn shift_down(t: &Tables, c: &Coeffs, w: &[f64; NT], out: &mut Coeffs) {
    for k in 0..NT {
        let row = &t.sum[k][..t.upto[ORDER - t.degree[k]]];
        let mut acc = [0.0; 4];
        for (&s, &w) in row.iter().zip(w) {
            let v = &c[s as usize];
            for q in 0..4 {
                acc[q] = w.mul_add(v[q], acc[q]);
            }
        }
        for q in 0..4 {
            out[k][q] += acc[q];
        }
    }
}

/// A cell of vortons as the expansions see it.
#[derive(Clone, Debug)]
pub(super) struct SourceCell {
    /// Expansion centre (the treecode's circulation-weighted centre), m.
    centre: DVec3,
    /// Farthest vorton from the centre, m.
    radius: f64,
    /// Largest core radius in the cell, m.
    sigma: f64,
    /// `(−1)^|n| Mⁿ`: the multipole with the sign of the cell-to-cell term folded in.
    multipole: Coeffs,
    /// `Σⱼ αⱼ σⱼ⁴`: the strength of the cores' leading correction to the singular kernel.
    core: DVec3,
    /// The multipole and the core strength in f32, as the cell-to-cell terms read them.
    multipole32: [[f32; 4]; NT],
    core32: [f32; 4],
}

/// A cell of no strength (the padding of a batch), far from everything.
static EMPTY: SourceCell = SourceCell {
    centre: DVec3::new(1e30, 0.0, 0.0),
    radius: 0.0,
    sigma: 0.0,
    multipole: [[0.0; 4]; NT],
    core: DVec3::ZERO,
    multipole32: [[0.0; 4]; NT],
    core32: [0.0; 4],
};

/// The vorton cells' expansions, from the treecode's cells (children after their parent), their vortons in
/// key order and their centres.
pub(super) fn source_cells(
    nodes: &[Node],
    centres: &[DVec3],
    vortons: &[(DVec3, DVec3, f64)],
) -> Vec<SourceCell> {
    let t = tables();
    let mut cells: Vec<SourceCell> = nodes
        .par_iter()
        .zip(centres)
        .map(|(node, &centre)| {
            let mut cell = SourceCell {
                centre,
                radius: 0.0,
                sigma: 0.0,
                multipole: [[0.0; 4]; NT],
                core: DVec3::ZERO,
                multipole32: [[0.0; 4]; NT],
                core32: [0.0; 4],
            };
            if node.children == 0 {
                for &(x, a, r) in &vortons[node.start..node.end] {
                    // (−1)^|n| (x − c)ⁿ / n! = (c − x)ⁿ / n!.
                    let w = monomials(t, centre - x);
                    let a = a.to_array();
                    for (m, &w) in cell.multipole.iter_mut().zip(&w) {
                        for q in 0..3 {
                            m[q] = w.mul_add(a[q], m[q]);
                        }
                    }
                    cell.radius = cell.radius.max((x - centre).length());
                    cell.sigma = cell.sigma.max(r);
                    cell.core += DVec3::from_array(a) * (r * r * r * r);
                }
            }
            cell
        })
        .collect();
    for k in (0..nodes.len()).rev() {
        let node = &nodes[k];
        if node.children == 0 {
            continue;
        }
        let centre = cells[k].centre;
        let mut multipole = [[0.0; 4]; NT];
        let mut radius: f64 = 0.0;
        let mut sigma: f64 = 0.0;
        let mut core = DVec3::ZERO;
        for ch in &cells[node.first_child..node.first_child + node.children] {
            shift_up(
                t,
                &ch.multipole,
                &monomials(t, centre - ch.centre),
                &mut multipole,
            );
            radius = radius.max(ch.radius + (ch.centre - centre).length());
            sigma = sigma.max(ch.sigma);
            core += ch.core;
        }
        // No vorton lies farther than the cell's farthest corner.
        let corner = (node.centre() - centre).abs() + DVec3::splat(node.width * 0.5);
        let cell = &mut cells[k];
        cell.multipole = multipole;
        cell.radius = radius.min(corner.length());
        cell.sigma = sigma;
        cell.core = core;
    }
    cells.par_iter_mut().for_each(|c| {
        c.multipole32 = c.multipole.map(|m| [m[0] as f32, m[1] as f32, m[2] as f32, 0.0]);
        c.core32 = c.core.extend(0.0).to_array().map(|v| v as f32);
    });
    cells
}

/// A cell of the target tree, stored depth first so that each subtree is a run of cells.
#[derive(Clone, Debug)]
struct TargetCell {
    /// Range of the cell's targets in sorted order.
    start: usize,
    end: usize,
    /// Centre and half diagonal of the targets' bounding box, m.
    centre: DVec3,
    radius: f64,
    /// Cells in this subtree, itself included.
    size: usize,
    /// Children (indices into the target cells).
    children: Vec<usize>,
}

/// Builds the target tree over `keys` (Morton keys in the targets' cube, sorted, with indices into
/// `targets`) depth first into `out`; returns the index of the cell and its bounding box.
fn build_targets(
    keys: &[(u64, u32)],
    targets: &[DVec3],
    range: (usize, usize),
    level: u32,
    leaf_size: usize,
    out: &mut Vec<TargetCell>,
) -> (usize, DVec3, DVec3) {
    let me = out.len();
    out.push(TargetCell {
        start: range.0,
        end: range.1,
        centre: DVec3::ZERO,
        radius: 0.0,
        size: 1,
        children: Vec::new(),
    });
    let mut lo = DVec3::splat(f64::INFINITY);
    let mut hi = DVec3::splat(f64::NEG_INFINITY);
    if range.1 - range.0 > leaf_size && level < super::tree::LEVELS {
        let shift = 3 * (super::tree::LEVELS - 1 - level);
        let mut s = range.0;
        let mut children = Vec::new();
        for digit in 0..8u64 {
            let e = s + keys[s..range.1].partition_point(|&(k, _)| (k >> shift) & 7 <= digit);
            if e > s {
                let (c, clo, chi) = build_targets(keys, targets, (s, e), level + 1, leaf_size, out);
                children.push(c);
                lo = lo.min(clo);
                hi = hi.max(chi);
            }
            s = e;
        }
        out[me].children = children;
    } else {
        for &(_, i) in &keys[range.0..range.1] {
            lo = lo.min(targets[i as usize]);
            hi = hi.max(targets[i as usize]);
        }
    }
    let size = out.len() - me;
    let cell = &mut out[me];
    cell.size = size;
    cell.centre = (lo + hi) * 0.5;
    cell.radius = (hi - lo).length() * 0.5;
    (me, lo, hi)
}

/// What one task's dual traversal found: target cell–vorton cell pairs to expand, and pairs of leaves to
/// sum directly, each in traversal order.
#[derive(Default)]
struct Lists {
    expand: Vec<(u32, u32)>,
    direct: Vec<(u32, u32)>,
}

/// The vorton tree as the traversal and the near sums see it.
pub(super) struct SourceTree<'a> {
    pub nodes: &'a [Node],
    pub cells: &'a [SourceCell],
    pub sorted: &'a Sources,
}

/// Interaction counts of one evaluation: cell–cell expansions and direct vorton pairs.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Counts {
    pub expansions: u64,
    pub pairs: u64,
}

impl SourceTree<'_> {
    /// The dual traversal of target cell `a` against vorton cell `b`.
    fn interact(&self, tc: &[TargetCell], a: usize, b: usize, theta: f64, out: &mut Lists) {
        let (ta, node) = (&tc[a], &self.nodes[b]);
        if node.start == node.end {
            return;
        }
        let sb = &self.cells[b];
        let d = (ta.centre - sb.centre).length();
        let reach = ta.radius + sb.radius;
        if reach < theta * d && d - reach >= GAP * sb.sigma {
            out.expand.push((a as u32, b as u32));
            return;
        }
        let (a_leaf, b_leaf) = (ta.children.is_empty(), node.children == 0);
        if a_leaf && b_leaf {
            out.direct.push((a as u32, b as u32));
        } else if b_leaf || (!a_leaf && ta.radius > sb.radius) {
            for &c in &ta.children {
                self.interact(tc, c, b, theta, out);
            }
        } else {
            for c in node.first_child..node.first_child + node.children {
                self.interact(tc, a, c, theta, out);
            }
        }
    }
}

/// Velocity (m/s), and the gradient (1/s) when `want_jac`, at every target by the fast multipole method,
/// in the targets' order. `lo`/`width` is a cube that holds the targets.
pub(super) fn evaluate(
    src: &SourceTree,
    theta: f64,
    targets: &[DVec3],
    keys: &[(u64, u32)],
    want_jac: bool,
) -> (Vec<(DVec3, [f64; 9])>, Counts) {
    let t = tables();
    let n = targets.len();
    if n == 0 {
        return (Vec::new(), Counts::default());
    }
    let mut tc = Vec::new();
    build_targets(keys, targets, (0, n), 0, TARGET_LEAF, &mut tc);
    // The tasks: the largest subtrees of at most TASK_TARGETS targets, in depth-first order.
    let mut tasks = Vec::new();
    let mut stack = vec![0];
    while let Some(a) = stack.pop() {
        let cell = &tc[a];
        if cell.end - cell.start <= TASK_TARGETS || cell.children.is_empty() {
            tasks.push(a);
        } else {
            stack.extend(cell.children.iter().rev());
        }
    }
    let origin = src.sorted.origin;
    let tc = &tc;
    let results: Vec<(Vec<(DVec3, [f64; 9])>, Counts)> = tasks
        .par_iter()
        .map(|&root| {
            let mut lists = Lists::default();
            src.interact(tc, root, 0, theta, &mut lists);
            let size = tc[root].size;
            let mut local = vec![[[0.0; 4]; NT]; size];
            let mut touched = vec![false; size];
            // Each target cell's vorton cells, BATCH at a time in traversal order.
            lists.expand.sort_by_key(|&(a, _)| a);
            let mut scratch = BatchScratch::new();
            let mut acc = Box::new([[[0f32; BATCH]; 3]; NT]);
            for run in lists.expand.chunk_by(|x, y| x.0 == y.0) {
                let a = run[0].0 as usize;
                for ak in acc.iter_mut() {
                    *ak = [[0.0; BATCH]; 3];
                }
                for batch in run.chunks(BATCH) {
                    let cells: [&SourceCell; BATCH] = std::array::from_fn(|l| {
                        batch.get(l).map_or(&EMPTY, |&(_, b)| &src.cells[b as usize])
                    });
                    expand_batch(t, tc[a].centre, &cells, &mut scratch, &mut acc);
                }
                let l = &mut local[a - root];
                for (lk, ak) in l.iter_mut().zip(acc.iter()) {
                    for q in 0..3 {
                        lk[q] += f64::from(ak[q].iter().fold(0f32, |s, x| s + x));
                    }
                }
                touched[a - root] = true;
            }
            // Depth first: a parent's expansion is complete before its children receive it.
            for a in root..root + size {
                if !touched[a - root] {
                    continue;
                }
                let parent = local[a - root];
                for &c in &tc[a].children {
                    let w = monomials(t, tc[c].centre - tc[a].centre);
                    shift_down(t, &parent, &w, &mut local[c - root]);
                    touched[c - root] = true;
                }
            }
            // Each leaf's direct pairs, in traversal order.
            lists.direct.sort_by_key(|&(a, _)| a);
            let mut out = Vec::with_capacity(tc[root].end - tc[root].start);
            let mut ranges: Vec<(usize, usize)> = Vec::new();
            let mut pairs = 0u64;
            let mut next = 0;
            for a in root..root + size {
                let cell = &tc[a];
                if !cell.children.is_empty() {
                    continue;
                }
                ranges.clear();
                while next < lists.direct.len() && lists.direct[next].0 as usize == a {
                    let range = src.nodes[lists.direct[next].1 as usize].padded;
                    match ranges.last_mut() {
                        Some(last) if last.1 == range.0 => last.1 = range.1,
                        _ => ranges.push(range),
                    }
                    next += 1;
                }
                let members = &keys[cell.start..cell.end];
                pairs += (members.len() * ranges.iter().map(|r| r.1 - r.0).sum::<usize>()) as u64;
                let l = &local[a - root];
                for tile in members.chunks(TILE) {
                    let x: [DVec3; TILE] =
                        std::array::from_fn(|m| targets[tile[m.min(tile.len() - 1)].1 as usize]);
                    let rel: [[f32; 3]; TILE] = std::array::from_fn(|m| {
                        let r = x[m] - origin;
                        [r.x as f32, r.y as f32, r.z as f32]
                    });
                    let mut uv = [[0f32; 3]; TILE];
                    let mut jv = [[0f32; 9]; TILE];
                    if want_jac {
                        for m in 0..tile.len() {
                            (uv[m], jv[m]) =
                                biot_savart::velocity_gradient_ranges(src.sorted, &ranges, rel[m]);
                        }
                    } else {
                        uv = biot_savart::velocity_tile(src.sorted, &ranges, &rel);
                    }
                    for m in 0..tile.len() {
                        let w = monomials(t, x[m] - cell.centre);
                        let (fu, fj) = local_field(t, l, &w, want_jac);
                        let u = DVec3::from_array(uv[m].map(f64::from)) + fu;
                        let mut g = [0.0; 9];
                        if want_jac {
                            for (g, (&j, f)) in g.iter_mut().zip(jv[m].iter().zip(&fj)) {
                                *g = (f64::from(j) + f) * FOUR_PI_INV;
                            }
                        }
                        out.push((u * FOUR_PI_INV, g));
                    }
                }
            }
            let counts = Counts {
                expansions: lists.expand.len() as u64,
                pairs,
            };
            (out, counts)
        })
        .collect();
    let mut counts = Counts::default();
    let mut all = Vec::with_capacity(n);
    for (r, c) in results {
        all.extend(r);
        counts.expansions += c.expansions;
        counts.pairs += c.pairs;
    }
    (all, counts)
}

/// The curl of ψ, and its gradient when `want_jac`, from the local expansion `l` at the point whose
/// monomials are `w` (without the factor 1/4π).
#[inline]
fn local_field(t: &Tables, l: &Coeffs, w: &[f64; NT], want_jac: bool) -> (DVec3, [f64; 9]) {
    // g[j][q] = ∂ⱼ ψ_q.
    let mut g = [[0.0; 4]; 3];
    for (k, &wk) in w.iter().enumerate().take(t.upto[ORDER - 1]) {
        for (j, gj) in g.iter_mut().enumerate() {
            let c = &l[t.sum[k][1 + j] as usize];
            for q in 0..4 {
                gj[q] = wk.mul_add(c[q], gj[q]);
            }
        }
    }
    let u = DVec3::new(g[1][2] - g[2][1], g[2][0] - g[0][2], g[0][1] - g[1][0]);
    let mut jac = [0.0; 9];
    if want_jac {
        // h[j][l][q] = ∂ₗ∂ⱼ ψ_q, from the second-order multi-index e_j + e_l.
        let mut h = [[[0.0; 4]; 3]; 3];
        for (k, &wk) in w.iter().enumerate().take(t.upto[ORDER - 2]) {
            for (j, hj) in h.iter_mut().enumerate() {
                for (m, hjm) in hj.iter_mut().enumerate() {
                    let c = &l[t.sum[k][t.sum[1 + j][1 + m] as usize] as usize];
                    for q in 0..4 {
                        hjm[q] = wk.mul_add(c[q], hjm[q]);
                    }
                }
            }
        }
        // J[i][m] = ∂ₘ uᵢ = ε_ijq ∂ₘ∂ⱼ ψ_q.
        for m in 0..3 {
            jac[m] = h[1][m][2] - h[2][m][1];
            jac[3 + m] = h[2][m][0] - h[0][m][2];
            jac[6 + m] = h[0][m][1] - h[1][m][0];
        }
    }
    (u, jac)
}
