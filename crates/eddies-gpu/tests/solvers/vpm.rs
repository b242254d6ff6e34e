//! The vortex particle method's direct Biot–Savart sum on the GPU against the CPU's (`eddies::vpm`): the same
//! velocities and gradients to f32 rounding, the same bits run to run; and the method's validation cases with
//! their velocities on the GPU.

use std::sync::{Arc, Mutex, OnceLock};

use eddies::rng::SplitMix64;
use eddies::vpm::biot_savart::{self, Sources, FOUR_PI_INV};
use eddies::vpm::diffusion::Pse;
use eddies::vpm::poisson::{SharedPoissonDevice, SharedSplatDevice};
use eddies::vpm::sampling::SharedGridDevice;
use eddies::vpm::Vortons;
use eddies_gpu::pressure::GpuPoisson;
use eddies_gpu::vpm::{DirectSum, GpuSampling, GpuSplat};
use eddies_gpu::Gpu;
use glam::DVec3;

fn gpu() -> Option<Arc<Gpu>> {
    static GPU: OnceLock<Option<Arc<Gpu>>> = OnceLock::new();
    GPU.get_or_init(|| eddies_gpu::device_or_skip().map(Arc::new))
        .clone()
}

/// `n` vortons in a 1 m cube about (0.3, −0.2, 0.5) with strengths of either sign and core radii 2–6 cm,
/// and `m` targets in and around it.
fn cloud(n: usize, m: usize) -> (Sources, Vec<[f32; 3]>) {
    let mut rng = SplitMix64::new(7);
    let centre = DVec3::new(0.3, -0.2, 0.5);
    let point = |rng: &mut SplitMix64, half: f64| {
        centre
            + DVec3::new(
                rng.range(-half, half),
                rng.range(-half, half),
                rng.range(-half, half),
            )
    };
    let position: Vec<DVec3> = (0..n).map(|_| point(&mut rng, 0.5)).collect();
    let strength: Vec<DVec3> = (0..n)
        .map(|_| {
            DVec3::new(
                rng.range(-1e-3, 1e-3),
                rng.range(-1e-3, 1e-3),
                rng.range(-1e-3, 1e-3),
            )
        })
        .collect();
    let radius: Vec<f64> = (0..n).map(|_| rng.range(0.02, 0.06)).collect();
    let mut sources = Sources::default();
    sources.fill(centre, &position, &strength, &radius);
    let targets = (0..m)
        .map(|_| {
            let p = point(&mut rng, 0.7) - centre;
            [p.x as f32, p.y as f32, p.z as f32]
        })
        .collect();
    (sources, targets)
}

/// The largest difference over the largest magnitude, over all components.
fn relative(a: &[f32], b: &[f32]) -> f64 {
    let scale = b.iter().fold(0f64, |m, x| m.max(x.abs() as f64));
    let diff = a
        .iter()
        .zip(b)
        .fold(0f64, |m, (x, y)| m.max((*x as f64 - *y as f64).abs()));
    diff / scale
}

/// 3000 vortons at 1000 targets (few targets: the vortons are summed in three chunks, the last one part
/// full, then added): velocity and gradient agree with the CPU's sums to 1e-5 of their largest magnitude. Both sum the same f32 terms in other orders; over 3000 terms of mixed sign the rounding of
/// the sums stays near 1e-6 of the magnitudes, and 1e-5 leaves room for the GPU's own `inverseSqrt`, which
/// WGSL allows 2 ulp (raised to the seventh power: about 1e-6).
#[test]
fn gpu_direct_sum_matches_the_cpu() {
    let Some(gpu) = gpu() else { return };
    let (sources, targets) = cloud(3000, 1000);
    let mut direct = DirectSum::new(&gpu);
    let velocity_only = direct.evaluate(&gpu, &sources, &targets, false).unwrap();
    let with_gradient = direct.evaluate(&gpu, &sources, &targets, true).unwrap();
    let k = FOUR_PI_INV as f32;
    // The CPU's two kernels (velocity alone, velocity with gradient) round differently too: each GPU
    // variant is compared with its CPU twin.
    let (mut cpu_u, mut cpu_ug, mut cpu_j) = (Vec::new(), Vec::new(), Vec::new());
    for t in &targets {
        let (u, j) = biot_savart::velocity_gradient_at(&sources, 0, sources.len, *t);
        cpu_ug.extend(u.map(|x| x * k));
        cpu_j.extend(j.map(|x| x * k));
        cpu_u.extend(biot_savart::velocity_at(&sources, 0, sources.len, *t).map(|x| x * k));
    }
    let flat = |v: &[[f32; 3]]| v.iter().flatten().copied().collect::<Vec<f32>>();
    let e_u = relative(&flat(&velocity_only.velocity), &cpu_u);
    let e_ug = relative(&flat(&with_gradient.velocity), &cpu_ug);
    let gpu_j: Vec<f32> = with_gradient.gradient.iter().flatten().copied().collect();
    let e_j = relative(&gpu_j, &cpu_j);
    assert!(e_u < 1e-5 && e_ug < 1e-5, "velocity: {e_u:e}, {e_ug:e}");
    assert!(e_j < 1e-5, "gradient: {e_j:e}");
    assert!(velocity_only.gradient.is_empty());
}

/// A step's stage asks for the velocity and gradient at the vortons and the velocity at the tracers; the
/// device sums both sets in one submission (`evaluate_both`, `GpuDirect::direct_both`). Each set must get
/// exactly the bits it gets alone: the same kernels over the same vortons, each set with its own
/// parameters. 3000 vortons at 1000 and 700 targets, both sets split into chunks; then without tracers.
#[test]
fn both_target_sets_in_one_round_trip_get_their_own_sums() {
    use eddies::vpm::biot_savart::{DirectDevice, Targets};
    let Some(gpu) = gpu() else { return };
    let (sources, targets) = cloud(3000, 1700);
    let (first, second) = targets.split_at(1000);
    let mut direct = DirectSum::new(&gpu);
    let [a, b] = direct
        .evaluate_both(&gpu, &sources, [(first, true), (second, false)])
        .unwrap();
    let alone_a = direct.evaluate(&gpu, &sources, first, true).unwrap();
    let alone_b = direct.evaluate(&gpu, &sources, second, false).unwrap();
    let bits = |v: &[[f32; 3]]| v.iter().flatten().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&a.velocity), bits(&alone_a.velocity));
    assert_eq!(a.gradient, alone_a.gradient);
    assert_eq!(bits(&b.velocity), bits(&alone_b.velocity));
    assert!(b.gradient.is_empty() && b.velocity.len() == second.len());
    let [c, d] = direct
        .evaluate_both(&gpu, &sources, [(first, false), (&[], true)])
        .unwrap();
    assert_eq!(d, Default::default());
    let alone_c = direct.evaluate(&gpu, &sources, first, false).unwrap();
    assert_eq!(bits(&c.velocity), bits(&alone_c.velocity));

    // Through the simulation's hook, in f64 about the vortons' origin.
    let at = |t: &[[f32; 3]]| -> Vec<DVec3> {
        t.iter()
            .map(|t| sources.origin + DVec3::new(t[0] as f64, t[1] as f64, t[2] as f64))
            .collect()
    };
    let (vortons, tracers) = (at(first), at(second));
    let mut device = eddies_gpu::vpm::GpuDirect::new(gpu);
    let (mut u, mut jac, mut ut) = (
        vec![DVec3::ZERO; vortons.len()],
        vec![[0.0; 9]; vortons.len()],
        vec![DVec3::ZERO; tracers.len()],
    );
    let vortons_set = Targets {
        at: &vortons,
        u: &mut u,
        jac: Some(&mut jac),
    };
    let tracers_set = Targets {
        at: &tracers,
        u: &mut ut,
        jac: None,
    };
    device
        .direct_both(&sources, [vortons_set, tracers_set])
        .unwrap();
    let (mut u1, mut jac1, mut ut1) = (
        vec![DVec3::ZERO; vortons.len()],
        vec![[0.0; 9]; vortons.len()],
        vec![DVec3::ZERO; tracers.len()],
    );
    device
        .direct(&sources, &vortons, &mut u1, Some(&mut jac1))
        .unwrap();
    device.direct(&sources, &tracers, &mut ut1, None).unwrap();
    assert!(u == u1 && jac == jac1 && ut == ut1);
    assert!(u.iter().chain(&ut).all(|v| *v != DVec3::ZERO));
}

