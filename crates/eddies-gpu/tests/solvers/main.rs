//! The pressure solve on the GPU (`eddies_gpu::pressure::GpuPoisson`) against the CPU's
//! (`eddies::linsolve::PoissonSolver`) on the same problems: the same stopping rule, residuals that are true
//! residuals, solutions that agree, iteration counts that match, the same bits run to run.
//!
//! `flip` runs PIC/FLIP/APIC with its solves on the same device, `transfer` checks its particle-to-grid
//! transfer on the GPU against the CPU's; `vpm` checks the vortex method's direct
//! sums and its Poisson technique on the GPU. One binary for the GPU's solvers, one link less for the suite.
//!
//! Without an adapter the tests print a notice and pass, unless `EDDIES_REQUIRE_GPU=1` (CI, on lavapipe).

mod flip;
mod transfer;
mod vpm;

use std::sync::{Arc, Mutex, OnceLock};

use eddies::grid::{CellFlag, Grid};
use eddies::linsolve::{
    DomainBoundary, Info, LinearOperator, PcgParams, PoissonDevice, PoissonSolver,
    PreconditionerKind, SolveError, StopReason,
};
use eddies::rng::SplitMix64;
use eddies_gpu::flip::GpuTransfer;
use eddies_gpu::pressure::GpuPoisson;
use eddies_gpu::Gpu;

/// One device for the whole suite.
fn gpu() -> Option<&'static Arc<Gpu>> {
    static GPU: OnceLock<Option<Arc<Gpu>>> = OnceLock::new();
    GPU.get_or_init(|| eddies_gpu::device_or_skip().map(Arc::new))
        .as_ref()
}

/// One solver for the whole suite (its pipelines are built once); the tests take turns.
fn device() -> Option<&'static Arc<Mutex<GpuPoisson>>> {
    static DEVICE: OnceLock<Option<Arc<Mutex<GpuPoisson>>>> = OnceLock::new();
    DEVICE
        .get_or_init(|| {
            Some(Arc::new(Mutex::new(
                GpuPoisson::new(gpu()?.clone()).expect("the adapter computes in double precision"),
            )))
        })
        .as_ref()
}

/// One particle-to-grid transfer for the whole suite.
fn transfer() -> Option<&'static Arc<Mutex<GpuTransfer>>> {
    static DEVICE: OnceLock<Option<Arc<Mutex<GpuTransfer>>>> = OnceLock::new();
    DEVICE
        .get_or_init(|| Some(Arc::new(Mutex::new(GpuTransfer::new(gpu()?.clone())))))
        .as_ref()
}

/// The preconditioners the GPU runs.
const KINDS: [PreconditionerKind; 4] = [
    PreconditionerKind::None,
    PreconditionerKind::Jacobi,
    PreconditionerKind::IncompletePoisson,
    PreconditionerKind::Multigrid,
];

const PARAMS: PcgParams = PcgParams {
    tolerance: 1e-6,
    max_iterations: 2000,
};

/// A liquid with a free surface, splashes, a solid pillar and a sealed-off corner of air: `dims` cells.
fn splash<const D: usize>(dims: [usize; D]) -> Grid<CellFlag, D> {
    Grid::from_fn(dims, [0.0; D], 0.05, |i, c| {
        let droplet = SplitMix64::new(11 + i as u64).next_f64() < 0.03;
        let (x, y) = (c[0] as f64 / dims[0] as f64, c[1] as f64 / dims[1] as f64);
        let z = if D == 3 {
            c[2] as f64 / dims[2] as f64
        } else {
            0.5
        };
        if (x - 0.6).abs() < 0.08 && (z - 0.5).abs() < 0.15 && y < 0.7 {
            CellFlag::Solid
        } else if y < 0.35 + 0.1 * (6.0 * x).sin() * z || (y < 0.8 && droplet) {
            CellFlag::Fluid
        } else {
            CellFlag::Air
        }
    })
}

/// The multigrid solver of `flags` in a box with solid walls, to the suite's tolerance.
fn multigrid<const D: usize>(flags: &Grid<CellFlag, D>) -> PoissonSolver<D> {
    PoissonSolver::from_flags(
        flags,
        DomainBoundary::Solid,
        PreconditionerKind::Multigrid,
        PARAMS,
    )
    .unwrap()
}

