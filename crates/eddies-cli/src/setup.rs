//! From a checked [`Scene`] to a running [`Simulation`], and the memory check that comes before it.

use eddies::flip::{self, FlipConfig, FlipParams, FlipSim};
use eddies::linsolve::{PreconditionerKind, Restriction};
use eddies::reint::{self, Emitter, Eos, ReintConfig, ReintParams, ReintSim, Sink, Substance};
use eddies::vpm::{
    self, BuoyancyParams, Decimation, Integrator, PoissonParams, PotentialBoundary, Splat,
    TreeMethod, TreeParams, VelocityMethod, VpmParams, VpmSim,
};
use eddies::{SimError, Simulation};
use glam::DVec3;

use crate::keypath::KeyPath;
use crate::load::{Loaded, SceneError};
use crate::scene::{
    BoundaryKind, DecimateKind, EosKind, IntegratorKind, Invalid, Method, PotentialBoundaryKind,
    PreconditionerSpec, RestrictionKind, Scene, SplatKind, TransferKind, TreeMethodKind,
    VelocityKind,
};

/// Cell counts up to which the library's estimate is asked directly; beyond, it is extrapolated per cell (so
/// that absurd sizes cannot overflow the estimate's arithmetic).
const DIRECT_ESTIMATE_CELLS: u128 = 1 << 32;

const GIB: f64 = (1u64 << 30) as f64;

/// Bytes the scene's simulation will hold, from the method's own estimate.
pub fn estimate_bytes(scene: &Scene) -> f64 {
    let res = scene.resolution();
    let substances = scene.substances().len();
    let cells: u128 = res.iter().map(|&n| n as u128).product();
    match scene.method {
        Method::Reint => {
            let direct = |res: &[usize]| -> f64 {
                if res.len() == 3 {
                    ReintSim::<3>::estimate_bytes([res[0], res[1], res[2]], substances) as f64
                } else {
                    ReintSim::<2>::estimate_bytes([res[0], res[1]], substances) as f64
                }
            };
            if cells <= DIRECT_ESTIMATE_CELLS {
                direct(&res)
            } else {
                let probe = vec![64; res.len()];
                let probe_cells = 64f64.powi(res.len() as i32);
                direct(&probe) / probe_cells * cells as f64
            }
        }
        Method::Vpm => {
            // Per vorton: the state, the Runge–Kutta stages and the velocity buffers (~0.6 KiB with
            // stretching); per tracer about 0.2 KiB; per grid point the velocity and its gradient.
            let v = &scene.vpm;
            let vortons: f64 = v.ring.iter().map(|r| r.vortons as f64).sum::<f64>()
                + v.tube.iter().map(|t| t.vortons as f64).sum::<f64>()
                + v.sheet
                    .iter()
                    .map(|s| (s.vortons_per_edge * s.vortons_per_edge) as f64)
                    .sum::<f64>()
                + v.noise.iter().map(|n| n.vortons as f64).sum::<f64>()
                + v.ball.iter().map(|b| b.vortons as f64).sum::<f64>()
                + v.block.iter().map(|b| b.vortons as f64).sum::<f64>();
            let tracers: f64 = v.ring.iter().map(|r| r.tracers as f64).sum::<f64>()
                + v.tube.iter().map(|t| t.tracers as f64).sum::<f64>()
                + v.ball.iter().map(|b| b.tracers as f64).sum::<f64>()
                + v.block.iter().map(|b| b.tracers as f64).sum::<f64>();
            vortons * 640.0 + tracers * 200.0 + cells as f64 * 120.0
        }
        Method::Flip => {
            // Upper bound: the whole domain seeded (seeds_per_axis^dim particles per cell).
            let per_cell = (scene.flip.seeds_per_axis.clamp(1, 4) as f64).powi(res.len() as i32);
            let apic = scene.flip.transfer == TransferKind::Apic;
            let (cell, particle) = if res.len() == 3 {
                (
                    FlipSim::<3>::bytes_per_cell(),
                    FlipSim::<3>::bytes_per_particle(apic),
                )
            } else {
                (
                    FlipSim::<2>::bytes_per_cell(),
                    FlipSim::<2>::bytes_per_particle(apic),
                )
            };
            cells as f64 * (cell as f64 + per_cell * particle as f64)
        }
    }
}

