//! Reintegration tracking on the GPU: the method of [`eddies::reint`], step for step, in WGSL.
//!
//! A scene is built and filled on the host as a [`ReintSim`] (its checks, obstacles, emitters and sinks are
//! the library's); [`ReintGpu::new`] takes it over. A step is one submission of up to six kernels, one file
//! each: [`emit`] (sources and sinks), [`forces`] (density, SPH forces and the advance, fused; away from
//! obstacles also the bookkeeping that makes mass exact), [`obstacles`] and [`normalise`] (that bookkeeping
//! next to obstacles), [`gather`] (the reintegration) and [`reduce`] (the step's diagnostics into a log on
//! the device). Nothing is read back per step: the log and the state come
//! back once per frame, in [`Simulation::complete_records`].
//!
//! GPU memory per cell: the state twice over (positions and velocities, then masses, D + D + S values each,
//! as the gather must not overwrite what its neighbours still read) and the S deficits of the bookkeeping:
//! 44 bytes in 2D and 60 in 3D with one substance, plus a quarter byte of per-workgroup sums and a fixed
//! 128 KiB log. With obstacles, each box's scale and the fluid mask add 8 bytes.
//!
//! Every kernel writes only its own cell's values, integer totals use integer arithmetic and every float sum
//! has a fixed order: a run repeats bit for bit on one device.

mod emit;
mod forces;
mod gather;
mod impulse;
mod normalise;
mod obstacles;
mod probe;
mod reduce;
mod saved;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use eddies::diag::{Quantity, StageTimer, StepRecord};
use eddies::reint::{DeviceScene, Eos, InteriorState, ReintSaved, ReintSim, StepConstants};
use eddies::{Advance, Description, Field, SavedState, SimError, Simulation};

use crate::device::{groups, Gpu, GpuError, Kernel, PassTimer};

/// The WGSL every kernel starts with, after the prelude.
const COMMON: &str = include_str!("common.wgsl");

/// The word layout (u32 words) of a workgroup's partial sums and of a step's log entry, written into the
/// kernels' prelude so that both sides read it from here: the quanta of substance k as a 64-bit pair at 2k
/// (low) and 2k + 1 (high), then the f32 bits of kinetic energy, momentum and largest squared speed, and the
/// count of speed-limited velocity components. A log entry adds, from `LOG_EXCHANGE`, the running totals of
/// the quanta emitters have put in (pairs per substance) and, `EXCHANGE_REMOVED` words on, those sinks have
/// taken out.
mod words {
    pub const KINETIC: usize = 8;
    pub const MOMENTUM: usize = 9;
    pub const SPEED2: usize = 12;
    pub const CLAMPS: usize = 13;
    /// Words that are summed.
    pub const SUM: usize = 14;
    /// Words per workgroup.
    pub const PARTIAL: usize = 16;
    pub const LOG: usize = 32;
    pub const LOG_EXCHANGE: usize = 16;
    pub const EXCHANGE_REMOVED: usize = 8;
}

/// Steps the device log holds: when it is full the host reads it, so this bounds how far apart read-backs
/// may be.
const LOG_STEPS: usize = 1024;

/// The step's constants as the kernels read them (`Params` in `common.wgsl`, word for word).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, bytemuck::Pod, bytemuck::Zeroable)]
struct Params {
    n: [u32; 3],
    cells: u32,
    dt: f32,
    r: f32,
    reach: f32,
    vmax: f32,
    c2: f32,
    gamma: f32,
    tension: u32,
    law: u32,
    rho_min: f32,
    inv_vol: f32,
    inv_qpr: f32,
    kh: f32,
    kp: f32,
    kv: f32,
    closed: u32,
    pad0: u32,
    gravity: [f32; 3],
    forces: u32,
    unit: [f32; 4],
    slot: u32,
    near_count: u32,
    partials: u32,
    pad: u32,
}

/// Invocations per workgroup of the kernels that run over a list (emitter cells, cells next to obstacles).
const LIST_WORKGROUP: u32 = 64;

