//! The mollified Biot–Savart kernel and direct summation (Gourlay part 3, eq. for velocity from vortons).
//!
//! Velocity from vorticity in unbounded fluid is `u(x) = (1/4π) ∫ ω(y) × (x − y) / |x − y|³ dy`. A vorton of
//! strength α = ω V is a blob of radius σ; we use the **high-order algebraic** core of Winckelmans & Leonard
//! (1993, J. Comput. Phys. 109, eq. 30), whose velocity is
//!
//! `u(x) = (1/4π) α × r · (|r|² + 5σ²/2) / (|r|² + σ²)^{5/2}`,  `r = x − x_j`,
//!
//! i.e. a blob with vorticity `ζ(ρ) = (15/8π) (ρ² + 1)^{−7/2}`, ρ = |r|/σ. Why this core: it is smooth
//! (unlike Gourlay's uniform ball, whose velocity has a kink at r = σ that shows as jerk), positive, matches
//! the singular kernel to O(σ⁴/r⁴) far away (second-order accurate, where the low-order algebraic core is only
//! O(σ²/r²)), and costs one square root and one division per pair, which vectorises — a Gaussian core needs
//! `erf` and `exp`. A vorton on itself gives r = 0 and therefore exactly zero velocity.
//!
//! The pair loop runs in f32 over sources stored as a struct of arrays relative to an origin near the
//! vortons (so f32 loses nothing to large coordinates), sixteen sources per lane array, which the compiler
//! turns into AVX-512 instructions; each target sums its sources in a fixed order, so the result does not
//! depend on the thread count.

use crate::par;
use glam::DVec3;
use multiversion::multiversion;

/// Sources per lane array of the pair loops (one AVX-512 register of f32).
pub const LANES: usize = 16;

/// σ² of the zero-strength padding sources (any positive value: they add nothing).
const PAD_S2: f32 = 1.0;

/// 1/(4π).
pub const FOUR_PI_INV: f64 = 1.0 / (4.0 * std::f64::consts::PI);

/// Targets per parallel chunk of a direct sum.
const TARGET_CHUNK: usize = 32;

/// Targets that share one pass over the sources in [`direct`]: four targets' twelve accumulators and the
/// seven source arrays fit AVX-512's 32 registers.
pub const TILE: usize = 4;

/// Vorton sources as f32 structs of arrays, padded with zero-strength sources (see [`Sources::pad`]).
#[derive(Clone, Debug, Default)]
pub struct Sources {
    /// Point the coordinates are relative to (m).
    pub origin: DVec3,
    /// Position relative to `origin` (m).
    pub x: Vec<f32>,
    /// See `x`.
    pub y: Vec<f32>,
    /// See `x`.
    pub z: Vec<f32>,
    /// Strength α = ω V (m³/s).
    pub ax: Vec<f32>,
    /// See `ax`.
    pub ay: Vec<f32>,
    /// See `ax`.
    pub az: Vec<f32>,
    /// Squared core radius σ² (m²).
    pub s2: Vec<f32>,
    /// Real sources (the rest is padding).
    pub len: usize,
}

impl Sources {
    /// Clears and refills from positions, strengths and core radii, reusing the allocations.
    pub fn fill(&mut self, origin: DVec3, position: &[DVec3], strength: &[DVec3], radius: &[f64]) {
        self.fill_with(origin, position.len(), |i| {
            (position[i], strength[i], radius[i])
        });
    }

    /// The seven arrays: x, y, z, αx, αy, αz, σ².
    fn columns(&mut self) -> [&mut Vec<f32>; 7] {
        [
            &mut self.x,
            &mut self.y,
            &mut self.z,
            &mut self.ax,
            &mut self.ay,
            &mut self.az,
            &mut self.s2,
        ]
    }

    /// Empties the buffers and sets the origin.
    pub fn clear(&mut self, origin: DVec3) {
        self.origin = origin;
        for v in self.columns() {
            v.clear();
        }
        self.len = 0;
    }

    /// Appends one source (position in m, strength in m³/s, σ² in m²).
    #[inline]
    pub fn push(&mut self, p: DVec3, a: DVec3, s2: f64) {
        let r = p - self.origin;
        self.x.push(r.x as f32);
        self.y.push(r.y as f32);
        self.z.push(r.z as f32);
        self.ax.push(a.x as f32);
        self.ay.push(a.y as f32);
        self.az.push(a.z as f32);
        self.s2.push(s2 as f32);
        self.len += 1;
    }