/// A reproducible right-hand side on the unknowns of `solver`, without its null-space part.
fn rhs<const D: usize>(solver: &PoissonSolver<D>) -> Vec<f64> {
    let op = solver.operator();
    let mut rng = SplitMix64::new(2010);
    let mut b: Vec<f64> = (0..op.len()).map(|_| rng.next_f64() - 0.5).collect();
    op.mask(&mut b);
    op.remove_null_space(&mut b);
    b
}

/// `‖b − A x‖ / ‖b‖` in double precision on the CPU.
fn true_residual<const D: usize>(solver: &PoissonSolver<D>, b: &[f64], x: &[f64]) -> f64 {
    let op = solver.operator();
    let mut r = vec![0.0; op.len()];
    let mut b = b.to_vec();
    op.remove_null_space(&mut b);
    op.residual(&b, x, &mut r);
    op.remove_null_space(&mut r);
    let norm = |v: &[f64]| v.iter().map(|a| a * a).sum::<f64>().sqrt();
    norm(&r) / norm(&b)
}

fn gpu_solve<const D: usize>(
    solver: &PoissonSolver<D>,
    b: &[f64],
    x: &mut [f64],
) -> Option<Result<Option<Info>, SolveError>>
where
    GpuPoisson: PoissonDevice<D>,
{
    let mut dev = device()?.lock().unwrap();
    Some(PoissonDevice::<D>::solve(&mut *dev, solver, b, x))
}

/// The GPU and the CPU solve `flags`' problem with every preconditioner the GPU offers.
fn agree<const D: usize>(flags: &Grid<CellFlag, D>, outside: DomainBoundary)
where
    GpuPoisson: PoissonDevice<D>,
{
    for kind in KINDS {
        let mut solver = PoissonSolver::from_flags(flags, outside, kind, PARAMS).unwrap();
        let b = rhs(&solver);
        let mut cpu = vec![0.0; b.len()];
        let cpu_info = solver.solve(&b, &mut cpu).unwrap();
        let mut gpu = vec![0.0; b.len()];
        let Some(result) = gpu_solve(&solver, &b, &mut gpu) else {
            return;
        };
        let info = result
            .unwrap_or_else(|e| panic!("{}: {e}", kind.name()))
            .expect("the GPU takes this problem");
        let name = kind.name();
        assert_eq!(info.stop, StopReason::Converged, "{name}");
        assert!(info.residual <= PARAMS.tolerance, "{name}: {info:?}");
        assert_eq!(info.history.len(), info.iterations + 1, "{name}");
        // The residual the solver reports is the true one: its recurrence runs in double precision, so the
        // two differ by rounding (a few 1e-12 relative after a few hundred iterations), far below 1%.
        let truth = true_residual(&solver, &b, &gpu);
        assert!(
            (truth - info.residual).abs() <= 0.01 * info.residual,
            "{name}: reported {:e}, true {truth:e}",
            info.residual
        );
        // The same iteration in another summation order: the same count, give or take the one iteration that
        // a residual landing within rounding of the tolerance can cost. Multigrid's V-cycle is in single
        // precision on both sides, with sums in another order: two.
        let slack = if kind == PreconditionerKind::Multigrid {
            2
        } else {
            1
        };
        assert!(
            info.iterations.abs_diff(cpu_info.iterations) <= slack,
            "{name}: GPU {} iterations, CPU {}",
            info.iterations,
            cpu_info.iterations
        );
        // Both solutions are within the tolerance of the exact one: they differ by at most the error that a
        // relative residual of 1e-6 allows, which the condition number (≈ N² for these grids) amplifies.
        let norm = |v: &[f64]| v.iter().map(|a| a * a).sum::<f64>().sqrt();
        let diff: Vec<f64> = gpu.iter().zip(&cpu).map(|(a, c)| a - c).collect();
        let n = flags.dims.iter().max().copied().unwrap() as f64;
        let bound = 2.0 * PARAMS.tolerance * n * n;
        assert!(
            norm(&diff) <= bound * norm(&cpu),
            "{name}: ‖x_gpu − x_cpu‖ / ‖x_cpu‖ = {:e} above {bound:e}",
            norm(&diff) / norm(&cpu)
        );
    }
}

#[test]
fn a_splash_in_3d_solves_as_on_the_cpu() {
    agree(&splash([24, 20, 14]), DomainBoundary::Solid);
}

