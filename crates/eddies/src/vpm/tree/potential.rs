//! The treecode's vector potential, the boundary values of the Poisson technique (Gourlay part 20): the
//! near sums over the leaves' vortons and the second-order expansion of each supervorton's potential.

use super::walk::{add, hsum, pair_dot, pairs, row_dot, FarBlock};
use super::{Tree, POTENTIAL_COLS, POTENTIAL_GROUP, PP, PQ, PS, S2};
use crate::vpm::biot_savart::{self, FOUR_PI_INV, LANES};
use crate::vpm::octree::relative;
use crate::vpm::params::TreeParams;
use glam::DVec3;
use multiversion::multiversion;

/// [`Tree::evaluate_potential`], compiled for the processor's vector width.
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2+fma"))]
pub(super) fn evaluate_potential_tree(
    tree: &mut Tree,
    params: &TreeParams,
    targets: &[DVec3],
    out: &mut [DVec3],
) {
    let origin = tree.sorted.origin;
    let rows: fn(&Tree) -> &[[f32; POTENTIAL_COLS]] = |tree| &tree.potential_rows;
    let results = tree.for_groups(
        params,
        targets,
        POTENTIAL_GROUP,
        rows,
        |tree, members, scratch| {
            members
                .iter()
                .map(|&(_, i)| {
                    let t = relative(targets[i as usize], origin);
                    let mut a = biot_savart::potential_ranges(&tree.sorted, &scratch.near, t);
                    add(&mut a, &far_potential(&scratch.far, t));
                    DVec3::new(a[0] as f64, a[1] as f64, a[2] as f64) * FOUR_PI_INV
                })
                .collect()
        },
    );
    for (v, &(_, i)) in results.iter().zip(&tree.target_keys) {
        out[i as usize] = *v;
    }
}

/// Far-field vector potential at `t` from the supervortons in `far`, without the factor 1/4π:
/// `A h − 2h' P r + h' S + 2h'' (Q : r r)` with `h(s) = (s + 3σ²/2)(s + σ²)^{−3/2}`,
/// `h'(s) = −(s + 5σ²/2)(s + σ²)^{−5/2}/2` and `h''(s) = (3s/4 + 21σ²/8)(s + σ²)^{−7/2}`.
#[inline(always)]
fn far_potential(far: &[FarBlock<POTENTIAL_COLS>], t: [f32; 3]) -> [f32; 3] {
    let mut acc = [[0f32; LANES]; 3];
    for blk in far {
        for l in 0..LANES {
            let m = |k: usize| blk[k][l];
            let r = [t[0] - m(0), t[1] - m(1), t[2] - m(2)];
            let s2 = m(S2);
            let r2 = r[0].mul_add(r[0], r[1].mul_add(r[1], r[2] * r[2]));
            let d = r2 + s2;
            let inv72 = 1.0 / (d * d * d * d.sqrt());
            let inv32 = inv72 * d * d;
            let h = s2.mul_add(1.5, r2) * inv32;
            let h1 = -0.5 * s2.mul_add(2.5, r2) * (inv72 * d);
            let h2 = s2.mul_add(2.625, 0.75 * r2) * inv72;
            let rr = pairs(r);
            for (i, a) in acc.iter_mut().enumerate() {
                let pr = row_dot(m, PP + 3 * i, r);
                let qrr = pair_dot(m, PQ + 6 * i, &rr);
                a[l] += m(3 + i).mul_add(h, h1.mul_add(m(PS + i) - 2.0 * pr, 2.0 * h2 * qrr));
            }
        }
    }
    [hsum(&acc[0]), hsum(&acc[1]), hsum(&acc[2])]
}
