//! The device layer: adapter choice, the device and its error reporting, storage buffers, compute pipelines
//! built once and cached, timestamp queries where the adapter has them, and read-back.
//!
//! Kernels are WGSL files with a prelude of constants (the dimension, the substance count) prepended, so one
//! source serves every variant; each variant's pipeline is built the first time it is asked for.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rayon::prelude::*;

use wgpu::util::DeviceExt;

/// Environment variable naming the adapter to use: a case-insensitive part of its name (as `eddies info`
/// lists them).
pub const ADAPTER_VAR: &str = "EDDIES_GPU_ADAPTER";

/// What can go wrong with the device.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GpuError {
    /// No adapter that can run compute shaders was found.
    #[error("no GPU adapter found (looked for {looked_for}); run on the CPU with --backend cpu")]
    NoAdapter { looked_for: String },
    /// The adapter refused to open a device.
    #[error("the GPU adapter {adapter} could not open a device: {reason}")]
    DeviceRequest { adapter: String, reason: String },
    /// The device ran out of memory.
    #[error("the GPU ran out of memory: {0}")]
    OutOfMemory(String),
    /// The device was lost (driver reset, GPU removed, a kernel that ran too long).
    #[error("the GPU device was lost: {0}")]
    DeviceLost(String),
    /// A problem size the adapter's limits do not allow.
    #[error("{0}")]
    Limit(String),
    /// A validation or internal error of the GPU stack: a bug, reported as such.
    #[error("GPU error: {0}")]
    Internal(String),
}

/// One adapter, as listed by [`adapters`].
#[derive(Clone, Debug, PartialEq)]
pub struct AdapterSummary {
    pub name: String,
    pub backend: String,
    pub device_type: String,
    pub driver: String,
    /// Whether the adapter is a software rasteriser running on the CPU (Mesa's lavapipe, WARP,
    /// SwiftShader).
    pub software: bool,
}

impl std::fmt::Display for AdapterSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}, {}", self.name, self.backend, self.device_type)?;
        if !self.driver.is_empty() {
            write!(f, ", {}", self.driver)?;
        }
        write!(f, ")")
    }
}

fn summary(info: &wgpu::AdapterInfo) -> AdapterSummary {
    let driver = [info.driver.as_str(), info.driver_info.as_str()]
        .iter()
        .filter(|s| !s.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join(" ");
    AdapterSummary {
        name: info.name.clone(),
        backend: format!("{:?}", info.backend),
        device_type: match info.device_type {
            wgpu::DeviceType::DiscreteGpu => "discrete GPU",
            wgpu::DeviceType::IntegratedGpu => "integrated GPU",
            wgpu::DeviceType::VirtualGpu => "virtual GPU",
            wgpu::DeviceType::Cpu => "software (CPU)",
            wgpu::DeviceType::Other => "other",
        }
        .to_string(),
        driver,
        software: info.device_type == wgpu::DeviceType::Cpu,
    }
}

fn instance() -> wgpu::Instance {
    wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env())
}

/// Adapters that can run compute shaders, best first (discrete, integrated, virtual, software).
fn ranked(instance: &wgpu::Instance) -> Vec<wgpu::Adapter> {
    let mut found: Vec<wgpu::Adapter> =
        pollster::block_on(instance.enumerate_adapters(wgpu::Backends::all()))
            .into_iter()
            .filter(|a| {
                a.get_downlevel_capabilities()
                    .flags
                    .contains(wgpu::DownlevelFlags::COMPUTE_SHADERS)
            })
            .collect();
    let rank = |a: &wgpu::Adapter| match a.get_info().device_type {
        wgpu::DeviceType::DiscreteGpu => 0,
        wgpu::DeviceType::IntegratedGpu => 1,
        wgpu::DeviceType::VirtualGpu => 2,
        wgpu::DeviceType::Cpu => 3,
        wgpu::DeviceType::Other => 4,
    };
    found.sort_by_key(rank);
    found
}

/// The adapters found on this machine, best first: the first is the one a run uses unless
/// [`ADAPTER_VAR`] names another.
pub fn adapters() -> Vec<AdapterSummary> {
    ranked(&instance())
        .iter()
        .map(|a| summary(&a.get_info()))
        .collect()
}

/// The first error the device reported, kept until a caller asks.
type ErrorSlot = Arc<Mutex<Option<GpuError>>>;

