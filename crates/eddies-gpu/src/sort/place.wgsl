// Stage 2 of the counting sort: each item into its slot, its bin's first slot plus its rank.

@group(0) @binding(0) var<uniform> p: Sort;
@group(0) @binding(1) var<storage, read> keys: array<u32>;
@group(0) @binding(2) var<storage, read> rank: array<u32>;
@group(0) @binding(3) var<storage, read> start: array<u32>;
@group(0) @binding(4) var<storage, read_write> sorted: array<u32>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = thread_index(wid, nwg, lid);
    if i >= p.n || keys[i] == DEAD {
        return;
    }
    sorted[start[keys[i]] + rank[i]] = i;
}
