//! `eddies bench`: a registry of named performance cases, printed as a table or as JSON Lines
//! (`{"bench", "size", "metric", "value", "unit", "threads"}`), the rows of docs/PERFORMANCE.md.
//!
//! Each case sets up a simulation, takes [`WARMUP_STEPS`] steps to warm caches and allocators, then times
//! single steps with `std::time::Instant` and reports the median, which is robust to the occasional slow step
//! caused by the operating system.

use std::io::Write;
use std::time::Instant;

use eddies::flip::{FlipConfig, FlipSim};
use eddies::reint::{ReintConfig, ReintParams, ReintSim};
use eddies::{Shape, Simulation, StepRecord};
use glam::DVec3;

use crate::error::CliError;
use crate::validate::{json_number, short_number};

/// Steps taken before timing.
pub const WARMUP_STEPS: usize = 3;

/// One measured number.
#[derive(Clone, Debug, PartialEq)]
pub struct BenchRow {
    /// Case name.
    pub bench: String,
    /// Problem size, e.g. `1024x1024`.
    pub size: String,
    /// What was measured, e.g. `throughput`.
    pub metric: String,
    /// The value.
    pub value: f64,
    /// Its unit, e.g. `cell-updates/s`.
    pub unit: String,
    /// Worker threads used.
    pub threads: usize,
}

/// A registered benchmark.
#[derive(Clone, Copy, Debug)]
pub struct BenchCase {
    /// Unique name, `method-dim-what`.
    pub name: &'static str,
    /// One line: what is timed.
    pub description: &'static str,
    /// Runs the case; `quick` uses a smaller grid and fewer repetitions.
    pub run: fn(quick: bool) -> Result<Vec<BenchRow>, String>,
}

/// Every benchmark, in a stable order.
pub fn cases() -> Vec<BenchCase> {
    let mut cases = vec![
        BenchCase {
            name: "reint-2d-reintegrate",
            description: "reintegration alone (no forces, no gravity), 1024² (quick: 256²)",
            run: |q| reint_bench::<2>("reint-2d-reintegrate", if q { 256 } else { 1024 }, false, false, q),
        },
        BenchCase {
            name: "reint-2d-step",
            description:
                "a full reint step (SPH forces, gravity, reintegration), 1024² (quick: 256²)",
            run: |q| reint_bench::<2>("reint-2d-step", if q { 256 } else { 1024 }, true, false, q),
        },
        BenchCase {
            name: "reint-2d-reintegrate-full",
            description: "reintegration alone with fluid in every cell (no vacuum to skip), 1024² (quick: 256²)",
            run: |q| reint_bench::<2>("reint-2d-reintegrate-full", if q { 256 } else { 1024 }, false, true, q),
        },
        BenchCase {
            name: "reint-2d-step-full",
            description: "a full reint step with fluid in every cell, 1024² (quick: 256²)",
            run: |q| reint_bench::<2>("reint-2d-step-full", if q { 256 } else { 1024 }, true, true, q),
        },
        BenchCase {
            name: "reint-3d-reintegrate",
            description: "reintegration alone (no forces, no gravity), 128³ (quick: 48³)",
            run: |q| reint_bench::<3>("reint-3d-reintegrate", if q { 48 } else { 128 }, false, false, q),
        },
        BenchCase {
            name: "reint-3d-step",
            description:
                "a full reint step (SPH forces, gravity, reintegration), 128³ (quick: 48³)",
            run: |q| reint_bench::<3>("reint-3d-step", if q { 48 } else { 128 }, true, false, q),
        },
        BenchCase {
            name: "reint-3d-reintegrate-full",
            description: "reintegration alone with fluid in every cell, 128³ (quick: 48³)",
            run: |q| reint_bench::<3>("reint-3d-reintegrate-full", if q { 48 } else { 128 }, false, true, q),
        },
        BenchCase {
            name: "reint-3d-step-full",
            description: "a full reint step with fluid in every cell, 128³ (quick: 48³)",
            run: |q| reint_bench::<3>("reint-3d-step-full", if q { 48 } else { 128 }, true, true, q),
        },
        BenchCase {
            name: "flip-2d-dam-break",
            description: "a full FLIP step of a 2D dam break (MGPCG), 256x128 (quick: 64x32), per-stage times",
            run: |q| flip_bench::<2>("flip-2d-dam-break", if q { [64, 32, 0] } else { [256, 128, 0] }, q),
        },
        BenchCase {
            name: "flip-3d-dam-break-64",
            description: "a full FLIP step of a 3D dam break, 64³ cells, ~1M particles (quick: 24³), per-stage times",
            run: |q| flip_bench::<3>("flip-3d-dam-break-64", if q { [24; 3] } else { [64; 3] }, q),
        },
        BenchCase {
            name: "flip-3d-dam-break-1m",
            description: "a full FLIP step of a 3D dam break, 128x64x128 cells (1M), ~4M particles (quick: 32x16x32)",
            run: |q| flip_bench::<3>("flip-3d-dam-break-1m", if q { [32, 16, 32] } else { [128, 64, 128] }, q),
        },
    ];
    cases.extend(crate::bench_pressure::cases());
    cases.extend(crate::bench_vpm::cases());
    cases.extend(crate::bench_vpm_poisson::cases());
    cases
}