/// An open device with its queue and the pipelines built on it.
pub struct Gpu {
    device: wgpu::Device,
    queue: wgpu::Queue,
    info: AdapterSummary,
    limits: wgpu::Limits,
    timestamps: bool,
    f64: bool,
    timestamp_period_ns: f32,
    errors: ErrorSlot,
    pipelines: Mutex<HashMap<String, Arc<wgpu::ComputePipeline>>>,
    staging: Mutex<Staging>,
    /// Device time per kernel, where [`PROFILE_VAR`] asks for it and the adapter has timestamps.
    profile: Option<Mutex<Profile>>,
}

/// The variable that, set to `1`, times every launch of [`Gpu::submit_launches`] on the device (each in a
/// pass of its own, waited for): `eddies bench` then prints where the device's time went.
pub const PROFILE_VAR: &str = "EDDIES_GPU_PROFILE";

/// Launches and device time (ms) per kernel name and workgroup count.
type Profile = std::collections::BTreeMap<String, (u64, f64)>;

/// Writes of at least this many bytes go through the device's kept staging buffer (see [`Staging`]).
const STAGED_WRITE: usize = 1 << 20;

/// Copies between host and staging memory of this many bytes or more are split across the CPU's threads.
const PARALLEL_COPY: usize = 4 << 20;

/// Host-visible buffers kept for large transfers, one each way, grown as needed and never shrunk. On a
/// hardware GPU, allocating (and pinning) mappable memory for each transfer cost several times the copy:
/// moving 4M FLIP particles each way took 290 ms a step on an H200 with a fresh staging buffer per
/// transfer.
#[derive(Default)]
struct Staging {
    up: Option<wgpu::Buffer>,
    down: Option<wgpu::Buffer>,
}

/// `slot`'s buffer, replaced by a larger one (`usage`, at least `size` bytes) where it is too small.
fn reserve<'a>(
    device: &wgpu::Device,
    slot: &'a mut Option<wgpu::Buffer>,
    size: u64,
    usage: wgpu::BufferUsages,
) -> &'a wgpu::Buffer {
    if slot.as_ref().is_none_or(|b| b.size() < size) {
        *slot = Some(
            device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("staging"),
                // Grown by at least half again, so that slowly growing transfers do not reallocate each time.
                size: size
                    .max(slot.as_ref().map_or(0, |b| b.size() * 3 / 2))
                    .next_multiple_of(1 << 16),
                usage,
                mapped_at_creation: false,
            }),
        );
    }
    slot.as_ref().expect("reserved")
}

/// Copies `src` into `dst` (equal lengths), on all the CPU's threads where it is large.
pub(crate) fn copy_bytes(dst: &mut [u8], src: &[u8]) {
    if src.len() < PARALLEL_COPY {
        dst.copy_from_slice(src);
        return;
    }
    let chunk = PARALLEL_COPY / 4;
    dst.par_chunks_mut(chunk)
        .zip(src.par_chunks(chunk))
        .for_each(|(d, s)| d.copy_from_slice(s));
}

impl std::fmt::Debug for Gpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gpu").field("adapter", &self.info).finish()
    }
}

