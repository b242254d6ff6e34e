//! The pressure solve on the GPU: the preconditioned conjugate gradients of a
//! [`PoissonSolver`], with its operator, its preconditioner and its stopping
//! rule, as the solver's [`PoissonDevice`].
//!
//! * **Precision.** The Krylov vectors and every sum are in double precision (`SHADER_F64`), as on the CPU:
//!   in single precision the rounding of the pressure alone leaves a relative residual near `N²·10⁻⁸`
//!   (10⁻⁴ at 64³), far above the usual tolerance of 10⁻⁶. The multigrid V-cycle runs in single precision,
//!   as the CPU's (McAdams, Sifakis & Teran 2010).
//! * **Preconditioners.** None, Jacobi, Incomplete Poisson (two stencil passes) and multigrid: the CPU
//!   solver's hierarchy (coarse operators, Dirichlet link weights, ghost shells), built on the device from
//!   the finest level's cell kinds by the CPU's rules (`mg_build.wgsl`) into packed buffers, and the same
//!   V-cycle (red-black Gauss–Seidel, full weighting, multilinear prolongation, the coarsest level by
//!   symmetric sweeps), a launch per step on large levels and one workgroup for all the small ones
//!   (`mg_level.wgsl`, `mg_small.wgsl`, both over the per-cell steps of `mg_common.wgsl`), the update of
//!   `x` and `r` and the product `r · z` sharing launches with the cycle's ends where the adapter allows
//!   ([`GpuPoisson::set_fused_launches`], `mg_cg.wgsl`). The
//!   incomplete Cholesky factors are sequential by nature and stay on the CPU: [`PoissonDevice::solve`]
//!   hands them back.
//! * **No read-back per iteration.** The scalars (α, β, the residual, the stopping rule) live in a device
//!   buffer and are computed by the reduction kernel; once the solve stops, every later kernel of the batch
//!   returns at once. Iterations are submitted in batches, and the state is read after each: first as many
//!   as the solver expects ([`PoissonSolver::expected_iterations`], its last solve's), then 1, 2, 4, 8 and
//!   16; for a solver's first solve 4, 8, then 16.
//! * **Determinism.** Every sum is a per-workgroup tree followed by one workgroup adding the partial sums in
//!   a fixed order, and no kernel writes a cell that another thread of the same pass reads: a solve repeats
//!   bit for bit on one device. Red-black Gauss–Seidel updates one colour per pass (per barrier in one
//!   workgroup).
//! * **Null space.** Where groups of unknowns touch no Dirichlet cell (a closed container full of liquid;
//!   the volume correction's bodies of liquid, each sealed by the air it treats as a wall), each group's
//!   mean is removed as on the CPU: on the finest level by per-workgroup sums that each group's workgroups
//!   then add in a fixed order (`null.wgsl`, its index built on the host, [`null`]), on the coarsest by one
//!   thread in cell order (`mg_small.wgsl`).
//! * **The face field shared with FLIP's particle passes** ([`GpuPoisson::share_faces`]). The volume
//!   correction's solve leaves its solution on the device and writes its gradient there
//!   ([`PoissonDevice::solve_gradient`]). Both solves take their right-hand side from there when the
//!   particle device formed it ([`PoissonDevice::solve_rhs_in_faces`],
//!   [`PoissonDevice::solve_gradient_rhs_in_faces`]: masked to the unknowns as the host pads it). The
//!   projection's solve afterwards copies its solution there for the particle device to project its own
//!   velocity ([`PoissonDevice::solution_to_faces`]). The vortex particles' vector solve shares it with
//!   the splat, which forms each component's right-hand side there (`eddies_gpu::vpm::GpuSplat`).

use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytemuck::{Pod, Zeroable};
use eddies::linsolve::{
    CellKind, DomainBoundary, Guess, Info, Layout, MultigridParams, PoissonDevice, PoissonOperator,
    PoissonSolver, PreconditionerKind, Smoother, SolveError, StopReason,
};
use rayon::prelude::*;

use crate::device::{
    copy_bytes, fold_groups, Bindable, BufferRange, Gpu, GpuError, Launch, Scratch,
};

mod null;
use null::{null_index, NullIndex};

const COMMON: &str = include_str!("common.wgsl");
const APPLY: &str = include_str!("apply.wgsl");
const DOT: &str = include_str!("dot.wgsl");
const REDUCE: &str = include_str!("reduce.wgsl");
const UPDATE: &str = include_str!("update.wgsl");
const ELEMENTWISE: &str = include_str!("elementwise.wgsl");
const NULL: &str = include_str!("null.wgsl");
const INCOMPLETE_POISSON: &str = include_str!("incomplete_poisson.wgsl");
const MG_LOAD: &str = include_str!("mg_load.wgsl");
const MG_COMMON: &str = include_str!("mg_common.wgsl");
const MG_LEVEL: &str = include_str!("mg_level.wgsl");
const MG_SMALL: &str = include_str!("mg_small.wgsl");
const MG_BUILD: &str = include_str!("mg_build.wgsl");
const MG_ENDS: &str = include_str!("mg_ends.wgsl");
const MG_CG: &str = include_str!("mg_cg.wgsl");
const FACES: &str = include_str!("faces.wgsl");

/// The longest first batch of iterations ([`PoissonSolver::expected_iterations`]).
const MAX_FIRST_BATCH: usize = 256;

/// Every kernel with the constants its variants take (for the tests that compile them without a GPU); the
/// V-cycle's kernels come after `mg_common.wgsl`.
#[cfg(test)]
const KERNELS: [(&str, &str, &[&str]); 14] = [
    (
        "apply",
        APPLY,
        &["const MODE: u32 = 0u;", "const MODE: u32 = 1u;"],
    ),
    ("dot", DOT, &[""]),
    ("reduce", REDUCE, &["const ACTION: u32 = 4u;"]),
    ("update", UPDATE, &[""]),
    (
        "elementwise",
        ELEMENTWISE,
        &[
            "const OP: u32 = 0u;",
            "const OP: u32 = 2u;",
            "const OP: u32 = 3u;",
        ],
    ),
    ("faces", FACES, &[""]),
    (
        "null",
        NULL,
        &[
            "const OP: u32 = 0u;",
            "const OP: u32 = 1u;",
            "const OP: u32 = 2u;",
            "const OP: u32 = 3u;",
        ],
    ),
    (
        "incomplete-poisson",
        INCOMPLETE_POISSON,
        &["const PASS: u32 = 0u;", "const PASS: u32 = 1u;"],
    ),
    (
        "mg-load",
        MG_LOAD,
        &["const OP: u32 = 0u;", "const OP: u32 = 1u;"],
    ),
    (
        "mg-level",
        MG_LEVEL,
        &[
            "const OP: u32 = 0u;",
            "const OP: u32 = 2u;",
            "const OP: u32 = 3u;",
            "const OP: u32 = 4u;",
            "const OP: u32 = 5u;",
            "const OP: u32 = 6u;",
        ],
    ),
    (
        "mg-small",
        MG_SMALL,
        &["const SWEEPS: u32 = 24u;\nconst CYCLE_SWEEPS: u32 = 2u;"],
    ),
    (
        "mg-ends",
        MG_ENDS,
        &["const OP: u32 = 0u;", "const OP: u32 = 1u;"],
    ),
    (
        "mg-cg",
        MG_CG,
        &["const OP: u32 = 0u;", "const OP: u32 = 1u;"],
    ),
    (
        "mg-build",
        MG_BUILD,
        &[
            "const OP: u32 = 0u;",
            "const OP: u32 = 1u;",
            "const OP: u32 = 2u;",
            "const OP: u32 = 3u;",
            "const OP: u32 = 4u;",
        ],
    ),
];

/// Whether a kernel's source needs `mg_common.wgsl` before it.
fn uses_mg_common(source: &str) -> bool {
    source == MG_LEVEL || source == MG_SMALL || source == MG_ENDS || source == MG_CG
}

/// Storage buffers that a launch of `mg_cg.wgsl` binds: the conjugate gradients' passes over the finest level
/// fused with the V-cycle's ends there run where the adapter binds this many to one kernel (NVIDIA's Vulkan
/// driver and lavapipe do; WebGPU's default is 8), the passes apart elsewhere.
const FUSED_STORAGE_BUFFERS: u32 = 13;

/// The environment variable that, set to `1`, keeps the solves' fusable passes apart
/// ([`GpuPoisson::set_fused_launches`]), so that one binary measures both on a lent GPU.
pub const SEPARATE_VAR: &str = "EDDIES_GPU_SEPARATE_PASSES";

/// Levels of at most this many padded cells are "small" on a software adapter: the V-cycle below the largest
/// of them runs in one workgroup (`mg_small.wgsl`), where a launch per step would cost more than its
/// arithmetic (a 10³ level is four cells per thread and step). There an 8³ level (10³ padded) is small, a 16³
/// one is not: one workgroup on one CPU core would take longer over its 5832 cells than the thirteen launches
/// it saves.
const SMALL_CELLS: u64 = 1100;

/// The same on a hardware GPU, where a launch and the barrier after it cost tens of microseconds: 16³ levels
/// (5832 padded cells, 23 a thread) are small too. On an H200, the two solves of a FLIP dam-break step
/// iterated in 122–130 ms at 256³ this way against 140–152 ms with 16³ levels launched, 7.7–8.4 against
/// 8.4–8.7 ms at 64³ (the same binaries alternated on one machine; docs/PERFORMANCE.md).
const SMALL_CELLS_HARDWARE: u64 = 6000;

/// Threads per workgroup of every kernel (`WG` in `common.wgsl`).
const WG: u64 = 256;

/// The prelude of a kernel: dimension, gating and its own constants, then the shared definitions (and the
/// V-cycle's, for its kernels).
pub(crate) fn prelude(dim: usize, gated: bool, consts: &str, mg: bool) -> String {
    let mg = if mg { MG_COMMON } else { "" };
    format!("const DIM: u32 = {dim}u;\nconst GATED: bool = {gated};\n{consts}\n{COMMON}\n{mg}")
}

/// `Level` of `common.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
struct LevelUniform {
    dims: [u32; 4],
    padded: [u32; 4],
    strides: [u32; 4],
    h2: f32,
    _pad: u32,
    base: u32,
    ghost_base: u32,
}

