//! Validation of the grid foundations: sampling accuracy, discrete vector-calculus identities, cell flags.

use eddies::grid::{
    curl2, curl3, gradient, gradient_to_faces, laplacian, BoundaryCondition, CellFlag, FlagGrid,
    Grid, MacGrid,
};
use eddies::par;
use eddies::rng::SplitMix64;
use eddies::Shape;
use glam::DVec3;
use std::f64::consts::PI;

/// Deterministic test points (SplitMix64), the same on every run.
struct Rng(SplitMix64);

impl Rng {
    fn new(seed: u64) -> Self {
        Self(SplitMix64::new(seed))
    }
    fn range(&mut self, lo: f64, hi: f64) -> f64 {
        self.0.range(lo, hi)
    }
    fn point<const D: usize>(&mut self, lo: [f64; D], hi: [f64; D]) -> [f64; D] {
        std::array::from_fn(|k| self.range(lo[k], hi[k]))
    }
}

fn dims_of<const D: usize>(all: [usize; 3]) -> [usize; D] {
    std::array::from_fn(|k| all[k])
}

/// A field linear in each coordinate (with a bilinear cross term, which multilinear interpolation also
/// reproduces).
fn multilinear<const D: usize>(x: [f64; D], seed: f64) -> f64 {
    let mut f = 0.7 + seed;
    for (k, xk) in x.iter().enumerate() {
        f += (1.3 - 0.4 * k as f64 + seed) * xk;
    }
    f + 0.25 * x[0] * x[1]
}

// ---------------------------------------------------------------------------------------------------------
// Sampling
// ---------------------------------------------------------------------------------------------------------

fn check_linear_reproduction<const D: usize>() {
    let dims = dims_of::<D>([7, 5, 6]);
    let origin = dims_of_f::<D>([-0.3, 1.2, 0.7]);
    let h = 0.13;
    let g = Grid::from_fn(dims, origin, h, |_, c| {
        multilinear::<D>(
            std::array::from_fn(|k| origin[k] + (c[k] as f64 + 0.5) * h),
            0.0,
        )
    });
    let g32 = g.map(|&v| v as f32);
    let mac = MacGrid::from_fn(dims, origin, h, |k, x| multilinear(x, 0.1 * k as f64));

    // Only inside the hull of the sample points is the interpolant linear; outside it is clamped. For the
    // MAC components the hull of every component contains [origin + h/2, upper − h/2].
    let lo: [f64; D] = std::array::from_fn(|k| origin[k] + 0.5 * h);
    let hi: [f64; D] = std::array::from_fn(|k| origin[k] + (dims[k] as f64 - 0.5) * h);
    let mut rng = Rng::new(42 + D as u64);
    for _ in 0..2000 {
        let p = rng.point(lo, hi);
        // |f| ≤ ~5 here and the interpolant is a convex combination of 2ᴰ values: rounding is a few ulps of
        // 5, i.e. ~1e-15; 1e-12 leaves room without hiding any O(h) error (~1e-2).
        let exact = multilinear(p, 0.0);
        assert!((g.sample(p) - exact).abs() < 1e-12, "cell f64 at {p:?}");
        // f32 storage: relative rounding 6e-8 per value, a handful of operations.
        assert!(
            ((g32.sample(p) as f64) - exact).abs() < 1e-5 * exact.abs().max(1.0),
            "cell f32 at {p:?}"
        );
        for (k, vk) in mac.sample(p).into_iter().enumerate() {
            let exact = multilinear(p, 0.1 * k as f64);
            assert!((vk - exact).abs() < 1e-12, "mac component {k} at {p:?}");
            assert_eq!(vk, mac.sample_component(k, p));
        }
    }
    // Outside the hull the value is clamped: a point far away takes the corner value.
    let far: [f64; D] = std::array::from_fn(|k| origin[k] - 10.0 - k as f64);
    assert_eq!(g.sample(far), g.data[0]);
}

fn dims_of_f<const D: usize>(all: [f64; 3]) -> [f64; D] {
    std::array::from_fn(|k| all[k])
}

#[test]
fn sampling_reproduces_linear_fields_2d() {
    check_linear_reproduction::<2>();
}

#[test]
fn sampling_reproduces_linear_fields_3d() {
    check_linear_reproduction::<3>();
}

fn smooth<const D: usize>(x: [f64; D]) -> f64 {
    let mut f = (2.0 * x[0] + 0.3).sin() * (3.0 * x[1] - 0.2).cos();
    if D > 2 {
        f *= (1.7 * x[2] + 0.5).cos();
    }
    f
}

