// The kept particles into their sorted order, second step: the gathered values back into the attribute array,
// component `keep.component` of `live` particles now (`live` the sort's total). Components are placed in
// ascending order, each after its own gather: a component's new range lies below the old ranges of those
// after it, so no value is overwritten before it is gathered.

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<uniform> keep: Keep;
@group(0) @binding(2) var<storage, read> start: array<u32>;
@group(0) @binding(3) var<storage, read> tmp: array<f32>;
@group(0) @binding(4) var<storage, read_write> values: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let j = thread_index(wid, nwg, lid);
    let live = start[p.bins];
    if j >= live {
        return;
    }
    values[keep.component * live + j] = tmp[j];
}
