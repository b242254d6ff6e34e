// Stage 0 of the counting sort for keys the caller has written: each item's rank among its bin's items,
// counted by an integer atomic into the first `bins` entries of the prefix-sum buffer (cleared before). The
// ranks' order is the threads'; the order stage (`order.wgsl`) replaces them by ranks in index order.

@group(0) @binding(0) var<uniform> p: Sort;
@group(0) @binding(1) var<storage, read> keys: array<u32>;
@group(0) @binding(2) var<storage, read_write> rank: array<u32>;
@group(0) @binding(3) var<storage, read_write> count: array<atomic<u32>>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = thread_index(wid, nwg, lid);
    if i >= p.n || keys[i] == DEAD {
        return;
    }
    rank[i] = atomicAdd(&count[keys[i]], 1u);
}
