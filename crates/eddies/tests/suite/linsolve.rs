//! Validation of the linear solvers: manufactured solutions, symmetry and definiteness, convergence on the
//! masks that the methods produce, the multigrid convergence factor, bad input and determinism.

use eddies::grid::{CellFlag, Grid};
use eddies::linsolve::{
    pcg, CellKind, DomainBoundary, IncompleteCholesky, IncompletePoisson, Jacobi, LinearOperator,
    Multigrid, MultigridParams, MultigridPreconditioner, PcgParams, PoissonOperator, PoissonSolver,
    Preconditioner, PreconditionerKind, Restriction, Smoother, SolveError, StopReason,
};
use eddies::par;
use eddies::rng::SplitMix64;
use eddies::validation::linsolve::{
    dirichlet, f2, f3, max_error, neumann, u2, u3, worst_v_cycle_factor, Problem, SolveMethod,
};

/// Error ratios of successive halvings of h; each must be ≥ 3.5 (second order gives 4; the margin covers the
/// pre-asymptotic coarse grids).
fn assert_second_order(name: &str, errors: &[f64]) {
    for w in errors.windows(2) {
        let ratio = w[0] / w[1];
        println!(
            "{name}: errors {:.3e} -> {:.3e}, ratio {ratio:.3}",
            w[0], w[1]
        );
        assert!(
            ratio >= 3.5,
            "{name}: error ratio {ratio:.3} < 3.5 ({errors:?})"
        );
    }
}

/// Solves the problems of `sizes` with each method and asserts second order.
fn check_order<const D: usize>(
    name: &str,
    sizes: [usize; 3],
    problem: impl Fn(usize) -> Problem<D>,
    methods: &[SolveMethod],
) {
    for &method in methods {
        let errors: Vec<f64> = sizes
            .iter()
            .map(|&n| max_error(&problem(n), method))
            .collect();
        assert_second_order(&format!("{name} {method:?}"), &errors);
    }
}

#[test]
fn manufactured_dirichlet_2d_converges_at_second_order() {
    let methods = [
        SolveMethod::Pcg(PreconditionerKind::Multigrid),
        SolveMethod::Pcg(PreconditionerKind::IncompletePoisson),
        SolveMethod::Multigrid,
    ];
    check_order(
        "dirichlet 2D",
        [32, 64, 128],
        |n| dirichlet(n, u2, f2),
        &methods,
    );
}

#[test]
fn manufactured_dirichlet_3d_converges_at_second_order() {
    let methods = [
        SolveMethod::Pcg(PreconditionerKind::ModifiedIncompleteCholesky),
        SolveMethod::Multigrid,
    ];
    check_order(
        "dirichlet 3D",
        [16, 32, 64],
        |n| dirichlet(n, u3, f3),
        &methods,
    );
}

#[test]
fn manufactured_neumann_2d_and_3d_converge_at_second_order() {
    let methods = [
        SolveMethod::Pcg(PreconditionerKind::Multigrid),
        SolveMethod::Pcg(PreconditionerKind::Jacobi),
        SolveMethod::Multigrid,
    ];
    check_order("neumann 2D", [32, 64, 128], neumann::<2>, &methods);
    check_order("neumann 3D", [16, 32, 64], neumann::<3>, &methods);
}

/// A messy flag pattern: random solids and air pockets, a fluid majority.
fn random_flags<const D: usize>(dims: [usize; D], seed: u64) -> Grid<CellFlag, D> {
    let mut rng = SplitMix64::new(seed);
    let mut g = Grid::new(dims, [0.0; D], 0.1, CellFlag::Fluid);
    for f in g.data.iter_mut() {
        let u = rng.next_f64();
        *f = if u < 0.15 {
            CellFlag::Solid
        } else if u < 0.25 {
            CellFlag::Air
        } else {
            CellFlag::Fluid
        };
    }
    g
}

fn random_vector<const D: usize>(op: &PoissonOperator<D>, rng: &mut SplitMix64) -> Vec<f64> {
    let mut v: Vec<f64> = (0..op.len()).map(|_| rng.next_f64() - 0.5).collect();
    op.mask(&mut v);
    v
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(a, b)| a * b).sum()
}

