//! `eddies bench flip --backend gpu`: PIC/FLIP with its particle passes and pressure solves on the
//! GPU (`eddies_gpu::flip::GpuTransfer`, `eddies_gpu::pressure::GpuPoisson`).
//!
//! * `flip-gpu-dam-break`: the 3D dam break of the GPU issue (a block of 0.4 × 0.6 × 1 of the domain, 8
//!   particles per cell) at 64³, 100³ (the 1M cells), 128³ and 256³: milliseconds per step and per stage, MGPCG iterations, the
//!   solves' and the transfer's time on the device split into upload, device work and read-back, and the
//!   device memory per cell and per particle. The other stages run on the CPU. The particles stay on the
//!   device between the passes and between the steps, as in `eddies run` (the device tallies the step's
//!   diagnostics); `particles-read-back` is their read-back after the timed steps, as a frame's outputs
//!   take it, and `step-time-particles-sent` times the same steps with them sent and read back at every
//!   pass and sorted on the CPU. There the host extrapolates the velocity
//!   (`stage-extrapolate-particles-sent`); where the device keeps the particles, the particle pass does
//!   (`stage-extrapolate` then times no work on the host).
//! * `flip-gpu-pressure-tank`, `flip-gpu-pressure-dam-break`, `flip-gpu-pressure-bodies`: the
//!   pressure-solver table of `eddies bench pressure` on the GPU, every preconditioner it runs, 32³ to
//!   256³: iterations, and the solve's time with the vectors already on the device (`iterate`; `record`,
//!   its share spent recording and submitting the launches on the CPU), the transfers, the multigrid
//!   hierarchy's build on the device and the operator's setup on the CPU apart. Each timed solve is of a
//!   new operator (the same cells), as each step of a simulation is. `bodies` is the volume correction's
//!   problem after a splash: thousands of closed bodies of liquid, each a group of the null space.
//!
//! A size whose run would take longer than [`LONGEST_S`] (estimated from the size before) is skipped with a
//! note: a software adapter would take hours at 256³.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use eddies::flip::{FlipConfig, FlipParams, FlipSim};
use eddies::linsolve::{
    DomainBoundary, LinearOperator, PcgParams, PoissonDevice, PoissonOperator, PoissonSolver,
    PreconditionerKind,
};
use eddies::{Shape, Simulation, StepRecord};
use eddies_gpu::flip::{GpuTransfer, SharedTransfer, TransferTimes};
use eddies_gpu::pressure::{GpuPoisson, SharedPoisson, SolveTimes};
use glam::DVec3;

use super::case::{median, stage_medians, BenchCase, BenchError, BenchRow, WARMUP_STEPS};
use super::pressure::{rhs, Mask, TOLERANCE};
use crate::setup;

/// A size is skipped when its estimated time exceeds this (s).
const LONGEST_S: f64 = 60.0;

/// The GPU benchmarks of PIC/FLIP.
pub fn cases() -> Vec<BenchCase> {
    vec![
        // 3D dam break (0.4 x 0.6 x 1 block, 8 particles per cell) at 64³, 100³, 128³, 256³ (quick: 32³), pressure on the GPU
        BenchCase {
            name: "flip-gpu-dam-break",
            run: |q| dam_break(if q { &[32] } else { &[64, 100, 128, 256] }, q),
        },
        // PCG to 1e-6 on the GPU, every preconditioner it runs, full tank, 32³–256³ (quick: 32³)
        BenchCase {
            name: "flip-gpu-pressure-tank",
            run: |q| table(Mask::Tank, q),
        },
        // PCG to 1e-6 on the GPU, every preconditioner it runs, dam-break mask (quick: 32³)
        BenchCase {
            name: "flip-gpu-pressure-dam-break",
            run: |q| table(Mask::DamBreak, q),
        },
        // PCG to 1e-6 on the GPU, every preconditioner it runs, the volume correction's bodies (quick: 32³)
        BenchCase {
            name: "flip-gpu-pressure-bodies",
            run: |q| table(Mask::Bodies, q),
        },
    ]
}