/// The WGSL constants of a variant, then `common.wgsl`: dimension, substances, whether there are obstacles
/// (then each box's scale and the fluid mask are stored), and the workgroups' shapes (written here once,
/// for both sides).
fn prelude(dim: usize, substances: usize, obstacles_present: bool) -> String {
    let [x, y, z] = workgroup(dim);
    format!(
        "const D: u32 = {dim}u;\nconst S: u32 = {substances}u;\nconst OBSTACLES: bool = {obstacles_present};\n\
         const WG_X: u32 = {x}u;\nconst WG_Y: u32 = {y}u;\nconst WG_Z: u32 = {z}u;\n\
         const WG_LIST: u32 = {LIST_WORKGROUP}u;\n\
         const P_KINETIC: u32 = {}u;\nconst P_MOMENTUM: u32 = {}u;\nconst P_SPEED2: u32 = {}u;\n\
         const P_CLAMPS: u32 = {}u;\nconst SUM_WORDS: u32 = {}u;\nconst P_WORDS: u32 = {}u;\n\
         const LOG_WORDS: u32 = {}u;\nconst LOG_EXCHANGE: u32 = {}u;\nconst EXCHANGE_REMOVED: u32 = {}u;\n\
         {COMMON}",
        words::KINETIC,
        words::MOMENTUM,
        words::SPEED2,
        words::CLAMPS,
        words::SUM,
        words::PARTIAL,
        words::LOG,
        words::LOG_EXCHANGE,
        words::EXCHANGE_REMOVED,
    )
}

/// Cells per workgroup along each axis: 16 × 16 tiles in 2D, 8 × 8 × 4 blocks in 3D (256 invocations).
fn workgroup(dim: usize) -> [u32; 3] {
    if dim == 2 {
        [16, 16, 1]
    } else {
        [8, 8, 4]
    }
}

/// The device buffers of a simulation.
struct Buffers {
    params: wgpu::Buffer,
    /// Positions then velocities of the state (D arrays each).
    motion: wgpu::Buffer,
    /// The advanced particles, laid out as `motion`.
    advanced: wgpu::Buffer,
    /// Masses, S arrays each: the state's and the next step's, alternating.
    mass: [wgpu::Buffer; 2],
    /// The bookkeeping: with obstacles each box's scale, then S deficits; without, the deficits alone.
    book: wgpu::Buffer,
    fluid: wgpu::Buffer,
    near: wgpu::Buffer,
    partials: wgpu::Buffer,
    log: wgpu::Buffer,
    /// Quanta put in and taken out so far, 64-bit pairs per substance.
    exchange: wgpu::Buffer,
}

/// One step's diagnostics as the device logged them.
#[derive(Clone, Copy, Debug)]
struct LogEntry {
    quanta: [u64; 4],
    kinetic: f32,
    momentum: [f32; 3],
    speed2: f32,
    clamps: u32,
    injected: [u64; 4],
    removed: [u64; 4],
}

impl LogEntry {
    fn parse(entry: &[u32]) -> Self {
        let pair = |at: usize| entry[at] as u64 | (entry[at + 1] as u64) << 32;
        let f = |at: usize| f32::from_bits(entry[at]);
        let exchange = words::LOG_EXCHANGE;
        Self {
            quanta: std::array::from_fn(|k| pair(2 * k)),
            kinetic: f(words::KINETIC),
            momentum: std::array::from_fn(|a| f(words::MOMENTUM + a)),
            speed2: f(words::SPEED2),
            clamps: entry[words::CLAMPS],
            injected: std::array::from_fn(|k| pair(exchange + 2 * k)),
            removed: std::array::from_fn(|k| pair(exchange + words::EXCHANGE_REMOVED + 2 * k)),
        }
    }
}

/// A step taken whose diagnostics are still on the device.
#[derive(Clone, Copy, Debug)]
struct Pending {
    step: u64,
    dt: f64,
    slot: u32,
}

/// A reintegration-tracking simulation in `D` dimensions on the GPU.
pub struct ReintGpu<const D: usize> {
    gpu: Arc<Gpu>,
    /// The host simulation the scene was built as: constants, descriptions, and the state as of `synced`,
    /// for fields and particles.
    host: Mutex<ReintSim<D>>,
    /// The step whose state the host holds, or `None` if the device has moved on.
    synced: Mutex<Option<u64>>,
    constants: StepConstants<D>,
    n: [u32; 3],
    cells: u32,
    buffers: Buffers,
    /// Which of the two mass buffers holds the state.
    current: usize,
    forces: Kernel,
    /// The obstacle pass and its cell count, with obstacles only.
    obstacles: Option<(Kernel, u32)>,
    /// The bookkeeping pass, next to obstacles only.
    normalise: Option<Kernel>,
    gather: Kernel,
    reduce: Kernel,
    emit: emit::Emit<D>,
    impulse: impulse::Impulse,
    partials: u32,
    time: f64,
    steps: u64,
    /// Largest particle speed of the latest step whose speed came back (cells/s), for the time step.
    max_speed: f32,
    pending: VecDeque<Pending>,
    /// Entries read back whose records have not been completed yet.
    read: VecDeque<(Pending, LogEntry)>,
    probe: probe::SpeedProbe,
}