/// `uᵀ M v = vᵀ M u` to `tolerance` relative to `|u| |M v|`, and `uᵀ M u > 0`, for random `u, v` on the
/// unknowns.
fn assert_symmetric_positive(
    name: &str,
    n: usize,
    tolerance: f64,
    mut m: impl FnMut(&[f64], &mut [f64]),
    vectors: &[Vec<f64>],
) {
    let mut mu = vec![0.0; n];
    let mut mv = vec![0.0; n];
    for pair in vectors.windows(2) {
        let (u, v) = (&pair[0], &pair[1]);
        m(u, &mut mu);
        m(v, &mut mv);
        let (umv, vmu) = (dot(u, &mv), dot(v, &mu));
        let scale = dot(u, u).sqrt() * dot(&mv, &mv).sqrt();
        assert!(
            (umv - vmu).abs() <= tolerance * scale,
            "{name} not symmetric: {umv:e} vs {vmu:e} (scale {scale:e})"
        );
        assert!(
            dot(u, &mu) > 0.0,
            "{name} not positive: uᵀMu = {:e}",
            dot(u, &mu)
        );
    }
}

/// Round-off of sums of a few hundred f64 products: far below this, relative to the scale.
const F64_ROUNDING: f64 = 1e-12;
/// MGPCG's V-cycle runs in f32 (as McAdams et al.'s did): symmetric up to single-precision round-off, a few
/// units of 1e-7 relative.
const F32_ROUNDING: f64 = 1e-5;

fn check_spd<const D: usize>(dims: [usize; D], seed: u64) {
    let flags = random_flags(dims, seed);
    let op = PoissonOperator::from_flags(&flags, DomainBoundary::Solid).expect("valid");
    let mut rng = SplitMix64::new(seed + 1);
    let vectors: Vec<Vec<f64>> = (0..6).map(|_| random_vector(&op, &mut rng)).collect();
    let n = op.len();
    assert_symmetric_positive("operator", n, F64_ROUNDING, |x, y| op.apply(x, y), &vectors);
    let mut jacobi = Jacobi::new(&op);
    assert_symmetric_positive(
        "jacobi",
        n,
        F64_ROUNDING,
        |r, z| jacobi.apply(r, z),
        &vectors,
    );
    let mut ic = IncompleteCholesky::ic0(&op);
    assert_symmetric_positive("ic0", n, F64_ROUNDING, |r, z| ic.apply(r, z), &vectors);
    let mut mic = IncompleteCholesky::mic0(&op);
    assert_symmetric_positive("mic0", n, F64_ROUNDING, |r, z| mic.apply(r, z), &vectors);
    let mut ip = IncompletePoisson::new(&op);
    assert_symmetric_positive(
        "incomplete poisson",
        n,
        F64_ROUNDING,
        |r, z| ip.apply(r, z),
        &vectors,
    );
    for smoother in [
        Smoother::RedBlackGaussSeidel,
        Smoother::WeightedJacobi { weight: 0.8 },
    ] {
        let params = MultigridParams {
            smoother,
            ..Default::default()
        };
        let mut mg = MultigridPreconditioner::new(op.clone(), params).expect("hierarchy");
        assert_symmetric_positive(
            &format!("multigrid {smoother:?}"),
            n,
            F32_ROUNDING,
            |r, z| mg.apply(r, z),
            &vectors,
        );
    }
}

#[test]
fn operator_is_symmetric_and_every_preconditioner_spd() {
    check_spd([37, 29], 7);
    check_spd([14, 11, 13], 9);
}

/// The three masks the methods produce: a full box open to air, a dam break (fluid block in a corner, air
/// above, solid walls), and a closed container full of fluid (singular).
fn masks<const D: usize>(n: usize) -> Vec<(&'static str, Grid<CellFlag, D>, DomainBoundary)> {
    let h = 1.0 / n as f64;
    let full = Grid::new([n; D], [0.0; D], h, CellFlag::Fluid);
    let dam = Grid::from_fn([n; D], [0.0; D], h, |_, c| {
        let inside = c[0] < n / 2 && c[1] < n / 2 && (D < 3 || c[D - 1] < n / 2);
        if inside {
            CellFlag::Fluid
        } else {
            CellFlag::Air
        }
    });
    let mut with_obstacle = Grid::new([n; D], [0.0; D], h, CellFlag::Fluid);
    with_obstacle.mark_solid(|x| x.iter().map(|v| (v - 0.5) * (v - 0.5)).sum::<f64>() < 0.04);
    vec![
        ("full box, open", full, DomainBoundary::Open),
        ("dam break", dam, DomainBoundary::Solid),
        (
            "closed container with obstacle",
            with_obstacle,
            DomainBoundary::Solid,
        ),
    ]
}

