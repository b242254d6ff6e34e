//! From a checked [`Scene`] to a running [`Simulation`], and the memory check that comes before it. The one
//! place that knows which method a scene names: one file per method (its configuration, its memory estimate
//! and its initial state), and here the dispatch. Everything else asks the method's [`eddies::Description`] ([`Scene::describe`]).

mod flip;
pub use flip::obstacles;
mod reint;
mod vpm;

use std::sync::{Arc, OnceLock};

use eddies::{SimError, Simulation};
use eddies_gpu::flip::GpuTransfer;
use eddies_gpu::pressure::GpuPoisson;
use eddies_gpu::{Gpu, GpuError, ReintGpu};

pub use crate::error::SetupError;

use crate::keypath::KeyPath;
use crate::load::{Loaded, SceneError};
use crate::scene::{Backend, BadValue, Method, Scene};

/// Cell counts up to which the library's estimate is asked directly; beyond, it is extrapolated per cell (so
/// that absurd sizes cannot overflow the estimate's arithmetic).
const DIRECT_ESTIMATE_CELLS: u128 = 1 << 32;

const GIB: f64 = (1u64 << 30) as f64;

/// Bytes the scene's simulation will hold, from the method's own estimate.
pub fn estimate_bytes(scene: &Scene) -> f64 {
    match scene.method {
        Method::Reint => reint::estimate_bytes(scene),
        Method::Flip => flip::estimate_bytes(scene),
        Method::Vpm => vpm::estimate_bytes(scene),
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
            Err(loaded.locator.error(BadValue::new(
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

/// The FLIP simulation of `scene`, with its particle passes and pressure solves on the GPU on the
/// GPU backend.
fn flip_sim<const D: usize>(
    scene: &Scene,
    fill: &mut Filling,
) -> Result<Box<dyn Simulation>, SetupError>
where
    GpuPoisson: eddies::linsolve::PoissonDevice<D>,
    GpuTransfer: eddies::flip::TransferDevice<D>,
{
    let mut sim = flip::build::<D>(scene, fill)?;
    if scene.backend == Backend::Gpu {
        // The solves and the particle passes take turns within a step: they share their scratch memory.
        let mut pressure = GpuPoisson::new(gpu()?)?;
        let mut transfer = GpuTransfer::new(gpu()?);
        transfer.share_scratch(pressure.scratch().clone());
        pressure.share_scratch(transfer.scratch().clone());
        // The volume correction's displacement goes from the solve to the particle pass on the device.
        pressure.share_faces(transfer.faces().clone());
        sim.set_pressure_device(Box::new(pressure));
        sim.set_transfer_device(Box::new(transfer));
        // The particles stay on the device between frames; the step's diagnostics are tallied there.
        sim.read_particles_per_frame(true);
    }
    Ok(Box::new(sim))
}

/// The GPU device of this process, opened on first use and shared by every simulation (the panels of a run).
pub fn gpu() -> Result<Arc<Gpu>, GpuError> {
    static GPU: OnceLock<Result<Arc<Gpu>, GpuError>> = OnceLock::new();
    GPU.get_or_init(|| Gpu::new().map(Arc::new)).clone()
}

/// Builds the simulation of a checked scene, with its initial fluid, obstacles, emitters and sinks, on the
/// scene's backend.
///
/// A scene in which nothing could move (no fluid in the domain and nothing that adds any) is refused as
/// [`SimError::InvalidInput`]; a region that covers no cell of the domain is a warning.
pub fn build(scene: &Scene) -> Result<Built, SetupError> {
    let mut fill = Filling::default();
    let v = &scene.vpm;
    let (sim, sources, nothing): (Box<dyn Simulation>, bool, &str) = match (
        scene.method,
        scene.dim(),
    ) {
        (Method::Vpm, _) => {
            let mut sim = vpm::build(scene)?;
            if scene.backend == Backend::Gpu {
                let gpu = self::gpu()?;
                sim.set_direct_device(eddies_gpu::vpm::GpuDirect::shared(gpu.clone()));
                sim.set_exchange_device(eddies_gpu::vpm::GpuExchange::shared(gpu.clone()));
                sim.set_baroclinic_device(eddies_gpu::vpm::GpuBaroclinic::shared(gpu.clone()));
                let velocity = scene.vpm.params.velocity;
                if velocity == eddies::vpm::VelocityMethod::Poisson {
                    // The technique's fields stay on the device between its stages.
                    let (splat, solve, sampling) = eddies_gpu::vpm::poisson_stages(&gpu, true)?;
                    sim.set_splat_device(eddies::vpm::poisson::SharedSplatDevice(Arc::new(
                        std::sync::Mutex::new(splat),
                    )));
                    sim.set_poisson_device(eddies::vpm::poisson::SharedPoissonDevice(Arc::new(
                        std::sync::Mutex::new(solve),
                    )));
                    sim.set_grid_device(eddies::vpm::sampling::SharedGridDevice(Arc::new(
                        std::sync::Mutex::new(sampling),
                    )));
                } else if velocity.on_grid() {
                    sim.set_grid_device(eddies_gpu::vpm::GpuSampling::shared(gpu.clone()));
                }
            }
            fill.filled = sim.vortons().len();
            let sources = !(v.jet.is_empty() && v.heat_source.is_empty())
                || v.ball.iter().any(|b| b.period > 0.0 || b.start > 0.0);
            (
                Box::new(sim),
                sources,
                "no vortons: add a [[vpm.ring]], [[vpm.ball]] or another distribution inside the domain, \
                 or a [[vpm.jet]] or [[vpm.heat_source]]",
            )
        }
        (method, dim) => {
            let gpu = scene.backend == Backend::Gpu;
            let sim: Box<dyn Simulation> = match (method, dim) {
                (Method::Reint, 2) if gpu => Box::new(ReintGpu::new(
                    self::gpu()?,
                    reint::build::<2>(scene, &mut fill)?,
                )?),
                (Method::Reint, _) if gpu => Box::new(ReintGpu::new(
                    self::gpu()?,
                    reint::build::<3>(scene, &mut fill)?,
                )?),
                (Method::Reint, 2) => Box::new(reint::build::<2>(scene, &mut fill)?),
                (Method::Reint, _) => Box::new(reint::build::<3>(scene, &mut fill)?),
                (_, 2) => flip_sim::<2>(scene, &mut fill)?,
                (_, _) => flip_sim::<3>(scene, &mut fill)?,
            };
            (
                sim,
                !scene.emitter.is_empty(),
                "no fluid: no [[region]] covers a cell of the domain, and no [[emitter]] adds any",
            )
        }
    };
    if fill.filled == 0 && !sources {
        return Err(SimError::InvalidInput(format!(
            "nothing to simulate: the scene has {nothing}"
        ))
        .into());
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

fn vec_d<const D: usize>(v: &Option<Vec<f64>>) -> [f64; D] {
    std::array::from_fn(|k| v.as_ref().and_then(|v| v.get(k)).copied().unwrap_or(0.0))
}