/// `Cg` of `common.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
struct CgUniform {
    level: LevelUniform,
    scale: f64,
    tolerance: f64,
    null_groups: u32,
    null_entries: u32,
    _pad: [u32; 2],
    max_iterations: u32,
    partials: u32,
    identity: u32,
    _pad2: u32,
}

/// `Faces` of `faces.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
struct FacesUniform {
    dims: [[u32; 4]; 3],
    coef: f64,
    total: u32,
    _pad: u32,
}

/// Where a solve's guess comes from and its solution goes ([`GpuPoisson::run`]).
enum Solution<'a> {
    /// The guess in, the solution out, on the host.
    Host(&'a mut [f64]),
    /// The guess given or kept; the solution kept, its gradient into the face field
    /// ([`PoissonDevice::solve_gradient`]).
    Device(Guess<'a>),
}

/// A solution kept on the device ([`PoissonDevice::solve_gradient`]).
struct Kept {
    buffer: wgpu::Buffer,
    /// The token that names it, and its padded length.
    token: u64,
    len: u64,
}

/// The guess of a solve that the host gave.
fn guess_of<'a>(out: &'a Solution<'_>) -> Option<&'a [f64]> {
    match out {
        Solution::Host(x) => Some(x),
        Solution::Device(Guess::Given(g)) => Some(g),
        Solution::Device(Guess::Kept(_)) => None,
    }
}

/// `State` of `common.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
struct State {
    b_norm: f64,
    rz: f64,
    alpha: f64,
    beta: f64,
    residual: f64,
    iteration: u32,
    done: u32,
    _pad: [u32; 2],
}

// Why a solve stopped (`State::done`), as `common.wgsl` numbers them.
const RUNNING: u32 = 0;
const CONVERGED: u32 = 1;
const ZERO_RHS: u32 = 2;
const BREAKDOWN_RZ: u32 = 3;
const BREAKDOWN_PQ: u32 = 4;
const BREAKDOWN_RESIDUAL: u32 = 5;
const BAD_RHS: u32 = 6;
const BAD_GUESS: u32 = 7;
const NO_CONVERGENCE: u32 = 8;

// What the reduction kernel does with its total (`ACTION` in `reduce.wgsl`).
const B_NORM: u32 = 0;
const FIRST_RESIDUAL: u32 = 1;
const FIRST_RZ: u32 = 2;
const ALPHA: u32 = 3;
const RESIDUAL: u32 = 4;
const BETA: u32 = 5;

// `OP` of `elementwise.wgsl`.
const XPBY: u32 = 0;
const COPY: u32 = 1;
const JACOBI: u32 = 2;
const MASK: u32 = 3;

// `OP` of `null.wgsl`.
const NULL_SUMS: u32 = 0;
const NULL_MEANS: u32 = 1;
const NULL_SUBTRACT: u32 = 2;
const NULL_SUBTRACT_DOT: u32 = 3;

/// Workgroups for one thread per entry of a vector of `n`, folded into two dimensions of at most `per_axis`
/// each, and how many of them there are.
fn groups_for(n: u64, per_axis: u32) -> ([u32; 3], u32) {
    let total = n.div_ceil(WG).max(1);
    (fold_groups(total, per_axis), total as u32)
}

/// The uniform of a level of `layout` and cell size `spacing` (m), its entries from `base` in the packed
/// vectors and from `ghost_base` in the packed ghost coefficients.
fn level_uniform<const D: usize>(
    l: &Layout<D>,
    spacing: f64,
    base: u64,
    ghost_base: u64,
) -> LevelUniform {
    let mut u = LevelUniform {
        dims: [1; 4],
        padded: [1; 4],
        strides: [0; 4],
        h2: (spacing * spacing) as f32,
        _pad: 0,
        base: base as u32,
        ghost_base: ghost_base as u32,
    };
    for a in 0..D {
        u.dims[a] = l.dims[a] as u32;
        u.padded[a] = l.padded[a] as u32;
        u.strides[a] = l.strides[a] as u32;
    }
    u.strides[D..3].fill(l.len() as u32);
    u.padded[3] = l.len() as u32;
    u
}

/// The V-cycle's levels on the device, packed: each vector of every level in one buffer, level l's entries
/// from `base[l]` (the finest level at 0; the diagonal is [`Finest::diag`], the operator's at 0), the ghost
/// coefficients and link weights of the coarse levels from `ghost_base[l]`. The device builds the coarse
/// levels from the finest one's cell kinds (`mg_build.wgsl`).
struct Hierarchy {
    /// Cells per axis of each level, finest first, and their padded count.
    dims: Vec<[usize; 3]>,
    cells: Vec<u64>,
    /// Multiples of 4, so that each level's kinds start a word of their own.
    base: Vec<u64>,
    ghost_base: Vec<u64>,
    /// Ghost coefficients of all levels together.
    ghost_len: u64,
    /// Whether the problem last built has a null space (then `labels` holds the coarsest level's).
    singular: bool,
    /// The unknowns of each level, as the build counts them.
    counts: wgpu::Buffer,
    /// The levels the cycle uses: down to the last before the first without an unknown, as on the CPU.
    used: usize,
    /// The launches of the build (all levels), and what they were recorded for: the kind of the cells beyond
    /// the grid, and the buffers (by their sizes, [`GpuPoisson::buffer_sizes`]: the finest level's are
    /// reallocated apart from these).
    build: Vec<Launch>,
    build_key: (u32, Vec<u64>),
    /// The launch that labels the null space of a level (the coarsest in use), recorded with `build`.
    label: Option<(usize, Launch)>,
    /// The dimension the buffers were laid out for.
    dim: usize,
    /// `array<Level>`, one per level.
    levels: wgpu::Buffer,
    ghost: wgpu::Buffer,
    /// The kind of every padded cell of every level, a byte each (packed four to a word), from `base[l]`.
    kinds: wgpu::Buffer,
    /// The coarse levels' Dirichlet link weights, `2D` per cell, from `ghost_base[l]`.
    weights: wgpu::Buffer,
    /// The coarsest level's null-space labels (0 for its group, `u32::MAX` elsewhere), then as many words of
    /// the labelling's work.
    labels: wgpu::Buffer,
    b: wgpu::Buffer,
    x: wgpu::Buffer,
    t: wgpu::Buffer,
}

impl Hierarchy {
    /// Entries of a packed vector: every level's padded cells, each level from its aligned base.
    fn total(&self) -> u64 {
        self.base.last().expect("a level") + self.cells.last().expect("a level")
    }
}

/// The finest level's vectors.
struct Finest {
    cells: u64,
    cg: wgpu::Buffer,
    state: wgpu::Buffer,
    history: wgpu::Buffer,
    partials: wgpu::Buffer,
    diag: wgpu::Buffer,
    /// Each cell's group of the null space (`u32::MAX`: none).
    labels: wgpu::Buffer,
    /// The null space's index (`null.wgsl`, [`null`]) and its sums and means.
    null_index: wgpu::Buffer,
    null_sums: wgpu::Buffer,
    /// The Krylov vectors, ranges of the solver's [`Scratch`] (of its generation `generation`).
    x: BufferRange,
    r: BufferRange,
    p: BufferRange,
    q: BufferRange,
    /// The preconditioned residual: `q`'s buffer but for Incomplete Poisson, whose two passes go from `r`
    /// through `q` to it. `q` (`A p`) is dead from the update of `x` and `r` to the next product, the span in
    /// which `z` lives.
    z: BufferRange,
    separate_z: bool,
    generation: u64,
}

/// How long the parts of the solves since the last [`GpuPoisson::take_times`] took (ms, wall clock, each
/// waited for), summed.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SolveTimes {
    /// Solves that ran on the device.
    pub solves: usize,
    /// Writing the operator and the vectors to the device.
    pub upload_ms: f64,
    /// Building the multigrid hierarchy on the device.
    pub build_ms: f64,
    /// The iterations, read-backs of the state included.
    pub iterate_ms: f64,
    /// Reading the solution back.
    pub download_ms: f64,
    /// Batches submitted (each followed by a read-back of the state).
    pub batches: usize,
    /// Kernel launches of the batches (the iterations past a solution's included, which return at once).
    pub launches: usize,
    /// Of `iterate_ms`, recording and submitting the batches' launches on the CPU (the device waits for
    /// each batch's recording).
    pub record_ms: f64,
    /// Of `solves`, those whose solution stayed on the device, its gradient in the face field
    /// ([`PoissonDevice::solve_gradient`]).
    pub kept: usize,
    /// Solves whose right-hand side a particle device left in the face field
    /// ([`PoissonDevice::solve_rhs_in_faces`]).
    pub rhs_in_faces: usize,
    /// The right-hand sides sent by the host (bytes).
    pub rhs_bytes_up: u64,
}

/// The pressure solve on the GPU (see the module documentation). Its buffers grow to the largest problem and
/// are reused across solves.
pub struct GpuPoisson {
    gpu: Arc<Gpu>,
    finest: Option<Finest>,
    hierarchy: Option<Hierarchy>,
    /// Workgroups per dimension of a launch (the adapter's limit): larger launches fold into two.
    per_axis: u32,
    /// What the solves since the last [`take_times`](Self::take_times) took.
    times: SolveTimes,
    /// The [`PoissonSolver::operator_id`] whose operator and hierarchy the buffers hold: a solve of the same
    /// one (the three components of the vortex method's vector solve, the next step's of an unchanged box)
    /// sends only its vectors.
    uploaded: Option<u64>,
    /// The launches of the last solve and what they were recorded for: a solve of the same shape on the same
    /// buffers reuses them.
    plan: Option<(PlanKey, Arc<Plan>)>,
    /// Where the Krylov vectors live: the solver's own, or shared with FLIP's particle passes
    /// ([`share_scratch`](Self::share_scratch)).
    scratch: Scratch,
    /// Levels of at most this many padded cells run in one workgroup ([`SMALL_CELLS`] on a software
    /// adapter, [`SMALL_CELLS_HARDWARE`] on a GPU).
    small_cells: u64,
    /// Whether passes over the finest level share launches
    /// ([`set_fused_launches`](Self::set_fused_launches)).
    fuse: bool,
    /// Whether the adapter binds [`FUSED_STORAGE_BUFFERS`] storage buffers to a kernel, as the fusion of a
    /// multigrid solve's update and its V-cycle's ends needs (`mg_cg.wgsl`).
    mg_cg: bool,
    /// The finest level's cell kinds as bytes, for the upload.
    kind_bytes: Vec<u8>,
    /// The null space's groups and slots of the operator in the buffers ([`NullIndex`]).
    null: (u32, u32),
    /// The face field into which [`PoissonDevice::solve_gradient`] writes, shared with the particle pass
    /// that reads it, or with the splat that forms the vortex particles' right-hand sides there
    /// ([`share_faces`](Self::share_faces)); `None`: those solves are not offered.
    faces: Option<Scratch>,
    /// The solution the last [`PoissonDevice::solve_gradient`] kept, the next token, and the uniform of
    /// the gradient's kernel.
    kept: Option<Kept>,
    next_token: u64,
    faces_uniform: Option<wgpu::Buffer>,
    /// The operator ([`PoissonSolver::operator_id`]) of the last solve, when it returned its solution to the
    /// host and left it in the finest level's `x` (`true`: the solution was zero, a zero right-hand side),
    /// for [`PoissonDevice::solution_to_faces`].
    last_solved: Option<(u64, bool)>,
}