fn random_rhs<const D: usize>(flags: &Grid<CellFlag, D>, seed: u64) -> Grid<f64, D> {
    let mut rng = SplitMix64::new(seed);
    let mut g = flags.same_shape(0.0);
    for v in g.data.iter_mut() {
        *v = rng.next_f64() - 0.5;
    }
    g
}

fn every_variant_converges<const D: usize>(n: usize) {
    for (name, flags, outside) in masks::<D>(n) {
        let rhs = random_rhs(&flags, 3);
        for kind in PreconditionerKind::ALL {
            let params = PcgParams {
                tolerance: 1e-8,
                max_iterations: 4000,
            };
            let mut solver =
                PoissonSolver::from_flags(&flags, outside, kind, params).expect("solver");
            let mut p = flags.same_shape(0.0);
            let info = solver
                .solve_grid(&rhs, &mut p)
                .unwrap_or_else(|e| panic!("{name}, {kind:?}: {e}"));
            assert_eq!(info.stop, StopReason::Converged);
            assert!(info.residual <= 1e-8);
            // The residual the solver reports is the true one: recompute it from the returned solution.
            let op = solver.operator();
            let (mut b, mut x, mut r) = (
                vec![0.0; op.len()],
                vec![0.0; op.len()],
                vec![0.0; op.len()],
            );
            op.layout().pad(&rhs.data, &mut b);
            op.mask(&mut b);
            op.remove_null_space(&mut b);
            op.layout().pad(&p.data, &mut x);
            let true_residual = op.residual(&b, &x, &mut r).sqrt() / dot(&b, &b).sqrt();
            // Recurrence and true residual drift apart by round-off only (κ ε ≪ 1e-9 here).
            assert!(
                true_residual <= 2e-8,
                "{name}, {kind:?}: true residual {true_residual:e}"
            );
            println!(
                "{D}D {n}: {name:32} {:20} {:4} iterations",
                kind.name(),
                info.iterations
            );
        }
    }
}

#[test]
fn every_pcg_variant_reaches_1e_8_on_every_mask_2d() {
    every_variant_converges::<2>(64);
}

#[test]
fn every_pcg_variant_reaches_1e_8_on_every_mask_3d() {
    every_variant_converges::<3>(24);
}

/// The V-cycle of the standalone solver with three red-black Gauss–Seidel sweeps before and after and nearest
/// restriction, on the model problem (−∇²u = random, 128³ cells, zero Dirichlet values around the box). Each
/// cycle must cut the residual to 0.15 or less; the factors creep up towards their asymptotic value (0.11 to
/// 0.12 here), so every cycle of a 1e-10 solve is checked, not an average.
#[test]
fn multigrid_v_cycle_reduces_the_residual_by_0_15_per_cycle_at_128_cubed() {
    let worst = worst_v_cycle_factor(128);
    println!("128³ V(3,3): worst cycle factor {worst:.3}");
    assert!(
        worst <= 0.15,
        "a V-cycle reduced the residual by only {worst:.3}"
    );
}

/// A vector problem is solved to one accuracy for the whole vector: a component a million times smaller than
/// the others already meets 1e-3 of the vector's reference residual from a zero guess, so it takes no cycle,
/// while the large components iterate down to the tolerance.
#[test]
fn multigrid_vector_tolerance_is_relative_to_the_whole_vector() {
    let p = dirichlet::<3>(32, u3, f3);
    let params = MultigridParams {
        tolerance: 1e-3,
        ..Default::default()
    };
    let mut mg = Multigrid::new(p.op.clone(), params).expect("hierarchy");
    let scales = [1.0, 1e-6, -1.0];
    let b: Vec<Vec<f64>> = scales
        .iter()
        .map(|s| p.b.iter().map(|v| s * v).collect())
        .collect();
    let mut x: Vec<Vec<f64>> = scales
        .iter()
        .map(|s| p.boundary.iter().map(|v| s * v).collect())
        .collect();
    let [x0, x1, x2] = &mut x[..] else {
        unreachable!()
    };
    let infos = mg
        .solve_vector([&b[0], &b[1], &b[2]], [x0, x1, x2])
        .expect("converges");
    assert_eq!(infos[1].iterations, 0, "the tiny component needs no cycle");
    for k in [0, 2] {
        assert!(infos[k].iterations > 0);
        assert!(
            infos[k].residual <= 1e-3,
            "component {k}: {}",
            infos[k].residual
        );
    }
    // Alone, the tiny component is solved to 1e-3 of its own size, which takes cycles.
    let mut alone = p.boundary.iter().map(|v| 1e-6 * v).collect::<Vec<_>>();
    let info = mg.solve(&b[1], &mut alone).expect("converges");
    assert!(info.iterations > 0);
}

