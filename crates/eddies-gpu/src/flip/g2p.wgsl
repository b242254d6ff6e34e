// Grid-to-particle transfer and advection, one thread per particle, as the CPU's pass
// (`eddies::flip` advect.rs): the particle's new velocity from the grid at its position (PIC, the FLIP blend,
// or APIC with the affine matrix from the gradient of the interpolation weights), then the midpoint move
// `x + Δt u(x + ½Δt u(x))` plus the volume correction's displacement at the start, out of the obstacles
// (`shapes.wgsl`, after this file) along their normals, and the walls: clamped just inside closed ones, NaN
// (dropped at the next sort) beyond open ones.

const PIC: u32 = 0u;
const FLIP: u32 = 1u;
const APIC: u32 = 2u;
// Distance (cells) a particle is kept inside a closed wall and outside an obstacle, as on the CPU.
const MARGIN: f32 = 1e-3;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<uniform> m: Move;
// `[u, u − u_old]` per face, two floats each.
@group(0) @binding(2) var<storage, read> fields: array<f32>;
@group(0) @binding(3) var<storage, read_write> pos: array<f32>;
@group(0) @binding(4) var<storage, read_write> vel: array<f32>;
@group(0) @binding(5) var<storage, read_write> affine: array<f32>;
// The obstacles' programs, and each one's range of instructions in x, y.
@group(0) @binding(6) var<storage, read> program: array<Instr>;
@group(0) @binding(7) var<storage, read> ranges: array<vec4<u32>>;
// The volume correction's displacement per face (m), laid out as the fields: from the host, or left there by
// the volume correction's solve on the device.
@group(0) @binding(8) var<storage, read> displacement: array<f32>;

// The multilinear stencil of point `t` (cells) on component `k`'s faces: the lower corner's index and the
// fractions towards the upper faces. Along its own axis a component's faces sit at whole positions (n + 1 of
// them), along the others at half-integer ones (n); the point is clamped into their range, as on the CPU.
struct Stencil {
    base: u32,
    frac: vec3<f32>,
    // Per axis, whether the point lay inside the faces' range (APIC's gradient is 0 along an axis where not).
    inside: vec3<bool>,
}

fn stencil(k: u32, t: vec3<f32>) -> Stencil {
    var s: Stencil;
    s.base = m.base[k];
    var stride = 1u;
    for (var a = 0u; a < D; a++) {
        let faces = m.dims[k][a];
        let shift = select(0.5, 0.0, a == k);
        let raw = t[a] - shift;
        let c = clamp(raw, 0.0, f32(faces - 1u));
        let i0 = min(floor(c), f32(faces - 2u));
        s.frac[a] = c - i0;
        s.inside[a] = raw == c;
        s.base += u32(i0) * stride;
        stride *= faces;
    }
    return s;
}

fn stride_of(k: u32, a: u32) -> u32 {
    var stride = 1u;
    for (var b = 0u; b < a; b++) {
        stride *= m.dims[k][b];
    }
    return stride;
}

fn field(face: u32) -> vec3<f32> {
    var d = 0.0;
    if m.displaced == 1u {
        d = displacement[face];
    }
    return vec3<f32>(fields[2u * face], fields[2u * face + 1u], d);
}

// The fields interpolated at the stencil: along x in each row, then along y, then z.
fn sample(k: u32, s: Stencil) -> vec3<f32> {
    let sy = stride_of(k, 1u);
    let sz = stride_of(k, 2u);
    var rows: array<vec3<f32>, 4>;
    for (var r = 0u; r < (1u << (D - 1u)); r++) {
        let o = s.base + (r & 1u) * sy + ((r >> 1u) & 1u) * sz;
        rows[r] = mix(field(o), field(o + 1u), s.frac.x);
    }
    if D == 3u {
        rows[0] = mix(rows[0], rows[2], s.frac.z);
        rows[1] = mix(rows[1], rows[3], s.frac.z);
    }
    return mix(rows[0], rows[1], s.frac.y);
}

// Row `k` of APIC's affine matrix: `Σ_f u_f ∇w_f(x)` over the stencil's corners (1/m, the weights' gradient
// along an axis where the point was clamped taken as 0).
fn gradient(k: u32, s: Stencil) -> vec3<f32> {
    let sy = stride_of(k, 1u);
    let sz = stride_of(k, 2u);
    var g = vec3<f32>(0.0);
    for (var corner = 0u; corner < (1u << D); corner++) {
        let up = vec3<u32>(corner & 1u, (corner >> 1u) & 1u, (corner >> 2u) & 1u);
        let w = select(1.0 - s.frac, s.frac, up == vec3<u32>(1u));
        let u = fields[2u * (s.base + up.x + up.y * sy + up.z * sz)];
        for (var a = 0u; a < D; a++) {
            if !s.inside[a] {
                continue;
            }
            var d = select(-1.0, 1.0, up[a] == 1u) * p.inv_h;
            for (var b = 0u; b < D; b++) {
                if b != a {
                    d *= w[b];
                }
            }
            g[a] += d * u;
        }
    }
    return g;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = thread_index(wid, nwg, lid);
    if i >= p.n {
        return;
    }
    let n = p.n;
    var t = vec3<f32>(0.0);
    for (var a = 0u; a < D; a++) {
        t[a] = cell_coord(pos[a * n + i], p, a);
    }
    // The fields at the particle, and its new velocity.
    var un = vec3<f32>(0.0);
    var shift = vec3<f32>(0.0);
    for (var k = 0u; k < D; k++) {
        let s = stencil(k, t);
        let here = sample(k, s);
        un[k] = here.x;
        shift[k] = here.z;
        var v = here.x;
        if m.mode == FLIP {
            v = m.pic_ratio * here.x + (1.0 - m.pic_ratio) * (vel[k * n + i] + here.y);
        }
        vel[k * n + i] = v;
        if m.mode == APIC {
            let c = gradient(k, s);
            for (var a = 0u; a < D; a++) {
                affine[(k * D + a) * n + i] = c[a];
            }
        }
    }
    // The midpoint move, plus the displacement at the start.
    let mid = t + 0.5 * m.dt * p.inv_h * un;
    var x = vec3<f32>(0.0);
    for (var k = 0u; k < D; k++) {
        let u_mid = sample(k, stencil(k, mid)).x;
        x[k] = pos[k * n + i] + (m.dt * u_mid + shift[k]);
    }
    // Out of each obstacle in turn, to just outside its surface.
    let margin = MARGIN * p.h;
    for (var o = 0u; o < m.obstacles; o++) {
        let d = obstacle_sdf(o, x);
        if d < margin {
            let normal = obstacle_normal(o, x, 0.25 * p.h);
            for (var k = 0u; k < D; k++) {
                x[k] += (margin - d) * normal[k];
            }
        }
    }
    var gone = false;
    for (var k = 0u; k < D; k++) {
        let o = p.origin[k];
        let hi = o + (f32(p.cells[k]) - MARGIN) * p.h;
        if m.closed == 1u {
            x[k] = clamp(x[k], o + margin, hi);
        } else {
            gone = gone || !(x[k] >= o && x[k] < hi);
        }
    }
    for (var k = 0u; k < D; k++) {
        pos[k * n + i] = select(x[k], bitcast<f32>(0x7fc00000u), gone);
    }
}