/// What a [`Plan`]'s launches depend on: the dimension, the preconditioner, the null space, and the buffers
/// (identified by their sizes, as every reallocation changes one).
#[derive(Clone, Debug, PartialEq, Eq)]
struct PlanKey {
    dim: usize,
    kind: PreconditionerKind,
    singular: bool,
    /// Workgroups of the null space's means: its groups rounded up to a power of two (the launch's extra
    /// workgroups return at once), so that a new operator re-records the plan only when they double.
    null_groups: u32,
    per_axis: u32,
    small_cells: u64,
    /// Whether passes are fused ([`GpuPoisson::set_fused_launches`]): the null space's removal from `z` with
    /// the product `r · z` (`null.wgsl`); and `fused`, for multigrid on a large finest level where the
    /// adapter allows, the update and the cycle's ends (`mg_cg.wgsl`).
    fuse: bool,
    fused: bool,
    /// The V-cycle's sweeps on every level and on the coarsest.
    sweeps: Option<(u32, u32)>,
    /// The multigrid levels the cycle uses.
    levels: usize,
    buffers: Vec<u64>,
}

impl GpuPoisson {
    /// Runs the levels of at most `cells` padded cells in one workgroup (the default depends on the
    /// adapter, [`SMALL_CELLS`] and [`SMALL_CELLS_HARDWARE`]); the solution's bits do not, as both paths
    /// take the same steps with the same arithmetic.
    pub fn set_small_cells(&mut self, cells: u64) {
        self.small_cells = cells;
    }

    /// Fuses (`true`, the default unless [`SEPARATE_VAR`] is `1`) or separates passes over the finest level
    /// that need no neighbour's result of the pass before: the product `r · z` with the pass that leaves
    /// `z`, the removal of its null-space part or, without a null space, the V-cycle's end; and the update
    /// of `x` and `r` with the V-cycle's start. Two launches and two passes fewer per multigrid iteration,
    /// one per iteration of the other preconditioners with a null space. The bits do not depend on it, as
    /// both take the same steps with the same arithmetic. The V-cycle's ends stay apart on an adapter that
    /// binds fewer than [`FUSED_STORAGE_BUFFERS`] storage buffers to a kernel
    /// ([`fuses_cycle_ends`](Self::fuses_cycle_ends)).
    pub fn set_fused_launches(&mut self, on: bool) {
        self.fuse = on;
    }

    /// Whether multigrid solves on a large finest level fuse their V-cycle's ends with the conjugate
    /// gradients' passes ([`set_fused_launches`](Self::set_fused_launches), and the adapter's limit).
    pub fn fuses_cycle_ends(&self) -> bool {
        self.fuse && self.mg_cg
    }

    /// The solver on `gpu`.
    ///
    /// # Errors
    /// [`GpuError::Limit`] when the adapter computes in single precision only: the solve needs `SHADER_F64`.
    pub fn new(gpu: Arc<Gpu>) -> Result<Self, GpuError> {
        if !gpu.has_f64() {
            return Err(GpuError::Limit(format!(
                "{} has no double precision in shaders (SHADER_F64), which the pressure solve on the GPU needs: \
                 run FLIP with --backend cpu",
                gpu.adapter().name
            )));
        }
        let per_axis = gpu.limits().max_compute_workgroups_per_dimension;
        let small_cells = if gpu.adapter().software {
            SMALL_CELLS
        } else {
            SMALL_CELLS_HARDWARE
        };
        let mg_cg = gpu.limits().max_storage_buffers_per_shader_stage >= FUSED_STORAGE_BUFFERS;
        Ok(Self {
            per_axis,
            small_cells,
            fuse: !std::env::var(SEPARATE_VAR).is_ok_and(|v| v == "1"),
            mg_cg,
            gpu,
            finest: None,
            hierarchy: None,
            times: SolveTimes::default(),
            uploaded: None,
            plan: None,
            kind_bytes: Vec::new(),
            null: (0, 0),
            scratch: Scratch::new(),
            faces: None,
            kept: None,
            next_token: 0,
            faces_uniform: None,
            last_solved: None,
        })
    }

    /// Offers [`PoissonDevice::solve_gradient`], writing the gradient into `faces`, from which FLIP's
    /// particle pass reads the volume correction's displacement (`GpuTransfer::share_faces`), and
    /// [`PoissonDevice::solution_to_faces`], from which it reads the projection's pressure.
    pub fn share_faces(&mut self, faces: Scratch) {
        self.faces = Some(faces);
    }

    /// Keeps the Krylov vectors in `scratch`, which passes that never run during a solve share (FLIP's
    /// particle-to-grid sort, `GpuTransfer::share_scratch`): each solve writes its vectors anew.
    pub fn share_scratch(&mut self, scratch: Scratch) {
        self.scratch = scratch;
        self.finest = None;
        self.plan = None;
    }

    /// The scratch buffer that holds the Krylov vectors.
    pub fn scratch(&self) -> &Scratch {
        &self.scratch
    }

    /// Bytes of the Krylov vectors of the last solve (four, five with Incomplete Poisson), in the scratch
    /// buffer, which may be larger for another problem or another user.
    pub fn vector_bytes(&self) -> u64 {
        self.finest
            .as_ref()
            .map_or(0, |f| (4 + f.separate_z as u64) * f.x.size)
    }

    /// Folds launches of more than `n` workgroups (at least 1) into two dimensions, below the adapter's own
    /// limit; the tests exercise the folding on small grids this way.
    pub fn limit_workgroups_per_dimension(&mut self, n: u32) {
        self.per_axis = n.clamp(1, self.per_axis);
    }

    /// What the solves since the last call took, and a fresh count.
    pub fn take_times(&mut self) -> SolveTimes {
        std::mem::take(&mut self.times)
    }

    /// The sizes of every buffer a solve binds and the multigrid levels' shapes, in a fixed order: a new
    /// allocation changes one.
    fn buffer_sizes(&self) -> Vec<u64> {
        let mut sizes = Vec::new();
        if let Some(f) = &self.finest {
            sizes.extend([
                f.cells,
                f.history.size(),
                f.labels.size(),
                f.null_index.size(),
                f.null_sums.size(),
                f.separate_z as u64,
                f.generation,
            ]);
        }
        if let Some(h) = &self.hierarchy {
            // The levels' shapes, not only their cells: another shape of as many cells has buffers of its own.
            sizes.extend(h.dims.iter().flatten().map(|&n| n as u64));
            sizes.extend(&h.cells);
            sizes.push(h.labels.size());
        }
        sizes
    }

    /// Device memory held (bytes), apart from the scratch buffer ([`scratch`](Self::scratch)) that holds
    /// the Krylov vectors.
    pub fn bytes(&self) -> u64 {
        let finest = self.finest.as_ref().map_or(0, |f| {
            [
                &f.cg,
                &f.state,
                &f.history,
                &f.partials,
                &f.diag,
                &f.labels,
                &f.null_index,
                &f.null_sums,
            ]
            .iter()
            .map(|b| b.size())
            .sum::<u64>()
        });
        let levels: u64 = self.hierarchy.as_ref().map_or(0, |h| {
            [
                &h.levels, &h.ghost, &h.kinds, &h.weights, &h.labels, &h.b, &h.x, &h.t,
            ]
            .iter()
            .map(|b| b.size())
            .sum()
        });
        let kept = self.kept.as_ref().map_or(0, |k| k.buffer.size());
        finest + levels + kept
    }

    /// The multigrid levels that the device built for the last multigrid solve and its cycle uses, finest
    /// first (for inspection and the tests that hold them to the CPU's hierarchy): `None` before any.
    ///
    /// # Errors
    /// As [`Gpu::read`].
    pub fn built_levels(&self) -> Result<Option<Vec<BuiltLevel>>, GpuError> {
        let (Some(h), Some(f)) = (&self.hierarchy, &self.finest) else {
            return Ok(None);
        };
        if self.uploaded.is_none() {
            return Ok(None);
        }
        let last = h.used - 1;
        // The finest level has no ghost coefficients: its range is empty and not read.
        let ghost_len =
            |l: usize| h.ghost_base.get(l + 1).unwrap_or(&h.ghost_len) - h.ghost_base[l];
        let mut ranges = Vec::new();
        for l in 0..=last {
            ranges.push((&f.diag, 4 * h.base[l], 4 * h.cells[l]));
            if l > 0 {
                ranges.push((&h.ghost, 4 * h.ghost_base[l], 4 * ghost_len(l)));
            }
        }
        // The coarsest level's labels and, after them, the number of its groups that the cycle reads.
        ranges.push((&h.labels, 0, 4 * h.cells[last] + 4));
        let mut bytes = self.gpu.read(&ranges)?.into_iter();
        let mut levels = Vec::with_capacity(last + 1);
        for l in 0..=last {
            let diagonal_units = bytemuck::pod_collect_to_vec(&bytes.next().expect("read"));
            let ghost = match l {
                0 => Vec::new(),
                _ => bytemuck::pod_collect_to_vec(&bytes.next().expect("read")),
            };
            levels.push(BuiltLevel {
                dims: h.dims[l],
                diagonal_units,
                ghost,
                labels: None,
                groups: None,
            });
        }
        let mut words: Vec<u32> = bytemuck::pod_collect_to_vec(&bytes.next().expect("read"));
        let groups = words.pop().expect("the count");
        levels[last].groups = Some(groups);
        levels[last].labels = h.singular.then_some(words);
        Ok(Some(levels))
    }

