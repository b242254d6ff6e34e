//! PIC/FLIP/APIC on the GPU: the particle passes of a [`FlipSim`](eddies::flip::FlipSim) — the
//! particle-to-grid transfer, and the grid-to-particle transfer fused with advection — as its
//! [`TransferDevice`].
//!
//! * **Counting sort by half cell, on the device.** Each particle's half cell and its rank in it (an integer
//!   atomic count, `keys.wgsl`), then the device's [`CountingSort`]: prefix sums of the counts, each particle
//!   into its half cell's range, each half cell's particles back in index order, so that the sorted list
//!   depends on the particles alone and not on the order in which threads took their ranks.
//! * **Gathered transfer, no float atomics.** One thread per face sums, over the particles of the 4ᴰ half
//!   cells within one cell of it, the tent weights and weighted velocities (`p2g.wgsl`): the CPU's sums
//!   (`[Σ w, Σ w u]` per face, the affine term with APIC) in a fixed order of the device's own, so a run
//!   repeats bit for bit on one device and agrees with the CPU to single-precision rounding.
//! * **What the step derives from the sums, on the device.** A simulation asks for the face velocities
//!   (the sums' quotient) and the fill fraction ([`GridSums::Derived`]); the transfer's last launch forms
//!   them from the sums, which stay on the device (`derive.wgsl`), in memory dead by then (the
//!   displacement's face field, the first of the prefix sums), and only they come back: 4 bytes a face and
//!   4 a cell instead of the sums' 8 a face.
//! * **Grid to particles and advection**, one thread per particle (`g2p.wgsl`): PIC, the FLIP blend or APIC
//!   (the affine matrix from the gradient of the interpolation weights), the midpoint move plus the volume
//!   correction's displacement, the push out of each obstacle along its normal, and the walls, as the CPU's
//!   pass but in single precision. The obstacles' shapes (static, or moving at the step's end) are compiled
//!   into postfix programs of primitives and `min`/`max` steps (`shapes.rs`, `shapes.wgsl`); one nested
//!   deeper than the kernel's stack is declined and the CPU runs the pass. Where the device ran the
//!   substep's transfer, the host sends the pass the velocity `u` alone, and the pass's first launch forms
//!   `u − u_old` from the transfer's sums, which the face fields still hold (`load.wgsl`).
//! * **The projection's right-hand side and velocity, on the device.** Where the device keeps the particles,
//!   extrapolates, and shares its face field with the pressure solve, the host sends neither: from the
//!   sums, the body force and the walls one launch forms the right-hand side into the face field before the
//!   solve ([`TransferDevice::rhs_to_faces`]); after it, the solve leaves the pressure there, and another
//!   forms the projected velocity, both in the host's double-precision arithmetic (`project.wgsl`;
//!   [`TransferDevice::project_velocity`]). Two more launches tally the step's fill fraction and largest
//!   divergence in blocks of cells ([`TransferDevice::grid_tally`]), so that the host leaves its own
//!   copy's projection until the state is read.
//! * **Where the data lives.** When the simulation leaves the particles on the device
//!   ([`TransferDevice::keeps_particles`]; a scene that adds and removes none on the CPU), the device keeps
//!   them between the passes: each transfer sorts them, counts them per cell and moves them into the sorted
//!   order (`counts.wgsl`, `gather.wgsl`, `place.wgsl`; [`TransferDevice::sort_to_grid`]), the particle pass
//!   moves them in place, and the simulation reads them back once a step, or tallies the step's
//!   diagnostics on the device (`tally.wgsl`; [`TransferDevice::tally_kept`]) and reads them back once per
//!   output frame. Without obstacles the particle pass also extrapolates the projected velocity into the air
//!   first (`extrapolate.wgsl`; [`TransferDevice::extrapolates`]), from the cells that hold the kept
//!   particles, its known-face masks in the [`Scratch`]. Otherwise each transfer uploads
//!   positions and velocities (and the affine matrices with APIC) and reads the face sums back, and the
//!   grid-to-particle pass uploads the velocity and reads the particles back. Device memory: 12 + 8 D
//!   bytes per particle (+ 4 D² with APIC), with a fifth spare, and 2ᴰ·4 + 12 D + 4 bytes per cell, of which
//!   the prefix sums' 2ᴰ·4 may be a [`Scratch`] shared with the pressure solve
//!   ([`GpuTransfer::share_scratch`]), which never runs during a transfer; the tallies, 48 bytes per 1024
//!   kept particles. The volume correction's displacement (4 D bytes per cell of those) is a
//!   face field of its own, which the correction's solve may write on the device
//!   ([`GpuTransfer::share_faces`]) so that it never crosses the bus.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytemuck::{Pod, Zeroable};
use eddies::flip::{
    Advection, GridSums, GridTally, KeptParticles, KeptTransfer, Particles, Projection, Tally,
    Transfer, TransferDevice,
};
use eddies::grid::MacGrid;

