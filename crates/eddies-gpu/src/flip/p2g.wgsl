// Particle-to-grid transfer as a gather: one thread per face of component K sums, over the particles of the
// 4ᴰ half cells within one cell of the face, `[Σ w, Σ w u]` with the multilinear tent weight `w` and the
// particle's velocity at the face (`v + C (x_f − x_p)` with APIC). The half cells go z, y, x ascending and
// each one's particles in index order (the sort's), so every face adds its terms in one fixed order.

struct Face {
    // The component, the faces per axis (cells + 1 along K), and this component's first face in `sums`.
    k: u32, faces: u32, base: u32, pad: u32,
    dims: vec4<u32>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<uniform> face: Face;
@group(0) @binding(2) var<storage, read> pos: array<f32>;
@group(0) @binding(3) var<storage, read> vel: array<f32>;
@group(0) @binding(4) var<storage, read> affine: array<f32>;
@group(0) @binding(5) var<storage, read> start: array<u32>;
@group(0) @binding(6) var<storage, read> sorted: array<u32>;
@group(0) @binding(7) var<storage, read_write> sums: array<vec2<f32>>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let f = thread_index(wid, nwg, lid);
    if f >= face.faces {
        return;
    }
    let k = face.k;
    // The face's position (cells) and its window of half cells along each axis.
    var at = vec3<f32>(0.0);
    var lo = vec3<u32>(0u);
    var hi = vec3<u32>(0u);
    var rest = f;
    for (var a = 0u; a < D; a++) {
        let c = rest % face.dims[a];
        rest /= face.dims[a];
        let half = select(1u, 0u, a == k);
        at[a] = f32(c) + 0.5 * f32(half);
        // Half cells 2c − 2 + half ..= 2c + 1 + half hold the positions within one cell of the face.
        let first = i32(2u * c + half) - 2;
        lo[a] = u32(max(first, 0));
        hi[a] = min(u32(first + 3), p.sub[a] - 1u);
    }
    let n = p.n;
    var w_sum = 0.0;
    var wu_sum = 0.0;
    for (var z = lo.z; z <= hi.z; z++) {
        for (var y = lo.y; y <= hi.y; y++) {
            let row = (z * p.sub.y + y) * p.sub.x;
            let end = start[row + hi.x + 1u];
            for (var s = start[row + lo.x]; s < end; s++) {
                let i = sorted[s];
                var w = 1.0;
                var u = vel[k * n + i];
                for (var a = 0u; a < D; a++) {
                    let d = at[a] - cell_coord(pos[a * n + i], p, a);
                    w *= max(1.0 - abs(d), 0.0);
                    if APIC {
                        u += affine[(k * D + a) * n + i] * p.h * d;
                    }
                }
                w_sum += w;
                wu_sum += w * u;
            }
        }
    }
    sums[face.base + f] = vec2<f32>(w_sum, wu_sum);
}