impl<const D: usize> ReintGpu<D> {
    /// Takes over `host`, a simulation built and filled on the host (or run there for a while: the device
    /// goes on from its time and step count), and uploads it to `gpu`.
    pub fn new(gpu: Arc<Gpu>, host: ReintSim<D>) -> Result<Self, GpuError> {
        let scene: DeviceScene<D> = host.device_scene();
        let substances = scene.state.mass.len();
        let cells = scene.state.mass[0].len();
        let n: [u32; 3] =
            std::array::from_fn(|a| if a < D { scene.resolution[a] as u32 } else { 1 });
        let f = 4u64;
        let motion_bytes = 2 * D as u64 * cells as u64 * f;
        gpu.check_binding("the particle state", motion_bytes)?;
        // The bookkeeping holds at most one array more than the masses.
        gpu.check_binding(
            "the bookkeeping",
            (1 + substances as u64) * cells as u64 * f,
        )?;
        let wg = workgroup(D);
        let grid = groups(n, wg);
        let partials = grid.iter().product::<u32>();
        let motion: Vec<f32> = scene
            .state
            .pos
            .iter()
            .chain(&scene.state.vel)
            .flatten()
            .copied()
            .collect();
        let mass: Vec<f32> = scene.state.mass.iter().flatten().copied().collect();
        let near: Vec<u32> = scene
            .near_solid
            .iter()
            .flat_map(|c| {
                let normal: [f32; 3] =
                    std::array::from_fn(|a| if a < D { c.normal[a] } else { 0.0 });
                [
                    c.cell,
                    c.distance.to_bits(),
                    normal[0].to_bits(),
                    normal[1].to_bits(),
                    normal[2].to_bits(),
                ]
            })
            .collect();
        // Away from obstacles the gather recomputes each box's scale (a product of per-axis sums) rather
        // than read it: 4 bytes per cell less.
        let obstacles_present = scene.fluid.is_some();
        let buffers = gpu.allocating("the simulation's buffers", || Buffers {
            params: gpu.uniform::<Params>("params"),
            advanced: gpu.buffer("advanced", motion_bytes),
            motion: gpu.buffer_with("motion", &motion),
            mass: [
                gpu.buffer_with("mass 0", &mass),
                gpu.buffer("mass 1", mass.len() as u64 * f),
            ],
            book: gpu.buffer(
                "book",
                (obstacles_present as u64 + substances as u64) * cells as u64 * f,
            ),
            fluid: match &scene.fluid {
                Some(fl) => gpu.buffer_with("fluid", fl),
                None => gpu.buffer("fluid", 4),
            },
            near: gpu.buffer_with("near solid", &near),
            partials: gpu.buffer("partials", (partials as usize * words::PARTIAL * 4) as u64),
            log: gpu.buffer("log", (LOG_STEPS * words::LOG * 4) as u64),
            exchange: gpu.buffer("exchange", (2 * words::EXCHANGE_REMOVED * 4) as u64),
        })?;
        let prelude = prelude(D, substances, obstacles_present);
        let variant = format!(
            "{D}d{substances}{}",
            if obstacles_present { "o" } else { "" }
        );
        let (forces, obstacles, normalise, gather, reduce, emit, impulse) =
            gpu.validating("the kernels", || {
                let forces = forces::kernel(&gpu, &prelude, &variant, &buffers, grid)?;
                let obstacles = (!scene.near_solid.is_empty())
                    .then(|| {
                        obstacles::kernel(
                            &gpu,
                            &prelude,
                            &variant,
                            &buffers,
                            scene.near_solid.len() as u32,
                        )
                        .map(|k| (k, scene.near_solid.len() as u32))
                    })
                    .transpose()?;
                // Away from obstacles the bookkeeping is done by `forces`.
                let normalise = obstacles_present
                    .then(|| normalise::kernel(&gpu, &prelude, &variant, &buffers, grid))
                    .transpose()?;
                let gather = gather::kernel(&gpu, &prelude, &variant, &buffers, grid)?;
                let reduce = reduce::kernel(&gpu, &prelude, &variant, &buffers)?;
                let emit = emit::Emit::new(
                    &gpu,
                    &prelude,
                    &variant,
                    &buffers,
                    &scene.emitters,
                    &scene.sinks,
                )?;
                let impulse = impulse::Impulse::new(&gpu, &prelude, &variant, &buffers, grid)?;
                Ok((forces, obstacles, normalise, gather, reduce, emit, impulse))
            })?;
        gpu.finish()?;
        let (time, steps) = (host.time(), host.steps());
        let sim = Self {
            constants: scene.constants,
            max_speed: scene.max_speed,
            host: Mutex::new(host),
            synced: Mutex::new(Some(steps)),
            n,
            cells: cells as u32,
            current: 0,
            forces,
            obstacles,
            normalise,
            gather,
            reduce,
            emit,
            impulse,
            partials,
            time,
            steps,
            pending: VecDeque::new(),
            read: VecDeque::new(),
            probe: probe::SpeedProbe::new(&gpu),
            buffers,
            gpu,
        };
        // The grid's size for kernels run between steps (`apply_impulse`); each step rewrites the rest.
        sim.gpu
            .write(&sim.buffers.params, &[sim.params(sim.max_dt(0.5), 0)]);
        Ok(sim)
    }