impl Gpu {
    /// Opens the best adapter, or the one [`ADAPTER_VAR`] names.
    pub fn new() -> Result<Self, GpuError> {
        let instance = instance();
        let wanted = std::env::var(ADAPTER_VAR)
            .ok()
            .filter(|s| !s.trim().is_empty());
        let candidates = ranked(&instance);
        let adapter = match &wanted {
            Some(name) => {
                let name = name.to_lowercase();
                candidates
                    .into_iter()
                    .find(|a| a.get_info().name.to_lowercase().contains(&name))
            }
            None => candidates.into_iter().next(),
        };
        let Some(adapter) = adapter else {
            let looked_for = match wanted {
                Some(name) => format!("an adapter whose name contains \"{name}\" ({ADAPTER_VAR})"),
                None => "Vulkan, Metal or DirectX 12 adapters with compute shaders".into(),
            };
            return Err(GpuError::NoAdapter { looked_for });
        };
        let info = summary(&adapter.get_info());
        let timestamps = adapter.features().contains(wgpu::Features::TIMESTAMP_QUERY);
        // Double precision where the adapter has it: the pressure solve's Krylov vectors need it.
        let f64 = adapter.features().contains(wgpu::Features::SHADER_F64);
        let mut required_features = wgpu::Features::empty();
        if timestamps {
            required_features |= wgpu::Features::TIMESTAMP_QUERY;
        }
        if f64 {
            required_features |= wgpu::Features::SHADER_F64;
        }
        // The adapter's own limits: grids of hundreds of millions of cells need its largest buffers.
        let limits = adapter.limits();
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("eddies"),
            required_features,
            required_limits: limits.clone(),
            memory_hints: wgpu::MemoryHints::Performance,
            ..Default::default()
        }))
        .map_err(|e| GpuError::DeviceRequest {
            adapter: info.name.clone(),
            reason: e.to_string(),
        })?;
        let errors: ErrorSlot = Arc::new(Mutex::new(None));
        let slot = errors.clone();
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            let err = match e {
                wgpu::Error::OutOfMemory { .. } => GpuError::OutOfMemory(e.to_string()),
                other => GpuError::Internal(other.to_string()),
            };
            slot.lock().unwrap().get_or_insert(err);
        }));
        let slot = errors.clone();
        device.set_device_lost_callback(move |reason, message| {
            if reason != wgpu::DeviceLostReason::Destroyed {
                slot.lock()
                    .unwrap()
                    .get_or_insert(GpuError::DeviceLost(message));
            }
        });
        let timestamp_period_ns = queue.get_timestamp_period();
        Ok(Self {
            device,
            queue,
            info,
            limits,
            timestamps,
            f64,
            timestamp_period_ns,
            errors,
            pipelines: Mutex::new(HashMap::new()),
            staging: Mutex::new(Staging::default()),
            profile: (timestamps && std::env::var(PROFILE_VAR).is_ok_and(|v| v == "1"))
                .then(|| Mutex::new(Profile::new())),
        })
    }

    /// The adapter in use.
    pub fn adapter(&self) -> &AdapterSummary {
        &self.info
    }

    /// Whether kernels can be timed on the device.
    pub fn has_timestamps(&self) -> bool {
        self.timestamps
    }

    /// The device's limits (the adapter's own).
    pub fn limits(&self) -> &wgpu::Limits {
        &self.limits
    }

    /// Whether kernels can compute in double precision (`SHADER_F64`).
    pub fn has_f64(&self) -> bool {
        self.f64
    }

    /// The wgpu device, for kernels outside this crate.
    pub fn device(&self) -> &wgpu::Device {
        &self.device
    }

    /// The device's queue.
    pub fn queue(&self) -> &wgpu::Queue {
        &self.queue
    }

    /// The first error the device reported since the last call, if any.
    pub fn take_error(&self) -> Result<(), GpuError> {
        match self.errors.lock().unwrap().take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Refuses a storage binding larger than the adapter allows, naming what it is for.
    pub fn check_binding(&self, what: &str, bytes: u64) -> Result<(), GpuError> {
        self.check_size(
            what,
            bytes,
            self.limits
                .max_storage_buffer_binding_size
                .min(self.limits.max_buffer_size),
        )
    }

    /// Refuses `bytes` above `max`, naming what they are for.
    fn check_size(&self, what: &str, bytes: u64, max: u64) -> Result<(), GpuError> {
        if bytes > max {
            return Err(GpuError::Limit(format!(
                "{what} needs a GPU buffer of {bytes} bytes; {} allows at most {max}: choose a smaller grid",
                self.info.name
            )));
        }
        Ok(())
    }

    /// A storage buffer of `bytes` zero bytes.
    pub fn buffer(&self, label: &str, bytes: u64) -> wgpu::Buffer {
        self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: bytes.max(4).next_multiple_of(4),
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_SRC
                | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        })
    }

    /// A storage buffer holding `data` (at least one element's worth of bytes).
    pub fn buffer_with<T: bytemuck::Pod>(&self, label: &str, data: &[T]) -> wgpu::Buffer {
        if data.is_empty() {
            return self.buffer(label, 4);
        }
        self.device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some(label),
                contents: bytemuck::cast_slice(data),
                usage: wgpu::BufferUsages::STORAGE
                    | wgpu::BufferUsages::COPY_SRC
                    | wgpu::BufferUsages::COPY_DST,
            })
    }

    /// A uniform buffer of `T`, written with [`Gpu::write`].
    pub fn uniform<T: bytemuck::Pod>(&self, label: &str) -> wgpu::Buffer {
        self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: (std::mem::size_of::<T>() as u64).next_multiple_of(16),
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        })
    }

    /// Writes `data` at the start of `buffer` (ordered before the next submission). A device error is
    /// reported by the next [`Gpu::finish`].
    pub fn write<T: bytemuck::Pod>(&self, buffer: &wgpu::Buffer, data: &[T]) {
        self.write_at(buffer, 0, bytemuck::cast_slice(data));
    }

    /// Writes `bytes` into `buffer` at byte `offset` (both multiples of 4), ordered before the next
    /// submission: large writes through the staging buffer the device keeps, with a submission of their
    /// own; small ones through the queue. A device error is reported by the next [`Gpu::finish`].
    pub fn write_at(&self, buffer: &wgpu::Buffer, offset: u64, bytes: &[u8]) {
        if bytes.len() < STAGED_WRITE {
            if !bytes.is_empty() {
                self.queue.write_buffer(buffer, offset, bytes);
            }
            return;
        }
        if let Err(e) = self.write_staged(buffer, offset, bytes) {
            self.errors.lock().unwrap().get_or_insert(e);
        }
    }

    /// [`Gpu::write_at`] through the kept staging buffer: mapped (once the device is done with its last
    /// use), filled, and copied to `buffer` by a submission of its own.
    fn write_staged(
        &self,
        buffer: &wgpu::Buffer,
        offset: u64,
        bytes: &[u8],
    ) -> Result<(), GpuError> {
        let size = bytes.len() as u64;
        let mut staging = self.staging.lock().unwrap();
        let usage = wgpu::BufferUsages::MAP_WRITE | wgpu::BufferUsages::COPY_SRC;
        let up = reserve(&self.device, &mut staging.up, size, usage);
        let slice = up.slice(..size);
        let (tx, rx) = std::sync::mpsc::channel();
        slice.map_async(wgpu::MapMode::Write, move |r| {
            let _ = tx.send(r);
        });
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| GpuError::DeviceLost(e.to_string()))?;
        rx.recv()
            .map_err(|e| GpuError::DeviceLost(e.to_string()))?
            .map_err(|e| GpuError::DeviceLost(format!("staging for an upload failed: {e}")))?;
        // Disjoint views of the mapping, one per piece, filled on all the CPU's threads where it is large.
        let piece = if bytes.len() < PARALLEL_COPY {
            bytes.len()
        } else {
            PARALLEL_COPY / 4
        };
        let views = (0..size)
            .step_by(piece)
            .map(|at| {
                up.slice(at..(at + piece as u64).min(size))
                    .get_mapped_range_mut()
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| GpuError::Internal(e.to_string()))?;
        views
            .into_par_iter()
            .zip(bytes.par_chunks(piece))
            .for_each(|(mut view, part)| view.copy_from_slice(part));
        up.unmap();
        let mut encoder = self.device.create_command_encoder(&Default::default());
        encoder.copy_buffer_to_buffer(up, 0, buffer, offset, size);
        self.queue.submit([encoder.finish()]);
        Ok(())
    }

    /// The pipeline of `source` (a WGSL file whose entry point is `main`) with `prelude` prepended, built
    /// the first time it is asked for and cached under `key`.
    pub fn pipeline(
        &self,
        key: &str,
        prelude: &str,
        source: &str,
    ) -> Result<Arc<wgpu::ComputePipeline>, GpuError> {
        let mut cache = self.pipelines.lock().unwrap();
        if let Some(p) = cache.get(key) {
            return Ok(p.clone());
        }
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let code = format!("{prelude}\n{source}");
        let module = self
            .device
            .create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(key),
                source: wgpu::ShaderSource::Wgsl(code.into()),
            });
        let pipeline = Arc::new(self.device.create_compute_pipeline(
            &wgpu::ComputePipelineDescriptor {
                label: Some(key),
                layout: None,
                module: &module,
                entry_point: Some("main"),
                compilation_options: Default::default(),
                cache: None,
            },
        ));
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(GpuError::Internal(format!("kernel {key}: {e}")));
        }
        cache.insert(key.to_string(), pipeline.clone());
        Ok(pipeline)
    }

    /// Runs `f`, which creates device objects, and reports what the device found invalid in them as
    /// [`GpuError::Internal`] (a bug), to this caller rather than to whichever caller looks next.
    pub fn validating<T>(
        &self,
        what: &str,
        f: impl FnOnce() -> Result<T, GpuError>,
    ) -> Result<T, GpuError> {
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let value = f();
        match pollster::block_on(scope.pop()) {
            Some(e) => Err(GpuError::Internal(format!("{what}: {e}"))),
            None => value,
        }
    }

    /// Runs `f`, which allocates device memory, and reports running out of it as [`GpuError::OutOfMemory`].
    pub fn allocating<T>(&self, what: &str, f: impl FnOnce() -> T) -> Result<T, GpuError> {
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let value = f();
        match pollster::block_on(scope.pop()) {
            Some(e) => Err(GpuError::OutOfMemory(format!("{what}: {e}"))),
            None => Ok(value),
        }
    }

    /// A bind group of `pipeline`'s group 0 with `args` (whole buffers or ranges of one) at bindings 0, 1,
    /// 2, …
    pub fn bind_args(
        &self,
        pipeline: &wgpu::ComputePipeline,
        args: &[&dyn Bindable],
    ) -> wgpu::BindGroup {
        let entries: Vec<wgpu::BindGroupEntry> = args
            .iter()
            .enumerate()
            .map(|(i, a)| wgpu::BindGroupEntry {
                binding: i as u32,
                resource: a.resource(),
            })
            .collect();
        self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &pipeline.get_bind_group_layout(0),
            entries: &entries,
        })
    }

    /// A bind group of `pipeline`'s group 0 with `buffers` at bindings 0, 1, 2, …
    pub fn bind(
        &self,
        pipeline: &wgpu::ComputePipeline,
        buffers: &[&wgpu::Buffer],
    ) -> wgpu::BindGroup {
        let args: Vec<&dyn Bindable> = buffers.iter().map(|&b| b as &dyn Bindable).collect();
        self.bind_args(pipeline, &args)
    }

    /// Waits for all submitted work, then reports the first device error.
    pub fn finish(&self) -> Result<(), GpuError> {
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| GpuError::DeviceLost(e.to_string()))?;
        self.take_error()
    }

    /// Copies `ranges` (buffer, byte offset, bytes) into one staging buffer with a single submission and
    /// returns their bytes, in order: one wait for any number of arrays.
    pub fn read(&self, ranges: &[(&wgpu::Buffer, u64, u64)]) -> Result<Vec<Vec<u8>>, GpuError> {
        let mut out = Vec::with_capacity(ranges.len());
        self.read_into(ranges, |_, bytes| out.push(bytes.to_vec()))?;
        Ok(out)
    }

    /// As [`Gpu::read`], handing each range's bytes to `take(index, bytes)` straight from the staging
    /// buffer the device keeps (no copy of its own).
    pub fn read_into(
        &self,
        ranges: &[(&wgpu::Buffer, u64, u64)],
        mut take: impl FnMut(usize, &[u8]),
    ) -> Result<(), GpuError> {
        let total: u64 = ranges
            .iter()
            .map(|r| r.2.next_multiple_of(4))
            .sum::<u64>()
            .max(4);
        let mut kept = self.staging.lock().unwrap();
        let usage = wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST;
        let staging = reserve(&self.device, &mut kept.down, total, usage);
        let mut encoder = self.device.create_command_encoder(&Default::default());
        let mut at = 0;
        for &(buffer, offset, bytes) in ranges {
            if bytes > 0 {
                encoder.copy_buffer_to_buffer(buffer, offset, staging, at, bytes);
            }
            at += bytes.next_multiple_of(4);
        }
        self.queue.submit([encoder.finish()]);
        let slice = staging.slice(..total);
        let (tx, rx) = std::sync::mpsc::channel();
        slice.map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        self.finish()?;
        rx.recv()
            .map_err(|e| GpuError::DeviceLost(e.to_string()))?
            .map_err(|e| GpuError::DeviceLost(format!("read-back failed: {e}")))?;
        let view = slice
            .get_mapped_range()
            .map_err(|e| GpuError::Internal(e.to_string()))?;
        let mut at = 0usize;
        for (k, &(_, _, bytes)) in ranges.iter().enumerate() {
            take(k, &view[at..at + bytes as usize]);
            at += bytes.next_multiple_of(4) as usize;
        }
        drop(view);
        staging.unmap();
        Ok(())
    }

    /// This device with the profile of [`PROFILE_VAR`] on or off, whatever the variable says (where the
    /// adapter has timestamps).
    pub fn profiling(mut self, on: bool) -> Self {
        self.profile = (on && self.timestamps).then(|| Mutex::new(Profile::new()));
        self
    }

    /// The device time of each kernel since the last call (name, launches, ms), where [`PROFILE_VAR`] asked
    /// for it; empty otherwise.
    pub fn take_profile(&self) -> Vec<(String, u64, f64)> {
        let Some(profile) = &self.profile else {
            return Vec::new();
        };
        std::mem::take(&mut *profile.lock().unwrap())
            .into_iter()
            .map(|(name, (n, ms))| (name, n, ms))
            .collect()
    }

    /// A timer for compute passes, or `None` where the adapter has no timestamp queries.
    pub(crate) fn pass_timer(&self, passes: u32) -> Option<PassTimer> {
        if !self.timestamps || passes == 0 {
            return None;
        }
        let count = 2 * passes;
        let set = self.device.create_query_set(&wgpu::QuerySetDescriptor {
            label: Some("pass timer"),
            ty: wgpu::QueryType::Timestamp,
            count,
        });
        let resolve = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("pass timer resolve"),
            size: 8 * count as u64,
            usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        Some(PassTimer {
            set,
            resolve,
            count,
            period_ns: self.timestamp_period_ns,
        })
    }
}