#[test]
fn multigrid_solves_vector_problems_and_full_multigrid_keeps_boundary_values() {
    let p = dirichlet::<3>(32, u3, f3);
    for restriction in [Restriction::FullWeighting, Restriction::Nearest] {
        let params = MultigridParams {
            restriction,
            full_multigrid: true,
            tolerance: 1e-9,
            ..Default::default()
        };
        let mut mg = Multigrid::new(p.op.clone(), params).expect("hierarchy");
        // Three components: u, 2u and −u (the operator is linear).
        let b: Vec<Vec<f64>> = [1.0, 2.0, -1.0]
            .iter()
            .map(|s| p.b.iter().map(|v| s * v).collect())
            .collect();
        let mut x: Vec<Vec<f64>> = [1.0, 2.0, -1.0]
            .iter()
            .map(|s| p.boundary.iter().map(|v| s * v).collect())
            .collect();
        let [x0, x1, x2] = &mut x[..] else {
            unreachable!()
        };
        let infos = mg
            .solve_vector([&b[0], &b[1], &b[2]], [x0, x1, x2])
            .expect("converges");
        for (k, info) in infos.iter().enumerate() {
            assert!(info.residual <= 1e-9, "{restriction:?} component {k}");
            println!(
                "{restriction:?}: component {k}: {} cycles (full multigrid start)",
                info.iterations
            );
        }
        for (k, s) in [1.0, 2.0, -1.0].iter().enumerate() {
            for ((&kind, &v), &g) in p.op.kinds().iter().zip(&x[k]).zip(&p.boundary) {
                if kind == CellKind::Dirichlet {
                    assert_eq!(v, s * g, "a boundary value changed");
                }
            }
        }
    }
    // Without preservation the up-sampler overwrites boundary values, and the solve converges to another
    // problem (part 20's warning): the error against the exact solution is far larger.
    let preserved = max_error(&p, SolveMethod::Multigrid);
    let params = MultigridParams {
        full_multigrid: true,
        preserve_boundary: false,
        tolerance: 1e-9,
        ..Default::default()
    };
    let mut mg = Multigrid::new(p.op.clone(), params).expect("hierarchy");
    let mut x = p.boundary.clone();
    mg.solve(&p.b, &mut x).expect("converges");
    let damaged =
        p.op.kinds()
            .iter()
            .zip(x.iter().zip(&p.exact))
            .filter(|(&k, _)| k == CellKind::Unknown)
            .map(|(_, (a, e))| (a - e).abs())
            .fold(0.0, f64::max);
    println!("max error with boundary preserved {preserved:.3e}, overwritten {damaged:.3e}");
    assert!(damaged > 10.0 * preserved);
}