use crate::device::{fold_groups, Bindable, BufferRange, Gpu, GpuError, Launch, Scratch};
use crate::sort::{CountingSort, WG};

const COMMON: &str = include_str!("common.wgsl");
const KEYS: &str = include_str!("keys.wgsl");
const P2G: &str = include_str!("p2g.wgsl");
const COUNTS: &str = include_str!("counts.wgsl");
const GATHER: &str = include_str!("gather.wgsl");
const PLACE: &str = include_str!("place.wgsl");
const TALLY: &str = include_str!("tally.wgsl");
const EXTRAPOLATE: &str = include_str!("extrapolate.wgsl");
const LOAD: &str = include_str!("load.wgsl");
const DERIVE: &str = include_str!("derive.wgsl");
const PROJECT: &str = include_str!("project.wgsl");
/// The particle pass, followed by the obstacles' distance functions it calls.
const G2P: &str = concat!(include_str!("g2p.wgsl"), "\n", include_str!("shapes.wgsl"));

mod g2p;
mod kept;
mod p2g;
mod shapes;

/// What tells a simulation's grid from another's that shares the device: the address of its first face
/// array (a live array's address is its own).
fn grid_key<const D: usize>(grid: &MacGrid<D>) -> usize {
    grid.u[0].data.as_ptr() as usize
}

/// The face components of `grid` as the kernels' uniforms lay them out: per component its faces per axis (1
/// beyond D), and its first face in the face fields; and the faces of all components.
fn face_layout<const D: usize>(grid: &MacGrid<D>) -> ([[u32; 4]; 3], [u32; 4], u64) {
    let (mut dims, mut base, mut faces) = ([[1; 4]; 3], [0; 4], 0);
    for (k, g) in grid.u.iter().enumerate() {
        base[k] = faces as u32;
        for (d, &n) in dims[k].iter_mut().zip(&g.dims) {
            *d = n as u32;
        }
        faces += g.data.len() as u64;
    }
    (dims, base, faces)
}

/// The prelude of a kernel for dimension `dim`, with its own constants.
fn prelude(dim: usize, consts: &str) -> String {
    format!("const D: u32 = {dim}u;\nconst WG: u32 = {WG}u;\n{consts}\n{COMMON}")
}

/// `Params` of `common.wgsl`; its first 16 bytes are the sort's header ([`crate::sort::SortHeader`]).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
struct ParamsUniform {
    n: u32,
    bins: u32,
    pad0: [u32; 2],
    sub: [u32; 4],
    cells: [u32; 4],
    origin: [f32; 4],
    inv_h: f32,
    h: f32,
    pad1: [u32; 2],
}

/// `Face` of `p2g.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
struct FaceUniform {
    k: u32,
    faces: u32,
    base: u32,
    pad: u32,
    dims: [u32; 4],
}

/// `Move` of `g2p.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
struct MoveUniform {
    dims: [[u32; 4]; 3],
    base: [u32; 4],
    dt: f32,
    pic_ratio: f32,
    mode: u32,
    closed: u32,
    obstacles: u32,
    displaced: u32,
    pad: [u32; 2],
}

/// `Keep` of `common.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
struct KeepUniform {
    component: u32,
    base: u32,
    pad: [u32; 2],
}

/// `Derive` of `derive.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
struct DeriveUniform {
    dims: [[u32; 4]; 3],
    base: [u32; 4],
    cells: [u32; 4],
    scale: f32,
    closed: u32,
    pad: [u32; 2],
}

/// `Project` of `project.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
struct ProjectUniform {
    dims: [[u32; 4]; 3],
    base: [u32; 4],
    force: [f64; 3],
    coef: f64,
    inv_h: f64,
    scale: f64,
    kappa: f64,
    forced: u32,
    closed: u32,
    keep_fill: u32,
    pad: [u32; 3],
}

/// `Tally` of `tally.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
struct TallyUniform {
    n: u32,
    chunks: u32,
    pad: [u32; 2],
}

