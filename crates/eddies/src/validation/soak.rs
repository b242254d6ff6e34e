//! Soak runs for `eddies validate --soak`: long runs of each method on small grids that check, at intervals
//! and at the end, that the method's invariant holds and that the process's memory stays flat. They catch
//! slow drifts and leaks that the short validation cases cannot see. Not part of `cargo test` or CI: the
//! three runs take several minutes.

use super::reint::violent_dam_break_2d;
use super::vpm::add_tube_and_noise;
use super::Measurement;
use crate::flip::{FlipConfig, FlipSim};
use crate::shape::Shape;
use crate::sim::Simulation;
use crate::vpm::{VelocityMethod, VpmParams, VpmSim};

/// A registered soak run: one long simulation that yields several rows (its invariant, its memory).
#[derive(Clone, Copy, Debug)]
pub struct SoakCase {
    /// Unique name, `soak/method`; the rows it yields start with it.
    pub name: &'static str,
    /// One line: what is run and what is checked.
    pub description: &'static str,
    /// Runs it; `quick` takes a tenth of the steps (to try the soak itself, not to soak).
    pub run: fn(quick: bool) -> Vec<Measurement>,
}

/// Number of checks over a run: after the warm-up (the first of them) and at every twentieth of it.
const CHECKS: usize = 20;

/// Largest growth of the resident memory allowed from the end of the warm-up to any later check (MiB). The
/// runs allocate all their buffers in the first steps (the methods keep scratch in the solver and never
/// reallocate per step), so a real leak of even 100 bytes a step would add 10 MiB over 10⁵ steps. The bound
/// allows for the allocator's arenas and page-granular accounting (a few pages per worker thread).
pub const MEMORY_GROWTH_MIB: f64 = 2.0;

/// The soak runs, in a stable order (listed by [`crate::validation::soak_cases`]).
pub fn cases() -> Vec<SoakCase> {
    vec![
        SoakCase {
            name: "soak/reint",
            description: "10⁵ steps of the violent two-liquid dam break on 32²: each substance's mass (whole \
                          quanta, drift exactly 0) and the resident memory, every 5·10³ steps",
            run: reint_soak,
        },
        SoakCase {
            name: "soak/flip",
            description: "10⁴ steps of a 2D FLIP dam break on 64 × 32: liquid volume within 2% of the \
                          column's, and the resident memory, every 500 steps",
            run: flip_soak,
        },
        SoakCase {
            name: "soak/vpm",
            description: "10⁴ steps of a vortex tube in noise (1200 vortons, treecode, PSE, no stretching): \
                          relative change of Σ ω V, and the resident memory, every 500 steps",
            run: vpm_soak,
        },
    ]
}

/// The resident memory of this process (MiB), from `VmRSS` in `/proc/self/status`; `None` where there is no
/// such file (outside Linux) or it cannot be read.
pub fn resident_memory_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// What a soak loop saw: the worst deviation of the invariant over all checks, and the largest growth of the
/// resident memory after the warm-up (`None` when it cannot be read).
struct Soaked {
    worst: f64,
    memory_growth_mib: Option<f64>,
}

/// Runs `steps` calls of `step` on `sim`, evaluating `deviation` (≥ 0, the invariant's error) and the resident memory
/// at [`CHECKS`] evenly spaced points, the first of which ends the warm-up.
fn soak_loop<S>(
    sim: &mut S,
    steps: usize,
    mut step: impl FnMut(&mut S),
    mut deviation: impl FnMut(&S) -> f64,
) -> Soaked {
    let every = (steps / CHECKS).max(1);
    let mut worst: f64 = 0.0;
    let mut warm: Option<f64> = None;
    let mut growth: Option<f64> = None;
    for i in 1..=steps {
        step(sim);
        if i % every == 0 || i == steps {
            worst = worst.max(deviation(sim));
            match (warm, resident_memory_mib()) {
                (None, Some(rss)) => {
                    warm = Some(rss);
                    growth = Some(0.0);
                }
                (Some(w), Some(rss)) => growth = growth.map(|g| g.max(rss - w)),
                (_, None) => {}
            }
        }
    }
    Soaked {
        worst,
        memory_growth_mib: growth,
    }
}

/// The memory row of a soak run.
fn memory_row(name: &str, soaked: &Soaked) -> Measurement {
    match soaked.memory_growth_mib {
        Some(g) => Measurement::at_most(name, g, MEMORY_GROWTH_MIB, "MiB"),
        None => Measurement::not_measured(name, MEMORY_GROWTH_MIB, "MiB"),
    }
}

fn reint_soak(quick: bool) -> Vec<Measurement> {
    let steps = if quick { 10_000 } else { 100_000 };
    let mut sim = violent_dam_break_2d(32);
    let before = sim.substance_masses();
    let soaked = soak_loop(
        &mut sim,
        steps,
        |s| {
            let dt = s.max_dt(0.8);
            s.step(dt).expect("the soak scene diverged");
        },
        |s| {
            before
                .iter()
                .zip(&s.substance_masses())
                .map(|(b, a)| ((a - b) / b).abs())
                .fold(0.0, f64::max)
        },
    );
    vec![
        // Masses are whole quanta summed exactly in f64: any drift at all is a bug.
        Measurement::at_most("soak/reint-mass", soaked.worst, 0.0, "1"),
        memory_row("soak/reint-memory", &soaked),
    ]
}

fn flip_soak(quick: bool) -> Vec<Measurement> {
    let steps = if quick { 1000 } else { 10_000 };
    let n = 64;
    let h = 1.0 / n as f64;
    let cfg = FlipConfig::<2> {
        resolution: [n, n / 2],
        cell_size: h,
        ..Default::default()
    };
    let mut sim = FlipSim::new(cfg).expect("valid configuration");
    let column = [0.25, 0.375];
    sim.fill(&Shape::box2([0.0, 0.0], column), [0.0, 0.0]);
    let v0 = column[0] * column[1];
    let soaked = soak_loop(
        &mut sim,
        steps,
        |s| {
            let dt = s.max_dt(1.0);
            s.step(dt).expect("the soak scene diverged");
        },
        |s| (s.fluid_volume() / v0 - 1.0).abs(),
    );
    vec![
        // The bound for the 3D dam break, kept over a run 30 times as long.
        Measurement::at_most("soak/flip-volume", soaked.worst, 0.02, "1"),
        memory_row("soak/flip-memory", &soaked),
    ]
}

fn vpm_soak(quick: bool) -> Vec<Measurement> {
    let steps = if quick { 1000 } else { 10_000 };
    let mut sim = VpmSim::new(VpmParams {
        velocity: VelocityMethod::TreeVortons,
        stretching: false,
        viscosity: 1e-3,
        ..Default::default()
    })
    .expect("valid parameters");
    add_tube_and_noise(&mut sim, 900, 300);
    let before = sim.total_vorticity();
    let soaked = soak_loop(
        &mut sim,
        steps,
        |s| {
            s.step(0.01).expect("the soak scene diverged");
        },
        |s| (s.total_vorticity() - before).length() / before.length(),
    );
    vec![
        // PSE exchanges vorticity antisymmetrically per pair, so Σ ω V changes by rounding only: about 1e-16
        // relative per step, a random walk to ~1e-14 over 10⁴ steps. 1e-6 is the 40-step case's bound, which
        // any real leak of vorticity (a lost or doubled vorton, a one-sided exchange) exceeds at once.
        Measurement::at_most("soak/vpm-vorticity", soaked.worst, 1e-6, "1"),
        memory_row("soak/vpm-memory", &soaked),
    ]
}