    /// Pads with zero-strength sources (σ² = `PAD_S2`) to a whole number of lane arrays and one more: the
    /// pair loops read a range's last partial lane array whole (masking the lanes past its end), up to
    /// `LANES − 1` sources past the last one.
    pub fn pad(&mut self) {
        let total = Self::padded_for(self.len);
        for (c, col) in self.columns().into_iter().enumerate() {
            col.resize(total, if c == 6 { PAD_S2 } else { 0.0 });
        }
    }

    /// Stored length, padding included, for `len` sources.
    fn padded_for(len: usize) -> usize {
        len.next_multiple_of(LANES) + LANES
    }

    /// Clears and refills from `vortons` (position, strength, core radius) in order, and pads as
    /// [`pad`](Self::pad) does.
    pub fn fill_sorted(&mut self, origin: DVec3, vortons: &[(DVec3, DVec3, f64)]) {
        self.fill_with(origin, vortons.len(), |i| vortons[i]);
    }

    /// Clears and refills with the `n` sources `vortons(i)` (position, strength, core radius) in order, in
    /// parallel chunks that each write their part of the seven columns (one column per task read the vortons
    /// seven times), and pads.
    fn fill_with(
        &mut self,
        origin: DVec3,
        n: usize,
        vortons: impl Fn(usize) -> (DVec3, DVec3, f64) + Sync,
    ) {
        const CHUNK: usize = 4096;
        self.clear(origin);
        self.len = n;
        let total = Self::padded_for(n);
        for (c, col) in self.columns().into_iter().enumerate() {
            col.resize(total, if c == 6 { PAD_S2 } else { 0.0 });
        }
        let columns = self
            .columns()
            .map(|col| par::SharedSlice::new(&mut col[..n]));
        par::for_each_chunk(n, CHUNK, |range| {
            // SAFETY: the chunks are disjoint.
            let [x, y, z, ax, ay, az, s2] =
                std::array::from_fn(|c| unsafe { columns[c].slice_mut(range.clone()) });
            for (k, i) in range.enumerate() {
                let (p, a, r) = vortons(i);
                let d = p - origin;
                (x[k], y[k], z[k]) = (d.x as f32, d.y as f32, d.z as f32);
                (ax[k], ay[k], az[k]) = (a.x as f32, a.y as f32, a.z as f32);
                s2[k] = (r * r) as f32;
            }
        });
    }

    /// Clears and refills with the sources of `ranges` of `from`, in order, and pads: a near list made one
    /// run, so that the pair loops meet one partial lane array instead of one per range.
    pub fn gather(&mut self, from: &Sources, ranges: &[(usize, usize)]) {
        self.clear(from.origin);
        for (col, src) in self.columns().into_iter().zip([
            &from.x, &from.y, &from.z, &from.ax, &from.ay, &from.az, &from.s2,
        ]) {
            for &(start, end) in ranges {
                col.extend_from_slice(&src[start..end]);
            }
        }
        self.len = self.x.len();
        self.pad();
    }

    /// Stored sources including padding.
    pub fn padded_len(&self) -> usize {
        self.x.len()
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.x.capacity() * 7 * 4
    }
}

/// Sum of `LANES` partial sums in a fixed order.
#[inline(always)]
fn hsum(v: &[f32; LANES]) -> f32 {
    let mut s = 0.0;
    for x in v {
        s += x;
    }
    s
}

/// The velocity kernel's radial factor `f = (|r|² + 5σ²/2)(|r|² + σ²)^{−5/2}` from `r2 = |r|²` and σ²: one
/// square root and one division, exact IEEE operations that vectorise.
#[inline(always)]
fn kernel_f(r2: f32, s2: f32) -> f32 {
    let d = r2 + s2;
    s2.mul_add(2.5, r2) / (d * d * d.sqrt())
}

/// `a × b`, with a fused multiply–subtract per component.
#[inline(always)]
fn cross(a: [f32; 3], b: [f32; 3]) -> [f32; 3] {
    [
        a[1].mul_add(b[2], -(a[2] * b[1])),
        a[2].mul_add(b[0], -(a[0] * b[2])),
        a[0].mul_add(b[1], -(a[1] * b[0])),
    ]
}