/// What the particle passes since the last [`GpuTransfer::take_times`] took.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TransferTimes {
    /// Passes that ran on the device (particle-to-grid, grid-to-particle).
    pub passes: usize,
    /// Writing the particles and the grid fields to the device.
    pub upload_ms: f64,
    /// The kernels (sort and gather; the particle pass), until the device finished them.
    pub kernels_ms: f64,
    /// Reading the face sums, or the moved particles, back.
    pub download_ms: f64,
    /// The grid fields that the host wrote for the particle passes (bytes): the velocity, with `u − u_old`
    /// where the device does not form it (`load.wgsl`), and the displacement where it comes from the host.
    pub grid_bytes_up: u64,
    /// The grid fields that the transfers read back (bytes): the sums, or what the step derives from them
    /// (`derive.wgsl`); the counts per cell are not counted.
    pub grid_bytes_down: u64,
    /// Substeps whose projected velocity the device formed itself (`project.wgsl`;
    /// [`TransferDevice::project_velocity`]).
    pub projections: usize,
    /// Substeps whose projection's right-hand side the device formed itself (`project.wgsl`;
    /// [`TransferDevice::rhs_to_faces`]).
    pub right_hand_sides: usize,
    /// Substeps whose volume correction's right-hand side the device formed itself (`project.wgsl`;
    /// [`TransferDevice::excess_to_faces`]).
    pub volume_right_hand_sides: usize,
    /// Steps whose cell quantities the device tallied on its own copy of the grid (`project.wgsl`;
    /// [`TransferDevice::grid_tally`]).
    pub grid_tallies: usize,
}

/// The device buffers of one problem size; they grow to the largest and are reused.
struct Buffers {
    /// Particles, half cells and faces (all components) they hold.
    particles: u64,
    bins: u64,
    faces: u64,
    apic: bool,
    params: wgpu::Buffer,
    faces_uniform: Vec<wgpu::Buffer>,
    moves: wgpu::Buffer,
    derive: wgpu::Buffer,
    project: wgpu::Buffer,
    /// `[u, u − u_old]` per face for the grid-to-particle pass; the particle-to-grid transfer's sums
    /// `[Σ w, Σ w u]` per face before it, and after them the kept particles' counts per cell.
    fields: wgpu::Buffer,
    pos: wgpu::Buffer,
    vel: wgpu::Buffer,
    affine: wgpu::Buffer,
    keys: wgpu::Buffer,
    rank: wgpu::Buffer,
    sorted: wgpu::Buffer,
    /// The prefix sums: their range of the scratch buffer as the last transfer took it.
    scan: BufferRange,
}

impl Buffers {
    fn bytes(&self) -> u64 {
        [
            &self.pos,
            &self.vel,
            &self.affine,
            &self.keys,
            &self.rank,
            &self.sorted,
            &self.fields,
        ]
        .iter()
        .map(|b| b.size())
        .sum()
    }
}

