// Particle strength exchange (viscous diffusion and heat among vortons; `eddies::vpm::diffusion`): one
// explicit substep, `qᵢ + coef/ε² Σⱼ (Vᵢ qⱼ − Vⱼ qᵢ) η_ε(|xᵢ − xⱼ|)` with `η_ε(r) = 4/(π^{3/2} ε³) exp(−r²/ε²)`,
// `ε² = (σᵢ² + σⱼ²)/2`, cut off at r = 3ε.
//
// The vortons, and their contents, are in the order of their bins (the device's counting sort of the CPU's
// keys, each bin's vortons in index order: the order of the CPU's own sorted list; `pse_order.wgsl` puts
// them there), and invocation t takes the t-th: neighbouring invocations take vortons of one bin, which
// read the same 27 bins, in sequence. Each gathers from the vortons of its 27 bins, the bins in key order,
// each bin's vortons in sorted order, so every sum has one fixed order and a run repeats bit for bit. The
// separation is taken in f64 (in f32, a position's rounding, 3e-8 m over a 0.3 m block, moved the weights
// near the cut-off by 2e-5) and rounded to f32 for the weight, which is f32; the separations of i from j
// and of j from i are exact negatives, so the pair's two terms are too, and the total content is conserved
// to the rounding of the f64 sums. The prelude defines WG, WIDTH (3: strength; 1: heat), STRIDE and the
// uniform `Params` (`pse.rs`).

@group(0) @binding(0) var<uniform> params: Params;
// Per vorton: its bin's key.
@group(0) @binding(1) var<storage, read> own: array<u32>;
// Per bin b: its first entry in `sorted`; entry b + 1 is one past its last.
@group(0) @binding(2) var<storage, read> start: array<u32>;
// The vortons' indices in the bins' order.
@group(0) @binding(3) var<storage, read> sorted: array<u32>;
// Per vorton in the bins' order: position (m), σ² (m²) and volume (m³).
@group(0) @binding(4) var<storage, read> vorton: array<f64>;
// [diffusivity × substep] (m²).
@group(0) @binding(5) var<storage, read> coef: array<f64>;
// WIDTH numbers per vorton in the bins' order: the content before and after the substep.
@group(0) @binding(6) var<storage, read> q_in: array<f64>;
@group(0) @binding(7) var<storage, read_write> q_out: array<f64>;

// 4/π^{3/2}
const NORM: f32 = 0.71834849;
// The cut-off radius squared, in units of ε².
const CUTOFF2: f32 = 9.0;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    // The vorton's place in the bins' order.
    let i = (wid.x + wid.y * nwg.x) * WG + lid;
    if (i >= params.n) {
        return;
    }
    let dims = vec3<i32>(params.dims.xyz);
    let key = own[sorted[i]];
    let cell = vec3<i32>(
        i32(key % params.dims.x),
        i32((key / params.dims.x) % params.dims.y),
        i32(key / (params.dims.x * params.dims.y)),
    );
    let pi = vec3<f64>(vorton[STRIDE * i], vorton[STRIDE * i + 1u], vorton[STRIDE * i + 2u]);
    let si2 = f32(vorton[STRIDE * i + 3u]);
    let vi = vorton[STRIDE * i + 4u];
    var qi: array<f64, WIDTH>;
    var d: array<f64, WIDTH>;
    for (var c = 0u; c < WIDTH; c++) {
        qi[c] = q_in[WIDTH * i + c];
        d[c] = 0.0lf;
    }
    for (var dz = -1; dz <= 1; dz++) {
        for (var dy = -1; dy <= 1; dy++) {
            for (var dx = -1; dx <= 1; dx++) {
                let nc = cell + vec3<i32>(dx, dy, dz);
                if (any(nc < vec3<i32>(0)) || any(nc >= dims)) {
                    continue;
                }
                let k = (u32(nc.z) * params.dims.y + u32(nc.y)) * params.dims.x + u32(nc.x);
                for (var j = start[k]; j < start[k + 1u]; j++) {
                    if (j == i) {
                        continue;
                    }
                    let pj = vec3<f64>(vorton[STRIDE * j], vorton[STRIDE * j + 1u], vorton[STRIDE * j + 2u]);
                    let r = vec3<f32>(pj - pi);
                    let r2 = fma(r.x, r.x, fma(r.y, r.y, r.z * r.z));
                    let e2 = 0.5 * (si2 + f32(vorton[STRIDE * j + 3u]));
                    if (r2 > CUTOFF2 * e2) {
                        continue;
                    }
                    let w = f64(NORM / (e2 * e2 * sqrt(e2)) * exp(-r2 / e2));
                    let vj = vorton[STRIDE * j + 4u];
                    for (var c = 0u; c < WIDTH; c++) {
                        d[c] += (q_in[WIDTH * j + c] * vi - qi[c] * vj) * w;
                    }
                }
            }
        }
    }
    for (var c = 0u; c < WIDTH; c++) {
        q_out[WIDTH * i + c] = qi[c] + d[c] * coef[0];
    }
}