#[test]
fn an_open_domain_in_2d_solves_as_on_the_cpu() {
    agree(&splash([48, 40]), DomainBoundary::Open);
}

/// A closed box full of liquid: the operator is singular, its constant removed as on the CPU.
#[test]
fn a_closed_tank_is_solved_without_its_constant() {
    let flags = Grid::new([12, 10, 9], [0.0; 3], 0.1, CellFlag::Fluid);
    agree(&flags, DomainBoundary::Solid);
    let solver = multigrid(&flags);
    assert!(solver.operator().is_singular());
    let b = rhs(&solver);
    let mut x = vec![1.0; b.len()];
    solver.operator().mask(&mut x);
    let Some(r) = gpu_solve(&solver, &b, &mut x) else {
        return;
    };
    r.unwrap().unwrap();
    let mean = x.iter().sum::<f64>() / solver.operator().unknowns() as f64;
    assert!(mean.abs() < 1e-12, "the solution's mean is {mean:e}");
}

/// The volume correction's problem: the air counted as a wall, so that each body of liquid is a group of
/// unknowns without a Dirichlet neighbour: a pool, and blocks of two to three cells a side above it
/// (droplets). `dims` cells.
fn bodies<const D: usize>(dims: [usize; D]) -> Grid<CellFlag, D> {
    Grid::from_fn(dims, [0.0; D], 0.05, |_, c| {
        let block = |a: usize| c[a] % 6 < 2 + (c[a] / 6) % 2;
        let pool = c[1] < dims[1] / 3;
        let droplet = c[1] > dims[1] / 3 + 1 && (0..D).all(block);
        if pool || droplet {
            CellFlag::Fluid
        } else {
            CellFlag::Solid
        }
    })
}

/// Several bodies of liquid, each closed (the volume correction's solve once the liquid has splashed): the
/// device solves them as the CPU does with every preconditioner, each body's mean removed (the CPU's
/// solution has mean zero over each body, and so has the device's), the same bits run to run.
#[test]
fn separate_bodies_of_liquid_are_solved_on_the_device() {
    for dims in [[24usize, 20, 14].as_slice(), &[48, 40]] {
        let groups = match dims.len() {
            3 => separate_bodies(&bodies([dims[0], dims[1], dims[2]])),
            _ => separate_bodies(&bodies([dims[0], dims[1]])),
        };
        assert!(groups > 10, "{dims:?}: {groups} bodies");
    }
}