/// FLIP's particle passes on the GPU (see the module documentation).
pub struct GpuTransfer {
    gpu: Arc<Gpu>,
    buffers: Option<Buffers>,
    /// The obstacles' programs and ranges (`shapes.wgsl`), grown to the largest.
    obstacles: Option<(wgpu::Buffer, wgpu::Buffer)>,
    /// `[u, u − u_old]` per face, and the displacement when it comes from the host, gathered on the host
    /// for the particle pass (kept for the next pass's gathering).
    fields: Vec<[f32; 2]>,
    /// `u` per face, gathered alike where the device derives `u − u_old` itself (`load.wgsl`).
    velocity: Vec<f32>,
    displacement: Vec<f32>,
    /// The grid ([`grid_key`]) whose particle-to-grid sums the face fields hold, until the particle pass
    /// overwrites them.
    sums_of: Option<usize>,
    /// The grid whose projected velocity the face fields hold, formed on the device
    /// ([`TransferDevice::project_velocity`]), until the particle pass reads it.
    projected_of: Option<usize>,
    /// The grid whose fill fraction the last transfer derived (`derive.wgsl`), while the sums are those of
    /// that transfer.
    fill_of: Option<usize>,
    /// The grid whose fill fraction the counts per cell hold in place of the fluid cells' counts
    /// (`project.wgsl`, OP 0), until the next transfer.
    fill_in_counts: Option<usize>,
    /// The volume correction's displacement per face (f32): written by the host, or shared with a pressure
    /// solve that leaves it there ([`GpuTransfer::share_faces`]).
    faces: Scratch,
    /// The particles whose positions and velocities the buffers hold as the last particle-to-grid transfer
    /// sent them, until the buffers change or the particle pass moves them: the address of their first
    /// array and their count, which tell them from another simulation's sharing this device (a live array's
    /// address is its own).
    resident: Option<(usize, u64)>,
    /// Whose particles the buffers keep between passes ([`TransferDevice::sort_to_grid`]), how many, and
    /// whether with their APIC matrices.
    kept: Option<(KeptParticles, u64, bool)>,
    /// Whether the device offers to keep the particles ([`GpuTransfer::keep_particles`]).
    keep: bool,
    /// `Keep` of `common.wgsl`, one per attribute component, then one for the counts.
    keep_uniforms: Vec<wgpu::Buffer>,
    /// The kept particles' tallies per chunk (`tally.wgsl`) and their uniform, grown to the largest.
    tallies: Option<(wgpu::Buffer, wgpu::Buffer)>,
    /// The grid's tallies per block of cells (`project.wgsl`, OP 3 and OP 4): the fill fractions' sums,
    /// then the largest divergences; grown to the largest.
    grid_tallies: Option<wgpu::Buffer>,
    /// The grid whose fill fractions' sums the grid's tallies hold (OP 3), until the projection's OP 4.
    fill_blocks_of: Option<usize>,
    /// The grid whose tallies (both) the grid's tallies hold, until the next transfer.
    tally_of: Option<usize>,
    /// Workgroups per dimension of a launch (the adapter's limit): larger launches fold into two.
    per_axis: u32,
    times: TransferTimes,
    /// Where the sort's prefix sums live: the transfer's own, or shared with the pressure solve.
    scratch: Scratch,
    sort: CountingSort,
}

impl GpuTransfer {
    /// The transfer on `gpu`.
    pub fn new(gpu: Arc<Gpu>) -> Self {
        let per_axis = gpu.limits().max_compute_workgroups_per_dimension;
        Self {
            gpu,
            buffers: None,
            obstacles: None,
            fields: Vec::new(),
            velocity: Vec::new(),
            displacement: Vec::new(),
            sums_of: None,
            projected_of: None,
            fill_of: None,
            fill_in_counts: None,
            grid_tallies: None,
            fill_blocks_of: None,
            tally_of: None,
            resident: None,
            kept: None,
            keep: true,
            keep_uniforms: Vec::new(),
            tallies: None,
            per_axis,
            times: TransferTimes::default(),
            scratch: Scratch::new(),
            faces: Scratch::new(),
            sort: CountingSort::default(),
        }
    }

    /// Reads the volume correction's displacement from `faces`, into which a pressure solve writes it
    /// (`GpuPoisson::share_faces`), so that it need not cross the bus
    /// ([`TransferDevice::face_field`]).
    pub fn share_faces(&mut self, faces: Scratch) {
        self.faces = faces;
    }

    /// The face field from which the particle pass reads the displacement.
    pub fn faces(&self) -> &Scratch {
        &self.faces
    }

    /// The face fields hold no transfer's sums any more (a transfer starts, or the particle pass wrote over
    /// them), nor what was derived from them.
    fn forget_sums(&mut self) {
        self.sums_of = None;
        self.fill_of = None;
        self.fill_in_counts = None;
    }

    /// Keeps the sort's prefix sums in `scratch`, which solves that never run during a particle pass share
    /// (the pressure solve's Krylov vectors, `GpuPoisson::share_scratch`): each transfer sorts anew.
    pub fn share_scratch(&mut self, scratch: Scratch) {
        self.scratch = scratch;
    }

    /// The scratch buffer that holds the sort's prefix sums.
    pub fn scratch(&self) -> &Scratch {
        &self.scratch
    }

    /// Folds launches of more than `n` workgroups (at least 1) into two dimensions, below the adapter's own
    /// limit; the tests exercise the folding on small grids this way.
    pub fn limit_workgroups_per_dimension(&mut self, n: u32) {
        self.per_axis = n.clamp(1, self.per_axis);
    }

    /// Whether the device keeps the particles between its passes when a simulation can leave them there
    /// (by default it does; [`TransferDevice::keeps_particles`]). Without, every pass sends the particles
    /// and reads them back, as the CPU's stages between the passes need them.
    pub fn keep_particles(&mut self, keep: bool) {
        self.keep = keep;
        if !keep {
            self.kept = None;
        }
    }

