//! The fast multipole method over the treecode's octree: cell-to-cell far field with local expansions.
//!
//! **Why.** The treecode of [`super::tree`] evaluates every accepted supervorton at every target: at 10⁵
//! vortons and the θ that keeps the RMS error under 10⁻³, about 1 200 supervortons per target. Here a
//! well-separated pair of cells (one of targets, one of vortons) interacts once, through a Taylor
//! expansion of the far field about the target cell's centre that all its targets then share; the
//! expansions pass down the target tree to the leaves (Greengard & Rokhlin 1987, in the Cartesian form of
//! Dehnen 2002).
//!
//! **The expansion.** The velocity of [`super::biot_savart`] is `u = (1/4π) ∇ × ψ` with the vector potential
//! `ψ(x) = Σⱼ αⱼ h(|x − xⱼ|²)`, `h(s) = (s + 3σ²/2)(s + σ²)^(−3/2)` (the kernel of
//! [`super::biot_savart::potential_at`]): three scalar potentials, one per component of the strength, with
//! the mollified kernel itself (each cell uses its |α|-weighted mean σ², as the treecode's supervortons do;
//! exact when the cores are equal). With multi-indices `n` (`|n|` the order, `n! = n₁! n₂! n₃!`):
//! - multipole of a cell about its centre `c` (the circulation-weighted centre of the treecode):
//!   `Mⁿ = Σⱼ αⱼ (c − xⱼ)ⁿ / n!`, shifted to a parent's centre exactly;
//! - cell-to-cell: `Lᵏ += Σₙ Mⁿ ∂ⁿ⁺ᵏh(|R|²)` at `R = z − c` (z the target cell's centre), the terms with
//!   `|n| + |k| ≤ p` ([`ORDER`]) and `|k| ≥ 1`: the velocity needs only derivatives of ψ, so `L⁰` is never
//!   formed, and the multipoles stop at order p − 1 (35 coefficients at p = 5);
//! - local to child: `L'ᵏ = Σₘ tᵐ/m! Lᵏ⁺ᵐ`, `t` the child's centre minus the parent's;
//! - at a target `z + y`: `∂ⱼψ = Σₖ yᵏ/k! Lᵏ⁺ᵉʲ`, and the gradient from `Lᵏ⁺ᵉʲ⁺ᵉˡ`.
//!
//! The derivatives come from the Hermite recurrence of McMurchie & Davidson (1978), which holds for any
//! function of `s = |R|²`: with `D⁽ʲ⁾ = 2ʲ h⁽ʲ⁾(s)`, `∂ⁿ⁺ᵉⁱD⁽ʲ⁾ = Rᵢ ∂ⁿD⁽ʲ⁺¹⁾ + nᵢ ∂ⁿ⁻ᵉⁱD⁽ʲ⁺¹⁾`, and
//! `D⁽ʲ⁾ = (−1)ʲ [(2j − 1)!! u^(−j−1/2) + (σ²/2)(2j + 1)!! u^(−j−3/2)]`, `u = s + σ²`.
//!
//! **Acceptance.** A target cell of radius `r_a` and a vorton cell of radius `r_b` (the farthest vorton from
//! the expansion centre) interact through expansions when `r_a + r_b < θ |z − c|` and the gap between them
//! is at least [`GAP`] core radii; otherwise the larger cell is split, and two leaves sum their pairs
//! directly (the vectorised loops of [`super::biot_savart`]). The gap rule keeps the expansions away from
//! the nearest, densest cells, whose terms dominate a target's velocity: on 10⁵ random vortons at θ = 0.8
//! it brings the RMS error from 9.2e-3 to 9.3e-4 (`vpm_tree_sweep`, docs/PERFORMANCE.md).
//!
//! **Precision.** Moments and local expansions are f64; the cell-to-cell terms, the bulk of the far-field
//! work, run in f32 sixteen vorton cells at a time (as the direct sums do), each cell's lanes summed in a
//! fixed order. Each target leaf's near vortons are gathered into one run before its direct sums.
//!
//! **Determinism.** The target tree is cut into subtrees of at most [`TASK_TARGETS`] targets, a cut that
//! depends on the targets alone; each subtree runs the dual traversal against the whole vorton tree, then
//! applies its cell-to-cell list in traversal order, shifts the expansions down in a fixed order and sums
//! each target's near pairs in range order. Subtrees run in parallel and share nothing, so results do not
//! depend on the thread count.

use super::biot_savart::{Sources, FOUR_PI_INV, TILE};
use super::octree::{near_tile, octants, tile_targets, Node, Vorton, LEVELS};
use glam::DVec3;
use multiversion::multiversion;
use rayon::prelude::*;

/// Expansion order p: the cell-to-cell terms keep `|n| + |k| ≤ p`, so the potential is accurate to about
/// `θᵖ⁺¹` and the velocity to `θᵖ`.
pub const ORDER: usize = 5;

/// Multi-indices of order ≤ [`ORDER`].
const NT: usize = (ORDER + 1) * (ORDER + 2) * (ORDER + 3) / 6;

