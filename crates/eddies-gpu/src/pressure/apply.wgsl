// The finest level's operator, in double precision, with the sum that conjugate gradients need next:
// MODE 0: out = A v, partial sums of v · out (the step's curvature pᵀAp);
// MODE 1: out -= A v on the unknowns, partial sums of out · out (the residual r = b − A x).

@group(0) @binding(0) var<uniform> cg: Cg;
@group(0) @binding(1) var<storage, read> state: State;
@group(0) @binding(2) var<storage, read> diag: array<f32>;
// read_write: the vectors share one scratch buffer, and a dispatch may bind a buffer read-only or writable, not both.
@group(0) @binding(3) var<storage, read_write> v: array<f64>;
@group(0) @binding(4) var<storage, read_write> out: array<f64>;
@group(0) @binding(5) var<storage, read_write> partials: array<f64>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let live = !(GATED && state.done != RUNNING);
    let i = thread_index(wid, nwg, lid);
    var term = 0.0lf;
    if live && i < cg.level.padded.w {
        let d = diag[i];
        if d > 0.0 {
            let s = cg.level.strides;
            var nsum = v[i - 1u] + v[i + 1u] + v[i - s.y] + v[i + s.y];
            if DIM == 3u {
                nsum += v[i - s.z] + v[i + s.z];
            }
            let av = cg.scale * (f64(d) * v[i] - nsum);
            if MODE == 0u {
                out[i] = av;
                term = v[i] * av;
            } else {
                let r = out[i] - av;
                out[i] = r;
                term = r * r;
            }
        } else if MODE == 0u {
            out[i] = 0.0lf;
        }
    }
    let total = workgroup_sum(lid, term);
    let g = group_index(wid, nwg);
    if lid == 0u && live && g < cg.partials {
        partials[g] = total;
    }
}
