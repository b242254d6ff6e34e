//! The treecode's velocity and velocity gradient, per group of targets: the near sums over the leaves'
//! original vortons (Gourlay part 12) and the second-order far field of the supervortons.

use super::walk::{add, hsum, pair_dot, pairs, row_dot, FarBlock};
use super::{scatter, Tree, B, COLS, GROUP, S2};
use crate::vpm::biot_savart::{FOUR_PI_INV, LANES, TILE};
use crate::vpm::octree::{near_tile, tile_targets};
use crate::vpm::params::TreeParams;
use glam::DVec3;
use multiversion::multiversion;

/// [`Tree::evaluate`] by the treecode, compiled for the processor's vector width.
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2+fma"))]
pub(super) fn evaluate_treecode(
    tree: &mut Tree,
    params: &TreeParams,
    targets: &[DVec3],
    u: &mut [DVec3],
    jac: Option<&mut [[f64; 9]]>,
) {
    let want_jac = jac.is_some();
    let origin = tree.sorted.origin;
    let rows: fn(&Tree) -> &[[f32; COLS]] = |tree| &tree.rows;
    let results = tree.for_groups(params, targets, GROUP, rows, |tree, members, scratch| {
        let mut out = Vec::with_capacity(members.len());
        for tile in members.chunks(TILE) {
            let t = tile_targets(targets, tile, origin);
            let (mut uv, mut jv) = near_tile(&tree.sorted, &scratch.near, &t, tile.len(), want_jac);
            for m in 0..tile.len() {
                add(&mut uv[m], &far_velocity(&scratch.far, t[m]));
                if want_jac {
                    add(&mut jv[m], &far_gradient(&scratch.far, t[m]));
                }
                out.push((
                    DVec3::new(uv[m][0] as f64, uv[m][1] as f64, uv[m][2] as f64) * FOUR_PI_INV,
                    jv[m].map(|x| x as f64 * FOUR_PI_INV),
                ));
            }
        }
        out
    });
    scatter(&results, &tree.target_keys, u, jac);
}

/// `a × b`.
#[inline(always)]
fn cross(a: [f32; 3], b: [f32; 3]) -> [f32; 3] {
    [
        a[1].mul_add(b[2], -(a[2] * b[1])),
        a[2].mul_add(b[0], -(a[0] * b[2])),
        a[0].mul_add(b[1], -(a[1] * b[0])),
    ]
}

/// Far-field velocity at `t` from the supervortons in `far`, without the factor 1/4π:
/// `f (A × r − B) − 2f' (P r) × r + 2f' M r + f' S × r + 2f'' (Q : r r) × r`, with
/// `f'(s) = −(3s/2 + 21σ²/4)(s + σ²)^{−7/2}` and `f''(s) = (15s/4 + 135σ²/8)(s + σ²)^{−9/2}` (second
/// order in the cell size).
#[inline(always)]
fn far_velocity(far: &[FarBlock], t: [f32; 3]) -> [f32; 3] {
    let mut u = [[0f32; LANES]; 3];
    for blk in far {
        for l in 0..LANES {
            let m = |k: usize| blk[k][l];
            let r = [t[0] - m(0), t[1] - m(1), t[2] - m(2)];
            let s2 = m(S2);
            let r2 = r[0].mul_add(r[0], r[1].mul_add(r[1], r[2] * r[2]));
            let d = r2 + s2;
            let inv92 = 1.0 / (d * d * d * d * d.sqrt());
            let inv72 = inv92 * d;
            let f = s2.mul_add(2.5, r2) * (inv72 * d);
            let g = -2.0 * s2.mul_add(5.25, 1.5 * r2) * inv72;
            let f2 = s2.mul_add(16.875, 3.75 * r2) * inv92;
            let cr = cross([m(3), m(4), m(5)], r);
            let rr = pairs(r);
            // (f' S + 2f'' (Q : r r) − 2f' P r), crossed with r at once.
            let mut v = [0f32; 3];
            for (i, v) in v.iter_mut().enumerate() {
                let pr = row_dot(m, B + 3 + 3 * i, r);
                let qrr = pair_dot(m, B + 24 + 6 * i, &rr);
                *v = (0.5 * g).mul_add(m(B + 21 + i), (2.0 * f2).mul_add(qrr, -(g * pr)));
            }
            let vx = cross(v, r);
            for q in 0..3 {
                let mr = row_dot(m, B + 12 + 3 * q, r);
                let near = f.mul_add(cr[q] - m(B + q), g.mul_add(mr, vx[q]));
                u[q][l] += near;
            }
        }
    }
    [hsum(&u[0]), hsum(&u[1]), hsum(&u[2])]
}

/// Far-field velocity gradient (monopole: `f [A]ₓ + 2f' (A × r) rᵀ`) at `t`, without the factor 1/4π.
#[inline(always)]
fn far_gradient(far: &[FarBlock], t: [f32; 3]) -> [f32; 9] {
    let mut jac = [[0f32; LANES]; 9];
    for blk in far {
        for l in 0..LANES {
            let m = |k: usize| blk[k][l];
            let r = [t[0] - m(0), t[1] - m(1), t[2] - m(2)];
            let a = [m(3), m(4), m(5)];
            let s2 = m(S2);
            let r2 = r[0].mul_add(r[0], r[1].mul_add(r[1], r[2] * r[2]));
            let d = r2 + s2;
            let inv72 = 1.0 / (d * d * d * d.sqrt());
            let f = s2.mul_add(2.5, r2) * (inv72 * d);
            let g = -2.0 * s2.mul_add(5.25, 1.5 * r2) * inv72;
            let cr = cross(a, r);
            let fa = [f * a[0], f * a[1], f * a[2]];
            let fcross = [0.0, -fa[2], fa[1], fa[2], 0.0, -fa[0], -fa[1], fa[0], 0.0];
            for i in 0..3 {
                let gc = g * cr[i];
                for k in 0..3 {
                    jac[3 * i + k][l] += gc.mul_add(r[k], fcross[3 * i + k]);
                }
            }
        }
    }
    let mut out = [0f32; 9];
    for (o, j) in out.iter_mut().zip(&jac) {
        *o = hsum(j);
    }
    out
}
