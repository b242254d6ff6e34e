// The Incomplete Poisson preconditioner z = K Kᵀ r, K = I − L D⁻¹ (Ament et al. 2010), as on the CPU:
// PASS 0: t = Kᵀ r, tᵢ = rᵢ + (1/nᵢ) Σ_upper rⱼ;  PASS 1: z = K t, zᵢ = tᵢ + Σ_lower tⱼ / nⱼ (unknowns only).

@group(0) @binding(0) var<uniform> cg: Cg;
@group(0) @binding(1) var<storage, read> state: State;
@group(0) @binding(2) var<storage, read> diag: array<f32>;
// read_write: the vectors share one scratch buffer, and a dispatch may bind a buffer read-only or writable, not both.
@group(0) @binding(3) var<storage, read_write> v: array<f64>;
@group(0) @binding(4) var<storage, read_write> out: array<f64>;

fn inv(j: u32) -> f64 {
    let d = diag[j];
    return select(0.0lf, 1.0lf / f64(d), d > 0.0);
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = thread_index(wid, nwg, lid);
    if (GATED && state.done != RUNNING) || i >= cg.level.padded.w {
        return;
    }
    if !(diag[i] > 0.0) {
        out[i] = 0.0lf;
        return;
    }
    let s = cg.level.strides;
    if PASS == 0u {
        var up = v[i + 1u] + v[i + s.y];
        if DIM == 3u {
            up += v[i + s.z];
        }
        out[i] = v[i] + inv(i) * up;
    } else {
        var low = v[i - 1u] * inv(i - 1u) + v[i - s.y] * inv(i - s.y);
        if DIM == 3u {
            low += v[i - s.z] * inv(i - s.z);
        }
        out[i] = v[i] + low;
    }
}
