// The splat's stage 1 (`splat.rs`): each vorton's key, the grid index of the lowest corner of its
// cloud-in-cell stencil (the host's `FittedGrid::cic`), and its rank among the vortons of that cell, counted
// by an integer atomic for the device's counting sort. The prelude is the sort's (`Sort`, `thread_index`) and
// the uniform `Splat` (`splat.rs`).

@group(0) @binding(0) var<uniform> p: Splat;
// Per vorton: [the stencil's fractions along x, y, z; the key's bits], [strength (m³/s); 0].
@group(0) @binding(1) var<storage, read> vorton: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> keys: array<u32>;
@group(0) @binding(3) var<storage, read_write> rank: array<u32>;
@group(0) @binding(4) var<storage, read_write> count: array<atomic<u32>>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = thread_index(wid, nwg, lid);
    if i >= p.n {
        return;
    }
    let key = bitcast<u32>(vorton[2u * i].w);
    keys[i] = key;
    rank[i] = atomicAdd(&count[key], 1u);
}
