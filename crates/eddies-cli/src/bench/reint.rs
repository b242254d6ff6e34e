//! `eddies bench` cases of reintegration tracking: the reintegration alone and the full step (SPH forces,
//! gravity, reintegration), in 2D and 3D, on a state with vacuum around the fluid and on a full domain.

use std::time::Instant;

use eddies::reint::{ReintConfig, ReintParams, ReintSim};
use eddies::{Shape, Simulation};
use glam::DVec3;

use super::case::{median, stage_medians, BenchCase, BenchError, BenchRow, CPU, WARMUP_STEPS};

/// The reint benchmarks.
pub fn cases() -> Vec<BenchCase> {
    vec![
        // Reintegration alone (no forces, no gravity), 1024² (quick: 256²)
        BenchCase {
            name: "reint-2d-reintegrate",
            run: |q| {
                reint_bench::<2>(
                    "reint-2d-reintegrate",
                    if q { 256 } else { 1024 },
                    false,
                    false,
                    q,
                )
            },
        },
        // A full reint step (SPH forces, gravity, reintegration), 1024² (quick: 256²)
        BenchCase {
            name: "reint-2d-step",
            run: |q| reint_bench::<2>("reint-2d-step", if q { 256 } else { 1024 }, true, false, q),
        },
        // Reintegration alone with fluid in every cell (no vacuum to skip), 1024² (quick: 256²)
        BenchCase {
            name: "reint-2d-reintegrate-full",
            run: |q| {
                reint_bench::<2>(
                    "reint-2d-reintegrate-full",
                    if q { 256 } else { 1024 },
                    false,
                    true,
                    q,
                )
            },
        },
        // A full reint step with fluid in every cell, 1024² (quick: 256²)
        BenchCase {
            name: "reint-2d-step-full",
            run: |q| {
                reint_bench::<2>(
                    "reint-2d-step-full",
                    if q { 256 } else { 1024 },
                    true,
                    true,
                    q,
                )
            },
        },
        // Reintegration alone (no forces, no gravity), 128³ (quick: 48³)
        BenchCase {
            name: "reint-3d-reintegrate",
            run: |q| {
                reint_bench::<3>(
                    "reint-3d-reintegrate",
                    if q { 48 } else { 128 },
                    false,
                    false,
                    q,
                )
            },
        },
        // A full reint step (SPH forces, gravity, reintegration), 128³ (quick: 48³)
        BenchCase {
            name: "reint-3d-step",
            run: |q| reint_bench::<3>("reint-3d-step", if q { 48 } else { 128 }, true, false, q),
        },
        // Reintegration alone with fluid in every cell, 128³ (quick: 48³)
        BenchCase {
            name: "reint-3d-reintegrate-full",
            run: |q| {
                reint_bench::<3>(
                    "reint-3d-reintegrate-full",
                    if q { 48 } else { 128 },
                    false,
                    true,
                    q,
                )
            },
        },
        // A full reint step with fluid in every cell, 128³ (quick: 48³)
        BenchCase {
            name: "reint-3d-step-full",
            run: |q| {
                reint_bench::<3>(
                    "reint-3d-step-full",
                    if q { 48 } else { 128 },
                    true,
                    true,
                    q,
                )
            },
        },
    ]
}

/// A dam-break-like state on an `n`-per-axis grid: a block of fluid moving right and a blob moving down and
/// left, with vacuum around, so that the timed steps see fluid, surfaces and empty cells (about 60% of the
/// cells are vacuum, which the kernels skip chunk by chunk). With `full`, fluid fills every cell and moves
/// right and up: no vacuum to skip, every cell does the whole work.
fn reint_bench<const D: usize>(
    name: &str,
    n: usize,
    forces: bool,
    full: bool,
    quick: bool,
) -> Result<Vec<BenchRow>, BenchError> {
    let mut cfg = ReintConfig::<D> {
        resolution: [n; D],
        cell_size: 1.0 / n as f64,
        params: ReintParams {
            forces,
            ..ReintParams::default()
        },
        ..ReintConfig::default()
    };
    if !forces {
        cfg.gravity = [0.0; D];
    }
    let mut sim = ReintSim::<D>::new(cfg)?;
    let block = if D == 2 {
        Shape::box2([0.0, 0.0], [0.5, 0.5])
    } else {
        Shape::Box {
            min: DVec3::ZERO,
            max: DVec3::new(0.5, 0.5, 1.0),
        }
    };
    let blob = Shape::Sphere {
        center: DVec3::new(0.7, 0.7, if D == 3 { 0.5 } else { 0.0 }),
        radius: 0.2,
    };
    let mut right = [0.0f32; D];
    right[0] = 0.5;
    right[1] = 0.2;
    let mut down = [0.0f32; D];
    down[0] = -0.3;
    down[1] = -0.5;
    if full {
        let all = if D == 2 {
            Shape::box2([0.0, 0.0], [1.0, 1.0])
        } else {
            Shape::Box {
                min: DVec3::ZERO,
                max: DVec3::ONE,
            }
        };
        sim.fill(&all, 0, 1.0, right);
    } else {
        sim.fill(&block, 0, 1.0, right);
        sim.fill(&blob, 0, 1.0, down);
    }

    let cells = n.pow(D as u32) as f64;
    let dt = {
        let dt = sim.max_dt(0.5);
        if dt.is_finite() && dt > 0.0 {
            dt
        } else {
            0.5 / n as f64
        }
    };
    for _ in 0..WARMUP_STEPS {
        sim.step(dt)?;
    }
    let reps = match (quick, D) {
        (true, _) => 5,
        (false, 2) => 20,
        (false, _) => 10,
    };
    let mut samples = Vec::with_capacity(reps);
    let mut records = Vec::with_capacity(reps);
    for _ in 0..reps {
        let start = Instant::now();
        records.push(sim.step(dt)?);
        samples.push(start.elapsed().as_secs_f64());
    }
    let seconds = median(&mut samples);
    let size = vec![n.to_string(); D].join("x");
    let threads = rayon::current_num_threads();
    let row = |metric: &str, value: f64, unit: &str| BenchRow {
        bench: name.to_string(),
        size: size.clone(),
        metric: metric.to_string(),
        value,
        unit: unit.to_string(),
        threads,
        device: CPU.into(),
    };
    let mut rows = vec![
        row("throughput", cells / seconds, "cell-updates/s"),
        row("step-time", seconds * 1e3, "ms"),
    ];
    for (stage, ms) in stage_medians(&records) {
        rows.push(row(&format!("stage-{stage}"), ms, "ms"));
    }
    Ok(rows)
}
