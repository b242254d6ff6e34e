//! `eddies bench vpm --backend gpu`: the vortex particle method's direct Biot–Savart sum on the GPU
//! (`eddies_gpu::vpm::DirectSum`), in vorton pairs per second, velocity alone and with its gradient (what
//! stretching needs), every vorton a target. Each evaluation is timed whole: the vortons' upload, the kernel
//! and the velocities' read-back (median of three after a warm-up). And the built-in scenes `vortex-ring`,
//! `dye-drop` and `hot-plume` stepped with their direct sums on the GPU (`vpm.velocity = "direct-vortons"`):
//! milliseconds and steps per second (median of five steps after two).

use std::time::Instant;

use eddies::rng::SplitMix64;
use eddies::vpm::biot_savart::Sources;
use eddies_gpu::vpm::DirectSum;
use glam::DVec3;

use super::case::{median, step_rows, BenchCase, BenchError, BenchRow};
use crate::load::{self, Override, SceneSource};
use crate::output::checkpoint::Position;
use crate::{runner, scenes, setup};

/// A size whose evaluation would take longer than this (estimated from the rate of the size before; each
/// size takes eight) is skipped: a software adapter
/// would take hours at 10⁶ vortons.
const LONGEST_S: f64 = 10.0;

/// The GPU benchmarks of the vortex particle method.
pub fn cases() -> Vec<BenchCase> {
    vec![
        // Direct sum at 10⁴, 10⁵ and 10⁶ vortons (quick: 10⁴), velocity alone and with its gradient
        BenchCase {
            name: "vpm-gpu-direct-sum",
            run: |q| {
                direct_sum(if q {
                    &[10_000]
                } else {
                    &[10_000, 100_000, 1_000_000]
                })
            },
        },
        // vortex-ring, dye-drop and hot-plume with direct sums on the GPU (quick: vortex-ring)
        BenchCase {
            name: "vpm-gpu-scenes",
            run: |q| {
                let names: &[&'static str] = if q {
                    &["vortex-ring"]
                } else {
                    &["vortex-ring", "dye-drop", "hot-plume"]
                };
                let mut rows = Vec::new();
                for &name in names {
                    rows.extend(scene_steps(name, Velocity::Direct)?);
                }
                Ok(rows)
            },
        },
        // The largest ring (direct sums on the GPU, vorton counts doubling from 1000) that steps at 30 steps/s
        BenchCase {
            name: "vpm-gpu-max-vortons-30",
            run: |q| max_vortons_at_30(if q { 8_000 } else { 4_096_000 }),
        },
        // dye-drop and hot-plume with their own Poisson technique, the vector solve on the GPU (quick: dye-drop)
        BenchCase {
            name: "vpm-gpu-poisson-scenes",
            run: |q| {
                let names: &[&'static str] = if q {
                    &["dye-drop"]
                } else {
                    &["dye-drop", "hot-plume"]
                };
                let mut rows = Vec::new();
                for &name in names {
                    rows.extend(scene_steps(name, Velocity::Poisson)?);
                }
                Ok(rows)
            },
        },
        // The Poisson technique's cloud-in-cell splat, on the CPU and on the GPU: 10⁵ vortons on 64³ and 10⁶
        // on 128³ (quick: the first)
        BenchCase {
            name: "vpm-gpu-splat",
            run: |q| {
                splat(if q {
                    &[(100_000, 64)]
                } else {
                    &[(100_000, 64), (1_000_000, 128)]
                })
            },
        },
        // The Poisson technique's Gaussian splat (`splat = "gaussian"`), on the CPU and on the GPU: 10⁵
        // vortons on 64³ and 10⁶ on 128³, cores 1.5 times the vortons' spacing (quick: the first)
        BenchCase {
            name: "vpm-gpu-gaussian-splat",
            run: |q| {
                gaussian_splat(if q {
                    &[(100_000, 64)]
                } else {
                    &[(100_000, 64), (1_000_000, 128)]
                })
            },
        },
        // A step's particle strength exchanges (heat, then vorticity), on the CPU and on the GPU: 10⁵ and 10⁶
        // vortons (quick: the first)
        BenchCase {
            name: "vpm-gpu-exchange",
            run: |q| exchange(if q { &[100_000] } else { &[100_000, 1_000_000] }),
        },
        // The Poisson technique's splat, vector solve and curl on the GPU, their fields kept on the device
        // or sent across, the solve split into the host's share and the device's: 64³ and 128³ (quick: the
        // first)
        BenchCase {
            name: "vpm-gpu-vector-solve",
            run: |q| vector_solve(if q { &[64] } else { &[64, 128] }),
        },
        // The Poisson technique's curl and the sampling at the vortons, with the gradient, on the CPU and on
        // the GPU: 10⁵ vortons on 64³ and 10⁶ on 128³ (quick: the first)
        BenchCase {
            name: "vpm-gpu-sampling",
            run: |q| {
                sampling(if q {
                    &[(100_000, 64)]
                } else {
                    &[(100_000, 64), (1_000_000, 128)]
                })
            },
        },
        // The baroclinic stage, on the CPU and with its grid work on the GPU: 10⁵ vortons on 64³ and 10⁶ on
        // 128³ (quick: the first)
        BenchCase {
            name: "vpm-gpu-baroclinic",
            run: |q| {
                baroclinic(if q {
                    &[(100_000, 64)]
                } else {
                    &[(100_000, 64), (1_000_000, 128)]
                })
            },
        },
        // The Poisson technique's boundary values: 10⁵ vortons on 64³ and 10⁶ on 128³ (quick: the first),
        // by the CPU's treecode (build and evaluation apart) and direct sum, and by the GPU's direct sum
        BenchCase {
            name: "vpm-gpu-boundary",
            run: |q| {
                boundary(if q {
                    &[(100_000, 64)]
                } else {
                    &[(100_000, 64), (1_000_000, 128)]
                })
            },
        },
        // hot-plume with 10⁶ vortons on a 128³ grid, its Poisson technique's vector solve on the GPU
        BenchCase {
            name: "vpm-gpu-poisson-million",
            run: |q| {
                if q {
                    return Ok(Vec::new());
                }
                scene_steps("hot-plume", Velocity::PoissonMillion)
            },
        },
    ]
}