/// Max sampling error of the cell-centred and the MAC (component 0) interpolant of [`smooth`] on [0, 1]ᴰ with
/// `n` cells per axis, over fixed points in [0.25, 0.75]ᴰ (inside the hull of the sample points for n ≥ 2).
fn sampling_error<const D: usize>(n: usize) -> (f64, f64) {
    let h = 1.0 / n as f64;
    let g = Grid::from_fn([n; D], [0.0; D], h, |_, c| {
        smooth::<D>(std::array::from_fn(|k| (c[k] as f64 + 0.5) * h))
    });
    let mac = MacGrid::from_fn([n; D], [0.0; D], h, |_, x| smooth(x));
    let mut rng = Rng::new(7);
    let (mut e_cell, mut e_mac) = (0.0f64, 0.0f64);
    for _ in 0..4000 {
        let p = rng.point([0.25; D], [0.75; D]);
        e_cell = e_cell.max((g.sample(p) - smooth(p)).abs());
        e_mac = e_mac.max((mac.sample_component(0, p) - smooth(p)).abs());
    }
    (e_cell, e_mac)
}

fn check_second_order<const D: usize>(sizes: &[usize]) {
    let errors: Vec<(f64, f64)> = sizes.iter().map(|&n| sampling_error::<D>(n)).collect();
    for (w, n) in errors.windows(2).zip(sizes) {
        let (cell, mac) = (w[0].0 / w[1].0, w[0].1 / w[1].1);
        // Multilinear interpolation has error ≤ h²/8 · Σ|∂²f/∂x_k²|, and the maximum over thousands of points
        // is attained close to that bound, so halving h divides it by ≈ 4; 3.5 allows for where the worst
        // point falls within its cell.
        assert!(
            cell >= 3.5,
            "{D}D cell-centred: error ratio {cell} from n = {n} ({errors:?})"
        );
        assert!(
            mac >= 3.5,
            "{D}D MAC: error ratio {mac} from n = {n} ({errors:?})"
        );
    }
}

#[test]
fn sampling_converges_at_second_order_2d() {
    check_second_order::<2>(&[8, 16, 32, 64]);
}

#[test]
fn sampling_converges_at_second_order_3d() {
    check_second_order::<3>(&[8, 16, 32]);
}

// ---------------------------------------------------------------------------------------------------------
// Discrete identities
// ---------------------------------------------------------------------------------------------------------

fn check_div_grad_is_laplacian<const D: usize>(dims: [usize; D]) {
    let h = 0.1;
    let mut rng = Rng::new(3);
    let noise: Vec<f64> = (0..dims.iter().product())
        .map(|_| rng.range(-1.0, 1.0))
        .collect();
    let p = Grid::from_data(dims, [0.5; D], h, noise);
    for bc in [
        BoundaryCondition::DirichletZero,
        BoundaryCondition::NeumannZero,
    ] {
        let div_grad = gradient_to_faces(&p, bc).divergence();
        let lap = laplacian(&p, bc);
        // Both are Σ ((p₊ − p) − (p − p₋)) / h² with |p| ≤ 1, evaluated in a different order: the difference
        // is rounding of terms of size ≤ 4D/h², so 16·ε·4D/h² (≈ 1e-11) bounds it; any stencil mismatch (a
        // wrong ghost, a shifted face) would be O(1/h²) = 100.
        let tol = 16.0 * f64::EPSILON * 4.0 * D as f64 / (h * h);
        for (i, (a, b)) in div_grad.data.iter().zip(&lap.data).enumerate() {
            assert!(
                (a - b).abs() <= tol,
                "{bc:?} cell {:?}: {a} vs {b}",
                p.coords(i)
            );
        }
    }
}

#[test]
fn divergence_of_face_gradient_is_laplacian_2d() {
    check_div_grad_is_laplacian([17, 13]);
}

#[test]
fn divergence_of_face_gradient_is_laplacian_3d() {
    check_div_grad_is_laplacian([9, 8, 7]);
}

fn interior<const D: usize>(g: &Grid<impl Sized, D>) -> impl Iterator<Item = usize> + '_ {
    (0..g.len()).filter(|&i| !g.is_boundary(g.coords(i)))
}