/// Least gap between accepted cells, in core radii (the largest of the vorton cell). On 10⁵ random vortons
/// at θ = 0.8 (RMS error): no gap 9.2e-3, 3σ 2.4e-3, 4σ 1.5e-3, 5σ 9.3e-4; smaller θ reaches the same
/// errors later (docs/PERFORMANCE.md).
pub const GAP: f64 = 5.0;

/// Most targets in a leaf of the target tree. Its cells share one local expansion each, so larger leaves
/// mean fewer cell-to-cell terms and more direct pairs: at 10⁵ vortons (`vpm_tree_sweep`, θ = 0.8) 128
/// measured fastest of 64, 96, 128, 192 and 256, and still as fast as 160 and 192 after the cell-to-cell
/// terms became 2.4× cheaper (256 then exceeds an RMS error of 1e-3).
pub const TARGET_LEAF: usize = 128;

/// Target subtrees of at most this many targets are the parallel tasks (a cut that depends on the targets
/// alone, so the results do not depend on the thread count).
pub const TASK_TARGETS: usize = 2048;

/// Coefficients per multi-index for the three components (the fourth lane pads the loops to four wide): a
/// local expansion.
type Coeffs = [[f64; 4]; NT];

/// A multipole: coefficients of the orders below [`ORDER`] (see [`NM`]), laid out as [`Coeffs`].
type Multipole = [[f64; 4]; NM];

/// The multi-indices of order ≤ [`ORDER`], by order, x-heaviest first: `(0,0,0)`, `(1,0,0)`, `(0,1,0)`,
/// `(0,0,1)`, `(2,0,0)`, …
const LIST: [[usize; 3]; NT] = {
    let mut list = [[0; 3]; NT];
    let (mut i, mut d) = (0, 0);
    while d <= ORDER {
        let mut a = d + 1;
        while a > 0 {
            a -= 1;
            let mut b = d - a + 1;
            while b > 0 {
                b -= 1;
                list[i] = [a, b, d - a - b];
                i += 1;
            }
        }
        d += 1;
    }
    list
};

/// Order `|n|` of the multi-index at `n`.
pub(super) const fn order_of(n: usize) -> usize {
    LIST[n][0] + LIST[n][1] + LIST[n][2]
}

/// Position of the multi-index `m` in [`LIST`], or [`NT`] when its order exceeds [`ORDER`].
const fn index_of(m: [usize; 3]) -> usize {
    let mut i = 0;
    while i < NT {
        if LIST[i][0] == m[0] && LIST[i][1] == m[1] && LIST[i][2] == m[2] {
            return i;
        }
        i += 1;
    }
    NT
}

/// How many multi-indices have order ≤ q.
const fn upto(q: usize) -> usize {
    (q + 1) * (q + 2) * (q + 3) / 6
}

/// For `n ≠ 0`: an axis `i` with `nᵢ > 0`, and `nᵢ` (the recurrences step down along it).
const fn step_axis(n: usize) -> (usize, usize) {
    let m = LIST[n];
    let i = if m[0] > 0 {
        0
    } else if m[1] > 0 {
        1
    } else {
        2
    };
    (i, m[i])
}

/// `n` with one unit less along axis `i`, or `n − 2eᵢ` for `twice`; [`NT`] when that component is
/// too small.
const fn lower(n: usize, i: usize, twice: bool) -> usize {
    let mut m = LIST[n];
    let by = if twice { 2 } else { 1 };
    if m[i] < by {
        return NT;
    }
    m[i] -= by;
    index_of(m)
}

/// `SUMS[k][n]`: the index of the multi-index `k + n`, or [`NT`] when its order exceeds [`ORDER`].
const SUMS: [[u16; NT]; NT] = {
    let mut sums = [[0; NT]; NT];
    let mut k = 0;
    while k < NT {
        let mut n = 0;
        while n < NT {
            let (a, b) = (LIST[k], LIST[n]);
            sums[k][n] = index_of([a[0] + b[0], a[1] + b[1], a[2] + b[2]]) as u16;
            n += 1;
        }
        k += 1;
    }
    sums
};

/// For [`monomials`]: each multi-index's step axis `i`, the index of `n − eᵢ`, and `1/nᵢ`.
const MONOMIAL_STEPS: [(usize, usize, f64); NT] = {
    let mut steps = [(0, 0, 0.0); NT];
    let mut n = 1;
    while n < NT {
        let (i, ni) = step_axis(n);
        steps[n] = (i, lower(n, i, false), 1.0 / ni as f64);
        n += 1;
    }
    steps
};

/// `yⁿ / n!` for the multi-indices of order below [`ORDER`] (all that the multipoles, the shifts and the
/// evaluation at a target use; see [`NM`]).
#[inline]
pub(super) fn monomials(y: DVec3) -> [f64; NM] {
    let y = y.to_array();
    let mut m = [0.0; NM];
    m[0] = 1.0;
    for n in 1..NM {
        let (i, back, inv) = MONOMIAL_STEPS[n];
        m[n] = m[back] * y[i] * inv;
    }
    m
}