/// [`separate_bodies_of_liquid_are_solved_on_the_device`] on `flags`; returns the number of bodies.
fn separate_bodies<const D: usize>(flags: &Grid<CellFlag, D>) -> usize
where
    GpuPoisson: PoissonDevice<D>,
{
    agree(flags, DomainBoundary::Solid);
    let solver = multigrid(flags);
    let (labels, sizes) = solver.operator().null_space();
    let b = rhs(&solver);
    let mut runs = Vec::new();
    for _ in 0..2 {
        let mut x = vec![1.0; b.len()];
        solver.operator().mask(&mut x);
        let Some(r) = gpu_solve(&solver, &b, &mut x) else {
            return sizes.len();
        };
        r.unwrap().expect("the GPU takes this problem");
        // The means are removed in double precision: what is left is rounding, against values of order 1.
        let scale = x.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        for (g, &n) in sizes.iter().enumerate() {
            let sum: f64 = (0..x.len())
                .filter(|&i| labels[i] == g as u32)
                .map(|i| x[i])
                .sum();
            assert!(
                (sum / n as f64).abs() < 1e-12 * scale,
                "body {g} of {n} cells: mean {:e}",
                sum / n as f64
            );
        }
        runs.push(x.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
    }
    assert!(runs[0] == runs[1], "two runs differ");
    sizes.len()
}

/// A solve without a null space after one with many groups on the same buffers: the count of groups that
/// the V-cycle reads on the coarsest level is the new problem's (none), not the one left behind, so the
/// solve has the bits it has on a device that solved nothing before.
#[test]
fn a_regular_solve_after_a_singular_one_keeps_its_bits() {
    let Some(gpu) = gpu() else { return };
    let dims = [24, 20, 14];
    // Liquid everywhere, open all round: every level down to the coarsest has unknowns, as the bodies' have.
    let regular = PoissonSolver::from_flags(
        &Grid::new(dims, [0.0; 3], 0.05, CellFlag::Fluid),
        DomainBoundary::Open,
        PreconditionerKind::Multigrid,
        PARAMS,
    )
    .unwrap();
    let singular = multigrid(&bodies(dims));
    assert!(!regular.operator().is_singular() && singular.operator().is_singular());
    let b = rhs(&regular);
    let solve = |dev: &mut GpuPoisson| {
        let mut x = vec![0.0; b.len()];
        PoissonDevice::<3>::solve(dev, &regular, &b, &mut x)
            .unwrap()
            .unwrap();
        x.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
    };
    let fresh = solve(&mut GpuPoisson::new(gpu.clone()).unwrap());
    let mut used = GpuPoisson::new(gpu.clone()).unwrap();
    let c = rhs(&singular);
    let mut y = vec![0.0; c.len()];
    PoissonDevice::<3>::solve(&mut used, &singular, &c, &mut y)
        .unwrap()
        .unwrap();
    let again = solve(&mut used);
    assert!(again == fresh, "the singular solve before changed the bits");
}

/// Run to run, the same bits; and a zero right-hand side gives zero at once.
#[test]
fn a_solve_repeats_bit_for_bit() {
    let flags = splash([20, 18, 12]);
    for kind in KINDS {
        let solver =
            PoissonSolver::from_flags(&flags, DomainBoundary::Solid, kind, PARAMS).unwrap();
        let b = rhs(&solver);
        let mut runs = Vec::new();
        for _ in 0..2 {
            let mut x = vec![0.0; b.len()];
            let Some(r) = gpu_solve(&solver, &b, &mut x) else {
                return;
            };
            let info = r.unwrap().unwrap();
            runs.push((x.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), info));
        }
        assert!(runs[0] == runs[1], "{}: two runs differ", kind.name());
        let mut x = vec![3.0; b.len()];
        let info = gpu_solve(&solver, &vec![0.0; b.len()], &mut x)
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(info.stop, StopReason::ZeroRhs);
        assert!(x.iter().all(|&v| v == 0.0));
    }
}

/// Levels run in one workgroup or launched step by step take the same steps with the same arithmetic: a
/// multigrid solve whose 16³ level (and 8³ below it) runs in one workgroup, as on a hardware GPU, gives the
/// bits of one where only the levels of at most 10³ padded cells do, as on a software adapter; and so do a
/// solve with every level launched (none small but the coarsest) and one with every level in one workgroup,
/// the finest too (whose launched half-sweeps take a thread per cell of their colour, half of each padded
/// row rounded up: odd padded rows and 2D included).
#[test]
fn small_levels_in_one_workgroup_give_the_same_bits() {
    let Some(gpu) = gpu() else { return };
    fn runs<const D: usize>(gpu: &Arc<Gpu>, flags: &Grid<CellFlag, D>, what: &str)
    where
        GpuPoisson: PoissonDevice<D>,
    {
        let solver = multigrid(flags);
        let b = rhs(&solver);
        let mut runs = Vec::new();
        for small in [1100, 6000, 0, u64::MAX] {
            let mut dev = GpuPoisson::new(gpu.clone()).unwrap();
            dev.set_small_cells(small);
            let mut x = vec![0.0; b.len()];
            let info = PoissonDevice::<D>::solve(&mut dev, &solver, &b, &mut x)
                .unwrap()
                .unwrap();
            runs.push((
                x.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                info.iterations,
            ));
        }
        assert!(
            runs[0] == runs[1],
            "{what}: a 16³ level in one workgroup changed the solve"
        );
        assert!(
            runs[0] == runs[2],
            "{what}: every level launched changed the solve"
        );
        assert!(
            runs[0] == runs[3],
            "{what}: every level in one workgroup changed the solve"
        );
    }
    runs(gpu, &splash([32, 30, 28]), "even padded rows");
    runs(gpu, &splash([33, 31, 29]), "odd padded rows");
    runs(gpu, &splash([81, 70]), "2D");
}

