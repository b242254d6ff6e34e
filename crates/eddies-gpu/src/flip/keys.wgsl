// Stage 1 of the counting sort: each particle's half cell (its key) and its rank among the particles of that
// half cell, counted by an integer atomic. The ranks depend on the order in which threads arrive; the sort's
// last stage (`order.wgsl`) puts every half cell's particles back in index order, so the result does not.

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> pos: array<f32>;
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
    var key = 0u;
    var stride = 1u;
    var alive = true;
    for (var a = 0u; a < D; a++) {
        let s = 2.0 * cell_coord(pos[a * p.n + i], p, a);
        // False for NaN as well.
        let inside = s >= 0.0 && s < f32(p.sub[a]);
        alive = alive && inside;
        key += min(u32(select(0.0, s, inside)), p.sub[a] - 1u) * stride;
        stride *= p.sub[a];
    }
    if !alive {
        keys[i] = DEAD;
        return;
    }
    keys[i] = key;
    rank[i] = atomicAdd(&count[key], 1u);
}