/// The preconditioners the GPU runs.
const KINDS: [PreconditionerKind; 4] = [
    PreconditionerKind::None,
    PreconditionerKind::Jacobi,
    PreconditionerKind::IncompletePoisson,
    PreconditionerKind::Multigrid,
];

fn device() -> Result<(Arc<Mutex<GpuPoisson>>, String), BenchError> {
    let gpu = setup::gpu()?;
    let name = gpu.adapter().name.clone();
    Ok((Arc::new(Mutex::new(GpuPoisson::new(gpu)?)), name))
}

/// Whether the adapter binds the pressure solve's vectors on `n³` cells (8 bytes a padded cell); a size
/// beyond its limit is skipped with a note, as a size too slow to run is (lavapipe binds 128 MiB, 256³ needs
/// 137 MB).
fn binds(bench: &str, n: usize) -> Result<bool, BenchError> {
    let padded = (n as u64 + 2).pow(3);
    match setup::gpu()?.check_binding("the pressure solve", 8 * padded) {
        Ok(()) => Ok(true),
        Err(e) => {
            eprintln!("note: {bench} {n}³ skipped: {e}");
            Ok(false)
        }
    }
}

fn row(bench: &str, size: &str, metric: &str, value: f64, unit: &str, device: &str) -> BenchRow {
    BenchRow {
        bench: bench.to_string(),
        size: size.to_string(),
        metric: metric.to_string(),
        value,
        unit: unit.to_string(),
        threads: rayon::current_num_threads(),
        device: device.to_string(),
    }
}

