//! The Poisson velocity technique (Gourlay part 20) and buoyancy (part 8) against their
//! references. The validation cases are the ones `eddies validate` prints (setups in
//! `src/validation/vpm_poisson.rs`); the other tests check heat, the scenes' building blocks and threads.

use eddies::par;
use eddies::validation::vpm_poisson::{
    ball_acceleration, ball_acceleration_at, ball_acceleration_by, ball_jerk,
    decimation_difference, manufactured_errors, ring_velocity_error, ring_velocity_on,
};
use eddies::vpm::{
    Ball, Block, BuoyancyParams, Decimation, HeatSource, PotentialBoundary, Splat, VelocityMethod,
    VpmParams, VpmSim,
};
use eddies::Simulation;
use glam::DVec3;

use crate::common::assert_passes;

/// The vector Poisson solve with exact boundary values converges at second order: the max error falls by
/// about 4 per halving of the spacing (at least 3.5 allows the pre-asymptotic 16³ grid).
#[test]
fn vector_poisson_converges_at_second_order() {
    let e = manufactured_errors(&[16, 32, 64]);
    println!("max errors at 16³, 32³, 64³: {e:?}");
    assert_passes("vpm/vector-poisson-second-order");
}

/// A device (the GPU backend's seam) that takes no problem: the Poisson technique's device path then solves
/// each component by MGPCG on this CPU, the path a GPU takes with the same operator and stopping rule.
struct Declines;

impl eddies::linsolve::PoissonDevice<3> for Declines {
    fn solve(
        &mut self,
        _: &eddies::linsolve::PoissonSolver<3>,
        _: &[f64],
        _: &mut [f64],
    ) -> Result<Option<eddies::linsolve::Info>, eddies::linsolve::SolveError> {
        Ok(None)
    }
}

/// The vector Poisson solve by MGPCG per component (the device path) gives the box multigrid's velocity: both
/// stop at a residual of 1e-8 of the boundary values' (the validation setting), so the two grid velocities
/// agree far below the technique's own error against Biot–Savart (2.4% RMS at 32³): within 1e-5 RMS
/// (measured: 4e-9), and that error is the same to 1e-6.
#[test]
fn the_device_path_solves_as_the_box_multigrid_does() {
    use eddies::vpm::poisson::SharedPoissonDevice;
    use eddies::vpm::PoissonParams;
    let params = PoissonParams {
        tolerance: 1e-8,
        ..Default::default()
    };
    let device = SharedPoissonDevice(std::sync::Arc::new(std::sync::Mutex::new(Declines)));
    let (box_mg, direct) = ring_velocity_on(params, 32, None, None);
    let (by_pcg, _) = ring_velocity_on(params, 32, Some(device), None);
    let difference = eddies::vpm::tree::rms_relative_error(&by_pcg, &box_mg);
    let error = eddies::vpm::tree::rms_relative_error(&by_pcg, &direct);
    let box_error = eddies::vpm::tree::rms_relative_error(&box_mg, &direct);
    println!(
        "MGPCG against the box multigrid {difference:.2e}; against Biot–Savart {error:.4e} (box multigrid \
         {box_error:.4e})"
    );
    assert!(difference <= 1e-5, "{difference}");
    assert!((error - box_error).abs() <= 1e-6, "{error} vs {box_error}");
}

/// ∇ × A on the grid reproduces the Biot–Savart velocity of a ring away from its core (2%: the grid's
/// second-order error at 48³ is about 0.8%, and the bound leaves room for the splat's smoothing of the core
/// at h ≈ a/2); with zero boundary values the grid's faces act as walls and the error is at least three
/// times larger (measured: about forty times).
#[test]
fn poisson_velocity_reproduces_biot_savart_for_a_ring() {
    for n in [32, 48] {
        println!(
            "{n}³: tree {:.4}, direct {:.4}, zero {:.4}, tree without decimation {:.4}, rows {:.4}",
            ring_velocity_error(PotentialBoundary::Tree, Decimation::Lattice, n),
            ring_velocity_error(PotentialBoundary::Direct, Decimation::Lattice, n),
            ring_velocity_error(PotentialBoundary::Zero, Decimation::Lattice, n),
            ring_velocity_error(PotentialBoundary::Tree, Decimation::Off, n),
            ring_velocity_error(PotentialBoundary::Tree, Decimation::Rows, n),
        );
    }
    assert_passes("vpm/poisson-ring-velocity-tree");
    assert_passes("vpm/poisson-ring-velocity-zero-boundary");
}

