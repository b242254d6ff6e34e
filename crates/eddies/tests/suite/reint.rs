//! Reintegration tracking against its references. The validation cases are the ones `eddies validate`
//! prints (their references and tolerances are explained in `src/validation/reint.rs`); the other tests
//! check the bookkeeping of emitters, sinks and open boundaries, the API's input checks, and determinism in
//! 3D.

use eddies::par;
use eddies::reint::{Boundary, Emitter, ReintConfig, ReintParams, ReintSim, Sink, Substance};
use eddies::{Shape, SimError, Simulation};
use glam::DVec3;

use crate::common::assert_passes;

/// Total and per-substance mass over 2000 violent 2D steps, walls and an obstacle included: drift ≤ 1e-5
/// (the bound; masses are whole quanta, so the drift is in fact exactly zero).
#[test]
fn mass_is_conserved_2d() {
    assert_passes("reint/mass-conservation-2d");
}

/// The same over 500 steps of a 3D dam break around a pillar that touches two walls.
#[test]
fn mass_is_conserved_3d() {
    assert_passes("reint/mass-conservation-3d");
}

/// Moroz's statement that r = 0.5 with centred particles is forward-Euler donor-cell advection, to 1e-6.
#[test]
fn centred_particles_with_half_cell_boxes_are_donor_cell_advection() {
    assert_passes("reint/donor-cell-limit");
}

/// A released layer comes to rest: kinetic energy below 1% of its peak.
#[test]
fn resting_layer_settles() {
    assert_passes("reint/settling-kinetic-energy");
}

/// The settled layer is denser with depth, at the hydrostatic rate g/c² within 25%.
#[test]
fn settled_layer_is_hydrostatic() {
    assert_passes("reint/hydrostatic-density-gradient");
}

/// r < 0.5 keeps a moving blob compact; r > 0.5 spreads it (Moroz 2020).
#[test]
fn small_boxes_are_particle_like_and_large_boxes_field_like() {
    assert_passes("reint/particle-like-r0.3");
    assert_passes("reint/field-like-r0.7");
}

/// A mirror-symmetric splash stays symmetric to 1e-5 over 500 steps.
#[test]
fn mirror_symmetric_scene_stays_symmetric() {
    assert_passes("reint/mirror-symmetry");
}

/// Bit-identical 2D state with 1, 2 and 7 threads.
#[test]
fn state_is_bit_identical_for_any_thread_count_2d() {
    assert_passes("reint/thread-determinism");
}

fn small_3d() -> ReintSim<3> {
    let n = 20;
    let cfg = ReintConfig::<3> {
        resolution: [n, n, n],
        cell_size: 1.0 / n as f64,
        params: ReintParams {
            viscosity: 1e-3,
            ..Default::default()
        },
        substances: vec![
            Substance::default(),
            Substance {
                rest_density: 700.0,
                color: [1.0, 0.5, 0.0],
            },
        ],
        ..Default::default()
    };
    let mut sim = ReintSim::new(cfg).expect("valid config");
    sim.add_obstacle(Shape::Sphere {
        center: DVec3::new(0.5, 0.3, 0.5),
        radius: 0.15,
    });
    sim.fill(
        &Shape::Box {
            min: DVec3::ZERO,
            max: DVec3::new(0.4, 0.8, 1.0),
        },
        0,
        1.0,
        [1.0, 0.0, 0.3],
    );
    sim.fill(
        &Shape::Sphere {
            center: DVec3::new(0.7, 0.7, 0.4),
            radius: 0.15,
        },
        1,
        1.0,
        [0.0, -1.0, 0.0],
    );
    sim
}

/// Bit-identical 3D state with 1, 2 and 7 threads.
#[test]
fn state_is_bit_identical_for_any_thread_count_3d() {
    let checksum = |threads| {
        par::with_threads(threads, || {
            let mut sim = small_3d();
            for _ in 0..60 {
                let dt = sim.max_dt(0.8);
                sim.step(dt).expect("stable");
            }
            sim.checksum()
        })
    };
    let one = checksum(1);
    assert_eq!(checksum(2), one);
    assert_eq!(checksum(7), one);
}