#[test]
fn bad_input_gives_an_error_not_a_panic() {
    let flags = Grid::new([8, 8], [0.0; 2], 0.1, CellFlag::Fluid);
    let mut solver = PoissonSolver::from_flags(
        &flags,
        DomainBoundary::Open,
        PreconditionerKind::Multigrid,
        PcgParams::default(),
    )
    .expect("valid");
    // Mismatched sizes.
    let small = Grid::new([4, 8], [0.0; 2], 0.1, 0.0);
    let mut p = flags.same_shape(0.0);
    let e = solver.solve_grid(&small, &mut p).unwrap_err();
    assert!(
        matches!(&e, SolveError::BadInput(m) if m.contains("[4, 8]")),
        "{e}"
    );
    // NaN right-hand side.
    let mut nan = flags.same_shape(1.0);
    nan.data[5] = f64::NAN;
    let e = solver.solve_grid(&nan, &mut p).unwrap_err();
    assert!(
        matches!(&e, SolveError::BadInput(m) if m.contains("non-finite")),
        "{e}"
    );
    assert!(e.to_string().contains("right-hand side"), "{e}");
    // NaN initial guess, with a right-hand side and without one (checked where the norms find it).
    for rhs in [1.0, 0.0] {
        let mut guess = flags.same_shape(0.0);
        guess.data[9] = f64::NAN;
        let e = solver
            .solve_grid(&flags.same_shape(rhs), &mut guess)
            .unwrap_err();
        assert!(
            matches!(&e, SolveError::BadInput(m) if m.contains("initial guess") && m.contains("non-finite")),
            "{e}"
        );
    }
    // No fluid cell.
    let air = Grid::new([8, 8], [0.0; 2], 0.1, CellFlag::Air);
    let e = PoissonOperator::from_flags(&air, DomainBoundary::Solid).unwrap_err();
    assert!(
        matches!(&e, SolveError::BadInput(m) if m.contains("no unknowns")),
        "{e}"
    );
    // Raw vectors of the wrong length.
    let op = PoissonOperator::from_flags(&flags, DomainBoundary::Open).expect("valid");
    let mut x = vec![0.0; op.len()];
    let e = pcg(
        &op,
        &mut Jacobi::new(&op),
        &[1.0; 3],
        &mut x,
        &PcgParams::default(),
        &mut Vec::new(),
    )
    .unwrap_err();
    assert!(matches!(e, SolveError::BadInput(_)), "{e}");
    // Unusable parameters.
    let b = vec![1.0; op.len()];
    let e = pcg(
        &op,
        &mut Jacobi::new(&op),
        &b,
        &mut x,
        &PcgParams {
            tolerance: 0.0,
            max_iterations: 10,
        },
        &mut Vec::new(),
    )
    .unwrap_err();
    assert!(matches!(e, SolveError::BadInput(_)), "{e}");
    let e = Multigrid::new(
        op.clone(),
        MultigridParams {
            pre_sweeps: 0,
            post_sweeps: 0,
            ..Default::default()
        },
    )
    .unwrap_err();
    assert!(matches!(e, SolveError::BadInput(_)), "{e}");
    // A cap on the iterations gives NoConvergence with the residual reached, not a hang.
    let e = pcg(
        &op,
        &mut Jacobi::new(&op),
        &b,
        &mut x,
        &PcgParams {
            tolerance: 1e-12,
            max_iterations: 3,
        },
        &mut Vec::new(),
    )
    .unwrap_err();
    assert!(
        matches!(e, SolveError::NoConvergence { iterations: 3, .. }),
        "{e}"
    );
    // A zero right-hand side is solved at once by zero.
    let mut x = vec![1.0; op.len()];
    let info = pcg(
        &op,
        &mut Jacobi::new(&op),
        &vec![0.0; op.len()],
        &mut x,
        &PcgParams::default(),
        &mut Vec::new(),
    )
    .expect("zero is a solution");
    assert_eq!(info.stop, StopReason::ZeroRhs);
    assert!(x.iter().all(|&v| v == 0.0));
}

#[test]
fn solutions_are_bit_identical_for_1_2_and_7_threads() {
    let (name, flags, outside) = masks::<3>(40).swap_remove(1);
    let rhs = random_rhs(&flags, 5);
    for kind in PreconditionerKind::ALL {
        let run = |threads| {
            par::with_threads(threads, || {
                let mut solver =
                    PoissonSolver::from_flags(&flags, outside, kind, PcgParams::default())
                        .expect("ok");
                let mut p = flags.same_shape(0.0);
                solver.solve_grid(&rhs, &mut p).expect("converges");
                p.data.iter().map(|v| v.to_bits()).collect::<Vec<u64>>()
            })
        };
        let one = run(1);
        assert_eq!(one, run(2), "{name}, {kind:?}: 2 threads differ");
        assert_eq!(one, run(7), "{name}, {kind:?}: 7 threads differ");
    }
}

/// A simulation re-flags its solver every step (`set_flags`, reusing memory): the solution must be the same,
/// bit for bit, as a freshly built solver's, including after a step whose mask differs.
#[test]
fn a_reused_solver_matches_a_fresh_one() {
    let masks = masks::<3>(20);
    for kind in PreconditionerKind::ALL {
        let (_, first, outside) = &masks[0];
        let mut reused =
            PoissonSolver::from_flags(first, *outside, kind, PcgParams::default()).expect("solver");
        for (name, flags, outside) in masks.iter().chain(masks.iter().rev()) {
            reused.set_flags(flags, *outside).expect("valid flags");
            let mut fresh = PoissonSolver::from_flags(flags, *outside, kind, PcgParams::default())
                .expect("solver");
            let rhs = random_rhs(flags, 17);
            let (mut p1, mut p2) = (flags.same_shape(0.0), flags.same_shape(0.0));
            reused.solve_grid(&rhs, &mut p1).expect("converges");
            fresh.solve_grid(&rhs, &mut p2).expect("converges");
            assert!(
                p1.data
                    .iter()
                    .zip(&p2.data)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "{name}, {kind:?}: the reused solver differs"
            );
        }
    }
}
