//! `eddies bench pressure`: the pressure-solver table, shaped like Eng's comparison of preconditioners:
//! iterations and time for PCG to reach a relative residual of 1e-6, per preconditioner and grid size, on two
//! masks: a full tank (every cell liquid, solid walls, free surface along the top) and a dam break (a liquid
//! block against one wall, air above, solid walls). Also the memory bandwidth of plain CG and the convergence
//! of the standalone multigrid solver.
//!
//! The right-hand side is a fixed pseudo-random field (zero mean over the liquid), which excites every mode
//! as a real divergence field does. Each solve starts from zero; setup (building the operator and the
//! preconditioner) is timed separately.

use std::time::Instant;

use eddies::grid::{CellFlag, Grid};
use eddies::linsolve::{
    DomainBoundary, LinearOperator, Multigrid, MultigridParams, PcgParams, PoissonOperator,
    PoissonSolver, PreconditionerKind, Restriction,
};
use eddies::rng::SplitMix64;

use super::case::{BenchCase, BenchError, BenchRow, CPU};

/// Relative residual every timed solve reaches.
pub const TOLERANCE: f64 = 1e-6;

/// Bytes one unpreconditioned CG iteration moves per cell, counted from its kernels (f64 vectors, f32
/// diagonal): `q = A p` with `p · q` (read p and the diagonal, write q: 20), `x += α p, r −= α q` with `r · r`
/// (read x, p, r, q, write x, r: 48), `p = r + β p` (read r, p, write p: 24). Neighbour reads of the stencil
/// hit the cache and are not counted, as STREAM does not count write-allocate traffic.
pub const CG_BYTES_PER_CELL: f64 = 92.0;

/// The benchmark cases of the pressure solver.
pub fn cases() -> Vec<BenchCase> {
    vec![
        // PCG to 1e-6, every preconditioner, full tank, 32³ 64³ 128³ (+ multigrid at 256³; quick: 32³)
        BenchCase {
            name: "pressure-tank",
            run: |q| table(Mask::Tank, q),
        },
        // PCG to 1e-6, every preconditioner, dam-break mask, 32³ 64³ 128³ (+ multigrid at 256³; quick: 32³)
        BenchCase {
            name: "pressure-dam-break",
            run: |q| table(Mask::DamBreak, q),
        },
        // PCG to 1e-6, every preconditioner, the volume correction's bodies of liquid, 32³ 64³ 128³ (+ multigrid
        // at 256³; quick: 32³)
        BenchCase {
            name: "pressure-bodies",
            run: |q| table(Mask::Bodies, q),
        },
        // Unpreconditioned CG iterations on the full tank, 128³ (quick: 64³): throughput and bandwidth
        BenchCase {
            name: "pressure-cg-bandwidth",
            run: cg_bandwidth,
        },
        // Standalone multigrid V(3,3) cycles to 1e-6 on the full tank, 128³ (quick: 64³)
        BenchCase {
            name: "pressure-multigrid",
            run: multigrid,
        },
    ]
}

/// The liquid masks of the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Mask {
    /// Liquid everywhere but the top layer of cells, which is air; solid walls.
    Tank,
    /// Liquid in `x < n/2, y < n/2` (y up), air elsewhere; solid walls.
    DamBreak,
    /// The volume correction's problem once the liquid has splashed (`eddies::flip`), where the air counts as
    /// a wall: a pool in `y < n/3` and droplets of 2³ cells every 8 cells above it, each body of liquid closed
    /// (a group of the null space: 1 + 21 · 32² of them at 256³).
    Bodies,
}

impl Mask {
    pub(super) fn name(self) -> &'static str {
        match self {
            Mask::Tank => "tank",
            Mask::DamBreak => "dam-break",
            Mask::Bodies => "bodies",
        }
    }

    pub(super) fn flags(self, n: usize) -> Grid<CellFlag, 3> {
        Grid::from_fn([n; 3], [0.0; 3], 1.0 / n as f64, |_, c| {
            let liquid = match self {
                Mask::Tank => c[1] + 1 < n,
                Mask::DamBreak => c[0] < n / 2 && c[1] < n / 2,
                Mask::Bodies => c[1] < n / 3 || (c[1] > n / 3 + 1 && c.iter().all(|&a| a % 8 < 2)),
            };
            if liquid {
                CellFlag::Fluid
            } else if self == Mask::Bodies {
                CellFlag::Solid
            } else {
                CellFlag::Air
            }
        })
    }
}

/// A reproducible right-hand side on the padded layout of `op`, zero outside the unknowns.
pub(super) fn rhs(op: &PoissonOperator<3>) -> Vec<f64> {
    let mut rng = SplitMix64::new(2010);
    let mut b: Vec<f64> = (0..op.len()).map(|_| rng.next_f64() - 0.5).collect();
    op.mask(&mut b);
    op.remove_null_space(&mut b);
    b
}