/// How a scene of [`scene_steps`] takes its velocity.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Velocity {
    /// By direct sums on the GPU (`vpm.velocity = "direct-vortons"`).
    Direct,
    /// By the scene's Poisson technique, the vector solve on the GPU.
    Poisson,
    /// As `Poisson`, with 10⁶ vortons in the scene's first block and a 128³ grid (the figure).
    PoissonMillion,
}

/// The built-in scene `name` on the GPU backend with direct sums or its Poisson technique: five of the steps
/// `eddies run` takes, after two, or none where a step would take longer than [`LONGEST_S`].
fn scene_steps(name: &'static str, velocity: Velocity) -> Result<Vec<BenchRow>, BenchError> {
    let builtin = scenes::find(name).ok_or(BenchError::MissingScene(name))?;
    let src = SceneSource {
        label: builtin.label(),
        name: builtin.name.to_string(),
        text: builtin.source.to_string(),
    };
    let sets: &[&str] = match velocity {
        Velocity::Direct => &["backend=\"gpu\"", "vpm.velocity=\"direct-vortons\""],
        Velocity::Poisson => &["backend=\"gpu\"", "vpm.velocity=\"poisson\""],
        Velocity::PoissonMillion => &[
            "backend=\"gpu\"",
            "vpm.velocity=\"poisson\"",
            "vpm.block.0.vortons=1000000",
            "domain.resolution=[128, 128, 128]",
        ],
    };
    let overrides = sets
        .iter()
        .map(|s| Override::parse_set(s))
        .collect::<Result<Vec<_>, _>>()?;
    let scene = load::load(&src, &overrides)?.scene;
    let mut sim = setup::build(&scene)?.sim;
    let device = setup::gpu()?.adapter().name.clone();
    let mut records = Vec::new();
    // The steps `eddies run` takes: the CFL step, cut at frame times.
    let mut at = Position::default();
    for k in 0..7 {
        let dt = runner::step_across_frames(&scene, sim.as_ref(), &mut at)?;
        let record = sim.step(dt)?;
        if k == 0 && record.wall_ms > LONGEST_S * 1e3 {
            eprintln!(
                "note: {name} skipped: {:.0} s a step on {device}",
                record.wall_ms / 1e3
            );
            return Ok(Vec::new());
        }
        if k >= 2 {
            records.push(record);
        }
    }
    let size = format!("{} vortons", sim.particle_positions().len() / 3);
    let bench = match velocity {
        Velocity::Direct => format!("vpm-gpu-{name}"),
        Velocity::Poisson => format!("vpm-gpu-poisson-{name}"),
        Velocity::PoissonMillion => format!("vpm-gpu-poisson-million-{name}"),
    };
    let mut rows = step_rows(&bench, &size, &records);
    let ms = rows[0].value;
    rows.insert(
        1,
        BenchRow {
            metric: "steps-per-second".into(),
            value: 1e3 / ms,
            unit: "steps/s".into(),
            ..rows[0].clone()
        },
    );
    for r in &mut rows {
        r.device = device.clone();
    }
    Ok(rows)
}

/// The largest vorton count, doubling from 1000 up to `limit`, at which a ring with its direct sums on the
/// GPU (`direct-vortons`, the default RK2, the CFL step) takes a step in at most 1/30 s (median of three
/// after one); and the step time of each count tried.
fn max_vortons_at_30(limit: usize) -> Result<Vec<BenchRow>, BenchError> {
    let gpu = setup::gpu()?;
    let device = gpu.adapter().name.clone();
    let mut rows = Vec::new();
    let mut best = 0;
    let mut n = 1000;
    while n <= limit {
        let mut sim = eddies::vpm::VpmSim::new(eddies::vpm::VpmParams {
            velocity: eddies::vpm::VelocityMethod::DirectVortons,
            ..Default::default()
        })?;
        sim.set_direct_device(eddies_gpu::vpm::GpuDirect::shared(gpu.clone()));
        sim.set_exchange_device(eddies_gpu::vpm::GpuExchange::shared(gpu.clone()));
        sim.add_ring(&eddies::vpm::Ring {
            vortons: n,
            ..Default::default()
        });
        let ms = warm_median(|| {
            let dt = eddies::Simulation::max_dt(&sim, 1.0);
            let t = Instant::now();
            eddies::Simulation::step(&mut sim, dt)?;
            Ok(ms_since(t))
        })?;
        rows.push(BenchRow {
            bench: "vpm-gpu-max-vortons-30".into(),
            size: format!("{n} vortons"),
            metric: "step".into(),
            value: ms,
            unit: "ms".into(),
            threads: rayon::current_num_threads(),
            device: device.clone(),
        });
        if ms > 1e3 / 30.0 {
            break;
        }
        best = n;
        n *= 2;
    }
    rows.push(BenchRow {
        bench: "vpm-gpu-max-vortons-30".into(),
        size: "30 steps/s".into(),
        metric: "largest-vorton-count".into(),
        value: best as f64,
        unit: "vortons".into(),
        threads: rayon::current_num_threads(),
        device,
    });
    Ok(rows)
}

