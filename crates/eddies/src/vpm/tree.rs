//! The treecode: an octree of supervortons (Gourlay part 3's nested grid, with part 12's option of the
//! original vortons in the leaf layer), evaluated for groups of nearby targets.
//!
//! **Build.** The vortons are sorted by the Morton key of their position in the cube that bounds them; a
//! cell with more than `leaf_size` vortons is split into its eight octants. Each cell is a *supervorton*: the
//! summed strength `A = Σ αⱼ` at the circulation-weighted centre `c = Σ |αⱼ| xⱼ / Σ |αⱼ|`, plus the first
//! moments `B = Σ αⱼ × dⱼ` and `P = Σ αⱼ dⱼᵀ` (dⱼ = xⱼ − c) that make the far field second-order accurate.
//! The cells, keys and octant split are those of the private module `octree`, which the fast multipole method
//! ([`super::fmm`], chosen by [`TreeMethod::Fmm`]) reads too; [`Tree`] owns them and dispatches to either.
//!
//! **Far field.** Expanding `αⱼ × g(r − dⱼ)` with `g(r) = r f(|r|²)` (the kernel of [`super::biot_savart`]) to
//! first order in dⱼ gives `u ≈ (1/4π)[f (A × r − B) − 2f' (P r) × r]`, r = x − c. A vector-valued strength
//! has no centre at which the first moment vanishes (unlike mass in gravity), so a monopole-only tree is
//! only first-order accurate; the dipole term brings the error to O(θ²).
//!
//! **Evaluation.** Targets are sorted by the same keys and cut into groups ([`GROUP`] for the velocity,
//! [`POTENTIAL_GROUP`] for the vector potential); each group walks the
//! tree once with its bounding box: a cell of width `s` whose centre is farther than `s/θ` from the box is
//! used as a supervorton, a nearer leaf contributes its original vortons (or, with `original_leaves = false`,
//! its supervorton anyway), and a nearer inner cell is opened. Both lists are then summed for every target of
//! the group with the vectorised loops of [`super::biot_savart`]. Groups run in parallel and each target sums
//! in a fixed order, so results do not depend on the thread count.

use super::biot_savart::{self, Sources, FOUR_PI_INV, LANES, TILE};
use super::fmm;
use super::octree::{
    cube, near_tile, octants, relative, sorted_keys_in, tile_targets, Node, LEVELS,
};
use super::params::{TreeMethod, TreeParams};
use crate::par;
use glam::DVec3;
use multiversion::multiversion;
use rayon::prelude::*;

/// Targets that share one tree walk for the velocity: they are summed [`TILE`] at a time over the group's
/// lists, and at 10⁵ vortons 32 per walk measured fastest for a given θ (16 and 64 were slower).
pub const GROUP: usize = 32;

/// Targets that share one tree walk for the vector potential. A group's box decides which cells are near, so
/// smaller groups use more supervortons (less work, larger error at a given θ) and walk more often. On 2884
/// points of a box surface 10% outside 16k vortons, groups of 8 at θ = 0.7 matched the error of groups of 32
/// at θ = 1 (5.0e-3 and 5.1e-3) in 1.0 ms instead of 1.4; groups of 4 did worse at every θ.
pub const POTENTIAL_GROUP: usize = 8;

/// A supervorton: the far-field moments of one cell.
#[derive(Clone, Copy, Debug, Default)]
struct CellMoments {
    centre: DVec3,
    a: DVec3,
    b: DVec3,
    p: [f64; 9],
    /// Second moments: `M = Σ (αⱼ × dⱼ) dⱼᵀ`, `S = Σ αⱼ |dⱼ|²`, `Q = Σ αⱼ ⊗ dⱼ ⊗ dⱼ` (symmetric pairs).
    m2: [f64; 9],
    s: DVec3,
    q: [f64; 18],
    s2: f64,
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

/// Far-field coefficients of one supervorton beside its centre and strength: B, P, M, S, Q.
const FAR: usize = 3 + 9 + 9 + 3 + 18;

/// Tree statistics of the last evaluation.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TreeInfo {
    /// Cells in the tree.
    pub nodes: usize,
    /// Leaf cells.
    pub leaves: usize,
    /// Target–supervorton interactions (with [`TreeMethod::Fmm`]: target cell–vorton cell expansions).
    pub far_interactions: u64,
    /// Target–vorton interactions (leaf layer).
    pub near_interactions: u64,
}

