// One pass over the finest level, as OP says:
// 0: p = s + β p (the new search direction);   1: p = s (the first one);
// 2: p = s / A_ii (Jacobi);   3: p = s on the unknowns, 0 elsewhere (a kept solution as the next guess).

@group(0) @binding(0) var<uniform> cg: Cg;
@group(0) @binding(1) var<storage, read> state: State;
// read_write: the vectors share one scratch buffer, and a dispatch may bind a buffer read-only or writable, not both.
@group(0) @binding(2) var<storage, read_write> s: array<f64>;
@group(0) @binding(3) var<storage, read> diag: array<f32>;
@group(0) @binding(4) var<storage, read_write> p: array<f64>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = thread_index(wid, nwg, lid);
    if (GATED && state.done != RUNNING) || i >= cg.level.padded.w {
        return;
    }
    switch OP {
        case 0u: {
            p[i] = s[i] + state.beta * p[i];
        }
        case 1u: {
            p[i] = s[i];
        }
        case 3u: {
            p[i] = select(0.0lf, s[i], diag[i] > 0.0);
        }
        default: {
            let d = diag[i];
            p[i] = select(0.0lf, s[i] / (cg.scale * f64(d)), d > 0.0);
        }
    }
}