/// The dam break at `n³` for each size: [`WARMUP_STEPS`] steps, then 5 (quick: 3) timed.
fn dam_break(sizes: &[usize], quick: bool) -> Result<Vec<BenchRow>, BenchError> {
    let (dev, device) = device()?;
    // As `eddies run` sets them up: the solves and the particle passes share their scratch memory.
    let mut moving = GpuTransfer::new(setup::gpu()?);
    moving.share_scratch(dev.lock().unwrap().scratch().clone());
    dev.lock().unwrap().share_faces(moving.faces().clone());
    let transfer = Arc::new(Mutex::new(moving));
    let mut rows = Vec::new();
    let mut per_cell_s: Option<f64> = None;
    let reps = if quick { 3 } else { 5 };
    for &n in sizes {
        let cells = n * n * n;
        if !binds("flip-gpu-dam-break", n)? {
            continue;
        }
        if let Some(estimate) = per_cell_s
            .map(|s| 2.0 * s * cells as f64 * (WARMUP_STEPS + reps) as f64)
            .filter(|&t| t > LONGEST_S)
        {
            eprintln!("note: flip-gpu-dam-break {n}³ skipped: about {estimate:.0} s on {device}");
            continue;
        }
        let start = Instant::now();
        let TimedSteps {
            sim,
            records,
            gpu_times,
            transfer_times,
            read_back_ms,
        } = timed_dam_break(n, reps, &dev, &transfer)?;
        per_cell_s = Some(start.elapsed().as_secs_f64() / (cells * (WARMUP_STEPS + reps)) as f64);
        // The same steps with the particles sent to the device and read back at every pass, sorted on
        // the CPU: what keeping them on the device saves.
        transfer.lock().unwrap().keep_particles(false);
        let sent = timed_dam_break(n, reps, &dev, &transfer);
        transfer.lock().unwrap().keep_particles(true);
        let sent = sent?;
        let mut sent_steps: Vec<f64> = sent.records.iter().map(|r| r.wall_ms).collect();
        // There the host extrapolates the velocity (the device does where it keeps the particles).
        let host_extrapolation = stage_medians(&sent.records)
            .into_iter()
            .find(|&(stage, _)| stage == "extrapolate")
            .map_or(f64::NAN, |(_, ms)| ms);
        let size = format!("{n}x{n}x{n}");
        let r = |metric: &str, value: f64, unit: &str| {
            row("flip-gpu-dam-break", &size, metric, value, unit, &device)
        };
        let mut steps: Vec<f64> = records.iter().map(|r| r.wall_ms).collect();
        rows.push(r("step-time", median(&mut steps), "ms"));
        rows.push(r("step-time-particles-sent", median(&mut sent_steps), "ms"));
        rows.push(r(
            "stage-extrapolate-particles-sent",
            host_extrapolation,
            "ms",
        ));
        rows.push(r("particles-read-back", read_back_ms, "ms"));
        rows.push(r("particles", sim.particles().len() as f64, "count"));
        for (stage, ms) in stage_medians(&records) {
            rows.push(r(&format!("stage-{stage}"), ms, "ms"));
        }
        let mut iters: Vec<f64> = records
            .iter()
            .map(|r| r.scalar("pressure_iterations").unwrap_or(f64::NAN))
            .collect();
        rows.push(r("pressure-iterations", median(&mut iters), "count"));
        let part = |f: fn(&SolveTimes) -> f64| {
            let mut v: Vec<f64> = gpu_times.iter().map(f).collect();
            median(&mut v)
        };
        rows.push(r("gpu-solve-upload", part(|t| t.upload_ms), "ms"));
        rows.push(r("gpu-solve-build", part(|t| t.build_ms), "ms"));
        rows.push(r("gpu-solve-iterate", part(|t| t.iterate_ms), "ms"));
        rows.push(r("gpu-solve-record", part(|t| t.record_ms), "ms"));
        rows.push(r("gpu-solve-download", part(|t| t.download_ms), "ms"));
        // Kernel launches of both solves a step: their starts and iterations (those past the solution
        // included).
        rows.push(r(
            "gpu-solve-launches",
            part(|t| t.launches as f64),
            "count",
        ));
        // Volume corrections whose solution and displacement stayed on the device, per step.
        rows.push(r("gpu-solves-kept", part(|t| t.kept as f64), "count"));
        // Solves (the projection's, the volume correction's) whose right-hand side the particle device
        // formed, per step, and the right-hand sides the host sent, per cell.
        rows.push(r(
            "gpu-solve-rhs-from-device",
            part(|t| t.rhs_in_faces as f64),
            "count",
        ));
        rows.push(r(
            "gpu-solve-rhs-bytes-up-per-cell",
            part(|t| t.rhs_bytes_up as f64) / cells as f64,
            "B",
        ));
        let moved = |f: fn(&TransferTimes) -> f64| {
            let mut v: Vec<f64> = transfer_times.iter().map(f).collect();
            median(&mut v)
        };
        rows.push(r("gpu-transfer-upload", moved(|t| t.upload_ms), "ms"));
        rows.push(r("gpu-transfer-kernels", moved(|t| t.kernels_ms), "ms"));
        rows.push(r("gpu-transfer-download", moved(|t| t.download_ms), "ms"));
        // The grid fields sent to the particle pass a step, per cell.
        rows.push(r(
            "gpu-grid-bytes-up-per-cell",
            moved(|t| t.grid_bytes_up as f64) / cells as f64,
            "B",
        ));
        // Substeps a step whose projected velocity the device formed itself, which the host then did not
        // send.
        rows.push(r(
            "gpu-velocity-projections",
            moved(|t| t.projections as f64),
            "count",
        ));
        // Steps whose fluid volume and largest divergence the device tallied on its own copy of the grid,
        // the host's copy then projected only when the state is read.
        rows.push(r(
            "gpu-grid-tallies",
            moved(|t| t.grid_tallies as f64),
            "count",
        ));
        // The grid fields that the transfers read back a step, per cell.
        rows.push(r(
            "gpu-grid-bytes-down-per-cell",
            moved(|t| t.grid_bytes_down as f64) / cells as f64,
            "B",
        ));
        // The particle passes' own buffers hold particle arrays (36 B each, with a fifth spare) and the face
        // fields (12·D + 4 B per cell, the displacement's field included): their per-cell share apart from
        // their per-particle share. The scratch memory that they share with the solves (the sort's prefix
        // sums, 2ᴰ·4 B per cell; the Krylov vectors) counts once, per cell.
        let particles = sim.particles().len() as f64;
        let transfer_cell = (12 * 3 + 4) as f64;
        let transfer_bytes = transfer.lock().unwrap().bytes() as f64;
        let solver = dev.lock().unwrap();
        rows.push(r(
            "gpu-bytes-per-cell",
            (solver.bytes() + solver.scratch().bytes()) as f64 / cells as f64 + transfer_cell,
            "B",
        ));
        drop(solver);
        rows.push(r(
            "gpu-bytes-per-particle",
            (transfer_bytes - transfer_cell * cells as f64) / particles,
            "B",
        ));
        rows.push(r(
            "cpu-bytes-per-particle",
            FlipSim::<3>::bytes_per_particle(false) as f64,
            "B",
        ));
    }
    Ok(rows)
}