/// Timestamps around compute passes, read back in one go.
pub(crate) struct PassTimer {
    set: wgpu::QuerySet,
    resolve: wgpu::Buffer,
    count: u32,
    period_ns: f32,
}

impl PassTimer {
    /// The timestamp writes of pass `k`.
    pub fn writes(&self, k: u32) -> wgpu::ComputePassTimestampWrites<'_> {
        wgpu::ComputePassTimestampWrites {
            query_set: &self.set,
            beginning_of_pass_write_index: Some(2 * k),
            end_of_pass_write_index: Some(2 * k + 1),
        }
    }

    /// Resolves the queries at the end of `encoder`'s work.
    pub fn resolve(&self, encoder: &mut wgpu::CommandEncoder) {
        encoder.resolve_query_set(&self.set, 0..self.count, &self.resolve, 0);
    }

    /// Each pass's duration (ms), after the encoder that [`PassTimer::resolve`]d was submitted.
    pub fn durations_ms(&self, gpu: &Gpu) -> Result<Vec<f64>, GpuError> {
        let bytes = gpu.read(&[(&self.resolve, 0, 8 * self.count as u64)])?;
        let ticks: &[u64] = bytemuck::cast_slice(&bytes[0]);
        Ok(ticks
            .chunks_exact(2)
            .map(|t| t[1].saturating_sub(t[0]) as f64 * self.period_ns as f64 * 1e-6)
            .collect())
    }
}