/// Memory the system can give this process without swapping (bytes): `MemAvailable` of `/proc/meminfo`, or
/// `None` where that cannot be read (then no check is made).
pub fn available_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Refuses a scene whose estimate exceeds `available` bytes, naming `domain.resolution` and the estimate.
/// Returns the estimate (bytes).
pub fn check_memory(loaded: &Loaded, available: Option<u64>) -> Result<f64, SceneError> {
    let need = estimate_bytes(&loaded.scene);
    match available {
        Some(avail) if need > avail as f64 => {
            let res = loaded.scene.resolution();
            let cells: f64 = res.iter().map(|&n| n as f64).product();
            Err(loaded.locator.error(Invalid::new(
                KeyPath::root().key("domain").key("resolution"),
                format!(
                    "the scene needs about {:.1} GiB ({:.3e} cells), but only {:.1} GiB of memory is available",
                    need / GIB,
                    cells,
                    avail as f64 / GIB
                ),
                format!("a resolution whose estimate fits in {:.1} GiB", avail as f64 / GIB),
            )))
        }
        _ => Ok(need),
    }
}

/// Human-readable byte count.
pub fn format_bytes(b: f64) -> String {
    const MIB: f64 = (1u64 << 20) as f64;
    if b >= GIB {
        format!("{:.1} GiB", b / GIB)
    } else if b >= MIB {
        format!("{:.0} MiB", b / MIB)
    } else {
        format!("{:.0} KiB", b / 1024.0)
    }
}

/// A simulation set up from a scene, and what the user should know about the set-up.
pub struct Built {
    /// The simulation, at time 0.
    pub sim: Box<dyn Simulation>,
    /// One line each, without the `warning: ` prefix: parts of the scene that have no effect.
    pub warnings: Vec<String>,
}

/// Builds the simulation of a checked scene, with its initial fluid, obstacles, emitters and sinks.
///
/// A scene in which nothing could move (no fluid in the domain and nothing that adds any) is refused as
/// [`SimError::InvalidInput`]; a region that covers no cell of the domain is a warning.
pub fn build(scene: &Scene) -> Result<Built, SimError> {
    let mut fill = Filling::default();
    let sim: Box<dyn Simulation> = match (scene.method, scene.dim()) {
        (Method::Reint, 2) => Box::new(build_reint::<2>(scene, &mut fill)?),
        (Method::Reint, _) => Box::new(build_reint::<3>(scene, &mut fill)?),
        (Method::Vpm, _) => {
            let sim = build_vpm(scene)?;
            fill.filled = sim.vortons().len();
            Box::new(sim)
        }
        (Method::Flip, 2) => Box::new(build_flip::<2>(scene, &mut fill)?),
        (Method::Flip, _) => Box::new(build_flip::<3>(scene, &mut fill)?),
    };
    let v = &scene.vpm;
    let sources = match scene.method {
        Method::Reint | Method::Flip => !scene.emitter.is_empty(),
        Method::Vpm => {
            !(v.jet.is_empty() && v.heat_source.is_empty())
                || v.ball.iter().any(|b| b.period > 0.0 || b.start > 0.0)
        }
    };
    if fill.filled == 0 && !sources {
        let what = match scene.method {
            Method::Vpm => {
                "no vortons: add a [[vpm.ring]], [[vpm.ball]] or another distribution inside the domain, \
                 or a [[vpm.jet]] or [[vpm.heat_source]]"
            }
            _ => "no fluid: no [[region]] covers a cell of the domain, and no [[emitter]] adds any",
        };
        return Err(SimError::InvalidInput(format!(
            "nothing to simulate: the scene has {what}"
        )));
    }
    Ok(Built {
        sim,
        warnings: fill.warnings,
    })
}

/// What the initial distributions of a scene put into its simulation.
#[derive(Default)]
struct Filling {
    /// Cells (reint), particles (flip) or vortons (vpm) placed.
    filled: usize,
    /// Regions that placed nothing.
    warnings: Vec<String>,
}

impl Filling {
    /// Notes that region `k` placed `n` cells or particles.
    fn region(&mut self, scene: &Scene, k: usize, n: usize) {
        self.filled += n;
        if n == 0 {
            let size: Vec<String> = scene.size().iter().map(|x| format!("{x}")).collect();
            self.warnings.push(format!(
                "region.{k}: its shape covers no fluid cell of the domain [0, {}] m (it lies outside, \
                 inside an obstacle, or between cell centres): it adds no fluid",
                size.join("] × [0, ")
            ));
        }
    }
}

fn array<T: Copy, const D: usize>(v: &[T]) -> [T; D] {
    std::array::from_fn(|k| v[k])
}

