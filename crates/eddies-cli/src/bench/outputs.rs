//! `eddies bench` cases of the outputs for other tools: what writing a 3D FLIP frame's VTK, PLY, surface mesh
//! and OpenVDB files and a checkpoint costs beside a step, and the surface mesh of a large level set.

use std::path::PathBuf;
use std::time::Instant;

use eddies::flip::{FlipConfig, FlipSim};
use eddies::mesh::{self, IsoSurface};
use eddies::{Shape, Simulation};
use glam::DVec3;

use super::case::{median, BenchCase, BenchError, BenchRow, CPU, WARMUP_STEPS};
use crate::output::checkpoint::{self, Position};
use crate::output::exports::Exports;
use crate::scene::Scene;

/// The output benchmarks.
pub fn cases() -> Vec<BenchCase> {
    vec![
        // A 3D FLIP dam break, 128³ cells, ~4M particles (quick: 32³): one step, then the frame's VTK + PLY +
        // surface mesh, its OpenVDB volume, and a checkpoint, each written to a temporary folder
        BenchCase {
            name: "outputs-3d-flip",
            run: |q| flip_frame(if q { 32 } else { 128 }),
        },
        // The surface mesh of a 256³ level set (quick: 96³): a ball over a pool
        BenchCase {
            name: "outputs-mesh-level-set",
            run: |q| level_set_mesh(if q { 96 } else { 256 }),
        },
    ]
}

/// A temporary folder, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Result<Self, BenchError> {
        let dir = std::env::temp_dir().join(format!("eddies-bench-outputs-{}", std::process::id()));
        std::fs::create_dir_all(&dir)
            .map_err(|e| BenchError::Output(format!("{}: {e}", dir.display())))?;
        Ok(Self(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn row(name: &str, size: &str, metric: &str, value: f64, unit: &str) -> BenchRow {
    BenchRow {
        bench: name.to_string(),
        size: size.to_string(),
        metric: metric.to_string(),
        value,
        unit: unit.to_string(),
        threads: rayon::current_num_threads(),
        device: CPU.into(),
    }
}

/// The dam: a column over 0.4 × 0.6 × 1 of an `n`³ box, 8 particles per cell. Times a step (median of
/// 3 after the warm-up), then writing frame files of each kind (median of 3 each), in ms, and the files'
/// share of the step.
fn flip_frame(n: usize) -> Result<Vec<BenchRow>, BenchError> {
    let name = "outputs-3d-flip";
    let size = format!("{n}x{n}x{n}");
    let h = 1.0 / n as f64;
    let mut sim = FlipSim::<3>::new(FlipConfig {
        resolution: [n; 3],
        cell_size: h,
        ..FlipConfig::default()
    })?;
    let column = Shape::Box {
        min: DVec3::ZERO,
        max: DVec3::new(0.4, 0.6, 1.0),
    };
    sim.fill(&column, [0.0; 3]);
    let mut steps = Vec::new();
    for i in 0..WARMUP_STEPS + 3 {
        let rec = sim.step(sim.max_dt(1.0))?;
        if i >= WARMUP_STEPS {
            steps.push(rec.wall_ms);
        }
    }
    let step = median(&mut steps);
    let scratch = Scratch::new()?;
    let exports = |keys: &str| -> Result<Exports, BenchError> {
        let scene: Scene = toml::from_str(&format!("method = \"flip\"\ndim = 3\n[output]\n{keys}"))
            .map_err(|e| BenchError::Output(e.to_string()))?;
        Ok(Exports::new(&scene, 0))
    };
    let timed = |keys: &str| -> Result<f64, BenchError> {
        let mut e = exports(keys)?;
        let mut samples = Vec::new();
        for frame in 0..3 {
            let start = Instant::now();
            e.write(&sim, frame, &scratch.0)
                .map_err(|e| BenchError::Output(e.to_string()))?;
            samples.push(start.elapsed().as_secs_f64() * 1e3);
        }
        Ok(median(&mut samples))
    };
    let vtk = timed("vtk = true")?;
    let ply = timed("ply = true")?;
    let surface = timed("mesh = \"ply\"")?;
    let vdb = timed("vdb = true")?;
    let mut ckpt = Vec::new();
    for frame in 0..3 {
        let start = Instant::now();
        let state = sim.save_state()?;
        let position = Position {
            frames_done: frame,
            frame_start_step: sim.steps(),
        };
        checkpoint::write(&scratch.0, "bench", "", position, state)
            .map_err(|e| BenchError::Output(e.to_string()))?;
        ckpt.push(start.elapsed().as_secs_f64() * 1e3);
    }
    let checkpoint_ms = median(&mut ckpt);
    let bytes = std::fs::metadata(scratch.0.join("checkpoint_00002.ckpt"))
        .map(|m| m.len() as f64)
        .unwrap_or(f64::NAN);
    let particles = sim.particles().len() as f64;
    Ok(vec![
        row(name, &size, "particles", particles, "count"),
        row(name, &size, "step-time", step, "ms"),
        row(name, &size, "write-vtk", vtk, "ms"),
        row(name, &size, "write-ply", ply, "ms"),
        row(name, &size, "write-mesh", surface, "ms"),
        row(
            name,
            &size,
            "vtk+ply+mesh-share",
            100.0 * (vtk + ply + surface) / step,
            "%",
        ),
        row(name, &size, "write-vdb", vdb, "ms"),
        row(name, &size, "checkpoint", checkpoint_ms, "ms"),
        row(
            name,
            &size,
            "checkpoint-size",
            bytes / particles,
            "B/particle",
        ),
    ])
}

/// The surface of a level set on an `n`³ grid: a ball of radius 0.2 over a pool 0.3 deep in a unit box,
/// the minimum of their signed distances. Median of 3 extractions after one, in ms, and the triangles.
fn level_set_mesh(n: usize) -> Result<Vec<BenchRow>, BenchError> {
    let name = "outputs-mesh-level-set";
    let size = format!("{n}x{n}x{n}");
    let h = 1.0 / n as f64;
    let mut phi = Vec::with_capacity(n * n * n);
    for k in 0..n {
        for j in 0..n {
            for i in 0..n {
                let p = DVec3::new(i as f64 + 0.5, j as f64 + 0.5, k as f64 + 0.5) * h;
                let ball = (p - DVec3::new(0.5, 0.65, 0.5)).length() - 0.2;
                let pool = p.y - 0.3;
                phi.push(ball.min(pool) as f32);
            }
        }
    }
    let params = IsoSurface::default();
    let extract = || mesh::extract(&phi, [n; 3], h, [0.0; 3], &params);
    let mut triangles = extract()
        .map_err(|e| BenchError::Output(e.to_string()))?
        .triangles
        .len();
    let mut samples = Vec::new();
    for _ in 0..3 {
        let start = Instant::now();
        triangles = extract()
            .map_err(|e| BenchError::Output(e.to_string()))?
            .triangles
            .len();
        samples.push(start.elapsed().as_secs_f64() * 1e3);
    }
    Ok(vec![
        row(name, &size, "extract", median(&mut samples), "ms"),
        row(name, &size, "triangles", triangles as f64, "count"),
    ])
}
