//! The step template every method shares ([`Simulation::step`]) and the description each gives of itself.

use eddies::flip::{FlipConfig, FlipSim};
use eddies::reint::{ReintConfig, ReintSim};
use eddies::vpm::{self, PoissonParams, VelocityMethod, VpmParams, VpmSim};
use eddies::{Shape, SimError, Simulation, StepRecord};
use glam::DVec3;

/// Stage times are wall-clock intervals inside the step: none is negative, each is a stage the method
/// lists, and together they take no longer than the step. (A vpm ball with the Poisson technique used to
/// report `advect_stretch` = −4.55 ms on its first step: the set-up's velocity evaluation was counted in
/// the step's inner stages.)
fn check_stage_times(sim: &dyn Simulation, rec: &StepRecord) {
    let stages = sim.describe().stages;
    let mut sum = 0.0;
    for &(name, ms) in &rec.stage_ms {
        assert!(
            ms >= 0.0,
            "{}: stage {name} took {ms} ms",
            sim.describe().method
        );
        assert!(
            stages.contains(&name),
            "stage {name} is not listed in {stages:?}"
        );
        sum += ms;
    }
    // The stage timers and the step's run on one clock; 1 µs of slack for the rounding of the sums.
    assert!(
        sum <= rec.wall_ms + 1e-3,
        "stages {sum} ms in a step of {} ms",
        rec.wall_ms
    );
    assert_eq!(rec.step, sim.steps());
    assert_eq!(rec.time, sim.time());
}

#[test]
fn stage_times_are_never_negative_and_fit_in_the_step() {
    let mut reint = ReintSim::new(ReintConfig::<2> {
        resolution: [32, 32],
        cell_size: 1.0 / 32.0,
        ..Default::default()
    })
    .unwrap();
    reint.fill(&Shape::box2([0.0, 0.0], [0.5, 0.5]), 0, 1.0, [0.0, 0.0]);
    let mut flip = FlipSim::new(FlipConfig::<2> {
        resolution: [32, 32],
        cell_size: 1.0 / 32.0,
        ..Default::default()
    })
    .unwrap();
    flip.fill(&Shape::box2([0.0, 0.0], [0.5, 0.5]), [0.0, 0.0]);
    let mut ball = VpmSim::new(VpmParams {
        velocity: VelocityMethod::Poisson,
        poisson: PoissonParams::default(),
        grid_resolution: [32, 32, 32],
        ..Default::default()
    })
    .unwrap();
    ball.add_ball(&vpm::Ball {
        center: DVec3::ZERO,
        radius: 0.2,
        density_deviation: 10.0,
        temperature_deviation: 0.0,
        vortons: 2000,
        halo: 0.5,
        tracers: 0,
        seed: 1,
    });
    let sims: [&mut dyn Simulation; 3] = [&mut reint, &mut flip, &mut ball];
    for sim in sims {
        for _ in 0..2 {
            let dt = sim.max_dt(0.5).min(1e-2);
            let rec = sim.step(dt).unwrap();
            check_stage_times(sim, &rec);
        }
    }
}

/// The template refuses a time step that is not a positive number, for every method, before the method
/// sees it.
#[test]
fn every_method_refuses_a_bad_time_step() {
    let mut reint = ReintSim::new(ReintConfig::<2>::default()).unwrap();
    let mut flip = FlipSim::new(FlipConfig::<3>::default()).unwrap();
    let mut vpm = VpmSim::new(VpmParams::default()).unwrap();
    let sims: [&mut dyn Simulation; 3] = [&mut reint, &mut flip, &mut vpm];
    for sim in sims {
        for dt in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            match sim.step(dt) {
                Err(SimError::InvalidInput(m)) => assert!(m.contains("time step"), "{m}"),
                other => panic!("{}: dt = {dt} gave {other:?}", sim.describe().method),
            }
            assert_eq!(sim.steps(), 0);
        }
    }
}

/// A method's description lists the fields it returns, and no field it does not.
#[test]
fn descriptions_list_the_fields_the_methods_return() {
    let reint = ReintSim::new(ReintConfig::<3> {
        resolution: [8, 8, 8],
        substances: vec![Default::default(); 2],
        ..Default::default()
    })
    .unwrap();
    let flip = FlipSim::new(FlipConfig::<2>::default()).unwrap();
    let sims: [&dyn Simulation; 2] = [&reint, &flip];
    for sim in sims {
        let d = sim.describe();
        for name in &d.fields {
            assert!(sim.field(name).is_some(), "{}: no field {name}", d.method);
        }
        for name in d.array_fields {
            assert!(
                d.fields.contains(name),
                "{}: array {name} is not a field",
                d.method
            );
        }
        assert!(d.fields.contains(&d.default_view), "{}", d.method);
        assert!(sim.field("no_such_field").is_none());
    }
    assert!(reint.describe().fields.contains(&"substance_1"));
}

/// `apply_impulse` through the trait: reint and FLIP take the push (the fluid gains momentum along it), a
/// method without impulses and a vector of the wrong length say why.
#[test]
fn impulses_push_reint_and_flip_and_are_refused_where_a_method_has_none() {
    let mut reint = ReintSim::new(ReintConfig::<2> {
        resolution: [32, 32],
        cell_size: 1.0 / 32.0,
        gravity: [0.0, 0.0],
        ..Default::default()
    })
    .unwrap();
    reint.fill(&Shape::box2([0.0, 0.0], [1.0, 1.0]), 0, 1.0, [0.0, 0.0]);
    let mut flip = FlipSim::new(FlipConfig::<2> {
        resolution: [32, 32],
        cell_size: 1.0 / 32.0,
        gravity: [0.0, 0.0],
        ..Default::default()
    })
    .unwrap();
    flip.fill(&Shape::box2([0.0, 0.0], [1.0, 0.5]), [0.0, 0.0]);
    for sim in [&mut reint as &mut dyn Simulation, &mut flip] {
        sim.apply_impulse(&[0.5, 0.25], 0.2, &[1.0, 0.0])
            .expect("an impulse");
        let moved: f32 = sim.particle_values("velocity_x").unwrap().iter().sum();
        assert!(moved > 0.0, "{}: no push", sim.describe().method);
        let err = sim.apply_impulse(&[0.5], 0.2, &[1.0, 0.0]).unwrap_err();
        assert!(err.to_string().contains("centre"), "{err}");
    }
    let mut ball = VpmSim::new(VpmParams::default()).unwrap();
    let err = ball
        .apply_impulse(&[0.5, 0.5, 0.5], 0.2, &[1.0, 0.0, 0.0])
        .unwrap_err();
    assert!(matches!(err, SimError::InvalidInput(_)));
    assert_eq!(err.to_string(), "vpm does not take impulses");
}
