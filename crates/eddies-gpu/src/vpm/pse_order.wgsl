// Moves per-vorton records of W numbers between the vortons' own order and the order of their bins (the
// device's counting sort, `sorted`): GATHER puts record sorted[t] of `source` at t of `dest`, and
// otherwise record t of `source` goes back to sorted[t] of `dest`. The exchange (`pse.wgsl`) runs in the
// bins' order, so that neighbouring invocations read neighbouring vortons. The prelude defines WG, W,
// GATHER and `Params`.

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> sorted: array<u32>;
@group(0) @binding(2) var<storage, read> source: array<f64>;
@group(0) @binding(3) var<storage, read_write> dest: array<f64>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let t = (wid.x + wid.y * nwg.x) * WG + lid;
    if (t >= params.n) {
        return;
    }
    let i = sorted[t];
    for (var k = 0u; k < W; k++) {
        if (GATHER) {
            dest[W * t + k] = source[W * i + k];
        } else {
            dest[W * i + k] = source[W * t + k];
        }
    }
}
