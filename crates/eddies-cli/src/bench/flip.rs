//! `eddies bench` cases of PIC/FLIP: full steps of a dam break in 2D and 3D, with the per-stage times, the
//! pressure solve's share and iterations, and the memory per particle and per cell.

use eddies::flip::{FlipConfig, FlipSim};
use eddies::{Shape, Simulation};
use glam::DVec3;

use super::case::{median, stage_medians, BenchCase, BenchError, BenchRow, CPU, WARMUP_STEPS};

/// The FLIP benchmarks.
pub fn cases() -> Vec<BenchCase> {
    vec![
        // A full FLIP step of a 2D dam break (MGPCG), 256x128 (quick: 64x32), per-stage times
        BenchCase {
            name: "flip-2d-dam-break",
            run: |q| {
                flip_bench::<2>(
                    "flip-2d-dam-break",
                    if q { [64, 32, 0] } else { [256, 128, 0] },
                    q,
                )
            },
        },
        // A full FLIP step of a 3D dam break, 64³ cells, ~1M particles (quick: 24³), per-stage times
        BenchCase {
            name: "flip-3d-dam-break-64",
            run: |q| flip_bench::<3>("flip-3d-dam-break-64", if q { [24; 3] } else { [64; 3] }, q),
        },
        // A full FLIP step of a 3D dam break, 128x64x128 cells (1M), ~4M particles (quick: 32x16x32)
        BenchCase {
            name: "flip-3d-dam-break-1m",
            run: |q| {
                flip_bench::<3>(
                    "flip-3d-dam-break-1m",
                    if q { [32, 16, 32] } else { [128, 64, 128] },
                    q,
                )
            },
        },
    ]
}

/// A dam break on a grid of `res` cells (`res[2]` unused in 2D) with cubic cells of 1/64 m·(128/nx): a
/// column over half the length and 90% of the height plus a shallow pool over the other half, about
/// 2ᴰ · 0.5 particles per cell. Times [`WARMUP_STEPS`] then 5 (quick: 3) steps at the CFL-1 step and reports
/// the median step, the median of each stage, the pressure share and the memory per particle and per cell.
fn flip_bench<const D: usize>(
    name: &str,
    res: [usize; 3],
    quick: bool,
) -> Result<Vec<BenchRow>, BenchError> {
    let resolution: [usize; D] = std::array::from_fn(|k| res[k]);
    let h = 2.0 / resolution[0] as f64;
    let size: [f64; D] = std::array::from_fn(|k| resolution[k] as f64 * h);
    let cfg = FlipConfig::<D> {
        resolution,
        cell_size: h,
        ..FlipConfig::default()
    };
    let mut sim = FlipSim::<D>::new(cfg)?;
    let boxed = |lo: [f64; 3], hi: [f64; 3]| {
        if D == 2 {
            Shape::box2([lo[0], lo[1]], [hi[0], hi[1]])
        } else {
            Shape::Box {
                min: DVec3::from_array(lo),
                max: DVec3::from_array(hi),
            }
        }
    };
    let depth = if D == 3 { size[D - 1] } else { 1.0 };
    sim.fill(
        &boxed([0.0; 3], [0.5 * size[0], 0.9 * size[1], depth]),
        [0.0; D],
    );
    sim.fill(
        &boxed([0.5 * size[0], 0.0, 0.0], [size[0], 0.1 * size[1], depth]),
        [0.0; D],
    );
    let mut records = Vec::new();
    let reps = if quick { 3 } else { 5 };
    for i in 0..WARMUP_STEPS + reps {
        let dt = sim.max_dt(1.0);
        let rec = sim.step(dt)?;
        if i >= WARMUP_STEPS {
            records.push(rec);
        }
    }
    let cells: usize = resolution.iter().product();
    let particles = sim.particles().len();
    let size = resolution.map(|n| n.to_string()).join("x");
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
    let mut steps: Vec<f64> = records.iter().map(|r| r.wall_ms).collect();
    let step = median(&mut steps);
    let mut rows = vec![
        row("step-time", step, "ms"),
        row("particles", particles as f64, "count"),
        row("throughput", cells as f64 / (step * 1e-3), "cell-updates/s"),
    ];
    for (stage, ms) in stage_medians(&records) {
        rows.push(row(&format!("stage-{stage}"), ms, "ms"));
    }
    let mut shares: Vec<f64> = records
        .iter()
        .map(|r| {
            let p: f64 = r
                .stage_ms
                .iter()
                .filter(|(n, _)| *n == "project")
                .map(|(_, t)| t)
                .sum();
            p / r.wall_ms
        })
        .collect();
    rows.push(row("pressure-share", 100.0 * median(&mut shares), "%"));
    let mut subs: Vec<f64> = records.iter().map(|r| r.substeps as f64).collect();
    rows.push(row("substeps-per-step", median(&mut subs), "count"));
    let mut iters: Vec<f64> = records
        .iter()
        .map(|r| r.scalar("pressure_iterations").unwrap_or(f64::NAN))
        .collect();
    rows.push(row("pressure-iterations", median(&mut iters), "count"));
    rows.push(row(
        "bytes-per-particle",
        FlipSim::<D>::bytes_per_particle(false) as f64,
        "B",
    ));
    rows.push(row(
        "bytes-per-cell",
        FlipSim::<D>::bytes_per_cell() as f64,
        "B",
    ));
    rows.push(row(
        "memory",
        sim.memory_bytes() as f64 / (1u64 << 20) as f64,
        "MiB",
    ));
    Ok(rows)
}