/// The vector potential, the Poisson technique's boundary values with `vpm.boundary = "direct"`: 3000
/// vortons at 1000 targets through the simulation's device hook (`GpuDirect`, targets in f64 about their
/// own origin) agree with the CPU's `potential_direct` to 1e-5 of the largest magnitude, the tolerance of
/// the velocity above and for the same reasons (the kernel, `(r² + 3σ²/2)(r² + σ²)^(−3/2)`, takes the cube
/// of the reciprocal square root); a second evaluation repeats the bits, and no sources give zeros.
#[test]
fn the_potential_on_the_gpu_gives_the_cpus() {
    use eddies::vpm::biot_savart::DirectDevice;
    let Some(gpu) = gpu() else { return };
    let (sources, targets) = cloud(3000, 1000);
    let at: Vec<DVec3> = targets
        .iter()
        .map(|t| sources.origin + DVec3::new(t[0] as f64, t[1] as f64, t[2] as f64))
        .collect();
    let mut cpu = vec![DVec3::ZERO; at.len()];
    biot_savart::potential_direct(&sources, &at, &mut cpu);
    let mut device = eddies_gpu::vpm::GpuDirect::new(gpu);
    let mut on_gpu = vec![DVec3::ZERO; at.len()];
    device.potential(&sources, &at, &mut on_gpu).unwrap();
    let flat = |v: &[DVec3]| {
        v.iter()
            .flat_map(|a| a.to_array().map(|x| x as f32))
            .collect::<Vec<f32>>()
    };
    let e = relative(&flat(&on_gpu), &flat(&cpu));
    assert!(e < 1e-5, "potential: {e:e}");
    let mut again = vec![DVec3::ZERO; at.len()];
    device.potential(&sources, &at, &mut again).unwrap();
    assert!(on_gpu
        .iter()
        .zip(&again)
        .all(|(a, b)| a.to_array().map(f64::to_bits) == b.to_array().map(f64::to_bits)));
    let none = Sources {
        len: 0,
        ..sources.clone()
    };
    device.potential(&none, &at[..7], &mut again[..7]).unwrap();
    assert!(again[..7].iter().all(|a| *a == DVec3::ZERO));
}

/// From `TWO_PER_INVOCATION` targets on, each invocation sums for two: with a count that leaves the last
/// workgroup part-filled, every target (sampled along the whole range, and all of the last workgroup's)
/// still gets the CPU's velocity and gradient, to the tolerance of the test above.
#[test]
fn two_targets_per_invocation_match_the_cpu() {
    let Some(gpu) = gpu() else { return };
    let m = eddies_gpu::vpm::TWO_PER_INVOCATION + 300;
    let (sources, targets) = cloud(40, m);
    let out = DirectSum::new(&gpu)
        .evaluate(&gpu, &sources, &targets, true)
        .unwrap();
    let k = FOUR_PI_INV as f32;
    let picked: Vec<usize> = (0..m).step_by(997).chain(m - 600..m).collect();
    let (mut gpu_u, mut gpu_j, mut cpu_u, mut cpu_j) = (vec![], vec![], vec![], vec![]);
    for &i in &picked {
        let (u, j) = biot_savart::velocity_gradient_at(&sources, 0, sources.len, targets[i]);
        cpu_u.extend(u.map(|x| x * k));
        cpu_j.extend(j.map(|x| x * k));
        gpu_u.extend(out.velocity[i]);
        gpu_j.extend(out.gradient[i]);
    }
    assert_eq!(out.velocity.len(), m);
    let (e_u, e_j) = (relative(&gpu_u, &cpu_u), relative(&gpu_j, &cpu_j));
    assert!(
        e_u < 1e-5 && e_j < 1e-5,
        "velocity {e_u:e}, gradient {e_j:e}"
    );
}

/// A vorton's own velocity is zero (r = 0 with a finite core), and targets beyond the last workgroup's
/// sources, fewer than a tile, and an empty set of sources are handled.
#[test]
fn gpu_direct_sum_edges() {
    let Some(gpu) = gpu() else { return };
    let mut direct = DirectSum::new(&gpu);
    let (sources, _) = cloud(5, 0);
    let at_sources: Vec<[f32; 3]> = (0..5)
        .map(|k| [sources.x[k], sources.y[k], sources.z[k]])
        .collect();
    let alone = Sources {
        len: 1,
        ..sources.clone()
    };
    let out = direct
        .evaluate(&gpu, &alone, &at_sources[..1], true)
        .unwrap();
    assert_eq!(out.velocity, vec![[0.0; 3]]);
    let none = Sources {
        len: 0,
        ..sources.clone()
    };
    let out = direct.evaluate(&gpu, &none, &at_sources, false).unwrap();
    assert_eq!(out.velocity, vec![[0.0; 3]; 5]);
    assert!(direct
        .evaluate(&gpu, &sources, &[], true)
        .unwrap()
        .velocity
        .is_empty());
}

/// Each sum has one order: two evaluations give the same bits, and so does a fresh evaluator.
#[test]
fn gpu_direct_sum_repeats_bit_for_bit() {
    let Some(gpu) = gpu() else { return };
    let (sources, targets) = cloud(1500, 700);
    let a = DirectSum::new(&gpu)
        .evaluate(&gpu, &sources, &targets, true)
        .unwrap();
    let mut direct = DirectSum::new(&gpu);
    let _ = direct
        .evaluate(&gpu, &sources, &targets[..10], false)
        .unwrap();
    let b = direct.evaluate(&gpu, &sources, &targets, true).unwrap();
    let bits = |v: &[[f32; 9]]| {
        v.iter()
            .flatten()
            .map(|x| x.to_bits())
            .collect::<Vec<u32>>()
    };
    assert_eq!(bits(&a.gradient), bits(&b.gradient));
    assert_eq!(
        a.velocity
            .iter()
            .flatten()
            .map(|x| x.to_bits())
            .collect::<Vec<_>>(),
        b.velocity
            .iter()
            .flatten()
            .map(|x| x.to_bits())
            .collect::<Vec<_>>()
    );
}

