//! Validation cases of reintegration tracking: conserved quantities, the donor-cell limit, hydrostatic
//! equilibrium, the particle-like/field-like transition of Moroz 2020, symmetry and determinism.
//!
//! Each case builds its scene in code, runs it, and returns the measured value beside its reference, so that
//! `eddies validate` and the tests in `tests/reint.rs` report the same numbers.

use super::{Case, Measurement};
use crate::par;
use crate::reint::{Boundary, Eos, ReintConfig, ReintSim, Substance};
use crate::rng::SplitMix64;
use crate::shape::Shape;
use crate::sim::Simulation;
use glam::DVec3;

/// The method's validation cases.
pub fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "reint/mass-conservation-2d",
            description: "2000 steps of a two-substance dam break over an obstacle: largest relative drift of \
                          any substance's mass (reference 0, tolerance 1e-5)",
            run: mass_conservation_2d,
            known_gap: None,
        },
        Case {
            name: "reint/mass-conservation-3d",
            description: "500 steps of a 3D dam break around a pillar: largest relative mass drift of any \
                          substance (reference 0, tolerance 1e-5)",
            run: mass_conservation_3d,
            known_gap: None,
        },
        Case {
            name: "reint/donor-cell-limit",
            description: "r = 0.5 with particles at cell centres: one step against first-order upwind \
                          (donor-cell, corner transport) advection, max error relative to the largest mass",
            run: donor_cell_limit,
            known_gap: None,
        },
        Case {
            name: "reint/settling-kinetic-energy",
            description: "a liquid layer released under gravity settles: final over peak kinetic energy \
                          (at most 0.01)",
            run: settling_kinetic_energy,
            known_gap: None,
        },
        Case {
            name: "reint/hydrostatic-density-gradient",
            description: "settled layer: relative density gradient with depth against hydrostatics \
                          (1/ρ)dρ/dz = g/c² (tolerance 25%: SPH on a 3×3 stencil)",
            run: hydrostatic_gradient,
            known_gap: None,
        },
        Case {
            name: "reint/particle-like-r0.3",
            description: "an isolated blob moving diagonally with r = 0.3 keeps its size: growth of its \
                          mass-weighted RMS radius over 200 steps (at most 1.25×)",
            run: particle_like,
            known_gap: None,
        },
        Case {
            name: "reint/field-like-r0.7",
            description: "the same blob with r = 0.7 spreads like a diffusing field: growth of its RMS \
                          radius over 200 steps (at least 2×)",
            run: field_like,
            known_gap: None,
        },
        Case {
            name: "reint/mirror-symmetry",
            description: "a mirror-symmetric splash over 500 steps: largest asymmetry of the mass field \
                          relative to its maximum (at most 1e-5)",
            run: mirror_symmetry,
            known_gap: None,
        },
        Case {
            name: "reint/thread-determinism",
            description: "the 2D dam break with 1, 2 and 7 threads: number of state checksums that differ \
                          from the 1-thread one (reference 0)",
            run: thread_determinism,
            known_gap: None,
        },
    ]
}

/// Runs `steps` steps at the largest stable step for `cfl`.
fn run<const D: usize>(sim: &mut ReintSim<D>, steps: usize, cfl: f64) {
    for _ in 0..steps {
        let dt = sim.max_dt(cfl);
        sim.step(dt).expect("validation scene diverged");
    }
}

/// Largest relative change of any substance's mass.
fn worst_drift(before: &[f64], after: &[f64]) -> f64 {
    before
        .iter()
        .zip(after)
        .map(|(b, a)| ((a - b) / b).abs())
        .fold(0.0, f64::max)
}

fn two_liquids() -> Vec<Substance> {
    vec![
        Substance {
            rest_density: 1000.0,
            color: [0.1, 0.4, 0.9],
        },
        Substance {
            rest_density: 1500.0,
            color: [0.9, 0.3, 0.1],
        },
    ]
}

/// A violent 2D scene: two liquid columns of different density, one thrown sideways, crashing over a
/// round obstacle in a closed 1 m box.
pub fn violent_dam_break_2d(n: usize) -> ReintSim<2> {
    let cfg = ReintConfig::<2> {
        resolution: [n, n],
        cell_size: 1.0 / n as f64,
        boundary: Boundary::Closed,
        gravity: [0.0, -9.81],
        params: crate::reint::ReintParams {
            sound_speed: 12.0,
            viscosity: 1e-4,
            ..Default::default()
        },
        substances: two_liquids(),
    };
    let mut sim = ReintSim::new(cfg).expect("valid scene");
    sim.add_obstacle(Shape::Sphere {
        center: DVec3::new(0.55, 0.18, 0.0),
        radius: 0.1,
    });
    sim.fill(&Shape::box2([0.0, 0.0], [0.3, 0.7]), 0, 1.0, [3.0, 0.0]);
    sim.fill(&Shape::box2([0.8, 0.0], [1.0, 0.5]), 1, 1.0, [-1.0, 0.0]);
    sim
}