/// The sources of `start..end` (a multiple of [`LANES`] long) as seven arrays of whole lane blocks.
type Blocks<'a> = [&'a [[f32; LANES]]; 7];

#[inline(always)]
fn blocks(src: &Sources, start: usize, end: usize) -> Blocks<'_> {
    [&src.x, &src.y, &src.z, &src.ax, &src.ay, &src.az, &src.s2].map(|v| {
        let v = &v[start..end];
        debug_assert!(v.len() % LANES == 0, "padded to whole lanes");
        // SAFETY: `[f32; LANES]` has the size and alignment of `LANES` consecutive f32, and the whole blocks
        // of `v` lie inside it.
        unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<[f32; LANES]>(), v.len() / LANES) }
    })
}

/// The lane arrays of `start..end` (a multiple of [`LANES`] long), one `[x, y, z, αx, αy, αz, σ²]` each.
#[inline(always)]
fn lane_arrays(
    src: &Sources,
    start: usize,
    end: usize,
) -> impl Iterator<Item = [&[f32; LANES]; 7]> {
    let columns = blocks(src, start, end);
    (0..columns[0].len()).map(move |b| columns.map(|c| &c[b]))
}

/// Adds the velocity kernel of the sources `start..end` at the `T` targets to the lane sums `acc`: whole
/// lane arrays from `start`, then a last partial one whose lanes past `end` are masked out. The sums are
/// held in registers for the range (a local copy, so the compiler need not keep them in memory) and the
/// source arrays are walked as whole blocks (no bounds checks in the loop).
#[inline(always)]
fn velocity_range<const T: usize>(
    src: &Sources,
    start: usize,
    end: usize,
    t: &[[f32; 3]; T],
    acc: &mut [[[f32; LANES]; 3]; T],
) {
    let (full, rest) = split(start, end);
    velocity_blocks::<T, false>(src, start, full, LANES, t, acc);
    if rest > 0 {
        velocity_blocks::<T, true>(src, full, full + LANES, rest, t, acc);
    }
}

/// `start..end` as the end of its whole lane arrays from `start` and the sources left after them.
#[inline(always)]
fn split(start: usize, end: usize) -> (usize, usize) {
    let full = start + (end - start) / LANES * LANES;
    (full, end - full)
}

/// The lane arrays of `start..end` (a multiple of [`LANES`] long) at the `T` targets; with `MASKED`, only the
/// first `keep` lanes of each count.
#[inline(always)]
fn velocity_blocks<const T: usize, const MASKED: bool>(
    src: &Sources,
    start: usize,
    end: usize,
    keep: usize,
    t: &[[f32; 3]; T],
    acc: &mut [[[f32; LANES]; 3]; T],
) {
    let [x, y, z, ax, ay, az, s2] = blocks(src, start, end);
    let n = x.len();
    let (y, z, ax, ay, az, s2) = (&y[..n], &z[..n], &ax[..n], &ay[..n], &az[..n], &s2[..n]);
    let mut a = *acc;
    for b in 0..n {
        let (sx, sy, sz, bx, by, bz, s2) = (&x[b], &y[b], &z[b], &ax[b], &ay[b], &az[b], &s2[b]);
        for m in 0..T {
            for l in 0..LANES {
                let r = [t[m][0] - sx[l], t[m][1] - sy[l], t[m][2] - sz[l]];
                let r2 = r[0].mul_add(r[0], r[1].mul_add(r[1], r[2] * r[2]));
                let mut f = kernel_f(r2, s2[l]);
                if MASKED && l >= keep {
                    f = 0.0;
                }
                let c = cross([bx[l], by[l], bz[l]], r);
                for q in 0..3 {
                    a[m][q][l] = f.mul_add(c[q], a[m][q][l]);
                }
            }
        }
    }
    *acc = a;
}

