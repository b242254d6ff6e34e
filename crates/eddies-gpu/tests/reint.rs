//! The GPU backend of reintegration tracking against the method's invariants and the CPU backend.
//!
//! Every test needs a GPU adapter (Mesa's software Vulkan driver will do). Without one a test prints a
//! notice and passes, unless `EDDIES_REQUIRE_GPU=1` (as CI sets it), when it fails.

use std::sync::{Arc, OnceLock};

use eddies::reint::{
    Boundary, Emitter, Eos, InteriorState, ReintConfig, ReintParams, ReintSim, Sink, Substance,
    QUANTA_PER_REST_CELL,
};
use eddies::{Quantity, Shape, Simulation, StepRecord};
use eddies_gpu::reint::bytes_per_cell;
use eddies_gpu::{Gpu, ReintGpu};
use glam::DVec3;

/// The device shared by the tests, or `None` (after a notice) where there is none and none is required.
fn gpu() -> Option<Arc<Gpu>> {
    static GPU: OnceLock<Option<Arc<Gpu>>> = OnceLock::new();
    GPU.get_or_init(|| eddies_gpu::device_or_skip().map(Arc::new))
        .clone()
}

fn two_liquids() -> Vec<Substance> {
    vec![
        Substance::default(),
        Substance {
            rest_density: 800.0,
            color: [0.9, 0.3, 0.1],
        },
    ]
}

fn config<const D: usize>(n: usize, params: ReintParams, boundary: Boundary) -> ReintConfig<D> {
    let mut gravity = [0.0; D];
    gravity[1] = -9.81;
    ReintConfig {
        resolution: [n; D],
        cell_size: 1.0 / n as f64,
        boundary,
        gravity,
        params,
        substances: two_liquids(),
    }
}

/// A 2D dam of `n`² cells: substance 0 in the left 30 % of the width, 60 % high, moving right; substance 1
/// in a lower block on the right, moving left.
fn dam(n: usize, params: ReintParams, boundary: Boundary) -> ReintSim<2> {
    let mut sim = ReintSim::new(config::<2>(n, params, boundary)).unwrap();
    sim.fill(&Shape::box2([0.0, 0.0], [0.3, 0.6]), 0, 1.0, [0.5, 0.0]);
    sim.fill(&Shape::box2([0.6, 0.0], [1.0, 0.3]), 1, 1.0, [-0.5, 0.0]);
    sim
}

/// The dam with a ball obstacle in the flow's way, an emitter of substance 1 above it and a sink in the dam's corner.
fn busy_dam(n: usize) -> ReintSim<2> {
    let mut sim = ReintSim::new(config::<2>(n, ReintParams::default(), Boundary::Closed)).unwrap();
    sim.add_obstacle(Shape::Sphere {
        center: DVec3::new(0.5, 0.2, 0.0),
        radius: 0.12,
    });
    sim.fill(&Shape::box2([0.0, 0.0], [0.3, 0.6]), 0, 1.0, [0.5, 0.0]);
    sim.add_emitter(Emitter {
        shape: Shape::box2([0.45, 0.8], [0.55, 0.85]),
        substance: 1,
        velocity: [0.0, -1.0],
        density: 1.0,
        active: (0.0, f64::INFINITY),
    });
    sim.add_sink(Sink {
        shape: Shape::box2([0.0, 0.0], [0.1, 0.1]),
        rate: 20.0,
    });
    sim
}

/// Runs `steps` steps of `dt` on both backends.
fn run_both<const D: usize>(cpu: &mut ReintSim<D>, gpu: &mut ReintGpu<D>, steps: usize, dt: f64) {
    for _ in 0..steps {
        cpu.step(dt).unwrap();
        gpu.step(dt).unwrap();
    }
}