/// The cloud-in-cell splat of `n` vortons ([`cloud`]: a unit cube) onto the grid of `res` points a side
/// fitted to them, by the CPU (`FittedGrid::splat`) and by the GPU (`GpuSplat`, the stencils on the host,
/// upload, sort, gather and read-back): median of three after one, each.
fn splat(sizes: &[(usize, usize)]) -> Result<Vec<BenchRow>, BenchError> {
    use eddies::vpm::mollify::FittedGrid;
    let gpu = setup::gpu()?;
    let device = gpu.adapter().name.clone();
    let mut on_gpu = eddies_gpu::vpm::GpuSplat::new(gpu.clone());
    let mut rows = Vec::new();
    for &(n, res) in sizes {
        let (position, strength) = unit_cube(n);
        let grid = FittedGrid::fit(&[&position], [res; 3], 0.05);
        let inv = 1.0 / grid.spacing.powi(3);
        let mut out = Vec::new();
        let cpu = warm_median(|| {
            let t = Instant::now();
            grid.splat(&position, |i| strength[i] * inv, &mut out);
            Ok(ms_since(t))
        })?;
        let on = warm_median(|| {
            let t = Instant::now();
            on_gpu.splat(&grid, &position, &strength, &mut out)?;
            Ok(ms_since(t))
        })?;
        rows.extend(cpu_and_gpu(
            "vpm-gpu-splat",
            "splat",
            (n, res),
            cpu,
            (&device, on),
        ));
    }
    Ok(rows)
}

/// A step's particle strength exchanges as `VpmSim` takes them: heat, then vorticity, one binning for both
/// (`Pse::diffuse_heat_kept`, `Pse::diffuse_kept`), one substep each. `n` vortons jittered about the
/// points of a cubic lattice of spacing h with core radii h, as a block of a scene: about 27 vortons a bin
/// and some 250 in each one's reach. On the CPU and on the GPU (`GpuExchange`: keys on the host; upload,
/// sort, substeps and read-back on the device): median of three after one, each. The GPU again with the
/// same vortons in a random order (`gpu-exchanges-shuffled`), as a scene's vortons come to be once emitters
/// append them and the flow mixes them, where those in the lattice's order are next to their neighbours in
/// memory. And the binning's host work alone (`Pse::bin_now`): the keys, which is all a device needs, and
/// the keys with the CPU's sorted neighbour list.
fn exchange(sizes: &[usize]) -> Result<Vec<BenchRow>, BenchError> {
    use eddies::vpm::diffusion::Pse;
    use eddies::vpm::Vortons;
    let gpu = setup::gpu()?;
    let device = gpu.adapter().name.clone();
    let mut rows = Vec::new();
    for &n in sizes {
        let side = (n as f64).cbrt().round() as usize;
        let h = 1.0 / side as f64;
        let mut rng = SplitMix64::new(5);
        let mut start = Vortons::default();
        for k in 0..side * side * side {
            let c = [k % side, (k / side) % side, k / (side * side)];
            let p = DVec3::from_array(c.map(|c| (c as f64 + rng.range(0.25, 0.75)) * h));
            let w = DVec3::new(
                rng.range(-1.0, 1.0),
                rng.range(-1.0, 1.0),
                rng.range(-1.0, 1.0),
            );
            start.push(p, w, h, h * h * h);
        }
        for t in &mut start.temperature {
            *t = rng.range(-1.0, 1.0);
        }
        // One substep: 8 ν dt / σ² = 1.
        let (dt, nu) = (0.01, h * h / 8.0 / 0.01);
        // Fisher–Yates with the bench's generator.
        let mut order: Vec<usize> = (0..start.len()).collect();
        for i in (1..order.len()).rev() {
            let j = (rng.range(0.0, (i + 1) as f64) as usize).min(i);
            order.swap(i, j);
        }
        let mut shuffled = Vortons::default();
        for (k, &i) in order.iter().enumerate() {
            shuffled.push(
                start.position[i],
                start.vorticity[i],
                start.radius[i],
                start.volume[i],
            );
            shuffled.temperature[k] = start.temperature[i];
        }
        let time_from = |pse: &mut Pse, start: &Vortons| {
            warm_median(|| {
                let mut v = start.clone();
                let t = Instant::now();
                pse.forget_bins();
                pse.diffuse_heat_kept(&mut v, nu, dt);
                pse.diffuse_kept(&mut v, nu, dt);
                let ms = ms_since(t);
                device_failed(pse.device_error.take())?;
                Ok(ms)
            })
        };
        let cpu = time_from(&mut Pse::default(), &start)?;
        let host = |sorted: bool| {
            let mut pse = Pse::default();
            warm_median(|| {
                let t = Instant::now();
                pse.bin_now(&start, sorted);
                Ok(ms_since(t))
            })
        };
        let (keys, sorted) = (host(false)?, host(true)?);
        let mut on_gpu = Pse::default();
        on_gpu.device = Some(eddies_gpu::vpm::GpuExchange::shared(gpu.clone()));
        let on = time_from(&mut on_gpu, &start)?;
        let on_shuffled = time_from(&mut on_gpu, &shuffled)?;
        let size = format!("{} vortons", start.len());
        let cpu_name = || super::case::CPU.to_string();
        rows.extend(timed_rows(
            "vpm-gpu-exchange",
            &size,
            [
                ("cpu-exchanges", cpu_name(), cpu, "ms"),
                ("gpu-exchanges", device.clone(), on, "ms"),
                ("gpu-exchanges-shuffled", device.clone(), on_shuffled, "ms"),
                ("host-keys", cpu_name(), keys, "ms"),
                ("host-keys-sorted", cpu_name(), sorted, "ms"),
            ],
        ));
    }
    Ok(rows)
}

