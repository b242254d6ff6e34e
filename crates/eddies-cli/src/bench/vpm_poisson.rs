//! `eddies bench` cases of the Poisson velocity technique and buoyancy (Gourlay parts 8 and 20): part 20's
//! per-stage table on the `dye-drop` scene, and the crossover of the velocity techniques with the vorton count.

use std::time::Instant;

use eddies::vpm::init::random_vortons;
use eddies::vpm::{VelocityMethod, VpmParams, VpmSim};

use super::case::{median, row, step_rows, BenchCase, BenchError, BenchRow, WARMUP_STEPS};
use crate::scenes;
use crate::{load, render, setup};

/// The Poisson and buoyancy benchmarks.
pub fn cases() -> Vec<BenchCase> {
    vec![
        // The dye-drop scene (16k vortons, 20k tracers, Poisson technique on 32³, baroclinic): ms per step
        // and per stage (part 20's table), and the frame's render
        BenchCase {
            name: "vpm-dye-drop",
            run: dye_drop,
        },
        // One velocity evaluation at N vortons (10³ to 10⁵; quick: to 10⁴) by direct sum, treecode at
        // vortons, treecode at grid points and the Poisson technique (32³ grid)
        BenchCase {
            name: "vpm-velocity-crossover",
            run: crossover,
        },
    ]
}

/// Part 20's table: the built-in `dye-drop` scene after a few frames' worth of steps (the ball has started
/// to roll up), each stage's median over the timed steps, and the time to render a frame of its tracers.
fn dye_drop(quick: bool) -> Result<Vec<BenchRow>, BenchError> {
    let builtin = scenes::find("dye-drop").ok_or(BenchError::MissingScene("dye-drop"))?;
    let src = load::SceneSource {
        label: builtin.label(),
        name: builtin.name.to_string(),
        text: builtin.source.to_string(),
    };
    let scene = load::load(&src, &[])?.scene;
    let mut sim = setup::build(&scene)?.sim;
    let dt = 0.01;
    for _ in 0..WARMUP_STEPS + if quick { 0 } else { 20 } {
        sim.step(dt)?;
    }
    let steps = if quick { 5 } else { 20 };
    let mut records = Vec::new();
    for _ in 0..steps {
        records.push(sim.step(dt)?);
    }
    let size = "16k+20k".to_string();
    let mut rows = step_rows("vpm-dye-drop", &size, &records);
    let mut frame = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let picture = render::render_particles(sim.as_ref(), &scene)?;
        frame.push(t.elapsed().as_secs_f64() * 1e3);
        std::hint::black_box(picture.nx);
    }
    rows.push(row("vpm-dye-drop", size, "frame", median(&mut frame), "ms"));
    Ok(rows)
}

/// Milliseconds of one velocity evaluation (no gradient) at `n` random vortons by `method`, median of 3.
fn evaluation_ms(method: VelocityMethod, n: usize) -> Result<f64, BenchError> {
    let mut sim = VpmSim::new(VpmParams {
        velocity: method,
        ..VpmParams::default()
    })?;
    let (p, a, s) = random_vortons(n, 7);
    let v = sim.vortons_mut();
    for i in 0..n {
        let volume = 1e-6;
        v.push(p[i], a[i] / volume, s[i], volume);
    }
    let mut samples: Vec<f64> = (0..4)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(sim.vorton_velocities());
            t.elapsed().as_secs_f64() * 1e3
        })
        .skip(1)
        .collect();
    Ok(median(&mut samples))
}

fn crossover(quick: bool) -> Result<Vec<BenchRow>, BenchError> {
    let sizes: &[usize] = if quick {
        &[1_000, 10_000]
    } else {
        &[1_000, 3_000, 10_000, 30_000, 100_000]
    };
    let mut rows = Vec::new();
    for &n in sizes {
        for method in [
            VelocityMethod::DirectVortons,
            VelocityMethod::TreeVortons,
            VelocityMethod::TreeGrid,
            VelocityMethod::Poisson,
        ] {
            let ms = evaluation_ms(method, n)?;
            rows.push(row(
                "vpm-velocity-crossover",
                n.to_string(),
                method.name(),
                ms,
                "ms",
            ));
        }
    }
    Ok(rows)
}
