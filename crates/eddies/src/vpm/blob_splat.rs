//! Vorticity to the grid with each vorton's own width: the Poisson technique's splat for cores wider than a
//! cell (`Splat::Gaussian`; cloud-in-cell is the default).
//!
//! Cloud-in-cell shares a vorton out to the 8 grid points around it, a tent two cells wide whatever the
//! vorton's core radius σ. Where the cores are wider than a cell (σ ≳ h, as in a ball on a lattice with blob
//! radius 1.5 × spacing) the grid then sees vorticity much sharper than the vortons carry, and the velocity
//! between two vortons changes as they cross cell boundaries: the motion jerks (Gourlay part 12's sampling
//! problem, from the splat's side; issue 25 measured 1.3–2.6× the jerk of tree-at-grid-points).
//!
//! Here each vorton is spread by a Gaussian with the second moment of its core: the high-order algebraic core
//! has ⟨|r|²⟩ = 3σ²/2, so a per-axis standard deviation of σ/√2, i.e. weights `exp(−Δ²/s²)` with `s = σ`
//! along each axis, cut at `|Δ| = 2s` with a taper that makes weight and slope vanish there (`axis_weight`),
//! and `s` widened by `WIDTH` so that cut and taper keep the variance. A core narrower than a cell cannot be
//! resolved, so σ is taken as at least `h`: part 12's auto-mollification to a diameter of two cells. The
//! Gaussian is a product of one weight per axis, so each axis's weights are normalised on their own (the grid
//! carries exactly the vortons' Σ α, as with cloud-in-cell) and a stamp of m³ points costs 3m exponentials.
//!
//! Deterministic and parallel: each plane of grid points is summed by one task, from the vortons whose stamp
//! reaches it in a fixed order (grouped by their stamp's first plane, each group in vorton order).

use super::mollify::FittedGrid;
use glam::DVec3;
use rayon::prelude::*;

/// Stamp half-width in units of the Gaussian's `s` (the Gaussian has fallen to e⁻⁴ = 1.8% there).
const REACH: f64 = 2.0;

/// The Gaussian's `s` over the core radius σ: the cut and taper of `axis_weight` leave 0.791 of the
/// Gaussian's variance, and `1/√0.791` restores the core's per-axis variance σ²/2.
const WIDTH: f64 = 1.1244;

/// Where [`axis_weight`] reaches zero: `x = Δ²/s² = REACH²`.
pub const CUT: f64 = REACH * REACH;

/// One axis's weight at `x = Δ²/s²`: the Gaussian `e^{−x}` less its tangent line at the cut `x = REACH²`, so
/// that the weight and its slope reach zero there. A plain cut would make a vorton's weights jump by 1.8% of
/// the peak as a grid point enters or leaves its stamp, which the motion shows as jerk.
pub fn axis_weight(x: f64) -> f64 {
    ((-x).exp() - (-CUT).exp() * (1.0 + CUT - x)).max(0.0)
}

/// Where one vorton's Gaussian lands on a grid: the stamp's first point and points along each axis, the
/// vorton's grid coordinates (clamped onto the grid's faces) and its `1/s²`. The CPU's splat and the GPU's
/// (`eddies_gpu::vpm::GpuSplat`) take their stamps from here.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlobStamp {
    /// Grid coordinates of the stamp's first point.
    pub lo: [usize; 3],
    /// Points along each axis (at most [`stamp_width`]).
    pub n: [usize; 3],
    /// The vorton's grid coordinates: point `c` sits at `origin + (c + ½) h`.
    pub centre: [f64; 3],
    /// `1/s²` in cells⁻², `s` the Gaussian's width.
    pub inv_s2: f64,
}

impl BlobStamp {
    /// The stamp of a vorton at `position` of core radius `radius` (m; taken as at least one cell).
    pub fn new(grid: &FittedGrid, position: DVec3, radius: f64) -> Self {
        let h = grid.spacing;
        let s = WIDTH * (radius / h).max(1.0);
        let mut stamp = Self {
            lo: [0; 3],
            n: [0; 3],
            centre: [0.0; 3],
            inv_s2: 1.0 / (s * s),
        };
        for a in 0..3 {
            let last = (grid.dims[a] - 1) as f64;
            let c = ((position[a] - grid.origin[a]) / h - 0.5).clamp(0.0, last);
            let lo = (c - REACH * s).ceil().max(0.0);
            let hi = (c + REACH * s).floor().min(last);
            stamp.lo[a] = lo as usize;
            stamp.n[a] = (hi - lo) as usize + 1;
            stamp.centre[a] = c;
        }
        stamp
    }
}

/// Points per axis that no stamp of vortons with core radii `radius` on `grid` exceeds: a stamp spans
/// `2 · REACH · s` cells, so its points number at most the floor of that and one, and one more covers the
/// rounding of its ends.
pub fn stamp_width(grid: &FittedGrid, radius: &[f64]) -> usize {
    let h = grid.spacing;
    let widest = WIDTH * radius.iter().fold(h, |m, &r| m.max(r));
    (2.0 * REACH * widest / h).floor() as usize + 2
}