/// The Poisson technique's splat, vector solve and curl on the GPU (`GpuSplat`, MGPCG in `GpuPoisson`,
/// `GpuSampling`) for a ring of 4000 vortons on an `n³` grid, as a step's first Runge–Kutta stage takes
/// them (the velocity sampled at the vortons with its gradient): the ring's
/// strengths grown between solves, by a hundredth more each time, so that the initial guess extrapolated
/// from the last two solutions misses as in a run whose flow changes (the grid is fitted to the vortons, so
/// moving the ring would change nothing). Median of five evaluations after three, each way: with the
/// fields kept on the device between the stages (the vorticity, from which the device forms the
/// right-hand sides, and the solutions, which the sampling takes for the curl; as `--backend gpu` runs),
/// and with the vorticity read back for the host to form the right-hand sides and send them up, and the
/// potential sent up for the curl (the `-read-back` rows, as before). The splat, the boundary values, the
/// vector solve and the curl with the sampling together (`splat-to-velocity`: the kept splat's device time
/// overlaps the boundary values on the CPU), the vector solve (`PoissonTimings::poisson`), the device's
/// share of it (`GpuPoisson`'s transfers, hierarchy build and iterations), the rest (the host's share: the
/// right-hand sides, the padded vectors, the solution copied back; with the vorticity kept, the wait for
/// the splat's kernels and the right-hand sides' on the device), the right-hand sides' and the potential's
/// bytes sent per point of the fitted grid, and the iterations of the slowest component.
fn vector_solve(sizes: &[usize]) -> Result<Vec<BenchRow>, BenchError> {
    use eddies::vpm::poisson::{SharedPoissonDevice, SharedSplatDevice};
    use eddies::vpm::sampling::SharedGridDevice;
    use eddies::vpm::velocity::{Query, VelocitySolver};
    use eddies::vpm::{Ring, VelocityMethod, VpmParams, VpmSim};
    use std::sync::{Arc, Mutex};
    let gpu = setup::gpu()?;
    let device = gpu.adapter().name.clone();
    let ring = Ring {
        radius: 0.5,
        core_radius: 0.08,
        vortons: 4000,
        ..Default::default()
    };
    let mut sim = VpmSim::new(VpmParams::default())?;
    sim.add_ring(&ring);
    let v = sim.vortons();
    let strength: Vec<DVec3> = (0..v.len()).map(|i| v.strength(i)).collect();
    let mut rows = Vec::new();
    for &n in sizes {
        let params = VpmParams {
            velocity: VelocityMethod::Poisson,
            grid_resolution: [n; 3],
            ..Default::default()
        };
        for kept in [true, false] {
            let (splat, solve, sampling) = eddies_gpu::vpm::poisson_stages(&gpu, kept)?;
            let on_gpu = Arc::new(Mutex::new(solve));
            let sampling = Arc::new(Mutex::new(sampling));
            let mut solver = VelocitySolver::default();
            solver.poisson.device = Some(SharedPoissonDevice(on_gpu.clone()));
            solver.poisson.splat_device = Some(SharedSplatDevice(Arc::new(Mutex::new(splat))));
            let grid_device = SharedGridDevice(sampling.clone());
            solver.poisson.grid_device = Some(grid_device.clone());
            solver.grid_device = Some(grid_device);
            let mut potential_up = 0;
            let mut samples: [Vec<f64>; 7] = Default::default();
            for k in 0..8 {
                let grown: Vec<DVec3> = strength
                    .iter()
                    .map(|&a| a * (1.0 + 0.005 * (k * k) as f64))
                    .collect();
                solver.solve(
                    &params,
                    &Query {
                        position: &v.position,
                        strength: &grown,
                        radius: &v.radius,
                        tracers: &[],
                        gradient: true,
                        stage: Some(0),
                    },
                );
                device_failed(solver.device_error.take())?;
                if let Some(e) = solver.error.take() {
                    return Err(BenchError::Solve(e));
                }
                let stage = solver.poisson.take_timings();
                let t = on_gpu
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .take_times();
                let on_device = t.upload_ms + t.build_ms + t.iterate_ms + t.download_ms;
                let up = sampling
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .potential_bytes_up();
                let points = solver.grid.len() as f64;
                if k >= 3 {
                    for (s, x) in samples.iter_mut().zip([
                        stage.splat + stage.boundary + stage.poisson + stage.curl,
                        stage.poisson,
                        on_device,
                        stage.poisson - on_device,
                        t.rhs_bytes_up as f64 / points,
                        (up - potential_up) as f64 / points,
                        solver.poisson.info.cycles as f64,
                    ]) {
                        s.push(x);
                    }
                }
                potential_up = up;
            }
            let size = format!("{n}^3");
            let [whole, solve, on_device, host, bytes, potential, cycles] =
                samples.map(|mut s| median(&mut s));
            let name = |metric: &str| match kept {
                true => metric.to_string(),
                false => format!("{metric}-read-back"),
            };
            let rows_of = [
                (name("splat-to-velocity"), device.clone(), whole, "ms"),
                (name("vector-solve"), device.clone(), solve, "ms"),
                (name("device-share"), device.clone(), on_device, "ms"),
                (name("host-share"), super::case::CPU.to_string(), host, "ms"),
                (name("rhs-bytes-up-per-point"), device.clone(), bytes, "B"),
                (
                    name("potential-bytes-up-per-point"),
                    device.clone(),
                    potential,
                    "B",
                ),
                (name("iterations"), device.clone(), cycles, "iterations"),
            ];
            rows.extend(timed_rows(
                "vpm-gpu-vector-solve",
                &size,
                rows_of
                    .each_ref()
                    .map(|(m, d, v, u)| (m.as_str(), d.clone(), *v, *u)),
            ));
        }
    }
    Ok(rows)
}

