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

mod build;
mod evaluate;
mod potential;
mod walk;

use super::biot_savart::Sources;
use super::fmm;
use super::octree::{cube, sorted_keys_in, Node};
use super::params::{TreeMethod, TreeParams};
use crate::par;
use build::{build_tree, CellMoments};
use evaluate::evaluate_treecode;
use glam::DVec3;
use potential::evaluate_potential_tree;
use rayon::prelude::*;

/// Targets that share one tree walk for the velocity: they are summed [`TILE`](super::biot_savart::TILE) at
/// a time over the group's lists, and at 10⁵ vortons 32 per walk measured fastest for a given θ (16 and 64
/// were slower).
pub const GROUP: usize = 32;

/// Targets that share one tree walk for the vector potential. A group's box decides which cells are near, so
/// smaller groups use more supervortons (less work, larger error at a given θ) and walk more often. On 2884
/// points of a box surface 10% outside 16k vortons, groups of 8 at θ = 0.7 matched the error of groups of 32
/// at θ = 1 (5.0e-3 and 5.1e-3) in 1.0 ms instead of 1.4; groups of 4 did worse at every θ.
pub const POTENTIAL_GROUP: usize = 8;

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
    fn fmm_parts(&self) -> (&[Node], &[fmm::SourceCell], &[super::octree::Vorton]) {
        (&self.nodes, &self.cells, &self.gathered)
    }

    /// Vector potential `A(x) = (1/4π) Σ αⱼ h(|x − xⱼ|²)` (m²/s) at every target (m) from the tree built
    /// last, with the kernel `h` of [`biot_savart::potential_at`](super::biot_savart::potential_at) whose
    /// curl is the velocity of [`Tree::evaluate`]: Gourlay part 20's boundary values for the Poisson
    /// technique.
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

/// Column of the first moment B; P, M, S and Q follow at [`B`] + 3, + 12, + 21, + 24.
const B: usize = 7;

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
    use crate::vpm::biot_savart;
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

    /// The inner cells' multipoles, shifted up from their children, equal the sums over their vortons
    /// about the cell's centre (the shift is exact; 1e-9 of `Σ|α| wⁿ` allows for f64 rounding), and every
    /// vorton lies within the cell's radius.
    #[test]
    fn shifted_multipoles_equal_direct_sums() {
        use crate::vpm::fmm::{monomials, order_of, NM};
        let (p, a, s) = crate::vpm::init::random_vortons(5_000, 3);
        let params = TreeParams {
            leaf_size: 8,
            method: TreeMethod::Fmm,
            ..Default::default()
        };
        let mut tree = Tree::default();
        tree.build(&params, &p, &a, &s);
        let mut u = vec![DVec3::ZERO; 4];
        tree.evaluate(&params, &p[..4], &mut u, None);
        let (nodes, cells, vortons) = tree.fmm_parts();
        let mut inner = 0;
        for (node, cell) in nodes.iter().zip(cells) {
            let own = &vortons[node.start..node.end];
            for &(x, _, _) in own {
                assert!((x - cell.centre).length() <= cell.radius * (1.0 + 1e-12));
            }
            if node.children == 0 {
                continue;
            }
            inner += 1;
            let mut direct = [[0.0; 4]; NM];
            for &(x, a, _) in own {
                let w = monomials(cell.centre - x);
                for (m, &w) in direct.iter_mut().zip(&w) {
                    for q in 0..3 {
                        m[q] += w * a[q];
                    }
                }
            }
            let weight: f64 = own.iter().map(|v| v.1.length()).sum();
            for k in 0..NM {
                let scale = weight * node.width.powi(order_of(k) as i32);
                for q in 0..3 {
                    let (got, want) = (cell.multipole[k][q], direct[k][q]);
                    assert!(
                        (got - want).abs() <= 1e-9 * scale,
                        "k = {k}: {got} against {want}"
                    );
                }
            }
        }
        assert!(inner > 50, "{inner} inner cells");
    }
}