fn mass_conservation_2d(quick: bool) -> Measurement {
    let mut sim = violent_dam_break_2d(128);
    let before = sim.substance_masses();
    run(&mut sim, if quick { 200 } else { 2000 }, 0.8);
    let drift = worst_drift(&before, &sim.substance_masses());
    // Quick (200 steps): the same bound. Masses are whole quanta summed exactly, so the drift is exactly 0
    // after any number of steps (measured 0 at both lengths); the margin is the whole 1e-5.
    Measurement::within("reint/mass-conservation-2d", drift, 0.0, 1e-5, "1")
}

fn mass_conservation_3d(quick: bool) -> Measurement {
    let n = 40;
    let cfg = ReintConfig::<3> {
        resolution: [n, n, n],
        cell_size: 1.0 / n as f64,
        params: crate::reint::ReintParams {
            sound_speed: 10.0,
            ..Default::default()
        },
        substances: two_liquids(),
        ..Default::default()
    };
    let mut sim = ReintSim::new(cfg).expect("valid scene");
    sim.add_obstacle(Shape::Cylinder {
        center: DVec3::new(0.6, 0.5, 0.5),
        axis: DVec3::Y,
        radius: 0.1,
        height: 1.0,
    });
    sim.fill(
        &Shape::Box {
            min: DVec3::ZERO,
            max: DVec3::new(0.3, 0.7, 1.0),
        },
        0,
        1.0,
        [2.0, 0.0, 0.5],
    );
    sim.fill(
        &Shape::Box {
            min: DVec3::new(0.8, 0.0, 0.0),
            max: DVec3::new(1.0, 0.4, 0.6),
        },
        1,
        1.0,
        [0.0; 3],
    );
    let before = sim.substance_masses();
    run(&mut sim, if quick { 100 } else { 500 }, 0.8);
    let drift = worst_drift(&before, &sim.substance_masses());
    // Quick (100 steps): the same bound, for the same reason as in 2D (measured 0 at both lengths).
    Measurement::within("reint/mass-conservation-3d", drift, 0.0, 1e-5, "1")
}

/// Moroz 2020: "if we fix the particle positions to the cell centers and set the distribution radius to 0.5
/// ... we'll get exactly forward Euler advection". The reference is first-order upwind (donor-cell)
/// advection with corner transport (Colella 1990): the content of each cell moves by its velocity times Δt,
/// and is shared among the cells it lands on in proportion to the overlap — for a displacement (cx, cy) in
/// cells, fractions (1−|cx|)(1−|cy|), |cx|(1−|cy|), (1−|cx|)|cy| and |cx||cy| go to the cell, its x and y
/// upwind-to-downwind neighbours and the diagonal one. Computed here in f64.
fn donor_cell_limit(quick: bool) -> Measurement {
    let n = if quick { 32 } else { 96 };
    let h = 1.0 / n as f64;
    let cfg = ReintConfig::<2> {
        resolution: [n, n],
        cell_size: h,
        boundary: Boundary::Open,
        gravity: [0.0, 0.0],
        params: crate::reint::ReintParams {
            diffusion_radius: 0.5,
            forces: false,
            ..Default::default()
        },
        substances: vec![Substance::default()],
    };
    let mut sim = ReintSim::new(cfg).expect("valid scene");
    let dt = 1e-3;
    let rest = 1000.0 * h * h;
    let mut rng = SplitMix64::new(7);
    let mut cells = Vec::new();
    // A smooth, rotating and shearing velocity field (up to 0.9 cells per step), random masses, a vacuum
    // margin so that nothing leaves the open domain.
    for y in 2..n - 2 {
        for x in 2..n - 2 {
            let (px, py) = ((x as f64 + 0.5) * h - 0.5, (y as f64 + 0.5) * h - 0.5);
            let c = [-py * 1.6 + 0.1 * px, px * 1.6 - 0.2 * py].map(|v| v * 0.9 / (dt * n as f64));
            let m = rest * (0.2 + 0.8 * rng.next_f64());
            let v = [(c[0] * h) as f32, (c[1] * h) as f32];
            sim.set_particle([x, y], &[m as f32], [0.0, 0.0], v);
            cells.push(([x, y], sim.particle([x, y])));
        }
    }
    let mut reference = vec![0.0f64; n * n];
    for (c, p) in &cells {
        let m = p.masses[0] as f64;
        let d = p.velocity.map(|v| v as f64 * dt / h);
        for (oy, fy) in [(0i64, 1.0 - d[1].abs()), (d[1].signum() as i64, d[1].abs())] {
            for (ox, fx) in [(0i64, 1.0 - d[0].abs()), (d[0].signum() as i64, d[0].abs())] {
                let (x, y) = (c[0] as i64 + ox, c[1] as i64 + oy);
                reference[y as usize * n + x as usize] += m * fx * fy;
            }
        }
    }
    sim.advect(dt);
    let mass = sim.field("mass").expect("mass field").data;
    let peak = reference.iter().cloned().fold(0.0, f64::max);
    let err = mass
        .iter()
        .zip(&reference)
        .map(|(&m, &r)| (m as f64 - r).abs())
        .fold(0.0, f64::max);
    // Quick (32²): the same bound. The error is the rounding of each cell's shares to quanta (2.4e-7 of a
    // rest cell, up to four shares a cell), which does not depend on the grid size: measured 5.9e-7 at 32²,
    // 6.1e-7 at 96², margin 1.6×.
    Measurement::within("reint/donor-cell-limit", err / peak, 0.0, 1e-6, "1")
}