/// The Gaussian splat of `n` vortons ([`unit_cube`], core radii 1.5 times their mean spacing, as a dense
/// ball's) onto the grid of `res` points a side fitted to them, by the CPU (`BlobSplat`) and by the GPU
/// (`GpuSplat::splat_blobs`: the stamps on the host, upload, weights, sort, gather and read-back): median
/// of three after one, each.
fn gaussian_splat(sizes: &[(usize, usize)]) -> Result<Vec<BenchRow>, BenchError> {
    use eddies::vpm::blob_splat::BlobSplat;
    use eddies::vpm::mollify::FittedGrid;
    use eddies::vpm::poisson::Blobs;
    let gpu = setup::gpu()?;
    let device = gpu.adapter().name.clone();
    let mut on_gpu = eddies_gpu::vpm::GpuSplat::new(gpu.clone());
    let mut on_cpu = BlobSplat::default();
    let mut rows = Vec::new();
    for &(n, res) in sizes {
        let (position, strength) = unit_cube(n);
        let radius = vec![1.5 / (n as f64).cbrt(); n];
        let grid = FittedGrid::fit(&[&position], [res; 3], 0.05);
        let blobs = Blobs {
            position: &position,
            strength: &strength,
            radius: &radius,
        };
        let mut out = Vec::new();
        let cpu = warm_median(|| {
            let t = Instant::now();
            on_cpu.splat(&grid, &position, &strength, &radius, &mut out);
            Ok(ms_since(t))
        })?;
        let on = warm_median(|| {
            let t = Instant::now();
            on_gpu.splat_blobs(&grid, blobs, &mut out)?;
            Ok(ms_since(t))
        })?;
        rows.extend(cpu_and_gpu(
            "vpm-gpu-gaussian-splat",
            "gaussian-splat",
            (n, res),
            cpu,
            (&device, on),
        ));
    }
    Ok(rows)
}

