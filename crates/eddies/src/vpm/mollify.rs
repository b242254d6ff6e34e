//! The grid that follows the vortons (Gourlay part 8) and auto-mollification (part 12).
//!
//! Each step the grid is refitted to the bounding box of the vortons (and tracers) plus a margin, with cubic
//! cells. Auto-mollification then spreads every vorton to the scale the grid resolves: its core radius is
//! multiplied by the spreading range factor `R = max(1, length_scale · h / (2σ))`, so that its diameter spans
//! about `length_scale` cells, and its vorticity by the spreading circulation factor `C = R⁻³`. Circulation
//! (Σ ω V) is unchanged because the volume grows as R³: the Biot–Savart sums use the strength α = ω V, which
//! is therefore left as it is, and only the core radius they see grows. Outside the spread core the velocity
//! field is the same (part 12, figure 3); inside it is smoother.

use crate::grid::Grid;
use glam::DVec3;
use rayon::prelude::*;
use std::ops::{AddAssign, Mul};

/// A uniform grid of points (cell centres) fitted around a cloud of points.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FittedGrid {
    /// Cells per axis.
    pub dims: [usize; 3],
    /// Lower corner of the first cell (m).
    pub origin: [f64; 3],
    /// Cell edge (m).
    pub spacing: f64,
}

/// The smallest and largest coordinates of `points` (m), `EMPTY` for none; non-finite coordinates are
/// skipped where the others give a bound (as `f64::min` does). Minima and maxima are the same in any order,
/// so the points are read in parallel.
pub(crate) fn bounds(points: &[DVec3]) -> (DVec3, DVec3) {
    points
        .par_iter()
        .with_min_len(4096)
        .fold(|| EMPTY, |(lo, hi), &p| (lo.min(p), hi.max(p)))
        .reduce(|| EMPTY, |(a, b), (c, d)| (a.min(c), b.max(d)))
}

/// The bounds of no points: [`bounds`]' start.
const EMPTY: (DVec3, DVec3) = (DVec3::splat(f64::INFINITY), DVec3::splat(f64::NEG_INFINITY));

impl FittedGrid {
    /// The grid of at most `resolution` cells per axis whose cell centres span the bounding box of the sets of
    /// `points` grown by `margin` times its largest extent on each side.
    pub fn fit(points: &[&[DVec3]], resolution: [usize; 3], margin: f64) -> Self {
        let (mut lo, mut hi) = points
            .iter()
            .map(|p| bounds(p))
            .fold(EMPTY, |(a, b), (c, d)| (a.min(c), b.max(d)));
        if !lo.is_finite() || !hi.is_finite() {
            lo = DVec3::ZERO;
            hi = DVec3::ONE;
        }
        let pad = (hi - lo).max_element().max(1e-9) * margin;
        let (lo, hi) = (lo - DVec3::splat(pad), hi + DVec3::splat(pad));
        let extent = (hi - lo).max(DVec3::splat(1e-9));
        let res = resolution.map(|n| n.max(2));
        let spacing = (0..3)
            .map(|a| extent[a] / (res[a] - 1) as f64)
            .fold(0.0, f64::max);
        let centre = (lo + hi) * 0.5;
        let dims: [usize; 3] =
            std::array::from_fn(|a| ((extent[a] / spacing).ceil() as usize + 1).clamp(2, res[a]));
        let origin = std::array::from_fn(|a| centre[a] - dims[a] as f64 * spacing * 0.5);
        Self {
            dims,
            origin,
            spacing,
        }
    }

    /// Number of grid points.
    pub fn len(&self) -> usize {
        self.dims.iter().product()
    }

