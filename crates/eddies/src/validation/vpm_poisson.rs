//! Validation of the Poisson velocity technique (part 20) and of buoyancy (part 8): the cases that
//! `eddies validate` prints and `tests/vpm_poisson.rs` asserts.

use super::vpm::{jerk_run, mean_after_warmup};
use super::{Case, Measurement};
use crate::par;
use crate::rng::SplitMix64;
use crate::vpm::biot_savart::{self, Sources};
use crate::vpm::buoyancy::Buoyancy;
use crate::vpm::mollify::FittedGrid;
use crate::vpm::poisson::{PoissonVelocity, SharedPoissonDevice, SharedSplatDevice};
use crate::vpm::velocity::{Query, VelocitySolver};
use crate::vpm::{
    Ball, Decimation, PoissonParams, PotentialBoundary, Ring, Splat, VelocityMethod, VpmParams,
    VpmSim,
};
use crate::Simulation;
use glam::DVec3;
use std::f64::consts::PI;

/// The cases of the Poisson technique and buoyancy.
pub fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "vpm/vector-poisson-second-order",
            description: "manufactured vector potential on 16³, 32³, 64³ grids with exact boundary values: \
                          smallest ratio of successive max errors (second order: 4; at least 3.5)",
            run: |q| {
                let sizes: &[usize] = if q { &[16, 32] } else { &[16, 32, 64] };
                // Quick (16³, 32³): the same bound. The worst ratio is the pre-asymptotic 16³ → 32³ one in
                // both runs (measured 3.80 quick and full; second order tends to 4); margin 8%.
                let e = manufactured_errors(sizes);
                let worst = e.windows(2).map(|w| w[0] / w[1]).fold(f64::INFINITY, f64::min);
                Measurement::at_least("vpm/vector-poisson-second-order", worst, 3.5, "1")
            },
            known_gap: None,
        },
        Case {
            name: "vpm/poisson-ring-velocity-tree",
            description: "a vortex ring, Poisson technique with treecode boundary values, 48³ grid: RMS \
                          relative error of ∇ × A against the Biot–Savart sum at grid points beyond 3 core \
                          radii of the core (at most 0.02)",
            run: |_| {
                let e = ring_velocity_error(PotentialBoundary::Tree, Decimation::default(), 48);
                Measurement::at_most("vpm/poisson-ring-velocity-tree", e, 0.02, "1")
            },
            known_gap: None,
        },
        Case {
            name: "vpm/poisson-ring-velocity-zero-boundary",
            description: "the same ring with zero boundary values (a wall around the grid): RMS relative \
                          error over that with treecode boundaries (at least 3: visibly worse)",
            run: |q| {
                let n = if q { 32 } else { 48 };
                let ratio = ring_velocity_error(PotentialBoundary::Zero, Decimation::default(), n)
                    / ring_velocity_error(PotentialBoundary::Tree, Decimation::default(), n);
                // Quick (32³): the same bound. The zero-boundary error (about 37%) is the missing far
                // field and does not depend on h; the treecode-boundary error is second order (2.4% at
                // 32³, 0.77% at 48³), so the ratio falls as h²: measured 16.5 at 32³, 47.6 at 48³. "Visibly
                // worse" (≥ 3) still holds with a margin of 5×.
                Measurement::at_least("vpm/poisson-ring-velocity-zero-boundary", ratio, 3.0, "1")
            },
            known_gap: None,
        },
        Case {
            name: "vpm/decimated-boundary",
            description: "a vortex ring on a 48³ grid: RMS relative difference of the vector potential on the \
                          boundary, decimated (every other point) against every point (at most 0.02)",
            run: |q| {
                // Quick (32³): the same bound. The interpolated points err at second order in the spacing of
                // the computed ones, so (48/32)² × 0.39% = 0.88% is expected at 32³; measured 0.79%, 0.39%
                // at 48³; margin 2.5×.
                let d = decimation_difference(if q { 32 } else { 48 }, Decimation::default()).0;
                Measurement::at_most("vpm/decimated-boundary", d, 0.02, "1")
            },
            known_gap: None,
        },
        Case {
            name: "vpm/density-splat-mass",
            description: "10⁴ vortons with random density and temperature deviations splatted to the grid: \
                          relative difference of the grid's deviation mass from Σ ρ'V (at most 1e-6)",
            run: |_| Measurement::at_most("vpm/density-splat-mass", density_splat_error(), 1e-6, "1"),
            known_gap: None,
        },
        Case {
            name: "vpm/heavy-ball-added-mass",
            description: "a ball 2% heavier than ambient starts to fall: early acceleration of its centroid over \
                          the added-mass value (2/3) g ρ'/ρ₀ of a sphere (Boussinesq), within 0.15",
            run: |q| {
                // Quick (6000 vortons, 24 steps): the same reference and tolerance, which are physical (the
                // added-mass value; the 32³ grid's smoothing of the ball's edge, the same in both runs).
                // Measured 0.909 quick, 0.882 full: the shorter fit sees less of the early deceleration.
                let r = ball_acceleration(0.02, q);
                Measurement::within("vpm/heavy-ball-added-mass", r.ratio, 1.0, 0.15, "1")
            },
            known_gap: None,
        },
        Case {
            name: "vpm/light-ball-added-mass",
            description: "a ball 2% lighter than ambient starts to rise: early acceleration over −(2/3) g ρ'/ρ₀, \
                          within 0.15",
            run: |q| {
                // Quick: as for the heavy ball (measured 0.909 quick, 0.882 full).
                let r = ball_acceleration(-0.02, q);
                Measurement::within("vpm/light-ball-added-mass", r.ratio, 1.0, 0.15, "1")
            },
            known_gap: None,
        },
        Case {
            name: "vpm/poisson-jerk",
            description: "part 12's noisy ring: mean jerk of the Poisson technique over tree-at-grid-points' on \
                          the same scene and grid (at most 1)",
            run: |q| {
                // Quick (20 steps): the same bound; a ratio of mean jerks after the same warm-up (measured
                // 0.078 after 20 steps, 0.062 after 60; margin 13×).
                let steps = if q { 20 } else { 60 };
                let poisson = mean_after_warmup(&jerk_run(VelocityMethod::Poisson, false, steps));
                let tree = mean_after_warmup(&jerk_run(VelocityMethod::TreeGrid, false, steps));
                Measurement::at_most("vpm/poisson-jerk", poisson / tree, 1.0, "1")
            },
            known_gap: None,
        },
    ]
}

