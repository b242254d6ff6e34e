// The Gaussian splat's last stage (`splat.rs`): the vorticity at each grid point, gathered from the vortons
// whose stamps reach it. A stamp is at most `width` points a side, so those stamps start at most
// `width − 1` points before the point along each axis: for each such row of first points (z, then y) their
// vortons are one run of the sorted list, in cell order and each cell's in index order (the device's
// counting sort), their weights and strengths stored in that order (`blob_stamp.wgsl`). Every sum has one
// order, so a splat repeats bit for bit; no float atomics. The prelude is `blob_stamp.wgsl`'s.

@group(0) @binding(0) var<uniform> p: Splat;
@group(0) @binding(1) var<storage, read> weights: array<f32>;
@group(0) @binding(2) var<storage, read> heads: array<vec4<f32>>;
// Cell `c`'s slots: start[c] up to start[c + 1].
@group(0) @binding(3) var<storage, read> start: array<u32>;
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
    let first = here - min(here, vec3<u32>(p.width - 1u));
    var sum = vec3<f32>(0.0);
    for (var z = first.z; z <= here.z; z++) {
        for (var y = first.y; y <= here.y; y++) {
            let row = nx * (y + ny * z);
            for (var s = start[row + first.x]; s < start[row + here.x + 1u]; s++) {
                let head = heads[2u * s];
                let k = here - vec3<u32>(bitcast<u32>(heads[2u * s + 1u].x) - row, y, z);
                if any(k >= stamp_points(head.w)) {
                    continue;
                }
                let base = 3u * p.width * s;
                let w = weights[base + 2u * p.width + k.z] * weights[base + p.width + k.y];
                sum += head.xyz * w * weights[base + k.x];
            }
        }
    }
    out[3u * g] = sum.x;
    out[3u * g + 1u] = sum.y;
    out[3u * g + 2u] = sum.z;
}
