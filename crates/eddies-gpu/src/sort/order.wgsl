// Stage 3 of the counting sort: each item's rank by index within its bin, which replaces the rank its
// thread took from the atomic count; placing the items again by it (`place.wgsl`) leaves each bin's items in
// index order, so that the sort's result, like the CPU's stable sort, is a function of the keys alone. Each
// item counts its bin's items of smaller index (a bin holds a few items in the uses of this sort): one
// loop per thread, and nothing written that another thread reads.

@group(0) @binding(0) var<uniform> p: Sort;
@group(0) @binding(1) var<storage, read> keys: array<u32>;
@group(0) @binding(2) var<storage, read_write> rank: array<u32>;
@group(0) @binding(3) var<storage, read> start: array<u32>;
@group(0) @binding(4) var<storage, read> sorted: array<u32>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = thread_index(wid, nwg, lid);
    if i >= p.n || keys[i] == DEAD {
        return;
    }
    let key = keys[i];
    var before = 0u;
    for (var s = start[key]; s < start[key + 1u]; s++) {
        before += select(0u, 1u, sorted[s] < i);
    }
    rank[i] = before;
}