/// A layer of viscous liquid filling the lower 40% of a closed 2D box, released at rest at uniform density,
/// so that it first compresses under its weight, oscillates, and then has to settle (8000 steps, 7.3 s).
fn settling_layer() -> (ReintSim<2>, Vec<f64>) {
    let n = 64;
    let cfg = ReintConfig::<2> {
        resolution: [n, n],
        cell_size: 1.0 / n as f64,
        gravity: [0.0, -9.81],
        params: crate::reint::ReintParams {
            sound_speed: 8.0,
            // A viscous liquid (goo): a 0.4 m layer of water-like viscosity would slosh for minutes.
            viscosity: 3e-2,
            eos: Eos::Tait,
            gamma: 1.0,
            ..Default::default()
        },
        ..Default::default()
    };
    let mut sim = ReintSim::new(cfg).expect("valid scene");
    sim.fill(&Shape::box2([0.0, 0.0], [1.0, 0.4]), 0, 1.0, [0.0, 0.0]);
    let mut energy = Vec::new();
    for _ in 0..8000 {
        let dt = sim.max_dt(0.5);
        let rec = sim.step(dt).expect("settling layer diverged");
        energy.push(
            rec.scalar("kinetic_energy")
                .expect("kinetic energy recorded"),
        );
    }
    (sim, energy)
}

fn settling_kinetic_energy(_quick: bool) -> Measurement {
    let (_, energy) = settling_layer();
    let peak = energy.iter().cloned().fold(0.0, f64::max);
    let last = *energy.last().expect("steps ran");
    Measurement::at_most("reint/settling-kinetic-energy", last / peak, 0.01, "1")
}

/// Hydrostatics: dP/dz = −ρg with dP/dρ = c² (Tait with γ = 1 is exactly linear, P = ρ₀c²(ρ/ρ₀ − 1)), so
/// (1/ρ) dρ/d(depth) = g/c². Measured by a least-squares fit of ln ρ̄(row) against depth over the rows of the
/// settled layer, leaving out two rows at the bottom wall and at the free surface.
fn hydrostatic_gradient(_quick: bool) -> Measurement {
    let (sim, _) = settling_layer();
    let f = sim.field("density").expect("density field");
    let (ny, nx) = (f.shape[0], f.shape[1]);
    let h = sim.cell_size();
    let rows: Vec<(f64, f64)> = (0..ny)
        .map(|y| {
            let row = &f.data[y * nx..(y + 1) * nx];
            (
                (y as f64 + 0.5) * h,
                row.iter().map(|&v| v as f64).sum::<f64>() / nx as f64,
            )
        })
        .filter(|&(_, rho)| rho > 500.0)
        .collect();
    let inner = &rows[2..rows.len() - 2];
    let k = inner.len() as f64;
    let (mz, ml) = inner
        .iter()
        .fold((0.0, 0.0), |(a, b), &(z, r)| (a + z / k, b + r.ln() / k));
    let (sxy, sxx) = inner.iter().fold((0.0, 0.0), |(a, b), &(z, r)| {
        (a + (z - mz) * (r.ln() - ml), b + (z - mz).powi(2))
    });
    let measured = -sxy / sxx;
    let c = sim.config().params.sound_speed as f64;
    let reference = 9.81 / (c * c);
    Measurement::within(
        "reint/hydrostatic-density-gradient",
        measured,
        reference,
        0.25 * reference,
        "1/m",
    )
}