    /// What the transfers since the last call took, and a fresh count.
    pub fn take_times(&mut self) -> TransferTimes {
        std::mem::take(&mut self.times)
    }

    /// Device memory held (bytes), apart from the scratch buffer ([`scratch`](Self::scratch)), the face field
    /// ([`faces`](Self::faces)) included.
    pub fn bytes(&self) -> u64 {
        let tallies = self.tallies.as_ref().map_or(0, |(b, _)| b.size())
            + self.grid_tallies.as_ref().map_or(0, wgpu::Buffer::size);
        self.buffers.as_ref().map_or(0, Buffers::bytes) + tallies + self.faces.bytes()
    }

    /// Buffers for `n` particles, `bins` half cells, `faces` faces and `cells` cells, reallocated where they
    /// are too small.
    fn ensure(
        &mut self,
        dim: usize,
        n: u64,
        bins: u64,
        faces: u64,
        cells: u64,
        apic: bool,
    ) -> Result<(), GpuError> {
        let fits = self.buffers.as_ref().is_some_and(|b| {
            b.particles >= n
                && b.bins == bins
                && b.faces == faces
                && b.fields.size() >= faces * 8 + cells * 4
                && (b.apic || !apic)
        });
        if fits {
            return Ok(());
        }
        let gpu = self.gpu.clone();
        // Room for a fifth more particles than now, so that a growing liquid does not reallocate each step.
        let particles = self
            .buffers
            .as_ref()
            .map_or(0, |b| b.particles)
            .max(n + n / 5)
            .max(1);
        let scan_entries = CountingSort::entries(bins);
        let per_particle = dim as u64 * particles * 4;
        let affine = if apic { dim as u64 * per_particle } else { 4 };
        for (what, bytes) in [
            ("the particles' positions", per_particle),
            ("the APIC matrices", affine),
            ("the sort's prefix sums", scan_entries * 4),
            ("the particle passes' face fields", faces * 8 + cells * 4),
        ] {
            gpu.check_binding(what, bytes)?;
        }
        self.buffers = None;
        self.resident = None;
        self.kept = None;
        self.forget_sums();
        let buffers = gpu.allocating("the particle-to-grid transfer", || Buffers {
            particles,
            bins,
            faces,
            apic,
            params: gpu.uniform::<ParamsUniform>("transfer params"),
            faces_uniform: (0..dim)
                .map(|_| gpu.uniform::<FaceUniform>("transfer face"))
                .collect(),
            pos: gpu.buffer("particle positions", per_particle),
            vel: gpu.buffer("particle velocities", per_particle),
            affine: gpu.buffer("particle affine", affine),
            keys: gpu.buffer("particle keys", particles * 4),
            rank: gpu.buffer("particle ranks", particles * 4),
            sorted: gpu.buffer("sorted particles", particles * 4),
            // Taken from the scratch buffer at each transfer.
            scan: BufferRange {
                buffer: gpu.buffer("half-cell starts", 4),
                offset: 0,
                size: scan_entries * 4,
            },
            moves: gpu.uniform::<MoveUniform>("particle move"),
            derive: gpu.uniform::<DeriveUniform>("derived from the sums"),
            project: gpu.uniform::<ProjectUniform>("the projection"),
            fields: gpu.buffer("face fields", faces * 8 + cells * 4),
        })?;
        self.buffers = Some(buffers);
        Ok(())
    }

    /// Buffers for the particles on `grid`, the step's constants, and the particles' positions and
    /// velocities (with `affine`, their APIC matrices) written to the device, unless `unchanged` says they
    /// are those the device already holds.
    fn upload<const D: usize>(
        &mut self,
        particles: &Particles<D>,
        grid: &MacGrid<D>,
        apic: bool,
        affine: bool,
        unchanged: bool,
    ) -> Result<(), GpuError> {
        let n = particles.len() as u64;
        self.prepare(n, grid, apic)?;
        let id = (particles.pos[0].as_ptr() as usize, n);
        if unchanged && self.resident == Some(id) && !affine {
            return Ok(());
        }
        self.write_particles(particles, affine);
        Ok(())
    }