/// The Poisson technique with its splat and its vector solve on the GPU (`GpuSplat`; `GpuPoisson`, MGPCG per
/// component) gives the CPU's velocity (its splat, its box multigrid) for the validation ring, with the
/// cloud-in-cell splat and with the Gaussian one: both stop at 1e-8 of the boundary values' residual, so
/// the grid velocities agree within 1e-5 RMS (the technique's own error against Biot–Savart is 2.4% here
/// with cloud-in-cell), and that error is the same to 1e-6.
#[test]
fn the_poisson_solve_on_the_gpu_gives_the_cpus_velocity() {
    use eddies::validation::vpm_poisson::ring_velocity_on;
    use eddies::vpm::{PoissonParams, Splat};
    let Some(gpu) = gpu() else {
        return;
    };
    let device = SharedPoissonDevice(Arc::new(std::sync::Mutex::new(
        eddies_gpu::pressure::GpuPoisson::new(gpu.clone()).unwrap(),
    )));
    for splat in [Splat::Cic, Splat::Gaussian] {
        let params = PoissonParams {
            tolerance: 1e-8,
            splat,
            ..Default::default()
        };
        let (cpu, direct) = ring_velocity_on(params, 32, None, None);
        let on_device = eddies_gpu::vpm::GpuSplat::shared(gpu.clone());
        let (on_gpu, _) = ring_velocity_on(params, 32, Some(device.clone()), Some(on_device));
        let difference = eddies::vpm::tree::rms_relative_error(&on_gpu, &cpu);
        let (e_gpu, e_cpu) = (
            eddies::vpm::tree::rms_relative_error(&on_gpu, &direct),
            eddies::vpm::tree::rms_relative_error(&cpu, &direct),
        );
        println!(
            "{splat:?}: GPU against CPU {difference:.2e}; against Biot–Savart {e_gpu:.4e} (CPU {e_cpu:.4e})"
        );
        assert!(difference <= 1e-5, "{splat:?}: {difference}");
        assert!(
            (e_gpu - e_cpu).abs() <= 1e-6,
            "{splat:?}: {e_gpu} vs {e_cpu}"
        );
    }
}

/// `n` vortons over the box [0, 1] × [0, 0.6] × [0, 0.4] from the seed `seed`, with strengths of either sign
/// up to 1e-3 m³/s; with `tube`, every other one in a thin tube along x instead (cells of some dozens of
/// vortons, and empty ones).
fn box_of_vortons(seed: u64, n: usize, tube: bool) -> (Vec<DVec3>, Vec<DVec3>) {
    let mut rng = SplitMix64::new(seed);
    let position: Vec<DVec3> = (0..n)
        .map(|i| {
            if tube && i % 2 == 0 {
                let t = rng.range(0.0, 1.0);
                DVec3::new(
                    t,
                    0.3 + rng.range(-0.02, 0.02),
                    0.2 + rng.range(-0.02, 0.02),
                )
            } else {
                DVec3::new(
                    rng.range(0.0, 1.0),
                    rng.range(0.0, 0.6),
                    rng.range(0.0, 0.4),
                )
            }
        })
        .collect();
    let strength = (0..n)
        .map(|_| {
            DVec3::new(
                rng.range(-1e-3, 1e-3),
                rng.range(-1e-3, 1e-3),
                rng.range(-1e-3, 1e-3),
            )
        })
        .collect();
    (position, strength)
}

/// How far the total strength of the splatted vorticity `on` (1/s; `inv`: one over the cell volume) is from
/// the vortons' `strength`, relative to their summed magnitudes.
fn total_error(on: &[DVec3], strength: &[DVec3], inv: f64) -> f64 {
    let total: DVec3 = on.iter().sum::<DVec3>() / inv;
    let expected: DVec3 = strength.iter().sum();
    let scale: f64 = strength.iter().map(|a| a.abs().max_element()).sum();
    (total - expected).abs().max_element() / scale
}

/// A splat's total strength within 1e-6 of the vortons' summed magnitudes (its [`total_error`] `total`),
/// and a second splat `again` with the bits of the first, `on`.
fn assert_total_and_bits(what: &str, total: f64, on: &[DVec3], again: &[DVec3]) {
    assert!(total <= 1e-6, "{what}: the total strength off by {total:e}");
    assert!(
        on.iter()
            .zip(again)
            .all(|(a, b)| a.to_array().map(f64::to_bits) == b.to_array().map(f64::to_bits)),
        "{what}: a second splat changed bits"
    );
}

/// The cloud-in-cell splat on the GPU (`GpuSplat`) gives the CPU's (`FittedGrid::splat`): on grids fitted
/// to the vortons (a few and some hundred vortons a cell), and on a lopsided grid of two points across (its
/// stencils all start at the first) that most vortons lie outside of (clamped onto its faces). The device
/// rounds the stencil's fractions and the strengths to f32 and sums in f32, in another order than the CPU's
/// f64 sums: at each point within 1e-6 of the summed magnitudes of the strengths that reach it (a weight
/// errs by about 1e-7 absolute, a sum of up to two thousand terms rounds a few times 6e-8; measured below
/// 2e-7); the grid's total strength is the
/// vortons' to 1e-6 of their summed magnitudes; a second splat gives the same bits.
#[test]
fn the_splat_on_the_gpu_gives_the_cpus_vorticity() {
    use eddies::vpm::mollify::FittedGrid;
    use eddies_gpu::vpm::GpuSplat;
    let Some(gpu) = gpu() else {
        return;
    };
    let (position, strength) = box_of_vortons(5, 20_000, true);
    let lopsided = FittedGrid {
        dims: [2, 9, 5],
        origin: [0.4, 0.1, 0.05],
        spacing: 0.04,
    };
    let mut splat = GpuSplat::new(gpu.clone());
    for (grid, what) in [
        (FittedGrid::fit(&[&position], [33, 24, 17], 0.05), "fitted"),
        (FittedGrid::fit(&[&position], [8, 8, 8], 0.0), "coarse"),
        (lopsided, "lopsided"),
    ] {
        let inv = 1.0 / grid.spacing.powi(3);
        let mut cpu = Vec::new();
        grid.splat(&position, |i| strength[i] * inv, &mut cpu);
        let (mut on, mut again) = (Vec::new(), Vec::new());
        splat.splat(&grid, &position, &strength, &mut on).unwrap();
        splat
            .splat(&grid, &position, &strength, &mut again)
            .unwrap();
        // Each point's sum of the magnitudes of the strengths (per volume) whose stencils reach it, at full
        // weight: the scale of its rounding, as a fraction rounded to f32 errs by 6e-8 absolute.
        let mut magnitude = vec![DVec3::ZERO; grid.len()];
        let [nx, ny, _] = grid.dims;
        for (p, a) in position.iter().zip(&strength) {
            let (c, _) = grid.cic(*p);
            for corner in 0..8 {
                let at = [
                    c[0] + (corner & 1),
                    c[1] + (corner >> 1 & 1),
                    c[2] + (corner >> 2),
                ];
                magnitude[at[0] + nx * (at[1] + ny * at[2])] += a.abs() * inv;
            }
        }
        let worst = on
            .iter()
            .zip(&cpu)
            .zip(&magnitude)
            .fold(0f64, |m, ((a, b), s)| {
                let d = (*a - *b).abs() / s.max(DVec3::splat(f64::MIN_POSITIVE));
                m.max(d.max_element())
            });
        let total = total_error(&on, &strength, inv);
        println!(
            "{what} {:?}: largest difference {worst:.2e} of a point's reach; total off by {total:.2e}",
            grid.dims
        );
        assert_eq!(on.len(), grid.len());
        assert!(worst <= 1e-6, "{what}: {worst}");
        assert_total_and_bits(what, total, &on, &again);
    }
}