/// A compute kernel with its pipeline and a bind group for each of the two alternating states (a step reads
/// one set of buffers and writes the other; `cur` picks which).
pub(crate) struct Kernel {
    label: &'static str,
    pipeline: Arc<wgpu::ComputePipeline>,
    bind: [wgpu::BindGroup; 2],
    groups: [u32; 3],
}

impl Kernel {
    /// The kernel `label` of `variant` from `source` after `prelude`, run over `groups` workgroups, bound
    /// for state `cur` to `bindings(cur)` at bindings 0, 1, 2, …
    pub fn new<'a>(
        gpu: &Gpu,
        label: &'static str,
        variant: &str,
        prelude: &str,
        source: &str,
        groups: [u32; 3],
        bindings: impl Fn(usize) -> Vec<&'a wgpu::Buffer>,
    ) -> Result<Self, GpuError> {
        let pipeline = gpu.pipeline(&format!("{label} {variant}"), prelude, source)?;
        let bind = std::array::from_fn(|cur| gpu.bind(&pipeline, &bindings(cur)));
        Ok(Self {
            label,
            pipeline,
            bind,
            groups,
        })
    }

    /// Records the kernel's pass for state `cur`, timed by `timestamps` when given.
    pub fn encode(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        cur: usize,
        timestamps: Option<wgpu::ComputePassTimestampWrites<'_>>,
    ) {
        dispatch(
            encoder,
            self.label,
            &self.pipeline,
            &self.bind[cur],
            self.groups,
            timestamps,
        );
    }
}

