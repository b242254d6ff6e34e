// The step's diagnostics from the workgroups' partial sums, in a fixed order (each invocation adds a fixed
// stride of them in sequence, then a tree): the same bits on every run. The result goes to the step's slot
// of the log, which the host reads once per frame.
//
// Bindings: 0 params, 1 partials, 2 log, 3 exchange (the emitters' and sinks' running totals).

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> partials: array<u32>;
@group(0) @binding(2) var<storage, read_write> log: array<u32>;
@group(0) @binding(3) var<storage, read> exchange: array<u32>;

const WG: u32 = 256u;
var<workgroup> red_q: array<array<vec2<u32>, 4>, WG>;
var<workgroup> red_f: array<vec4<f32>, WG>;
var<workgroup> red_max: array<f32, WG>;
var<workgroup> red_clamps: array<u32, WG>;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32) {
    var q: array<vec2<u32>, 4>;
    var f = vec4<f32>(0.0);
    var top = 0.0;
    var clamps = 0u;
    for (var k = 0u; k < 4u; k++) {
        q[k] = vec2<u32>(0u, 0u);
    }
    let n = p.partials;
    for (var w = lid; w < n; w += WG) {
        let b = w * P_WORDS;
        for (var k = 0u; k < 4u; k++) {
            q[k] = add64(q[k], vec2<u32>(partials[b + 2u * k], partials[b + 2u * k + 1u]));
        }
        f += vec4<f32>(
            bitcast<f32>(partials[b + P_KINETIC]),
            bitcast<f32>(partials[b + P_MOMENTUM]),
            bitcast<f32>(partials[b + P_MOMENTUM + 1u]),
            bitcast<f32>(partials[b + P_MOMENTUM + 2u]),
        );
        top = max(top, bitcast<f32>(partials[b + P_SPEED2]));
        clamps += partials[b + P_CLAMPS];
    }
    red_q[lid] = q;
    red_f[lid] = f;
    red_max[lid] = top;
    red_clamps[lid] = clamps;
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
        if lid < stride {
            for (var k = 0u; k < 4u; k++) {
                red_q[lid][k] = add64(red_q[lid][k], red_q[lid + stride][k]);
            }
            red_f[lid] = red_f[lid] + red_f[lid + stride];
            red_max[lid] = max(red_max[lid], red_max[lid + stride]);
            red_clamps[lid] = red_clamps[lid] + red_clamps[lid + stride];
        }
        workgroupBarrier();
    }
    if lid == 0u {
        let b = p.slot * LOG_WORDS;
        for (var k = 0u; k < 4u; k++) {
            log[b + 2u * k] = red_q[0][k].x;
            log[b + 2u * k + 1u] = red_q[0][k].y;
        }
        log[b + P_KINETIC] = bitcast<u32>(red_f[0].x);
        log[b + P_MOMENTUM] = bitcast<u32>(red_f[0].y);
        log[b + P_MOMENTUM + 1u] = bitcast<u32>(red_f[0].z);
        log[b + P_MOMENTUM + 2u] = bitcast<u32>(red_f[0].w);
        log[b + P_SPEED2] = bitcast<u32>(red_max[0]);
        log[b + P_CLAMPS] = red_clamps[0];
        for (var k = 0u; k < 16u; k++) {
            log[b + 16u + k] = exchange[k];
        }
    }
}
