// Biot–Savart by direct summation (Gourlay part 8, eq. 8.3 with the mollified kernel of part 12): the
// velocity, and with GRADIENT its gradient, at each target from every vorton, without the factor 1/4π; or,
// with POTENTIAL, the vector potential whose curl that velocity is (the Poisson technique's boundary values,
// part 20), into the velocity's slots.
//
// The vortons may be split into chunks (few targets leave a large device half idle): each workgroup row sums
// one chunk, and `chunks.wgsl` adds the chunks' sums in chunk order. One invocation per PER targets (1 or 2:
// two share each source read from shared memory, which pays where there are enough targets to fill the
// device). The workgroup loads TILE sources at a time into shared memory and every invocation adds them in
// index order, tile after tile: each target's sum has one fixed order, so a run repeats bit for bit. The
// prelude defines TILE, PER, GRADIENT, POTENTIAL and Params.

@group(0) @binding(0) var<uniform> params: Params;
// Per source: (x, y, z, σ²) then (αx, αy, αz, 0), relative to the sources' origin.
@group(0) @binding(1) var<storage, read> sources: array<vec4<f32>>;
// Per target: (x, y, z, 0), relative to the same origin.
@group(0) @binding(2) var<storage, read> targets: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> velocity: array<vec4<f32>>;
// Per target and chunk the nine ∂uᵢ/∂x_k, row-major (one unused word without GRADIENT).
@group(0) @binding(4) var<storage, read_write> gradient: array<f32>;

var<workgroup> tile_position: array<vec4<f32>, TILE>;
var<workgroup> tile_strength: array<vec4<f32>, TILE>;

// A target's sums: velocity and, with GRADIENT, the rows of its gradient.
struct Sums {
    u: vec3<f32>,
    j0: vec3<f32>,
    j1: vec3<f32>,
    j2: vec3<f32>,
}

// Adds the source at p (σ² in p.w) of strength a to the sums at target t.
fn add(s: ptr<function, Sums>, t: vec3<f32>, p: vec4<f32>, a: vec3<f32>) {
    let r = t - p.xyz;
    let r2 = fma(r.x, r.x, fma(r.y, r.y, r.z * r.z));
    // One reciprocal square root and multiplications instead of a square root and a division.
    let q = inverseSqrt(r2 + p.w);
    let q2 = q * q;
    if (POTENTIAL) {
        // h(s) = (s + 3σ²/2)(s + σ²)^(−3/2), the stream function of the core, whose curl is the velocity below.
        let h = fma(p.w, 1.5, r2) * (q2 * q);
        (*s).u = fma(vec3<f32>(h), a, (*s).u);
        return;
    }
    let q5 = q2 * q2 * q;
    let c = cross(a, r);
    let f = fma(p.w, 2.5, r2) * q5;
    (*s).u = fma(vec3<f32>(f), c, (*s).u);
    if (GRADIENT) {
        // f(s) = (s + 5σ²/2)(s + σ²)^(−5/2), f'(s) = −(3s/2 + 21σ²/4)(s + σ²)^(−7/2);
        // ∂u/∂x = f [α]ₓ + 2 f'(|r|²) (α × r) rᵀ.
        let g = -2.0 * fma(p.w, 5.25, 1.5 * r2) * (q5 * q2);
        let fa = f * a;
        (*s).j0 += fma(vec3<f32>(g * c.x), r, vec3<f32>(0.0, -fa.z, fa.y));
        (*s).j1 += fma(vec3<f32>(g * c.y), r, vec3<f32>(fa.z, 0.0, -fa.x));
        (*s).j2 += fma(vec3<f32>(g * c.z), r, vec3<f32>(-fa.y, fa.x, 0.0));
    }
}

fn target_at(i: u32) -> vec3<f32> {
    if (i < params.targets) {
        return targets[i].xyz;
    }
    return vec3<f32>(0.0);
}

fn store(i: u32, slot: u32, s: Sums) {
    if (i >= params.targets) {
        return;
    }
    velocity[slot] = vec4<f32>(s.u, 0.0);
    if (GRADIENT) {
        let o = 9u * slot;
        gradient[o] = s.j0.x;
        gradient[o + 1u] = s.j0.y;
        gradient[o + 2u] = s.j0.z;
        gradient[o + 3u] = s.j1.x;
        gradient[o + 4u] = s.j1.y;
        gradient[o + 5u] = s.j1.z;
        gradient[o + 6u] = s.j2.x;
        gradient[o + 7u] = s.j2.y;
        gradient[o + 8u] = s.j2.z;
    }
}

@compute @workgroup_size(TILE)
fn main(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    // This invocation's targets: i0, and with PER = 2 also i1, a tile further (both reads coalesced).
    let i0 = group.x * TILE * PER + lid;
    let i1 = i0 + TILE;
    let t0 = target_at(i0);
    let t1 = target_at(i1);
    var s0 = Sums(vec3<f32>(0.0), vec3<f32>(0.0), vec3<f32>(0.0), vec3<f32>(0.0));
    var s1 = s0;
    let first = group.y * params.chunk;
    let end = min(params.sources, first + params.chunk);
    for (var base = first; base < end; base += TILE) {
        let k = base + lid;
        if (k < end) {
            tile_position[lid] = sources[2u * k];
            tile_strength[lid] = sources[2u * k + 1u];
        } else {
            // Past the chunk's last source: a vorton of no strength (σ² = 1 keeps its terms finite), so that every
            // tile is whole and the loop below has a fixed trip count the compiler can unroll.
            tile_position[lid] = vec4<f32>(0.0, 0.0, 0.0, 1.0);
            tile_strength[lid] = vec4<f32>(0.0);
        }
        workgroupBarrier();
        for (var m = 0u; m < TILE; m++) {
            let p = tile_position[m];
            let a = tile_strength[m].xyz;
            add(&s0, t0, p, a);
            if (PER == 2u) {
                add(&s1, t1, p, a);
            }
        }
        workgroupBarrier();
    }
    let slots = group.y * params.targets;
    store(i0, slots + i0, s0);
    if (PER == 2u) {
        store(i1, slots + i1, s1);
    }
}