    /// The particles' positions and velocities (with `affine`, their APIC matrices) into the buffers.
    fn write_particles<const D: usize>(&self, particles: &Particles<D>, affine: bool) {
        let gpu = &self.gpu;
        let b = self.buffers.as_ref().expect("buffers ensured");
        let n = particles.len() as u64;
        for a in 0..D {
            let at = a as u64 * n * 4;
            gpu.write_at(&b.pos, at, bytemuck::cast_slice(&particles.pos[a]));
            gpu.write_at(&b.vel, at, bytemuck::cast_slice(&particles.vel[a]));
            if affine {
                for c in 0..D {
                    let at = (a * D + c) as u64 * n * 4;
                    gpu.write_at(&b.affine, at, bytemuck::cast_slice(&particles.affine[a][c]));
                }
            }
        }
    }

    /// Buffers for `n` particles on `grid` (reallocated, which forgets the kept particles, where too small),
    /// and the step's constants.
    fn prepare<const D: usize>(
        &mut self,
        n: u64,
        grid: &MacGrid<D>,
        apic: bool,
    ) -> Result<(), GpuError> {
        let cells = grid.dims;
        let sub = cells.map(|c| 2 * c as u64);
        let bins: u64 = sub.iter().product();
        let faces: u64 = (0..D).map(|k| grid.u[k].data.len() as u64).sum();
        if n > u32::MAX as u64 / 2 || bins + 1 >= u32::MAX as u64 {
            return Err(GpuError::Limit(format!(
                "{n} particles on {bins} half cells: too many for the GPU transfer's 32-bit indices"
            )));
        }
        let cells_total = cells.iter().map(|&c| c as u64).product();
        self.ensure(D, n, bins, faces, cells_total, apic)?;
        let gpu = &self.gpu;
        let b = self.buffers.as_ref().expect("buffers ensured");
        let mut params = ParamsUniform {
            n: n as u32,
            bins: bins as u32,
            inv_h: (1.0 / grid.spacing) as f32,
            h: grid.spacing as f32,
            sub: [1; 4],
            cells: [1; 4],
            ..Default::default()
        };
        for a in 0..D {
            params.sub[a] = sub[a] as u32;
            params.cells[a] = cells[a] as u32;
            params.origin[a] = grid.origin[a] as f32;
        }
        gpu.write(&b.params, &[params]);
        Ok(())
    }

    /// A launch of `source` for dimension `D` with `consts`, `buffers` at bindings 0, 1, …, over `groups`
    /// workgroups.
    fn launch<const D: usize>(
        &self,
        name: &str,
        source: &str,
        consts: &str,
        buffers: &[&dyn Bindable],
        groups: u64,
    ) -> Result<Launch, GpuError> {
        let key = format!("flip {name} {D}d {consts}");
        let pipeline = self.gpu.pipeline(&key, &prelude(D, consts), source)?;
        self.gpu
            .launch_args(name, pipeline, buffers, fold_groups(groups, self.per_axis))
    }

    /// Runs `launches` in one compute pass, after clearing the first `clear` bytes of the prefix sums, and
    /// waits for the device.
    fn submit(&self, launches: &[Launch], clear: u64) -> Result<(), GpuError> {
        let b = self.buffers.as_ref().expect("buffers ensured");
        let prepare = |encoder: &mut wgpu::CommandEncoder| {
            if clear > 0 {
                encoder.clear_buffer(&b.scan.buffer, b.scan.offset, Some(clear));
            }
        };
        self.gpu
            .submit_launches("flip particles", prepare, launches);
        self.gpu.finish()
    }
}

impl TransferTimes {
    /// Adds a pass that started at `start`, had its data on the device at `uploaded`, its kernels done at
    /// `ran`, and its results read back now.
    fn record(&mut self, start: Instant, uploaded: Instant, ran: Instant) {
        let ms = |a: Instant, b: Instant| (b - a).as_secs_f64() * 1e3;
        let done = Instant::now();
        self.passes += 1;
        self.upload_ms += ms(start, uploaded);
        self.kernels_ms += ms(uploaded, ran);
        self.download_ms += ms(ran, done);
    }
}

impl<const D: usize> TransferDevice<D> for GpuTransfer {
    fn particles_to_grid(
        &mut self,
        particles: &Particles<D>,
        grid: &MacGrid<D>,
        transfer: Transfer,
        out: GridSums<'_, D>,
    ) -> Result<bool, String> {
        if particles.is_empty() {
            out.clear();
            return Ok(true);
        }
        self.particles_to_grid_on(particles, grid, transfer, out)
            .map(|()| true)
            .map_err(|e| e.to_string())
    }