/// The Poisson technique's last stage for `n` vortons (a unit cube, as [`splat`]'s) on the grid of `res`
/// points a side fitted to them, with the velocity gradient at every vorton: the curl, the gradient's
/// differences and the trilinear sampling on the CPU, against `GpuSampling` (the stencils on the host, the
/// potential's and their upload, both kernels, the read-back). Each is what a velocity evaluation takes
/// beyond its splat, boundary values and vector solve (zero boundary values here, the CPU's box multigrid);
/// median of three after one.
fn sampling(sizes: &[(usize, usize)]) -> Result<Vec<BenchRow>, BenchError> {
    use eddies::vpm::velocity::{Query, VelocitySolver};
    use eddies::vpm::{PoissonParams, PotentialBoundary, VelocityMethod, VpmParams};
    let gpu = setup::gpu()?;
    let device = gpu.adapter().name.clone();
    let on_gpu = eddies_gpu::vpm::GpuSampling::shared(gpu.clone());
    let mut rows = Vec::new();
    for &(n, res) in sizes {
        let (position, strength) = unit_cube(n);
        let radius = vec![0.02; n];
        let params = VpmParams {
            velocity: VelocityMethod::Poisson,
            grid_resolution: [res; 3],
            poisson: PoissonParams {
                boundary: PotentialBoundary::Zero,
                ..Default::default()
            },
            ..Default::default()
        };
        let query = Query {
            position: &position,
            strength: &strength,
            radius: &radius,
            tracers: &[],
            gradient: true,
            stage: None,
        };
        let time = |solver: &mut VelocitySolver| {
            warm_median(|| {
                solver.poisson.take_timings();
                let t = Instant::now();
                solver.solve(&params, &query);
                let whole = ms_since(t);
                device_failed(solver.device_error.take())?;
                if let Some(e) = solver.error.take() {
                    return Err(BenchError::Solve(e));
                }
                let p = solver.poisson.take_timings();
                Ok(whole - (p.splat + p.boundary + p.poisson))
            })
        };
        let cpu = time(&mut VelocitySolver::default())?;
        let mut solver = VelocitySolver::default();
        solver.grid_device = Some(on_gpu.clone());
        let on = time(&mut solver)?;
        rows.extend(cpu_and_gpu(
            "vpm-gpu-sampling",
            "curl-and-sampling",
            (n, res),
            cpu,
            (&device, on),
        ));
    }
    Ok(rows)
}

/// The baroclinic stage (`Buoyancy::apply`) for `n` vortons in a unit cube with temperatures of either sign
/// under gravity, on the grid of `res` points a side fitted to them: on the CPU, and with its grid work on
/// the GPU (`GpuBaroclinic`: the stencils on the host, the splat, the gradient at the vortons and its
/// read-back); median of three after one.
fn baroclinic(sizes: &[(usize, usize)]) -> Result<Vec<BenchRow>, BenchError> {
    use eddies::vpm::buoyancy::Buoyancy;
    use eddies::vpm::{Vortons, VpmParams};
    let gpu = setup::gpu()?;
    let device = gpu.adapter().name.clone();
    let on_gpu = eddies_gpu::vpm::GpuBaroclinic::shared(gpu.clone());
    let mut rows = Vec::new();
    for &(n, res) in sizes {
        let mut rng = SplitMix64::new(3);
        let mut v = Vortons::default();
        for _ in 0..n {
            let p = DVec3::new(
                rng.range(0.0, 1.0),
                rng.range(0.0, 1.0),
                rng.range(0.0, 1.0),
            );
            v.push(p, DVec3::ZERO, 0.02, 1e-6);
        }
        for t in &mut v.temperature {
            *t = rng.range(-10.0, 10.0);
        }
        // Gravity and thermal expansion as the defaults: −9.81 m/s² along y, 1/300 per kelvin.
        let params = VpmParams {
            grid_resolution: [res; 3],
            ..Default::default()
        };
        let time = |stage: &mut Buoyancy| {
            warm_median(|| {
                let mut after = v.clone();
                let t = Instant::now();
                stage.apply(&mut after, &params, 0.01);
                let ms = ms_since(t);
                device_failed(stage.device_error.take())?;
                Ok(ms)
            })
        };
        let cpu = time(&mut Buoyancy::default())?;
        let mut stage = Buoyancy::default();
        stage.device = Some(on_gpu.clone());
        let on = time(&mut stage)?;
        rows.extend(cpu_and_gpu(
            "vpm-gpu-baroclinic",
            "baroclinic",
            (n, res),
            cpu,
            (&device, on),
        ));
    }
    Ok(rows)
}