    /// Whether the grid has no points.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Cloud-in-cell weights of point `p`: the lowest of the 2×2×2 grid points around it and the fraction of
    /// the way to the next point along each axis. Points outside the grid are clamped onto its faces, so the
    /// eight weights always sum to one.
    pub fn cic(&self, p: DVec3) -> ([usize; 3], [f64; 3]) {
        let s: [f64; 3] = std::array::from_fn(|a| {
            ((p[a] - self.origin[a]) / self.spacing - 0.5).clamp(0.0, (self.dims[a] - 1) as f64)
        });
        let c0: [usize; 3] = std::array::from_fn(|a| (s[a].floor() as usize).min(self.dims[a] - 2));
        (c0, std::array::from_fn(|a| s[a] - c0[a] as f64))
    }

    /// Splats `value(i)` of every point `positions[i]` onto the grid points by cloud-in-cell (the transpose of
    /// trilinear sampling), into `out` (x fastest). Each value is shared out with weights that sum to one, so
    /// the grid's total equals the points' total.
    ///
    /// A point whose cell starts at plane `k` writes planes `k` and `k + 1`, so points whose cells start on
    /// planes of the same parity never write the same plane: the points are grouped by that plane, and the
    /// even planes' groups, then the odd planes', are splatted in parallel, each group in point order. Every
    /// grid value is therefore summed in one fixed order, whatever the number of threads.
    pub fn splat<T>(&self, positions: &[DVec3], value: impl Fn(usize) -> T + Sync, out: &mut Vec<T>)
    where
        T: Copy + Default + AddAssign + Mul<f64, Output = T> + Send,
    {
        out.clear();
        out.resize(self.len(), T::default());
        let [nx, ny, nz] = self.dims;
        let plane = nx * ny;
        let cells: Vec<([usize; 3], [f64; 3])> = positions
            .par_iter()
            .with_min_len(1024)
            .map(|&p| self.cic(p))
            .collect();
        // The points grouped by the lower plane of their cell (a counting sort, stable).
        let mut start = vec![0usize; nz + 1];
        for (c, _) in &cells {
            start[c[2] + 1] += 1;
        }
        for k in 0..nz {
            start[k + 1] += start[k];
        }
        let mut order = vec![0u32; cells.len()];
        let mut next = start.clone();
        for (i, (c, _)) in cells.iter().enumerate() {
            order[next[c[2]]] = i as u32;
            next[c[2]] += 1;
        }
        let cells = &cells;
        let (order, start, value) = (&order, &start, &value);
        // Pass `parity` splats the groups of lower planes k ≡ parity (mod 2) into the slabs of planes k, k + 1.
        for parity in 0..2 {
            out[parity * plane..]
                .par_chunks_mut(2 * plane)
                .enumerate()
                .for_each(|(m, slab)| {
                    let k = 2 * m + parity;
                    if k + 1 >= nz {
                        return;
                    }
                    for &i in &order[start[k]..start[k + 1]] {
                        let i = i as usize;
                        let (c, f) = cells[i];
                        let val = value(i);
                        let base = c[0] + c[1] * nx;
                        for corner in 0..8 {
                            let (bx, by, bz) = (corner & 1, (corner >> 1) & 1, (corner >> 2) & 1);
                            let w = (if bx == 1 { f[0] } else { 1.0 - f[0] })
                                * (if by == 1 { f[1] } else { 1.0 - f[1] })
                                * (if bz == 1 { f[2] } else { 1.0 - f[2] });
                            slab[base + bx + by * nx + bz * plane] += val * w;
                        }
                    }
                });
        }
    }

    /// `out[i] = f(d)` at every grid point `i`, where `d[k]` is the difference quotient of `value` along axis
    /// `k`: between the point's two neighbours (central), or the point itself and its one neighbour at a face
    /// (one-sided). Parallel over planes of points, row by row.
    pub fn differences<const C: usize, O: Send>(
        &self,
        value: impl Fn(usize) -> [f64; C] + Sync,
        out: &mut [O],
        f: impl Fn([[f64; C]; 3]) -> O + Sync,
    ) {
        let all = self.dims.map(|n| 0..n);
        self.differences_in(all, value, out, f);
    }