    /// The finest level's buffers for `cells` padded cells and `history` residuals, the diagonal for
    /// `diag_cells` (every level of the V-cycle's).
    fn finest(
        &mut self,
        cells: u64,
        diag_cells: u64,
        history: u64,
        singular: bool,
        separate_z: bool,
    ) -> Result<(), GpuError> {
        let gpu = &self.gpu;
        gpu.check_binding("the pressure solve", 8 * cells)?;
        // The Krylov vectors in the scratch buffer, each from an aligned offset: x, r, p, q, then z if it
        // has a buffer of its own.
        let stride =
            (8 * cells).next_multiple_of(gpu.limits().min_storage_buffer_offset_alignment as u64);
        let vectors = if separate_z { 5 } else { 4 };
        let (scratch, generation) =
            self.scratch
                .get(gpu, "the pressure solve's vectors", stride * vectors)?;
        let fits = self.finest.as_ref().is_some_and(|f| {
            f.cells == cells
                && f.diag.size() == 4 * diag_cells
                && f.history.size() >= 8 * history
                && (f.labels.size() >= 4 * cells || !singular)
                && f.separate_z == separate_z
                && f.generation == generation
        });
        if fits {
            return Ok(());
        }
        self.uploaded = None;
        let (_, partials) = groups_for(cells, self.per_axis);
        let labels = if singular { 4 * cells } else { 4 };
        self.finest = Some(gpu.allocating("the pressure solve", || {
            let vector = |k: u64| BufferRange {
                buffer: scratch.clone(),
                offset: k * stride,
                size: 8 * cells,
            };
            let q = vector(3);
            Finest {
                cells,
                cg: gpu.uniform::<CgUniform>("pressure cg"),
                state: gpu.buffer("pressure state", std::mem::size_of::<State>() as u64),
                history: gpu.buffer("pressure history", 8 * history.next_power_of_two()),
                partials: gpu.buffer("pressure partials", 8 * partials as u64),
                diag: gpu.buffer("pressure diagonal", 4 * diag_cells),
                labels: gpu.buffer("pressure null space", labels),
                null_index: gpu.buffer("pressure null space index", 16),
                null_sums: gpu.buffer("pressure null space sums", 16),
                x: vector(0),
                r: vector(1),
                p: vector(2),
                z: if separate_z { vector(4) } else { q.clone() },
                q,
                separate_z,
                generation,
            }
        })?);
        Ok(())
    }

    /// The V-cycle's packed buffers for a finest level of `dims` cells coarsened by `params`.
    fn hierarchy<const D: usize>(
        &mut self,
        dims: [usize; D],
        params: &MultigridParams,
    ) -> Result<(), GpuError> {
        let dims: Vec<[usize; 3]> = params
            .level_dims(dims)
            .into_iter()
            .map(|d| std::array::from_fn(|a| if a < D { d[a] } else { 1 }))
            .collect();
        if self
            .hierarchy
            .as_ref()
            .is_some_and(|h| h.dims == dims && h.dim == D)
        {
            return Ok(());
        }
        self.uploaded = None;
        let gpu = &self.gpu;
        let cells: Vec<u64> = dims
            .iter()
            .map(|d| d[..D].iter().map(|&n| n as u64 + 2).product())
            .collect();
        let mut base = Vec::with_capacity(cells.len());
        let mut ghost_base = Vec::with_capacity(cells.len());
        let (mut at, mut ghost_at) = (0, 0);
        for (l, &n) in cells.iter().enumerate() {
            base.push(at);
            ghost_base.push(ghost_at);
            at = (at + n).next_multiple_of(4);
            if l > 0 {
                ghost_at += 2 * D as u64 * n;
            }
        }
        gpu.check_binding("the multigrid levels", 4 * ghost_at.max(at))?;
        let coarsest = *cells.last().expect("a level");
        self.hierarchy = Some(gpu.allocating("the multigrid levels", || {
            let vector = |label| gpu.buffer(label, 4 * at);
            Hierarchy {
                levels: gpu.buffer("mg levels", 64 * cells.len() as u64),
                ghost: gpu.buffer("mg ghost", 4 * ghost_at.max(1)),
                kinds: gpu.buffer("mg kinds", at),
                weights: gpu.buffer("mg link weights", 4 * ghost_at.max(1)),
                labels: gpu.buffer("mg null space", 8 * coarsest),
                b: vector("mg b"),
                x: vector("mg x"),
                t: vector("mg t"),
                dims,
                base,
                ghost_base,
                ghost_len: ghost_at,
                singular: false,
                counts: gpu.buffer("mg unknowns", 4 * cells.len() as u64),
                used: cells.len(),
                build: Vec::new(),
                build_key: (0, Vec::new()),
                label: None,
                dim: D,
                cells,
            }
        })?);
        Ok(())
    }

    /// Builds the hierarchy of `op` on the device (`mg_build.wgsl`) from the finest level's cell kinds: per
    /// coarse level its kinds (with a count of its unknowns), its link weights and diagonal, its ghost
    /// coefficients; then, from the counts read back, the levels the cycle uses, and for a problem with a null
    /// space the coarsest level's labels.
    fn build_hierarchy<const D: usize>(
        &mut self,
        op: &PoissonOperator<D>,
        singular: bool,
    ) -> Result<(), GpuError> {
        let outside = match op.outside() {
            DomainBoundary::Open => CellKind::Dirichlet,
            DomainBoundary::Solid => CellKind::Solid,
        } as u32;
        let h = self.hierarchy.as_ref().expect("made before");
        let (labels, groups) = op.null_space();
        let mut uniforms = Vec::with_capacity(h.cells.len());
        for (l, d) in h.dims.iter().enumerate() {
            let layout = Layout::new(std::array::from_fn::<_, D, _>(|a| d[a]));
            let spacing = op.spacing() * (1u64 << l) as f64;
            uniforms.push(level_uniform(&layout, spacing, h.base[l], h.ghost_base[l]));
        }
        self.gpu.write(&h.levels, &uniforms);
        let kinds = op.kinds();
        self.kind_bytes.resize(kinds.len().next_multiple_of(4), 0);
        self.kind_bytes[..kinds.len()]
            .par_iter_mut()
            .zip(kinds)
            .for_each(|(b, &k)| *b = k as u8);
        self.gpu.write_at(&h.kinds, 0, &self.kind_bytes);
        let levels = h.cells.len();
        self.gpu.write(&h.counts, &vec![0u32; levels]);
        let build_key = (outside, self.buffer_sizes());
        if h.build.is_empty() || h.build_key != build_key {
            // The finest level's diagonal from its kinds (the host sends the kinds, a byte a cell, instead of
            // the diagonal's four), then each coarse level from the one above it.
            let mut build = vec![self.build_step::<D>(4, 0, outside, h.cells[0])?];
            for l in 1..levels {
                build.push(self.build_step::<D>(0, l, outside, h.cells[l].div_ceil(4))?);
                build.push(self.build_step::<D>(1, l, outside, h.cells[l])?);
                build.push(self.build_step::<D>(2, l, outside, h.cells[l])?);
            }
            let h = self.hierarchy.as_mut().expect("made before");
            h.build = build;
            h.build_key = build_key;
            h.label = None;
        }
        let h = self.hierarchy.as_ref().expect("made before");
        self.submit(&[&h.build]);
        let counts: Vec<u32> =
            bytemuck::pod_collect_to_vec(&self.gpu.read(&[(&h.counts, 0, 4 * levels as u64)])?[0]);
        let used = 1 + counts[1..].iter().take_while(|&&c| c > 0).count();
        // The labels of the coarsest level in use, then the number of its groups, which the cycle reads
        // (`mg_small.wgsl`): 0 for a regular problem. A singular one's labelling takes as many words of work
        // as labels, the first of which receives the number. The coarsest level in use is the geometric
        // coarsest level unless a level without unknowns ends the hierarchy earlier.
        let n = h.cells[used - 1];
        let need = match used {
            1 => 4 * n + 4,
            _ if singular => 8 * n,
            _ => 4 * n + 4,
        };
        if h.labels.size() < need {
            let gpu = self.gpu.clone();
            let labels =
                gpu.allocating("the multigrid levels", || gpu.buffer("mg null space", need))?;
            let h = self.hierarchy.as_mut().expect("made before");
            h.labels = labels;
            // Recorded with the old buffer (the build's launches are re-recorded at the next new operator,
            // as the buffers' sizes have changed).
            h.label = None;
        }
        let h = self.hierarchy.as_ref().expect("made before");
        let count = |groups: usize| bytemuck::bytes_of(&(groups as u32)).to_vec();
        if !singular {
            self.gpu.write_at(&h.labels, 4 * n, &count(0));
        } else if used == 1 {
            self.gpu.write(&h.labels, labels);
            self.gpu.write_at(&h.labels, 4 * n, &count(groups.len()));
        } else {
            if h.label.as_ref().is_none_or(|(l, _)| *l != used - 1) {
                let launch = self.build_step::<D>(3, used - 1, outside, WG)?;
                self.hierarchy.as_mut().expect("made before").label = Some((used - 1, launch));
            }
            let h = self.hierarchy.as_ref().expect("made before");
            let (_, launch) = h.label.as_ref().expect("recorded above");
            self.submit(&[std::slice::from_ref(launch)]);
        }
        let h = self.hierarchy.as_mut().expect("made before");
        h.singular = singular;
        h.used = used;
        Ok(())
    }

    /// A launch of step `op` of `mg_build.wgsl` building level `coarse` (from the one above it; the finest
    /// level, 0, from its own kinds) over `threads` threads.
    fn build_step<const D: usize>(
        &self,
        op: u32,
        coarse: usize,
        outside: u32,
        threads: u64,
    ) -> Result<Launch, GpuError> {
        let f = self.finest.as_ref().expect("buffers of a solve");
        let h = self
            .hierarchy
            .as_ref()
            .expect("the hierarchy of a multigrid solve");
        let uniform = self.gpu.uniform::<[u32; 4]>("mg build");
        self.gpu.write(
            &uniform,
            &[[coarse.saturating_sub(1) as u32, coarse as u32, outside, 0]],
        );
        let groups = if op == 3 {
            [1, 1, 1]
        } else {
            groups_for(threads, self.per_axis).0
        };
        let mut launch = self.launch::<D>(
            "mg-build",
            MG_BUILD,
            false,
            &format!("const OP: u32 = {op}u;"),
            groups,
            &[
                &uniform, &h.levels, &h.kinds, &h.weights, &f.diag, &h.ghost, &h.labels, &h.counts,
            ],
        )?;
        const STEPS: [&str; 5] = ["kinds", "weights", "ghosts", "null space", "diagonal"];
        launch.name = format!("mg-build {} of level {coarse}", STEPS[op as usize]);
        launch.keep = Some(uniform);
        Ok(launch)
    }

