// The ray marcher on the GPU: one thread per pixel, the same steps and constants as cpu.rs (the constants
// are prepended from Rust). Reads the prepared arrays, writes one packed sRGB pixel.

struct Params {
    eye: vec4<f32>,
    forward: vec4<f32>,
    right: vec4<f32>,
    cam_up: vec4<f32>,
    origin: vec4<f32>,
    up: vec4<f32>,
    sun: vec4<f32>,
    levels: vec4<f32>,
    centre: vec4<f32>,
    liquid_albedo: vec4<f32>,
    smoke_albedo: vec4<f32>,
    n: vec4<u32>,
    bricks: vec4<u32>,
    size: vec4<u32>,
    edges: array<vec4<f32>, 24>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> liquid: array<f32>;
@group(0) @binding(2) var<storage, read> solid: array<f32>;
@group(0) @binding(3) var<storage, read> smoke: array<f32>;
@group(0) @binding(4) var<storage, read> liquid_albedo: array<u32>;
@group(0) @binding(5) var<storage, read> smoke_albedo: array<u32>;
@group(0) @binding(6) var<storage, read> shadow: array<f32>;
@group(0) @binding(7) var<storage, read> bricks: array<u32>;
@group(0) @binding(8) var<storage, read_write> pixels: array<u32>;

const LIQUID: u32 = 0u;
const SOLID: u32 = 1u;
const SMOKE: u32 = 2u;
const BIG: f32 = 3.0e38;

fn grid_n() -> vec3<i32> {
    return vec3<i32>(p.n.xyz);
}

fn cell_coords(q: vec3<f32>) -> vec3<f32> {
    return (q - p.origin.xyz) / p.origin.w - 0.5;
}

fn load(which: u32, i: u32) -> f32 {
    if which == LIQUID {
        return liquid[i];
    } else if which == SOLID {
        return solid[i];
    }
    return smoke[i];
}

fn index(c: vec3<i32>) -> u32 {
    let n = grid_n();
    return u32((c.z * n.y + c.y) * n.x + c.x);
}

fn trilinear(v: array<f32, 8>, f: vec3<f32>) -> f32 {
    let x0 = mix(v[0], v[1], f.x);
    let x1 = mix(v[2], v[3], f.x);
    let x2 = mix(v[4], v[5], f.x);
    let x3 = mix(v[6], v[7], f.x);
    return mix(mix(x0, x1, f.y), mix(x2, x3, f.y), f.z);
}

// Trilinear sample at cell coordinates g; cells beyond the grid hold `outside`.
fn sample(which: u32, g: vec3<f32>, outside: f32) -> f32 {
    let n = grid_n();
    let i0 = floor(g);
    let f = g - i0;
    let i = vec3<i32>(i0);
    var v: array<f32, 8>;
    if all(i >= vec3<i32>(0)) && all(i + 1 < n) {
        let base = index(i);
        let sy = u32(n.x);
        let sz = u32(n.x * n.y);
        v[0] = load(which, base);
        v[1] = load(which, base + 1u);
        v[2] = load(which, base + sy);
        v[3] = load(which, base + sy + 1u);
        v[4] = load(which, base + sz);
        v[5] = load(which, base + sz + 1u);
        v[6] = load(which, base + sz + sy);
        v[7] = load(which, base + sz + sy + 1u);
    } else {
        for (var corner = 0u; corner < 8u; corner++) {
            let c = i + vec3<i32>(vec3<u32>(corner, corner >> 1u, corner >> 2u) & vec3<u32>(1u));
            if all(c >= vec3<i32>(0)) && all(c < n) {
                v[corner] = load(which, index(c));
            } else {
                v[corner] = outside;
            }
        }
    }
    return trilinear(v, f);
}

struct Corners {
    idx: array<u32, 8>,
    f: vec3<f32>,
}

fn clamped_corners(g: vec3<f32>) -> Corners {
    let n = grid_n();
    let gc = clamp(g, vec3<f32>(0.0), vec3<f32>(n - 1));
    let i0 = floor(gc);
    var out: Corners;
    out.f = gc - i0;
    for (var corner = 0u; corner < 8u; corner++) {
        let c = min(vec3<i32>(i0) + vec3<i32>(vec3<u32>(corner, corner >> 1u, corner >> 2u) & vec3<u32>(1u)), n - 1);
        out.idx[corner] = index(c);
    }
    return out;
}

fn slab(o: vec3<f32>, d: vec3<f32>, lo: vec3<f32>, hi: vec3<f32>) -> vec2<f32> {
    var t0 = -BIG;
    var t1 = BIG;
    for (var a = 0u; a < 3u; a++) {
        var da = d[a];
        if da == 0.0 {
            da = 1e-30;
        }
        let inv = 1.0 / da;
        let ta = (lo[a] - o[a]) * inv;
        let tb = (hi[a] - o[a]) * inv;
        t0 = max(t0, min(ta, tb));
        t1 = min(t1, max(ta, tb));
    }
    return vec2<f32>(t0, t1);
}

fn light(q: vec3<f32>) -> f32 {
    let n = grid_n();
    var g = cell_coords(q);
    let inside = all(g >= vec3<f32>(0.0)) && all(g <= vec3<f32>(n - 1));
    if !inside {
        let h = p.origin.w;
        let lo = p.origin.xyz + 0.5 * h;
        let hi = p.origin.xyz + (vec3<f32>(n) - 0.5) * h;
        let t = slab(q, p.sun.xyz, lo, hi);
        if t.x > t.y || t.y < 0.0 {
            return 1.0;
        }
        g = cell_coords(q + p.sun.xyz * max(t.x, 0.0));
    }
    let c = clamped_corners(g);
    var v: array<f32, 8>;
    for (var k = 0u; k < 8u; k++) {
        v[k] = shadow[c.idx[k]];
    }
    return trilinear(v, c.f);
}

fn unpack(c: u32) -> vec3<f32> {
    return vec3<f32>(f32(c & 255u), f32((c >> 8u) & 255u), f32((c >> 16u) & 255u)) / 255.0;
}

fn albedo_of(which: u32, g: vec3<f32>) -> vec3<f32> {
    let c = clamped_corners(g);
    var r: array<f32, 8>;
    var gr: array<f32, 8>;
    var b: array<f32, 8>;
    for (var k = 0u; k < 8u; k++) {
        var packed = smoke_albedo[c.idx[k]];
        if which == LIQUID {
            packed = liquid_albedo[c.idx[k]];
        }
        let u = unpack(packed);
        r[k] = u.x;
        gr[k] = u.y;
        b[k] = u.z;
    }
    return vec3<f32>(trilinear(r, c.f), trilinear(gr, c.f), trilinear(b, c.f));
}

fn sky(d: vec3<f32>) -> vec3<f32> {
    let t = clamp(0.5 + 0.5 * dot(d, p.up.xyz), 0.0, 1.0);
    return mix(SKY_LOW, SKY_HIGH, t);
}

fn bisect(which: u32, level: f32, outside: f32, o: vec3<f32>, d: vec3<f32>, lo_in: f32, hi_in: f32) -> f32 {
    var lo = lo_in;
    var hi = hi_in;
    for (var k = 0u; k < BISECTIONS; k++) {
        let mid = 0.5 * (lo + hi);
        if sample(which, cell_coords(o + d * mid), outside) > level {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    return 0.5 * (lo + hi);
}

fn normal(which: u32, outside: f32, q: vec3<f32>, d: vec3<f32>) -> vec3<f32> {
    let g = cell_coords(q);
    var grad = vec3<f32>(0.0);
    for (var a = 0u; a < 3u; a++) {
        var gp = g;
        var gm = g;
        gp[a] += 0.5;
        gm[a] -= 0.5;
        grad[a] = sample(which, gp, outside) - sample(which, gm, outside);
    }
    if dot(grad, grad) < 1e-20 {
        return -d;
    }
    return -normalize(grad);
}

fn shade(q: vec3<f32>, nrm: vec3<f32>, d: vec3<f32>, albedo: vec3<f32>, specular: f32) -> vec3<f32> {
    let sun = p.sun.xyz;
    let lit = light(q + nrm * (SHADOW_OFFSET * p.origin.w));
    let diffuse = max(dot(nrm, sun), 0.0);
    let half_vector = normalize(sun - d);
    let highlight = specular * pow(max(dot(nrm, half_vector), 0.0), SHININESS) * lit;
    let fresnel = pow(1.0 - max(dot(nrm, -d), 0.0), 5.0);
    return albedo * (AMBIENT + SUN * diffuse * lit) + highlight + RIM * fresnel * REFLECTION;
}

fn dominant(v: vec3<f32>) -> u32 {
    let a = abs(v);
    var k = 0u;
    if a.y > a[k] {
        k = 1u;
    }
    if a.z > a[k] {
        k = 2u;
    }
    return k;
}

fn floor_colour(q: vec3<f32>, d: vec3<f32>) -> vec3<f32> {
    let up = p.up.xyz;
    let tile = p.sun.w;
    let k = dominant(up);
    let u = q[(k + 1u) % 3u];
    let v = q[(k + 2u) % 3u];
    let checker = (i32(floor(u / tile)) + i32(floor(v / tile))) & 1;
    var albedo = FLOOR_DARK;
    if checker == 0 {
        albedo = FLOOR_LIGHT;
    }
    let lit = light(q + up * (0.5 * p.origin.w));
    let c = albedo * (AMBIENT + SUN * max(dot(up, p.sun.xyz), 0.0) * lit);
    let r = q - p.centre.xyz;
    let across = r - up * dot(r, up);
    let fade = exp(-dot(across, across) / pow(FLOOR_FADE * p.centre.w, 2.0));
    return mix(sky(d), vec3<f32>(c), fade);
}

fn edges(x: u32, y: u32, depth: f32) -> f32 {
    let px = vec2<f32>(f32(x) + 0.5, f32(y) + 0.5);
    var cover = 0.0;
    for (var e = 0u; e < 12u; e++) {
        let a = p.edges[2u * e];
        let b = p.edges[2u * e + 1u];
        if a.w == 0.0 {
            continue;
        }
        let u = b.xy - a.xy;
        let t = clamp(dot(px - a.xy, u) * b.w, 0.0, 1.0);
        let gap = px - a.xy - t * u;
        let gap2 = dot(gap, gap);
        if gap2 >= EDGE_WIDTH * EDGE_WIDTH {
            continue;
        }
        let z = 1.0 / (a.z + (b.z - a.z) * t);
        if z < depth {
            cover = max(cover, 1.0 - sqrt(gap2) / EDGE_WIDTH);
        }
    }
    return cover;
}

fn srgb8(c: f32) -> u32 {
    let x = clamp(c, 0.0, 1.0);
    var s = 12.92 * x;
    if x > 0.0031308 {
        s = 1.055 * pow(x, 1.0 / 2.4) - 0.055;
    }
    return u32(s * 255.0 + 0.5);
}

@compute @workgroup_size(8, 8, 1)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x >= p.size.x || id.y >= p.size.y {
        return;
    }
    let o = p.eye.xyz;
    let sx = (2.0 * (f32(id.x) + 0.5) / f32(p.size.x) - 1.0) * p.forward.w * p.right.w;
    let sy = (1.0 - 2.0 * (f32(id.y) + 0.5) / f32(p.size.y)) * p.forward.w;
    let d = normalize(p.forward.xyz + p.right.xyz * sx + p.cam_up.xyz * sy);
    let h = p.origin.w;
    let n = grid_n();
    let flags = p.n.w;
    let up = p.up.xyz;
    let origin = p.origin.xyz;
    let grid_max = origin + vec3<f32>(n) * h;

    let tb = slab(o, d, origin - h, grid_max + h);
    let t0 = max(tb.x, 0.0);
    let facing_down = dot(d, up);
    var t_floor = BIG;
    if (flags & FLOOR) != 0u && facing_down < -1e-6 {
        let t = (p.up.w - dot(o, up)) / facing_down;
        if t > 0.0 {
            t_floor = t;
        }
    }
    let t_end = min(tb.y, t_floor);

    var color = vec3<f32>(0.0);
    var transmit = 1.0;
    var hit_t = BIG;
    var hit_kind = 0u;
    if t0 < t_end && (flags & (HAS_LIQUID | HAS_SOLID | HAS_SMOKE)) != 0u {
        let dt = STEP * h;
        let max_steps = 4u * (u32(n.x + n.y + n.z) + 8u) * u32(1.0 / STEP);
        let smoke_dt = SMOKE_STEP * h;
        var next_dt = dt;
        var t = t0;
        for (var step = 0u; step < max_steps; step++) {
            if t >= t_end {
                break;
            }
            let t_next = min(t + next_dt, t_end);
            let q = o + d * t_next;
            let c = (q - origin) / h;
            let in_grid = all(c >= vec3<f32>(0.0)) && all(c < vec3<f32>(n));
            var here = flags & (HAS_LIQUID | HAS_SOLID | HAS_SMOKE);
            if in_grid {
                let b = vec3<u32>(c) / BRICK;
                let brick = bricks[(b.z * p.bricks.y + b.y) * p.bricks.x + b.x];
                here = brick & 255u;
                if here == 0u {
                    // Every brick within `empty - 1` of this one is empty too: jump out of that cube.
                    let empty = brick >> 8u;
                    let lo = origin + vec3<f32>((b - min(b, vec3<u32>(empty - 1u))) * BRICK) * h;
                    let hi = min(origin + vec3<f32>((b + empty) * BRICK) * h, grid_max);
                    let exit = slab(o, d, lo, hi).y;
                    t = max(exit, t_next);
                    next_dt = dt;
                    continue;
                }
            }
            let g = cell_coords(q);
            if (here & (HAS_LIQUID | HAS_SOLID)) == 0u {
                next_dt = smoke_dt;
            } else if (here & HAS_SMOKE) != 0u {
                next_dt = dt;
            } else {
                next_dt = BIG;
            }
            if (here & HAS_LIQUID) != 0u {
                let v = sample(LIQUID, g, p.levels.y);
                if v > p.levels.x {
                    hit_t = bisect(LIQUID, p.levels.x, p.levels.y, o, d, t, t_next);
                    hit_kind = HAS_LIQUID;
                }
                var bound = dt;
                if (flags & LIQUID_DISTANCE) != 0u {
                    bound = max(DISTANCE_TRUST * (p.levels.x - v), dt);
                }
                next_dt = min(next_dt, bound);
            }
            if (here & HAS_SOLID) != 0u {
                let v = sample(SOLID, g, p.levels.w);
                if v > p.levels.z {
                    let ts = bisect(SOLID, p.levels.z, p.levels.w, o, d, t, t_next);
                    if ts < hit_t {
                        hit_t = ts;
                        hit_kind = HAS_SOLID;
                    }
                }
                var bound = dt;
                if (flags & SOLID_DISTANCE) != 0u {
                    bound = max(DISTANCE_TRUST * (p.levels.z - v), dt);
                }
                next_dt = min(next_dt, bound);
            }
            if (here & HAS_SMOKE) != 0u {
                let end = min(t_next, hit_t);
                let len = end - t;
                if len > 0.0 {
                    let m = o + d * (0.5 * (t + end));
                    let gm = cell_coords(m);
                    let sigma = sample(SMOKE, gm, 0.0);
                    if sigma > 0.0 {
                        let alpha = 1.0 - exp(-sigma * len);
                        var albedo = p.smoke_albedo.xyz;
                        if (flags & SMOKE_CELLS) != 0u {
                            albedo = albedo_of(SMOKE, gm);
                        }
                        let lit = SMOKE_AMBIENT + SMOKE_SUN * light(m);
                        color += transmit * alpha * albedo * lit;
                        transmit *= 1.0 - alpha;
                    }
                }
            }
            if hit_kind != 0u || transmit < T_MIN {
                break;
            }
            t = t_next;
        }
    }

    var behind: vec3<f32>;
    if hit_kind == HAS_LIQUID {
        let q = o + d * hit_t;
        let nrm = normal(LIQUID, p.levels.y, q, d);
        var albedo = p.liquid_albedo.xyz;
        if (flags & LIQUID_CELLS) != 0u {
            albedo = albedo_of(LIQUID, cell_coords(q) - nrm);
        }
        behind = shade(q, nrm, d, albedo, LIQUID_SPECULAR);
    } else if hit_kind == HAS_SOLID {
        let q = o + d * hit_t;
        let nrm = normal(SOLID, p.levels.w, q, d);
        behind = shade(q, nrm, d, SOLID_ALBEDO, SOLID_SPECULAR);
    } else if t_floor < BIG {
        behind = floor_colour(o + d * t_floor, d);
    } else {
        behind = sky(d);
    }
    var c = color + transmit * behind;
    var depth = t_floor;
    if hit_kind != 0u {
        depth = hit_t;
    }
    let cover = edges(id.x, id.y, depth * dot(d, p.forward.xyz));
    if cover > 0.0 {
        c = mix(c, EDGE, EDGE_ALPHA * cover);
    }
    pixels[id.y * p.size.x + id.x] = srgb8(c.x) | (srgb8(c.y) << 8u) | (srgb8(c.z) << 16u) | (255u << 24u);
}