    /// [`differences`](Self::differences) at the grid points of `region` only (ranges of point coordinates per
    /// axis); the other entries of `out` are left as they are.
    pub fn differences_in<const C: usize, O: Send>(
        &self,
        region: [std::ops::Range<usize>; 3],
        value: impl Fn(usize) -> [f64; C] + Sync,
        out: &mut [O],
        f: impl Fn([[f64; C]; 3]) -> O + Sync,
    ) {
        let [nx, ny, nz] = self.dims;
        let plane = nx * ny;
        assert_eq!(out.len(), plane * nz, "one output per grid point");
        let h = self.spacing;
        // The two points around coordinate c of n (neighbours, or one-sided at a face) and the reciprocal of
        // their distance, by how many points apart they are: the quotients multiply by it (a division each had
        // been a quarter of the curl's time). An axis of one point has no difference: 0 · ∞ gives NaN, as
        // 0 / 0 did.
        let inverse = [f64::INFINITY, 1.0 / h, 1.0 / (2.0 * h)];
        let around = |c: usize, n: usize| {
            let (lo, hi) = (c.saturating_sub(1), (c + 1).min(n - 1));
            (lo, hi, inverse[hi - lo])
        };
        let quotient = |hi: [f64; C], lo: [f64; C], inv_span: f64| -> [f64; C] {
            std::array::from_fn(|c| (hi[c] - lo[c]) * inv_span)
        };
        let [rx, ry, rz] = region;
        out.par_chunks_mut(plane).enumerate().for_each(|(k, o)| {
            if !rz.contains(&k) {
                return;
            }
            let (klo, khi, zspan) = around(k, nz);
            for j in ry.clone() {
                let (jlo, jhi, yspan) = around(j, ny);
                let row = |jj: usize, kk: usize| nx * (jj + ny * kk);
                let (here, south, north, down, up) = (
                    row(j, k),
                    row(jlo, k),
                    row(jhi, k),
                    row(j, klo),
                    row(j, khi),
                );
                for (i, o) in rx.clone().zip(&mut o[j * nx + rx.start..j * nx + rx.end]) {
                    let (ilo, ihi, xspan) = around(i, nx);
                    *o = f([
                        quotient(value(here + ihi), value(here + ilo), xspan),
                        quotient(value(north + i), value(south + i), yspan),
                        quotient(value(up + i), value(down + i), zspan),
                    ]);
                }
            }
        });
    }

    /// A [`Grid`] of this shape holding `data` (x fastest).
    pub fn grid_of<T>(&self, data: Vec<T>) -> Grid<T, 3> {
        Grid::from_data(self.dims, self.origin, self.spacing, data)
    }

    /// The grid points (cell centres), x fastest, into `out`.
    pub fn points_into(&self, out: &mut Vec<DVec3>) {
        out.clear();
        let h = self.spacing;
        for k in 0..self.dims[2] {
            for j in 0..self.dims[1] {
                for i in 0..self.dims[0] {
                    out.push(DVec3::new(
                        self.origin[0] + (i as f64 + 0.5) * h,
                        self.origin[1] + (j as f64 + 0.5) * h,
                        self.origin[2] + (k as f64 + 0.5) * h,
                    ));
                }
            }
        }
    }
}

/// Spreading range factor R of part 12 for a vorton of core radius `sigma` (m) on a grid of cell edge `h`
/// (m): the vorton's diameter spans about `length_scale` cells, and cores are never shrunk.
pub fn spreading_range_factor(sigma: f64, h: f64, length_scale: f64) -> f64 {
    (length_scale * h / (2.0 * sigma)).max(1.0)
}

/// Core radii after auto-mollification, into `out` (m).
pub fn mollified_radii(radius: &[f64], h: f64, length_scale: f64, out: &mut Vec<f64>) {
    out.clear();
    out.par_extend(
        radius
            .par_iter()
            .with_min_len(4096)
            .map(|&s| s * spreading_range_factor(s, h, length_scale)),
    );
}