    /// The device this simulation runs on.
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    fn params(&self, dt: f64, slot: u32) -> Params {
        let c = &self.constants;
        let r = c.diffusion_radius;
        let dt = dt as f32;
        Params {
            n: self.n,
            cells: self.cells,
            dt,
            r,
            reach: 1.5 - r,
            vmax: eddies::reint::speed_limit(dt, r),
            c2: c.c2,
            gamma: c.gamma,
            tension: c.tension as u32,
            law: match c.eos {
                Eos::IdealGas => 0,
                Eos::Tait => 1,
                Eos::Quadratic => 2,
            },
            rho_min: c.rho_min,
            inv_vol: c.inv_cell_volume,
            inv_qpr: c.inv_quanta_per_rest,
            kh: c.kernel_h,
            kp: c.k_pressure,
            kv: c.k_viscosity,
            closed: c.closed as u32,
            pad0: 0,
            gravity: std::array::from_fn(|a| if a < D { c.gravity[a] } else { 0.0 }),
            forces: c.forces as u32,
            unit: std::array::from_fn(|k| c.unit.get(k).map_or(0.0, |&u| u as f32)),
            slot,
            near_count: self.obstacles.as_ref().map_or(0, |o| o.1),
            partials: self.partials,
            pad: 0,
        }
    }

    fn device_error(&self, e: GpuError) -> SimError {
        SimError::Device {
            step: self.steps,
            detail: e.to_string(),
        }
    }