/// The manufactured vector potential on the unit cube: three smooth components.
pub(crate) fn exact_potential(p: DVec3) -> DVec3 {
    DVec3::new(
        (PI * p.x).sin() * (PI * p.y).sin() * (PI * p.z).sin(),
        (PI * p.x).cos() * p.y * p.y,
        p.x.exp() * (PI * p.z).sin(),
    )
}

/// `ω = −∇²A` of `exact_potential`.
pub(crate) fn exact_vorticity(p: DVec3) -> DVec3 {
    let pi2 = PI * PI;
    DVec3::new(
        3.0 * pi2 * (PI * p.x).sin() * (PI * p.y).sin() * (PI * p.z).sin(),
        (PI * p.x).cos() * (pi2 * p.y * p.y - 2.0),
        (pi2 - 1.0) * p.x.exp() * (PI * p.z).sin(),
    )
}

/// Max error of the solved vector potential against `exact_potential` on `n³` grids of the unit cube, with
/// the exact values on the boundary layer.
pub fn manufactured_errors(sizes: &[usize]) -> Vec<f64> {
    sizes
        .iter()
        .map(|&n| {
            let grid = FittedGrid {
                dims: [n; 3],
                origin: [0.0; 3],
                spacing: 1.0 / n as f64,
            };
            let mut points = Vec::new();
            grid.points_into(&mut points);
            let mut solver = PoissonVelocity::default();
            solver.vorticity = points.iter().map(|&p| exact_vorticity(p)).collect();
            let params = PoissonParams {
                decimate: Decimation::Off,
                tolerance: 1e-10,
                ..Default::default()
            };
            let mut exact = |p: &[DVec3], out: &mut [DVec3]| {
                for (o, &x) in out.iter_mut().zip(p) {
                    *o = exact_potential(x);
                }
            };
            let mut u = Vec::new();
            solver
                .solve_vorticity(&params, &grid, Some(&mut exact), &mut u)
                .expect("the manufactured problem converges");
            points
                .iter()
                .zip(&solver.potential())
                .map(|(&p, &a)| (a - exact_potential(p)).length())
                .fold(0.0, f64::max)
        })
        .collect()
}