/// The Gaussian splat on the GPU (`GpuSplat::splat_blobs`) gives the CPU's (`BlobSplat`): cores from half a
/// cell (taken as one) to three cells wide, on a grid fitted to the vortons, on a coarse one (every core
/// narrower than a cell) and on a lopsided one that most vortons lie outside of (clamped onto its faces).
/// The device computes the weights in f32 from the CPU's stamps (each offset rounded to f32) and sums in
/// f32 in its own order: at each point within 1e-5 of the CPU's splat of the strengths' magnitudes there
/// (the weights' exponentials and normalisations err by a few f32 roundings, about 1e-6 of a stamp's weights;
/// measured below 1e-6), plus 1e-7 of the largest such magnitude (near a stamp's edge a weight is the
/// difference of two nearly equal numbers, whose rounding is about 1e-7 of the stamp's peak, not of the
/// weight). The grid's total strength is the vortons' to 1e-6 of their summed magnitudes (each axis's weights
/// are normalised in f32), and a second splat gives the same bits.
#[test]
fn the_gaussian_splat_on_the_gpu_gives_the_cpus_vorticity() {
    use eddies::vpm::blob_splat::BlobSplat;
    use eddies::vpm::mollify::FittedGrid;
    use eddies::vpm::poisson::Blobs;
    use eddies_gpu::vpm::GpuSplat;
    let Some(gpu) = gpu() else {
        return;
    };
    let n = 6000;
    let (position, strength) = box_of_vortons(9, n, false);
    let lopsided = FittedGrid {
        dims: [3, 9, 5],
        origin: [0.4, 0.1, 0.05],
        spacing: 0.04,
    };
    let mut splat = GpuSplat::new(gpu.clone());
    let mut cpu_splat = BlobSplat::default();
    for (grid, what) in [
        (FittedGrid::fit(&[&position], [25, 16, 12], 0.05), "fitted"),
        (FittedGrid::fit(&[&position], [6, 5, 4], 0.0), "coarse"),
        (lopsided, "lopsided"),
    ] {
        // Cores from half a cell to three cells of the fitted grid.
        let h = 1.1 / 25.0;
        let radius: Vec<f64> = (0..n)
            .map(|i| h * (0.5 + 2.5 * ((i as f64 * 0.618_033_988_7).fract())))
            .collect();
        let blobs = Blobs {
            position: &position,
            strength: &strength,
            radius: &radius,
        };
        let (mut cpu, mut magnitude) = (Vec::new(), Vec::new());
        cpu_splat.splat(&grid, &position, &strength, &radius, &mut cpu);
        let magnitudes: Vec<DVec3> = strength.iter().map(|a| a.abs()).collect();
        cpu_splat.splat(&grid, &position, &magnitudes, &radius, &mut magnitude);
        let (mut on, mut again) = (Vec::new(), Vec::new());
        splat.splat_blobs(&grid, blobs, &mut on).unwrap();
        splat.splat_blobs(&grid, blobs, &mut again).unwrap();
        let largest = magnitude.iter().fold(0f64, |m, s| m.max(s.max_element()));
        let worst = on
            .iter()
            .zip(&cpu)
            .zip(&magnitude)
            .fold(0f64, |m, ((a, b), s)| {
                let d = (*a - *b).abs() - DVec3::splat(1e-7 * largest);
                let scale = s.max(DVec3::splat(f64::MIN_POSITIVE));
                m.max((d / scale).max_element())
            });
        let absolute = on
            .iter()
            .zip(&cpu)
            .fold(0f64, |m, (a, b)| m.max((*a - *b).abs().max_element()));
        let total = total_error(&on, &strength, 1.0 / grid.spacing.powi(3));
        println!(
            "{what} {:?}: largest difference {:.2e} of the largest magnitude, {worst:.2e} of a point's \
             beyond that allowance; total off by {total:.2e}",
            grid.dims,
            absolute / largest,
        );
        assert_eq!(on.len(), grid.len());
        assert!(worst <= 1e-5, "{what}: {worst}");
        assert_total_and_bits(what, total, &on, &again);
    }
}

/// The grid techniques' last stage on the GPU (`GpuSampling`: the Poisson technique's curl, and the grid's
/// velocity sampled at the vortons with its gradient and at the tracers) gives the CPU's, for the lumpy
/// block of 4000 vortons and tracers in and around it (some beyond the grid, clamped onto its faces), with
/// the Poisson technique and with direct sums at the grid points. The potential or grid velocity is the
/// CPU's on both sides; the device rounds each stencil's fractions to f32 (a weight errs by about 3e-8) and
/// its results to f32 (6e-8 relative), so every velocity and gradient agrees to 1e-6 of the largest
/// (measured in the output). The grid velocity the GPU's solver gives on demand is the CPU's curl, bit for
/// bit, and a second evaluation repeats the GPU's bits.
#[test]
fn the_sampling_on_the_gpu_gives_the_cpus_velocities() {
    use eddies::vpm::velocity::{Query, VelocitySolver};
    use eddies::vpm::{VelocityMethod, VpmParams};
    let Some(gpu) = gpu() else {
        return;
    };
    let v = lumpy_block();
    let strength: Vec<DVec3> = (0..v.len()).map(|i| v.strength(i)).collect();
    let mut rng = SplitMix64::new(3);
    let tracers: Vec<DVec3> = (0..500)
        .map(|_| {
            DVec3::new(
                rng.range(-0.05, 0.35),
                rng.range(0.0, 0.2),
                rng.range(-0.2, 0.3),
            )
        })
        .collect();
    let largest = |a: &[f64]| a.iter().fold(0f64, |m, x| m.max(x.abs()));
    let worst = |a: &[f64], b: &[f64]| {
        a.iter().zip(b).fold(0f64, |m, (x, y)| m.max((x - y).abs())) / largest(b)
    };
    let flat = |u: &[DVec3]| -> Vec<f64> { u.iter().flat_map(|u| u.to_array()).collect() };
    for (velocity, res) in [
        (VelocityMethod::Poisson, 32),
        (VelocityMethod::DirectGrid, 14),
    ] {
        let params = VpmParams {
            velocity,
            grid_resolution: [res; 3],
            ..Default::default()
        };
        let query = Query {
            position: &v.position,
            strength: &strength,
            radius: &v.radius,
            tracers: &tracers,
            gradient: true,
            stage: None,
        };
        let mut cpu = VelocitySolver::default();
        cpu.solve(&params, &query);
        let mut on = VelocitySolver::default();
        on.grid_device = Some(eddies_gpu::vpm::GpuSampling::shared(gpu.clone()));
        on.solve(&params, &query);
        assert!(on.device_error.is_none(), "{:?}", on.device_error);
        assert!(cpu.error.is_none() && on.error.is_none());
        let jac = |s: &VelocitySolver| -> Vec<f64> { s.jac.iter().flatten().copied().collect() };
        let (du, dj, dt) = (
            worst(&flat(&on.u), &flat(&cpu.u)),
            worst(&jac(&on), &jac(&cpu)),
            worst(&flat(&on.u_tracers), &flat(&cpu.u_tracers)),
        );
        println!(
            "{velocity:?} on {:?}: velocity {du:.2e}, gradient {dj:.2e}, tracers {dt:.2e} of the largest",
            cpu.grid.dims
        );
        assert!(du <= 1e-6 && dj <= 1e-6 && dt <= 1e-6, "{velocity:?}");
        assert_eq!(
            on.grid_velocity(),
            cpu.grid_velocity(),
            "{velocity:?}: the grid velocity"
        );
        let bits = |s: &VelocitySolver| -> Vec<u64> {
            let mut b: Vec<f64> = flat(&s.u);
            b.extend(jac(s));
            b.extend(flat(&s.u_tracers));
            b.into_iter().map(f64::to_bits).collect()
        };
        let first = bits(&on);
        on.solve(&params, &query);
        assert_eq!(bits(&on), first, "{velocity:?}: a second evaluation");
    }
}

