// The kept particles into their sorted order, one attribute array and component at a time, first step: each
// kept particle's value, from its place before the sort, into `tmp` (the sort's keys, read by nothing after
// the sort). The particles the sort dropped are not gathered.

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<uniform> keep: Keep;
@group(0) @binding(2) var<storage, read> start: array<u32>;
@group(0) @binding(3) var<storage, read> sorted: array<u32>;
@group(0) @binding(4) var<storage, read> values: array<f32>;
@group(0) @binding(5) var<storage, read_write> tmp: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let j = thread_index(wid, nwg, lid);
    if j >= start[p.bins] {
        return;
    }
    tmp[j] = values[keep.component * p.n + sorted[j]];
}