/// Fused passes take the steps of the passes apart with their arithmetic: the update of `x` and `r` with the
/// V-cycle's start, and the product `r · z` with the cycle's end (`mg_cg.wgsl`) or, where a null space is
/// removed from `z` first, with that removal (`null.wgsl`). Multigrid solves give the same bits and iterations
/// either way in 3D and 2D, with a Dirichlet surface, in a closed tank (a constant null space) and with
/// several bodies of liquid, from a zero and from a nonzero guess; so do Jacobi's with a null space.
#[test]
fn fused_launches_give_the_same_bits() {
    let Some(gpu) = gpu() else { return };
    fn runs<const D: usize>(
        gpu: &Arc<Gpu>,
        flags: &Grid<CellFlag, D>,
        kind: PreconditionerKind,
        what: &str,
    ) where
        GpuPoisson: PoissonDevice<D>,
    {
        let mut solver =
            PoissonSolver::from_flags(flags, DomainBoundary::Solid, kind, PARAMS).unwrap();
        let b = rhs(&solver);
        // The finest level is large (its V-cycle's ends can be fused) on any adapter.
        let device = |fuse: bool| {
            let mut dev = GpuPoisson::new(gpu.clone()).unwrap();
            dev.set_small_cells(1100);
            dev.set_fused_launches(fuse);
            dev
        };
        let (mut fused, mut apart) = (device(true), device(false));
        if !fused.fuses_cycle_ends() {
            eprintln!("note: {what}: the adapter binds fewer than 13 storage buffers to a kernel");
        }
        let solve = |dev: &mut GpuPoisson, solver: &PoissonSolver<D>, guess: f64| {
            let mut x = vec![guess; b.len()];
            solver.operator().mask(&mut x);
            let info = PoissonDevice::<D>::solve(dev, solver, &b, &mut x)
                .unwrap()
                .unwrap();
            let times = dev.take_times();
            let bits = (
                x.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                info.iterations,
                info.history.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            );
            (bits, times)
        };
        // The passes that fusing saves: with multigrid (where the adapter allows) the V-cycle's start, an
        // iteration; the product r · z, an iteration and at the start of the solve, where the V-cycle's end
        // or the null space's removal leaves z.
        let singular = solver.operator().is_singular();
        let ends = fused.fuses_cycle_ends() && kind == PreconditionerKind::Multigrid;
        let product = usize::from(ends || singular);
        let per = usize::from(ends) + product;
        for guess in [0.0, 0.5] {
            solver.expect_iterations(None);
            let iterations = solve(&mut fused, &solver, guess).0 .1;
            assert!(iterations > 1, "{what}: {iterations} iterations");
            // One batch of as many iterations as the solve takes, so that both launch the same.
            solver.expect_iterations(Some(iterations));
            let (bits, times) = solve(&mut fused, &solver, guess);
            let (apart_bits, apart_times) = solve(&mut apart, &solver, guess);
            assert!(
                bits == apart_bits,
                "{what}: fusing changed the solve from {guess}"
            );
            assert_eq!((times.batches, apart_times.batches), (1, 1), "{what}");
            assert_eq!(
                apart_times.launches - times.launches,
                per * iterations + product,
                "{what}: {} launches fused against {} apart over {iterations} iterations",
                times.launches,
                apart_times.launches,
            );
        }
    }
    let mg = PreconditionerKind::Multigrid;
    runs(gpu, &splash([32, 30, 28]), mg, "a splash in 3D");
    runs(gpu, &splash([80, 72]), mg, "a splash in 2D");
    let tank = Grid::new([26, 22, 20], [0.0; 3], 0.1, CellFlag::Fluid);
    runs(gpu, &tank, mg, "a closed tank");
    runs(gpu, &bodies([36, 30, 24]), mg, "bodies of liquid");
    let jacobi = PreconditionerKind::Jacobi;
    runs(
        gpu,
        &bodies([20, 18, 16]),
        jacobi,
        "bodies of liquid, Jacobi",
    );
}

/// A multigrid solve on a grid of another shape but as many cells as the last one's (80 × 72 after 72 × 80)
/// builds its hierarchy anew and records its launches for it: it gives the bits of a solve on a fresh
/// device, not a V-cycle over the last shape's levels.
#[test]
fn a_new_shape_of_as_many_cells_gets_its_own_launches() {
    let Some(gpu) = gpu() else { return };
    let solve = |dev: &mut GpuPoisson, dims: [usize; 2]| {
        let solver = multigrid(&splash(dims));
        let b = rhs(&solver);
        let mut x = vec![0.0; b.len()];
        let info = PoissonDevice::<2>::solve(dev, &solver, &b, &mut x)
            .unwrap()
            .unwrap();
        (
            x.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            info.iterations,
        )
    };
    let mut reused = GpuPoisson::new(gpu.clone()).unwrap();
    solve(&mut reused, [72, 80]);
    let after = solve(&mut reused, [80, 72]);
    let fresh = solve(&mut GpuPoisson::new(gpu.clone()).unwrap(), [80, 72]);
    assert!(
        after == fresh,
        "the second shape's solve ran on the first's launches"
    );
}