    /// The pipeline of `source` for dimension `D`, gated or not, with `consts`.
    fn pipeline<const D: usize>(
        &self,
        name: &str,
        source: &str,
        gated: bool,
        consts: &str,
    ) -> Result<Arc<wgpu::ComputePipeline>, GpuError> {
        let key = format!("pressure {name} {D}d gated={gated} {consts}");
        self.gpu.pipeline(
            &key,
            &prelude(D, gated, consts, uses_mg_common(source)),
            source,
        )
    }

    /// A launch of `source` over `cells` threads with `buffers` at bindings 0, 1, …
    #[allow(clippy::too_many_arguments)]
    fn launch<const D: usize>(
        &self,
        name: &str,
        source: &str,
        gated: bool,
        consts: &str,
        groups: [u32; 3],
        buffers: &[&dyn Bindable],
    ) -> Result<Launch, GpuError> {
        let pipeline = self.pipeline::<D>(name, source, gated, consts)?;
        self.gpu.launch_args(name, pipeline, buffers, groups)
    }

    /// Runs `launches` in one compute pass and submits them.
    fn submit(&self, launches: &[&[Launch]]) {
        self.gpu.submit_launches(
            "pressure solve",
            |_| {},
            launches.iter().flat_map(|l| l.iter()),
        );
    }

    /// Writes the null space's `index` into the finest level's buffers, growing them where it does not fit:
    /// the index, and the sums of its slots and groups.
    fn upload_null_index(&mut self, index: &NullIndex) -> Result<(), GpuError> {
        let gpu = self.gpu.clone();
        let f = self.finest.as_mut().expect("buffers of a solve");
        let words = 4 * index.words.len() as u64;
        let sums = 8 * (index.entries as u64 + index.groups as u64);
        gpu.check_binding("the null space's index", words)?;
        if f.null_index.size() < words || f.null_sums.size() < sums {
            let (i, s) = gpu.allocating("the null space's index", || {
                (
                    gpu.buffer(
                        "pressure null space index",
                        words.max(f.null_index.size()).next_power_of_two(),
                    ),
                    gpu.buffer(
                        "pressure null space sums",
                        sums.max(f.null_sums.size()).next_power_of_two(),
                    ),
                )
            })?;
            f.null_index = i;
            f.null_sums = s;
        }
        gpu.write(&f.null_index, &index.words);
        Ok(())
    }

    /// Reads the solve's state.
    fn state(&self) -> Result<State, GpuError> {
        let f = self.finest.as_ref().expect("buffers of a solve");
        let bytes = self
            .gpu
            .read(&[(&f.state, 0, std::mem::size_of::<State>() as u64)])?;
        Ok(bytemuck::pod_read_unaligned(&bytes[0]))
    }

    /// The solve (see [`PoissonDevice::solve`]), its failures as the device reports them. With
    /// `rhs_in_faces` the right-hand side is taken from the face field, masked to the unknowns
    /// ([`PoissonDevice::solve_rhs_in_faces`]), and `b` is not sent.
    fn run<const D: usize>(
        &mut self,
        solver: &PoissonSolver<D>,
        b: &[f64],
        mut out: Solution<'_>,
        rhs_in_faces: bool,
    ) -> Result<Result<Option<Info>, SolveError>, GpuError> {
        self.last_solved = None;
        let kind = solver.preconditioner();
        let op = solver.operator();
        let (labels, groups) = op.null_space();
        if matches!(
            kind,
            PreconditionerKind::IncompleteCholesky | PreconditionerKind::ModifiedIncompleteCholesky
        ) {
            return Ok(Ok(None));
        }
        let params = solver.params;
        if !(params.tolerance.is_finite() && params.tolerance > 0.0) {
            return Ok(Err(SolveError::BadInput(format!(
                "the tolerance must be positive, got {}",
                params.tolerance
            ))));
        }
        let n = op.layout().len();
        let guess = guess_of(&out);
        // A right-hand side on the device needs no copy on the host.
        let sent = !(rhs_in_faces && b.is_empty());
        for (what, v) in [
            ("the right-hand side", sent.then_some(b.len())),
            ("the initial guess", guess.map(<[f64]>::len)),
        ] {
            if let Some(v) = v.filter(|&v| v != n) {
                return Ok(Err(SolveError::BadInput(format!(
                    "{what} has {v} entries, the operator {n}"
                ))));
            }
        }
        let mg = solver.multigrid_params();
        if mg.is_some_and(|p| p.smoother != Smoother::RedBlackGaussSeidel) {
            // The device's V-cycle smooths by red-black Gauss–Seidel only.
            return Ok(Ok(None));
        }
        if matches!(out, Solution::Device(_)) && self.faces.is_none() {
            return Ok(Ok(None));
        }
        if let Solution::Device(Guess::Kept(token)) = out {
            if !self
                .kept
                .as_ref()
                .is_some_and(|k| k.token == token && k.len == n as u64)
            {
                return Ok(Err(SolveError::Device(
                    "the solution kept as this solve's guess is no longer on the device".into(),
                )));
            }
        }
        let start = Instant::now();
        let cells = n as u64;
        let singular = !groups.is_empty();
        match &mg {
            Some(p) => self.hierarchy(op.layout().dims, p)?,
            None => self.hierarchy = None,
        }
        let diag_cells = self.hierarchy.as_ref().map_or(cells, Hierarchy::total);
        self.finest(
            cells,
            diag_cells,
            params.max_iterations as u64 + 1,
            singular,
            kind == PreconditionerKind::IncompletePoisson,
        )?;
        let (grid, partials) = groups_for(cells, self.per_axis);
        let fresh = self.uploaded != Some(solver.operator_id());
        if fresh {
            let index = if singular {
                let index = null_index(labels, groups, WG as usize);
                self.upload_null_index(&index)?;
                index
            } else {
                NullIndex::default()
            };
            self.null = (index.groups, index.entries);
        }
        let f = self.finest.as_ref().expect("just made");
        let gpu = &self.gpu;
        let identity = kind == PreconditionerKind::None;
        gpu.write(
            &f.cg,
            &[CgUniform {
                level: level_uniform(op.layout(), op.spacing(), 0, 0),
                scale: op.scale(),
                tolerance: params.tolerance,
                null_groups: self.null.0,
                null_entries: self.null.1,
                _pad: [0; 2],
                max_iterations: params.max_iterations as u32,
                partials,
                identity: identity as u32,
                _pad2: 0,
            }],
        );
        gpu.write(&f.state, &[State::default()]);
        if !rhs_in_faces {
            gpu.write_at(&f.r.buffer, f.r.offset, bytemuck::cast_slice(b));
            self.times.rhs_bytes_up += 8 * b.len() as u64;
        }
        if let Some(x) = guess {
            gpu.write_at(&f.x.buffer, f.x.offset, bytemuck::cast_slice(x));
        }
        if fresh {
            // With multigrid the device derives the diagonal from the cell kinds it builds the hierarchy from.
            if mg.is_none() {
                gpu.write(&f.diag, op.diagonal_units());
            }
            if singular {
                gpu.write(&f.labels, labels);
            }
        }
        gpu.finish()?;
        let upload_ms = start.elapsed().as_secs_f64() * 1e3;
        let start = Instant::now();
        if fresh && mg.is_some() {
            self.build_hierarchy(op, singular)?;
        }
        if let Solution::Device(Guess::Kept(_)) = out {
            // The kept solution on this operator's unknowns (the diagonal is this operator's now).
            let kept = self.kept.as_ref().expect("checked above").buffer.clone();
            let f = self.finest.as_ref().expect("buffers of a solve");
            self.mask_into::<D>(&kept, &f.x, grid)?;
        }
        if rhs_in_faces {
            // The right-hand side on this operator's unknowns, as the host pads it.
            let faces = self.faces.as_ref().expect("a face field, or `b` was sent");
            if faces.bytes() < 8 * cells {
                return Err(GpuError::Internal(
                    "the solve was asked for a right-hand side that no other device left in the face field"
                        .into(),
                ));
            }
            let (rhs, _) = faces.get(&self.gpu, "the solve's right-hand side", 8 * cells)?;
            let f = self.finest.as_ref().expect("buffers of a solve");
            self.mask_into::<D>(&rhs, &f.r, grid)?;
            self.times.rhs_in_faces += 1;
        }
        self.uploaded = Some(solver.operator_id());
        let build_ms = start.elapsed().as_secs_f64() * 1e3;

        let key = PlanKey {
            dim: D,
            kind,
            singular,
            null_groups: self.null.0.next_power_of_two(),
            per_axis: self.per_axis,
            small_cells: self.small_cells,
            fuse: self.fuse,
            fused: self.fuse
                && self.mg_cg
                && kind == PreconditionerKind::Multigrid
                && self.first_small() > 0,
            sweeps: mg.map(|p| (p.pre_sweeps as u32, p.coarsest_sweeps as u32)),
            levels: self.hierarchy.as_ref().map_or(0, |h| h.used),
            buffers: self.buffer_sizes(),
        };
        let plan = match &self.plan {
            Some((k, plan)) if *k == key => plan.clone(),
            _ => {
                let plan = Arc::new(self.plan::<D>(&key, grid)?);
                self.plan = Some((key, plan.clone()));
                plan
            }
        };
        let start = Instant::now();
        let mut batches = 0;
        let mut launches = 0;
        let mut record_ms = 0.0;
        // The first batch is as long as the solver expects the solve to be (its last solve's), and the
        // batches after it short, then doubling: a repeated solve launches no iterations past its
        // solution's. Without a guess: 4, 8, then 16. Iterations after the solution return at once, so the
        // batches change no result.
        let (mut batch, mut next) = match solver.expected_iterations() {
            Some(k) => (k.min(MAX_FIRST_BATCH), 1),
            None => (4, 8),
        };
        let mut state;
        loop {
            let mut list: Vec<&[Launch]> = Vec::new();
            if batches == 0 {
                list.push(&plan.init);
            }
            for _ in 0..batch {
                list.push(&plan.iteration);
            }
            let recording = Instant::now();
            launches += list.iter().map(|l| l.len()).sum::<usize>();
            self.submit(&list);
            record_ms += recording.elapsed().as_secs_f64() * 1e3;
            batches += 1;
            state = self.state()?;
            if state.done != RUNNING {
                break;
            }
            batch = next;
            next = (2 * next).min(16);
        }
        let iterations = state.iteration as usize;
        let outcome = match state.done {
            CONVERGED => {
                self.submit(&[&plan.finish]);
                if matches!(out, Solution::Device(_)) {
                    self.keep_solution::<D>(op, false)?;
                }
                let (gpu, f) = (&self.gpu, self.finest.as_ref().expect("buffers of a solve"));
                gpu.finish()?;
                let iterate_ms = start.elapsed().as_secs_f64() * 1e3;
                let done = Instant::now();
                let mut history = Vec::new();
                let history_range = (&f.history, 0, 8 * (iterations as u64 + 1));
                match &mut out {
                    Solution::Host(x) => gpu.read_into(
                        &[(&f.x.buffer, f.x.offset, 8 * cells), history_range],
                        |k, bytes| match k {
                            0 => copy_bytes(bytemuck::cast_slice_mut(x), bytes),
                            _ => history = bytemuck::pod_collect_to_vec(bytes),
                        },
                    )?,
                    Solution::Device(_) => gpu.read_into(&[history_range], |_, bytes| {
                        history = bytemuck::pod_collect_to_vec(bytes)
                    })?,
                }
                let t = &mut self.times;
                t.solves += 1;
                t.upload_ms += upload_ms;
                t.build_ms += build_ms;
                t.iterate_ms += iterate_ms;
                t.download_ms += done.elapsed().as_secs_f64() * 1e3;
                t.batches += batches;
                t.launches += launches;
                t.record_ms += record_ms;
                t.kept += usize::from(matches!(out, Solution::Device(_)));
                if matches!(out, Solution::Host(_)) {
                    self.last_solved = Some((solver.operator_id(), false));
                }
                Ok(Some(Info {
                    iterations,
                    residual: state.residual,
                    history,
                    stop: StopReason::Converged,
                }))
            }
            ZERO_RHS => match guess_of(&out)
                .and_then(|x| eddies::linsolve::vector::first_non_finite(x).map(|i| (x, i)))
            {
                Some((x, i)) => Err(non_finite("the initial guess", x, i)),
                None => {
                    match &mut out {
                        Solution::Host(x) => {
                            x.fill(0.0);
                            self.last_solved = Some((solver.operator_id(), true));
                        }
                        Solution::Device(_) => {
                            self.keep_solution::<D>(op, true)?;
                            self.gpu.finish()?;
                        }
                    }
                    Ok(Some(Info {
                        iterations: 0,
                        residual: 0.0,
                        history: vec![0.0],
                        stop: StopReason::ZeroRhs,
                    }))
                }
            },
            BAD_RHS => Err(match eddies::linsolve::vector::first_non_finite(b) {
                Some(i) => non_finite("the right-hand side", b, i),
                None => SolveError::BadInput("the right-hand side's norm overflows".into()),
            }),
            BAD_GUESS => Err(
                match guess_of(&out)
                    .and_then(|x| eddies::linsolve::vector::first_non_finite(x).map(|i| (x, i)))
                {
                    Some((x, i)) => non_finite("the initial guess", x, i),
                    None => SolveError::BadInput(
                        "the initial residual's norm overflows (or the kept guess is not finite)"
                            .into(),
                    ),
                },
            ),
            NO_CONVERGENCE => Err(SolveError::NoConvergence {
                iterations,
                residual: state.residual,
                tolerance: params.tolerance,
            }),
            code => {
                let (what, value) = match code {
                    BREAKDOWN_RZ => ("rᵀ M⁻¹ r", state.rz),
                    BREAKDOWN_PQ => ("pᵀ A p", f64::NAN),
                    BREAKDOWN_RESIDUAL => ("‖r‖", state.residual),
                    _ => ("the solver's state", f64::NAN),
                };
                Err(SolveError::Breakdown {
                    iteration: iterations + 1,
                    detail: format!(
                        "{what} = {value:e}: the operator or the preconditioner is not positive definite"
                    ),
                })
            }
        };
        Ok(outcome)
    }