fn row(bench: String, n: usize, metric: &str, value: f64, unit: &str) -> BenchRow {
    BenchRow {
        bench,
        size: format!("{n}x{n}x{n}"),
        metric: metric.to_string(),
        value,
        unit: unit.to_string(),
        threads: rayon::current_num_threads(),
        device: CPU.into(),
    }
}

fn table(mask: Mask, quick: bool) -> Result<Vec<BenchRow>, BenchError> {
    let sizes: &[usize] = if quick { &[32] } else { &[32, 64, 128, 256] };
    let mut rows = Vec::new();
    for &n in sizes {
        let op = PoissonOperator::from_flags(&mask.flags(n), DomainBoundary::Solid)?;
        let b = rhs(&op);
        for kind in PreconditionerKind::ALL {
            if n > 128 && kind != PreconditionerKind::Multigrid {
                continue;
            }
            let params = PcgParams {
                tolerance: TOLERANCE,
                max_iterations: 20 * n,
            };
            let start = Instant::now();
            let mut solver = PoissonSolver::new(op.clone(), kind, params)?;
            solver.prepare();
            let setup = start.elapsed().as_secs_f64();
            let mut x = vec![0.0; op.len()];
            let start = Instant::now();
            let info = solver.solve(&b, &mut x).map_err(|source| BenchError::Pcg {
                preconditioner: kind.name(),
                n,
                source,
            })?;
            let solve = start.elapsed().as_secs_f64();
            let name = format!("pressure-{}-{}", mask.name(), kind.name());
            rows.push(row(
                name.clone(),
                n,
                "iterations",
                info.iterations as f64,
                "iterations",
            ));
            rows.push(row(name.clone(), n, "solve-time", solve * 1e3, "ms"));
            rows.push(row(name, n, "setup-time", setup * 1e3, "ms"));
        }
    }
    Ok(rows)
}

fn cg_bandwidth(quick: bool) -> Result<Vec<BenchRow>, BenchError> {
    let n = if quick { 64 } else { 128 };
    let op = PoissonOperator::from_flags(&Mask::Tank.flags(n), DomainBoundary::Solid)?;
    let b = rhs(&op);
    let iterations = if quick { 50 } else { 100 };
    // A tolerance it cannot reach: exactly `iterations` iterations are timed.
    let params = PcgParams {
        tolerance: 1e-300,
        max_iterations: iterations,
    };
    let mut solver = PoissonSolver::new(op.clone(), PreconditionerKind::None, params)?;
    let mut x = vec![0.0; op.len()];
    let _ = solver.solve(&b, &mut x); // warm-up: page in every vector
    x.fill(0.0);
    let start = Instant::now();
    let _ = solver.solve(&b, &mut x);
    let seconds = start.elapsed().as_secs_f64();
    let cell_iterations = op.len() as f64 * iterations as f64;
    let rate = cell_iterations / seconds;
    let name = "pressure-cg-bandwidth".to_string();
    Ok(vec![
        row(name.clone(), n, "throughput", rate, "cell-iterations/s"),
        row(
            name.clone(),
            n,
            "bandwidth",
            rate * CG_BYTES_PER_CELL / 1e9,
            "GB/s",
        ),
        row(
            name,
            n,
            "iteration-time",
            seconds / iterations as f64 * 1e3,
            "ms",
        ),
    ])
}

fn multigrid(quick: bool) -> Result<Vec<BenchRow>, BenchError> {
    let n = if quick { 64 } else { 128 };
    let op = PoissonOperator::from_flags(&Mask::Tank.flags(n), DomainBoundary::Solid)?;
    let b = rhs(&op);
    let params = MultigridParams {
        tolerance: TOLERANCE,
        pre_sweeps: 3,
        post_sweeps: 3,
        restriction: Restriction::Nearest,
        ..MultigridParams::default()
    };
    let mut mg = Multigrid::new(op.clone(), params)?;
    let mut x = vec![0.0; op.len()];
    let start = Instant::now();
    let info = mg.solve(&b, &mut x)?;
    let seconds = start.elapsed().as_secs_f64();
    let factor = info.residual.powf(1.0 / info.iterations as f64);
    let name = "pressure-multigrid".to_string();
    Ok(vec![
        row(name.clone(), n, "cycles", info.iterations as f64, "cycles"),
        row(name.clone(), n, "mean-factor", factor, "per cycle"),
        row(name.clone(), n, "solve-time", seconds * 1e3, "ms"),
        row(
            name,
            n,
            "cycle-time",
            seconds / info.iterations as f64 * 1e3,
            "ms",
        ),
    ])
}