/// Velocity at each of the `T` targets `t` (relative to the sources' origin) induced by the sources in
/// `ranges`, without the factor 1/4π.
///
/// The targets share each load of sixteen sources (a tile of targets held in registers), and the lane sums
/// run on across all ranges, so short ranges (a treecode's leaves) cost no reduction each. Every target
/// sums its sources lane by lane in range order and then adds the lanes in a fixed order, so its result is
/// the same bits whatever tile it is in and however many threads run.
#[inline(always)]
pub fn velocity_tile<const T: usize>(
    src: &Sources,
    ranges: &[(usize, usize)],
    t: &[[f32; 3]; T],
) -> [[f32; 3]; T] {
    let mut acc = [[[0f32; LANES]; 3]; T];
    for &(start, end) in ranges {
        velocity_range(src, start, end, t, &mut acc);
    }
    let mut out = [[0f32; 3]; T];
    for (o, u) in out.iter_mut().zip(&acc) {
        *o = [hsum(&u[0]), hsum(&u[1]), hsum(&u[2])];
    }
    out
}

/// Velocity at `t` (relative to the sources' origin) induced by the sources `start..end`, without the factor
/// 1/4π: [`velocity_tile`] for one target and one range.
#[inline(always)]
pub fn velocity_at(src: &Sources, start: usize, end: usize, t: [f32; 3]) -> [f32; 3] {
    velocity_tile(src, &[(start, end)], &[t])[0]
}

/// Velocity and velocity gradient `J[i][k] = ∂uᵢ/∂x_k` (row-major) at `t` from the sources `start..end`,
/// without the factor 1/4π.
///
/// With `g(r) = r f(|r|²)`, `f(s) = (s + 5σ²/2)(s + σ²)^{−5/2}`, one source contributes
/// `∂u/∂x = f [α]ₓ + 2 f'(|r|²) (α × r) rᵀ`, `f'(s) = −(3s/2 + 21σ²/4)(s + σ²)^{−7/2}`.
#[inline(always)]
pub fn velocity_gradient_at(
    src: &Sources,
    start: usize,
    end: usize,
    t: [f32; 3],
) -> ([f32; 3], [f32; 9]) {
    velocity_gradient_ranges(src, &[(start, end)], t)
}

/// [`velocity_gradient_at`] over several ranges, the lane sums running on across them.
#[inline(always)]
pub fn velocity_gradient_ranges(
    src: &Sources,
    ranges: &[(usize, usize)],
    t: [f32; 3],
) -> ([f32; 3], [f32; 9]) {
    let mut u = [[0f32; LANES]; 3];
    let mut jac = [[0f32; LANES]; 9];
    for &(start, end) in ranges {
        let (full, rest) = split(start, end);
        gradient_blocks::<false>(src, start, full, LANES, t, &mut u, &mut jac);
        if rest > 0 {
            gradient_blocks::<true>(src, full, full + LANES, rest, t, &mut u, &mut jac);
        }
    }
    let mut g = [0f32; 9];
    for (g, j) in g.iter_mut().zip(&jac) {
        *g = hsum(j);
    }
    ([hsum(&u[0]), hsum(&u[1]), hsum(&u[2])], g)
}

/// The velocity and gradient lane sums of the lane arrays of `start..end` (a multiple of [`LANES`] long) at
/// `t`; with `MASKED`, only the first `keep` lanes of each count.
#[inline(always)]
fn gradient_blocks<const MASKED: bool>(
    src: &Sources,
    start: usize,
    end: usize,
    keep: usize,
    t: [f32; 3],
    u: &mut [[f32; LANES]; 3],
    jac: &mut [[f32; LANES]; 9],
) {
    for [sx, sy, sz, ax, ay, az, s2] in lane_arrays(src, start, end) {
        for l in 0..LANES {
            let r = [t[0] - sx[l], t[1] - sy[l], t[2] - sz[l]];
            let r2 = r[0].mul_add(r[0], r[1].mul_add(r[1], r[2] * r[2]));
            let d = r2 + s2[l];
            let inv72 = 1.0 / (d * d * d * d.sqrt());
            let mut f = s2[l].mul_add(2.5, r2) * (inv72 * d);
            let mut g = -2.0 * s2[l].mul_add(5.25, 1.5 * r2) * inv72;
            if MASKED && l >= keep {
                (f, g) = (0.0, 0.0);
            }
            let a = [ax[l], ay[l], az[l]];
            let c = cross(a, r);
            for q in 0..3 {
                u[q][l] = f.mul_add(c[q], u[q][l]);
            }
            // f [α]ₓ: the cross-product matrix of α.
            let fa = [f * a[0], f * a[1], f * a[2]];
            let fcross = [0.0, -fa[2], fa[1], fa[2], 0.0, -fa[0], -fa[1], fa[0], 0.0];
            for i in 0..3 {
                let gc = g * c[i];
                for k in 0..3 {
                    jac[3 * i + k][l] += gc.mul_add(r[k], fcross[3 * i + k]);
                }
            }
        }
    }
}