fn velocity<const D: usize>(v: &Option<Vec<f64>>) -> [f32; D] {
    std::array::from_fn(|k| v.as_ref().and_then(|v| v.get(k)).copied().unwrap_or(0.0) as f32)
}

/// The library configuration of a reint scene.
pub fn reint_config<const D: usize>(scene: &Scene) -> ReintConfig<D> {
    let r = &scene.reint;
    ReintConfig {
        resolution: array(&scene.resolution()),
        cell_size: scene.cell_size(),
        boundary: match scene.domain.boundary {
            BoundaryKind::Closed => reint::Boundary::Closed,
            BoundaryKind::Open => reint::Boundary::Open,
        },
        gravity: array(&scene.gravity()),
        params: ReintParams {
            diffusion_radius: r.diffusion_radius as f32,
            eos: match r.eos {
                EosKind::Quadratic => Eos::Quadratic,
                EosKind::Tait => Eos::Tait {
                    gamma: r.gamma as f32,
                },
                EosKind::IdealGas => Eos::IdealGas,
            },
            sound_speed: r.sound_speed as f32,
            kernel_radius: r.kernel_radius as f32,
            viscosity: r.viscosity as f32,
            tension: r.tension,
            forces: r.forces,
        },
        substances: scene
            .substances()
            .iter()
            .map(|s| Substance {
                rest_density: s.rest_density as f32,
                color: [s.color[0] as f32, s.color[1] as f32, s.color[2] as f32],
            })
            .collect(),
    }
}

fn build_reint<const D: usize>(scene: &Scene, fill: &mut Filling) -> Result<ReintSim<D>, SimError> {
    let dim = scene.dim();
    let mut sim = ReintSim::<D>::new(reint_config::<D>(scene))?;
    // Shapes were checked by `Scene::validate`; entries without one cannot reach here.
    for o in &scene.obstacle {
        if let Some(shape) = &o.shape {
            sim.add_obstacle(shape.to_shape(dim));
        }
    }
    for (k, r) in scene.region.iter().enumerate() {
        if let Some(shape) = &r.shape {
            let filled = sim.fill(
                &shape.to_shape(dim),
                r.substance as usize,
                r.density as f32,
                velocity(&r.velocity),
            );
            fill.region(scene, k, filled);
        }
    }
    for e in &scene.emitter {
        if let Some(shape) = &e.shape {
            sim.add_emitter(Emitter {
                shape: shape.to_shape(dim),
                substance: e.substance as usize,
                velocity: velocity(&e.velocity),
                density: e.density as f32,
                active: (e.start, e.stop),
            });
        }
    }
    for s in &scene.sink {
        if let Some(shape) = &s.shape {
            sim.add_sink(Sink {
                shape: shape.to_shape(dim),
                rate: s.rate as f32,
            });
        }
    }
    Ok(sim)
}

/// The library parameters of a vpm scene.
pub fn vpm_params(scene: &Scene) -> VpmParams {
    let v = &scene.vpm;
    let res = scene.resolution();
    VpmParams {
        velocity: match v.velocity {
            VelocityKind::DirectVortons => VelocityMethod::DirectVortons,
            VelocityKind::DirectGrid => VelocityMethod::DirectGrid,
            VelocityKind::TreeVortons => VelocityMethod::TreeVortons,
            VelocityKind::TreeGrid => VelocityMethod::TreeGrid,
            VelocityKind::Poisson => VelocityMethod::Poisson,
        },
        poisson: PoissonParams {
            boundary: match v.boundary {
                PotentialBoundaryKind::Tree => PotentialBoundary::Tree,
                PotentialBoundaryKind::Direct => PotentialBoundary::Direct,
                PotentialBoundaryKind::Zero => PotentialBoundary::Zero,
            },
            decimate: match v.decimate {
                DecimateKind::Off => Decimation::Off,
                DecimateKind::Rows => Decimation::Rows,
                DecimateKind::Lattice => Decimation::Lattice,
            },
            splat: match v.splat {
                SplatKind::Cic => Splat::Cic,
                SplatKind::Gaussian => Splat::Gaussian,
            },
            boundary_theta: v.boundary_theta,
            tolerance: v.poisson_tolerance,
            restriction: match v.restriction {
                RestrictionKind::Nearest => Restriction::Nearest,
                RestrictionKind::FullWeighting => Restriction::FullWeighting,
            },
        },
        buoyancy: BuoyancyParams {
            baroclinic: v.baroclinic,
            gravity: {
                let g = scene.gravity();
                [g[0], g[1], g.get(2).copied().unwrap_or(0.0)]
            },
            thermal_expansion: v.thermal_expansion,
            heat_diffusivity: v.heat_diffusivity,
        },
        tree: TreeParams {
            theta: v.theta,
            leaf_size: v.leaf_size.max(1) as usize,
            original_leaves: v.original_leaves,
            method: match v.tree_method {
                TreeMethodKind::Treecode => TreeMethod::Treecode,
                TreeMethodKind::Fmm => TreeMethod::Fmm,
            },
        },
        viscosity: v.viscosity,
        ambient_density: v.ambient_density,
        stretching: v.stretching,
        auto_mollify: v.auto_mollify,
        length_scale: v.length_scale,
        grid_resolution: [res[0], res[1], res[2]],
        grid_margin: v.grid_margin,
        integrator: match v.integrator {
            IntegratorKind::Rk2 => Integrator::Rk2,
            IntegratorKind::Rk4 => Integrator::Rk4,
        },
    }
}