/// Decimated boundary values (the default lattice, and part 20's rows) stay close to the full ones.
#[test]
fn decimated_boundary_values_stay_close() {
    for n in [32, 48] {
        for how in [Decimation::Lattice, Decimation::Rows] {
            let (a, u) = decimation_difference(n, how);
            println!(
                "{n}³, {}: boundary potential differs by {a:.4} (RMS relative), grid velocity by {u:.4}",
                how.name()
            );
        }
    }
    assert_passes("vpm/decimated-boundary");
}

/// Splatting density deviations to the grid keeps their total mass (cloud-in-cell weights sum to one).
#[test]
fn density_splat_conserves_mass() {
    assert_passes("vpm/density-splat-mass");
}

/// A heavy ball falls and a light one rises, each at first with the added-mass acceleration of a sphere
/// (within 15% at 32³, where the smoothing of the ball's edge costs about 12%, and closer on finer grids),
/// and the heavy ball's impulse grows along gravity as it rolls up into a ring.
#[test]
fn balls_accelerate_as_added_mass_theory_says() {
    let heavy = ball_acceleration(0.02, false);
    let light = ball_acceleration(-0.02, false);
    println!("heavy: {heavy:?}\nlight: {light:?}");
    // The shortfall is the smoothing of the ball's edge over about a cell: it shrinks with the grid.
    let (coarse, fine) = (
        ball_acceleration_at(0.02, 24, 5000, false).ratio,
        ball_acceleration_at(0.02, 48, 40_000, false).ratio,
    );
    println!("ratio at 24³ {coarse:.3}, at 48³ {fine:.3}");
    assert!(
        (1.0 - fine).abs() < 0.6 * (1.0 - coarse).abs(),
        "converges towards added mass"
    );
    let reference =
        ball_acceleration_by(VelocityMethod::TreeVortons, 0.02, 32, 12_000, false).ratio;
    println!(
        "ratio {:.3}, Biot–Savart (tree at vortons) {reference:.3}",
        heavy.ratio
    );
    assert!(heavy.acceleration > 0.0, "the heavy ball must fall");
    assert!(light.acceleration < 0.0, "the light ball must rise");
    assert!(
        heavy.impulse_along_g > heavy.impulse_along_g_half && heavy.impulse_along_g_half > 0.0,
        "the heavy ball's impulse must grow along gravity"
    );
    assert_passes("vpm/heavy-ball-added-mass");
    assert_passes("vpm/light-ball-added-mass");
}

/// Issue 25: on a dense ball whose vortons' cores (1.5 lattice spacings) are wider than a cell, part 20's
/// cloud-in-cell splat showed the grid vorticity sharper than the vortons carry, and the Poisson technique
/// jerked more than the treecode at grid points (1.4–2.6× per second of a 4 s run). With the Gaussian
/// splat (`Splat::Gaussian`, the option for such cores; cloud-in-cell stays the default) it must jerk no more than tree-at-grid, to 10% (early on the two are equal: 0.0088 against 0.0089
/// over this 0.6 s, 0.025 against 0.024 over the full run's first second, 0.55–0.78× after), and clearly less
/// than with cloud-in-cell (at most 0.8×: 0.60× measured).
#[test]
fn issue_25_poisson_ball_jerks_no_more_than_tree_at_grid() {
    let (vortons, n, steps) = (2000, 20, 24);
    let gaussian = ball_jerk(VelocityMethod::Poisson, Splat::Gaussian, vortons, n, steps);
    let cic = ball_jerk(VelocityMethod::Poisson, Splat::Cic, vortons, n, steps);
    let tree = ball_jerk(VelocityMethod::TreeGrid, Splat::Gaussian, vortons, n, steps);
    println!("mean jerk: Poisson {gaussian:.4} (cloud-in-cell {cic:.4}), tree-grid {tree:.4} m/s³");
    assert!(gaussian <= 1.1 * tree, "{gaussian} vs tree-at-grid {tree}");
    assert!(gaussian <= 0.8 * cic, "{gaussian} vs cloud-in-cell {cic}");
}

/// The Poisson technique moves vortons no more jerkily than the treecode at grid points (part 12's metric).
#[test]
fn poisson_jerk_is_no_larger_than_tree_at_grid() {
    assert_passes("vpm/poisson-jerk");
}