    /// `to` = `from` on the unknowns of the finest level (its diagonal this operator's), 0 elsewhere
    /// (`elementwise.wgsl` OP 3), over `grid` workgroups; submitted without waiting.
    fn mask_into<const D: usize>(
        &self,
        from: &dyn Bindable,
        to: &dyn Bindable,
        grid: [u32; 3],
    ) -> Result<(), GpuError> {
        let f = self.finest.as_ref().expect("buffers of a solve");
        let mask = self.launch::<D>(
            "elementwise",
            ELEMENTWISE,
            false,
            &format!("const OP: u32 = {MASK}u;"),
            grid,
            &[&f.cg, &f.state, from, &f.diag, to],
        )?;
        self.submit(&[std::slice::from_ref(&mask)]);
        Ok(())
    }

    /// [`PoissonDevice::solve_gradient`] (with `rhs_in_faces`,
    /// [`PoissonDevice::solve_gradient_rhs_in_faces`]): the record and the kept solution's token.
    fn gradient<const D: usize>(
        &mut self,
        solver: &PoissonSolver<D>,
        b: &[f64],
        guess: Guess<'_>,
        rhs_in_faces: bool,
    ) -> Result<Option<(Info, u64)>, SolveError> {
        let info = self
            .run(solver, b, Solution::Device(guess), rhs_in_faces)
            .unwrap_or_else(|e| Err(SolveError::Device(e.to_string())))?;
        Ok(info.map(|i| (i, self.kept.as_ref().expect("kept by the solve").token)))
    }

    /// [`PoissonDevice::solution_to_faces`]: the last solve's solution, padded, copied into the face field
    /// (zeros for a zero right-hand side); `false` where there is no face field or the last solve was
    /// another operator's, not this device's, or kept its solution.
    fn pressure_to_faces<const D: usize>(
        &mut self,
        solver: &PoissonSolver<D>,
    ) -> Result<bool, GpuError> {
        let (Some(faces), Some((id, zero))) = (self.faces.as_ref(), self.last_solved) else {
            return Ok(false);
        };
        if id != solver.operator_id() {
            return Ok(false);
        }
        let bytes = 8 * solver.operator().layout().len() as u64;
        let (out, _) = faces.get(&self.gpu, "the projection's pressure", bytes)?;
        let x = &self.finest.as_ref().expect("buffers of a solve").x;
        self.gpu.submit_launches(
            "pressure to faces",
            |e| {
                if zero {
                    e.clear_buffer(&out, 0, Some(bytes));
                } else {
                    e.copy_buffer_to_buffer(&x.buffer, x.offset, &out, 0, bytes);
                }
            },
            [],
        );
        Ok(true)
    }

    /// Keeps the finest level's solution `x` of `op` (zeros, with `zero`) under a new token, and writes its
    /// gradient into the face field (`faces.wgsl`), without waiting for the device.
    fn keep_solution<const D: usize>(
        &mut self,
        op: &PoissonOperator<D>,
        zero: bool,
    ) -> Result<(), GpuError> {
        let gpu = self.gpu.clone();
        let len = op.layout().len() as u64;
        let dims = op.layout().dims;
        let mut uniform = FacesUniform {
            coef: 1.0 / op.spacing(),
            ..Default::default()
        };
        let mut total = 0u64;
        for k in 0..D {
            let mut d = [1u32; 4];
            for a in 0..D {
                d[a] = (dims[a] + usize::from(a == k)) as u32;
            }
            d[3] = total as u32;
            total += d[..3].iter().map(|&v| v as u64).product::<u64>();
            uniform.dims[k] = d;
        }
        uniform.total = total as u32;
        let faces = self.faces.as_ref().expect("a face field");
        let (out, _) = faces.get(&gpu, "the volume correction's displacement", 4 * total)?;
        gpu.check_binding("the kept solution", 8 * len)?;
        // The buffer of the last kept solution, where it is large enough (the old one goes first).
        let buffer = match self.kept.take() {
            Some(k) if k.buffer.size() >= 8 * len => k.buffer,
            _ => gpu.allocating("the kept solution", || {
                gpu.buffer("pressure kept solution", 8 * len)
            })?,
        };
        let u = match self.faces_uniform.take() {
            Some(u) => u,
            None => gpu.uniform::<FacesUniform>("pressure faces"),
        };
        gpu.write(&u, &[uniform]);
        let token = self.next_token;
        self.next_token += 1;
        self.kept = Some(Kept { buffer, token, len });
        self.faces_uniform = Some(u);
        let kept = &self.kept.as_ref().expect("just kept").buffer;
        let u = self.faces_uniform.as_ref().expect("just kept");
        let f = self.finest.as_ref().expect("buffers of a solve");
        if zero {
            gpu.submit_launches(
                "kept solution",
                |e| {
                    e.clear_buffer(kept, 0, Some(8 * len));
                    e.clear_buffer(&out, 0, Some(4 * total));
                },
                [],
            );
            return Ok(());
        }
        let launch = self.launch::<D>(
            "faces",
            FACES,
            false,
            "",
            fold_groups(total.div_ceil(WG), self.per_axis),
            &[&f.cg, u, &f.diag, &f.x, &out],
        )?;
        let (x, to) = (&f.x, kept);
        gpu.submit_launches(
            "kept solution",
            |e| e.copy_buffer_to_buffer(&x.buffer, x.offset, to, 0, 8 * len),
            [&launch],
        );
        Ok(())
    }