    /// Reads the log entries of the steps taken since the last read.
    fn read_log(&mut self) -> Result<(), GpuError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let bytes =
            self.gpu
                .read(&[(&self.buffers.log, 0, (LOG_STEPS * words::LOG * 4) as u64)])?;
        let log: &[u32] = bytemuck::cast_slice(&bytes[0]);
        for p in self.pending.drain(..) {
            let at = p.slot as usize * words::LOG;
            let entry = LogEntry::parse(&log[at..at + words::LOG]);
            self.read.push_back((p, entry));
        }
        if let Some((p, e)) = self.read.back() {
            self.max_speed = e.speed2.max(0.0).sqrt();
            self.probe.seen(p.step);
        }
        Ok(())
    }

    /// Reads the state back into the host simulation, unless it holds this step's already.
    fn sync_host(&self) -> Result<(), GpuError> {
        let mut synced = self.synced.lock().unwrap();
        if *synced == Some(self.steps) {
            return Ok(());
        }
        let cells = self.cells as u64 * 4;
        let s = self.constants.unit.len();
        let bytes = self.gpu.read(&[
            (&self.buffers.motion, 0, 2 * D as u64 * cells),
            (&self.buffers.mass[self.current], 0, s as u64 * cells),
        ])?;
        let motion: &[f32] = bytemuck::cast_slice(&bytes[0]);
        let mass: &[f32] = bytemuck::cast_slice(&bytes[1]);
        let n = self.cells as usize;
        let state = InteriorState {
            pos: std::array::from_fn(|a| motion[a * n..(a + 1) * n].to_vec()),
            vel: std::array::from_fn(|a| motion[(D + a) * n..(D + a + 1) * n].to_vec()),
            mass: (0..s).map(|k| mass[k * n..(k + 1) * n].to_vec()).collect(),
        };
        self.host.lock().unwrap().set_interior_state(&state);
        *synced = Some(self.steps);
        Ok(())
    }

    /// Runs `f` on the host simulation holding the present state (read back if the device moved on).
    pub fn with_host<R>(&self, f: impl FnOnce(&ReintSim<D>) -> R) -> Result<R, GpuError> {
        self.sync_host()?;
        Ok(f(&self.host.lock().unwrap()))
    }

    /// Total mass of each substance (kg), from the state on the device.
    pub fn substance_masses(&self) -> Result<Vec<f64>, GpuError> {
        self.with_host(|h| h.substance_masses())
    }

    /// A 64-bit hash of the exact bits of the state (the CPU backend's [`ReintSim::checksum`]).
    pub fn checksum(&self) -> Result<u64, GpuError> {
        self.with_host(|h| h.checksum())
    }

    /// The state over the interior cells, in the method's units (cells, cells/s, quanta).
    pub fn interior_state(&self) -> Result<InteriorState<D>, GpuError> {
        self.with_host(|h| h.interior_state())
    }

    /// Adds `velocity` (m/s) to the fluid within `radius` (m) of `center` (m), weighted by the smooth falloff
    /// `(1 − (d/radius)²)²`, as [`ReintSim::apply_impulse`].
    pub fn apply_impulse(&mut self, center: [f64; D], radius: f64, velocity: [f32; D]) {
        let h = self.host.lock().unwrap().config().cell_size;
        let centre: [f32; 3] =
            std::array::from_fn(|a| if a < D { (center[a] / h) as f32 } else { 0.0 });
        let v: [f32; 3] = std::array::from_fn(|a| if a < D { velocity[a] / h as f32 } else { 0.0 });
        // The kernel reads only the grid's size from the parameters, which every write holds.
        self.impulse.run(&self.gpu, centre, v, (radius / h) as f32);
        *self.synced.lock().unwrap() = None;
    }

    /// Encodes and submits one step of `dt` seconds whose diagnostics go to log slot `slot`, its passes
    /// timed by `timer` when given (forces, obstacles, normalise, gather, reduce: [`PASSES`]), and the
    /// step's largest speed copied to a free speed probe.
    fn submit(&mut self, dt: f64, slot: u32, timer: Option<&PassTimer>) {
        self.gpu
            .write(&self.buffers.params, &[self.params(dt, slot)]);
        let cur = self.current;
        let mut encoder = self
            .gpu
            .device()
            .create_command_encoder(&Default::default());
        let ts = |k: u32| timer.map(|t| t.writes(k));
        self.emit
            .encode(&self.gpu, &mut encoder, cur, self.time, dt);
        self.forces.encode(&mut encoder, cur, ts(0));
        if let Some((o, _)) = &self.obstacles {
            o.encode(&mut encoder, cur, ts(1));
        }
        if let Some(n) = &self.normalise {
            n.encode(&mut encoder, cur, ts(2));
        }
        self.gather.encode(&mut encoder, cur, ts(3));
        self.reduce.encode(&mut encoder, 0, ts(4));
        if let Some(t) = timer {
            t.resolve(&mut encoder);
        }
        let probe = self
            .probe
            .record(&mut encoder, &self.buffers.log, slot, self.steps + 1);
        self.gpu.queue().submit([encoder.finish()]);
        if let Some(k) = probe {
            self.probe.map(k);
        }
        self.current = 1 - cur;
    }

    /// Takes one step: submits it and notes its log slot.
    fn take_step(&mut self, dt: f64, timer: Option<&PassTimer>) -> Result<(), GpuError> {
        self.gpu.take_error()?;
        if self.pending.len() == LOG_STEPS {
            self.read_log()?;
        }
        let slot = (self.steps % LOG_STEPS as u64) as u32;
        self.submit(dt, slot, timer);
        if let Some(speed) = self.probe.latest(&self.gpu) {
            self.max_speed = speed;
        }
        self.time += dt;
        self.steps += 1;
        *self.synced.lock().unwrap() = None;
        self.pending.push_back(Pending {
            step: self.steps,
            dt,
            slot,
        });
        Ok(())
    }

    /// Takes one step of `dt` seconds with each kernel timed on the device, and returns the kernels' times
    /// (ms) in [`PASSES`] order, or `None` where the adapter has no timestamp queries (the step is taken
    /// all the same).
    pub fn profile_step(&mut self, dt: f64) -> Result<Option<Vec<(&'static str, f64)>>, GpuError> {
        let timer = self.gpu.pass_timer(PASSES.len() as u32);
        self.take_step(dt, timer.as_ref())?;
        let Some(timer) = timer else {
            return Ok(None);
        };
        let ms = timer.durations_ms(&self.gpu)?;
        Ok(Some(
            PASSES
                .iter()
                .zip(ms)
                .filter(|(name, _)| match **name {
                    "obstacles" => self.obstacles.is_some(),
                    "normalise" => self.normalise.is_some(),
                    _ => true,
                })
                .map(|(name, ms)| (*name, ms))
                .collect(),
        ))
    }

    /// Waits until the device has finished every step submitted.
    pub fn finish(&self) -> Result<(), GpuError> {
        self.gpu.finish()
    }
}