/// The ring of the Poisson checks: R = 0.5, Gaussian core a = 0.08, Γ = 1, 4000 vortons.
pub fn test_ring() -> Ring {
    Ring {
        center: DVec3::ZERO,
        axis: DVec3::X,
        radius: 0.5,
        core_radius: 0.08,
        circulation: 1.0,
        vortons: 4000,
        ..Default::default()
    }
}

/// RMS relative error of the Poisson technique's grid velocity against direct Biot–Savart summation at the
/// interior grid points farther than three core radii from the ring's core, on an `n`-point grid.
pub fn ring_velocity_error(boundary: PotentialBoundary, decimate: Decimation, n: usize) -> f64 {
    ring_velocity_error_with(
        PoissonParams {
            boundary,
            decimate,
            tolerance: 1e-8,
            ..Default::default()
        },
        n,
    )
}

/// [`ring_velocity_error`] with any Poisson settings.
pub fn ring_velocity_error_with(poisson: PoissonParams, n: usize) -> f64 {
    let (grid_u, direct) = ring_velocity_on(poisson, n, None, None);
    crate::vpm::tree::rms_relative_error(&grid_u, &direct)
}

/// The Poisson technique's grid velocity of the test ring on an `n`-point grid, its vector Poisson solve on
/// `device` and its splat on `splat` where they are given, and the direct Biot–Savart velocity, at the
/// points of [`ring_velocity_error`].
pub fn ring_velocity_on(
    poisson: PoissonParams,
    n: usize,
    device: Option<SharedPoissonDevice>,
    splat: Option<SharedSplatDevice>,
) -> (Vec<DVec3>, Vec<DVec3>) {
    let ring = test_ring();
    let mut sim = VpmSim::new(VpmParams::default()).expect("valid parameters");
    sim.add_ring(&ring);
    let v = sim.vortons();
    let strength: Vec<DVec3> = (0..v.len()).map(|i| v.strength(i)).collect();
    let params = VpmParams {
        velocity: VelocityMethod::Poisson,
        poisson,
        grid_resolution: [n; 3],
        grid_margin: 0.25,
        ..Default::default()
    };
    let mut solver = VelocitySolver::default();
    solver.poisson.device = device;
    solver.poisson.splat_device = splat;
    solver.solve(
        &params,
        &Query {
            position: &v.position,
            strength: &strength,
            radius: &v.radius,
            tracers: &[],
            gradient: false,
            stage: None,
        },
    );
    assert!(solver.error.is_none(), "the Poisson solve failed");
    let grid = solver.grid;
    let mut points = Vec::new();
    grid.points_into(&mut points);
    let keep: Vec<usize> = (0..points.len())
        .filter(|&i| {
            let c = [i % n, (i / n) % grid.dims[1], i / (n * grid.dims[1])];
            let inside = (0..3).all(|a| c[a] > 0 && c[a] + 1 < grid.dims[a]);
            let p = points[i] - ring.center;
            let axial = p.dot(ring.axis);
            let radial = (p - ring.axis * axial).length();
            let to_core = ((radial - ring.radius).powi(2) + axial * axial).sqrt();
            inside && to_core > 3.0 * ring.core_radius
        })
        .collect();
    let targets: Vec<DVec3> = keep.iter().map(|&i| points[i]).collect();
    let mut src = Sources::default();
    src.fill(ring.center, &v.position, &strength, &v.radius);
    let mut direct = vec![DVec3::ZERO; targets.len()];
    biot_savart::direct(&src, &targets, &mut direct, None);
    let u = solver.grid_velocity();
    let grid_u: Vec<DVec3> = keep.iter().map(|&i| DVec3::from_array(u[i])).collect();
    (grid_u, direct)
}