/// The Poisson technique's boundary values as a step takes them with the default lattice decimation: `n`
/// vortons ([`unit_cube`], cores of the vortons' spacing) on the grid of `res` points a side fitted to them
/// (margin 5%), the vector potential at the points of the grid's faces whose every coordinate is even or
/// the last (the computed ones; the rest are means of them). By the CPU's treecode at the scene default's
/// opening angle, its build and its evaluation timed apart (the build is all vortons' keys, sort and
/// moments; a step pays it for its boundary values alone), by the CPU's direct sum, and by the GPU's direct
/// sum (`GpuDirect`, as `vpm.boundary = "direct"` takes it with `--backend gpu`: upload, kernel,
/// read-back); median of three after one, each. The treecode's RMS error against the direct sum, and the
/// GPU's largest difference from the CPU's over the largest magnitude. Direct sums estimated (from the
/// size before) to take longer than [`LONGEST_S`] are skipped.
fn boundary(sizes: &[(usize, usize)]) -> Result<Vec<BenchRow>, BenchError> {
    use eddies::vpm::biot_savart::{potential_direct, DirectDevice};
    use eddies::vpm::mollify::FittedGrid;
    use eddies::vpm::tree::{rms_relative_error, Tree};
    use eddies::vpm::{PoissonParams, TreeMethod, TreeParams};
    let gpu = setup::gpu()?;
    let device = gpu.adapter().name.clone();
    let mut on_gpu = eddies_gpu::vpm::GpuDirect::new(gpu.clone());
    let params = TreeParams {
        theta: PoissonParams::default().boundary_theta,
        method: TreeMethod::Treecode,
        ..TreeParams::default()
    };
    let mut rows = Vec::new();
    // Pairs per second of the last size's direct sums: (CPU, GPU).
    let mut rates: Option<(f64, f64)> = None;
    for &(n, res) in sizes {
        let (position, strength) = unit_cube(n);
        let radius = vec![(n as f64).cbrt().recip(); n];
        let grid = FittedGrid::fit(&[&position], [res; 3], 0.05);
        let points = lattice_faces(&grid);
        let size = format!("{n} vortons at {} points", points.len());
        let pairs = (n * points.len()) as f64;
        let mut tree = Tree::default();
        let build = warm_median(|| {
            let t = Instant::now();
            tree.build(&params, &position, &strength, &radius);
            Ok(ms_since(t))
        })?;
        let mut by_tree = vec![DVec3::ZERO; points.len()];
        let evaluate = warm_median(|| {
            let t = Instant::now();
            tree.evaluate_potential(&params, &points, &mut by_tree);
            Ok(ms_since(t))
        })?;
        rows.extend(timed_rows(
            "vpm-gpu-boundary",
            &size,
            [
                ("cpu-tree-build", super::case::CPU.to_string(), build, "ms"),
                (
                    "cpu-tree-evaluate",
                    super::case::CPU.to_string(),
                    evaluate,
                    "ms",
                ),
            ],
        ));
        let too_long = |rate: f64, on: &str| {
            let s = pairs / rate;
            if s > LONGEST_S {
                eprintln!(
                    "note: {size}: the direct sum skipped on {on}: about {s:.0} s an evaluation"
                );
            }
            s > LONGEST_S
        };
        let mut sources = Sources::default();
        sources.fill(DVec3::splat(0.5), &position, &strength, &radius);
        let mut direct = vec![DVec3::ZERO; points.len()];
        let (mut cpu_rate, mut gpu_rate) = (f64::INFINITY, f64::INFINITY);
        if !rates.is_some_and(|(cpu, _)| too_long(cpu, super::case::CPU)) {
            let cpu = warm_median(|| {
                let t = Instant::now();
                potential_direct(&sources, &points, &mut direct);
                Ok(ms_since(t))
            })?;
            cpu_rate = pairs / (cpu * 1e-3);
            rows.extend(timed_rows(
                "vpm-gpu-boundary",
                &size,
                [
                    ("cpu-direct", super::case::CPU.to_string(), cpu, "ms"),
                    (
                        "tree-rms-error",
                        super::case::CPU.to_string(),
                        rms_relative_error(&by_tree, &direct),
                        "1",
                    ),
                ],
            ));
        }
        if !rates.is_some_and(|(_, gpu)| too_long(gpu, &device)) {
            let mut out = vec![DVec3::ZERO; points.len()];
            let on = warm_median(|| {
                let t = Instant::now();
                on_gpu
                    .potential(&sources, &points, &mut out)
                    .map_err(|detail| {
                        BenchError::Sim(eddies::sim::SimError::Device { step: 0, detail })
                    })?;
                Ok(ms_since(t))
            })?;
            gpu_rate = pairs / (on * 1e-3);
            let mut values = vec![
                ("gpu-direct", device.clone(), on, "ms"),
                ("gpu-direct-rate", device.clone(), gpu_rate, "pairs/s"),
            ];
            if cpu_rate.is_finite() {
                let scale = direct
                    .iter()
                    .fold(0f64, |m, a| m.max(a.abs().max_element()));
                let diff = direct
                    .iter()
                    .zip(&out)
                    .fold(0f64, |m, (a, b)| m.max((*a - *b).abs().max_element()));
                values.push(("gpu-vs-cpu", device.clone(), diff / scale, "1"));
            }
            for (metric, device, value, unit) in values {
                rows.extend(timed_rows(
                    "vpm-gpu-boundary",
                    &size,
                    [(metric, device, value, unit)],
                ));
            }
        }
        rates = Some((cpu_rate, gpu_rate));
    }
    Ok(rows)
}

/// The points of `grid`'s faces whose every coordinate is even or the last: those whose boundary value
/// the Poisson technique computes with lattice decimation, at the grid points' positions.
fn lattice_faces(grid: &eddies::vpm::mollify::FittedGrid) -> Vec<DVec3> {
    let d = grid.dims;
    let computed = |c: usize, n: usize| c.is_multiple_of(2) || c == n - 1;
    let face = |c: usize, n: usize| c == 0 || c == n - 1;
    let mut points = Vec::new();
    for k in 0..d[2] {
        for j in 0..d[1] {
            for i in 0..d[0] {
                let c = [i, j, k];
                if (0..3).any(|a| face(c[a], d[a])) && (0..3).all(|a| computed(c[a], d[a])) {
                    points.push(DVec3::from_array(std::array::from_fn(|a| {
                        grid.origin[a] + (c[a] as f64 + 0.5) * grid.spacing
                    })));
                }
            }
        }
    }
    points
}

/// `n` vortons in a unit cube: positions, and strengths of either sign (m³/s).
fn unit_cube(n: usize) -> (Vec<DVec3>, Vec<DVec3>) {
    let mut rng = SplitMix64::new(3);
    let mut v =
        |lo: f64, hi: f64| DVec3::new(rng.range(lo, hi), rng.range(lo, hi), rng.range(lo, hi));
    let position = (0..n).map(|_| v(0.0, 1.0)).collect();
    let strength = (0..n).map(|_| v(-1e-4, 1e-4)).collect();
    (position, strength)
}