/// Mass-weighted RMS distance of the mass from its centroid (cells).
fn rms_radius(sim: &ReintSim<2>) -> f64 {
    let f = sim.field("mass").expect("mass field");
    let nx = f.shape[1];
    let (mut m, mut cx, mut cy) = (0.0, 0.0, 0.0);
    for (i, &v) in f.data.iter().enumerate() {
        let v = v as f64;
        m += v;
        cx += v * (i % nx) as f64;
        cy += v * (i / nx) as f64;
    }
    let (cx, cy) = (cx / m, cy / m);
    let s: f64 = f
        .data
        .iter()
        .enumerate()
        .map(|(i, &v)| v as f64 * (((i % nx) as f64 - cx).powi(2) + ((i / nx) as f64 - cy).powi(2)))
        .sum();
    (s / m).sqrt()
}

/// RMS radius after / before 200 steps of a 3×3-cell blob moving at (0.37, 0.23) cells per step with no
/// forces, with diffusion radius `r`.
fn blob_growth(r: f32) -> f64 {
    let n = 160;
    let h = 1.0 / n as f64;
    let cfg = ReintConfig::<2> {
        resolution: [n, n],
        cell_size: h,
        gravity: [0.0, 0.0],
        params: crate::reint::ReintParams {
            diffusion_radius: r,
            forces: false,
            ..Default::default()
        },
        ..Default::default()
    };
    let mut sim = ReintSim::new(cfg).expect("valid scene");
    let dt = 1e-3;
    let v = [(0.37 * h / dt) as f32, (0.23 * h / dt) as f32];
    sim.fill(
        &Shape::box2([10.0 * h, 10.0 * h], [13.0 * h, 13.0 * h]),
        0,
        1.0,
        v,
    );
    let before = rms_radius(&sim);
    for _ in 0..200 {
        sim.step(dt).expect("blob diverged");
    }
    rms_radius(&sim) / before
}

fn particle_like(_quick: bool) -> Measurement {
    Measurement::at_most("reint/particle-like-r0.3", blob_growth(0.3), 1.25, "1")
}

fn field_like(_quick: bool) -> Measurement {
    Measurement::at_least("reint/field-like-r0.7", blob_growth(0.7), 2.0, "1")
}

fn mirror_symmetry(quick: bool) -> Measurement {
    let n = 96;
    let cfg = ReintConfig::<2> {
        resolution: [n, n],
        cell_size: 1.0 / n as f64,
        params: crate::reint::ReintParams {
            sound_speed: 10.0,
            viscosity: 1e-4,
            ..Default::default()
        },
        substances: two_liquids(),
        ..Default::default()
    };
    let mut sim = ReintSim::new(cfg).expect("valid scene");
    sim.add_obstacle(Shape::Sphere {
        center: DVec3::new(0.5, 0.35, 0.0),
        radius: 0.08,
    });
    sim.fill(&Shape::box2([0.0, 0.0], [1.0, 0.2]), 0, 1.0, [0.0, 0.0]);
    sim.fill(&Shape::box2([0.0, 0.2], [0.2, 0.7]), 1, 1.0, [2.0, 0.0]);
    sim.fill(&Shape::box2([0.8, 0.2], [1.0, 0.7]), 1, 1.0, [-2.0, 0.0]);
    run(&mut sim, if quick { 100 } else { 500 }, 0.8);
    let f = sim.field("mass").expect("mass field");
    let nx = f.shape[1];
    let peak = f.data.iter().cloned().fold(0.0f32, f32::max) as f64;
    let asym = f
        .data
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let (x, y) = (i % nx, i / nx);
            (v as f64 - f.data[y * nx + (nx - 1 - x)] as f64).abs()
        })
        .fold(0.0, f64::max);
    // Quick (100 steps): the same bound; the summation is mirror-symmetric, so the asymmetry is exactly 0
    // after any number of steps (measured 0 at both lengths).
    Measurement::at_most("reint/mirror-symmetry", asym / peak, 1e-5, "1")
}

fn thread_determinism(quick: bool) -> Measurement {
    let steps = if quick { 50 } else { 200 };
    let checksum = |threads: usize| {
        par::with_threads(threads, || {
            let mut sim = violent_dam_break_2d(96);
            run(&mut sim, steps, 0.8);
            sim.checksum()
        })
    };
    let reference = checksum(1);
    let differing = [2, 7].iter().filter(|&&t| checksum(t) != reference).count();
    // Quick (50 steps): the same reference; bit-identity holds step by step, so any length must give 0.
    Measurement::within(
        "reint/thread-determinism",
        differing as f64,
        0.0,
        0.0,
        "runs",
    )
}