/// Boundary values decimated by `how` against full ones for the test ring on an `n`-point grid: the RMS
/// relative difference of the vector potential on the boundary, and of the grid velocity everywhere.
pub fn decimation_difference(n: usize, how: Decimation) -> (f64, f64) {
    let ring = test_ring();
    let mut sim = VpmSim::new(VpmParams::default()).expect("valid parameters");
    sim.add_ring(&ring);
    let v = sim.vortons();
    let strength: Vec<DVec3> = (0..v.len()).map(|i| v.strength(i)).collect();
    let run = |decimate: Decimation| {
        let params = VpmParams {
            velocity: VelocityMethod::Poisson,
            poisson: PoissonParams {
                decimate,
                tolerance: 1e-8,
                ..Default::default()
            },
            grid_resolution: [n; 3],
            grid_margin: 0.25,
            ..Default::default()
        };
        let mut solver = VelocitySolver::default();
        solver.solve(
            &params,
            &Query {
                position: &v.position,
                strength: &strength,
                radius: &v.radius,
                tracers: &[],
                gradient: false,
                stage: None,
            },
        );
        let g = solver.grid;
        let potential = solver.poisson.potential();
        let boundary: Vec<DVec3> = (0..g.len())
            .filter(|&i| {
                let c = [
                    i % g.dims[0],
                    (i / g.dims[0]) % g.dims[1],
                    i / (g.dims[0] * g.dims[1]),
                ];
                (0..3).any(|a| c[a] == 0 || c[a] + 1 == g.dims[a])
            })
            .map(|i| potential[i])
            .collect();
        let u: Vec<DVec3> = solver
            .grid_velocity()
            .iter()
            .map(|&u| DVec3::from_array(u))
            .collect();
        (boundary, u)
    };
    let (full_a, full_u) = run(Decimation::Off);
    let (dec_a, dec_u) = run(how);
    (
        crate::vpm::tree::rms_relative_error(&dec_a, &full_a),
        crate::vpm::tree::rms_relative_error(&dec_u, &full_u),
    )
}

/// Relative error of the density splat's total mass against the vortons' Σ ρ'V for 10⁴ random vortons with
/// density and temperature deviations, some outside the grid's margin.
pub fn density_splat_error() -> f64 {
    let mut sim = VpmSim::new(VpmParams::default()).expect("valid parameters");
    let mut rng = SplitMix64::new(7);
    let v = sim.vortons_mut();
    for _ in 0..10_000 {
        let p = DVec3::new(rng.next_f64(), rng.next_f64(), rng.next_f64());
        v.push(p, DVec3::ZERO, 0.01, rng.range(0.5e-6, 1.5e-6));
        let last = v.len() - 1;
        v.density[last] = rng.range(-5.0, 20.0);
        v.temperature[last] = rng.range(-3.0, 3.0);
    }
    // The ambient density the case was written with (the default is now air's 1.2 kg/m³): its round-off-level
    // measurement stays comparable from build to build.
    let params = VpmParams {
        grid_resolution: [24, 24, 24],
        ambient_density: 1.0,
        ..Default::default()
    };
    let v = sim.vortons();
    let (rho0, beta) = (params.ambient_density, params.buoyancy.thermal_expansion);
    let mass = par::sum(v.len(), |i| v.buoyant_density(i, rho0, beta) * v.volume[i]);
    let mut b = Buoyancy::default();
    b.splat_density(v, &params);
    ((b.grid_mass() - mass) / mass).abs()
}