/// The treecode's buffers, reused across steps.
#[derive(Clone, Debug, Default)]
pub struct Tree {
    keys: Vec<(u64, u32)>,
    /// Position, strength and core radius of each vorton in key order: the build reads them in sequence
    /// instead of jumping through `keys` once per tree level.
    gathered: Vec<(DVec3, DVec3, f64)>,
    nodes: Vec<Node>,
    moments: Vec<CellMoments>,
    /// Sorted vortons as f32 sources (padded at the end).
    sorted: Sources,
    /// Each cell's supervorton as an f32 row of [`COLS`] columns.
    rows: Vec<[f32; COLS]>,
    /// The columns of `rows` that the vector potential reads ([`POTENTIAL_COLS`]).
    potential_rows: Vec<[f32; POTENTIAL_COLS]>,
    /// Each cell's multipole expansion, when the far field is by [`TreeMethod::Fmm`].
    cells: Vec<fmm::SourceCell>,
    target_keys: Vec<(u64, u32)>,
    lo: DVec3,
    width: f64,
    info: TreeInfo,
}

impl Tree {
    /// Statistics of the last build and evaluation.
    pub fn info(&self) -> TreeInfo {
        self.info
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.keys.capacity() * 16
            + self.gathered.capacity() * std::mem::size_of::<(DVec3, DVec3, f64)>()
            + self.target_keys.capacity() * 16
            + self.nodes.capacity() * std::mem::size_of::<Node>()
            + self.moments.capacity() * std::mem::size_of::<CellMoments>()
            + self.rows.capacity() * COLS * 4
            + self.potential_rows.capacity() * POTENTIAL_COLS * 4
            + self.sorted.bytes()
    }

    /// [`sorted_keys_in`] in the vortons' cube.
    fn sorted_keys(&self, keys: Vec<(u64, u32)>, points: &[DVec3]) -> Vec<(u64, u32)> {
        sorted_keys_in(self.lo, self.width, keys, points)
    }

    /// Builds the tree over vortons at `position` with strengths `strength` (m³/s) and core radii `radius` (m).
    pub fn build(
        &mut self,
        params: &TreeParams,
        position: &[DVec3],
        strength: &[DVec3],
        radius: &[f64],
    ) {
        build_tree(self, params, position, strength, radius);
    }

    /// Velocity (m/s) at every target (m), and the velocity gradient (1/s) when `jac` is given, from the
    /// tree built last.
    pub fn evaluate(
        &mut self,
        params: &TreeParams,
        targets: &[DVec3],
        u: &mut [DVec3],
        jac: Option<&mut [[f64; 9]]>,
    ) {
        if params.method == TreeMethod::Fmm {
            self.evaluate_fmm(params, targets, u, jac);
            return;
        }
        evaluate_treecode(self, params, targets, u, jac);
    }

    /// [`Tree::evaluate`] by the fast multipole method ([`fmm`]): the vortons' expansions are made on the
    /// first call after a build, the targets get a tree of their own in their bounding cube.
    fn evaluate_fmm(
        &mut self,
        params: &TreeParams,
        targets: &[DVec3],
        u: &mut [DVec3],
        jac: Option<&mut [[f64; 9]]>,
    ) {
        if self.cells.len() != self.nodes.len() {
            let centres: Vec<(DVec3, f64)> =
                self.moments.iter().map(|m| (m.centre, m.s2)).collect();
            self.cells = fmm::source_cells(&self.nodes, &centres, &self.gathered);
        }
        // At the vortons themselves (the usual case) the targets' keys are the vortons' own.
        let at_vortons = targets.len() == self.gathered.len()
            && self
                .keys
                .par_iter()
                .zip(&self.gathered)
                .all(|(&(_, j), v)| targets[j as usize] == v.0);
        let mut tk = std::mem::take(&mut self.target_keys);
        if at_vortons {
            tk.clone_from(&self.keys);
        } else {
            let (lo, width) = cube(targets);
            tk = sorted_keys_in(lo, width, tk, targets);
        }
        let source = fmm::SourceTree {
            nodes: &self.nodes,
            cells: &self.cells,
            sorted: &self.sorted,
        };
        let (results, counts) = fmm::evaluate(&source, params.theta, targets, &tk, jac.is_some());
        scatter(&results, &tk, u, jac);
        self.target_keys = tk;
        self.info.far_interactions = counts.expansions;
        self.info.near_interactions = counts.pairs;
    }