/// A hot ball rises: thermal expansion makes it lighter (Boussinesq), with the same added-mass
/// acceleration as a ball whose density deviation is −ρ₀ β T' (to 1e-9: the two states give the same
/// buoyant density to rounding).
#[test]
fn hot_ball_rises_like_the_equivalent_light_ball() {
    let run = |density: f64, temperature: f64| {
        let mut sim = VpmSim::new(VpmParams {
            velocity: VelocityMethod::Poisson,
            ambient_density: 1.0,
            grid_resolution: [24; 3],
            grid_margin: 0.1,
            buoyancy: BuoyancyParams {
                thermal_expansion: 0.01,
                ..Default::default()
            },
            ..Default::default()
        })
        .expect("valid parameters");
        sim.add_ball(&Ball {
            density_deviation: density,
            temperature_deviation: temperature,
            vortons: 3000,
            ..Default::default()
        });
        let start = sim.centroid();
        for _ in 0..10 {
            sim.step(0.005).expect("runs");
        }
        let v = sim.vortons();
        let rise = (0..v.len())
            .filter(|&i| v.temperature[i] != 0.0 || v.density[i] != 0.0)
            .map(|i| v.position[i].y)
            .sum::<f64>();
        (rise, sim.centroid() - start)
    };
    let (hot, _) = run(0.0, 2.0);
    let (light, _) = run(-0.02, 0.0);
    let (rest, _) = run(0.0, 0.0);
    println!("Σy of the ball's vortons: hot {hot}, light {light}, neutral {rest}");
    assert!(hot > rest, "the hot ball must rise");
    assert!(
        ((hot - rest) - (light - rest)).abs() <= 1e-9 * (light - rest).abs(),
        "heat and the equivalent density deviation must give the same motion"
    );
}

/// Heat diffusion by particle strength exchange conserves the total heat Σ T V (each pair exchange is
/// antisymmetric; 1e-12 relative is rounding) and spreads a hot spot; a heat source adds exactly rate × dt ×
/// (vortons inside) of temperature.
#[test]
fn heat_diffuses_conservatively_and_sources_heat() {
    let mut sim = VpmSim::new(VpmParams {
        buoyancy: BuoyancyParams {
            baroclinic: false,
            heat_diffusivity: 1e-3,
            ..Default::default()
        },
        ..Default::default()
    })
    .expect("valid parameters");
    sim.add_block(&Block {
        min: DVec3::splat(-0.2),
        max: DVec3::splat(0.2),
        density_deviation: 0.0,
        temperature_deviation: 0.0,
        vortons: 4000,
        jitter: 0.1,
        tracers: 0,
        seed: 3,
    });
    let centre = {
        let v = sim.vortons_mut();
        let c = (0..v.len())
            .min_by(|&a, &b| {
                v.position[a]
                    .length()
                    .partial_cmp(&v.position[b].length())
                    .expect("finite")
            })
            .expect("vortons");
        v.temperature[c] = 100.0;
        c
    };
    let heat = |sim: &VpmSim| {
        let v = sim.vortons();
        (0..v.len())
            .map(|i| v.temperature[i] * v.volume[i])
            .sum::<f64>()
    };
    let before = heat(&sim);
    for _ in 0..5 {
        sim.step(0.01).expect("runs");
    }
    let after = heat(&sim);
    let peak = sim.vortons().temperature[centre];
    println!("heat before {before:e}, after {after:e}; peak 100 K → {peak:.3} K");
    assert!(((after - before) / before).abs() < 1e-12);
    assert!(peak < 100.0 && peak > 0.0, "the hot spot must spread");

    // Without buoyancy nothing moves, so the vortons inside stay inside.
    let mut sim = VpmSim::new(VpmParams {
        buoyancy: BuoyancyParams {
            baroclinic: false,
            ..Default::default()
        },
        ..Default::default()
    })
    .expect("valid parameters");
    sim.add_block(&Block {
        min: DVec3::splat(-0.2),
        max: DVec3::splat(0.2),
        density_deviation: 0.0,
        temperature_deviation: 0.0,
        vortons: 1000,
        jitter: 0.0,
        tracers: 0,
        seed: 3,
    });
    sim.add_heat_source(HeatSource {
        center: DVec3::ZERO,
        radius: 0.1,
        rate: 50.0,
        temperature: 100.0,
        smoke: 1000.0,
        seed: 1,
    });
    let inside = sim
        .vortons()
        .position
        .iter()
        .filter(|p| p.length() <= 0.1)
        .count();
    sim.step(0.01).expect("runs");
    let total: f64 = sim.vortons().temperature.iter().sum();
    assert!((total - 50.0 * 0.01 * inside as f64).abs() < 1e-9 * total);
    assert_eq!(
        sim.tracers().len(),
        10,
        "1000 smoke tracers per second for 0.01 s"
    );
}