/// Emitters and sinks are the only sources and drains: mass now = mass before + injected − removed, per
/// substance, to f64 rounding of the sums (1e-12 relative).
#[test]
fn emitters_and_sinks_account_for_every_change_of_mass() {
    let n = 64;
    let cfg = ReintConfig::<2> {
        resolution: [n, n],
        cell_size: 1.0 / n as f64,
        substances: vec![
            Substance::default(),
            Substance {
                rest_density: 1200.0,
                color: [1.0, 0.0, 0.0],
            },
        ],
        ..Default::default()
    };
    let mut sim = ReintSim::new(cfg).expect("valid config");
    sim.fill(&Shape::box2([0.0, 0.0], [1.0, 0.2]), 0, 1.0, [0.0, 0.0]);
    sim.add_emitter(Emitter {
        shape: Shape::box2([0.1, 0.8], [0.2, 0.9]),
        substance: 1,
        velocity: [0.5, -1.0],
        density: 1.0,
        active: (0.0, 0.2),
    });
    sim.add_sink(Sink {
        shape: Shape::box2([0.8, 0.0], [1.0, 0.1]),
        rate: 20.0,
    });
    let before = sim.substance_masses();
    for _ in 0..400 {
        let dt = sim.max_dt(0.8);
        sim.step(dt).expect("stable");
    }
    let (injected, removed) = sim.mass_exchanged();
    assert!(
        injected[1] > 0.0 && removed[0] > 0.0,
        "the emitter and the sink both acted"
    );
    for (k, now) in sim.substance_masses().into_iter().enumerate() {
        let expected = before[k] + injected[k] - removed[k];
        assert!(
            ((now - expected) / expected).abs() < 1e-12,
            "substance {k}: {now} vs {expected}"
        );
    }
}

/// Through an open boundary mass leaves; through a closed one it does not (with pressure on, so the blob
/// does not pile up beyond the 4× rest compression that whole quanta represent exactly).
#[test]
fn open_boundary_lets_mass_leave() {
    let run = |boundary| {
        let n = 48;
        let cfg = ReintConfig::<2> {
            resolution: [n, n],
            cell_size: 1.0 / n as f64,
            boundary,
            gravity: [0.0, 0.0],
            ..Default::default()
        };
        let mut sim = ReintSim::new(cfg).expect("valid config");
        sim.fill(&Shape::box2([0.6, 0.4], [0.9, 0.6]), 0, 1.0, [2.0, 0.0]);
        let before = sim.total_mass();
        for _ in 0..300 {
            let dt = sim.max_dt(0.8);
            sim.step(dt).expect("stable");
        }
        sim.total_mass() / before
    };
    assert_eq!(run(Boundary::Closed), 1.0);
    assert!(
        run(Boundary::Open) < 0.5,
        "most of the blob left through the open wall"
    );
}

/// An impulse pushes the fluid around its centre in its direction, and leaves distant fluid alone.
#[test]
fn impulse_pushes_nearby_fluid() {
    let n = 32;
    let cfg = ReintConfig::<2> {
        resolution: [n, n],
        cell_size: 1.0 / n as f64,
        ..Default::default()
    };
    let mut sim = ReintSim::new(cfg).expect("valid config");
    sim.fill(&Shape::box2([0.0, 0.0], [1.0, 1.0]), 0, 1.0, [0.0, 0.0]);
    sim.apply_impulse([0.5, 0.5], 0.2, [3.0, 0.0]);
    let centre = sim.particle([16, 16]);
    let far = sim.particle([2, 2]);
    assert!(
        centre.velocity[0] > 2.5 && centre.velocity[1] == 0.0,
        "{:?}",
        centre.velocity
    );
    assert_eq!(far.velocity, [0.0, 0.0]);
}