/// The first batch of iterations is as long as the solver expects (its last solve's): too short, exact, too
/// long or absent, the iterations past the solution return at once and the later batches continue where it
/// stopped, so every choice gives the same bits and iteration count, with multigrid and with Jacobi (which
/// takes more iterations than the later batches' 16). A solve through the solver remembers its count.
#[test]
fn the_first_batchs_length_changes_no_bit() {
    let Some(gpu) = gpu() else { return };
    let flags = splash([24, 20, 18]);
    for kind in [PreconditionerKind::Multigrid, PreconditionerKind::Jacobi] {
        let mut solver =
            PoissonSolver::from_flags(&flags, DomainBoundary::Solid, kind, PARAMS).unwrap();
        let b = rhs(&solver);
        let mut dev = GpuPoisson::new(gpu.clone()).unwrap();
        let mut solve = |solver: &PoissonSolver<3>| {
            let mut x = vec![0.0; b.len()];
            let info = PoissonDevice::<3>::solve(&mut dev, solver, &b, &mut x)
                .unwrap()
                .unwrap();
            let batches = dev.take_times().batches;
            (
                x.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                info.iterations,
                batches,
            )
        };
        let (bits, iterations, _) = solve(&solver);
        assert!(iterations > 2, "{kind:?}: {iterations} iterations");
        for expect in [0, 1, iterations - 1, iterations, iterations + 3] {
            solver.expect_iterations(Some(expect));
            let (x, n, batches) = solve(&solver);
            assert_eq!(n, iterations, "{kind:?}, first batch {expect}");
            assert!(x == bits, "{kind:?}, first batch {expect}: other bits");
            if expect >= iterations {
                assert_eq!(batches, 1, "{kind:?}, first batch {expect}");
            }
        }
        solver.expect_iterations(None);
        let mut x = vec![0.0; b.len()];
        let info = solver
            .solve_on(Some(&mut dev as &mut dyn PoissonDevice<3>), &b, &mut x)
            .unwrap();
        assert_eq!(solver.expected_iterations(), Some(info.iterations));
    }
}

/// The device builds the multigrid hierarchy from the finest level's cell kinds by the CPU's rules: each
/// coarse level's diagonal (with the Dirichlet link weights that keep a free surface where the finest level
/// has it) and ghost coefficients are the CPU's, and so is the coarsest level's null space, also where
/// coarsening joins a sealed pocket of liquid to an open pool through a one-cell wall.
#[test]
fn the_device_builds_the_cpus_multigrid_levels() {
    let Some(gpu) = gpu() else { return };
    let mut dev = GpuPoisson::new(gpu.clone()).unwrap();
    // Random kinds: nothing lines up with the coarse cells.
    let noise = |dims: [usize; 3], seed: u64| {
        Grid::from_fn(dims, [0.0; 3], 0.1, |i, _| {
            match SplitMix64::new(seed + i as u64).next_f64() {
                u if u < 0.6 => CellFlag::Fluid,
                u if u < 0.75 => CellFlag::Air,
                _ => CellFlag::Solid,
            }
        })
    };
    // A closed box: a pool open to air on the left, a sealed pocket on the right behind a wall `wall` cells
    // wide from x = 7.
    let pocket = |wall: usize| {
        Grid::from_fn([16, 16], [0.0; 2], 0.1, |_, c| {
            if (7..7 + wall).contains(&c[0]) {
                CellFlag::Solid
            } else if c[0] < 7 && c[1] >= 9 {
                CellFlag::Air
            } else {
                CellFlag::Fluid
            }
        })
    };
    check_levels(&mut dev, &splash([24, 20, 14]), DomainBoundary::Solid);
    check_levels(&mut dev, &splash([33, 17]), DomainBoundary::Open);
    check_levels(&mut dev, &noise([13, 11, 9], 5), DomainBoundary::Open);
    check_levels(&mut dev, &noise([21, 6, 17], 9), DomainBoundary::Solid);
    let tank = Grid::new([12, 10, 9], [0.0; 3], 0.1, CellFlag::Fluid);
    assert_eq!(check_levels(&mut dev, &tank, DomainBoundary::Solid), 1);
    // One cell of wall: the pocket joins the pool on the first coarse level. Two from an odd x: it does at
    // the second (the cells 7 and 8 fall into different coarse cells, each with liquid). Four from x = 8
    // would keep it sealed to the coarsest level, but 7 is odd: three from there do the same.
    assert_eq!(check_levels(&mut dev, &pocket(1), DomainBoundary::Solid), 0);
    assert_eq!(check_levels(&mut dev, &pocket(2), DomainBoundary::Solid), 0);
    // Two closed tanks behind a wall as wide as two of the coarsest level's cells: two groups there, numbered
    // in the order of their first cells; and the volume correction's many bodies, which coarsening joins.
    let tanks = Grid::from_fn([32, 16], [0.0; 2], 0.1, |_, c| {
        if (8..24).contains(&c[0]) {
            CellFlag::Solid
        } else {
            CellFlag::Fluid
        }
    });
    assert_eq!(check_levels(&mut dev, &tanks, DomainBoundary::Solid), 2);
    agree(&tanks, DomainBoundary::Solid);
    check_levels(&mut dev, &bodies([24, 20, 14]), DomainBoundary::Solid);
}