/// The timed kernels of a step, in order.
pub const PASSES: [&str; 5] = ["forces", "obstacles", "normalise", "gather", "reduce"];

impl<const D: usize> Simulation for ReintGpu<D> {
    fn describe(&self) -> Description {
        self.host.lock().unwrap().describe()
    }

    fn dim(&self) -> usize {
        D
    }

    fn resolution(&self) -> [usize; 3] {
        self.n.map(|n| n as usize)
    }

    fn cell_size(&self) -> f64 {
        self.host.lock().unwrap().cell_size()
    }

    fn time(&self) -> f64 {
        self.time
    }

    fn steps(&self) -> u64 {
        self.steps
    }

    /// As the CPU backend's, with the fastest speed of the latest step whose speed probe has come back
    /// (the device runs a few steps ahead of the host, and nothing waits for it; the speed limit of the
    /// advance keeps every box within reach all the same, and reports it as a clamp).
    fn max_dt(&self, cfl: f64) -> f64 {
        eddies::reint::max_dt(&self.host.lock().unwrap(), self.max_speed, cfl)
    }

    /// Submits the step; its kernels run on the device while the host goes on. The record's `wall_ms` is
    /// the time to submit, its stage times are empty (the kernels' times: `eddies bench --backend gpu`),
    /// and its quantities and clamps come with the frame's read-back ([`Simulation::complete_records`]).
    fn advance(&mut self, dt: f64, _timer: &mut StageTimer) -> Result<Advance, SimError> {
        self.take_step(dt, None).map_err(|e| self.device_error(e))?;
        Ok(Advance {
            substeps: 1,
            quantities: Vec::new(),
            clamps: Vec::new(),
        })
    }

    /// Reads the state back (waiting for the device), with the emitters' and sinks' totals.
    fn save_state(&self) -> Result<SavedState, SimError> {
        let saved = self.saved().map_err(|e| self.device_error(e))?;
        Ok(saved.to_state())
    }

    fn restore_state(&mut self, state: &SavedState) -> Result<(), SimError> {
        let saved = ReintSaved::from_state(state, self.cells as usize, self.constants.unit.len())?;
        self.resume(&saved)
    }