/// Direct Biot–Savart summation over all sources at every target (m): velocity (m/s) into `u`, and, when
/// `jac` is given, the velocity gradient (1/s, row-major ∂uᵢ/∂x_k). O(targets × sources), parallel over
/// fixed chunks of targets.
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2+fma"))]
pub fn direct(src: &Sources, targets: &[DVec3], u: &mut [DVec3], jac: Option<&mut [[f64; 9]]>) {
    let n = targets.len();
    let end = src.padded_len();
    let rel = |p: DVec3| {
        let r = p - src.origin;
        [r.x as f32, r.y as f32, r.z as f32]
    };
    let k = FOUR_PI_INV;
    match jac {
        None => {
            let out = par::SharedSlice::new(u);
            par::for_each_chunk(n, TARGET_CHUNK, |range| {
                // SAFETY: chunks are disjoint.
                let out = unsafe { out.slice_mut(range.clone()) };
                for (o, first) in out.chunks_mut(TILE).zip(range.step_by(TILE)) {
                    // A short last tile repeats its last target; the extra results are dropped.
                    let t: [[f32; 3]; TILE] =
                        std::array::from_fn(|m| rel(targets[(first + m).min(n - 1)]));
                    let v = velocity_tile(src, &[(0, end)], &t);
                    for (o, v) in o.iter_mut().zip(v) {
                        *o = DVec3::new(v[0] as f64, v[1] as f64, v[2] as f64) * k;
                    }
                }
            });
        }
        Some(jac) => {
            let out = par::SharedSlice::new(u);
            let outj = par::SharedSlice::new(jac);
            par::for_each_chunk(n, TARGET_CHUNK, |range| {
                // SAFETY: chunks are disjoint.
                let (out, outj) =
                    unsafe { (out.slice_mut(range.clone()), outj.slice_mut(range.clone())) };
                for ((o, oj), i) in out.iter_mut().zip(outj.iter_mut()).zip(range) {
                    let (v, g) = velocity_gradient_at(src, 0, end, rel(targets[i]));
                    *o = DVec3::new(v[0] as f64, v[1] as f64, v[2] as f64) * k;
                    *oj = g.map(|x| x as f64 * k);
                }
            });
        }
    }
}

/// Points at which [`DirectDevice::direct_both`] wants the velocity, and where it goes.
pub struct Targets<'a> {
    /// The points (m).
    pub at: &'a [DVec3],
    /// Their velocities (m/s), one per point.
    pub u: &'a mut [DVec3],
    /// Their velocity gradients (1/s, row-major), one per point, where wanted.
    pub jac: Option<&'a mut [[f64; 9]]>,
}

/// A device that evaluates [`direct`] and [`potential_direct`] in their place (the GPU backend's
/// `eddies_gpu::vpm::GpuDirect`): the velocity (m/s) at `targets` induced by `src`, with `jac` its gradient
/// (1/s, row-major), or the vector potential (m²/s), the factor 1/4π applied, as the CPU gives them. It sums
/// the same terms, in its own fixed order.
pub trait DirectDevice: Send {
    /// [`direct`] on the device; the error says how the device failed.
    fn direct(
        &mut self,
        src: &Sources,
        targets: &[DVec3],
        u: &mut [DVec3],
        jac: Option<&mut [[f64; 9]]>,
    ) -> Result<(), String>;