/// What the falling (or rising) ball did early on.
#[derive(Clone, Copy, Debug)]
pub struct BallRun {
    /// Acceleration of the ball's centroid along gravity (m/s²), fitted over the early steps.
    pub acceleration: f64,
    /// Its ratio to the added-mass value (2/3) g ρ'/ρ₀.
    pub ratio: f64,
    /// The linear impulse along gravity at the end (m⁴/s): positive and growing when a ring forms.
    pub impulse_along_g: f64,
    /// The same halfway through.
    pub impulse_along_g_half: f64,
}

/// A ball of radius 0.1 m with relative density deviation `relative` (ρ'/ρ₀), released from rest under
/// g = 9.81 m/s² and simulated with the Poisson technique for 0.1 s (quick: 0.06 s). The centroid of the
/// ball's vortons (those carrying the deviation) is sampled each step; its acceleration along gravity is the
/// least-squares fit of `y = y₀ + v₀t + ½at²`.
pub fn ball_acceleration(relative: f64, quick: bool) -> BallRun {
    ball_acceleration_at(relative, 32, if quick { 6000 } else { 12_000 }, quick)
}

/// [`ball_acceleration`] on an `n`-point grid with `vortons` vortons.
pub fn ball_acceleration_at(relative: f64, n: usize, vortons: usize, quick: bool) -> BallRun {
    ball_acceleration_by(VelocityMethod::Poisson, relative, n, vortons, quick)
}

/// [`ball_acceleration_at`] with any velocity technique (the Biot–Savart ones as the reference of the same
/// vortons).
pub fn ball_acceleration_by(
    velocity: VelocityMethod,
    relative: f64,
    n: usize,
    vortons: usize,
    quick: bool,
) -> BallRun {
    ball_acceleration_on(velocity, relative, n, vortons, quick, &|_| {})
}

/// [`ball_acceleration_by`], `prepare` run on the simulation first (to hand its solves to a device).
pub fn ball_acceleration_on(
    velocity: VelocityMethod,
    relative: f64,
    n: usize,
    vortons: usize,
    quick: bool,
    prepare: &dyn Fn(&mut VpmSim),
) -> BallRun {
    let g = 9.81;
    let params = VpmParams {
        velocity,
        ambient_density: 1000.0,
        grid_resolution: [n; 3],
        grid_margin: 0.1,
        ..Default::default()
    };
    let mut sim = VpmSim::new(params).expect("valid parameters");
    prepare(&mut sim);
    sim.add_ball(&Ball {
        center: DVec3::ZERO,
        radius: 0.1,
        density_deviation: relative * 1000.0,
        vortons,
        ..Default::default()
    });
    let members: Vec<usize> = (0..sim.vortons().len())
        .filter(|&i| sim.vortons().density[i] != 0.0)
        .collect();
    let down = DVec3::new(0.0, -1.0, 0.0);
    let depth = |sim: &VpmSim| {
        let v = sim.vortons();
        members
            .iter()
            .map(|&i| v.position[i].dot(down))
            .sum::<f64>()
            / members.len() as f64
    };
    let dt = 0.0025;
    let steps = if quick { 24 } else { 40 };
    let (mut t, mut y) = (vec![0.0], vec![depth(&sim)]);
    let mut half = 0.0;
    for s in 0..steps {
        sim.step(dt).expect("the ball diverged");
        t.push(sim.time());
        y.push(depth(&sim));
        if s + 1 == steps / 2 {
            half = sim.impulse().dot(down);
        }
    }
    let a = quadratic_fit(&t, &y);
    let reference = 2.0 / 3.0 * g * relative;
    BallRun {
        acceleration: a,
        ratio: a / reference,
        impulse_along_g: sim.impulse().dot(down),
        impulse_along_g_half: half,
    }
}