/// Baroclinic generation needs gravity across the vortons: a flat layer normal to gravity gets none.
#[test]
fn no_baroclinic_generation_without_gravity_across_the_vortons() {
    let mut sim = VpmSim::new(VpmParams::default()).expect("valid parameters");
    sim.add_block(&Block {
        min: DVec3::new(-0.2, 0.0, -0.2),
        max: DVec3::new(0.2, 0.01, 0.2),
        density_deviation: 5.0,
        temperature_deviation: 0.0,
        vortons: 400,
        jitter: 0.0,
        tracers: 0,
        seed: 1,
    });
    assert!(
        sim.vortons()
            .position
            .iter()
            .all(|p| p.y == sim.vortons().position[0].y),
        "one layer"
    );
    sim.step(0.01).expect("runs");
    assert!(sim.vortons().vorticity.iter().all(|w| *w == DVec3::ZERO));
}

/// The velocity components exposed as grid fields are those of the speed field: |u|² = u_x² + u_y² + u_z² at
/// every grid point, to f32 rounding (1e-5 of the largest |u|²), and a falling ball's flow is mostly vertical.
#[test]
fn velocity_component_fields_make_up_the_speed() {
    let mut sim = VpmSim::new(VpmParams {
        velocity: VelocityMethod::Poisson,
        ..Default::default()
    })
    .expect("valid parameters");
    sim.add_ball(&Ball {
        center: DVec3::ZERO,
        radius: 0.1,
        density_deviation: 20.0,
        vortons: 2000,
        ..Ball::default()
    });
    for _ in 0..3 {
        sim.step(0.01).expect("runs");
    }
    let field = |name: &str| sim.field(name).expect(name).data;
    let (speed, ux, uy, uz) = (
        field("speed"),
        field("velocity_x"),
        field("velocity_y"),
        field("velocity_z"),
    );
    let top = speed.iter().fold(0.0f32, |a, &s| a.max(s * s));
    assert!(top > 0.0, "the ball must move");
    for i in 0..speed.len() {
        let sum = ux[i] * ux[i] + uy[i] * uy[i] + uz[i] * uz[i];
        assert!((speed[i] * speed[i] - sum).abs() <= 1e-5 * top, "point {i}");
    }
    let energy = |u: &[f32]| u.iter().map(|v| (v * v) as f64).sum::<f64>();
    assert!(energy(&uy) > energy(&ux) && energy(&uy) > energy(&uz));
}

/// The Poisson technique with each boundary option, buoyancy, heat diffusion and a heat source give the
/// same bits with 1, 2 and 7 threads.
#[test]
fn poisson_and_buoyancy_do_not_depend_on_thread_count() {
    for boundary in [
        PotentialBoundary::Tree,
        PotentialBoundary::Direct,
        PotentialBoundary::Zero,
    ] {
        let checksum = |threads: usize| {
            par::with_threads(threads, || {
                let mut params = VpmParams {
                    velocity: VelocityMethod::Poisson,
                    grid_resolution: [20; 3],
                    viscosity: 1e-4,
                    buoyancy: BuoyancyParams {
                        heat_diffusivity: 1e-4,
                        ..Default::default()
                    },
                    ..Default::default()
                };
                params.poisson.boundary = boundary;
                let mut sim = VpmSim::new(params).expect("valid parameters");
                sim.add_ball(&Ball {
                    density_deviation: 0.5,
                    temperature_deviation: 3.0,
                    vortons: 1500,
                    tracers: 300,
                    ..Default::default()
                });
                sim.add_heat_source(HeatSource {
                    center: DVec3::new(0.0, -0.05, 0.0),
                    radius: 0.05,
                    rate: 20.0,
                    temperature: 4.0,
                    smoke: 500.0,
                    seed: 2,
                });
                for _ in 0..4 {
                    sim.step(0.01).expect("runs");
                }
                sim.checksum()
            })
        };
        let one = checksum(1);
        assert_eq!(one, checksum(2), "{boundary:?}: 2 threads");
        assert_eq!(one, checksum(7), "{boundary:?}: 7 threads");
    }
}

/// Bad buoyancy and Poisson parameters are errors, not panics.
#[test]
fn bad_parameters_are_errors() {
    let mut p = VpmParams::default();
    p.poisson.tolerance = 0.0;
    assert!(VpmSim::new(p).is_err());
    let mut p = VpmParams::default();
    p.buoyancy.heat_diffusivity = -1.0;
    assert!(VpmSim::new(p).is_err());
    let mut p = VpmParams::default();
    p.buoyancy.gravity = [0.0, f64::NAN, 0.0];
    assert!(VpmSim::new(p).is_err());
}