/// An impulse reaches every particle within its radius, wherever in its cell the particle sits, and no other:
/// particles at random offsets, many on their cells' edges (offset ±½), in a 3D grid whose cell size is not
/// a power of two, pushed from centres near and beyond the walls with radii from a fifth of a cell to the
/// whole grid. Each push starts from rest, so a particle's new velocity is its falloff times the push: to
/// f32 rounding (1e-5 relative) where the falloff is more than 1e-4, and exactly 0 beyond the radius.
#[test]
fn an_impulse_reaches_every_particle_within_its_radius_and_no_other() {
    let n = 12;
    let h = 0.1;
    let cfg = ReintConfig::<3> {
        resolution: [n; 3],
        cell_size: h,
        ..Default::default()
    };
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed >> 11) as f64 / (1u64 << 53) as f64
    };
    let side = n as f64 * h;
    for push in 0..24 {
        let mut sim = ReintSim::new(cfg.clone()).expect("valid config");
        for z in 0..n {
            for y in 0..n {
                for x in 0..n {
                    let offset = [0; 3].map(|_| match (next() * 4.0) as u32 {
                        0 => -0.5,
                        1 => 0.5,
                        _ => (next() - 0.5) as f32,
                    });
                    sim.set_particle([x, y, z], &[1.0], offset, [0.0; 3]);
                }
            }
        }
        let center = [0; 3].map(|_| (next() * 1.4 - 0.2) * side);
        let radius = h * [0.2, 0.5, 1.0, 1.5, 3.7, 20.0][push % 6];
        let velocity = [1.0f32, -2.0, 0.5];
        sim.apply_impulse(center, radius, velocity);
        for z in 0..n {
            for y in 0..n {
                for x in 0..n {
                    let p = sim.particle([x, y, z]);
                    let d2: f64 = (0..3).map(|a| (p.position[a] - center[a]).powi(2)).sum();
                    let w = if d2 < radius * radius {
                        (1.0 - d2 / (radius * radius)).powi(2)
                    } else {
                        0.0
                    };
                    for (&got, &pushed) in p.velocity.iter().zip(&velocity) {
                        let (got, want) = (got as f64, w * pushed as f64);
                        if w == 0.0 {
                            assert_eq!(
                                got,
                                0.0,
                                "push {push}: cell {:?} beyond the radius",
                                [x, y, z]
                            );
                        } else if w > 1e-4 {
                            assert!(
                                (got - want).abs() <= 1e-5 * want.abs(),
                                "push {push}: cell {:?}: {got} against {want}",
                                [x, y, z]
                            );
                        }
                    }
                }
            }
        }
    }
}

/// Out-of-range parameters are errors that name the parameter, never panics.
#[test]
fn bad_parameters_are_rejected_with_a_reason() {
    let base = ReintConfig::<2>::default();
    let expect_err = |cfg: ReintConfig<2>, word: &str| match ReintSim::new(cfg) {
        Err(e @ (SimError::InvalidInput(_) | SimError::InvalidParameter(_))) => {
            assert!(e.to_string().contains(word), "{e}")
        }
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("accepted a config with a bad {word}"),
    };
    let mut c = base.clone();
    c.params.diffusion_radius = 1.5;
    expect_err(c, "params.diffusion_radius");
    let mut c = base.clone();
    c.resolution = [3, 64];
    expect_err(c, "resolution");
    let mut c = base.clone();
    c.substances = vec![Substance::default(); 5];
    expect_err(c, "substances");
    let mut c = base.clone();
    c.params.sound_speed = -1.0;
    expect_err(c, "params.sound_speed");
    let mut c = base;
    c.cell_size = 0.0;
    expect_err(c, "cell size");
}

/// A blow-up is reported as divergence with the stage named, not as NaN in the output.
#[test]
fn non_finite_state_is_reported_as_divergence() {
    let n = 16;
    let cfg = ReintConfig::<2> {
        resolution: [n, n],
        cell_size: 1.0 / n as f64,
        ..Default::default()
    };
    let mut sim = ReintSim::new(cfg).expect("valid config");
    sim.fill(&Shape::box2([0.0, 0.0], [1.0, 0.5]), 0, 1.0, [0.0, 0.0]);
    sim.set_particle([3, 3], &[0.2], [0.0, 0.0], [f32::NAN, 0.0]);
    match sim.step(1e-3) {
        Err(SimError::Diverged { step, .. }) => assert_eq!(step, 1),
        other => panic!("expected divergence, got {other:?}"),
    }
}