#[test]
fn curl_of_gradient_vanishes_3d() {
    let h = 0.05;
    let o = [-0.4, 0.1, 0.3];
    let phi = Grid::from_fn([20, 18, 16], o, h, |_, c| {
        let x: [f64; 3] = std::array::from_fn(|k| o[k] + (c[k] as f64 + 0.5) * h);
        (2.0 * x[0]).sin() * (1.5 * x[1]).cos() * (0.5 * x[2]).exp() + x[0] * x[1] * x[2]
    });
    let w = curl3(&gradient(&phi));
    // Central differences along different axes commute exactly (D_y D_x φ = D_x D_y φ) wherever both are
    // central, which holds in every non-boundary cell (the gradient there reads only central values across
    // the other axes). What remains is rounding: terms of size |φ|/h² ≈ 2/0.0025 with a few ulps each, so
    // 1e-10 bounds it while an O(h²) truncation residue would be ≳ 1e-3.
    let tol = 64.0 * f64::EPSILON * phi.max_abs() / (h * h);
    assert!(tol < 1e-10);
    for i in interior(&w) {
        for k in 0..3 {
            assert!(
                w.data[i][k].abs() <= tol,
                "cell {:?}: {:?}",
                w.coords(i),
                w.data[i]
            );
        }
    }
    // Teeth: a rigid rotation (−y, x, 0)·Ω has curl (0, 0, 2Ω) exactly, boundary cells included (the
    // one-sided differences are exact for linear fields).
    let rot = Grid::from_fn([6, 5, 4], [0.0; 3], 0.2, |_, c| {
        [
            -(c[1] as f64 + 0.5) * 0.2 * 3.0,
            (c[0] as f64 + 0.5) * 0.2 * 3.0,
            0.0,
        ]
    });
    for v in &curl3(&rot).data {
        assert!(
            v[0].abs() < 1e-12 && v[1].abs() < 1e-12 && (v[2] - 6.0).abs() < 1e-12,
            "{v:?}"
        );
    }
}

#[test]
fn curl_of_gradient_vanishes_2d() {
    let h = 0.02;
    let phi = Grid::from_fn([60, 45], [0.0; 2], h, |_, c| {
        let (x, y) = ((c[0] as f64 + 0.5) * h, (c[1] as f64 + 0.5) * h);
        (3.0 * x).sin() * (2.0 * y).cosh() + x * x * y
    });
    let w = curl2(&gradient(&phi));
    // Same argument as in 3D: exact commutation of central differences, rounding ~ ε|φ|/h².
    let tol = 64.0 * f64::EPSILON * phi.max_abs() / (h * h);
    assert!(tol < 1e-9);
    for i in interior(&w) {
        assert!(
            w.data[i].abs() <= tol,
            "cell {:?}: {}",
            w.coords(i),
            w.data[i]
        );
    }
    // Teeth: the rotation (−y, x)·Ω has scalar curl 2Ω everywhere.
    let rot = Grid::from_fn([7, 5], [1.0, -1.0], 0.3, |_, c| {
        let x = [
            1.0 + (c[0] as f64 + 0.5) * 0.3,
            -1.0 + (c[1] as f64 + 0.5) * 0.3,
        ];
        [-0.5 * x[1], 0.5 * x[0]]
    });
    assert!(curl2(&rot).data.iter().all(|w| (w - 1.0).abs() < 1e-12));
}

fn check_laplacian_of_quadratic<const D: usize>(dims: [usize; D], expected: f64) {
    let h = 0.05;
    let origin = [-0.7; D];
    let f = Grid::from_fn(dims, origin, h, |_, c| {
        let x: [f64; 3] = std::array::from_fn(|k| {
            if k < D {
                origin[k] + (c[k] as f64 + 0.5) * h
            } else {
                0.0
            }
        });
        1.0 + 0.5 * x[0] - x[1] + 2.0 * x[0] * x[0] - 3.0 * x[1] * x[1]
            + 1.5 * x[2] * x[2]
            + x[0] * x[1]
            + x[1] * x[2]
    });
    for bc in [
        BoundaryCondition::DirichletZero,
        BoundaryCondition::NeumannZero,
    ] {
        let lap = laplacian(&f, bc);
        // The second difference of a quadratic has no truncation error (the fourth derivative vanishes) and
        // cross terms cancel exactly; rounding of terms of size |f|/h² ≈ 2/0.0025 stays below 1e-10.
        for i in interior(&lap) {
            assert!(
                (lap.data[i] - expected).abs() < 1e-10,
                "{bc:?} {:?}: {}",
                lap.coords(i),
                lap.data[i]
            );
        }
    }
    // f32 storage: the same stencil in single precision, relative rounding ~1e-7 of |f|/h².
    let lap32 = laplacian(&f.map(|&v| v as f32), BoundaryCondition::NeumannZero);
    for i in interior(&lap32) {
        assert!(
            (lap32.data[i] as f64 - expected).abs() < 2e-3,
            "{}",
            lap32.data[i]
        );
    }
}

#[test]
fn laplacian_of_quadratic_is_exact_2d() {
    // ∇²(2x² − 3y²) = 4 − 6.
    check_laplacian_of_quadratic([24, 20], -2.0);
}

#[test]
fn laplacian_of_quadratic_is_exact_3d() {
    // ∇²(2x² − 3y² + 1.5z²) = 4 − 6 + 3.
    check_laplacian_of_quadratic([14, 12, 10], 1.0);
}

