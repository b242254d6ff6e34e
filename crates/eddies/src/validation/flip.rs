//! Validation cases of the FLIP liquid: a tank at rest, the dam-break surge front against Martin & Moyce
//! (1952), and volume conservation in a 3D dam break.

use super::{Case, Measurement};
use crate::flip::{FlipConfig, FlipSim};
use crate::shape::Shape;
use crate::sim::Simulation;

/// The FLIP cases.
pub fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "flip/hydrostatic-2d",
            description: "tank at rest stays at rest: max particle speed after 2 s over sqrt(gH), at most 0.01",
            run: |quick| {
                // Quick (32², 1 s): the same bound. The tank at rest is exact up to the pressure solver's
                // tolerance at any size: measured 1.5e-7 at 32², 2.5e-8 at 64²; margin 10⁵.
                let (n, t) = if quick { (32, 1.0) } else { (64, 2.0) };
                let (ratio, _) = hydrostatic_2d(n, t);
                Measurement::at_most("flip/hydrostatic-2d", ratio, 0.01, "1")
            },
            known_gap: None,
        },
        Case {
            name: "flip/dam-break-front-2d",
            description: "2D dam-break surge front Z(T) against Martin & Moyce (1952) Table 2 (n² = 2): worst \
                          relative error, at most 10%",
            run: |quick| {
                // Quick (12 cells per a): the same bound; the lead does not depend on the resolution (21.3%
                // at 12, 20.7% at 24), and the case is a known gap of the model either way.
                let cells = if quick { 12 } else { 24 };
                let err = dam_break_front_error(cells);
                Measurement::at_most("flip/dam-break-front-2d", err, 0.10, "1")
            },
            known_gap: Some(DAM_BREAK_FRONT_GAP),
        },
        Case {
            name: "flip/dam-break-volume-3d",
            description: "3D dam break, 3 s: worst relative change of the liquid volume (smoothed particle \
                          density) against the column's, at most 2% (quick: 24 × 12 × 24, 1 s, at most 2.67%)",
            run: |quick| {
                if quick {
                    let drift = dam_break_volume_drift([24, 12, 24], 1.0, 1.0).fluid;
                    return Measurement::at_most("flip/dam-break-volume-3d", drift, QUICK_VOLUME_BOUND, "1");
                }
                let drift = dam_break_volume_drift([32, 16, 32], 3.0, 1.0).fluid;
                Measurement::at_most("flip/dam-break-volume-3d", drift, 0.02, "1")
            },
            known_gap: None,
        },
    ]
}

/// The bound of `flip/dam-break-volume-3d --quick` (24 × 12 × 24 cells, 1 s), derived from the full case's
/// 2% at 32 × 16 × 32. The smoothed-density volume errs in the cells cut by the free surface (a cell there
/// holds its particles' weights over the seeding count, not its liquid fraction), whose share of the liquid
/// is about h over the depth of the liquid: first order in h. So 2% at h = 1/32 scales to 2% × 32/24 = 2.67%
/// at h = 1/24. Measured (example `flip_volume_grid`): 2.15% at 24 (1.46% of it at the first step), 1.54% at
/// 32 (all of it at the first step); margin 1.24× on a deterministic run. The quick case does not use 16 ×
/// 8 × 16: there the collapsed column is a layer one cell deep, every liquid cell is a surface cell, and the
/// error (4.47%) is pre-asymptotic (2.08× the 24 one for 1.5× the h, an apparent order of 1.8).
pub const QUICK_VOLUME_BOUND: f64 = 0.02 * 32.0 / 24.0;

/// Why `flip/dam-break-front-2d` misses Martin & Moyce's front by about 21% against the 10% asked: the lead is
/// the same at 12, 24 and 48 cells per a (20.2–21.3%), and a front that ignores stray particles leads as much,
/// so it is the model (inviscid liquid, frictionless floor, column released at once with no gate), not a
/// numerical or detection error (docs/flip.md, "The Martin & Moyce comparison").
pub const DAM_BREAK_FRONT_GAP: &str =
    "inviscid FLIP on a frictionless floor, released at once with no gate, \
    leads the experiment's front by about 21% at every resolution (12, 24, 48 cells per a)";