/// The baroclinic stage with its grid work on the GPU (`GpuBaroclinic`: the masses splatted, the density's
/// gradient sampled at the vortons) changes the vorticity as the CPU's does, for the lumpy block's
/// temperatures under a slanted gravity, on a fitted grid and on a coarse one. The device's splat sums in
/// f32: its density errs by a few 1e-7 of the local magnitudes, and the differences of neighbouring values
/// lift that, relative to the largest gradient, by up to the grid points across the block (32 here); so
/// each change agrees to 1e-5 of the largest (measured 1.2e-7 and 7e-7). A second stage repeats the
/// device's bits.
#[test]
fn the_baroclinic_stage_on_the_gpu_gives_the_cpus() {
    use eddies::vpm::buoyancy::Buoyancy;
    use eddies::vpm::VpmParams;
    let Some(gpu) = gpu() else {
        return;
    };
    let v = lumpy_block();
    for res in [32, 8] {
        let mut params = VpmParams {
            grid_resolution: [res; 3],
            ..Default::default()
        };
        params.buoyancy.gravity = [1.0, -9.0, 2.0];
        params.buoyancy.thermal_expansion = 3e-3;
        let changed = |device: bool| {
            let mut stage = Buoyancy::default();
            if device {
                stage.device = Some(eddies_gpu::vpm::GpuBaroclinic::shared(gpu.clone()));
            }
            let mut after = v.clone();
            assert!(stage.apply(&mut after, &params, 0.01));
            assert!(stage.device_error.is_none(), "{:?}", stage.device_error);
            let change: Vec<f64> = after
                .vorticity
                .iter()
                .zip(&v.vorticity)
                .flat_map(|(a, b)| (*a - *b).to_array())
                .collect();
            change
        };
        let (cpu, on, again) = (changed(false), changed(true), changed(true));
        let largest = cpu.iter().fold(0f64, |m, x| m.max(x.abs()));
        let worst = on
            .iter()
            .zip(&cpu)
            .fold(0f64, |m, (a, b)| m.max((a - b).abs()))
            / largest;
        println!("{res}^3: largest change {largest:.3e} 1/s, GPU off by {worst:.2e} of it");
        assert!(largest > 0.0 && worst <= 1e-5, "{res}: {worst}");
        assert_eq!(
            on.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            again.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            "{res}: a second stage"
        );
    }
}

/// Hands a simulation's direct sums, exchanges, the Poisson technique's splat, solve and sampling, and the
/// baroclinic stage's grid work to the GPU, as `--backend gpu` does.
fn on_gpu(gpu: &Arc<Gpu>) -> impl Fn(&mut eddies::vpm::VpmSim) + '_ {
    move |sim| {
        sim.set_direct_device(eddies_gpu::vpm::GpuDirect::shared(gpu.clone()));
        sim.set_exchange_device(eddies_gpu::vpm::GpuExchange::shared(gpu.clone()));
        sim.set_baroclinic_device(eddies_gpu::vpm::GpuBaroclinic::shared(gpu.clone()));
        let devices = poisson_devices(gpu, true);
        sim.set_splat_device(SharedSplatDevice(devices.splat));
        sim.set_poisson_device(SharedPoissonDevice(devices.solve));
        sim.set_grid_device(SharedGridDevice(devices.sampling));
    }
}

/// The Poisson technique's splat, vector solve and sampling on the GPU; with `shared`, its fields stay on
/// the device between them, as with `--backend gpu`: the vorticity, from which the splat forms the solve's
/// right-hand sides (`GpuSplat::share_field`), and the solutions, which the sampling takes for the curl
/// (`GpuSampling::share_field`).
fn poisson_devices(gpu: &Arc<Gpu>, shared: bool) -> PoissonDevices {
    let (splat, solve, sampling) = eddies_gpu::vpm::poisson_stages(gpu, shared).unwrap();
    PoissonDevices {
        splat: Arc::new(Mutex::new(splat)),
        solve: Arc::new(Mutex::new(solve)),
        sampling: Arc::new(Mutex::new(sampling)),
    }
}

/// The Poisson technique's devices of [`poisson_devices`].
struct PoissonDevices {
    splat: Arc<Mutex<GpuSplat>>,
    solve: Arc<Mutex<GpuPoisson>>,
    sampling: Arc<Mutex<GpuSampling>>,
}