#[test]
fn stencils_are_bit_identical_across_thread_counts() {
    let mut rng = Rng::new(11);
    let data: Vec<f64> = (0..40 * 33 * 29).map(|_| rng.range(-1.0, 1.0)).collect();
    let f = Grid::from_data([40, 33, 29], [0.0; 3], 0.1, data);
    let run = || {
        let lap = laplacian(&f, BoundaryCondition::DirichletZero);
        let div = gradient_to_faces(&f, BoundaryCondition::NeumannZero).divergence();
        let w = curl3(&gradient(&f));
        (lap, div, w, f.sum())
    };
    let one = par::with_threads(1, run);
    for threads in [2, 7] {
        let many = par::with_threads(threads, run);
        let bits = |g: &Grid<f64, 3>| g.data.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&one.0), bits(&many.0));
        assert_eq!(bits(&one.1), bits(&many.1));
        assert!(one
            .2
            .data
            .iter()
            .zip(&many.2.data)
            .all(|(a, b)| a.map(f64::to_bits) == b.map(f64::to_bits)));
        assert_eq!(one.3.to_bits(), many.3.to_bits());
    }
}

// ---------------------------------------------------------------------------------------------------------
// Cell flags
// ---------------------------------------------------------------------------------------------------------

#[test]
fn sphere_flags_match_analytic_volume() {
    let n = 64;
    let h = 1.0 / n as f64;
    let r = 0.3;
    // Off the lattice symmetry, so that no shell of cell centres sits exactly on the surface.
    let center = DVec3::new(0.503, 0.491, 0.512);
    let mut flags = FlagGrid::<3>::new([n; 3], [0.0; 3], h, CellFlag::Fluid);
    flags.mark_shape(CellFlag::Solid, &Shape::Sphere { center, radius: r });
    let volume = flags.count(CellFlag::Solid) as f64 * h.powi(3);
    let exact = 4.0 / 3.0 * PI * r.powi(3);
    // Rigorous bound: a cell can be miscounted only if the surface crosses it, i.e. its centre is within
    // √3h/2 of the sphere; the volume of that shell bounds the error (≈ 27 % here, so it is only a guard).
    let a = 3f64.sqrt() * 0.5 * h;
    let shell = 4.0 / 3.0 * PI * ((r + a).powi(3) - (r - a).powi(3));
    assert!((volume - exact).abs() < shell);
    // Tight bound: over- and under-counted cells along the surface cancel; the lattice-point discrepancy of a
    // ball of radius R cells grows like R^(4/3) (Heath-Brown), a relative error ~R^(-5/3) ≈ 0.7 % for
    // R = 19.2. 0.5 % holds for this configuration with margin.
    let rel = (volume - exact).abs() / exact;
    assert!(rel < 5e-3, "sphere volume {volume} vs {exact} (rel {rel})");

    // 2D: a cylinder along z cut by the plane z = 0 is a disc; the same argument in 2D (discrepancy
    // ~R^(2/3), relative ~R^(-4/3) ≈ 0.3 % for R = 32 cells).
    let n2 = 128;
    let h2 = 1.0 / n2 as f64;
    let r2 = 0.25;
    let mut disc = FlagGrid::<2>::new([n2; 2], [0.0; 2], h2, CellFlag::Air);
    disc.mark_shape(
        CellFlag::Fluid,
        &Shape::Cylinder {
            center: DVec3::new(0.49, 0.507, 0.0),
            axis: DVec3::Z,
            radius: r2,
            height: 1.0,
        },
    );
    let area = disc.count(CellFlag::Fluid) as f64 * h2 * h2;
    let rel2 = (area - PI * r2 * r2).abs() / (PI * r2 * r2);
    assert!(rel2 < 3e-3, "disc area {area} (rel {rel2})");
}

#[test]
fn flags_from_closure_box_and_walls() {
    // A box whose faces lie on cell faces contains exactly the cells inside it: 10 × 6 × 4 cells.
    let mut flags = FlagGrid::<3>::new([20, 16, 12], [-1.0, -1.0, -1.0], 0.125, CellFlag::Air);
    let b = Shape::Box {
        min: DVec3::new(-0.5, 0.0, -1.0),
        max: DVec3::new(0.75, 0.75, -0.5),
    };
    flags.mark_solid(|x| b.sdf(DVec3::from_array(x)) <= 0.0);
    assert_eq!(flags.count(CellFlag::Solid), 10 * 6 * 4);
    // Walls: every cell of the outer layer; the interior of 18 × 14 × 10 untouched, and the box cells that
    // touch the wall at z = −1 were solid already (10 × 6 of them).
    flags.mark_boundary_solid(1);
    let walls = 20 * 16 * 12 - 18 * 14 * 10;
    assert_eq!(flags.count(CellFlag::Solid), walls + 10 * 6 * 4 - 10 * 6);
    assert_eq!(
        flags.count(CellFlag::Air),
        20 * 16 * 12 - flags.count(CellFlag::Solid)
    );
}
