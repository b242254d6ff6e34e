//! The group walk that both treecode evaluations share: targets sorted by key and cut into groups, each
//! group's far list of supervortons (in blocks of lanes) and near list of leaves, and the lane arithmetic of
//! the far-field sums.

use super::{Tree, COLS, S2};
use crate::vpm::biot_savart::LANES;
use crate::vpm::params::TreeParams;
use glam::DVec3;
use rayon::prelude::*;

impl Tree {
    /// Sorts the targets by key into `target_keys`, cuts them into groups of `group`, walks the tree once
    /// per group (in parallel) and lets `sum` turn the group's far and near lists into one result per member,
    /// in sorted order; returns them all in sorted order. Records the interaction counts in `info`.
    pub(super) fn for_groups<R: Send, const C: usize>(
        &mut self,
        params: &TreeParams,
        targets: &[DVec3],
        group: usize,
        rows: fn(&Self) -> &[[f32; C]],
        sum: impl Fn(&Self, &[(u64, u32)], &GroupScratch<C>) -> Vec<R> + Sync + Send,
    ) -> Vec<R> {
        let n = targets.len();
        let tk = std::mem::take(&mut self.target_keys);
        let tk = self.sorted_keys(tk, targets);
        let this = &*self;
        let tk_ref = &tk;
        let results: Vec<(Vec<R>, u64, u64)> = (0..n.div_ceil(group))
            .into_par_iter()
            .map_init(GroupScratch::default, |scratch, g| {
                let members = &tk_ref[g * group..((g + 1) * group).min(n)];
                let (lo, hi) = members.iter().fold(
                    (DVec3::splat(f64::INFINITY), DVec3::splat(f64::NEG_INFINITY)),
                    |(lo, hi), &(_, i)| (lo.min(targets[i as usize]), hi.max(targets[i as usize])),
                );
                let (far, near) = this.walk(params, lo, hi, rows(this), scratch);
                let m = members.len() as u64;
                (sum(this, members, scratch), far * m, near * m)
            })
            .collect();
        self.target_keys = tk;
        self.info.far_interactions = results.iter().map(|r| r.1).sum();
        self.info.near_interactions = results.iter().map(|r| r.2).sum();
        results.into_iter().flat_map(|r| r.0).collect()
    }

    /// One group's walk over the tree for targets in the box `lo..hi`: a cell of width `s` whose centre is
    /// farther than `s/θ` from the box goes to the far list (as columns, padded to whole lanes), a nearer leaf
    /// to the near list (or, with `original_leaves = false`, the far list), and a nearer inner cell is
    /// opened. Returns the numbers of supervortons and of original vortons listed.
    fn walk<const C: usize>(
        &self,
        params: &TreeParams,
        lo: DVec3,
        hi: DVec3,
        rows: &[[f32; C]],
        scratch: &mut GroupScratch<C>,
    ) -> (u64, u64) {
        scratch.far.clear();
        scratch.near.clear();
        scratch.stack.clear();
        scratch.stack.push(0);
        let theta = params.theta;
        let mut far_count = 0;
        while let Some(k) = scratch.stack.pop() {
            let node = &self.nodes[k];
            if node.end == node.start {
                continue;
            }
            let m = &self.moments[k];
            let d = (lo - m.centre).max(m.centre - hi).max(DVec3::ZERO).length();
            let leaf = node.children == 0;
            if node.width < theta * d || (leaf && !params.original_leaves) {
                let slot = far_count % LANES;
                if slot == 0 {
                    scratch.far.push(empty_block());
                }
                let block = scratch.far.last_mut().expect("pushed above");
                for (c, &x) in block.iter_mut().zip(&rows[k]) {
                    c[slot] = x;
                }
                far_count += 1;
            } else if leaf {
                // Leaves are stored in key order, so neighbours in the walk are often adjacent in memory.
                match scratch.near.last_mut() {
                    Some(last) if last.1 == node.start => last.1 = node.end,
                    _ => scratch.near.push((node.start, node.end)),
                }
            } else {
                // Reverse so that children are visited in key order.
                for c in (node.first_child..node.first_child + node.children).rev() {
                    scratch.stack.push(c);
                }
            }
        }
        let near_count: usize = scratch.near.iter().map(|&(a, b)| b - a).sum();
        (far_count as u64, near_count as u64)
    }
}

/// `acc += v`, element-wise.
#[inline]
pub(super) fn add<const K: usize>(acc: &mut [f32; K], v: &[f32; K]) {
    for (a, b) in acc.iter_mut().zip(v) {
        *a += b;
    }
}

/// Sixteen supervortons as `C` columns of [`LANES`] (a block of a struct of arrays: one pointer and fixed
/// offsets, so the far-field loops vectorise without spilling column pointers).
pub(super) type FarBlock<const C: usize = COLS> = [[f32; LANES]; C];

/// A block of zero-strength supervortons (σ² = 1), the padding of a far list's last block.
fn empty_block<const C: usize>() -> FarBlock<C> {
    let mut b = [[0.0; LANES]; C];
    b[S2] = [1.0; LANES];
    b
}

/// Per-worker buffers of the group walks: the far list in blocks of `C` columns, the near leaves and the
/// walk's stack.
#[derive(Clone, Debug, Default)]
pub(super) struct GroupScratch<const C: usize> {
    pub(super) far: Vec<FarBlock<C>>,
    pub(super) near: Vec<(usize, usize)>,
    stack: Vec<usize>,
}

/// `Σₖ m[first + k] r[k]`, one row of a 3 × 3 moment times r.
#[inline(always)]
pub(super) fn row_dot(m: impl Fn(usize) -> f32, first: usize, r: [f32; 3]) -> f32 {
    m(first).mul_add(r[0], m(first + 1).mul_add(r[1], m(first + 2) * r[2]))
}

/// `Σ_{k≤l} Q[first + pair(k, l)] rr[pair]`: one component of `Q : r r` from the symmetric pairs, with the
/// off-diagonal products of `rr` doubled.
#[inline(always)]
pub(super) fn pair_dot(m: impl Fn(usize) -> f32, first: usize, rr: &[f32; 6]) -> f32 {
    let mut s = m(first) * rr[0];
    for p in 1..6 {
        s = m(first + p).mul_add(rr[p], s);
    }
    s
}

/// `[r₀², 2r₀r₁, 2r₀r₂, r₁², 2r₁r₂, r₂²]`, paired with the symmetric second moment.
#[inline(always)]
pub(super) fn pairs(r: [f32; 3]) -> [f32; 6] {
    let (r0, r1) = (2.0 * r[0], 2.0 * r[1]);
    [
        r[0] * r[0],
        r0 * r[1],
        r0 * r[2],
        r[1] * r[1],
        r1 * r[2],
        r[2] * r[2],
    ]
}

/// Sum of the lanes in a fixed order.
#[inline(always)]
pub(super) fn hsum(v: &[f32; LANES]) -> f32 {
    v.iter().fold(0.0f32, |s, x| s + x)
}