fn vec3(v: &[f64]) -> DVec3 {
    DVec3::new(v[0], v[1], v[2])
}

fn build_vpm(scene: &Scene) -> Result<VpmSim, SimError> {
    let mut sim = VpmSim::new(vpm_params(scene))?;
    let v = &scene.vpm;
    // Each distribution draws from its own stream of the scene's seed.
    let seed = |k: usize| {
        (scene.seed as u64)
            .wrapping_mul(1_000_003)
            .wrapping_add(k as u64)
    };
    for (i, r) in v.ring.iter().enumerate() {
        sim.add_ring(&vpm::Ring {
            center: vec3(&r.center),
            axis: vec3(&r.axis),
            radius: r.radius,
            core_radius: r.core_radius,
            circulation: r.circulation,
            vortons: r.vortons as usize,
            filament: r.filament,
            tracers: r.tracers as usize,
            seed: seed(i),
        });
    }
    for (i, t) in v.tube.iter().enumerate() {
        sim.add_tube(&vpm::Tube {
            center: vec3(&t.center),
            axis: vec3(&t.axis),
            length: t.length,
            core_radius: t.core_radius,
            circulation: t.circulation,
            vortons: t.vortons as usize,
            wiggle: t.wiggle,
            tracers: t.tracers as usize,
            seed: seed(100 + i),
        });
    }
    for s in &v.sheet {
        sim.add_sheet(&vpm::Sheet {
            center: vec3(&s.center),
            normal: vec3(&s.normal),
            velocity_jump: vec3(&s.velocity_jump),
            size: s.size,
            vortons_per_edge: s.vortons_per_edge as usize,
        });
    }
    for (i, n) in v.noise.iter().enumerate() {
        sim.add_noise(&vpm::Noise {
            min: vec3(&n.min),
            max: vec3(&n.max),
            amplitude: n.amplitude,
            vortons: n.vortons as usize,
            seed: seed(200 + i),
        });
    }
    for (i, j) in v.jet.iter().enumerate() {
        sim.add_jet(vpm::Jet {
            ring: vpm::Ring {
                center: vec3(&j.center),
                axis: vec3(&j.axis),
                radius: j.radius,
                core_radius: j.core_radius,
                circulation: j.circulation,
                vortons: j.vortons as usize,
                filament: false,
                tracers: j.tracers as usize,
                seed: seed(300 + i),
            },
            period: j.period,
            start: j.start,
            stop: j.stop,
        });
    }
    for (i, b) in v.ball.iter().enumerate() {
        let ball = vpm::Ball {
            center: vec3(&b.center),
            radius: b.radius,
            density_deviation: b.density_deviation,
            temperature_deviation: b.temperature_deviation,
            vortons: b.vortons as usize,
            halo: b.halo,
            tracers: b.tracers as usize,
            seed: seed(400 + i),
        };
        if b.period > 0.0 || b.start > 0.0 {
            let period = if b.period > 0.0 {
                b.period
            } else {
                f64::INFINITY
            };
            sim.add_puff(vpm::Puff {
                ball,
                period,
                start: b.start,
                stop: b.stop,
            });
        } else {
            sim.add_ball(&ball);
        }
    }
    for (i, b) in v.block.iter().enumerate() {
        sim.add_block(&vpm::Block {
            min: vec3(&b.min),
            max: vec3(&b.max),
            density_deviation: b.density_deviation,
            temperature_deviation: b.temperature_deviation,
            vortons: b.vortons as usize,
            jitter: b.jitter,
            tracers: b.tracers as usize,
            seed: seed(500 + i),
        });
    }
    for (i, h) in v.heat_source.iter().enumerate() {
        sim.add_heat_source(vpm::HeatSource {
            center: vec3(&h.center),
            radius: h.radius,
            rate: h.rate,
            temperature: h.temperature,
            smoke: h.smoke,
            seed: seed(600 + i),
        });
    }
    Ok(sim)
}