    fn grid_to_particles_advect(
        &mut self,
        particles: &mut Particles<D>,
        step: &Advection<'_, D>,
    ) -> Result<bool, String> {
        // A shape too deep for the kernel's stack stays on the CPU.
        let Some((program, ranges)) = shapes::compile(step.obstacles) else {
            return Ok(false);
        };
        if particles.is_empty() {
            return Ok(true);
        }
        self.advect_on(particles, step, &program, &ranges)
            .map(|()| true)
            .map_err(|e| e.to_string())
    }

    fn keeps_particles(&self) -> bool {
        self.keep
    }

    fn extrapolates(&self) -> bool {
        self.keep
    }

    fn face_field(&self) -> Option<u64> {
        Some(self.faces.id())
    }

    fn rhs_to_faces(&mut self, grid: &MacGrid<D>, step: &Projection<D>) -> Result<bool, String> {
        self.rhs_on(grid, step).map_err(|e| e.to_string())
    }

    fn project_velocity(
        &mut self,
        grid: &MacGrid<D>,
        step: &Projection<D>,
    ) -> Result<bool, String> {
        self.project_on(grid, step).map_err(|e| e.to_string())
    }

    fn excess_to_faces(
        &mut self,
        grid: &MacGrid<D>,
        kappa: f64,
        kept: KeptParticles,
    ) -> Result<bool, String> {
        self.excess_on(grid, kappa, kept).map_err(|e| e.to_string())
    }

    fn tallies_grid(&self) -> bool {
        self.gpu.has_f64()
    }

    fn grid_tally(&mut self, grid: &MacGrid<D>) -> Result<Option<GridTally>, String> {
        self.grid_tally_on(grid).map_err(|e| e.to_string())
    }

    fn sort_to_grid(&mut self, t: KeptTransfer<'_, D>) -> Result<Option<usize>, String> {
        self.sort_to_grid_on(t).map_err(|e| e.to_string())
    }

    fn read_kept(
        &mut self,
        owner: KeptParticles,
        particles: &mut Particles<D>,
    ) -> Result<bool, String> {
        self.read_kept_on(owner, particles)
            .map_err(|e| e.to_string())
    }

    fn tally_kept(
        &mut self,
        owner: KeptParticles,
        positions: bool,
    ) -> Result<Option<Tally<D>>, String> {
        self.tally_kept_on(owner, positions)
            .map_err(|e| e.to_string())
    }
}

/// A [`GpuTransfer`] that a simulation and its caller share (a benchmark reads its times between steps).
#[derive(Clone)]
pub struct SharedTransfer(pub Arc<Mutex<GpuTransfer>>);

impl<const D: usize> TransferDevice<D> for SharedTransfer {
    fn particles_to_grid(
        &mut self,
        particles: &Particles<D>,
        grid: &MacGrid<D>,
        transfer: Transfer,
        out: GridSums<'_, D>,
    ) -> Result<bool, String> {
        let mut dev = self.0.lock().unwrap_or_else(|e| e.into_inner());
        TransferDevice::<D>::particles_to_grid(&mut *dev, particles, grid, transfer, out)
    }

    fn grid_to_particles_advect(
        &mut self,
        particles: &mut Particles<D>,
        step: &Advection<'_, D>,
    ) -> Result<bool, String> {
        let mut dev = self.0.lock().unwrap_or_else(|e| e.into_inner());
        TransferDevice::<D>::grid_to_particles_advect(&mut *dev, particles, step)
    }

    fn keeps_particles(&self) -> bool {
        let dev = self.0.lock().unwrap_or_else(|e| e.into_inner());
        TransferDevice::<D>::keeps_particles(&*dev)
    }

    fn extrapolates(&self) -> bool {
        let dev = self.0.lock().unwrap_or_else(|e| e.into_inner());
        TransferDevice::<D>::extrapolates(&*dev)
    }

    fn face_field(&self) -> Option<u64> {
        let dev = self.0.lock().unwrap_or_else(|e| e.into_inner());
        TransferDevice::<D>::face_field(&*dev)
    }

    fn rhs_to_faces(&mut self, grid: &MacGrid<D>, step: &Projection<D>) -> Result<bool, String> {
        let mut dev = self.0.lock().unwrap_or_else(|e| e.into_inner());
        TransferDevice::<D>::rhs_to_faces(&mut *dev, grid, step)
    }