/// Largest difference between the two backends' states: positions (cells), velocities (relative to the
/// fastest particle) and masses (quanta).
fn differences<const D: usize>(a: &InteriorState<D>, b: &InteriorState<D>) -> (f32, f32, f32) {
    let worst = |x: &[Vec<f32>], y: &[Vec<f32>]| {
        x.iter()
            .zip(y)
            .flat_map(|(p, q)| p.iter().zip(q).map(|(u, v)| (u - v).abs()))
            .fold(0.0f32, f32::max)
    };
    let top = a
        .vel
        .iter()
        .flatten()
        .fold(0.0f32, |m, v| m.max(v.abs()))
        .max(1e-6);
    (
        worst(&a.pos, &b.pos),
        worst(&a.vel, &b.vel) / top,
        worst(&a.mass, &b.mass),
    )
}

/// The backends agree to what f32 arithmetic on any conforming device allows: WGSL's division and square
/// root may be a few ulp off the CPU's correctly rounded ones, and a fused multiply-add may round once
/// where the CPU rounds twice. A part of a box that differs in its last bit can round to a quantum more or
/// less, for at most 3^D parts per cell (27 quanta of the 4.2 million of a full cell), and the centres of
/// mass and velocities follow to about 1e-5. Mesa's software driver matches the CPU bit for bit.
fn assert_agree<const D: usize>(cpu: &ReintSim<D>, gpu: &ReintGpu<D>, what: &str) {
    let a = cpu.interior_state();
    let b = gpu.interior_state().unwrap();
    let (pos, vel, mass) = differences(&a, &b);
    assert!(
        pos <= 1e-4 && vel <= 1e-4 && mass <= 27.0,
        "{what}: the backends differ by {pos} cells in position, {vel} of the top speed in velocity, \
         {mass} quanta in mass"
    );
    // Mass totals are exact on both.
    assert_eq!(
        cpu.substance_masses(),
        gpu.substance_masses().unwrap(),
        "{what}"
    );
}

fn quanta<const D: usize>(state: &InteriorState<D>) -> Vec<f64> {
    state
        .mass
        .iter()
        .map(|m| m.iter().map(|&q| q as f64).sum())
        .collect()
}

#[test]
fn a_few_steps_agree_with_the_cpu_backend() {
    let Some(gpu) = gpu() else { return };
    let params = ReintParams {
        viscosity: 1e-3,
        ..Default::default()
    };
    let mut cpu = dam(64, params.clone(), Boundary::Closed);
    let mut dev = ReintGpu::new(gpu, dam(64, params, Boundary::Closed)).unwrap();
    run_both(&mut cpu, &mut dev, 1, 5e-4);
    assert_agree(&cpu, &dev, "after one step");
    run_both(&mut cpu, &mut dev, 9, 5e-4);
    assert_agree(&cpu, &dev, "after ten steps");
}

#[test]
fn every_equation_of_state_agrees_with_the_cpu_backend() {
    let Some(gpu) = gpu() else { return };
    for eos in [Eos::Quadratic, Eos::Tait, Eos::IdealGas] {
        for tension in [false, true] {
            let params = ReintParams {
                eos,
                tension,
                viscosity: 2e-3,
                ..Default::default()
            };
            let mut cpu = dam(48, params.clone(), Boundary::Closed);
            let mut dev = ReintGpu::new(gpu.clone(), dam(48, params, Boundary::Closed)).unwrap();
            run_both(&mut cpu, &mut dev, 10, 6e-4);
            assert_agree(&cpu, &dev, &format!("{eos:?}, tension {tension}"));
        }
    }
}

#[test]
fn open_walls_without_forces_agree_with_the_cpu_backend() {
    let Some(gpu) = gpu() else { return };
    for forces in [true, false] {
        let params = ReintParams {
            forces,
            ..Default::default()
        };
        let mut cpu = dam(40, params.clone(), Boundary::Open);
        let mut dev = ReintGpu::new(gpu.clone(), dam(40, params, Boundary::Open)).unwrap();
        let before = cpu.total_mass();
        run_both(&mut cpu, &mut dev, 60, 1e-3);
        assert_agree(&cpu, &dev, &format!("open walls, forces {forces}"));
        assert!(
            cpu.total_mass() < before,
            "mass leaves through the open floor"
        );
    }
}