/// The potential that the sampling takes from the solver's solutions on the device gives the bits of the
/// potential sent up from the host: the velocities and gradients at the vortons and the velocities at the
/// tracers, over three evaluations of one stage (the later ones from the extrapolated guess, the
/// strengths grown by a hundredth each), with both splats, and with strengths in the xy plane only (whose
/// potential's z component has no right-hand side and is not solved). No potential goes up.
#[test]
fn the_potential_kept_on_the_device_changes_no_bit() {
    use eddies::vpm::velocity::{Query, VelocitySolver};
    use eddies::vpm::{PoissonParams, Splat, VelocityMethod, VpmParams};
    let Some(gpu) = gpu() else {
        return;
    };
    let (position, strength) = box_of_vortons(9, 3000, true);
    let flat: Vec<DVec3> = strength.iter().map(|a| DVec3::new(a.x, a.y, 0.0)).collect();
    let radius = vec![0.05; position.len()];
    let tracers: Vec<DVec3> = position.iter().step_by(7).map(|p| *p * 0.9).collect();
    for (splat, strength) in [
        (Splat::Cic, &strength),
        (Splat::Gaussian, &strength),
        (Splat::Cic, &flat),
    ] {
        let planar = strength[0].z == 0.0;
        let params = VpmParams {
            velocity: VelocityMethod::Poisson,
            poisson: PoissonParams {
                tolerance: 1e-8,
                splat,
                ..Default::default()
            },
            grid_resolution: [24, 16, 12],
            ..Default::default()
        };
        let run = |shared: bool| {
            let PoissonDevices {
                splat: on_splat,
                solve,
                sampling,
            } = poisson_devices(&gpu, shared);
            let mut solver = VelocitySolver::default();
            solver.poisson.device = Some(SharedPoissonDevice(solve));
            solver.poisson.splat_device = Some(SharedSplatDevice(on_splat));
            let grid_device = SharedGridDevice(sampling.clone());
            solver.poisson.grid_device = Some(grid_device.clone());
            solver.grid_device = Some(grid_device);
            let mut sampled = Vec::new();
            for k in 0..3 {
                let grown = 1.0 + 0.01 * k as f64;
                let scaled: Vec<DVec3> = strength.iter().map(|&a| a * grown).collect();
                solver.solve(
                    &params,
                    &Query {
                        position: &position,
                        strength: &scaled,
                        radius: &radius,
                        tracers: &tracers,
                        gradient: true,
                        stage: Some(0),
                    },
                );
                assert!(solver.error.is_none() && solver.device_error.is_none());
                let bits = |v: &[DVec3]| -> Vec<[u64; 3]> {
                    v.iter().map(|a| a.to_array().map(f64::to_bits)).collect()
                };
                let jac: Vec<[u64; 9]> = solver.jac.iter().map(|j| j.map(f64::to_bits)).collect();
                sampled.push((bits(&solver.u), jac, bits(&solver.u_tracers)));
            }
            let up = sampling.lock().unwrap().potential_bytes_up();
            (sampled, up)
        };
        let ((sent, up), (kept, none_up)) = (run(false), run(true));
        println!("{splat:?} (planar {planar}): potential sent {up} B, then {none_up} B");
        assert!(
            up > 0 && none_up == 0,
            "{splat:?}: {up} then {none_up} bytes"
        );
        for (k, (a, b)) in sent.iter().zip(&kept).enumerate() {
            assert!(a.0 == b.0, "{splat:?}: evaluation {k}: velocities");
            assert!(a.1 == b.1, "{splat:?}: evaluation {k}: gradients");
            assert!(a.2 == b.2, "{splat:?}: evaluation {k}: tracers");
        }
    }
}

/// A Poisson device that takes its right-hand sides from the host only, declining those in its field.
struct Declining(Arc<Mutex<GpuPoisson>>);

impl eddies::linsolve::PoissonDevice<3> for Declining {
    fn solve(
        &mut self,
        solver: &eddies::linsolve::PoissonSolver<3>,
        b: &[f64],
        x: &mut [f64],
    ) -> Result<Option<eddies::linsolve::Info>, eddies::linsolve::SolveError> {
        let mut device = self.0.lock().unwrap();
        eddies::linsolve::PoissonDevice::<3>::solve(&mut *device, solver, b, x)
    }

    fn face_field(&self) -> Option<u64> {
        eddies::linsolve::PoissonDevice::<3>::face_field(&*self.0.lock().unwrap())
    }

    fn solve_rhs_in_faces(
        &mut self,
        _: &eddies::linsolve::PoissonSolver<3>,
        _: &[f64],
        _: &mut [f64],
    ) -> Result<Option<eddies::linsolve::Info>, eddies::linsolve::SolveError> {
        Ok(None)
    }
}

/// The vector solve's right-hand sides formed on the device from the vorticity that the splat left there
/// give the bits of those that the host forms from the vorticity read back (the same f64 arithmetic, and
/// each norm's partial sums in the host's order): the potentials, the multigrid iterations and the
/// residuals, on lopsided grids (21 × 14 × 11 points, which a mix-up of the outer layer's axes would not
/// survive, and 12 × 7 × 3, whose interior has both neighbours along z on the outer layer), with both
/// splats, over three solves of one stage (the later ones from the extrapolated guess, the strengths grown
/// by a hundredth each). No right-hand side goes up: every component's solve reads its own from the shared
/// field. The kept vorticity, read back, is the splat's. A solver that
/// declines the right-hand sides on the device ([`Declining`]) gets the host's, from the vorticity read
/// back, with the same bits.
#[test]
fn the_right_hand_sides_formed_on_the_device_change_no_bit() {
    use eddies::vpm::mollify::FittedGrid;
    use eddies::vpm::poisson::{Blobs, PoissonVelocity, SplatDevice};
    use eddies::vpm::{PoissonParams, Splat};
    let Some(gpu) = gpu() else {
        return;
    };
    let (position, strength) = box_of_vortons(5, 3000, true);
    let radius = vec![0.05; position.len()];
    let grids = [[21, 14, 11], [12, 7, 3]].map(|dims| FittedGrid {
        dims,
        origin: [-0.1; 3],
        spacing: 0.06,
    });
    for (grid, splat) in grids
        .iter()
        .flat_map(|g| [(g, Splat::Cic), (g, Splat::Gaussian)])
    {
        let params = PoissonParams {
            tolerance: 1e-8,
            splat,
            ..Default::default()
        };
        let run = |shared: bool, declining: bool| {
            let devices = poisson_devices(&gpu, shared);
            let (on_device, solve) = (devices.splat, devices.solve);
            let mut v = PoissonVelocity::default();
            v.device = Some(SharedPoissonDevice(if declining {
                Arc::new(Mutex::new(Declining(solve.clone())))
            } else {
                solve.clone()
            }));
            v.splat_device = Some(SharedSplatDevice(on_device.clone()));
            v.set_stage(Some(0));
            let mut solved = Vec::new();
            for k in 0..3 {
                let grown = 1.0 + 0.01 * k as f64;
                let scaled: Vec<DVec3> = strength.iter().map(|&a| a * grown).collect();
                let mut sources = Sources::default();
                sources.fill(DVec3::splat(0.5), &position, &scaled, &radius);
                let mut boundary = |p: &[DVec3], out: &mut [DVec3]| {
                    biot_savart::potential_direct(&sources, p, out)
                };
                let blobs = Blobs {
                    position: &position,
                    strength: &scaled,
                    radius: &radius,
                };
                v.solve_potential(&params, grid, blobs, Some(&mut boundary))
                    .unwrap();
                let potential: Vec<[u64; 3]> = v
                    .potential()
                    .iter()
                    .map(|a| a.to_array().map(f64::to_bits))
                    .collect();
                solved.push((potential, v.info.cycles, v.info.residual.to_bits()));
            }
            let times = solve.lock().unwrap().take_times();
            if shared && !declining {
                let blobs = Blobs {
                    position: &position,
                    strength: &strength,
                    radius: &radius,
                };
                let mut device = on_device.lock().unwrap();
                let (mut kept, mut read) = (Vec::new(), Vec::new());
                assert!(device.splat_kept(grid, blobs, splat).unwrap());
                device.kept_vorticity(&mut kept).unwrap();
                match splat {
                    Splat::Cic => {
                        SplatDevice::splat(&mut *device, grid, &position, &strength, &mut read)
                    }
                    Splat::Gaussian => {
                        SplatDevice::splat_blobs(&mut *device, grid, blobs, &mut read)
                    }
                }
                .unwrap();
                assert!(kept == read, "{splat:?}: the kept vorticity read back");
            }
            (solved, times)
        };
        let ((host, sent), (device, formed)) = (run(false, false), run(true, false));
        let (declined, sent_again) = run(true, true);
        let cycles: Vec<usize> = device.iter().map(|s| s.1).collect();
        let dims = grid.dims;
        println!(
            "{dims:?} {splat:?}: cycles {cycles:?}; right-hand sides sent {} B, then {} B and {} formed on \
             the device",
            sent.rhs_bytes_up, formed.rhs_bytes_up, formed.rhs_in_faces
        );
        assert!(
            cycles.iter().all(|&c| c > 0),
            "{splat:?}: every solve iterates"
        );
        for (k, ((h, d), again)) in host.iter().zip(&device).zip(&declined).enumerate() {
            assert!(h == d, "{splat:?}: solve {k} changed bits");
            assert!(
                h == again,
                "{splat:?}: solve {k} changed bits where the solver declined"
            );
        }
        assert_eq!(sent_again.rhs_bytes_up, sent.rhs_bytes_up, "{splat:?}");
        assert!(sent.rhs_bytes_up > 0 && sent.rhs_in_faces == 0);
        assert_eq!(formed.rhs_bytes_up, 0, "{splat:?}");
        assert_eq!(formed.rhs_in_faces, formed.solves, "{splat:?}");
        assert_eq!(formed.solves, sent.solves, "{splat:?}");
    }
}

