// Biot–Savart by direct summation (Gourlay part 8, eq. 8.3 with the mollified kernel of part 12): the
// velocity, and with GRADIENT its gradient, at each target from every vorton, without the factor 1/4π.
//
// One invocation per target. The workgroup loads TILE sources at a time into shared memory and every
// invocation adds them in index order, tile after tile: each target's sum has one fixed order, so a run
// repeats bit for bit. The prelude defines TILE and GRADIENT.

struct Params {
    sources: u32,
    targets: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
// Per source: (x, y, z, σ²) then (αx, αy, αz, 0), relative to the sources' origin.
@group(0) @binding(1) var<storage, read> sources: array<vec4<f32>>;
// Per target: (x, y, z, 0), relative to the same origin.
@group(0) @binding(2) var<storage, read> targets: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> velocity: array<vec4<f32>>;
// Per target the nine ∂uᵢ/∂x_k, row-major (one unused word without GRADIENT).
@group(0) @binding(4) var<storage, read_write> gradient: array<f32>;

var<workgroup> tile_position: array<vec4<f32>, TILE>;
var<workgroup> tile_strength: array<vec4<f32>, TILE>;

@compute @workgroup_size(TILE)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i = gid.x;
    var t = vec3<f32>(0.0);
    if (i < params.targets) {
        t = targets[i].xyz;
    }
    var u = vec3<f32>(0.0);
    var j0 = vec3<f32>(0.0);
    var j1 = vec3<f32>(0.0);
    var j2 = vec3<f32>(0.0);
    for (var base = 0u; base < params.sources; base += TILE) {
        let k = base + lid;
        if (k < params.sources) {
            tile_position[lid] = sources[2u * k];
            tile_strength[lid] = sources[2u * k + 1u];
        }
        workgroupBarrier();
        let count = min(TILE, params.sources - base);
        for (var m = 0u; m < count; m++) {
            let p = tile_position[m];
            let a = tile_strength[m].xyz;
            let r = t - p.xyz;
            let r2 = fma(r.x, r.x, fma(r.y, r.y, r.z * r.z));
            let d = r2 + p.w;
            let c = cross(a, r);
            if (GRADIENT) {
                // f(s) = (s + 5σ²/2)(s + σ²)^(−5/2), f'(s) = −(3s/2 + 21σ²/4)(s + σ²)^(−7/2);
                // ∂u/∂x = f [α]ₓ + 2 f'(|r|²) (α × r) rᵀ.
                let inv72 = 1.0 / (d * d * d * sqrt(d));
                let f = fma(p.w, 2.5, r2) * (inv72 * d);
                let g = -2.0 * fma(p.w, 5.25, 1.5 * r2) * inv72;
                u = fma(vec3<f32>(f), c, u);
                let fa = f * a;
                j0 += fma(vec3<f32>(g * c.x), r, vec3<f32>(0.0, -fa.z, fa.y));
                j1 += fma(vec3<f32>(g * c.y), r, vec3<f32>(fa.z, 0.0, -fa.x));
                j2 += fma(vec3<f32>(g * c.z), r, vec3<f32>(-fa.y, fa.x, 0.0));
            } else {
                let f = fma(p.w, 2.5, r2) / (d * d * sqrt(d));
                u = fma(vec3<f32>(f), c, u);
            }
        }
        workgroupBarrier();
    }
    if (i < params.targets) {
        velocity[i] = vec4<f32>(u, 0.0);
        if (GRADIENT) {
            let o = 9u * i;
            gradient[o] = j0.x;
            gradient[o + 1u] = j0.y;
            gradient[o + 2u] = j0.z;
            gradient[o + 3u] = j1.x;
            gradient[o + 4u] = j1.y;
            gradient[o + 5u] = j1.z;
            gradient[o + 6u] = j2.x;
            gradient[o + 7u] = j2.y;
            gradient[o + 8u] = j2.z;
        }
    }
}