#[test]
fn obstacles_emitters_and_sinks_agree_with_the_cpu_backend() {
    let Some(gpu) = gpu() else { return };
    let mut cpu = busy_dam(48);
    let mut dev = ReintGpu::new(gpu, busy_dam(48)).unwrap();
    run_both(&mut cpu, &mut dev, 40, 8e-4);
    assert_agree(&cpu, &dev, "obstacle, emitter and sink");
    // Solid cells hold nothing.
    let state = dev.interior_state().unwrap();
    let solid = |i: usize| {
        let (x, y) = ((i % 48) as f64 + 0.5, (i / 48) as f64 + 0.5);
        ((x / 48.0 - 0.5).powi(2) + (y / 48.0 - 0.2).powi(2)).sqrt() < 0.12
    };
    assert!((0..48 * 48)
        .filter(|&i| solid(i))
        .all(|i| state.mass.iter().all(|m| m[i] == 0.0)));
}

/// Mass is exact to the quantum over many steps with an emitter and a sink at work: what is there equals
/// what was there, plus what the emitter put in, minus what the sink took out, per substance — in the
/// state and in every step's record.
#[test]
fn mass_is_exact_with_emitters_and_sinks() {
    let Some(gpu) = gpu() else { return };
    let host = busy_dam(48);
    let units: Vec<f64> = two_liquids()
        .iter()
        .map(|s| s.rest_density as f64 / (48.0 * 48.0) / QUANTA_PER_REST_CELL as f64)
        .collect();
    let start = quanta(&host.interior_state());
    let mut dev = ReintGpu::new(gpu, host).unwrap();
    let mut records: Vec<StepRecord> = (0..300).map(|_| dev.step(8e-4).unwrap()).collect();
    assert!(
        records.iter().all(|r| r.quantities.is_empty()),
        "quantities come with the read-back"
    );
    dev.complete_records(&mut records).unwrap();
    let scalar = |r: &StepRecord, name: &str| match r.quantities.iter().find(|q| q.0 == name) {
        Some((_, Quantity::Scalar(x))) => *x,
        other => panic!("{name}: {other:?}"),
    };
    let per_substance = |r: &StepRecord| match r.quantities.iter().find(|q| q.0 == "substance_mass")
    {
        Some((_, Quantity::Vector(v))) => v.clone(),
        other => panic!("substance_mass: {other:?}"),
    };
    let end = quanta(&dev.interior_state().unwrap());
    let last = records.last().unwrap();
    // In quanta (whole numbers below 2⁵³, so the kg figures convert back exactly).
    let logged: Vec<f64> = per_substance(last)
        .iter()
        .zip(&units)
        .map(|(kg, u)| (kg / u).round())
        .collect();
    assert_eq!(logged, end, "the last record counts the state's quanta");
    let injected = (scalar(last, "mass_injected") / units[1]).round();
    let removed_kg = scalar(last, "mass_removed");
    assert!(
        injected > 0.0 && removed_kg > 0.0,
        "the emitter and the sink both acted: {injected} quanta in, {removed_kg} kg out"
    );
    // Substance 1 enters only through the emitter; both leave through the sink. Total balance in kg, to the
    // f64 rounding of the unit conversions.
    assert!(start[1] + injected >= end[1]);
    let balance = start.iter().zip(&units).map(|(q, u)| q * u).sum::<f64>()
        + scalar(last, "mass_injected")
        - removed_kg
        - end.iter().zip(&units).map(|(q, u)| q * u).sum::<f64>();
    assert!(balance.abs() < 1e-12, "mass balance off by {balance} kg");
    // And the device's accounting agrees with the CPU backend's. Over 300 steps next to an obstacle the
    // runs drift apart from last-bit differences (a device may fuse a multiply-add the CPU rounds twice), so
    // the amounts exchanged, which depend on the state, agree to 1e-4 rather than exactly.
    let mut cpu = busy_dam(48);
    for _ in 0..300 {
        cpu.step(8e-4).unwrap();
    }
    let (cpu_in, cpu_out) = cpu.mass_exchanged();
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-4 * a.abs().max(b.abs());
    let (a, b): (f64, f64) = (cpu_in.iter().sum(), scalar(last, "mass_injected"));
    assert!(close(a, b), "injected {a} vs {b}");
    let (a, b): (f64, f64) = (cpu_out.iter().sum(), removed_kg);
    assert!(close(a, b), "removed {a} vs {b}");
}