/// What [`timed_dam_break`] returns.
struct TimedSteps {
    sim: FlipSim<3>,
    /// Of each timed step: its record, the solves' times, the particle passes' times.
    records: Vec<StepRecord>,
    gpu_times: Vec<SolveTimes>,
    transfer_times: Vec<TransferTimes>,
    /// Reading the particles back after the steps, as for a frame's outputs (ms).
    read_back_ms: f64,
}

/// The dam break at `n³` on `dev` and `transfer`: [`WARMUP_STEPS`] steps, then `reps` timed.
fn timed_dam_break(
    n: usize,
    reps: usize,
    dev: &Arc<Mutex<GpuPoisson>>,
    transfer: &Arc<Mutex<GpuTransfer>>,
) -> Result<TimedSteps, BenchError> {
    let h = 1.0 / n as f64;
    let cfg = FlipConfig::<3> {
        resolution: [n; 3],
        cell_size: h,
        params: FlipParams {
            seeds_per_axis: 2,
            ..FlipParams::default()
        },
        ..FlipConfig::default()
    };
    let mut sim = FlipSim::<3>::new(cfg)?;
    sim.fill(
        &Shape::Box {
            min: DVec3::ZERO,
            max: DVec3::new(0.4, 0.6, 1.0),
        },
        [0.0; 3],
    );
    sim.set_pressure_device(Box::new(SharedPoisson(dev.clone())));
    sim.set_transfer_device(Box::new(SharedTransfer(transfer.clone())));
    // As `eddies run` sets it up: the particles stay on the device between frames.
    sim.read_particles_per_frame(true);
    let mut records = Vec::new();
    let mut gpu_times = Vec::new();
    let mut transfer_times = Vec::new();
    for i in 0..WARMUP_STEPS + reps {
        let dt = sim.max_dt(1.0);
        let rec = sim.step(dt)?;
        let times = dev.lock().unwrap().take_times();
        let moved = transfer.lock().unwrap().take_times();
        if i >= WARMUP_STEPS {
            records.push(rec);
            gpu_times.push(times);
            transfer_times.push(moved);
        }
    }
    // The particles' read-back that a frame's outputs take, after the timed steps.
    let start = Instant::now();
    sim.complete_records(&mut [])?;
    let read_back_ms = start.elapsed().as_secs_f64() * 1e3;
    Ok(TimedSteps {
        sim,
        records,
        gpu_times,
        transfer_times,
        read_back_ms,
    })
}