/// The library configuration of a flip scene.
pub fn flip_config<const D: usize>(scene: &Scene) -> FlipConfig<D> {
    let f = &scene.flip;
    FlipConfig {
        resolution: array(&scene.resolution()),
        cell_size: scene.cell_size(),
        boundary: match scene.domain.boundary {
            BoundaryKind::Closed => flip::Boundary::Closed,
            BoundaryKind::Open => flip::Boundary::Open,
        },
        gravity: array(&scene.gravity()),
        params: FlipParams {
            transfer: match f.transfer {
                TransferKind::Pic => flip::Transfer::Pic,
                TransferKind::Flip => flip::Transfer::Flip,
                TransferKind::Apic => flip::Transfer::Apic,
            },
            pic_ratio: f.pic_ratio,
            preconditioner: match f.preconditioner {
                PreconditionerSpec::None => PreconditionerKind::None,
                PreconditionerSpec::Jacobi => PreconditionerKind::Jacobi,
                PreconditionerSpec::Ic0 => PreconditionerKind::IncompleteCholesky,
                PreconditionerSpec::Mic0 => PreconditionerKind::ModifiedIncompleteCholesky,
                PreconditionerSpec::IncompletePoisson => PreconditionerKind::IncompletePoisson,
                PreconditionerSpec::Multigrid => PreconditionerKind::Multigrid,
            },
            tolerance: f.tolerance,
            max_iterations: f.max_iterations.max(1) as usize,
            density: scene.substances()[0].rest_density,
            seeds_per_axis: f.seeds_per_axis.max(1) as usize,
            jitter: f.jitter,
            min_per_cell: f.min_per_cell.max(0) as usize,
            max_per_cell: f.max_per_cell.max(0) as usize,
            extrapolation_layers: f.extrapolation_layers.max(1) as usize,
            volume_correction: f.volume_correction,
            substep_cfl: f.substep_cfl,
        },
        seed: scene.seed as u64,
    }
}

fn vec_d<const D: usize>(v: &Option<Vec<f64>>) -> [f64; D] {
    std::array::from_fn(|k| v.as_ref().and_then(|v| v.get(k)).copied().unwrap_or(0.0))
}

fn build_flip<const D: usize>(scene: &Scene, fill: &mut Filling) -> Result<FlipSim<D>, SimError> {
    let dim = scene.dim();
    let mut sim = FlipSim::<D>::new(flip_config::<D>(scene))?;
    // Shapes were checked by `Scene::validate`; entries without one cannot reach here.
    for o in &scene.obstacle {
        if let Some(shape) = &o.shape {
            let w = o.angular_velocity.clone().unwrap_or_default();
            let angular_velocity = if D == 2 {
                [0.0, 0.0, w.first().copied().unwrap_or(0.0)]
            } else {
                std::array::from_fn(|k| w.get(k).copied().unwrap_or(0.0))
            };
            sim.add_obstacle(flip::Obstacle {
                shape: shape.to_shape(dim),
                velocity: vec_d(&o.velocity),
                angular_velocity,
                center: vec_d(&o.center),
            });
        }
    }
    for (k, r) in scene.region.iter().enumerate() {
        if let Some(shape) = &r.shape {
            let seeded = sim.fill(&shape.to_shape(dim), vec_d(&r.velocity));
            fill.region(scene, k, seeded);
        }
    }
    for e in &scene.emitter {
        if let Some(shape) = &e.shape {
            sim.add_emitter(flip::Emitter {
                shape: shape.to_shape(dim),
                velocity: vec_d(&e.velocity),
                active: (e.start, e.stop),
            });
        }
    }
    for s in &scene.sink {
        if let Some(shape) = &s.shape {
            sim.add_sink(flip::Sink {
                shape: shape.to_shape(dim),
                rate: s.rate,
            });
        }
    }
    Ok(sim)
}
