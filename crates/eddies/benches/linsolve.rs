//! Criterion benches of the linear solvers: one MGPCG and one MIC(0)-PCG solve, a multigrid V-cycle and a
//! Poisson operator application, on a 64³ tank (liquid everywhere, free surface on top, solid walls).
//! `eddies bench pressure` measures the full table of docs/PERFORMANCE.md (every preconditioner, 32³ to
//! 256³); these use one size so that `cargo bench` finishes in a minute.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use eddies::grid::{CellFlag, Grid};
use eddies::linsolve::{
    DomainBoundary, LinearOperator, MultigridParams, MultigridPreconditioner, PcgParams,
    PoissonOperator, PoissonSolver, Preconditioner, PreconditionerKind,
};
use eddies::rng::SplitMix64;

const N: usize = 64;

fn tank() -> (PoissonOperator<3>, Vec<f64>) {
    let flags = Grid::from_fn([N; 3], [0.0; 3], 1.0 / N as f64, |_, c| {
        if c[1] + 1 < N {
            CellFlag::Fluid
        } else {
            CellFlag::Air
        }
    });
    let op = PoissonOperator::from_flags(&flags, DomainBoundary::Solid).expect("valid");
    let mut rng = SplitMix64::new(7);
    let mut b: Vec<f64> = (0..op.len()).map(|_| rng.next_f64() - 0.5).collect();
    op.mask(&mut b);
    (op, b)
}

fn benches(c: &mut Criterion) {
    let (op, b) = tank();
    let mut group = c.benchmark_group("linsolve-64");
    group.sample_size(10);
    group.throughput(Throughput::Elements(op.len() as u64));
    let mut y = vec![0.0; op.len()];
    group.bench_function("apply", |bench| bench.iter(|| op.apply(&b, &mut y)));
    let mut vcycle =
        MultigridPreconditioner::new(op.clone(), MultigridParams::default()).expect("hierarchy");
    group.bench_function("v-cycle", |bench| bench.iter(|| vcycle.apply(&b, &mut y)));
    for kind in [
        PreconditionerKind::Multigrid,
        PreconditionerKind::ModifiedIncompleteCholesky,
    ] {
        let mut solver =
            PoissonSolver::new(op.clone(), kind, PcgParams::default()).expect("solver");
        group.bench_function(format!("pcg-{}", kind.name()), |bench| {
            bench.iter(|| {
                y.fill(0.0);
                solver.solve(&b, &mut y).expect("converges")
            })
        });
    }
    group.finish();
}

criterion_group!(linsolve, benches);
criterion_main!(linsolve);