/// One vorton's stamp: the grid coordinates of its first point and its points per axis.
#[derive(Clone, Copy, Debug, Default)]
struct Stamp {
    lo: [usize; 3],
    n: [usize; 3],
}

/// Buffers of [`BlobSplat::splat`], reused across steps.
#[derive(Clone, Debug, Default)]
pub struct BlobSplat {
    stamps: Vec<Stamp>,
    /// Per vorton, `3 · width` normalised weights: x, then y, then z, each padded to `width`.
    weights: Vec<f64>,
    /// Vortons grouped by their stamp's first plane (a stable counting sort).
    order: Vec<u32>,
    start: Vec<usize>,
}

impl BlobSplat {
    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.stamps.capacity() * std::mem::size_of::<Stamp>()
            + self.weights.capacity() * 8
            + self.order.capacity() * 4
            + self.start.capacity() * 8
    }

    /// Vorticity (1/s) at the points of `grid` into `out` (x fastest): each strength `strength[i]` (m³/s) at
    /// `position[i]` spread by the Gaussian of core radius `radius[i]` (m; at least one cell) and divided by
    /// the cell volume. Vortons outside the grid are clamped onto its faces, as by cloud-in-cell.
    pub fn splat(
        &mut self,
        grid: &FittedGrid,
        position: &[DVec3],
        strength: &[DVec3],
        radius: &[f64],
        out: &mut Vec<DVec3>,
    ) {
        let h = grid.spacing;
        let [nx, ny, nz] = grid.dims;
        out.clear();
        out.resize(grid.len(), DVec3::ZERO);
        let width = stamp_width(grid, radius);
        self.stamps.resize(position.len(), Stamp::default());
        self.weights.resize(3 * width * position.len(), 0.0);
        let inv_volume = 1.0 / (h * h * h);
        self.stamps
            .par_iter_mut()
            .zip(self.weights.par_chunks_mut(3 * width))
            .enumerate()
            .with_min_len(256)
            .for_each(|(i, (stamp, w))| {
                let blob = BlobStamp::new(grid, position[i], radius[i]);
                for a in 0..3 {
                    let (lo, n, c) = (blob.lo[a] as f64, blob.n[a], blob.centre[a]);
                    let axis = &mut w[a * width..a * width + n];
                    let mut total = 0.0;
                    for (k, w) in axis.iter_mut().enumerate() {
                        let d = lo + k as f64 - c;
                        *w = axis_weight(d * d * blob.inv_s2);
                        total += *w;
                    }
                    // The volume goes with the x weights: one multiplication per stamp point fewer.
                    let scale = if a == 0 { inv_volume } else { 1.0 } / total;
                    axis.iter_mut().for_each(|w| *w *= scale);
                }
                *stamp = Stamp {
                    lo: blob.lo,
                    n: blob.n,
                };
            });
        // Group by first plane.
        self.start.clear();
        self.start.resize(nz + 1, 0);
        for st in &self.stamps {
            self.start[st.lo[2] + 1] += 1;
        }
        for k in 0..nz {
            self.start[k + 1] += self.start[k];
        }
        self.order.resize(position.len(), 0);
        let mut next = self.start.clone();
        for (i, st) in self.stamps.iter().enumerate() {
            self.order[next[st.lo[2]]] = i as u32;
            next[st.lo[2]] += 1;
        }
        let (stamps, weights, order, start) =
            (&self.stamps, &self.weights, &self.order, &self.start);
        let plane = nx * ny;
        out.par_chunks_mut(plane).enumerate().for_each(|(k, o)| {
            // Stamps reach at most `width` planes, so those that reach plane k start within `width` below it.
            let first = start[(k + 1).saturating_sub(width)];
            for &i in &order[first..start[k + 1]] {
                let i = i as usize;
                let st = stamps[i];
                if k >= st.lo[2] + st.n[2] {
                    continue;
                }
                let w = &weights[3 * width * i..3 * width * (i + 1)];
                let (wx, wy) = (&w[..st.n[0]], &w[width..width + st.n[1]]);
                let a = strength[i] * w[2 * width + k - st.lo[2]];
                for (j, &wy) in wy.iter().enumerate() {
                    let ay = a * wy;
                    let row = (st.lo[1] + j) * nx + st.lo[0];
                    for (o, &wx) in o[row..row + st.n[0]].iter_mut().zip(wx) {
                        *o += ay * wx;
                    }
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grid() -> FittedGrid {
        FittedGrid {
            dims: [20, 18, 16],
            origin: [0.0; 3],
            spacing: 0.05,
        }
    }

    /// The grid carries the vortons' total strength (to rounding: each axis's weights are normalised), for
    /// cores narrower than a cell, wider, and for vortons near and beyond the faces.
    #[test]
    fn blob_splat_keeps_the_total_strength() {
        let g = grid();
        let position: Vec<DVec3> = (0..200)
            .map(|i| {
                let t = i as f64;
                DVec3::new(
                    (t * 0.37).fract() * 1.1 - 0.05,
                    (t * 0.61).fract() * 0.9,
                    (t * 0.83).fract() * 0.8,
                )
            })
            .collect();
        let strength: Vec<DVec3> = (0..200)
            .map(|i| DVec3::new(1.0, -0.5 * i as f64, 0.25))
            .collect();
        let radius: Vec<f64> = (0..200).map(|i| 0.01 + 0.001 * i as f64).collect();
        let mut out = Vec::new();
        BlobSplat::default().splat(&g, &position, &strength, &radius, &mut out);
        let on_grid: DVec3 = out.iter().sum::<DVec3>() * g.spacing.powi(3);
        let total: DVec3 = strength.iter().sum();
        assert!(
            (on_grid - total).length() <= 1e-12 * total.length(),
            "{on_grid} vs {total}"
        );
    }

    /// A vorton away from the faces lands with its centroid where it is (to 1% of a cell: the grid points
    /// of a stamp need not lie symmetrically about the vorton, and the tapered edge weights are small) and
    /// its per-axis variance the core's, σ²/2 (to 2%: the taper's variance is computed to 1e-6, and the grid
    /// samples a kernel 1.8 cells wide).
    #[test]
    fn blob_splat_has_the_cores_centre_and_width() {
        let g = grid();
        let p = DVec3::new(0.512, 0.433, 0.391);
        let sigma = 0.08;
        let mut out = Vec::new();
        BlobSplat::default().splat(&g, &[p], &[DVec3::X], &[sigma], &mut out);
        let mut points = Vec::new();
        g.points_into(&mut points);
        let mass: f64 = out.iter().map(|w| w.x).sum();
        let centre: DVec3 = points
            .iter()
            .zip(&out)
            .map(|(&x, w)| x * w.x)
            .sum::<DVec3>()
            / mass;
        let var = points
            .iter()
            .zip(&out)
            .map(|(&x, w)| (x - centre) * (x - centre) * w.x)
            .sum::<DVec3>()
            / mass;
        assert!((centre - p).length() < 1e-2 * g.spacing, "{centre}");
        let s = WIDTH * sigma;
        let expected = 0.5 * s * s * tapered_variance_fraction();
        assert!(
            (expected / (0.5 * sigma * sigma) - 1.0).abs() < 1e-4,
            "{expected}"
        );
        for a in 0..3 {
            assert!(
                (var[a] / expected - 1.0).abs() < 2e-2,
                "axis {a}: {} vs {expected}",
                var[a]
            );
        }
    }

    /// No stamp has more points along an axis than [`stamp_width`] gives, for cores of every width from
    /// under a cell to eight cells, including those whose span `2 · REACH · s` is a whole number of cells
    /// (where the rounding of the stamp's ends decides), at positions all over a cell and on grid points.
    #[test]
    fn stamps_never_exceed_the_width() {
        // Wide enough that no stamp reaches a face.
        let g = FittedGrid {
            dims: [400; 3],
            origin: [0.0; 3],
            spacing: 0.0625,
        };
        let h = g.spacing;
        let mut radii: Vec<f64> = (1..=64).map(|k| h * k as f64 / 8.0).collect();
        radii.extend((5..=64).map(|m| m as f64 * h / (2.0 * REACH * WIDTH)));
        // Positions all over a cell, then on grid points and halfway between (exact in binary).
        let mut positions: Vec<DVec3> = (0..997)
            .map(|k| {
                let t = k as f64 / 997.0;
                DVec3::new(10.0 + t * h, 10.0 + (t * 7.0).fract() * h, 10.0 + t * t * h)
            })
            .collect();
        positions.extend((0..4).map(|j| DVec3::splat(10.03125 + j as f64 * h / 4.0)));
        for &r in &radii {
            let width = stamp_width(&g, &[r]);
            let mut most = 0;
            for &p in &positions {
                let stamp = BlobStamp::new(&g, p, r);
                assert!(
                    stamp.n.iter().all(|&n| n <= width),
                    "radius {r}: {:?} > {width}",
                    stamp.n
                );
                most = most.max(stamp.n.into_iter().max().unwrap());
            }
            // Loose by at most the point for the rounding of the ends and the one a whole span's second end
            // adds only where both ends fall on grid points.
            assert!(most + 2 >= width, "radius {r}: at most {most} of {width}");
        }
    }

    /// Variance of `axis_weight` over that of the uncut Gaussian, ½ (in units of s²), by the midpoint rule.
    fn tapered_variance_fraction() -> f64 {
        let n = 20_000;
        let (mut m0, mut m2) = (0.0, 0.0);
        for k in 0..n {
            let d = -REACH + 2.0 * REACH * (k as f64 + 0.5) / n as f64;
            let w = axis_weight(d * d);
            m0 += w;
            m2 += d * d * w;
        }
        m2 / m0 / 0.5
    }
}
