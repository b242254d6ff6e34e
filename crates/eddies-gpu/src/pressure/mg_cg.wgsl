// The conjugate gradients' passes over the finest level fused with the V-cycle's ends there, one cell per
// thread (`mg_common.wgsl`, level step.fine = 0), where the adapter binds this many storage buffers; the
// same arithmetic as the passes apart (`update.wgsl`, `mg_ends.wgsl`, `dot.wgsl`), so the same bits. OP says:
// 0: the update, x += α p and r −= α q with partial sums of r · r, and the cycle's start from the new r:
//    b = r in single precision, the first red half-sweep from x = 0;
// 1: the cycle's end, the last red half-sweep and z = x back in double precision, with partial sums of r · z.

@group(0) @binding(8) var<uniform> cg: Cg;
// read_write: the vectors share one scratch buffer, and a dispatch may bind a buffer read-only or writable, not both.
@group(0) @binding(9) var<storage, read_write> pk: array<f64>;
@group(0) @binding(10) var<storage, read_write> qk: array<f64>;
@group(0) @binding(11) var<storage, read_write> xk: array<f64>;
@group(0) @binding(12) var<storage, read_write> rk: array<f64>;
@group(0) @binding(13) var<storage, read_write> zk: array<f64>;
@group(0) @binding(14) var<storage, read_write> partials: array<f64>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let live = !(GATED && state.done != RUNNING);
    let i = thread_index(wid, nwg, lid);
    let l = levels[step.fine];
    var term = 0.0lf;
    // Every thread reaches the workgroup's sum below.
    if live && i < cg.level.padded.w {
        switch OP {
            case 0u: {
                let a = state.alpha;
                xk[i] += a * pk[i];
                let ri = rk[i] - a * qk[i];
                rk[i] = ri;
                term = ri * ri;
                let bi = f32(ri);
                b[l.base + i] = bi;
                relax_red_from_zero(l, i, bi);
            }
            case 1u: {
                // Only red cells change, and they read only black ones.
                relax(l, i, 0u);
                let zi = f64(x[l.base + i]);
                zk[i] = zi;
                term = rk[i] * zi;
            }
            default: {
                // Not a step of this kernel: it keeps the bindings of `mg_common.wgsl` in the layout.
                _ = fold(l, i);
            }
        }
    }
    let total = workgroup_sum(lid, term);
    let g = group_index(wid, nwg);
    if lid == 0u && live && g < cg.partials {
        partials[g] = total;
    }
}