    /// [`direct`](Self::direct) at two sets of points from the same sources (a step's stage asks for the
    /// vortons' velocity and gradient and the tracers' velocity at once), which a device may take in one
    /// round trip. Each set gets what `direct` gives it alone; by default, a call of it per set.
    fn direct_both(&mut self, src: &Sources, sets: [Targets<'_>; 2]) -> Result<(), String> {
        for set in sets {
            if !set.at.is_empty() {
                self.direct(src, set.at, set.u, set.jac)?;
            }
        }
        Ok(())
    }

    /// [`potential_direct`] on the device; the error says how the device failed.
    fn potential(
        &mut self,
        src: &Sources,
        targets: &[DVec3],
        out: &mut [DVec3],
    ) -> Result<(), String>;
}

/// Vector potential at `t` (relative to the sources' origin) from the sources `start..end`, without the
/// factor 1/4π: `Σ αⱼ h(|r|²)` with the stream-function kernel of the high-order algebraic core,
/// `h(s) = (s + 3σ²/2)(s + σ²)^{−3/2}`.
///
/// This `h` is the one whose curl gives the velocity kernel of [`velocity_at`]: `h'(s) = −f(s)/2`, so
/// `∇ × (α h) = 2h' r × α = f α × r` (Winckelmans & Leonard 1993; Gourlay part 20 integrates `α/|r|`, the
/// singular limit σ → 0).
#[inline(always)]
pub fn potential_at(src: &Sources, start: usize, end: usize, t: [f32; 3]) -> [f32; 3] {
    potential_ranges(src, &[(start, end)], t)
}

/// [`potential_at`] over several ranges, the lane sums running on across them.
#[inline(always)]
pub fn potential_ranges(src: &Sources, ranges: &[(usize, usize)], t: [f32; 3]) -> [f32; 3] {
    let mut p = [[0f32; LANES]; 3];
    for &(start, end) in ranges {
        let (full, rest) = split(start, end);
        potential_blocks::<false>(src, start, full, LANES, t, &mut p);
        if rest > 0 {
            potential_blocks::<true>(src, full, full + LANES, rest, t, &mut p);
        }
    }
    [hsum(&p[0]), hsum(&p[1]), hsum(&p[2])]
}

/// The vector potential lane sums of the lane arrays of `start..end` (a multiple of [`LANES`] long) at `t`;
/// with `MASKED`, only the first `keep` lanes of each count.
#[inline(always)]
fn potential_blocks<const MASKED: bool>(
    src: &Sources,
    start: usize,
    end: usize,
    keep: usize,
    t: [f32; 3],
    p: &mut [[f32; LANES]; 3],
) {
    for [sx, sy, sz, ax, ay, az, s2] in lane_arrays(src, start, end) {
        for l in 0..LANES {
            let rx = t[0] - sx[l];
            let ry = t[1] - sy[l];
            let rz = t[2] - sz[l];
            let r2 = rx * rx + ry * ry + rz * rz;
            let inv = 1.0 / (r2 + s2[l]);
            let mut h = (r2 + 1.5 * s2[l]) * inv * inv.sqrt();
            if MASKED && l >= keep {
                h = 0.0;
            }
            p[0][l] += h * ax[l];
            p[1][l] += h * ay[l];
            p[2][l] += h * az[l];
        }
    }
}

/// Direct summation of the vector potential `A(x) = (1/4π) Σ αⱼ h(|x − xⱼ|²)` (m²/s) over all sources at
/// every target (m), the boundary values of the Poisson technique (Gourlay part 20). O(targets × sources),
/// parallel over fixed chunks of targets; each target sums in a fixed order.
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2+fma"))]
pub fn potential_direct(src: &Sources, targets: &[DVec3], out: &mut [DVec3]) {
    let n = targets.len();
    let end = src.padded_len();
    let shared = par::SharedSlice::new(out);
    par::for_each_chunk(n, TARGET_CHUNK, |range| {
        // SAFETY: chunks are disjoint.
        let o = unsafe { shared.slice_mut(range.clone()) };
        for (o, i) in o.iter_mut().zip(range) {
            let r = targets[i] - src.origin;
            let a = potential_at(src, 0, end, [r.x as f32, r.y as f32, r.z as f32]);
            *o = DVec3::new(a[0] as f64, a[1] as f64, a[2] as f64) * FOUR_PI_INV;
        }
    });
}

/// Vector potential (m²/s) at `x` of one vorton of strength `alpha` (m³/s) and core radius `sigma` (m) at
/// `y`, in f64: the reference for tests.
pub fn pair_potential(x: DVec3, y: DVec3, alpha: DVec3, sigma: f64) -> DVec3 {
    let r2 = (x - y).length_squared();
    let s2 = sigma * sigma;
    alpha * ((r2 + 1.5 * s2) / (r2 + s2).powf(1.5)) * FOUR_PI_INV
}

/// Velocity (m/s) at `x` induced by one vorton of strength `alpha` (m³/s) and core radius `sigma` (m) at
/// `y`, in f64: the reference for tests.
pub fn pair_velocity(x: DVec3, y: DVec3, alpha: DVec3, sigma: f64) -> DVec3 {
    let r = x - y;
    let r2 = r.length_squared();
    let s2 = sigma * sigma;
    alpha.cross(r) * ((r2 + 2.5 * s2) / (r2 + s2).powf(2.5)) * FOUR_PI_INV
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The chunked fills hold what pushing the vortons one by one and padding holds, bit for bit, across
    /// several chunks and with a short last one: every column in the vortons' order, σ² the radius squared.
    #[test]
    fn chunked_fills_equal_pushed_sources() {
        let (p, a, r) = crate::vpm::init::random_vortons(10_001, 3);
        let origin = DVec3::new(0.4, 0.5, 0.6);
        let mut pushed = Sources::default();
        pushed.clear(origin);
        for i in 0..p.len() {
            pushed.push(p[i], a[i], r[i] * r[i]);
        }
        pushed.pad();
        let mut filled = Sources::default();
        filled.fill(origin, &p, &a, &r);
        let sorted: Vec<_> = (0..p.len()).map(|i| (p[i], a[i], r[i])).collect();
        let mut from_sorted = Sources::default();
        from_sorted.fill_sorted(origin, &sorted);
        for s in [&mut filled, &mut from_sorted] {
            assert_eq!(s.len, pushed.len);
            for (col, want) in s.columns().into_iter().zip(pushed.clone().columns()) {
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(col), bits(want));
            }
        }
    }