/// The two rows of a stage `what` timed for `vortons` vortons on a grid of `res` points a side: on the CPU
/// (`cpu` ms) and on the GPU (`device` and its ms).
fn cpu_and_gpu(
    bench: &str,
    what: &str,
    (vortons, res): (usize, usize),
    cpu: f64,
    (device, on): (&str, f64),
) -> Vec<BenchRow> {
    timed_rows(
        bench,
        &format!("{vortons} vortons on {res}^3"),
        [
            (
                &format!("cpu-{what}"),
                super::case::CPU.to_string(),
                cpu,
                "ms",
            ),
            (&format!("gpu-{what}"), device.to_string(), on, "ms"),
        ],
    )
}

/// The median of three samples taken after one that warms up (pipelines, buffers, caches).
fn warm_median(mut sample: impl FnMut() -> Result<f64, BenchError>) -> Result<f64, BenchError> {
    sample()?;
    let mut samples = (0..3).map(|_| sample()).collect::<Result<Vec<_>, _>>()?;
    Ok(median(&mut samples))
}

/// Milliseconds since `t`.
fn ms_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

/// A device's failure, where one was kept, as the error a simulation's step gives.
fn device_failed(detail: Option<String>) -> Result<(), BenchError> {
    match detail {
        Some(detail) => Err(BenchError::Sim(eddies::sim::SimError::Device {
            step: 0,
            detail,
        })),
        None => Ok(()),
    }
}

/// The rows of one size of `bench`: each `(metric, device, value, unit)`, measured on this process's
/// threads.
fn timed_rows<const N: usize>(
    bench: &str,
    size: &str,
    values: [(&str, String, f64, &str); N],
) -> Vec<BenchRow> {
    values
        .into_iter()
        .map(|(metric, device, value, unit)| BenchRow {
            bench: bench.into(),
            size: size.into(),
            metric: metric.into(),
            value,
            unit: unit.into(),
            threads: rayon::current_num_threads(),
            device,
        })
        .collect()
}

/// `n` vortons in a unit cube, strengths of either sign, core radii 1–3 % of the cube.
fn cloud(n: usize) -> (Sources, Vec<[f32; 3]>) {
    let mut rng = SplitMix64::new(11);
    let mut v =
        |lo: f64, hi: f64| DVec3::new(rng.range(lo, hi), rng.range(lo, hi), rng.range(lo, hi));
    let position: Vec<DVec3> = (0..n).map(|_| v(0.0, 1.0)).collect();
    let strength: Vec<DVec3> = (0..n).map(|_| v(-1e-4, 1e-4)).collect();
    let radius: Vec<f64> = (0..n).map(|_| 0.01 + 0.02 * v(0.0, 1.0).x).collect();
    let mut sources = Sources::default();
    sources.fill(DVec3::splat(0.5), &position, &strength, &radius);
    let targets = (0..n)
        .map(|k| [sources.x[k], sources.y[k], sources.z[k]])
        .collect();
    (sources, targets)
}

fn direct_sum(sizes: &[usize]) -> Result<Vec<BenchRow>, BenchError> {
    let gpu = setup::gpu()?;
    let device = gpu.adapter().name.clone();
    let mut direct = DirectSum::new(&gpu);
    let mut rows = Vec::new();
    let mut rate: Option<f64> = None;
    for &n in sizes {
        let pairs = (n * n) as f64;
        if let Some(r) = rate.filter(|r| pairs / r > LONGEST_S) {
            eprintln!(
                "note: {n} vortons skipped: about {:.0} s an evaluation on {device}",
                pairs / r
            );
            continue;
        }
        let (sources, targets) = cloud(n);
        // The slower of this size's two rates estimates the next size.
        let mut size_rate = f64::INFINITY;
        for gradient in [false, true] {
            direct.evaluate(&gpu, &sources, &targets, gradient)?;
            let mut samples = Vec::new();
            for _ in 0..3 {
                let t = Instant::now();
                direct.evaluate(&gpu, &sources, &targets, gradient)?;
                samples.push(t.elapsed().as_secs_f64());
            }
            let t = median(&mut samples);
            size_rate = size_rate.min(pairs / t);
            let metric = if gradient {
                "with-gradient"
            } else {
                "velocity"
            };
            for (metric, value, unit) in [
                (metric.to_string(), pairs / t, "pairs/s"),
                (format!("{metric}-time"), t * 1e3, "ms"),
            ] {
                rows.push(BenchRow {
                    bench: "vpm-gpu-direct-sum".into(),
                    size: n.to_string(),
                    metric,
                    value,
                    unit: unit.into(),
                    threads: rayon::current_num_threads(),
                    device: device.clone(),
                });
            }
        }
        rate = Some(size_rate);
    }
    rows.push(BenchRow {
        bench: "vpm-gpu-direct-sum".into(),
        size: sizes.last().map_or(0, |n| *n).to_string(),
        metric: "device-bytes".into(),
        value: direct.bytes() as f64,
        unit: "B".into(),
        threads: rayon::current_num_threads(),
        device,
    });
    Ok(rows)
}