#[test]
fn runs_repeat_bit_for_bit() {
    let Some(gpu) = gpu() else { return };
    let run = || {
        let mut dev = ReintGpu::new(gpu.clone(), busy_dam(40)).unwrap();
        for _ in 0..80 {
            dev.step(8e-4).unwrap();
        }
        let mut records: Vec<StepRecord> = Vec::new();
        dev.complete_records(&mut records).unwrap();
        dev.checksum().unwrap()
    };
    assert_eq!(run(), run());
}

/// A checkpoint resumes on the device bit for bit: a run saved at step 30 and rebuilt from its scene takes
/// the next 30 steps to the same state and the same emitter and sink totals as the run that went on.
#[test]
fn a_resumed_run_repeats_the_original_bit_for_bit() {
    let Some(gpu) = gpu() else { return };
    let mut original = ReintGpu::new(gpu.clone(), busy_dam(40)).unwrap();
    for _ in 0..30 {
        original.step(8e-4).unwrap();
    }
    let saved = original.save_state().unwrap();
    for _ in 0..30 {
        original.step(8e-4).unwrap();
    }
    let mut resumed = ReintGpu::new(gpu, busy_dam(40)).unwrap();
    resumed.restore_state(&saved).unwrap();
    for _ in 0..30 {
        resumed.step(8e-4).unwrap();
    }
    assert_eq!(resumed.checksum().unwrap(), original.checksum().unwrap());
    assert_eq!(resumed.time().to_bits(), original.time().to_bits());
    let totals = |sim: &ReintGpu<2>| {
        let state = sim.save_state().unwrap();
        (
            state.f64s("mass_injected", 2).unwrap().to_vec(),
            state.f64s("mass_removed", 2).unwrap().to_vec(),
        )
    };
    let (injected, removed) = totals(&original);
    assert!(
        injected[1] > 0.0 && removed[0] > 0.0,
        "the emitter and the sink acted"
    );
    assert_eq!(totals(&resumed), (injected, removed));
}

/// A checkpoint of the CPU backend resumes on the GPU (and the GPU's on the CPU): the same arrays in the
/// same units; the runs then agree as the backends always do.
#[test]
fn checkpoints_move_between_the_backends() {
    let Some(gpu) = gpu() else { return };
    let mut cpu = busy_dam(40);
    for _ in 0..20 {
        cpu.step(8e-4).unwrap();
    }
    let mut dev = ReintGpu::new(gpu, busy_dam(40)).unwrap();
    dev.restore_state(&cpu.save_state().unwrap()).unwrap();
    assert_eq!(dev.checksum().unwrap(), cpu.checksum());
    run_both(&mut cpu, &mut dev, 10, 8e-4);
    assert_agree(&cpu, &dev, "ten steps after the CPU's checkpoint");
    let mut back = busy_dam(40);
    back.restore_state(&dev.save_state().unwrap()).unwrap();
    assert_eq!(back.checksum(), dev.checksum().unwrap());
    // The CPU sums kilograms step by step, the device whole quanta: the same totals to f64 rounding.
    let (a, b) = (back.mass_exchanged().0, cpu.mass_exchanged().0);
    assert!(
        a.iter()
            .zip(&b)
            .all(|(x, y)| (x - y).abs() <= 1e-12 * y.abs()),
        "injected {a:?} vs {b:?}"
    );
}