    /// Ranges that start and end anywhere (a tree's leaves lie back to back, unpadded) sum exactly their own
    /// vortons: the masked last lane array of each range adds nothing from the vortons after it. Velocity,
    /// gradient (through its velocity part) and potential against f64 pair sums, and the near runs copied
    /// by [`Sources::gather`] against the ranges they came from; 1e-5 relative is f32 rounding over ~50
    /// terms, far below the 1/50 that one wrongly counted vorton would add.
    #[test]
    fn unaligned_ranges_sum_their_own_vortons() {
        let n = 100;
        let p: Vec<DVec3> = (0..n)
            .map(|i| {
                let f = i as f64;
                DVec3::new((0.37 * f).sin(), (0.53 * f).cos(), (0.71 * f).sin() * 0.5)
            })
            .collect();
        let a: Vec<DVec3> = (0..n)
            .map(|i| DVec3::new(1.0, -0.5 + 0.01 * i as f64, 0.3))
            .collect();
        let r = vec![0.05; n];
        let mut src = Sources::default();
        src.fill(DVec3::ZERO, &p, &a, &r);
        let ranges = [(3, 20), (37, 38), (50, 81), (99, 100)];
        let x = DVec3::new(0.1, 0.2, -0.3);
        let (mut u, mut psi, mut scale) = (DVec3::ZERO, DVec3::ZERO, 0.0);
        for &(s, e) in &ranges {
            for j in s..e {
                let du = pair_velocity(x, p[j], a[j], r[j]);
                u += du;
                psi += pair_potential(x, p[j], a[j], r[j]);
                scale += du.length();
            }
        }
        let t = [x.x as f32, x.y as f32, x.z as f32];
        let k = FOUR_PI_INV as f32;
        let close = |got: [f32; 3], want: DVec3, scale: f64| {
            let got = DVec3::new(got[0] as f64, got[1] as f64, got[2] as f64) * k as f64;
            assert!(
                (got - want).length() <= 1e-5 * scale,
                "{got} against {want}"
            );
        };
        close(velocity_tile(&src, &ranges, &[t])[0], u, scale);
        close(velocity_gradient_ranges(&src, &ranges, t).0, u, scale);
        let psi_scale: f64 = ranges
            .iter()
            .flat_map(|&(s, e)| s..e)
            .map(|j| pair_potential(x, p[j], a[j], r[j]).length())
            .sum();
        close(potential_ranges(&src, &ranges, t), psi, psi_scale);
        let mut near = Sources::default();
        near.gather(&src, &ranges);
        assert_eq!(near.len, 17 + 1 + 31 + 1);
        close(velocity_tile(&near, &[(0, near.len)], &[t])[0], u, scale);
    }