/// The solver table on the GPU for `mask`.
fn table(mask: Mask, quick: bool) -> Result<Vec<BenchRow>, BenchError> {
    let (dev, device) = device()?;
    let mut dev = dev.lock().unwrap();
    let sizes: &[usize] = if quick { &[32] } else { &[32, 64, 128, 256] };
    let mut rows = Vec::new();
    // Seconds per cell and iteration of each preconditioner at the size before.
    let mut rate = [None::<f64>; KINDS.len()];
    let mut iterations = [0usize; KINDS.len()];
    for &n in sizes {
        if !binds(&format!("flip-gpu-pressure-{}", mask.name()), n)? {
            continue;
        }
        let op = PoissonOperator::from_flags(&mask.flags(n), DomainBoundary::Solid)?;
        let b = rhs(&op);
        for (k, kind) in KINDS.into_iter().enumerate() {
            let cells = (n * n * n) as f64;
            // Iterations grow like n for the Krylov methods without multigrid.
            let growth = if kind == PreconditionerKind::Multigrid {
                1.0
            } else {
                2.0
            };
            if let Some(t) = rate[k]
                .map(|r| 3.0 * r * cells * growth * iterations[k].max(1) as f64)
                .filter(|&t| t > LONGEST_S)
            {
                eprintln!(
                    "note: flip-gpu-pressure-{} {} {n}³ skipped: about {t:.0} s on {device}",
                    mask.name(),
                    kind.name()
                );
                continue;
            }
            let params = PcgParams {
                tolerance: TOLERANCE,
                max_iterations: 20 * n,
            };
            let mut solver = PoissonSolver::new(op.clone(), kind, params)?;
            let name = format!("flip-gpu-pressure-{}-{}", mask.name(), kind.name());
            let failed = |source| BenchError::Pcg {
                preconditioner: kind.name(),
                n,
                source,
            };
            // A new operator for each solve, as a simulation's step has: the CPU's part of its setup (the
            // preconditioner's for Jacobi and Incomplete Poisson; the device builds the multigrid hierarchy).
            let mut solve = || -> Result<(eddies::linsolve::Info, SolveTimes, f64), BenchError> {
                let start = Instant::now();
                solver.set_operator(op.clone())?;
                let setup = start.elapsed().as_secs_f64() * 1e3;
                let mut x = vec![0.0; op.len()];
                let info = PoissonDevice::<3>::solve(&mut *dev, &solver, &b, &mut x)
                    .map_err(failed)?
                    .expect("the GPU runs this preconditioner");
                // As a simulation's solver remembers its last solve: the device's first batch is its length.
                solver.expect_iterations(Some(info.iterations));
                Ok((info, dev.take_times(), setup))
            };
            // One warm-up solve (pipelines, allocation), then the median of three.
            solve()?;
            let mut runs = Vec::new();
            for _ in 0..3 {
                runs.push(solve()?);
            }
            let info = runs[0].0.clone();
            let part = |f: fn(&SolveTimes) -> f64| {
                let mut v: Vec<f64> = runs.iter().map(|r| f(&r.1)).collect();
                median(&mut v)
            };
            let iterate = part(|t| t.iterate_ms);
            let setup = {
                let mut v: Vec<f64> = runs.iter().map(|r| r.2).collect();
                median(&mut v)
            };
            rate[k] = Some(iterate * 1e-3 / (cells * info.iterations.max(1) as f64));
            iterations[k] = info.iterations;
            let size = format!("{n}x{n}x{n}");
            let r = |metric: &str, value: f64, unit: &str| {
                row(&name, &size, metric, value, unit, &device)
            };
            rows.push(r("iterations", info.iterations as f64, "iterations"));
            rows.push(r("solve-time", iterate, "ms"));
            rows.push(r("record-time", part(|t| t.record_ms), "ms"));
            // Kernel launches of the solve (the start, and its batches of iterations).
            rows.push(r("launches", part(|t| t.launches as f64), "count"));
            rows.push(r("upload-time", part(|t| t.upload_ms), "ms"));
            rows.push(r("download-time", part(|t| t.download_ms), "ms"));
            if kind == PreconditionerKind::Multigrid {
                rows.push(r("gpu-build-time", part(|t| t.build_ms), "ms"));
            }
            rows.push(r("cpu-setup-time", setup, "ms"));
            rows.push(r(
                "gpu-bytes-per-cell",
                (dev.bytes() + dev.vector_bytes()) as f64 / cells,
                "B",
            ));
        }
    }
    Ok(rows)
}