/// A scene symmetric about the vertical mid-line stays exactly symmetric: the sums run in mirror-symmetric
/// order, so a cell and its mirror image add the same numbers in the same pairs.
#[test]
fn a_mirror_symmetric_scene_stays_symmetric() {
    let Some(gpu) = gpu() else { return };
    let n = 40;
    let mut host = ReintSim::new(config::<2>(n, ReintParams::default(), Boundary::Closed)).unwrap();
    host.fill(&Shape::box2([0.3, 0.3], [0.7, 0.8]), 0, 1.0, [0.0, -1.0]);
    host.fill(&Shape::box2([0.0, 0.0], [0.2, 0.2]), 1, 1.0, [1.0, 0.0]);
    host.fill(&Shape::box2([0.8, 0.0], [1.0, 0.2]), 1, 1.0, [-1.0, 0.0]);
    let mut dev = ReintGpu::new(gpu, host).unwrap();
    for _ in 0..150 {
        dev.step(1e-3).unwrap();
    }
    let s = dev.interior_state().unwrap();
    for y in 0..n {
        for x in 0..n {
            let (i, j) = (y * n + x, y * n + (n - 1 - x));
            for m in &s.mass {
                assert_eq!(m[i], m[j], "mass at ({x}, {y})");
            }
            assert_eq!(s.pos[0][i], -s.pos[0][j], "x position at ({x}, {y})");
            assert_eq!(s.pos[1][i], s.pos[1][j], "y position at ({x}, {y})");
            assert_eq!(s.vel[0][i], -s.vel[0][j], "x velocity at ({x}, {y})");
            assert_eq!(s.vel[1][i], s.vel[1][j], "y velocity at ({x}, {y})");
        }
    }
}

/// The dam-break front (the rightmost cell of the bottom row holding fluid) after 1 s of simulated time lies
/// within two cells of the CPU backend's.
#[test]
fn the_dam_break_front_after_one_second_matches_the_cpu_backend() {
    let Some(gpu) = gpu() else { return };
    let n = 48;
    let single = |n| {
        let mut s = ReintSim::new(ReintConfig::<2> {
            substances: vec![Substance::default()],
            ..config::<2>(n, ReintParams::default(), Boundary::Closed)
        })
        .unwrap();
        s.fill(&Shape::box2([0.0, 0.0], [0.3, 0.6]), 0, 1.0, [0.0, 0.0]);
        s
    };
    let mut cpu = single(n);
    let mut dev = ReintGpu::new(gpu, single(n)).unwrap();
    // Below the CFL step of the sound speed: 0.5 cells at 10 m/s is 1.04 ms.
    let dt = 1.0 / 1000.0;
    run_both(&mut cpu, &mut dev, 1000, dt);
    let front = |s: &InteriorState<2>| {
        (0..n)
            .filter(|&x| s.mass[0][x] > 0.5 * QUANTA_PER_REST_CELL)
            .max()
            .unwrap() as i64
    };
    let (a, b) = (
        front(&cpu.interior_state()),
        front(&dev.interior_state().unwrap()),
    );
    assert!(a > 20, "the front has moved: at cell {a}");
    assert!(
        (a - b).abs() <= 2,
        "fronts at cells {a} (CPU) and {b} (GPU)"
    );
}

#[test]
fn three_dimensions_agree_with_the_cpu_backend() {
    let Some(gpu) = gpu() else { return };
    let build = || {
        let mut s =
            ReintSim::new(config::<3>(20, ReintParams::default(), Boundary::Closed)).unwrap();
        s.add_obstacle(Shape::Sphere {
            center: DVec3::new(0.6, 0.2, 0.5),
            radius: 0.15,
        });
        s.fill(
            &Shape::Box {
                min: DVec3::ZERO,
                max: DVec3::new(0.35, 0.6, 1.0),
            },
            0,
            1.0,
            [1.0, 0.0, 0.0],
        );
        s.fill(
            &Shape::Box {
                min: DVec3::new(0.8, 0.0, 0.0),
                max: DVec3::new(1.0, 0.3, 0.5),
            },
            1,
            1.0,
            [0.0, 0.0, 0.5],
        );
        s
    };
    let mut cpu = build();
    let mut dev = ReintGpu::new(gpu, build()).unwrap();
    run_both(&mut cpu, &mut dev, 25, 1e-3);
    assert_agree(&cpu, &dev, "3D");
}