/// `∂ⁿ h(|r|²)` for every multi-index, in f64, by the recurrence of the module's doc: the reference the
/// tests check the batched f32 terms against.
#[cfg(test)]
fn derivatives(r: DVec3, s2: f64) -> [f64; NT] {
    let u = r.length_squared() + s2;
    let r = r.to_array();
    // d[j][n] = ∂ⁿ D⁽ʲ⁾, needed for |n| ≤ ORDER − j.
    let mut d = [[0.0; NT]; ORDER + 1];
    let (mut odd1, mut odd3) = (1.0, 1.0);
    for (j, dj) in d.iter_mut().enumerate() {
        odd3 *= (2 * j + 1) as f64;
        let sign = if j % 2 == 0 { 1.0 } else { -1.0 };
        dj[0] =
            sign * (odd1 * u.powf(-(j as f64) - 0.5) + 0.5 * s2 * odd3 * u.powf(-(j as f64) - 1.5));
        odd1 *= (2 * j + 1) as f64;
    }
    for n in 1..NT {
        let (i, ni) = step_axis(n);
        let (back1, back2) = (lower(n, i, false), lower(n, i, true));
        for j in 0..=ORDER - order_of(n) {
            let mut v = r[i] * d[j + 1][back1];
            if back2 < NT {
                v += (ni as f64 - 1.0) * d[j + 1][back2];
            }
            d[j][n] = v;
        }
    }
    d[0]
}