    /// The launches of a solve: the start, one iteration, and the end.
    fn plan<const D: usize>(&self, key: &PlanKey, grid: [u32; 3]) -> Result<Plan, GpuError> {
        let (kind, singular) = (key.kind, key.singular);
        let f = self.finest.as_ref().expect("buffers of a solve");
        let one = [1, 1, 1];
        let reduce = |action: u32, gated: bool| {
            self.launch::<D>(
                "reduce",
                REDUCE,
                gated,
                &format!("const ACTION: u32 = {action}u;"),
                one,
                &[&f.cg, &f.state, &f.partials, &f.history],
            )
        };
        let dot = |a: &dyn Bindable, b: &dyn Bindable| {
            self.launch::<D>(
                "dot",
                DOT,
                true,
                "",
                grid,
                &[&f.cg, &f.state, a, b, &f.partials],
            )
        };
        let elementwise = |op: u32, gated: bool, s: &dyn Bindable, target: &dyn Bindable| {
            self.launch::<D>(
                "elementwise",
                ELEMENTWISE,
                gated,
                &format!("const OP: u32 = {op}u;"),
                grid,
                &[&f.cg, &f.state, s, &f.diag, target],
            )
        };
        // v −= its mean over each group of the null space (`null.wgsl`): the groups' sums per workgroup,
        // their means (a workgroup per group), the subtraction, with `dot` the partial sums of r · v too (v
        // not r, which the kernel reads through another binding).
        let remove_mean_dot =
            |v: &dyn Bindable, gated: bool, dot: bool| -> Result<Vec<Launch>, GpuError> {
                if !singular {
                    return Ok(Vec::new());
                }
                let groups = fold_groups(key.null_groups as u64, self.per_axis);
                let last = if dot {
                    NULL_SUBTRACT_DOT
                } else {
                    NULL_SUBTRACT
                };
                [(NULL_SUMS, grid), (NULL_MEANS, groups), (last, grid)]
                    .into_iter()
                    .map(|(op, over)| {
                        self.launch::<D>(
                            "null",
                            NULL,
                            gated,
                            &format!("const OP: u32 = {op}u;"),
                            over,
                            &[
                                &f.cg,
                                &f.state,
                                v,
                                &f.labels,
                                &f.null_index,
                                &f.null_sums,
                                &f.r,
                                &f.partials,
                            ],
                        )
                    })
                    .collect()
            };
        let remove_mean = |v: &dyn Bindable, gated: bool| remove_mean_dot(v, gated, false);
        let identity = kind == PreconditionerKind::None;
        // Where fused, the pass that leaves z sums r · z too: the V-cycle's end, or with a null space the
        // removal of its mean.
        let end_dot = key.fused && !singular;
        let null_dot = key.fuse && singular;
        // z = M⁻¹ r (without its null-space part), rᵀz reduced with `action`, and the direction set from z by
        // `op`; `started`: the V-cycle's start ran with the update.
        let preconditioned =
            |action: u32, op: u32, started: bool| -> Result<Vec<Launch>, GpuError> {
                let mut out = self.precondition::<D>(key, grid, started, end_dot)?;
                out.extend(remove_mean_dot(&f.z, true, null_dot)?);
                if !(end_dot || null_dot) {
                    out.push(dot(&f.r, &f.z)?);
                }
                out.push(reduce(action, true)?);
                out.push(elementwise(op, true, &f.z, &f.p)?);
                Ok(out)
            };

        let mut init = remove_mean(&f.r, true)?;
        init.push(dot(&f.r, &f.r)?);
        init.push(reduce(B_NORM, true)?);
        init.push(self.launch::<D>(
            "apply",
            APPLY,
            true,
            "const MODE: u32 = 1u;",
            grid,
            &[&f.cg, &f.state, &f.diag, &f.x, &f.r, &f.partials],
        )?);
        if singular {
            init.extend(remove_mean(&f.r, true)?);
            init.push(dot(&f.r, &f.r)?);
        }
        init.push(reduce(FIRST_RESIDUAL, true)?);
        if identity {
            init.push(elementwise(COPY, true, &f.r, &f.p)?);
        } else {
            init.extend(preconditioned(FIRST_RZ, COPY, false)?);
        }

        let mut iteration = vec![
            self.launch::<D>(
                "apply",
                APPLY,
                true,
                "const MODE: u32 = 0u;",
                grid,
                &[&f.cg, &f.state, &f.diag, &f.p, &f.q, &f.partials],
            )?,
            reduce(ALPHA, true)?,
            if key.fused {
                self.fused::<D>(0, grid)?
            } else {
                self.launch::<D>(
                    "update",
                    UPDATE,
                    true,
                    "",
                    grid,
                    &[&f.cg, &f.state, &f.p, &f.q, &f.x, &f.r, &f.partials],
                )?
            },
            reduce(RESIDUAL, true)?,
        ];
        if identity {
            iteration.push(elementwise(XPBY, true, &f.r, &f.p)?);
        } else {
            iteration.extend(preconditioned(BETA, XPBY, key.fused)?);
        }
        let finish = remove_mean(&f.x, false)?;
        Ok(Plan {
            init,
            iteration,
            finish,
        })
    }

    /// The launches of `z = M⁻¹ r`; for multigrid, `started` and `end_dot` as [`vcycle`](Self::vcycle).
    fn precondition<const D: usize>(
        &self,
        key: &PlanKey,
        grid: [u32; 3],
        started: bool,
        end_dot: bool,
    ) -> Result<Vec<Launch>, GpuError> {
        let f = self.finest.as_ref().expect("buffers of a solve");
        match key.kind {
            PreconditionerKind::Jacobi => Ok(vec![self.launch::<D>(
                "elementwise",
                ELEMENTWISE,
                true,
                &format!("const OP: u32 = {JACOBI}u;"),
                grid,
                &[&f.cg, &f.state, &f.r, &f.diag, &f.z],
            )?]),
            PreconditionerKind::IncompletePoisson => {
                // q is free between the update and the next product.
                let pass = |pass: u32, v: &dyn Bindable, out: &dyn Bindable| {
                    self.launch::<D>(
                        "incomplete-poisson",
                        INCOMPLETE_POISSON,
                        true,
                        &format!("const PASS: u32 = {pass}u;"),
                        grid,
                        &[&f.cg, &f.state, &f.diag, v, out],
                    )
                };
                Ok(vec![pass(0, &f.r, &f.q)?, pass(1, &f.q, &f.z)?])
            }
            PreconditionerKind::Multigrid => {
                let (sweeps, coarsest) = key.sweeps.expect("the V-cycle's sweeps");
                self.vcycle::<D>(grid, sweeps, coarsest, started, end_dot)
            }
            other => unreachable!("{} runs on the CPU", other.name()),
        }
    }

    /// A `Step` uniform of `mg_common.wgsl` holding `step`.
    fn step_uniform(&self, step: [u32; 4]) -> wgpu::Buffer {
        let b = self.gpu.uniform::<[u32; 4]>("mg step");
        self.gpu.write(&b, &[step]);
        b
    }

    /// The launches of one V-cycle from `r` into `z` over the uploaded levels: each large level's steps one
    /// launch each (`mg_level.wgsl`), the levels from the largest small one down in one (`mg_small.wgsl`).
    /// Where a step needs no neighbour's result of the step before it, the two share a launch: the load of
    /// `r` and the first red half-sweep (`mg_ends.wgsl`), a coarse level's fold and its first red
    /// half-sweep, the last red half-sweep and the store into `z`: five launches fewer per cycle with four
    /// large levels (at 256³). With `started`, the cycle's start (the load of `r` and the first red
    /// half-sweep) ran with the update of `x` and `r` (`mg_cg.wgsl`); with `end_dot`, its end sums `r · z`
    /// too. Both need a large finest level.
    fn vcycle<const D: usize>(
        &self,
        grid: [u32; 3],
        sweeps: u32,
        coarsest: u32,
        started: bool,
        end_dot: bool,
    ) -> Result<Vec<Launch>, GpuError> {
        let f = self.finest.as_ref().expect("buffers of a solve");
        let h = self
            .hierarchy
            .as_ref()
            .expect("the hierarchy of a multigrid solve");
        let last = h.used - 1;
        let small = self.first_small();
        debug_assert!(
            small > 0 || !(started || end_dot),
            "fused ends on a small finest level"
        );
        let buffers = |step: &wgpu::Buffer| {
            [
                step, &f.state, &h.levels, &f.diag, &h.ghost, &h.b, &h.x, &h.t,
            ]
            .map(|b| b.clone())
        };
        // One launch of step `op` (`mg_level.wgsl`) on levels `fine` and `coarse`, over the cells of `over`
        // (a half-sweep over those of its colour: half of each padded row, rounded up).
        let level = |op: u32, fine: usize, coarse: usize, colour: u32, over: usize| {
            let step = self.step_uniform([fine as u32, coarse as u32, colour, 0]);
            let b = buffers(&step);
            let threads = match op {
                0 => {
                    let d = h.dims[over];
                    let padded = |a: usize| if a < D { d[a] as u64 + 2 } else { 1 };
                    padded(0).div_ceil(2) * padded(1) * padded(2)
                }
                _ => h.cells[over],
            };
            let mut launch = self.launch::<D>(
                "mg-level",
                MG_LEVEL,
                true,
                &format!("const OP: u32 = {op}u;"),
                groups_for(threads, self.per_axis).0,
                &b.iter().map(|b| b as &dyn Bindable).collect::<Vec<_>>(),
            )?;
            const STEPS: [&str; 7] = [
                "relax",
                "residual",
                "restrict",
                "fold",
                "fold and relax",
                "prolong",
                "extend",
            ];
            launch.name = format!("mg-level {} on level {over}", STEPS[op as usize]);
            launch.keep = Some(step);
            Ok::<_, GpuError>(launch)
        };
        let load = |op: u32, wide: &dyn Bindable| {
            self.launch::<D>(
                "mg-load",
                MG_LOAD,
                true,
                &format!("const OP: u32 = {op}u;"),
                grid,
                &[&f.cg, &f.state, wide, &h.b, &h.x],
            )
        };
        // A start or an end of the cycle on the finest level, fused with its half-sweep (`mg_ends.wgsl`).
        let end = |op: u32, wide: &dyn Bindable| {
            let step = self.step_uniform([0; 4]);
            let b = buffers(&step);
            let mut b: Vec<&dyn Bindable> = b.iter().map(|b| b as &dyn Bindable).collect();
            b.push(wide);
            let mut launch = self.launch::<D>(
                "mg-ends",
                MG_ENDS,
                true,
                &format!("const OP: u32 = {op}u;"),
                grid,
                &b,
            )?;
            launch.name = format!("mg-ends {}", ["start", "end"][op as usize]);
            launch.keep = Some(step);
            Ok::<_, GpuError>(launch)
        };
        let mut out = Vec::new();
        if small == 0 {
            out.push(load(0, &f.r)?);
        }
        for l in 0..small {
            // The first red half-sweep of every large level comes with the step that set its b.
            if l == 0 && !started {
                out.push(end(0, &f.r)?);
            }
            out.push(level(0, l, l, 1, l)?);
            for _ in 1..sweeps {
                out.push(level(0, l, l, 0, l)?);
                out.push(level(0, l, l, 1, l)?);
            }
            out.push(level(1, l, l, 0, l)?);
            out.push(level(2, l, l + 1, 0, l + 1)?);
            let fold = if l + 1 < small { 4 } else { 3 };
            out.push(level(fold, l, l + 1, 0, l + 1)?);
        }
        {
            let step = self.step_uniform([small as u32, last as u32, 0, 0]);
            let mut b: Vec<wgpu::Buffer> = buffers(&step).to_vec();
            b.push(h.labels.clone());
            let mut launch = self.launch::<D>(
                "mg-small",
                MG_SMALL,
                true,
                &format!("const SWEEPS: u32 = {coarsest}u;\nconst CYCLE_SWEEPS: u32 = {sweeps}u;"),
                [1, 1, 1],
                &b.iter().map(|b| b as &dyn Bindable).collect::<Vec<_>>(),
            )?;
            launch.keep = Some(step);
            out.push(launch);
        }
        for l in (0..small).rev() {
            out.push(level(6, l, l + 1, 0, l + 1)?);
            out.push(level(5, l, l + 1, 0, l)?);
            for s in 0..sweeps {
                out.push(level(0, l, l, 1, l)?);
                // The finest level's last red half-sweep comes with the store into z.
                if !(l == 0 && s + 1 == sweeps) {
                    out.push(level(0, l, l, 0, l)?);
                }
            }
        }
        out.push(if small == 0 {
            load(1, &f.z)?
        } else if end_dot {
            self.fused::<D>(1, grid)?
        } else {
            end(1, &f.z)?
        });
        Ok(out)
    }