/// Builds `flags`' hierarchy on `dev` by a multigrid solve (which must converge) and holds each level to the
/// CPU's; returns the coarsest level's null-space groups.
fn check_levels<const D: usize>(
    dev: &mut GpuPoisson,
    flags: &Grid<CellFlag, D>,
    outside: DomainBoundary,
) -> usize
where
    GpuPoisson: PoissonDevice<D>,
{
    let mut solver =
        PoissonSolver::from_flags(flags, outside, PreconditionerKind::Multigrid, PARAMS).unwrap();
    let b = rhs(&solver);
    let mut x = vec![0.0; b.len()];
    let info = PoissonDevice::<D>::solve(dev, &solver, &b, &mut x)
        .unwrap()
        .expect("the GPU takes this problem");
    assert_eq!(info.stop, StopReason::Converged);
    let built = dev.built_levels().unwrap().expect("a multigrid solve ran");
    let cpu = solver.multigrid().unwrap();
    // Both stop coarsening above the first level that would have no unknown.
    assert_eq!(built.len(), cpu.levels(), "levels");
    // The coefficients come from the same f64 arithmetic rounded to f32; a device's f64 division may be off
    // by an ulp of f64, which can move the f32 by one ulp at most (1.2e-7 relative).
    let close = |a: f32, c: f32| (a - c).abs() <= 2.4e-7 * c.abs().max(1.0);
    for (l, level) in built.iter().enumerate() {
        let op = cpu.level_operator(l);
        let dims: Vec<usize> = level.dims[..D].to_vec();
        assert_eq!(dims, op.layout().dims.to_vec(), "level {l}");
        for (what, device, host) in [
            (
                "diagonal",
                &level.diagonal_units,
                op.diagonal_units().to_vec(),
            ),
            (
                "ghost coefficient",
                &level.ghost,
                if l == 0 {
                    Vec::new()
                } else {
                    cpu.ghost_coefficients(l)
                },
            ),
        ] {
            assert_eq!(device.len(), host.len(), "level {l}: {what}s");
            if let Some(i) = (0..host.len()).find(|&i| !close(device[i], host[i])) {
                panic!(
                    "level {l}, {what} {i}: device {}, CPU {}",
                    device[i], host[i]
                );
            }
        }
    }
    let last = cpu.levels() - 1;
    let (labels, groups) = cpu.level_operator(last).null_space();
    assert_eq!(
        built[last].groups,
        Some(groups.len() as u32),
        "the groups the cycle reads on the coarsest level"
    );
    if last > 0 {
        match &built[last].labels {
            Some(device) => {
                let host: Vec<u32> = if groups.is_empty() {
                    vec![u32::MAX; device.len()]
                } else {
                    labels.to_vec()
                };
                assert_eq!(device, &host, "the coarsest level's null space");
            }
            None => assert!(groups.is_empty(), "the device labelled no null space"),
        }
    }
    groups.len()
}