/// `out[k + m] += weight[m] · c[k]` over `|k| + |m| ≤ ORDER`: a multipole's shift to a new centre (with
/// the monomials of the new centre minus the old).
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2+fma"))]
fn shift_up(c: &Multipole, weight: &[f64; NM], out: &mut Multipole) {
    for k in 0..NM {
        let row = &SUMS[k][..upto(ORDER - 1 - order_of(k))];
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

/// One value per lane of a batch.
type BatchLanes = [f32; BATCH];

/// Multipole coefficients the cell-to-cell terms read: the orders below [`ORDER`]. The terms keep
/// `|n| + |k| ≤ ORDER`, and the local coefficient `L⁰` (the potential itself) is never evaluated, only
/// its derivatives, so the multipole's order-[`ORDER`] coefficients, which reach `L⁰` alone, are left out
/// (and `L⁰` stays zero).
pub(super) const NM: usize = upto(ORDER - 1);

/// [`NM`] rounded up to whole groups of four, the f32 multipoles' length (the transpose of
/// [`stage_multipoles`] reads four coefficients of a cell at a time).
const NM4: usize = NM.next_multiple_of(4);

/// The batch's derivative table: `D⁽ʲ⁾ₙ` for `|n| ≤ ORDER − j` at `DBASE[j] + n`, then a zero entry at
/// [`DZERO`].
const DBASE: [usize; ORDER + 2] = {
    let mut base = [0; ORDER + 2];
    let mut j = 0;
    while j <= ORDER {
        base[j + 1] = base[j] + upto(ORDER - j);
        j += 1;
    }
    base
};

/// The zero entry of the derivative table.
const DZERO: usize = DBASE[ORDER + 1];

/// One step of the derivative recurrence: `D[out] = R_axis · D[back1] + factor · D[back2]`.
#[derive(Clone, Copy)]
struct Step {
    out: usize,
    axis: usize,
    back1: usize,
    back2: usize,
    factor: f32,
}

/// Steps of the recurrence: every entry of the table but the `ORDER + 1` entries `D⁽ʲ⁾₀`.
const NSTEPS: usize = DZERO - (ORDER + 1);

/// The derivative recurrence of the module's doc, `∂ⁿ⁺ᵉⁱD⁽ʲ⁾ = Rᵢ ∂ⁿD⁽ʲ⁺¹⁾ + nᵢ ∂ⁿ⁻ᵉⁱD⁽ʲ⁺¹⁾`, over the
/// table of [`DBASE`], in an order in which every entry read was written before (by the order of `n`).
const RECURRENCE: [Step; NSTEPS] = {
    let mut steps = [Step {
        out: 0,
        axis: 0,
        back1: 0,
        back2: 0,
        factor: 0.0,
    }; NSTEPS];
    let mut s = 0;
    let mut n = 1;
    while n < NT {
        let (i, ni) = step_axis(n);
        let (b1, b2) = (lower(n, i, false), lower(n, i, true));
        let mut j = 0;
        while j + order_of(n) <= ORDER {
            let below = DBASE[j + 1];
            steps[s] = Step {
                out: DBASE[j] + n,
                axis: i,
                back1: below + b1,
                back2: if b2 < NT { below + b2 } else { DZERO },
                factor: (ni - 1) as f32,
            };
            s += 1;
            j += 1;
        }
        n += 1;
    }
    assert!(s == NSTEPS);
    steps
};

/// Buffers of [`expand_batch`], reused: the batch's multipoles lane by lane and the derivative table.
struct BatchScratch {
    m: [[BatchLanes; 3]; NM4],
    d: [BatchLanes; DZERO + 1],
}

impl BatchScratch {
    fn new() -> Box<Self> {
        Box::new(BatchScratch {
            m: [[[0.0; BATCH]; 3]; NM4],
            d: [[0.0; BATCH]; DZERO + 1],
        })
    }
}

/// The cell-to-cell terms of [`BATCH`] vorton cells (padded with [`EMPTY`]) for the target cell centred at
/// `z`, added lane by lane to `acc` (`acc[k][q][lane]`; the caller sums the lanes in a fixed order):
/// `Lᵏ += Σₙ Mⁿ ∂ⁿ⁺ᵏh(|R|²)`, `1 ≤ |k|`, `|n| + |k| ≤ ORDER`, each lane its own R and σ².
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2+fma"))]
fn expand_batch(
    z: DVec3,
    cells: &[&SourceCell; BATCH],
    scratch: &mut BatchScratch,
    acc: &mut [[BatchLanes; 3]; NT],
) {
    let BatchScratch { m, d } = scratch;
    let mut r = [[0f32; BATCH]; 3];
    let mut s2 = [0f32; BATCH];
    for (l, c) in cells.iter().enumerate() {
        let rc = (z - c.centre).to_array();
        for i in 0..3 {
            r[i][l] = rc[i] as f32;
        }
        s2[l] = c.s2 as f32;
    }
    stage_multipoles(cells, m);
    // D⁽ʲ⁾₀ = 2ʲ h⁽ʲ⁾(|R|²) with h(s) = u^(−1/2) + (σ²/2) u^(−3/2), u = s + σ²:
    // (−1)ʲ [(2j − 1)!! u^(−j−1/2) + (σ²/2)(2j + 1)!! u^(−j−3/2)].
    let mut inv_u = [0f32; BATCH];
    let mut p1 = [0f32; BATCH];
    let mut p3 = [0f32; BATCH];
    for l in 0..BATCH {
        let r2 = r[0][l].mul_add(r[0][l], r[1][l].mul_add(r[1][l], r[2][l] * r[2][l]));
        inv_u[l] = 1.0 / (r2 + s2[l]);
        p1[l] = inv_u[l].sqrt();
        p3[l] = 0.5 * s2[l] * p1[l] * inv_u[l];
    }
    let (mut odd1, mut odd3) = (1f32, 1f32);
    for j in 0..=ORDER {
        let sign = if j % 2 == 0 { 1.0 } else { -1.0 };
        odd3 *= (2 * j + 1) as f32;
        for l in 0..BATCH {
            d[DBASE[j]][l] = sign * odd1.mul_add(p1[l], odd3 * p3[l]);
            p1[l] *= inv_u[l];
            p3[l] *= inv_u[l];
        }
        odd1 *= (2 * j + 1) as f32;
    }
    d[DZERO] = [0.0; BATCH];
    // The rest of the table, unrolled (constant indices, no table reads): tens of the step index, then
    // units; steps past NSTEPS are no-ops.
    macro_rules! steps {
        ($($t:literal)*) => { $( steps!(@units $t 0 1 2 3 4 5 6 7 8 9); )* };
        (@units $t:literal $($u:literal)*) => { $( recurrence_step::<{ 10 * $t + $u }>(&r, d); )* };
    }
    const _: () = assert!(NSTEPS <= 130, "the unrolled recurrence covers 130 steps");
    steps!(0 1 2 3 4 5 6 7 8 9 10 11 12);
    // The terms, a few rows of Lᵏ at a time so that each load of a multipole serves them all: the rows of
    // order 1 (3 of them, 35 terms each), 2 (6, 20), 3 (10, 10), 4 (15, 4) and 5 (21, 1).
    const _: () = assert!(ORDER == 5, "the row blocks below are laid out for order 5");
    let (m, d) = (&*m, &*d);
    rows::<3, 35>(1, m, d, acc);
    rows::<3, 20>(4, m, d, acc);
    rows::<3, 20>(7, m, d, acc);
    rows::<5, 10>(10, m, d, acc);
    rows::<5, 10>(15, m, d, acc);
    rows::<5, 4>(20, m, d, acc);
    rows::<5, 4>(25, m, d, acc);
    rows::<5, 4>(30, m, d, acc);
    rows::<7, 1>(35, m, d, acc);
    rows::<7, 1>(42, m, d, acc);
    rows::<7, 1>(49, m, d, acc);
}

/// Step `I` of [`RECURRENCE`] on all lanes, its indices constants; a no-op past the last step.
#[inline(always)]
fn recurrence_step<const I: usize>(r: &[BatchLanes; 3], d: &mut [BatchLanes; DZERO + 1]) {
    if I < NSTEPS {
        let st = const { RECURRENCE[if I < NSTEPS { I } else { 0 }] };
        let (a, b1, b2) = (&r[st.axis], &d[st.back1], &d[st.back2]);
        let mut v = [0f32; BATCH];
        for l in 0..BATCH {
            v[l] = st.factor.mul_add(b2[l], a[l] * b1[l]);
        }
        d[st.out] = v;
    }
}

/// `acc[k][q] += Σₙ m[n][q] · D[SUMS[k][n]]` lane by lane for the `KB` rows from `k0`, whose terms run over
/// the first `LEN` multipole coefficients; the rows' sums stay in registers through the terms.
#[inline(always)]
fn rows<const KB: usize, const LEN: usize>(
    k0: usize,
    m: &[[BatchLanes; 3]; NM4],
    d: &[BatchLanes; DZERO + 1],
    acc: &mut [[BatchLanes; 3]; NT],
) {
    let mut a: [[BatchLanes; 3]; KB] = std::array::from_fn(|i| acc[k0 + i]);
    for (n, mn) in m.iter().enumerate().take(LEN) {
        for (i, ai) in a.iter_mut().enumerate() {
            let dv = &d[usize::from(SUMS[k0 + i][n]).min(DZERO)];
            for q in 0..3 {
                for l in 0..BATCH {
                    ai[q][l] = mn[q][l].mul_add(dv[l], ai[q][l]);
                }
            }
        }
    }
    acc[k0..k0 + KB].copy_from_slice(&a);
}

/// The batch's f32 multipoles lane by lane: `m[n][q][l] = cells[l].multipole32[n][q]`.
#[cfg(not(all(target_arch = "x86_64", target_feature = "avx512f")))]
fn stage_multipoles(cells: &[&SourceCell; BATCH], m: &mut [[BatchLanes; 3]; NM4]) {
    for (mn, n) in m.iter_mut().zip(0..NM4) {
        for (q, mq) in mn.iter_mut().enumerate() {
            for (l, c) in cells.iter().enumerate() {
                mq[l] = c.multipole32[n][q];
            }
        }
    }
}

/// The batch's f32 multipoles lane by lane: `m[n][q][l] = cells[l].multipole32[n][q]`, as 16 × 16
/// transposes of four coefficients (sixteen floats) of each cell at a time. The compiler makes gathers and
/// scatters of the plain loops, which cost as much as all the terms.
#[cfg(all(target_arch = "x86_64", target_feature = "avx512f"))]
fn stage_multipoles(cells: &[&SourceCell; BATCH], m: &mut [[BatchLanes; 3]; NM4]) {
    use std::arch::x86_64::*;
    for g in 0..NM4 / 4 {
        // SAFETY: AVX-512F is enabled at compile time (the cfg above). Each load reads the 16 floats of
        // `multipole32[4g..4g + 4]`, inside the array (its length NM4 is a multiple of four), and each store
        // writes the 16 floats of one `m[n][q]`.
        unsafe {
            let rows: [__m512; BATCH] =
                std::array::from_fn(|l| _mm512_loadu_ps(cells[l].multipole32[4 * g].as_ptr()));
            // Within each 128-bit lane (one coefficient n of a cell): rows 4h..4h + 4 interleaved, so that
            // v[h][q] holds, per lane i, component q of coefficient 4g + i of cells 4h..4h + 4.
            let mut v = [[_mm512_setzero_ps(); 3]; 4];
            for (h, vh) in v.iter_mut().enumerate() {
                let [a, b, c, e] = [0, 1, 2, 3].map(|i| rows[4 * h + i]);
                let (ab_lo, ab_hi) = (_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));
                let (ce_lo, ce_hi) = (_mm512_unpacklo_ps(c, e), _mm512_unpackhi_ps(c, e));
                let pd = _mm512_castps_pd;
                vh[0] = _mm512_castpd_ps(_mm512_unpacklo_pd(pd(ab_lo), pd(ce_lo)));
                vh[1] = _mm512_castpd_ps(_mm512_unpackhi_pd(pd(ab_lo), pd(ce_lo)));
                vh[2] = _mm512_castpd_ps(_mm512_unpacklo_pd(pd(ab_hi), pd(ce_hi)));
            }
            // Then the 128-bit lanes transposed across the four groups of cells.
            for q in 0..3 {
                let w0 = _mm512_shuffle_f32x4::<0b01_00_01_00>(v[0][q], v[1][q]);
                let w1 = _mm512_shuffle_f32x4::<0b11_10_11_10>(v[0][q], v[1][q]);
                let w2 = _mm512_shuffle_f32x4::<0b01_00_01_00>(v[2][q], v[3][q]);
                let w3 = _mm512_shuffle_f32x4::<0b11_10_11_10>(v[2][q], v[3][q]);
                let out = [
                    _mm512_shuffle_f32x4::<0b10_00_10_00>(w0, w2),
                    _mm512_shuffle_f32x4::<0b11_01_11_01>(w0, w2),
                    _mm512_shuffle_f32x4::<0b10_00_10_00>(w1, w3),
                    _mm512_shuffle_f32x4::<0b11_01_11_01>(w1, w3),
                ];
                for (i, o) in out.into_iter().enumerate() {
                    _mm512_storeu_ps(m[4 * g + i][q].as_mut_ptr(), o);
                }
            }
        }
    }
}

/// `out[k] += Σₘ w[m] · c[k + m]` with scalar weights and vector coefficients: a local expansion shifted
/// to a child's centre (w the monomials of the offset).
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2+fma"))]
fn shift_down(c: &Coeffs, w: &[f64; NM], out: &mut Coeffs) {
    for k in 1..NT {
        let row = &SUMS[k][..upto(ORDER - order_of(k))];
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
    pub(super) centre: DVec3,
    /// Farthest vorton from the centre, m.
    pub(super) radius: f64,
    /// The cell's squared core radius σ² (m²): the |α|-weighted mean, as the treecode's supervortons.
    s2: f64,
    /// Largest core radius in the cell, m.
    sigma: f64,
    /// The multipole `Mⁿ = Σⱼ αⱼ (c − xⱼ)ⁿ / n!` of the module's doc (the cell-to-cell term's sign is in
    /// the `c − xⱼ`).
    pub(super) multipole: Multipole,
    /// The multipole in f32, as the cell-to-cell terms read it.
    multipole32: [[f32; 4]; NM4],
}

/// A cell of no strength (the padding of a batch), far from everything.
static EMPTY: SourceCell = SourceCell {
    centre: DVec3::new(1e30, 0.0, 0.0),
    radius: 0.0,
    s2: 1.0,
    sigma: 0.0,
    multipole: [[0.0; 4]; NM],
    multipole32: [[0.0; 4]; NM4],
};

/// The vorton cells' expansions, from the treecode's cells (children after their parent), each cell's
/// expansion centre and mean σ² (m²), and the vortons in key order.
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2+fma"))]
pub(super) fn source_cells(
    nodes: &[Node],
    centres: &[(DVec3, f64)],
    vortons: &[Vorton],
) -> Vec<SourceCell> {
    let mut cells: Vec<SourceCell> = nodes
        .par_iter()
        .zip(centres)
        .map(|(node, &(centre, s2))| {
            let mut cell = SourceCell {
                centre,
                radius: 0.0,
                s2,
                sigma: 0.0,
                multipole: [[0.0; 4]; NM],
                multipole32: [[0.0; 4]; NM4],
            };
            if node.children == 0 {
                for &(x, a, r) in &vortons[node.start..node.end] {
                    cell.sigma = cell.sigma.max(r);
                    let w = monomials(centre - x);
                    let a = a.to_array();
                    for (m, &w) in cell.multipole.iter_mut().zip(&w) {
                        for q in 0..3 {
                            m[q] = w.mul_add(a[q], m[q]);
                        }
                    }
                    cell.radius = cell.radius.max((x - centre).length());
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
        let mut multipole = [[0.0; 4]; NM];
        let mut radius: f64 = 0.0;
        let mut sigma: f64 = 0.0;
        for ch in &cells[node.first_child..node.first_child + node.children] {
            shift_up(
                &ch.multipole,
                &monomials(centre - ch.centre),
                &mut multipole,
            );
            radius = radius.max(ch.radius + (ch.centre - centre).length());
            sigma = sigma.max(ch.sigma);
        }
        // No vorton lies farther than the cell's farthest corner.
        let corner = (node.centre() - centre).abs() + DVec3::splat(node.width * 0.5);
        let cell = &mut cells[k];
        cell.multipole = multipole;
        cell.radius = radius.min(corner.length());
        cell.sigma = sigma;
    }
    cells.par_iter_mut().for_each(|c| {
        c.multipole32 = std::array::from_fn(|n| {
            let m = if n < NM { c.multipole[n] } else { [0.0; 4] };
            [m[0] as f32, m[1] as f32, m[2] as f32, 0.0]
        });
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
    /// Cells in this subtree, itself included: its children are the subtrees that follow it.
    size: usize,
}

/// The children of target cell `a`: in depth-first order each child's subtree follows the one before.
fn children(tc: &[TargetCell], a: usize) -> impl Iterator<Item = usize> + '_ {
    let end = a + tc[a].size;
    let first = (a + 1 < end).then_some(a + 1);
    std::iter::successors(first, move |&c| {
        Some(c + tc[c].size).filter(|&next| next < end)
    })
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
    });
    let mut lo = DVec3::splat(f64::INFINITY);
    let mut hi = DVec3::splat(f64::NEG_INFINITY);
    if range.1 - range.0 > leaf_size && level < LEVELS {
        for (_, s, e) in octants(keys, range, 3 * (LEVELS - 1 - level)) {
            let (_, clo, chi) = build_targets(keys, targets, (s, e), level + 1, leaf_size, out);
            lo = lo.min(clo);
            hi = hi.max(chi);
        }
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
        let (a_leaf, b_leaf) = (ta.size == 1, node.children == 0);
        if a_leaf && b_leaf {
            out.direct.push((a as u32, b as u32));
        } else if b_leaf || (!a_leaf && ta.radius > sb.radius) {
            for c in children(tc, a) {
                self.interact(tc, c, b, theta, out);
            }
        } else {
            for c in node.first_child..node.first_child + node.children {
                self.interact(tc, a, c, theta, out);
            }
        }
    }
}

/// `pairs` (target cell, vorton cell) of the task whose `size` target cells start at `root`, grouped by
/// target cell in cell order and in traversal order within each (a counting sort).
fn group_by_target(pairs: &mut Vec<(u32, u32)>, root: usize, size: usize) {
    let mut start = vec![0usize; size + 1];
    for &(a, _) in pairs.iter() {
        start[a as usize - root + 1] += 1;
    }
    for c in 1..=size {
        start[c] += start[c - 1];
    }
    let mut sorted = vec![(0, 0); pairs.len()];
    for &(a, b) in pairs.iter() {
        let slot = &mut start[a as usize - root];
        sorted[*slot] = (a, b);
        *slot += 1;
    }
    *pairs = sorted;
}

/// A target's velocity (m/s) and velocity gradient (1/s, row-major, zero when not asked for).
type VelocityAndGradient = (DVec3, [f64; 9]);

/// Velocity (m/s), and the gradient (1/s) when `want_jac`, at every target by the fast multipole method,
/// in the order of `keys`: the targets' Morton keys in a cube that holds them, sorted, with their indices.
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2+fma"))]
pub(super) fn evaluate(
    src: &SourceTree,
    theta: f64,
    targets: &[DVec3],
    keys: &[(u64, u32)],
    want_jac: bool,
) -> (Vec<VelocityAndGradient>, Counts) {
    let n = targets.len();
    if n == 0 {
        return (Vec::new(), Counts::default());
    }
    let mut tc = Vec::new();
    build_targets(keys, targets, (0, n), 0, TARGET_LEAF, &mut tc);
    // The tasks: the largest subtrees of at most TASK_TARGETS targets, in depth-first order.
    let mut tasks = Vec::new();
    let mut a = 0;
    while a < tc.len() {
        if tc[a].end - tc[a].start <= TASK_TARGETS || tc[a].size == 1 {
            tasks.push(a);
            a += tc[a].size;
        } else {
            a += 1;
        }
    }
    let origin = src.sorted.origin;
    let tc = &tc;
    let results: Vec<(Vec<VelocityAndGradient>, Counts)> = tasks
        .par_iter()
        .map(|&root| {
            let mut lists = Lists::default();
            src.interact(tc, root, 0, theta, &mut lists);
            let size = tc[root].size;
            let mut local = vec![[[0.0; 4]; NT]; size];
            let mut touched = vec![false; size];
            // Each target cell's vorton cells, BATCH at a time in traversal order.
            group_by_target(&mut lists.expand, root, size);
            let mut scratch = BatchScratch::new();
            let mut acc = Box::new([[[0f32; BATCH]; 3]; NT]);
            for run in lists.expand.chunk_by(|x, y| x.0 == y.0) {
                let a = run[0].0 as usize;
                for ak in acc.iter_mut() {
                    *ak = [[0.0; BATCH]; 3];
                }
                for batch in run.chunks(BATCH) {
                    let cells: [&SourceCell; BATCH] = std::array::from_fn(|l| {
                        batch
                            .get(l)
                            .map_or(&EMPTY, |&(_, b)| &src.cells[b as usize])
                    });
                    expand_batch(tc[a].centre, &cells, &mut scratch, &mut acc);
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
                for c in children(tc, a) {
                    let w = monomials(tc[c].centre - tc[a].centre);
                    shift_down(&parent, &w, &mut local[c - root]);
                    touched[c - root] = true;
                }
            }
            // Each leaf's direct pairs, in traversal order.
            group_by_target(&mut lists.direct, root, size);
            let mut out = Vec::with_capacity(tc[root].end - tc[root].start);
            let mut ranges: Vec<(usize, usize)> = Vec::new();
            let mut near = Sources::default();
            let mut pairs = 0u64;
            let mut next = 0;
            for a in root..root + size {
                let cell = &tc[a];
                if cell.size > 1 {
                    continue;
                }
                ranges.clear();
                while next < lists.direct.len() && lists.direct[next].0 as usize == a {
                    let node = &src.nodes[lists.direct[next].1 as usize];
                    let range = (node.start, node.end);
                    match ranges.last_mut() {
                        Some(last) if last.1 == range.0 => last.1 = range.1,
                        _ => ranges.push(range),
                    }
                    next += 1;
                }
                let members = &keys[cell.start..cell.end];
                pairs += (members.len() * ranges.iter().map(|r| r.1 - r.0).sum::<usize>()) as u64;
                let l = &local[a - root];
                near.gather(src.sorted, &ranges);
                let run = [(0, near.len)];
                for tile in members.chunks(TILE) {
                    let rel = tile_targets(targets, tile, origin);
                    let (uv, jv) = near_tile(&near, &run, &rel, tile.len(), want_jac);
                    for (m, &(_, i)) in tile.iter().enumerate() {
                        let w = monomials(targets[i as usize] - cell.centre);
                        let (fu, fj) = local_field(l, &w, want_jac);
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
fn local_field(l: &Coeffs, w: &[f64; NM], want_jac: bool) -> (DVec3, [f64; 9]) {
    // g[j][q] = ∂ⱼ ψ_q.
    let mut g = [[0.0; 4]; 3];
    for (k, &wk) in w.iter().enumerate().take(upto(ORDER - 1)) {
        for (j, gj) in g.iter_mut().enumerate() {
            let c = &l[SUMS[k][1 + j] as usize];
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
        for (k, &wk) in w.iter().enumerate().take(upto(ORDER - 2)) {
            for (j, hj) in h.iter_mut().enumerate() {
                for (m, hjm) in hj.iter_mut().enumerate() {
                    let c = &l[SUMS[k][SUMS[1 + j][1 + m] as usize] as usize];
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The recurrence against closed forms for the singular kernel (σ = 0): `∂ₓ(1/r) = −x/r³`,
    /// `∂ₓ∂ᵧ(1/r) = 3xy/r⁵`, `∂ₓ²(1/r) = (3x² − r²)/r⁵`, `∂ₓ∂ᵧ∂_z(1/r) = −15xyz/r⁷`; for a core, h itself
    /// and `∂ₓh = 2x h'(s)` with `h'(s) = −(s + 5σ²/2)(s + σ²)^(−5/2)/2`. f64 rounding only: 1e-12.
    #[test]
    fn derivatives_match_closed_forms() {
        let index = |n: [usize; 3]| LIST.iter().position(|&m| m == n).expect("listed");
        let r = DVec3::new(0.3, -0.7, 1.1);
        let (x, y, z, r2) = (r.x, r.y, r.z, r.length_squared());
        let len = r2.sqrt();
        let d = derivatives(r, 0.0);
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * b.abs().max(1.0);
        assert!(close(d[0], 1.0 / len));
        assert!(close(d[index([1, 0, 0])], -x / len.powi(3)));
        assert!(close(d[index([1, 1, 0])], 3.0 * x * y / len.powi(5)));
        assert!(close(d[index([2, 0, 0])], (3.0 * x * x - r2) / len.powi(5)));
        assert!(close(d[index([1, 1, 1])], -15.0 * x * y * z / len.powi(7)));
        let s2 = 0.04;
        let d = derivatives(r, s2);
        let u = r2 + s2;
        assert!(close(d[0], (r2 + 1.5 * s2) / u.powf(1.5)));
        let h1 = -0.5 * (r2 + 2.5 * s2) / u.powf(2.5);
        assert!(close(d[index([1, 0, 0])], 2.0 * x * h1));
    }

    /// Every derivative is the central difference of the one an order below (step 1e-4: truncation about
    /// 1e-8 relative, rounding about 1e-12 / 1e-4), with and without a core.
    #[test]
    fn derivatives_are_consistent_differences() {
        let r = DVec3::new(-0.45, 0.62, 0.38);
        let h = 1e-4;
        for s2 in [0.0, 0.01] {
            let d = derivatives(r, s2);
            for n in 1..NT {
                let i = step_axis(n).0;
                let back1 = lower(n, i, false);
                let step = DVec3::AXES[i] * h;
                let diff = (derivatives(r + step, s2)[back1] - derivatives(r - step, s2)[back1])
                    / (2.0 * h);
                assert!(
                    (diff - d[n]).abs() <= 1e-6 * d[n].abs().max(1.0),
                    "n = {n}, σ² = {s2}: {diff} against {}",
                    d[n]
                );
            }
        }
    }

    /// A batch's cell-to-cell terms for a unit strength along x (the multipole's n = 0 entry alone) are the
    /// kernel's derivatives at each lane's R: the f32 batch against the f64 reference, to 1e-5 relative to
    /// the largest derivative of the same order (f32 rounding through five recurrence steps). The potential's
    /// own coefficient `L⁰` is not computed and stays zero.
    #[test]
    fn batch_terms_are_the_kernel_derivatives() {
        let z = DVec3::new(0.2, 0.1, -0.3);
        let cells: Vec<SourceCell> = (0..BATCH)
            .map(|l| {
                let mut multipole32 = [[0.0; 4]; NM4];
                multipole32[0][0] = 1.0;
                SourceCell {
                    centre: z - DVec3::new(0.5 + 0.1 * l as f64, -0.3, 0.2 * (l % 3) as f64),
                    radius: 0.0,
                    s2: 1e-3 * l as f64,
                    sigma: 0.0,
                    multipole: [[0.0; 4]; NM],
                    multipole32,
                }
            })
            .collect();
        let batch: [&SourceCell; BATCH] = std::array::from_fn(|l| &cells[l]);
        let mut scratch = BatchScratch::new();
        let mut acc = Box::new([[[0f32; BATCH]; 3]; NT]);
        expand_batch(z, &batch, &mut scratch, &mut acc);
        for (l, c) in cells.iter().enumerate() {
            let d = derivatives(z - c.centre, c.s2);
            assert_eq!(acc[0], [[0.0; BATCH]; 3]);
            for k in 1..NT {
                let scale = (0..NT)
                    .filter(|&j| order_of(j) == order_of(k))
                    .map(|j| d[j].abs())
                    .fold(0.0, f64::max);
                let got = f64::from(acc[k][0][l]);
                assert!(
                    (got - d[k]).abs() <= 1e-5 * scale,
                    "lane {l}, k = {k}: {got} against {}",
                    d[k]
                );
                assert_eq!(acc[k][1][l], 0.0);
            }
        }
    }
}