/// Median of the samples (they are sorted in place).
pub fn median(samples: &mut [f64]) -> f64 {
    samples.sort_by(f64::total_cmp);
    let n = samples.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        samples[n / 2]
    } else {
        0.5 * (samples[n / 2 - 1] + samples[n / 2])
    }
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
) -> Result<Vec<BenchRow>, String> {
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
    let mut sim = ReintSim::<D>::new(cfg).map_err(|e| e.to_string())?;
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
        sim.step(dt).map_err(|e| e.to_string())?;
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
        records.push(sim.step(dt).map_err(|e| e.to_string())?);
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

/// The median time of each stage over `records` (ms), stages in the order of the first record.
pub(crate) fn stage_medians(records: &[StepRecord]) -> Vec<(&'static str, f64)> {
    let Some(first) = records.first() else {
        return Vec::new();
    };
    first
        .stage_ms
        .iter()
        .map(|&(name, _)| {
            let mut v: Vec<f64> = records
                .iter()
                .map(|r| {
                    r.stage_ms
                        .iter()
                        .filter(|(n, _)| *n == name)
                        .map(|(_, t)| t)
                        .sum()
                })
                .collect();
            (name, median(&mut v))
        })
        .collect()
}

/// A dam break on a grid of `res` cells (`res[2]` unused in 2D) with cubic cells of 1/64 m·(128/nx): a
/// column over half the length and 90% of the height plus a shallow pool over the other half, about
/// 2ᴰ · 0.5 particles per cell. Times [`WARMUP_STEPS`] then 5 (quick: 3) steps at the CFL-1 step and reports
/// the median step, the median of each stage, the pressure share and the memory per particle and per cell.
fn flip_bench<const D: usize>(
    name: &str,
    res: [usize; 3],
    quick: bool,
) -> Result<Vec<BenchRow>, String> {
    let resolution: [usize; D] = std::array::from_fn(|k| res[k]);
    let h = 2.0 / resolution[0] as f64;
    let size: [f64; D] = std::array::from_fn(|k| resolution[k] as f64 * h);
    let cfg = FlipConfig::<D> {
        resolution,
        cell_size: h,
        ..FlipConfig::default()
    };
    let mut sim = FlipSim::<D>::new(cfg).map_err(|e| e.to_string())?;
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
        let rec = sim.step(dt).map_err(|e| e.to_string())?;
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

/// One JSON line for a row, keys in the documented order.
pub fn json_line(r: &BenchRow) -> String {
    format!(
        "{{\"bench\":{},\"size\":{},\"metric\":{},\"value\":{},\"unit\":{},\"threads\":{}}}",
        serde_json::Value::String(r.bench.clone()),
        serde_json::Value::String(r.size.clone()),
        serde_json::Value::String(r.metric.clone()),
        json_number(r.value),
        serde_json::Value::String(r.unit.clone()),
        r.threads
    )
}

/// Runs the cases whose name contains `filter`, printing rows as they arrive.
pub fn run(
    filter: Option<&str>,
    quick: bool,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let all = cases();
    let chosen: Vec<&BenchCase> = all
        .iter()
        .filter(|c| filter.is_none_or(|f| c.name.contains(f)))
        .collect();
    if chosen.is_empty() {
        let names: Vec<&str> = all.iter().map(|c| c.name).collect();
        return Err(CliError::input(
            format!("no benchmark matches \"{}\"", filter.unwrap_or("")),
            vec![format!("  benchmarks: {}", names.join(", "))],
        ));
    }
    let io = |e: std::io::Error| CliError::other(format!("cannot write to stdout: {e}"));
    // Cases may name their rows more precisely than the case (pressure-tank-mic0): leave room for that.
    let width = chosen.iter().map(|c| c.name.len() + 16).max().unwrap_or(5);
    if !json {
        writeln!(
            out,
            "{:<width$}  {:>11}  {:<10}  {:>12}  {:<15}  threads",
            "bench", "size", "metric", "value", "unit"
        )
        .map_err(io)?;
    }
    for case in chosen {
        let rows = (case.run)(quick)
            .map_err(|e| CliError::other(format!("benchmark {} failed: {e}", case.name)))?;
        for r in &rows {
            if json {
                writeln!(out, "{}", json_line(r)).map_err(io)?;
            } else {
                writeln!(
                    out,
                    "{:<width$}  {:>11}  {:<10}  {:>12}  {:<15}  {}",
                    r.bench,
                    r.size,
                    r.metric,
                    short_number(r.value),
                    r.unit,
                    r.threads
                )
                .map_err(io)?;
            }
        }
        out.flush().map_err(io)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), 2.5);
    }

    #[test]
    fn names_are_unique_and_json_has_documented_keys() {
        let cs = cases();
        let mut names: Vec<_> = cs.iter().map(|c| c.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), cs.len());
        let r = BenchRow {
            bench: "b".into(),
            size: "8x8".into(),
            metric: "throughput".into(),
            value: 2.0,
            unit: "cell-updates/s".into(),
            threads: 4,
        };
        let v: serde_json::Value = serde_json::from_str(&json_line(&r)).unwrap();
        for key in ["bench", "size", "metric", "value", "unit", "threads"] {
            assert!(v.get(key).is_some(), "{key}");
        }
    }
}