/// The vortex method's validation cases with their velocity on the GPU, against the CPU's bounds and the CPU's
/// own results (`eddies::validation::vpm`): two vortons orbit their midpoint (the case's bound, 1e-4 of the
/// separation after a quarter orbit; measured 7e-6), a thin ring of 4000 vortons travels at Saffman's speed
/// (the case's 5%; measured 1.35%, and the CPU's result to 1e-4: the same sums in another order, measured
/// 1e-6), and the total vorticity stays put with PSE diffusion on the GPU too (the case's 1e-6, over 10
/// steps of direct sums).
#[test]
fn vortex_cases_hold_with_gpu_velocities() {
    use eddies::validation::vpm::{
        ring_speed_error_on, total_vorticity_drift_on, vorton_pair_error_on,
    };
    use eddies::vpm::VelocityMethod;
    let Some(gpu) = gpu() else {
        return;
    };
    let pair = vorton_pair_error_on(&on_gpu(&gpu));
    let (ring, ring_cpu) = (
        ring_speed_error_on(4000, &on_gpu(&gpu)),
        ring_speed_error_on(4000, &|_| {}),
    );
    let drift = total_vorticity_drift_on(VelocityMethod::DirectVortons, 10, &on_gpu(&gpu));
    println!(
        "pair {pair:.2e}; ring speed {ring:.4e} (CPU {ring_cpu:.4e}); vorticity drift {drift:.2e}"
    );
    assert!(pair <= 1e-4, "{pair}");
    assert!(
        ring <= 0.05 && (ring - ring_cpu).abs() <= 1e-4,
        "{ring} vs {ring_cpu}"
    );
    assert!(drift <= 1e-6, "{drift}");
}

/// A dense ball (ρ'/ρ₀ = 0.02, 3000 vortons, 24³ grid, 0.06 s) falls as on the CPU with the Poisson
/// technique's splat, solve, curl and sampling and the baroclinic stage's grid work on the GPU: both solves stop at the tolerance of 1e-3, so their accelerations agree to
/// about that; bound 1e-2 relative, measured 9e-5.
#[test]
fn the_dense_ball_accelerates_as_on_the_cpu() {
    use eddies::validation::vpm_poisson::ball_acceleration_on;
    use eddies::vpm::VelocityMethod;
    let Some(gpu) = gpu() else {
        return;
    };
    let run = |prepare: &dyn Fn(&mut eddies::vpm::VpmSim)| {
        ball_acceleration_on(VelocityMethod::Poisson, 0.02, 24, 3000, true, prepare)
    };
    let (on, cpu) = (run(&on_gpu(&gpu)), run(&|_| {}));
    println!("GPU {on:?}\nCPU {cpu:?}");
    assert!(on.acceleration > 0.0, "the heavy ball falls");
    assert!(
        (on.acceleration - cpu.acceleration).abs() <= 1e-2 * cpu.acceleration,
        "GPU {} m/s², CPU {}",
        on.acceleration,
        cpu.acceleration
    );
}

/// 4000 vortons in a block (spacings from half to twice the core radius, some of them sparse), with random
/// vorticity and temperature.
fn lumpy_block() -> Vortons {
    let mut rng = SplitMix64::new(11);
    let mut v = Vortons::default();
    for _ in 0..4000 {
        let p = DVec3::new(
            rng.range(0.0, 0.3),
            rng.range(0.0, 0.2),
            rng.range(0.0, 0.1),
        );
        let w = DVec3::new(
            rng.range(-5.0, 5.0),
            rng.range(-5.0, 5.0),
            rng.range(-5.0, 5.0),
        );
        v.push(p, w, rng.range(0.008, 0.016), 1e-6 * rng.range(0.5, 2.0));
    }
    for t in &mut v.temperature {
        *t = rng.range(-10.0, 30.0);
    }
    v
}

/// `v` after one diffusion and one heat exchange of three substeps each, on `device` or the CPU.
fn exchanged(v: &Vortons, device: Option<&Arc<Gpu>>) -> Vortons {
    let mut v = v.clone();
    exchange_in(&mut exchanger(device), &mut v, false);
    v
}

/// The exchanges of [`exchanged`], on `device` or the CPU.
fn exchanger(device: Option<&Arc<Gpu>>) -> Pse {
    let mut pse = Pse::default();
    if let Some(gpu) = device {
        pse.device = Some(eddies_gpu::vpm::GpuExchange::shared(gpu.clone()));
    }
    pse
}

/// One diffusion and one heat exchange of `v` by `pse`, three substeps each; with `kept`, the heat's
/// exchange reuses the bins of the diffusion's, as in a simulation's step.
fn exchange_in(pse: &mut Pse, v: &mut Vortons, kept: bool) {
    // ν dt for three substeps: 8 ν dt / σ_min² = 2.88.
    let dt = 0.02;
    let nu = 2.88 * 0.008f64.powi(2) / (8.0 * dt);
    assert_eq!(Pse::substeps(v, nu, dt), 3);
    if kept {
        pse.forget_bins();
        pse.diffuse_kept(v, nu, dt);
        pse.diffuse_heat_kept(v, nu, dt);
    } else {
        pse.diffuse(v, nu, dt);
        pse.diffuse_heat(v, nu, dt);
    }
    assert!(pse.device_error.is_none(), "{:?}", pse.device_error);
}