/// Four substances in 3D away from obstacles (the variant whose force kernel does the bookkeeping): each
/// substance's mass is exact, and the state agrees with the CPU backend's.
#[test]
fn four_substances_in_three_dimensions_agree_with_the_cpu_backend() {
    let Some(gpu) = gpu() else { return };
    let build = || {
        let mut cfg = config::<3>(16, ReintParams::default(), Boundary::Closed);
        cfg.substances = (0..4)
            .map(|k| Substance {
                rest_density: 600.0 + 200.0 * k as f32,
                color: [0.5; 3],
            })
            .collect();
        let mut s = ReintSim::new(cfg).unwrap();
        for k in 0..4 {
            let x = 0.25 * k as f64;
            s.fill(
                &Shape::Box {
                    min: DVec3::new(x, 0.0, 0.0),
                    max: DVec3::new(x + 0.25, 0.3 + 0.1 * k as f64, 1.0),
                },
                k,
                1.0,
                [0.0, 0.0, 0.5 - 0.25 * k as f32],
            );
        }
        s
    };
    let mut cpu = build();
    let before = cpu.substance_masses();
    let mut dev = ReintGpu::new(gpu, build()).unwrap();
    run_both(&mut cpu, &mut dev, 20, 1.5e-3);
    assert_agree(&cpu, &dev, "four substances, 3D");
    assert_eq!(dev.substance_masses().unwrap(), before);
}

#[test]
fn an_impulse_pushes_as_on_the_cpu_backend() {
    let Some(gpu) = gpu() else { return };
    let mut cpu = dam(32, ReintParams::default(), Boundary::Closed);
    let mut dev = ReintGpu::new(gpu, dam(32, ReintParams::default(), Boundary::Closed)).unwrap();
    cpu.apply_impulse([0.15, 0.3], 0.2, [2.0, 1.0]);
    dev.apply_impulse([0.15, 0.3], 0.2, [2.0, 1.0]);
    // The weight is computed in f64 on the CPU and f32 on the device: 1e-6 of the push.
    let (a, b) = (cpu.interior_state(), dev.interior_state().unwrap());
    let worst = a
        .vel
        .iter()
        .flatten()
        .zip(b.vel.iter().flatten())
        .map(|(u, v)| (u - v).abs())
        .fold(0.0, f32::max);
    assert!(
        worst < 1e-6 * 64.0 * 2.0,
        "velocities differ by {worst} cells/s"
    );
    assert!(b.vel[0].iter().any(|&v| v > 0.5 * 32.0), "the push acted");
}

/// The device holds the state twice over and the deficits once: 44 bytes per cell in 2D and 60 in 3D with
/// one substance (`bytes_per_cell`), plus a quarter byte per cell of workgroup sums and a fixed log.
#[test]
fn device_memory_per_cell_is_within_budget() {
    let Some(gpu) = gpu() else { return };
    assert_eq!(bytes_per_cell(2, 1, false), 44);
    assert_eq!(bytes_per_cell(3, 1, false), 60);
    let fixed = 160 * 1024;
    let budget =
        |dim: usize, cells: usize| bytes_per_cell(dim, 1, false) * cells + cells / 4 + fixed;
    let mut host = ReintSim::new(ReintConfig::<2> {
        resolution: [256, 256],
        ..Default::default()
    })
    .unwrap();
    host.fill(&Shape::box2([0.0, 0.0], [0.3, 0.6]), 0, 1.0, [0.0, 0.0]);
    let dev = ReintGpu::new(gpu.clone(), host).unwrap();
    assert!(
        dev.memory_bytes() <= budget(2, 256 * 256),
        "{} bytes",
        dev.memory_bytes()
    );
    let host = ReintSim::new(ReintConfig::<3> {
        resolution: [48, 48, 48],
        ..Default::default()
    })
    .unwrap();
    let dev = ReintGpu::new(gpu, host).unwrap();
    assert!(
        dev.memory_bytes() <= budget(3, 48 * 48 * 48),
        "{} bytes",
        dev.memory_bytes()
    );
}
