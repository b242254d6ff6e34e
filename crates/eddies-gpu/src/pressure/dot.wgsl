// Partial sums of a · b over the finest level.

@group(0) @binding(0) var<uniform> cg: Cg;
@group(0) @binding(1) var<storage, read> state: State;
// read_write: the vectors share one scratch buffer, and a dispatch may bind a buffer read-only or writable, not both.
@group(0) @binding(2) var<storage, read_write> a: array<f64>;
@group(0) @binding(3) var<storage, read_write> b: array<f64>;
@group(0) @binding(4) var<storage, read_write> partials: array<f64>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let live = !(GATED && state.done != RUNNING);
    let i = thread_index(wid, nwg, lid);
    var term = 0.0lf;
    if live && i < cg.level.padded.w {
        term = a[i] * b[i];
    }
    let total = workgroup_sum(lid, term);
    let g = group_index(wid, nwg);
    if lid == 0u && live && g < cg.partials {
        partials[g] = total;
    }
}