/// Records one compute pass of `pipeline` over `groups` workgroups, timed by `timestamps` when given.
pub fn dispatch(
    encoder: &mut wgpu::CommandEncoder,
    label: &str,
    pipeline: &wgpu::ComputePipeline,
    bind: &wgpu::BindGroup,
    groups: [u32; 3],
    timestamps: Option<wgpu::ComputePassTimestampWrites<'_>>,
) {
    let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
        label: Some(label),
        timestamp_writes: timestamps,
    });
    pass.set_pipeline(pipeline);
    pass.set_bind_group(0, bind, &[]);
    pass.dispatch_workgroups(groups[0], groups[1], groups[2]);
}

/// Workgroups `groups` (at least one), folded into two dimensions of at most `per_axis` each: kernels that
/// number their threads linearly read `workgroup_id.x + workgroup_id.y · num_workgroups.x`.
pub fn fold_groups(groups: u64, per_axis: u32) -> [u32; 3] {
    let total = groups.max(1);
    let x = total.min(per_axis as u64);
    [x as u32, total.div_ceil(x) as u32, 1]
}

/// A kernel's pipeline and bind group, dispatched over `groups` workgroups: one entry of a compute pass
/// ([`Gpu::submit_launches`]).
pub(crate) struct Launch {
    /// What the launch does, for errors and the profile.
    pub name: String,
    pub pipeline: Arc<wgpu::ComputePipeline>,
    pub bind: wgpu::BindGroup,
    pub groups: [u32; 3],
    /// A buffer the launch's bind group holds that nothing else keeps (its own uniform), when it has one.
    pub keep: Option<wgpu::Buffer>,
}