/// Martin & Moyce (1952), *Part IV. An experimental study of the collapse of liquid columns on a rigid
/// horizontal plane*, Phil. Trans. R. Soc. A 244, 312–324, Table 2: surge-front position `Z = z/a` against
/// `T = n t √(g/a)` for the column of width a = 2.25 in and height n²a with n² = 2, so `T = t·√(2g/a)`. The
/// front was timed as it passed marks 0.25 in, 0.5 in, then every 0.5 in beyond the column (Z steps of
/// 0.222). An independent digitisation of the same experiment (PySPH, `pysph/examples/db_exp_data.py`,
/// "n² = 2 and a = 2.25", also in `t√(2g/a)`) agrees within 0.04 in Z.
pub const MARTIN_MOYCE_T: [f64; 15] = [
    0.41, 0.84, 1.19, 1.43, 1.63, 1.83, 1.98, 2.20, 2.32, 2.51, 2.65, 2.83, 2.98, 3.11, 3.33,
];
/// See [`MARTIN_MOYCE_T`].
pub const MARTIN_MOYCE_Z: [f64; 15] = [
    1.11, 1.22, 1.44, 1.67, 1.89, 2.11, 2.33, 2.56, 2.78, 3.00, 3.22, 3.44, 3.67, 3.89, 4.11,
];

/// A closed 2D tank of `n`² cells (1 m) filled to half height, run for `t_end` seconds at CFL 1. Returns the
/// largest particle speed at the end over `√(gH)` and the simulation.
pub fn hydrostatic_2d(n: usize, t_end: f64) -> (f64, FlipSim<2>) {
    hydrostatic_2d_on(n, t_end, |_| {})
}

/// As [`hydrostatic_2d`], the simulation first handed to `prepare` (which may attach devices:
/// [`FlipSim::set_pressure_device`], [`FlipSim::set_transfer_device`]).
pub fn hydrostatic_2d_on(
    n: usize,
    t_end: f64,
    prepare: impl FnOnce(&mut FlipSim<2>),
) -> (f64, FlipSim<2>) {
    let cfg = FlipConfig::<2> {
        resolution: [n, n],
        cell_size: 1.0 / n as f64,
        ..Default::default()
    };
    let depth = 0.5;
    let mut sim = FlipSim::new(cfg).expect("valid configuration");
    prepare(&mut sim);
    sim.fill(&Shape::box2([0.0, 0.0], [1.0, depth]), [0.0, 0.0]);
    run_until(&mut sim, t_end, 1.0);
    let speed = sim.measure().max_speed;
    (speed / (9.81 * depth).sqrt(), sim)
}

/// Steps `sim` to `t_end` with steps of at most `max_dt(cfl)`.
pub fn run_until<const D: usize>(sim: &mut FlipSim<D>, t_end: f64, cfl: f64) {
    while sim.time() < t_end - 1e-12 {
        let dt = sim.max_dt(cfl).min(t_end - sim.time());
        sim.step(dt).expect("the step succeeds");
    }
}

/// The 2D dam break of Martin & Moyce: a column `a` wide (`cells` cells) and `2a` tall against the left wall
/// of a tank 6a long and 3a high, with a = 2.25 in = 0.05715 m, released at t = 0 (no gate). Returns the
/// simulated surge front `Z(T)` (the rightmost particle over a) at the experiment's times.
pub fn dam_break_front(cells: usize) -> Vec<f64> {
    dam_break_fronts(cells).iter().map(|f| f.0).collect()
}