/// Whether two sets of vortons hold the same bits of vorticity and temperature.
fn same_bits(a: &Vortons, b: &Vortons) -> bool {
    let bits = |v: &Vortons| -> Vec<u64> {
        let w = v.vorticity.iter().flat_map(|w| w.to_array());
        w.chain(v.temperature.iter().copied())
            .map(f64::to_bits)
            .collect()
    };
    bits(a) == bits(b)
}

/// A step's exchanges of vorticity and heat share one binning (on the GPU, one upload and sort of the
/// vortons): the bins kept from the first give the same bits as binning again, on the GPU and on the CPU.
/// After the vortons move, the bins forgotten, the same device exchanges the moved vortons as a new one
/// does (a device that kept its old sort would gather from the old bins).
#[test]
fn kept_bins_give_the_bits_of_new_ones() {
    let Some(gpu) = gpu() else { return };
    let start = lumpy_block();
    for device in [None, Some(&gpu)] {
        let on = if device.is_some() { "GPU" } else { "CPU" };
        let fresh = exchanged(&start, device);
        let mut pse = exchanger(device);
        let mut kept = start.clone();
        exchange_in(&mut pse, &mut kept, true);
        assert!(same_bits(&kept, &fresh), "{on}: kept bins changed bits");
        // Each vorton moves 3 cm (bins are 4.8 cm across), in another direction than its neighbours.
        for (i, p) in kept.position.iter_mut().enumerate() {
            let turn = i as f64 * 2.399;
            *p += DVec3::new(turn.cos(), turn.sin(), (0.5 * turn).cos()) * 0.03;
        }
        let moved = kept.clone();
        exchange_in(&mut pse, &mut kept, true);
        let anew = exchanged(&moved, device);
        assert!(same_bits(&kept, &anew), "{on}: the moved vortons' exchange");
    }
}

/// Vortons in two clumps 30 m apart along each axis, each bin 4.8 cm across: some 2.5·10⁸ bins, beyond
/// what the device's prefix sums take for 4000 vortons ([`eddies_gpu::vpm::max_exchange_bins`]); the CPU
/// exchanges them, with the same bits as without a device.
#[test]
fn the_cpu_exchanges_vortons_strewn_over_too_many_bins() {
    let Some(gpu) = gpu() else { return };
    let mut start = lumpy_block();
    for p in start.position.iter_mut().step_by(2) {
        *p += DVec3::splat(30.0);
    }
    let (on_gpu, cpu) = (exchanged(&start, Some(&gpu)), exchanged(&start, None));
    assert!(same_bits(&on_gpu, &cpu));
    assert!(!same_bits(&cpu, &start), "the exchange changed them");
}

/// The particle strength exchange on the GPU gives the CPU's diffusion of vorticity and heat: the changes
/// agree to 2e-6 of the largest change (the GPU's pair weights are f32, the CPU's f64: a few ulp apart,
/// 1.5e-7 measured on lavapipe; a wrong constant in the kernel's normalisation showed as 1.2e-4), the total
/// strength and heat stay what they were as tightly as on the CPU (antisymmetric pair terms summed in f64:
/// 1e-12 of the totals' scale), and a second run repeats the bits.
#[test]
fn the_exchange_on_the_gpu_gives_the_cpus_diffusion() {
    let Some(gpu) = gpu() else { return };
    let start = lumpy_block();
    let cpu = exchanged(&start, None);
    let on_gpu = exchanged(&start, Some(&gpu));
    let change = |v: &Vortons| -> Vec<f32> {
        let w = v
            .vorticity
            .iter()
            .zip(&start.vorticity)
            .map(|(a, b)| *a - *b);
        let t = v
            .temperature
            .iter()
            .zip(&start.temperature)
            .map(|(a, b)| a - b);
        w.flat_map(|d| d.to_array().map(|x| x as f32))
            .chain(t.map(|d| d as f32))
            .collect()
    };
    let n = 3 * start.len();
    let (gpu_change, cpu_change) = (change(&on_gpu), change(&cpu));
    let e_w = relative(&gpu_change[..n], &cpu_change[..n]);
    let e_t = relative(&gpu_change[n..], &cpu_change[n..]);
    assert!(
        e_w < 2e-6 && e_t < 2e-6,
        "vorticity {e_w:e}, temperature {e_t:e}"
    );
    let totals = |v: &Vortons| -> (DVec3, f64) {
        let strength = (0..v.len()).map(|i| v.strength(i)).sum();
        let heat = (0..v.len()).map(|i| v.temperature[i] * v.volume[i]).sum();
        (strength, heat)
    };
    let scale: f64 = (0..start.len())
        .map(|i| start.strength(i).abs().max_element())
        .sum();
    let heat_scale: f64 = (0..start.len())
        .map(|i| (start.temperature[i] * start.volume[i]).abs())
        .sum();
    let ((s0, h0), (s1, h1)) = (totals(&start), totals(&on_gpu));
    assert!(
        (s1 - s0).abs().max_element() < 1e-12 * scale,
        "strength {s0} -> {s1}"
    );
    assert!((h1 - h0).abs() < 1e-12 * heat_scale, "heat {h0} -> {h1}");
    let again = exchanged(&start, Some(&gpu));
    assert!(same_bits(&again, &on_gpu));
}

/// With the profile on, every substep's exchange is one timed launch of the exchange kernel (three
/// substeps of vorticity, three of heat), and the results are the same bits as without it.
#[test]
fn the_profile_times_each_launch_and_changes_nothing() {
    let Some(gpu) = gpu() else { return };
    let Some(profiled) = eddies_gpu::device_or_skip() else {
        return;
    };
    if !profiled.has_timestamps() {
        eprintln!("notice: no timestamp queries on this adapter; profile not checked");
        return;
    }
    let profiled = Arc::new(profiled.profiling(true));
    let start = lumpy_block();
    let plain = exchanged(&start, Some(&gpu));
    let timed = exchanged(&start, Some(&profiled));
    assert!(timed.vorticity == plain.vorticity && timed.temperature == plain.temperature);
    let profile = profiled.take_profile();
    let launches = |prefix: &str| -> u64 {
        profile
            .iter()
            .filter(|(name, _, _)| name.starts_with(prefix))
            .map(|(_, n, _)| n)
            .sum()
    };
    assert_eq!(launches("vpm pse 3 "), 3, "{profile:?}");
    assert_eq!(launches("vpm pse 1 "), 3, "{profile:?}");
    assert!(profile
        .iter()
        .all(|(_, _, ms)| ms.is_finite() && *ms >= 0.0));
    assert!(profiled.take_profile().is_empty(), "taken once");
    if std::env::var(eddies_gpu::PROFILE_VAR).is_err() {
        assert!(gpu.take_profile().is_empty(), "off unless asked for");
    }
}
