//! Building the treecode (Gourlay part 3's nested grid of supervortons): the vortons sorted by Morton key,
//! the octree split, and each cell's supervorton with its first and second moments, leaves from their
//! vortons and inner cells shifted up from their children.

use super::{Tree, TreeInfo, B, COLS, POTENTIAL_COLS};
use crate::vpm::octree::{cube, octants, Node, LEVELS};
use crate::vpm::params::TreeParams;
use glam::DVec3;
use multiversion::multiversion;
use rayon::prelude::*;

/// A supervorton: the far-field moments of one cell.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct CellMoments {
    pub(super) centre: DVec3,
    a: DVec3,
    b: DVec3,
    p: [f64; 9],
    /// Second moments: `M = Σ (αⱼ × dⱼ) dⱼᵀ`, `S = Σ αⱼ |dⱼ|²`, `Q = Σ αⱼ ⊗ dⱼ ⊗ dⱼ` (symmetric pairs).
    m2: [f64; 9],
    s: DVec3,
    q: [f64; 18],
    pub(super) s2: f64,
    /// Σ |αⱼ|, the weight of the centre.
    weight: f64,
}

impl CellMoments {
    /// The moments of `vortons` (position, strength, core radius) about their circulation-weighted centre, or
    /// about `fallback` when they carry no circulation.
    fn of_vortons(vortons: &[(DVec3, DVec3, f64)], fallback: DVec3) -> Self {
        let mut w = 0.0;
        let mut c = DVec3::ZERO;
        let mut a = DVec3::ZERO;
        let mut s2 = 0.0;
        for &(p, al, r) in vortons {
            let m = al.length();
            w += m;
            c += p * m;
            a += al;
            s2 += m * r * r;
        }
        let (centre, s2) = if w > 0.0 {
            (c / w, s2 / w)
        } else {
            (fallback, 0.0)
        };
        let mut m = CellMoments {
            centre,
            a,
            s2,
            weight: w,
            ..Default::default()
        };
        for &(x, al, _) in vortons {
            let d = x - centre;
            let ad = al.cross(d);
            m.b += ad;
            m.s += al * d.length_squared();
            let (al, d, ad) = (al.to_array(), d.to_array(), ad.to_array());
            for r in 0..3 {
                for c in 0..3 {
                    m.p[3 * r + c] += al[r] * d[c];
                    m.m2[3 * r + c] += ad[r] * d[c];
                }
                for (k, &(i, j)) in PAIRS.iter().enumerate() {
                    m.q[6 * r + k] += al[r] * d[i] * d[j];
                }
            }
        }
        m
    }

    /// The moments of the union of `children` about its circulation-weighted centre (or `fallback`), each
    /// child's moments shifted by `t = c_child − c`: with `dⱼ = eⱼ + t`,
    /// `B += A × t`, `P += A tᵀ`, `S += 2 P t + A |t|²`, `Q(k, l) += P₍ₖ₎ t_l + P₍ₗ₎ t_k + A t_k t_l` and
    /// `M += B tᵀ + [Σ (αⱼ × t) eⱼᵀ] + (A × t) tᵀ`, where the bracket is `ε_rab t_b P[a][c]`.
    fn of_children(children: &[CellMoments], fallback: DVec3) -> Self {
        let w: f64 = children.iter().map(|c| c.weight).sum();
        if w <= 0.0 {
            return CellMoments {
                centre: fallback,
                ..Default::default()
            };
        }
        let centre = children
            .iter()
            .fold(DVec3::ZERO, |acc, c| acc + c.centre * c.weight)
            / w;
        let s2 = children.iter().map(|c| c.s2 * c.weight).sum::<f64>() / w;
        let mut m = CellMoments {
            centre,
            s2,
            weight: w,
            ..Default::default()
        };
        for ch in children {
            let t = ch.centre - centre;
            let at = ch.a.cross(t);
            m.a += ch.a;
            m.b += ch.b + at;
            let (a, b, t3, at3) = (
                ch.a.to_array(),
                ch.b.to_array(),
                t.to_array(),
                at.to_array(),
            );
            let p = &ch.p;
            let pt =
                [0, 1, 2].map(|r| p[3 * r] * t3[0] + p[3 * r + 1] * t3[1] + p[3 * r + 2] * t3[2]);
            let tt = t.length_squared();
            for r in 0..3 {
                m.s[r] += ch.s[r] + 2.0 * pt[r] + a[r] * tt;
                // (αⱼ × t)_r eⱼ_c summed: ε_rab t_b P[a][c].
                let (r1, r2) = ((r + 1) % 3, (r + 2) % 3);
                for c in 0..3 {
                    let i = 3 * r + c;
                    m.p[i] += p[i] + a[r] * t3[c];
                    let cross_p = t3[r2] * p[3 * r1 + c] - t3[r1] * p[3 * r2 + c];
                    m.m2[i] += ch.m2[i] + b[r] * t3[c] + cross_p + at3[r] * t3[c];
                }
                for (k, &(i, j)) in PAIRS.iter().enumerate() {
                    m.q[6 * r + k] += ch.q[6 * r + k]
                        + p[3 * r + i] * t3[j]
                        + p[3 * r + j] * t3[i]
                        + a[r] * t3[i] * t3[j];
                }
            }
        }
        m
    }
}