    fn project_velocity(
        &mut self,
        grid: &MacGrid<D>,
        step: &Projection<D>,
    ) -> Result<bool, String> {
        let mut dev = self.0.lock().unwrap_or_else(|e| e.into_inner());
        TransferDevice::<D>::project_velocity(&mut *dev, grid, step)
    }

    fn excess_to_faces(
        &mut self,
        grid: &MacGrid<D>,
        kappa: f64,
        kept: KeptParticles,
    ) -> Result<bool, String> {
        let mut dev = self.0.lock().unwrap_or_else(|e| e.into_inner());
        TransferDevice::<D>::excess_to_faces(&mut *dev, grid, kappa, kept)
    }

    fn tallies_grid(&self) -> bool {
        let dev = self.0.lock().unwrap_or_else(|e| e.into_inner());
        TransferDevice::<D>::tallies_grid(&*dev)
    }

    fn grid_tally(&mut self, grid: &MacGrid<D>) -> Result<Option<GridTally>, String> {
        let mut dev = self.0.lock().unwrap_or_else(|e| e.into_inner());
        TransferDevice::<D>::grid_tally(&mut *dev, grid)
    }

    fn sort_to_grid(&mut self, t: KeptTransfer<'_, D>) -> Result<Option<usize>, String> {
        let mut dev = self.0.lock().unwrap_or_else(|e| e.into_inner());
        TransferDevice::<D>::sort_to_grid(&mut *dev, t)
    }

    fn read_kept(
        &mut self,
        owner: KeptParticles,
        particles: &mut Particles<D>,
    ) -> Result<bool, String> {
        let mut dev = self.0.lock().unwrap_or_else(|e| e.into_inner());
        TransferDevice::<D>::read_kept(&mut *dev, owner, particles)
    }

    fn tally_kept(
        &mut self,
        owner: KeptParticles,
        positions: bool,
    ) -> Result<Option<Tally<D>>, String> {
        let mut dev = self.0.lock().unwrap_or_else(|e| e.into_inner());
        TransferDevice::<D>::tally_kept(&mut *dev, owner, positions)
    }
}

#[cfg(test)]
mod tests {
    use super::kept::tally_consts;
    use super::*;
    use crate::device::validate_wgsl;

    /// Every kernel's variants parse and validate without a GPU, in 2D and 3D.
    #[test]
    fn the_kernels_compile_without_a_gpu() {
        let apic = ["const APIC: bool = false;", "const APIC: bool = true;"];
        let tally = [&tally_consts(false) as &str, &tally_consts(true) as &str];
        let ops = [
            "const OP: u32 = 0u;",
            "const OP: u32 = 1u;",
            "const OP: u32 = 2u;",
        ];
        let project_ops: Vec<String> = (0..5).map(g2p::project_consts).collect();
        let project_ops: Vec<&str> = project_ops.iter().map(String::as_str).collect();
        let kernels: [(&str, &str, &[&str]); 11] = [
            ("keys", KEYS, &[""]),
            ("derive", DERIVE, &[""]),
            ("extrapolate", EXTRAPOLATE, &ops),
            ("load", LOAD, &[""]),
            ("project", PROJECT, &project_ops),
            ("p2g", P2G, &apic),
            ("g2p", G2P, &[""]),
            ("counts", COUNTS, &[""]),
            ("gather", GATHER, &[""]),
            ("place", PLACE, &[""]),
            ("tally", TALLY, &tally),
        ];
        for (name, source, variants) in kernels {
            for consts in variants {
                for dim in [2, 3] {
                    let code = format!("{}\n{source}", prelude(dim, consts));
                    validate_wgsl(&code).unwrap_or_else(|e| panic!("{name} {consts} {dim}D: {e}"));
                }
            }
        }
    }

    /// The uniform structs have the sizes the shaders give them.
    #[test]
    fn uniforms_match_the_shaders() {
        assert_eq!(std::mem::size_of::<ParamsUniform>(), 80);
        assert_eq!(std::mem::size_of::<FaceUniform>(), 32);
        assert_eq!(std::mem::size_of::<MoveUniform>(), 96);
        assert_eq!(std::mem::size_of::<KeepUniform>(), 16);
        assert_eq!(std::mem::size_of::<DeriveUniform>(), 96);
        assert_eq!(std::mem::size_of::<ProjectUniform>(), 144);
        assert_eq!(std::mem::size_of::<TallyUniform>(), 16);
        assert_eq!(std::mem::size_of::<shapes::Instr>(), 112);
    }
}
