//! The octree that both far-field evaluations of [`super::tree::Tree`] share: the treecode of
//! [`super::tree`] and the fast multipole method of [`super::fmm`]. It holds the cells ([`Node`]: a range
//! of the vortons in Morton-key order, a corner and a width), the Morton keys of points in a bounding cube
//! and their sort, the split of a sorted key range into its octants, and the near-field sum of a tile of
//! targets over the original vortons of the near leaves (Gourlay part 12's leaf layer).

use super::biot_savart::{self, Sources, TILE};
use super::mollify::bounds;
use glam::DVec3;
use rayon::prelude::*;

/// A vorton as the tree stores it: position (m), strength (m³/s), core radius (m).
pub(super) type Vorton = (DVec3, DVec3, f64);

/// Morton levels (21 bits per axis in a u64).
pub(super) const LEVELS: u32 = 21;

/// A cell of the octree.
#[derive(Clone, Debug)]
pub(super) struct Node {
    /// Range of the cell's vortons in sorted order.
    pub start: usize,
    pub end: usize,
    /// First child in `nodes` and number of children (0 for a leaf).
    pub first_child: usize,
    pub children: usize,
    /// Edge length of the cell (m).
    pub width: f64,
    /// Lower corner of the cell (m), the centre when it has no circulation.
    pub corner: DVec3,
}

impl Node {
    /// The centre of the cell.
    pub fn centre(&self) -> DVec3 {
        self.corner + DVec3::splat(self.width * 0.5)
    }
}

/// Interleaves the low 21 bits of x, y, z.
fn morton(c: [u64; 3]) -> u64 {
    fn spread(mut v: u64) -> u64 {
        v &= 0x1f_ffff;
        v = (v | v << 32) & 0x1f_0000_0000_ffff;
        v = (v | v << 16) & 0x1f_0000_ff00_00ff;
        v = (v | v << 8) & 0x100f_00f0_0f00_f00f;
        v = (v | v << 4) & 0x10c3_0c30_c30c_30c3;
        v = (v | v << 2) & 0x1249_2492_4924_9249;
        v
    }
    spread(c[0]) | spread(c[1]) << 1 | spread(c[2]) << 2
}

/// The lower corner and edge of a cube that holds `points` (the unit cube when there are none).
pub(super) fn cube(points: &[DVec3]) -> (DVec3, f64) {
    if points.is_empty() {
        return (DVec3::ZERO, 1.0);
    }
    let (lo, hi) = bounds(points);
    (lo, (hi - lo).max_element().max(1e-12) * (1.0 + 1e-9))
}

/// The Morton key of `p` in the cube of edge `width` from `lo`; points outside are clamped to it.
fn key_in(lo: DVec3, width: f64, p: DVec3) -> u64 {
    let scale = (1u64 << LEVELS) as f64 / width;
    let c = ((p - lo) * scale).to_array().map(|v| {
        if v.is_nan() {
            0
        } else {
            (v.max(0.0) as u64).min((1 << LEVELS) - 1)
        }
    });
    morton(c)
}

/// The Morton keys of `points` in the cube of edge `width` from `lo`, with their indices, sorted. `keys`
/// holds the last sort of as many points (or anything else): the points are then taken in that order, in
/// which a simulation's keys are nearly sorted already (its vortons moved a fraction of a cell since), and
/// the stable merge sort runs in nearly linear time. The keys are computed in the points' own order and
/// then looked up in that one: reading the points in sorted order instead took four times as long at 10⁶
/// (76–104 ms against 15–19 ms on two threads). The pairs are distinct, so the order is the same from any
/// starting order.
pub(super) fn sorted_keys_in(
    lo: DVec3,
    width: f64,
    mut keys: Vec<(u64, u32)>,
    points: &[DVec3],
) -> Vec<(u64, u32)> {
    let n = points.len();
    if keys.len() == n {
        let fresh: Vec<u64> = points.par_iter().map(|&p| key_in(lo, width, p)).collect();
        keys.par_iter_mut()
            .for_each(|(k, i)| *k = fresh[*i as usize]);
    } else {
        keys.clear();
        keys.par_extend(
            (0..n)
                .into_par_iter()
                .map(|i| (key_in(lo, width, points[i]), i as u32)),
        );
    }
    keys.par_sort();
    keys
}

/// The non-empty octants of the sorted `keys[range]` at the level whose digit starts at bit `shift`:
/// (digit, start, end) in key order.
pub(super) fn octants(
    keys: &[(u64, u32)],
    range: (usize, usize),
    shift: u32,
) -> impl Iterator<Item = (u64, usize, usize)> + '_ {
    let mut s = range.0;
    (0..8u64).filter_map(move |digit| {
        let e = s + keys[s..range.1].partition_point(|&(k, _)| (k >> shift) & 7 <= digit);
        let octant = (e > s).then_some((digit, s, e));
        s = e;
        octant
    })
}

/// A tile of [`TILE`] targets relative to `origin` from sorted `(key, index)` pairs: a short last tile
/// repeats its last target (the extra results are dropped).
#[inline]
pub(super) fn tile_targets(
    targets: &[DVec3],
    tile: &[(u64, u32)],
    origin: DVec3,
) -> [[f32; 3]; TILE] {
    std::array::from_fn(|m| relative(targets[tile[m.min(tile.len() - 1)].1 as usize], origin))
}

/// The near sums of a tile of targets over the source `ranges`, without the factor 1/4π: velocities,
/// and gradients when `want_jac` (zero otherwise); only the first `count` targets when gradients are
/// asked for.
#[inline(always)]
pub(super) fn near_tile(
    sources: &Sources,
    ranges: &[(usize, usize)],
    t: &[[f32; 3]; TILE],
    count: usize,
    want_jac: bool,
) -> ([[f32; 3]; TILE], [[f32; 9]; TILE]) {
    let mut uv = [[0f32; 3]; TILE];
    let mut jv = [[0f32; 9]; TILE];
    if want_jac {
        for m in 0..count {
            (uv[m], jv[m]) = biot_savart::velocity_gradient_ranges(sources, ranges, t[m]);
        }
    } else {
        uv = biot_savart::velocity_tile(sources, ranges, t);
    }
    (uv, jv)
}

/// `p` relative to `origin`, in f32.
#[inline]
pub(super) fn relative(p: DVec3, origin: DVec3) -> [f32; 3] {
    let r = p - origin;
    [r.x as f32, r.y as f32, r.z as f32]
}
