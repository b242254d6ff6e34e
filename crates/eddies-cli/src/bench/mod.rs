//! `eddies bench`: a registry of named performance cases, printed as a table or as JSON Lines
//! (`{"bench", "size", "metric", "value", "unit", "threads", "device"}`), the rows of docs/PERFORMANCE.md.
//! `--backend gpu` runs the GPU cases ([`reint_gpu`], [`flip_gpu`], [`vpm_gpu`]) instead of the CPU ones.
//!
//! Each case sets up a simulation, takes [`WARMUP_STEPS`](case::WARMUP_STEPS) steps to warm caches and allocators, then times
//! single steps with `std::time::Instant` and reports the median, which is robust to the occasional slow step
//! caused by the operating system.
//!
//! The cases live in one file per family ([`reint`], [`flip`], [`pressure`], [`vpm`], [`vpm_poisson`]), each
//! built on the shared types and helpers of [`case`]; this module holds the registry and the command.

use std::io::Write;

use crate::error::CliError;
use crate::scene::Backend;
use crate::validate::{json_number, short_number};

pub mod case;
pub mod flip;
pub mod flip_gpu;
pub mod outputs;
pub mod pressure;
pub mod reint;
pub mod reint_gpu;
pub mod render;
pub mod vpm;
pub mod vpm_gpu;
pub mod vpm_poisson;

pub use case::{BenchCase, BenchRow, CPU};

/// Every benchmark, in a stable order.
pub fn cases() -> Vec<BenchCase> {
    let mut cases = reint::cases();
    cases.extend(flip::cases());
    cases.extend(pressure::cases());
    cases.extend(vpm::cases());
    cases.extend(vpm_poisson::cases());
    cases.extend(outputs::cases());
    cases.extend(render::cases());
    cases
}

/// One JSON line for a row, keys in the documented order.
pub fn json_line(r: &BenchRow) -> String {
    format!(
        "{{\"bench\":{},\"size\":{},\"metric\":{},\"value\":{},\"unit\":{},\"threads\":{},\"device\":{}}}",
        serde_json::Value::String(r.bench.clone()),
        serde_json::Value::String(r.size.clone()),
        serde_json::Value::String(r.metric.clone()),
        json_number(r.value),
        serde_json::Value::String(r.unit.clone()),
        r.threads,
        serde_json::Value::String(r.device.clone()),
    )
}

/// Runs the cases of `backend` whose name contains `filter`, printing rows as they arrive.
pub fn run(
    filter: Option<&str>,
    quick: bool,
    json: bool,
    backend: Backend,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let all = match backend {
        Backend::Cpu => cases(),
        Backend::Gpu => {
            let mut cases = reint_gpu::cases();
            cases.extend(flip_gpu::cases());
            cases.extend(vpm_gpu::cases());
            cases.extend(render::gpu_cases());
            cases
        }
    };
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
            "{:<width$}  {:>11}  {:<10}  {:>12}  {:<15}  threads  device",
            "bench", "size", "metric", "value", "unit"
        )
        .map_err(io)?;
    }
    for case in chosen {
        let rows = (case.run)(quick).map_err(|source| CliError::Bench {
            name: case.name,
            source: Box::new(source),
        })?;
        if backend == Backend::Gpu {
            print_profile(case.name);
        }
        for r in &rows {
            if json {
                writeln!(out, "{}", json_line(r)).map_err(io)?;
            } else {
                writeln!(
                    out,
                    "{:<width$}  {:>11}  {:<10}  {:>12}  {:<15}  {:>7}  {}",
                    r.bench,
                    r.size,
                    r.metric,
                    short_number(r.value),
                    r.unit,
                    r.threads,
                    r.device
                )
                .map_err(io)?;
            }
        }
        out.flush().map_err(io)?;
    }
    Ok(())
}

/// The device time of each kernel `case` launched, on stderr, where `EDDIES_GPU_PROFILE=1` asked for it.
fn print_profile(case: &str) {
    let Ok(gpu) = crate::setup::gpu() else {
        return;
    };
    let mut kernels = gpu.take_profile();
    if kernels.is_empty() {
        return;
    }
    kernels.sort_by(|a, b| b.2.total_cmp(&a.2));
    let total: f64 = kernels.iter().map(|k| k.2).sum();
    eprintln!(
        "device time of {case} by kernel ({total:.1} ms in all; {}):",
        eddies_gpu::PROFILE_VAR
    );
    for (name, launches, ms) in kernels {
        eprintln!(
            "  {name:<56} {launches:>8} launches {ms:>10.2} ms {:>9.1} us each",
            1e3 * ms / launches as f64
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            device: CPU.into(),
        };
        let v: serde_json::Value = serde_json::from_str(&json_line(&r)).unwrap();
        for key in [
            "bench", "size", "metric", "value", "unit", "threads", "device",
        ] {
            assert!(v.get(key).is_some(), "{key}");
        }
    }
}
