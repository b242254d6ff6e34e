// Shared by every kernel of the pressure solve. The prelude defines DIM (2 or 3), GATED (whether the kernel
// does nothing once the solve has stopped) and the kernel's own constants.
//
// Vectors are padded grids (one halo cell per side, x fastest) as on the CPU (eddies::linsolve::Layout). A
// cell is an unknown exactly where its diagonal is positive; the halo never holds one, so a stencil at an
// unknown reads its neighbours without bounds tests.

// One level of the hierarchy (the finest is level 0).
struct Level {
    // Cells per axis without the halo (xyz; z = 1 in 2D).
    dims: vec4<u32>,
    // Cells per axis with the halo (xyz; z = 1 in 2D); w: padded length.
    padded: vec4<u32>,
    // Distance between neighbours along each axis.
    strides: vec4<u32>,
    // h² of the level (m²).
    h2: f32,
    _pad: u32,
    // Where the level's entries start in the packed vectors of the V-cycle (`base`) and in its packed ghost
    // coefficients (`ghost_base`; 2·DIM per cell, coarse levels only).
    base: u32,
    ghost_base: u32,
}

// The conjugate gradients' constants: the finest level and the stopping rule.
struct Cg {
    level: Level,
    // 1/h² of the finest level (1/m²).
    scale: f64,
    tolerance: f64,
    // Groups of unknowns without a Dirichlet neighbour (0: the operator is regular), and the slots of their
    // per-workgroup sums (`null.wgsl`).
    null_groups: u32,
    null_entries: u32,
    _pad0: u32,
    _pad1: u32,
    max_iterations: u32,
    // Partial sums that a pass over the finest level writes.
    partials: u32,
    // Whether the preconditioner is the identity.
    identity: u32,
    _pad2: u32,
}

// The solve's scalars, on the device so that iterations need no read-back.
struct State {
    b_norm: f64,
    rz: f64,
    alpha: f64,
    beta: f64,
    residual: f64,
    iteration: u32,
    // RUNNING, or why the solve stopped.
    done: u32,
    _pad0: u32,
    _pad1: u32,
}

const RUNNING: u32 = 0u;
const CONVERGED: u32 = 1u;
const ZERO_RHS: u32 = 2u;
const BREAKDOWN_RZ: u32 = 3u;
const BREAKDOWN_PQ: u32 = 4u;
const BREAKDOWN_RESIDUAL: u32 = 5u;
const BAD_RHS: u32 = 6u;
const BAD_GUESS: u32 = 7u;
const NO_CONVERGENCE: u32 = 8u;

const WG: u32 = 256u;

// The thread's cell, over a grid of workgroups folded into two dimensions.
fn thread_index(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> u32 {
    return (wid.x + wid.y * nwg.x) * WG + lid;
}

fn group_index(wid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return wid.x + wid.y * nwg.x;
}

// Padded coordinates of padded index i.
fn coords(l: Level, i: u32) -> vec3<u32> {
    let px = l.padded.x;
    let py = l.padded.y;
    return vec3<u32>(i % px, (i / px) % py, i / (px * py));
}

fn finite(v: f64) -> bool {
    return abs(v) < 1.0e300lf;
}

// The partial sums of a pass: every thread's term added over the workgroup in a fixed tree. Every thread of
// the workgroup must call it (it synchronises them); the total is returned to all.
var<workgroup> sums: array<f64, WG>;

fn workgroup_sum(lid: u32, term: f64) -> f64 {
    sums[lid] = term;
    workgroupBarrier();
    for (var k = WG / 2u; k > 0u; k = k / 2u) {
        if lid < k {
            sums[lid] += sums[lid + k];
        }
        workgroupBarrier();
    }
    return sums[0];
}
