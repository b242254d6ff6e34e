// What the transfer kernels share: the step's constants and the folded thread index. The prelude before this
// file sets D (2 or 3), WG (threads per workgroup) and the kernel's own constants.

struct Params {
    // Particles, and half cells (bins of the sort).
    n: u32, bins: u32,
    // A particle is dropped when its key is DEAD (outside the domain or not finite).
    pad0: u32, pad1: u32,
    // Half cells per axis (1 beyond D).
    sub: vec4<u32>,
    // Cells per axis (1 beyond D).
    cells: vec4<u32>,
    // Origin (m) and 1 / cell size (1/m); cell size (m).
    origin: vec4<f32>,
    inv_h: f32, h: f32, pad2: u32, pad3: u32,
}

const DEAD: u32 = 0xffffffffu;

// The thread's index over a launch of workgroups folded into two dimensions.
fn thread_index(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> u32 {
    return (wid.x + wid.y * nwg.x) * WG + lid;
}

// Particle `i`'s position in cells along axis `a` (`pos` holds the axes one after another, `n` each). The
// key and the weights both start from this one expression, so that a particle lies in the half cell whose
// faces its weights reach.
fn cell_coord(x: f32, p: Params, a: u32) -> f32 {
    return (x - p.origin[a]) * p.inv_h;
}

// The kept particles' passes (`counts.wgsl`, `gather.wgsl`, `place.wgsl`): the attribute component they move,
// and where in the face fields the counts per cell go (in 32-bit words).
struct Keep {
    component: u32, base: u32, pad0: u32, pad1: u32,
}

// The particle pass (`g2p.wgsl`) and the extrapolation before it (`extrapolate.wgsl`).
struct Move {
    // Per component: its faces per axis, and its first face in `fields`.
    dims: array<vec4<u32>, 3>,
    base: vec4<u32>,
    dt: f32, pic_ratio: f32, mode: u32, closed: u32,
    // Obstacles in `ranges`; whether `displacement` holds this substep's volume correction (else it is 0).
    obstacles: u32, displaced: u32, pad1: u32, pad2: u32,
}
