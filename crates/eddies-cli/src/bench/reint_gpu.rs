//! `eddies bench --backend gpu`: reintegration tracking on the GPU, on the dam of the table: the
//! left 30 % of the width filled 60 % high (18 % of the cells), closed box, gravity, one substance.
//!
//! Each size reports, in cell-steps per second over all cells of the grid: the full step (SPH forces,
//! advance, bookkeeping, gather, diagnostics) and the reintegration pass (the same step without forces: the
//! advance, the bookkeeping and the gather), each timed on the wall clock over enough steps to last a
//! quarter of a second, from the first submission to the device's last completion; the device memory per
//! cell; and, where the adapter has timestamp queries, each kernel's time in a full step (median of five).

use std::sync::Arc;
use std::time::Instant;

use eddies::reint::{ReintConfig, ReintParams, ReintSim, Substance};
use eddies::{Shape, Simulation};
use eddies_gpu::{Gpu, GpuError, ReintGpu};
use glam::DVec3;

use super::case::{median, BenchCase, BenchError, BenchRow, WARMUP_STEPS};
use crate::setup;

/// The GPU benchmarks.
pub fn cases() -> Vec<BenchCase> {
    vec![
        // The 2D dam at 1024², 2048², 4096² and 8192² (quick: 256², 512²)
        BenchCase {
            name: "reint-gpu-2d-dam",
            run: |q| {
                let sizes: &[usize] = if q {
                    &[256, 512]
                } else {
                    &[1024, 2048, 4096, 8192]
                };
                sizes
                    .iter()
                    .map(|&n| dam::<2>("reint-gpu-2d-dam", n, q))
                    .flat()
            },
        },
        // The 3D dam at 128³ and 256³ (quick: 48³, 64³)
        BenchCase {
            name: "reint-gpu-3d-dam",
            run: |q| {
                let sizes: &[usize] = if q { &[48, 64] } else { &[128, 256] };
                sizes
                    .iter()
                    .map(|&n| dam::<3>("reint-gpu-3d-dam", n, q))
                    .flat()
            },
        },
    ]
}

/// Rows of several sizes, or the first error.
trait Flat {
    fn flat(self) -> Result<Vec<BenchRow>, BenchError>;
}

impl<I: Iterator<Item = Result<Vec<BenchRow>, BenchError>>> Flat for I {
    /// A size the adapter's buffers cannot hold is skipped with a note on stderr (Mesa's software driver
    /// binds at most 128 MiB); any other error ends the case.
    fn flat(self) -> Result<Vec<BenchRow>, BenchError> {
        let mut rows = Vec::new();
        for r in self {
            match r {
                Ok(r) => rows.extend(r),
                Err(BenchError::Gpu(e @ GpuError::Limit(_))) => {
                    eprintln!("note: size skipped: {e}")
                }
                Err(e) => return Err(e),
            }
        }
        Ok(rows)
    }
}

/// The dam on an `n`-per-axis grid, on the host, with or without forces.
fn host_dam<const D: usize>(n: usize, forces: bool) -> Result<ReintSim<D>, BenchError> {
    let mut sim = ReintSim::<D>::new(ReintConfig {
        resolution: [n; D],
        cell_size: 1.0 / n as f64,
        params: ReintParams {
            forces,
            ..ReintParams::default()
        },
        substances: vec![Substance::default()],
        ..ReintConfig::default()
    })?;
    let dam = Shape::Box {
        min: DVec3::ZERO,
        max: DVec3::new(0.3, 0.6, 1.0),
    };
    sim.fill(&dam, 0, 1.0, [0.0; D]);
    Ok(sim)
}

/// Cell-steps per second of `sim` stepping by `dt`: steps doubled until a batch lasts a quarter second.
fn throughput<const D: usize>(
    sim: &mut ReintGpu<D>,
    dt: f64,
    quick: bool,
) -> Result<f64, BenchError> {
    let cells = sim.resolution().iter().product::<usize>() as f64;
    for _ in 0..WARMUP_STEPS {
        sim.step(dt)?;
    }
    sim.finish()?;
    let target = if quick { 0.05 } else { 0.25 };
    let mut steps = 2;
    loop {
        let start = Instant::now();
        for _ in 0..steps {
            sim.step(dt)?;
        }
        sim.finish()?;
        let seconds = start.elapsed().as_secs_f64();
        if seconds >= target || steps >= 4096 {
            return Ok(cells * steps as f64 / seconds);
        }
        steps *= 2;
    }
}

fn dam<const D: usize>(name: &str, n: usize, quick: bool) -> Result<Vec<BenchRow>, BenchError> {
    let gpu: Arc<Gpu> = setup::gpu()?;
    let device = gpu.adapter().name.clone();
    let size = vec![n.to_string(); D].join("x");
    let cells = n.pow(D as u32) as f64;
    let row = |metric: &str, value: f64, unit: &str| BenchRow {
        bench: name.to_string(),
        size: size.clone(),
        metric: metric.to_string(),
        value,
        unit: unit.to_string(),
        threads: rayon::current_num_threads(),
        device: device.clone(),
    };
    let mut rows = Vec::new();
    {
        let mut sim = ReintGpu::new(gpu.clone(), host_dam::<D>(n, true)?)?;
        let dt = sim.max_dt(0.5);
        rows.push(row(
            "step",
            throughput(&mut sim, dt, quick)?,
            "cell-steps/s",
        ));
        rows.push(row(
            "memory",
            sim.memory_bytes() as f64 / cells,
            "bytes/cell",
        ));
        let mut kernels: Vec<(&'static str, Vec<f64>)> = Vec::new();
        for _ in 0..5 {
            let Some(times) = sim.profile_step(dt)? else {
                break;
            };
            for (k, (pass, ms)) in times.into_iter().enumerate() {
                if kernels.len() <= k {
                    kernels.push((pass, Vec::new()));
                }
                kernels[k].1.push(ms);
            }
        }
        for (pass, mut ms) in kernels {
            rows.push(row(&format!("kernel-{pass}"), median(&mut ms), "ms"));
        }
    }
    let mut sim = ReintGpu::new(gpu, host_dam::<D>(n, false)?)?;
    let dt = sim.max_dt(0.5);
    rows.insert(
        1,
        row(
            "reintegrate",
            throughput(&mut sim, dt, quick)?,
            "cell-steps/s",
        ),
    );
    Ok(rows)
}