    /// Reads the log of the steps since the last call and the state, with one wait: the per-frame read-back.
    fn complete_records(&mut self, records: &mut [StepRecord]) -> Result<(), SimError> {
        self.read_log().map_err(|e| self.device_error(e))?;
        self.sync_host().map_err(|e| self.device_error(e))?;
        let h = self.cell_size();
        let unit = self.constants.unit.clone();
        let s = unit.len();
        for rec in records.iter_mut() {
            // Entries of steps before these records (taken outside a frame's records) are dropped.
            while self.read.front().is_some_and(|(p, _)| p.step < rec.step) {
                self.read.pop_front();
            }
            let Some(&(p, e)) = self.read.front().filter(|(p, _)| p.step == rec.step) else {
                continue;
            };
            self.read.pop_front();
            let masses: Vec<f64> = (0..s).map(|k| e.quanta[k] as f64 * unit[k]).collect();
            let injected: f64 = (0..s).map(|k| e.injected[k] as f64 * unit[k]).sum();
            let removed: f64 = (0..s).map(|k| e.removed[k] as f64 * unit[k]).sum();
            let max_speed = (e.speed2.max(0.0) as f64).sqrt();
            if !(e.kinetic.is_finite() && e.speed2.is_finite()) {
                return Err(SimError::Diverged {
                    stage: "reintegrate",
                    step: p.step,
                    detail: format!("kinetic energy {}, max speed {max_speed}", e.kinetic),
                });
            }
            rec.quantities = vec![
                ("mass", Quantity::Scalar(masses.iter().sum())),
                ("substance_mass", Quantity::Vector(masses)),
                ("mass_injected", Quantity::Scalar(injected)),
                ("mass_removed", Quantity::Scalar(removed)),
                ("kinetic_energy", Quantity::Scalar(e.kinetic as f64 * h * h)),
                (
                    "momentum",
                    Quantity::Vector(e.momentum[..D].iter().map(|&m| m as f64 * h).collect()),
                ),
                ("max_speed", Quantity::Scalar(max_speed * h)),
                ("cfl", Quantity::Scalar(max_speed * p.dt)),
            ];
            rec.clamps = eddies::reint::speed_clamps(
                e.clamps as u64,
                p.dt,
                self.constants.diffusion_radius,
                h,
            );
        }
        self.read.clear();
        Ok(())
    }

    fn field(&self, name: &str) -> Option<Field> {
        self.sync_host().ok()?;
        self.host.lock().unwrap().field(name)
    }

    fn particle_positions(&self) -> Vec<f32> {
        match self.sync_host() {
            Ok(()) => self.host.lock().unwrap().particle_positions(),
            Err(_) => Vec::new(),
        }
    }

    fn particle_values(&self, name: &str) -> Option<Vec<f32>> {
        self.sync_host().ok()?;
        self.host.lock().unwrap().particle_values(name)
    }

    fn substance_colors(&self) -> Vec<[f32; 3]> {
        self.host.lock().unwrap().substance_colors()
    }

    /// Bytes of device memory the simulation holds.
    fn apply_impulse(
        &mut self,
        center: &[f64],
        radius: f64,
        velocity: &[f64],
    ) -> Result<(), SimError> {
        let (c, v) = eddies::impulse_vectors::<D>(center, velocity)?;
        ReintGpu::apply_impulse(self, c, radius, v.map(|x| x as f32));
        Ok(())
    }

    fn memory_bytes(&self) -> usize {
        let b = &self.buffers;
        [
            &b.motion,
            &b.advanced,
            &b.mass[0],
            &b.mass[1],
            &b.book,
            &b.fluid,
            &b.near,
            &b.partials,
            &b.log,
            &b.exchange,
        ]
        .iter()
        .map(|x| x.size() as usize)
        .sum()
    }
}

/// Bytes of device memory per cell of a `dim`-dimensional simulation of `substances` substances, without
/// and with obstacles, not counting the per-workgroup sums and the log (see the module documentation).
pub fn bytes_per_cell(dim: usize, substances: usize, obstacles: bool) -> usize {
    4 * (2 * (2 * dim + substances) + substances + 2 * obstacles as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::validate_wgsl;

    /// Every kernel of every variant (2D and 3D, one to four substances, with and without obstacles) parses
    /// and validates, without a GPU: the shader translator's own checks, as wgpu runs them on a device.
    #[test]
    fn every_kernel_compiles_without_a_gpu() {
        let kernels = [
            ("emit", emit::SOURCE),
            ("forces", forces::SOURCE),
            ("obstacles", obstacles::SOURCE),
            ("normalise", normalise::SOURCE),
            ("gather", gather::SOURCE),
            ("reduce", reduce::SOURCE),
            ("impulse", impulse::SOURCE),
        ];
        for dim in [2, 3] {
            for substances in 1..=4 {
                for obstacles_present in [false, true] {
                    let prelude = prelude(dim, substances, obstacles_present);
                    for (name, source) in kernels {
                        let code = format!("{prelude}\n{source}");
                        let what = format!(
                            "{name}, {dim}D, {substances} substances, obstacles {obstacles_present}"
                        );
                        validate_wgsl(&code).unwrap_or_else(|e| panic!("{what}: {e}"));
                    }
                }
            }
        }
    }
}
