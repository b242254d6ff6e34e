// The Poisson technique's curl (`sampling.rs`): the velocity u = ∇ × A at each grid point from the vector
// potential, by the differences of `FittedGrid::differences` (central, one-sided at the faces), in double
// precision. Each point is one thread's: nothing is summed across threads. The prelude is the sort's
// (`thread_index`) and `Sampling` with the grid's helpers (`sampling.rs`).

@group(0) @binding(0) var<uniform> p: Sampling;
// The vector potential (m²/s), component-major: component c of point i at c·points + i.
@group(0) @binding(1) var<storage, read> potential: array<f64>;
// The velocity (m/s), three numbers per grid point, x fastest.
@group(0) @binding(2) var<storage, read_write> velocity: array<f64>;

// The vector potential at grid point `g`.
fn value(g: u32) -> vec3<f64> {
    let n = p.dims.w;
    return vec3<f64>(potential[g], potential[n + g], potential[2u * n + g]);
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let g = thread_index(wid, nwg, lid);
    if g >= p.dims.w {
        return;
    }
    let here = coordinates(g);
    let dx = difference(here, g, 0u);
    let dy = difference(here, g, 1u);
    let dz = difference(here, g, 2u);
    velocity[3u * g] = dy.z - dz.y;
    velocity[3u * g + 1u] = dz.x - dx.z;
    velocity[3u * g + 2u] = dx.y - dy.x;
}