    #[test]
    fn far_field_matches_singular_kernel() {
        let a = DVec3::new(0.0, 0.0, 1.0);
        let x = DVec3::new(10.0, 0.0, 0.0);
        let u = pair_velocity(x, DVec3::ZERO, a, 0.1);
        let singular = a.cross(x) / x.length().powi(3) * FOUR_PI_INV;
        assert!((u - singular).length() / singular.length() < 1e-6);
    }

    #[test]
    fn gradient_matches_finite_differences() {
        let mut src = Sources::default();
        src.clear(DVec3::ZERO);
        src.push(
            DVec3::new(0.1, -0.2, 0.05),
            DVec3::new(0.3, -0.5, 0.8),
            0.04,
        );
        src.push(DVec3::new(-0.3, 0.1, 0.2), DVec3::new(-0.2, 0.4, 0.1), 0.09);
        src.pad();
        let t = [0.2f32, 0.15, -0.1];
        let (_, jac) = velocity_gradient_at(&src, 0, src.padded_len(), t);
        let h = 1e-2f32;
        for k in 0..3 {
            let (mut p, mut m) = (t, t);
            p[k] += h;
            m[k] -= h;
            let (up, um) = (
                velocity_at(&src, 0, LANES, p),
                velocity_at(&src, 0, LANES, m),
            );
            for i in 0..3 {
                let fd = (up[i] - um[i]) / (2.0 * h);
                assert!(
                    (fd - jac[3 * i + k]).abs() < 2e-2 * (1.0 + fd.abs()),
                    "J[{i}][{k}]: {fd} vs {}",
                    jac[3 * i + k]
                );
            }
        }
    }

    /// u = ∇ × A: the curl of the stream-function kernel, by central differences in f64, is the velocity
    /// kernel. The step h = 1e-4 against the core radius 0.2 leaves a truncation error of order
    /// (h/σ)² ≈ 2.5e-7 relative (5e-7 measured inside the core), far below any error in the kernel itself.
    #[test]
    fn curl_of_potential_is_velocity() {
        let y = DVec3::new(0.1, -0.2, 0.05);
        let alpha = DVec3::new(0.3, -0.5, 0.8);
        let sigma = 0.2;
        for x in [
            DVec3::new(0.2, 0.15, -0.1),
            DVec3::new(1.5, -0.7, 0.4),
            DVec3::new(0.1, -0.2, 0.06),
        ] {
            let h = 1e-4;
            let d = |k: usize| {
                let e = DVec3::AXES[k] * h;
                (pair_potential(x + e, y, alpha, sigma) - pair_potential(x - e, y, alpha, sigma))
                    / (2.0 * h)
            };
            let (dx, dy, dz) = (d(0), d(1), d(2));
            let curl = DVec3::new(dy.z - dz.y, dz.x - dx.z, dx.y - dy.x);
            let u = pair_velocity(x, y, alpha, sigma);
            assert!(
                (curl - u).length() <= 2e-6 * u.length(),
                "curl {curl} vs u {u} at {x}"
            );
        }
    }

    /// The f32 lane loop against the f64 pair formula; f32 rounding bounds the agreement at ~1e-6.
    #[test]
    fn direct_potential_matches_pair_sum() {
        let p = [DVec3::new(0.1, -0.2, 0.05), DVec3::new(-0.3, 0.1, 0.2)];
        let a = [DVec3::new(0.3, -0.5, 0.8), DVec3::new(-0.2, 0.4, 0.1)];
        let sig = [0.2, 0.3];
        let mut src = Sources::default();
        src.fill(DVec3::ZERO, &p, &a, &sig);
        let targets = [
            DVec3::new(0.2, 0.15, -0.1),
            DVec3::new(2.0, 1.0, -3.0),
            p[0],
        ];
        let mut out = [DVec3::ZERO; 3];
        potential_direct(&src, &targets, &mut out);
        for (t, o) in targets.iter().zip(out) {
            let exact: DVec3 = (0..2).map(|j| pair_potential(*t, p[j], a[j], sig[j])).sum();
            assert!(
                (o - exact).length() <= 1e-6 * exact.length(),
                "{o} vs {exact}"
            );
        }
    }
}