/// What the GPU does not take goes back to the CPU; bad input is refused as on the CPU.
#[test]
fn the_cpu_keeps_what_the_gpu_does_not_take() {
    let flags = splash([10, 9, 8]);
    let ic = PoissonSolver::from_flags(
        &flags,
        DomainBoundary::Solid,
        PreconditionerKind::IncompleteCholesky,
        PARAMS,
    )
    .unwrap();
    let b = rhs(&ic);
    let mut x = vec![0.0; b.len()];
    let Some(r) = gpu_solve(&ic, &b, &mut x) else {
        return;
    };
    assert_eq!(r, Ok(None), "IC(0) is sequential: the CPU solves it");

    let mut solver = multigrid(&flags);
    let mut bad = b.clone();
    let i = bad.iter().position(|&v| v != 0.0).unwrap();
    bad[i] = f64::NAN;
    let e = gpu_solve(&solver, &bad, &mut x).unwrap().unwrap_err();
    assert!(
        matches!(&e, SolveError::BadInput(m) if m.contains("right-hand side") && m.contains(&format!("entry {i}"))),
        "{e}"
    );
    solver.params.max_iterations = 2;
    let e = gpu_solve(&solver, &b, &mut x).unwrap().unwrap_err();
    assert!(
        matches!(e, SolveError::NoConvergence { iterations: 2, .. }),
        "{e}"
    );
}

/// Launches of more workgroups than an adapter allows per dimension fold into two dimensions: with the
/// limit lowered to 7, every launch of a 3D and a 2D problem folds, and the answers are the CPU's.
#[test]
fn launches_fold_beyond_the_workgroup_limit() {
    if device().is_none() {
        return;
    }
    let mut folded = {
        let gpu = Arc::new(eddies_gpu::device_or_skip().unwrap());
        GpuPoisson::new(gpu).unwrap()
    };
    folded.limit_workgroups_per_dimension(7);
    // The volume correction's bodies too: more groups than 7, whose means' launch folds.
    for (kind, flags) in KINDS
        .into_iter()
        .flat_map(|k| [(k, splash([20, 16, 12])), (k, bodies([20, 16, 12]))])
    {
        let solver =
            PoissonSolver::from_flags(&flags, DomainBoundary::Solid, kind, PARAMS).unwrap();
        let b = rhs(&solver);
        assert!(solver.operator().len() as u64 > 7 * 256 * 2);
        let mut x = vec![0.0; b.len()];
        let info = PoissonDevice::<3>::solve(&mut folded, &solver, &b, &mut x)
            .unwrap()
            .unwrap();
        let mut y = vec![0.0; b.len()];
        let plain = gpu_solve(&solver, &b, &mut y).unwrap().unwrap().unwrap();
        assert_eq!(info, plain, "{}", kind.name());
        assert!(x == y, "{}: folding changed the solution", kind.name());
    }
}

/// Large writes and read-backs go through the staging buffers the device keeps: bytes written at an offset
/// come back unchanged, around them what was there, and a second, larger transfer (the buffers grow) too.
#[test]
fn staged_transfers_move_every_byte() {
    let Some(gpu) = gpu() else { return };
    for (words, at) in [(600_000u64, 1000u64), (900_000, 4)] {
        let buffer = gpu.buffer("staged", 4 * (words + 2 * at));
        let before: Vec<u32> = (0..words + 2 * at)
            .map(|i| i as u32 ^ 0x5a5a_5a5a)
            .collect();
        gpu.write(&buffer, &before);
        let data: Vec<u32> = (0..words)
            .map(|i| (i as u32).wrapping_mul(2_654_435_761))
            .collect();
        gpu.write_at(&buffer, 4 * at, bytemuck::cast_slice(&data));
        let mut back = vec![Vec::new(); 3];
        gpu.read_into(
            &[
                (&buffer, 0, 4 * at),
                (&buffer, 4 * at, 4 * words),
                (&buffer, 4 * (at + words), 4 * at),
            ],
            |k, bytes| back[k] = bytemuck::cast_slice::<u8, u32>(bytes).to_vec(),
        )
        .expect("read-back");
        assert_eq!(back[0], before[..at as usize], "the words before the write");
        assert!(back[1] == data, "the written words, {words} of them");
        assert_eq!(
            back[2],
            before[(at + words) as usize..],
            "the words after it"
        );
    }
}