/// The index pairs (k, l), k ≤ l, of the symmetric second moment.
const PAIRS: [(usize, usize); 6] = [(0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2)];

/// [`Tree::build`], compiled for the processor's vector width.
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2+fma"))]
pub(super) fn build_tree(
    tree: &mut Tree,
    params: &TreeParams,
    position: &[DVec3],
    strength: &[DVec3],
    radius: &[f64],
) {
    let n = position.len();
    let (lo, width) = cube(position);
    tree.cells.clear();
    tree.lo = lo;
    tree.width = width;
    let keys = std::mem::take(&mut tree.keys);
    let keys = tree.sorted_keys(keys, position);
    let mut gathered = std::mem::take(&mut tree.gathered);
    gathered.clear();
    gathered.par_extend(keys.par_iter().map(|&(_, j)| {
        let j = j as usize;
        (position[j], strength[j], radius[j])
    }));
    tree.keys = keys;
    tree.gathered = gathered;

    tree.nodes.clear();
    tree.nodes.push(Node {
        start: 0,
        end: n,
        first_child: 0,
        children: 0,
        width,
        corner: lo,
    });
    let leaf_size = params.leaf_size.max(1);
    // Breadth-first, one level at a time: the children of a level's nodes are found in parallel and appended
    // in their parents' order, so that a node's children are contiguous and each level's nodes follow the
    // last level's, as a serial breadth-first pass would place them. Level l's nodes are
    // `starts[l]..starts[l + 1]`.
    let mut starts = vec![0, 1];
    for level in 0..LEVELS {
        let this = starts[level as usize]..tree.nodes.len();
        let shift = 3 * (LEVELS - 1 - level);
        let split: Vec<Vec<Node>> = tree.nodes[this.clone()]
            .par_iter()
            .map(|node| {
                if node.end - node.start <= leaf_size {
                    return Vec::new();
                }
                let half = node.width * 0.5;
                octants(&tree.keys, (node.start, node.end), shift)
                    .map(|(digit, s, e)| Node {
                        start: s,
                        end: e,
                        first_child: 0,
                        children: 0,
                        width: half,
                        corner: node.corner
                            + DVec3::new(
                                (digit & 1) as f64,
                                ((digit >> 1) & 1) as f64,
                                ((digit >> 2) & 1) as f64,
                            ) * half,
                    })
                    .collect()
            })
            .collect();
        let next = tree.nodes.len();
        for (k, children) in this.zip(split) {
            if !children.is_empty() {
                tree.nodes[k].first_child = tree.nodes.len();
                tree.nodes[k].children = children.len();
                tree.nodes.extend(children);
            }
        }
        if tree.nodes.len() == next {
            break;
        }
        starts.push(tree.nodes.len());
    }

    // Sorted sources, in sorted (depth-first key) order: a cell's vortons are `start..end` there too.
    let origin = lo + DVec3::splat(width * 0.5);
    tree.sorted.fill_sorted(origin, &tree.gathered);

    // Leaves from their vortons; inner cells from their children's moments shifted to the cell's centre,
    // each vorton summed once instead of once per level. A level's cells in parallel, the deepest level
    // first: every cell's children, a level deeper, are done by then.
    let gathered = &tree.gathered;
    let nodes = &tree.nodes;
    let mut moments = std::mem::take(&mut tree.moments);
    moments.clear();
    moments.resize(nodes.len(), CellMoments::default());
    for range in starts.windows(2).rev().map(|w| w[0]..w[1]) {
        let (upper, deeper) = moments.split_at_mut(range.end);
        let deeper = &*deeper;
        upper[range.clone()]
            .par_iter_mut()
            .zip(&nodes[range.clone()])
            .with_min_len(16)
            .for_each(|(m, node)| {
                *m = if node.children == 0 {
                    CellMoments::of_vortons(&gathered[node.start..node.end], node.centre())
                } else {
                    let first = node.first_child - range.end;
                    CellMoments::of_children(&deeper[first..first + node.children], node.centre())
                };
            });
    }
    tree.moments = moments;
    let origin = tree.sorted.origin;
    tree.rows = tree
        .moments
        .par_iter()
        .with_min_len(64)
        .map(|m| {
            let c = m.centre - origin;
            let head = [c.x, c.y, c.z, m.a.x, m.a.y, m.a.z, m.s2];
            let (b, sv) = (m.b.to_array(), m.s.to_array());
            let mut row = [0f32; COLS];
            let values = head
                .iter()
                .chain(&b)
                .chain(&m.p)
                .chain(&m.m2)
                .chain(&sv)
                .chain(&m.q);
            for (x, &v) in row.iter_mut().zip(values) {
                *x = v as f32;
            }
            row
        })
        .collect();
    tree.potential_rows.clear();
    tree.potential_rows
        .par_extend(tree.rows.par_iter().map(|r| {
            let (head, p, sv, q) = (&r[..B], &r[B + 3..B + 12], &r[B + 21..B + 24], &r[B + 24..]);
            let mut row = [0f32; POTENTIAL_COLS];
            for (x, &v) in row.iter_mut().zip(head.iter().chain(p).chain(sv).chain(q)) {
                *x = v;
            }
            row
        }));
    tree.info = TreeInfo {
        nodes: tree.nodes.len(),
        leaves: tree.nodes.par_iter().filter(|n| n.children == 0).count(),
        ..Default::default()
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vpm::init::random_vortons;

    /// The inner cells' moments, shifted up from their children, equal the moments summed over their vortons
    /// directly (the shift formulas are exact; 1e-9 relative to the cell's scale allows for f64 rounding).
    #[test]
    fn shifted_moments_equal_direct_sums() {
        let (p, a, s) = random_vortons(5_000, 3);
        let params = TreeParams {
            leaf_size: 8,
            ..Default::default()
        };
        let mut tree = Tree::default();
        tree.build(&params, &p, &a, &s);
        let mut inner = 0;
        for (node, m) in tree.nodes.iter().zip(&tree.moments) {
            if node.children == 0 {
                continue;
            }
            inner += 1;
            let direct =
                CellMoments::of_vortons(&tree.gathered[node.start..node.end], node.centre());
            let scale = direct.weight * node.width * node.width;
            let close = |x: &[f64], y: &[f64], unit: f64| {
                x.iter().zip(y).all(|(x, y)| (x - y).abs() <= 1e-9 * unit)
            };
            assert!((m.centre - direct.centre).length() <= 1e-12 * node.width);
            assert!((m.s2 - direct.s2).abs() <= 1e-12 * direct.s2);
            assert!(close(&m.a.to_array(), &direct.a.to_array(), direct.weight));
            let first = |m: &CellMoments| [m.b.to_array().to_vec(), m.p.to_vec()].concat();
            assert!(close(
                &first(m),
                &first(&direct),
                direct.weight * node.width
            ));
            let second =
                |m: &CellMoments| [m.m2.to_vec(), m.s.to_array().to_vec(), m.q.to_vec()].concat();
            assert!(
                close(&second(m), &second(&direct), scale),
                "cell of {} vortons",
                node.end - node.start
            );
        }
        assert!(inner > 50, "{inner} inner cells");
    }
}