impl Gpu {
    /// A launch of `pipeline` (`name` in error reports) with `args` (whole buffers or ranges of one) at
    /// bindings 0, 1, … over `groups` workgroups.
    pub(crate) fn launch_args(
        &self,
        name: &str,
        pipeline: Arc<wgpu::ComputePipeline>,
        args: &[&dyn Bindable],
        groups: [u32; 3],
    ) -> Result<Launch, GpuError> {
        let bind = self.validating(name, || Ok(self.bind_args(&pipeline, args)))?;
        Ok(Launch {
            name: name.to_string(),
            pipeline,
            bind,
            groups,
            keep: None,
        })
    }

    /// Records `prepare` (buffer clears), then `launches` in one compute pass labelled `label`, and submits
    /// them without waiting; when profiling ([`PROFILE_VAR`]), each launch in a timed pass of its own, and
    /// waits.
    pub(crate) fn submit_launches<'a>(
        &self,
        label: &str,
        prepare: impl FnOnce(&mut wgpu::CommandEncoder),
        launches: impl IntoIterator<Item = &'a Launch>,
    ) {
        let mut encoder = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some(label) });
        prepare(&mut encoder);
        if let Some(profile) = &self.profile {
            let launches: Vec<&Launch> = launches.into_iter().collect();
            let Some(timer) = self.pass_timer(launches.len() as u32) else {
                // No launches: the preparation alone.
                self.queue.submit([encoder.finish()]);
                return;
            };
            for (k, l) in launches.iter().enumerate() {
                let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some(&l.name),
                    timestamp_writes: Some(timer.writes(k as u32)),
                });
                pass.set_pipeline(&l.pipeline);
                pass.set_bind_group(0, &l.bind, &[]);
                pass.dispatch_workgroups(l.groups[0], l.groups[1], l.groups[2]);
            }
            timer.resolve(&mut encoder);
            self.queue.submit([encoder.finish()]);
            match timer.durations_ms(self) {
                Ok(ms) => {
                    let mut profile = profile.lock().unwrap();
                    for (l, ms) in launches.iter().zip(ms) {
                        // By workgroup count too: one kernel at several sizes shows as several rows.
                        let groups: u64 = l.groups.iter().map(|&g| g as u64).product();
                        let key = format!("{} ({groups} groups)", l.name);
                        let entry = profile.entry(key).or_default();
                        entry.0 += 1;
                        entry.1 += ms;
                    }
                }
                Err(e) => {
                    self.errors.lock().unwrap().get_or_insert(e);
                }
            }
            return;
        }
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some(label),
                timestamp_writes: None,
            });
            for l in launches {
                pass.set_pipeline(&l.pipeline);
                pass.set_bind_group(0, &l.bind, &[]);
                pass.dispatch_workgroups(l.groups[0], l.groups[1], l.groups[2]);
            }
        }
        self.queue.submit([encoder.finish()]);
    }
}

/// What a kernel binds: a whole buffer, or a range of one ([`BufferRange`]).
pub trait Bindable {
    /// The binding.
    fn resource(&self) -> wgpu::BindingResource<'_>;
}

impl Bindable for wgpu::Buffer {
    fn resource(&self) -> wgpu::BindingResource<'_> {
        self.as_entire_binding()
    }
}

