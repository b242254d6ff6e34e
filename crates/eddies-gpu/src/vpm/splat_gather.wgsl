// The splat's last stage (`splat.rs`): the vorticity at each grid point, gathered from the vortons of the
// eight cells whose stencils reach it, corner by corner in a fixed order and each cell's vortons in index
// order (the device's counting sort), with the cloud-in-cell weights of `FittedGrid::splat`. Every sum has
// one order, so a splat repeats bit for bit; no float atomics. The prelude is the sort's and the
// uniform `Splat` (`splat.rs`).

@group(0) @binding(0) var<uniform> p: Splat;
@group(0) @binding(1) var<storage, read> vorton: array<vec4<f32>>;
// Cell `c`'s vortons: sorted[start[c]] up to sorted[start[c + 1]].
@group(0) @binding(2) var<storage, read> start: array<u32>;
@group(0) @binding(3) var<storage, read> sorted: array<u32>;
// Vorticity (1/s), three numbers per grid point, x fastest.
@group(0) @binding(4) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let g = thread_index(wid, nwg, lid);
    if g >= p.bins {
        return;
    }
    let nx = p.dims.x;
    let ny = p.dims.y;
    let here = vec3<u32>(g % nx, (g / nx) % ny, g / (nx * ny));
    var sum = vec3<f32>(0.0);
    for (var corner = 0u; corner < 8u; corner++) {
        let b = vec3<u32>(corner & 1u, (corner >> 1u) & 1u, (corner >> 2u) & 1u);
        // The cell whose stencil has this point at corner b; stencils start at most two points before the
        // last along each axis.
        if any(here < b) || any(here - b + vec3<u32>(1u) >= p.dims.xyz) {
            continue;
        }
        let c = here - b;
        let key = c.x + nx * (c.y + ny * c.z);
        for (var s = start[key]; s < start[key + 1u]; s++) {
            let v = sorted[s];
            let f = vorton[2u * v].xyz;
            let w = select(vec3<f32>(1.0) - f, f, b == vec3<u32>(1u));
            sum += vorton[2u * v + 1u].xyz * (w.x * w.y * w.z);
        }
    }
    sum *= p.inv_volume;
    out[3u * g] = sum.x;
    out[3u * g + 1u] = sum.y;
    out[3u * g + 2u] = sum.z;
}