/// The `a` of the least-squares fit `y ≈ c₀ + c₁t + ½at²`.
fn quadratic_fit(t: &[f64], y: &[f64]) -> f64 {
    // Normal equations of the basis (1, t, t²/2).
    let basis = |t: f64| [1.0, t, 0.5 * t * t];
    let mut m = [[0.0; 3]; 3];
    let mut r = [0.0; 3];
    for (&t, &y) in t.iter().zip(y) {
        let b = basis(t);
        for i in 0..3 {
            r[i] += b[i] * y;
            for j in 0..3 {
                m[i][j] += b[i] * b[j];
            }
        }
    }
    // Gaussian elimination (the 3×3 system is well conditioned for these samples).
    for k in 0..3 {
        for i in k + 1..3 {
            let f = m[i][k] / m[k][k];
            for j in k..3 {
                m[i][j] -= f * m[k][j];
            }
            r[i] -= f * r[k];
        }
    }
    let mut c = [0.0; 3];
    for i in (0..3).rev() {
        let s: f64 = (i + 1..3).map(|j| m[i][j] * c[j]).sum();
        c[i] = (r[i] - s) / m[i][i];
    }
    c[2]
}

/// Issue 25's dense ball, scaled down: mean jerk (m/s³, [`mean_after_warmup`]) of a ball of radius 0.1 m,
/// 1% denser than ambient, with `vortons` vortons on an `n`-point grid, over `steps` fixed steps of 0.025 s,
/// by `velocity` (and, for the Poisson technique, `splat`).
pub fn ball_jerk(
    velocity: VelocityMethod,
    splat: Splat,
    vortons: usize,
    n: usize,
    steps: usize,
) -> f64 {
    let mut sim = VpmSim::new(VpmParams {
        velocity,
        poisson: PoissonParams {
            splat,
            ..Default::default()
        },
        ambient_density: 1000.0,
        grid_resolution: [n; 3],
        grid_margin: 0.1,
        ..Default::default()
    })
    .expect("valid parameters");
    sim.add_ball(&Ball {
        center: DVec3::ZERO,
        radius: 0.1,
        density_deviation: 10.0,
        vortons,
        ..Default::default()
    });
    let jerk: Vec<f64> = (0..steps)
        .map(|_| {
            sim.step(0.025)
                .expect("the ball diverged")
                .scalar("mean_jerk")
                .unwrap_or(0.0)
        })
        .collect();
    mean_after_warmup(&jerk)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stage's initial guess extrapolates its last two solutions. For a field growing linearly in time the
    /// guess is right up to the solver tolerance, so the third solve needs fewer cycles than one starting
    /// from the last solution (cycle counts are deterministic; this is not a timing).
    #[test]
    fn stage_history_extrapolates_the_initial_guess() {
        let grid = FittedGrid {
            dims: [24; 3],
            origin: [0.0; 3],
            spacing: 1.0 / 24.0,
        };
        let mut points = Vec::new();
        grid.points_into(&mut points);
        let params = PoissonParams {
            decimate: Decimation::Off,
            tolerance: 1e-6,
            ..Default::default()
        };
        let third_solve_cycles = |stage: Option<usize>| {
            let mut solver = PoissonVelocity::default();
            solver.set_stage(stage);
            let mut cycles = 0;
            for k in 1..=3 {
                let scale = k as f64;
                solver.vorticity = points.iter().map(|&p| exact_vorticity(p) * scale).collect();
                let mut boundary = |p: &[DVec3], out: &mut [DVec3]| {
                    for (o, &x) in out.iter_mut().zip(p) {
                        *o = exact_potential(x) * scale;
                    }
                };
                let mut u = Vec::new();
                solver
                    .solve_vorticity(&params, &grid, Some(&mut boundary), &mut u)
                    .expect("converges");
                cycles = solver.info.cycles;
            }
            cycles
        };
        let (plain, extrapolated) = (third_solve_cycles(None), third_solve_cycles(Some(0)));
        assert!(extrapolated < plain, "{extrapolated} cycles vs {plain}");
    }
}
