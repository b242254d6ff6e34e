// Stage 3 of the counting sort: each half cell's particles in index order (an insertion sort; a half cell
// holds about one particle at the seeding density), which makes the sort's result, like the CPU's stable
// sort, a function of the particle data alone.

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> start: array<u32>;
@group(0) @binding(2) var<storage, read_write> sorted: array<u32>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let b = thread_index(wid, nwg, lid);
    if b >= p.bins {
        return;
    }
    let first = start[b];
    let end = start[b + 1u];
    for (var s = first + 1u; s < end; s++) {
        let v = sorted[s];
        var t = s;
        while t > first && sorted[t - 1u] > v {
            sorted[t] = sorted[t - 1u];
            t -= 1u;
        }
        sorted[t] = v;
    }
}