/// As [`dam_break_front`], with two definitions of the front at each time: the rightmost particle, and the
/// far edge of the rightmost floor cell at least half full (fill fraction ≥ 0.5, the `fill` field), which
/// ignores single particles thrown ahead of the liquid. Both over a.
pub fn dam_break_fronts(cells: usize) -> Vec<(f64, f64)> {
    let a = 0.05715;
    let h = a / cells as f64;
    let cfg = FlipConfig::<2> {
        resolution: [6 * cells, 3 * cells],
        cell_size: h,
        ..Default::default()
    };
    let mut sim = FlipSim::new(cfg).expect("valid configuration");
    sim.fill(&Shape::box2([0.0, 0.0], [a, 2.0 * a]), [0.0, 0.0]);
    let scale = (2.0 * 9.81 / a).sqrt();
    MARTIN_MOYCE_T
        .iter()
        .map(|&tt| {
            run_until(&mut sim, tt / scale, 1.0);
            let p = sim.particles();
            let front = p.pos[0].iter().fold(0.0f64, |m, &x| m.max(x as f64));
            let fill = sim.field("fill").expect("FLIP has a fill field");
            let floor = (0..6 * cells)
                .filter(|&i| fill.data[i] >= 0.5)
                .max()
                .map_or(0.0, |i| (i + 1) as f64 * h);
            (front / a, floor / a)
        })
        .collect()
}

/// Worst relative error of [`dam_break_front`] against Martin & Moyce's Table 2.
pub fn dam_break_front_error(cells: usize) -> f64 {
    dam_break_front(cells)
        .iter()
        .zip(MARTIN_MOYCE_Z)
        .map(|(z, zr)| (z - zr).abs() / zr)
        .fold(0.0, f64::max)
}

/// Worst relative deviations of three volume measures from the initial liquid volume over a run.
#[derive(Clone, Copy, Debug)]
pub struct VolumeDrift {
    /// [`FlipSim::fluid_volume`]: smoothed particle density, capped at 1.
    pub fluid: f64,
    /// [`FlipSim::count_volume`]: particle count per cell, capped at the seeding count.
    pub count: f64,
    /// [`FlipSim::surface_volume`], sampled every 0.1 s: inside the Zhu–Bridson surface.
    pub surface: f64,
}

/// A 3D dam break in a closed 2 × 1 × 2 (scaled) tank, the column a quarter of the length and half the height,
/// with the volume correction of strength `kappa`; returns the worst relative deviation of each volume
/// measure over `t_end` seconds from the column's volume `V₀` (which is also the particles' seeding volume,
/// the column filling whole cells).
pub fn dam_break_volume_drift(res: [usize; 3], t_end: f64, kappa: f64) -> VolumeDrift {
    dam_break_volume_drift_on(res, t_end, kappa, |_| {})
}

/// As [`dam_break_volume_drift`], the simulation first handed to `prepare` (which may attach devices:
/// [`FlipSim::set_pressure_device`], [`FlipSim::set_transfer_device`]).
pub fn dam_break_volume_drift_on(
    res: [usize; 3],
    t_end: f64,
    kappa: f64,
    prepare: impl FnOnce(&mut FlipSim<3>),
) -> VolumeDrift {
    let h = 1.0 / res[0] as f64;
    let size: [f64; 3] = std::array::from_fn(|k| res[k] as f64 * h);
    let mut cfg = FlipConfig::<3> {
        resolution: res,
        cell_size: h,
        ..Default::default()
    };
    cfg.params.volume_correction = kappa;
    let mut sim = FlipSim::new(cfg).expect("valid configuration");
    prepare(&mut sim);
    let column = [0.25 * size[0], 0.5 * size[1], size[2]];
    sim.fill(
        &Shape::Box {
            min: glam::DVec3::ZERO,
            max: glam::DVec3::from_array(column),
        },
        [0.0; 3],
    );
    let v0 = column.iter().product::<f64>();
    let mut worst = VolumeDrift {
        fluid: 0.0,
        count: 0.0,
        surface: 0.0,
    };
    let mut next_surface = 0.1;
    while sim.time() < t_end - 1e-12 {
        let dt = sim.max_dt(1.0).min(t_end - sim.time());
        let rec = sim.step(dt).expect("the step succeeds");
        let rel = |key: &str| (rec.scalar(key).expect("FLIP reports its volumes") / v0 - 1.0).abs();
        worst.fluid = worst.fluid.max(rel("fluid_volume"));
        worst.count = worst.count.max(rel("count_volume"));
        if sim.time() >= next_surface - 1e-9 {
            next_surface += 0.1;
            worst.surface = worst.surface.max((sim.surface_volume() / v0 - 1.0).abs());
        }
    }
    worst
}
