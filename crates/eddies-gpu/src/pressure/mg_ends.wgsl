// The ends of a V-cycle on the finest level (level step.fine, its cells those of the finest vectors), each
// fused with the half-sweep next to it (`mg_common.wgsl`), as OP says:
// 0: the start: b = r in single precision, and the first red half-sweep from x = 0;
// 1: the end: the last red half-sweep, and z = x back in double precision.

@group(0) @binding(8) var<storage, read_write> wide: array<f64>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = thread_index(wid, nwg, lid);
    if GATED && state.done != RUNNING {
        return;
    }
    let l = levels[step.fine];
    if i >= l.padded.w {
        return;
    }
    switch OP {
        case 0u: {
            let bi = f32(wide[i]);
            b[l.base + i] = bi;
            relax_red_from_zero(l, i, bi);
        }
        case 1u: {
            // Only red cells change, and they read only black ones.
            relax(l, i, 0u);
            wide[i] = f64(x[l.base + i]);
        }
        default: {
            // Not a step of this kernel: it keeps the bindings of `mg_common.wgsl` in the layout.
            _ = fold(l, i);
        }
    }
}