/// A range of a buffer, which a kernel sees as a whole array: an array in a [`Scratch`].
#[derive(Clone, Debug)]
pub struct BufferRange {
    pub buffer: wgpu::Buffer,
    /// Bytes from the buffer's start (a multiple of the adapter's storage offset alignment).
    pub offset: u64,
    pub size: u64,
}

impl Bindable for BufferRange {
    fn resource(&self) -> wgpu::BindingResource<'_> {
        wgpu::BindingResource::Buffer(wgpu::BufferBinding {
            buffer: &self.buffer,
            offset: self.offset,
            size: std::num::NonZeroU64::new(self.size),
        })
    }
}

/// Device memory that solvers whose passes never overlap share: the pressure solve's Krylov vectors and
/// FLIP's particle-to-grid sort live in one (each pass rewrites what it reads), so a FLIP step holds the
/// larger of the two instead of both. A buffer that grows to the largest request; each growth starts a new
/// generation, after which its users take the new buffer (launches recorded with the old one are stale).
#[derive(Clone, Debug, Default)]
pub struct Scratch(Arc<Mutex<(Option<wgpu::Buffer>, u64)>>);

impl Scratch {
    /// An empty scratch buffer, its own user's until [`Clone`]d to another.
    pub fn new() -> Self {
        Self::default()
    }

    /// The buffer, grown to at least `bytes` (`what` names the need in an error; the contents of a grown
    /// buffer are lost), and its generation.
    ///
    /// # Errors
    /// [`GpuError::Limit`] beyond the adapter's buffer size (its users bind ranges of it, each checked
    /// against the binding size by its user), [`GpuError::OutOfMemory`].
    pub fn get(&self, gpu: &Gpu, what: &str, bytes: u64) -> Result<(wgpu::Buffer, u64), GpuError> {
        let mut inner = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(b) = inner.0.as_ref().filter(|b| b.size() >= bytes) {
            return Ok((b.clone(), inner.1));
        }
        gpu.check_size(what, bytes, gpu.limits().max_buffer_size)?;
        // This holder lets the old buffer go first (its other users drop theirs as they take the new one).
        inner.0 = None;
        let buffer = gpu.allocating(what, || gpu.buffer("scratch", bytes))?;
        inner.0 = Some(buffer.clone());
        inner.1 += 1;
        Ok((buffer, inner.1))
    }

    /// Bytes held.
    pub fn bytes(&self) -> u64 {
        let inner = self.0.lock().unwrap_or_else(|e| e.into_inner());
        inner.0.as_ref().map_or(0, |b| b.size())
    }

    /// Whether `self` and `other` are the same scratch buffer (clones of one).
    pub fn same(&self, other: &Scratch) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// A number that names this scratch buffer while it lives: its clones report the same, any other
    /// buffer alive at the same time another.
    pub fn id(&self) -> u64 {
        Arc::as_ptr(&self.0) as usize as u64
    }
}

/// Workgroups for `cells` along each axis with workgroups of `size` threads per axis.
pub fn groups(n: [u32; 3], size: [u32; 3]) -> [u32; 3] {
    std::array::from_fn(|a| n[a].div_ceil(size[a]))
}

/// The variable that makes a missing adapter a failure of the GPU tests (CI sets it to `1`).
pub const REQUIRE_VAR: &str = "EDDIES_REQUIRE_GPU";

/// The device for a test suite: `None`, with a notice on stderr, where no adapter opens, so that the test
/// passes on a machine without one; a panic instead when [`REQUIRE_VAR`] is `1`. Programs use
/// [`Gpu::new`] and report its error.
pub fn device_or_skip() -> Option<Gpu> {
    match Gpu::new() {
        Ok(g) => Some(g),
        Err(e) => {
            if std::env::var(REQUIRE_VAR).is_ok_and(|v| v == "1") {
                panic!("{REQUIRE_VAR}=1 but {e}");
            }
            eprintln!("notice: GPU test skipped: {e}");
            None
        }
    }
}

/// Parses and validates a kernel's WGSL with the shader translator's own checks, as wgpu runs them on a
/// device, without one: the error, with the source line, or nothing.
pub fn validate_wgsl(code: &str) -> Result<(), String> {
    use wgpu::naga;
    let module = naga::front::wgsl::parse_str(code).map_err(|e| e.emit_to_string(code))?;
    naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::default() | naga::valid::Capabilities::FLOAT64,
    )
    .validate(&module)
    .map_err(|e| e.emit_to_string(code))?;
    Ok(())
}
