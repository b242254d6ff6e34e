//! What every benchmark family shares: the row and case types, the warm-up count, and the helpers that
//! time steps and turn them into rows (medians, per-stage medians).

use std::time::Instant;

use eddies::StepRecord;

pub use crate::error::BenchError;

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
    /// Where it ran: [`CPU`], or the GPU adapter's name.
    pub device: String,
}

/// The device of rows measured on the CPU.
pub const CPU: &str = "cpu";

/// A registered benchmark; a comment above each one in the registry says what it times.
#[derive(Clone, Copy, Debug)]
pub struct BenchCase {
    /// Unique name, `method-dim-what`.
    pub name: &'static str,
    /// Runs the case; `quick` uses a smaller grid and fewer repetitions.
    pub run: fn(quick: bool) -> Result<Vec<BenchRow>, BenchError>,
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

/// Median seconds of `reps` runs of `f` after one warm-up run.
pub(super) fn time(reps: usize, mut f: impl FnMut()) -> f64 {
    f();
    let mut samples: Vec<f64> = (0..reps)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .collect();
    median(&mut samples)
}

/// A row of case `bench` measured with the current worker threads.
pub(super) fn row(bench: &str, size: String, metric: &str, value: f64, unit: &str) -> BenchRow {
    BenchRow {
        bench: bench.to_string(),
        size,
        metric: metric.to_string(),
        value,
        unit: unit.to_string(),
        threads: rayon::current_num_threads(),
        device: CPU.into(),
    }
}

/// The median time of each stage over `records` (ms), stages in the order of the first record.
pub(super) fn stage_medians(records: &[StepRecord]) -> Vec<(&'static str, f64)> {
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

/// Rows `step` (the median wall time of `records`) and one per stage (its median), in ms.
pub(super) fn step_rows(bench: &str, size: &str, records: &[StepRecord]) -> Vec<BenchRow> {
    let mut walls: Vec<f64> = records.iter().map(|r| r.wall_ms).collect();
    let mut rows = vec![row(
        bench,
        size.to_string(),
        "step",
        median(&mut walls),
        "ms",
    )];
    for (stage, ms) in stage_medians(records) {
        rows.push(row(bench, size.to_string(), stage, ms, "ms"));
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), 2.5);
    }
}