    /// The cells, their fast multipole expansions (made by the last fast multipole evaluation) and the
    /// vortons in key order, for the expansions' tests.
    #[cfg(test)]
    pub(super) fn fmm_parts(&self) -> (&[Node], &[fmm::SourceCell], &[super::octree::Vorton]) {
        (&self.nodes, &self.cells, &self.gathered)
    }

    /// Vector potential `A(x) = (1/4π) Σ αⱼ h(|x − xⱼ|²)` (m²/s) at every target (m) from the tree built
    /// last, with the kernel `h` of [`biot_savart::potential_at`] whose curl is the velocity of
    /// [`Tree::evaluate`]: Gourlay part 20's boundary values for the Poisson technique.
    ///
    /// Same walk and opening criterion as the velocity; a supervorton contributes the expansion of
    /// `Σ αⱼ h(|r − dⱼ|²)` to second order in dⱼ (r = x − c): `A h − 2h' P r + h' S + 2h'' (Q : r r)`.
    pub fn evaluate_potential(
        &mut self,
        params: &TreeParams,
        targets: &[DVec3],
        out: &mut [DVec3],
    ) {
        evaluate_potential_tree(self, params, targets, out);
    }

    /// Sorts the targets by key into `target_keys`, cuts them into groups of `group`, walks the tree once
    /// per group (in parallel) and lets `sum` turn the group's far and near lists into one result per member,
    /// in sorted order; returns them all in sorted order. Records the interaction counts in `info`.
    fn for_groups<R: Send, const C: usize>(
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

/// [`Tree::build`], compiled for the processor's vector width.
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2+fma"))]
fn build_tree(
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
    // Breadth-first: children of a node are contiguous.
    let mut i = 0;
    while i < tree.nodes.len() {
        let node = tree.nodes[i].clone();
        let level = (width / node.width).log2().round() as u32;
        if node.end - node.start > leaf_size && level < LEVELS {
            let shift = 3 * (LEVELS - 1 - level);
            let first = tree.nodes.len();
            let half = node.width * 0.5;
            for (digit, s, e) in octants(&tree.keys, (node.start, node.end), shift) {
                let off = DVec3::new(
                    (digit & 1) as f64,
                    ((digit >> 1) & 1) as f64,
                    ((digit >> 2) & 1) as f64,
                ) * half;
                tree.nodes.push(Node {
                    start: s,
                    end: e,
                    first_child: 0,
                    children: 0,
                    width: half,
                    corner: node.corner + off,
                });
            }
            tree.nodes[i].first_child = first;
            tree.nodes[i].children = tree.nodes.len() - first;
        }
        i += 1;
    }

    // Sorted sources, in sorted (depth-first key) order: a cell's vortons are `start..end` there too.
    let origin = lo + DVec3::splat(width * 0.5);
    tree.sorted.fill_sorted(origin, &tree.gathered);

    // Leaves from their vortons, in parallel; inner cells from their children's moments shifted to the
    // cell's centre (children follow their parent in `nodes`, so a reverse pass meets them first): each
    // vorton is summed once instead of once per level.
    let gathered = &tree.gathered;
    let nodes = &tree.nodes;
    let mut moments: Vec<CellMoments> = nodes
        .par_iter()
        .map(|node| {
            if node.children == 0 {
                CellMoments::of_vortons(&gathered[node.start..node.end], node.centre())
            } else {
                CellMoments::default()
            }
        })
        .collect();
    for k in (0..nodes.len()).rev() {
        let node = &nodes[k];
        if node.children > 0 {
            let children = &moments[node.first_child..node.first_child + node.children];
            moments[k] = CellMoments::of_children(children, node.centre());
        }
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
    tree.potential_rows.extend(tree.rows.iter().map(|r| {
        let (head, p, sv, q) = (&r[..B], &r[B + 3..B + 12], &r[B + 21..B + 24], &r[B + 24..]);
        let mut row = [0f32; POTENTIAL_COLS];
        for (x, &v) in row.iter_mut().zip(head.iter().chain(p).chain(sv).chain(q)) {
            *x = v;
        }
        row
    }));
    tree.info = TreeInfo {
        nodes: tree.nodes.len(),
        leaves: tree.nodes.iter().filter(|n| n.children == 0).count(),
        ..Default::default()
    };
}

/// [`Tree::evaluate`] by the treecode, compiled for the processor's vector width.
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2+fma"))]
fn evaluate_treecode(
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

/// [`Tree::evaluate_potential`], compiled for the processor's vector width.
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2+fma"))]
fn evaluate_potential_tree(
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

/// Velocity and gradient at targets in sorted order, written back to their places: `keys[k].1` is the
/// index of the k-th.
fn scatter(
    results: &[(DVec3, [f64; 9])],
    keys: &[(u64, u32)],
    u: &mut [DVec3],
    jac: Option<&mut [[f64; 9]]>,
) {
    for (v, &(_, i)) in results.iter().zip(keys) {
        u[i as usize] = v.0;
    }
    if let Some(jac) = jac {
        for (v, &(_, i)) in results.iter().zip(keys) {
            jac[i as usize] = v.1;
        }
    }
}

/// `acc += v`, element-wise.
#[inline]
fn add<const K: usize>(acc: &mut [f32; K], v: &[f32; K]) {
    for (a, b) in acc.iter_mut().zip(v) {
        *a += b;
    }
}

/// Columns of a supervorton row: centre (relative to the sorted sources' origin), summed strength, σ², then
/// the [`FAR`] moments B, P, M, S, Q.
const COLS: usize = 7 + FAR;

/// Column of σ² in a supervorton row.
const S2: usize = 6;

/// The columns of a supervorton row that the vector potential reads: centre, summed strength, σ², then the
/// moments P, S and Q (from [`PP`], [`PS`], [`PQ`]). Its far list copies 37 columns per supervorton
/// instead of 49.
const POTENTIAL_COLS: usize = 7 + 9 + 3 + 18;

/// Columns of P, S and Q in a potential row.
const PP: usize = 7;
const PS: usize = PP + 9;
const PQ: usize = PS + 3;

/// Sixteen supervortons as `C` columns of [`LANES`] (a block of a struct of arrays: one pointer and fixed
/// offsets, so the far-field loops vectorise without spilling column pointers).
type FarBlock<const C: usize = COLS> = [[f32; LANES]; C];

/// A block of zero-strength supervortons (σ² = 1), the padding of a far list's last block.
fn empty_block<const C: usize>() -> FarBlock<C> {
    let mut b = [[0.0; LANES]; C];
    b[S2] = [1.0; LANES];
    b
}

/// Per-worker buffers of the group walks: the far list in blocks of `C` columns, the near leaves and the
/// walk's stack.
#[derive(Clone, Debug, Default)]
struct GroupScratch<const C: usize> {
    far: Vec<FarBlock<C>>,
    near: Vec<(usize, usize)>,
    stack: Vec<usize>,
}

/// Column of the first moment B; P, M, S and Q follow at [`B`] + 3, + 12, + 21, + 24.
const B: usize = 7;

/// `Σₖ m[first + k] r[k]`, one row of a 3 × 3 moment times r.
#[inline(always)]
fn row_dot(m: impl Fn(usize) -> f32, first: usize, r: [f32; 3]) -> f32 {
    m(first).mul_add(r[0], m(first + 1).mul_add(r[1], m(first + 2) * r[2]))
}

/// `Σ_{k≤l} Q[first + pair(k, l)] rr[pair]`: one component of `Q : r r` from the symmetric pairs, with the
/// off-diagonal products of `rr` doubled.
#[inline(always)]
fn pair_dot(m: impl Fn(usize) -> f32, first: usize, rr: &[f32; 6]) -> f32 {
    let mut s = m(first) * rr[0];
    for p in 1..6 {
        s = m(first + p).mul_add(rr[p], s);
    }
    s
}

/// `[r₀², 2r₀r₁, 2r₀r₂, r₁², 2r₁r₂, r₂²]`, paired with the symmetric second moment.
#[inline(always)]
fn pairs(r: [f32; 3]) -> [f32; 6] {
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

/// `a × b`.
#[inline(always)]
fn cross(a: [f32; 3], b: [f32; 3]) -> [f32; 3] {
    [
        a[1].mul_add(b[2], -(a[2] * b[1])),
        a[2].mul_add(b[0], -(a[0] * b[2])),
        a[0].mul_add(b[1], -(a[1] * b[0])),
    ]
}

/// Sum of the lanes in a fixed order.
#[inline(always)]
fn hsum(v: &[f32; LANES]) -> f32 {
    v.iter().fold(0.0f32, |s, x| s + x)
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

/// RMS over targets of |u_tree − u_direct| / RMS |u_direct| (1): the treecode's accuracy measure.
pub fn rms_relative_error(tree: &[DVec3], direct: &[DVec3]) -> f64 {
    let n = direct.len();
    let err = par::sum(n, |i| (tree[i] - direct[i]).length_squared());
    let norm = par::sum(n, |i| direct[i].length_squared());
    (err / norm.max(f64::MIN_POSITIVE)).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vpm::init::random_vortons;

    /// Points of the surface of the cube `lo..hi` on a lattice of `k` points per edge: the boundary of a
    /// Poisson grid, where part 20 wants the vector potential.
    fn box_surface(lo: f64, hi: f64, k: usize) -> Vec<DVec3> {
        let at = |i: usize| lo + (hi - lo) * i as f64 / (k - 1) as f64;
        let mut out = Vec::new();
        for i in 0..k {
            for j in 0..k {
                for l in 0..k {
                    if [i, j, l].iter().any(|&c| c == 0 || c == k - 1) {
                        out.push(DVec3::new(at(i), at(j), at(l)));
                    }
                }
            }
        }
        out
    }

    fn direct_potential(p: &[DVec3], a: &[DVec3], s: &[f64], targets: &[DVec3]) -> Vec<DVec3> {
        let mut src = Sources::default();
        src.fill(DVec3::splat(0.5), p, a, s);
        let mut out = vec![DVec3::ZERO; targets.len()];
        biot_savart::potential_direct(&src, targets, &mut out);
        out
    }

    fn tree_potential(
        theta: f64,
        p: &[DVec3],
        a: &[DVec3],
        s: &[f64],
        targets: &[DVec3],
    ) -> Vec<DVec3> {
        let params = TreeParams {
            theta,
            ..Default::default()
        };
        let mut tree = Tree::default();
        tree.build(&params, p, a, s);
        let mut out = vec![DVec3::ZERO; targets.len()];
        tree.evaluate_potential(&params, targets, &mut out);
        out
    }

    /// The boundary values' accuracy on the 10⁴ vortons of the velocity check, at the surface of a box 0.1
    /// outside them: RMS relative error ≤ 1e-2 at the Poisson technique's default θ = 0.7 and ≤ 1e-3 at
    /// θ = 0.35, and it falls as θ shrinks (the expansion is second order, so about as θ³). The bounds are
    /// those of groups of [`POTENTIAL_GROUP`] targets, whose boxes accept nearer cells than the velocity's.
    #[test]
    fn potential_matches_direct_sum_and_falls_with_theta() {
        let (p, a, s) = random_vortons(10_000, 12);
        let targets = box_surface(-0.1, 1.1, 25);
        let exact = direct_potential(&p, &a, &s, &targets);
        let errors: Vec<f64> = [1.0, 0.7, 0.5, 0.35]
            .iter()
            .map(|&theta| rms_relative_error(&tree_potential(theta, &p, &a, &s, &targets), &exact))
            .collect();
        assert!(errors[1] <= 1e-2, "θ = 0.7: {errors:?}");
        assert!(errors[3] <= 1e-3, "θ = 0.35: {errors:?}");
        assert!(errors.windows(2).all(|w| w[1] < w[0]), "{errors:?}");
    }

    /// u = ∇ × A away from the vortons, with A from the direct sum and from the treecode. Six targets form
    /// one group (≤ [`POTENTIAL_GROUP`]), so the treecode's A is one smooth expansion there and differentiates like the exact one.
    /// Step 2e-3 at 0.3 from the nearest vorton: truncation ~(h/d)² ≈ 5e-5; f32 rounding of A ~1e-7 relative,
    /// amplified by d/h to ~1e-5. The tree's curl is compared with the tree's velocity (same expansion
    /// order) at 2e-3, the direct one with the direct velocity at 2e-4.
    #[test]
    fn curl_of_potential_is_velocity_away_from_vortons() {
        let (p, a, s) = random_vortons(10_000, 12);
        let x = DVec3::new(1.3, 0.6, 0.45);
        let h = 2e-3;
        let stencil: Vec<DVec3> = (0..6)
            .map(|m| x + DVec3::AXES[m / 2] * if m % 2 == 0 { h } else { -h })
            .collect();
        let curl = |v: &[DVec3]| {
            let d = |k: usize| (v[2 * k] - v[2 * k + 1]) / (2.0 * h);
            let (dx, dy, dz) = (d(0), d(1), d(2));
            DVec3::new(dy.z - dz.y, dz.x - dx.z, dx.y - dy.x)
        };
        let mut src = Sources::default();
        src.fill(DVec3::splat(0.5), &p, &a, &s);
        let mut u = [DVec3::ZERO];
        biot_savart::direct(&src, &[x], &mut u, None);
        let direct_curl = curl(&direct_potential(&p, &a, &s, &stencil));
        assert!(
            (direct_curl - u[0]).length() <= 2e-4 * u[0].length(),
            "direct: curl A {direct_curl} vs u {}",
            u[0]
        );
        let params = TreeParams::default();
        let mut tree = Tree::default();
        tree.build(&params, &p, &a, &s);
        let mut ut = [DVec3::ZERO];
        tree.evaluate(&params, &[x], &mut ut, None);
        let tree_curl = curl(&tree_potential(0.5, &p, &a, &s, &stencil));
        assert!(
            (tree_curl - ut[0]).length() <= 2e-3 * ut[0].length(),
            "tree: curl A {tree_curl} vs u {}",
            ut[0]
        );
    }

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

    /// The fast multipole method's velocity and gradient at θ = 0.6.
    fn fmm(p: &[DVec3], a: &[DVec3], s: &[f64], targets: &[DVec3]) -> (Vec<DVec3>, Vec<[f64; 9]>) {
        let params = TreeParams {
            theta: 0.6,
            method: TreeMethod::Fmm,
            ..Default::default()
        };
        let mut tree = Tree::default();
        tree.build(&params, p, a, s);
        let mut u = vec![DVec3::ZERO; targets.len()];
        let mut jac = vec![[0.0; 9]; targets.len()];
        tree.evaluate(&params, targets, &mut u, Some(&mut jac));
        (u, jac)
    }

    /// RMS over targets of the gradient's Frobenius error over the RMS gradient.
    fn gradient_error(approx: &[[f64; 9]], exact: &[[f64; 9]]) -> f64 {
        let sq = |g: &[f64; 9]| g.iter().map(|x| x * x).sum::<f64>();
        let err: f64 = approx
            .iter()
            .zip(exact)
            .map(|(a, e)| sq(&std::array::from_fn(|k| a[k] - e[k])))
            .sum();
        let norm: f64 = exact.iter().map(sq).sum();
        (err / norm).sqrt()
    }

    /// The fast multipole method's velocity and velocity gradient (the stretching term's input) against the
    /// direct sum's at every fifth of 10⁴ vortons, θ = 0.6: both within the 1e-3 (measured 3.0e-4
    /// and 3.6e-5; the gradient is dominated by the near vortons, which are summed directly).
    #[test]
    fn fmm_gradient_matches_direct_sum() {
        let (p, a, s) = random_vortons(10_000, 12);
        let targets: Vec<DVec3> = p.iter().step_by(5).copied().collect();
        let mut src = Sources::default();
        src.fill(DVec3::splat(0.5), &p, &a, &s);
        let mut u = vec![DVec3::ZERO; targets.len()];
        let mut jac = vec![[0.0; 9]; targets.len()];
        biot_savart::direct(&src, &targets, &mut u, Some(&mut jac));
        let (fu, fjac) = fmm(&p, &a, &s, &targets);
        let (eu, ej) = (rms_relative_error(&fu, &u), gradient_error(&fjac, &jac));
        assert!(
            eu <= 1e-3 && ej <= 1e-3,
            "velocity {eu:.2e}, gradient {ej:.2e}"
        );
    }

    /// Targets away from the vortons (the surface of a box 0.1 outside them, as the grid techniques' points
    /// are): the fast multipole velocity's error falls with θ and is within 1e-3 of the direct sum at
    /// θ = 0.35 (the velocity there is smaller than among the vortons, so a given θ gives a larger relative
    /// error, for the treecode too: 2.7e-3 at θ = 0.5).
    #[test]
    fn fmm_matches_direct_sum_away_from_vortons() {
        let (p, a, s) = random_vortons(10_000, 12);
        let targets = box_surface(-0.1, 1.1, 20);
        let mut src = Sources::default();
        src.fill(DVec3::splat(0.5), &p, &a, &s);
        let mut u = vec![DVec3::ZERO; targets.len()];
        biot_savart::direct(&src, &targets, &mut u, None);
        let errors: Vec<f64> = [0.7, 0.5, 0.35]
            .iter()
            .map(|&theta| {
                let params = TreeParams {
                    theta,
                    method: TreeMethod::Fmm,
                    ..Default::default()
                };
                let mut tree = Tree::default();
                tree.build(&params, &p, &a, &s);
                let mut v = vec![DVec3::ZERO; targets.len()];
                tree.evaluate(&params, &targets, &mut v, None);
                rms_relative_error(&v, &u)
            })
            .collect();
        assert!(errors.windows(2).all(|w| w[1] < w[0]), "{errors:?}");
        assert!(errors[2] <= 1e-3, "{errors:?}");
    }

    /// No vortons: zero velocity. One vorton: the pair formula at other points and nothing at itself, from
    /// the near sum (there is nothing to expand).
    #[test]
    fn fmm_of_none_and_one_vorton() {
        let targets = [DVec3::new(0.1, 0.2, 0.3), DVec3::new(-0.4, 0.0, 0.5)];
        let (u, _) = fmm(&[], &[], &[], &targets);
        assert!(u.iter().all(|v| *v == DVec3::ZERO));
        let (x, alpha, sigma) = (DVec3::new(0.1, 0.2, 0.3), DVec3::new(0.0, 0.0, 1e-3), 0.05);
        let (u, _) = fmm(&[x], &[alpha], &[sigma], &targets);
        assert_eq!(u[0], DVec3::ZERO);
        let exact = biot_savart::pair_velocity(targets[1], x, alpha, sigma);
        assert!(
            (u[1] - exact).length() <= 1e-6 * exact.length(),
            "{} vs {exact}",
            u[1]
        );
    }

    /// Bit-identical fast multipole velocities and gradients with 1, 2 and 7 threads, on enough vortons
    /// for several target subtrees ([`fmm::TASK_TARGETS`]).
    #[test]
    fn fmm_does_not_depend_on_thread_count() {
        let (p, a, s) = random_vortons(3 * fmm::TASK_TARGETS, 5);
        let run = |threads| par::with_threads(threads, || fmm(&p, &a, &s, &p));
        let one = run(1);
        for threads in [2, 7] {
            assert!(run(threads) == one, "{threads} threads");
        }
    }

    /// Bit-identical potentials with 1, 2 and 7 threads, tree and direct.
    #[test]
    fn potential_does_not_depend_on_thread_count() {
        let (p, a, s) = random_vortons(3_000, 5);
        let targets = box_surface(-0.2, 1.2, 12);
        let run = |threads| {
            par::with_threads(threads, || {
                (
                    tree_potential(0.5, &p, &a, &s, &targets),
                    direct_potential(&p, &a, &s, &targets),
                )
            })
        };
        let one = run(1);
        for threads in [2, 7] {
            assert!(run(threads) == one, "{threads} threads");
        }
    }
}