    /// The first level of the V-cycle that runs in one workgroup, with every level below it: the first of
    /// at most [`small_cells`](Self::set_small_cells) padded cells, or the coarsest.
    fn first_small(&self) -> usize {
        let h = self
            .hierarchy
            .as_ref()
            .expect("the hierarchy of a multigrid solve");
        h.cells[..h.used]
            .iter()
            .position(|&n| n <= self.small_cells)
            .unwrap_or(h.used - 1)
    }

    /// A launch of step `op` of `mg_cg.wgsl` over the finest level's `grid` workgroups: 0, the update of `x`
    /// and `r` with the V-cycle's start; 1, the cycle's end with the partial sums of `r · z`.
    fn fused<const D: usize>(&self, op: u32, grid: [u32; 3]) -> Result<Launch, GpuError> {
        let f = self.finest.as_ref().expect("buffers of a solve");
        let h = self
            .hierarchy
            .as_ref()
            .expect("the hierarchy of a multigrid solve");
        let step = self.step_uniform([0; 4]);
        let mut launch = self.launch::<D>(
            "mg-cg",
            MG_CG,
            true,
            &format!("const OP: u32 = {op}u;"),
            grid,
            &[
                &step,
                &f.state,
                &h.levels,
                &f.diag,
                &h.ghost,
                &h.b,
                &h.x,
                &h.t,
                &f.cg,
                &f.p,
                &f.q,
                &f.x,
                &f.r,
                &f.z,
                &f.partials,
            ],
        )?;
        launch.name = ["mg-cg update and start", "mg-cg end and r·z"][op as usize].to_string();
        launch.keep = Some(step);
        Ok(launch)
    }
}

/// The launches of a solve.
struct Plan {
    init: Vec<Launch>,
    iteration: Vec<Launch>,
    finish: Vec<Launch>,
}

fn non_finite(what: &str, v: &[f64], i: usize) -> SolveError {
    SolveError::BadInput(format!(
        "{what} holds a non-finite value ({}) at entry {i}",
        v[i]
    ))
}

/// One multigrid level as the device built it ([`GpuPoisson::built_levels`]), in the CPU's layouts.
#[derive(Clone, Debug, PartialEq)]
pub struct BuiltLevel {
    /// Cells per axis (1 beyond the dimension).
    pub dims: [usize; 3],
    /// As [`PoissonOperator::diagonal_units`].
    pub diagonal_units: Vec<f32>,
    /// As [`Multigrid::ghost_coefficients`](eddies::linsolve::Multigrid::ghost_coefficients) (empty on the
    /// finest level).
    pub ghost: Vec<f32>,
    /// On the coarsest level of a problem with a null space: the group of each cell (0, 1, … in the order of
    /// their first cells, as the CPU numbers them), `u32::MAX` off the groups (a single level keeps the
    /// finest level's labels).
    pub labels: Option<Vec<u32>>,
    /// On the coarsest level: the number of groups whose means the V-cycle removes there (0 for a problem
    /// without a null space).
    pub groups: Option<u32>,
}

/// A [`GpuPoisson`] that a simulation and its caller share (a benchmark reads its times between steps).
#[derive(Clone)]
pub struct SharedPoisson(pub Arc<Mutex<GpuPoisson>>);

impl<const D: usize> PoissonDevice<D> for SharedPoisson {
    fn solve(
        &mut self,
        solver: &PoissonSolver<D>,
        b: &[f64],
        x: &mut [f64],
    ) -> Result<Option<Info>, SolveError> {
        let mut dev = self.0.lock().unwrap_or_else(|e| e.into_inner());
        PoissonDevice::<D>::solve(&mut *dev, solver, b, x)
    }

    fn face_field(&self) -> Option<u64> {
        let dev = self.0.lock().unwrap_or_else(|e| e.into_inner());
        PoissonDevice::<D>::face_field(&*dev)
    }

    fn solve_gradient(
        &mut self,
        solver: &PoissonSolver<D>,
        b: &[f64],
        guess: Guess<'_>,
    ) -> Result<Option<(Info, u64)>, SolveError> {
        let mut dev = self.0.lock().unwrap_or_else(|e| e.into_inner());
        PoissonDevice::<D>::solve_gradient(&mut *dev, solver, b, guess)
    }

    fn solve_gradient_rhs_in_faces(
        &mut self,
        solver: &PoissonSolver<D>,
        b: &[f64],
        guess: Guess<'_>,
    ) -> Result<Option<(Info, u64)>, SolveError> {
        let mut dev = self.0.lock().unwrap_or_else(|e| e.into_inner());
        PoissonDevice::<D>::solve_gradient_rhs_in_faces(&mut *dev, solver, b, guess)
    }

    fn read_solution(&mut self, token: u64, x: &mut [f64]) -> Result<(), SolveError> {
        let mut dev = self.0.lock().unwrap_or_else(|e| e.into_inner());
        PoissonDevice::<D>::read_solution(&mut *dev, token, x)
    }

    fn solve_rhs_in_faces(
        &mut self,
        solver: &PoissonSolver<D>,
        b: &[f64],
        x: &mut [f64],
    ) -> Result<Option<Info>, SolveError> {
        let mut dev = self.0.lock().unwrap_or_else(|e| e.into_inner());
        PoissonDevice::<D>::solve_rhs_in_faces(&mut *dev, solver, b, x)
    }

    fn solution_to_faces(&mut self, solver: &PoissonSolver<D>) -> Result<bool, SolveError> {
        let mut dev = self.0.lock().unwrap_or_else(|e| e.into_inner());
        PoissonDevice::<D>::solution_to_faces(&mut *dev, solver)
    }
}

impl<const D: usize> PoissonDevice<D> for GpuPoisson {
    fn solve(
        &mut self,
        solver: &PoissonSolver<D>,
        b: &[f64],
        x: &mut [f64],
    ) -> Result<Option<Info>, SolveError> {
        self.run(solver, b, Solution::Host(x), false)
            .unwrap_or_else(|e| Err(SolveError::Device(e.to_string())))
    }

    fn face_field(&self) -> Option<u64> {
        self.faces.as_ref().map(Scratch::id)
    }

    fn solve_gradient(
        &mut self,
        solver: &PoissonSolver<D>,
        b: &[f64],
        guess: Guess<'_>,
    ) -> Result<Option<(Info, u64)>, SolveError> {
        self.gradient(solver, b, guess, false)
    }

    fn solve_gradient_rhs_in_faces(
        &mut self,
        solver: &PoissonSolver<D>,
        b: &[f64],
        guess: Guess<'_>,
    ) -> Result<Option<(Info, u64)>, SolveError> {
        // (Without a face field the solve is declined, as `solve_gradient` declines it.)
        self.gradient(solver, b, guess, self.faces.is_some())
    }

    fn solve_rhs_in_faces(
        &mut self,
        solver: &PoissonSolver<D>,
        b: &[f64],
        x: &mut [f64],
    ) -> Result<Option<Info>, SolveError> {
        // Without a face field, `b` goes up as for any solve.
        let in_faces = self.faces.is_some();
        self.run(solver, b, Solution::Host(x), in_faces)
            .unwrap_or_else(|e| Err(SolveError::Device(e.to_string())))
    }

    fn solution_to_faces(&mut self, solver: &PoissonSolver<D>) -> Result<bool, SolveError> {
        self.pressure_to_faces(solver)
            .map_err(|e| SolveError::Device(e.to_string()))
    }

    fn read_solution(&mut self, token: u64, x: &mut [f64]) -> Result<(), SolveError> {
        let kept = self
            .kept
            .as_ref()
            .filter(|k| k.token == token && k.len == x.len() as u64)
            .ok_or_else(|| {
                SolveError::Device("the kept solution is no longer on the device".into())
            })?;
        self.gpu
            .read_into(&[(&kept.buffer, 0, 8 * kept.len)], |_, bytes| {
                copy_bytes(bytemuck::cast_slice_mut(x), bytes)
            })
            .map_err(|e| SolveError::Device(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::validate_wgsl;

    /// Every kernel's variants parse and validate without a GPU, in 2D and 3D.
    #[test]
    fn the_kernels_compile_without_a_gpu() {
        for (name, source, variants) in KERNELS {
            for consts in variants {
                for dim in [2, 3] {
                    for gated in [false, true] {
                        let code = format!(
                            "{}\n{source}",
                            prelude(dim, gated, consts, uses_mg_common(source))
                        );
                        validate_wgsl(&code)
                            .unwrap_or_else(|e| panic!("{name} {consts} {dim}D: {e}"));
                    }
                }
            }
        }
    }

    /// The uniform structs have the sizes `common.wgsl` gives them.
    #[test]
    fn uniforms_match_the_shaders() {
        assert_eq!(std::mem::size_of::<LevelUniform>(), 64);
        assert_eq!(std::mem::size_of::<CgUniform>(), 112);
        assert_eq!(std::mem::size_of::<State>(), 56);
    }
}
