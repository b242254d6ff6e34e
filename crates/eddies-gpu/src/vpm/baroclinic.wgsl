// The baroclinic stage's density gradient at the vortons (`baroclinic.rs`): the splatted density's gradient
// by the differences of `FittedGrid::differences` (central, one-sided at the faces) at the eight grid points
// of each vorton's stencil, blended with its trilinear weights corner by corner in the order of
// `Grid::sample_at`. Sums in double precision, each vorton one thread's; the result rounded to f32. The
// prelude is `sampling.rs`'s (`thread_index`, `Sampling` and the grid's helpers).

@group(0) @binding(0) var<uniform> p: Sampling;
// The splat's vortons, two vec4<f32> each: the first its stencil's fractions and, in w, the bits of its
// lowest grid point's index.
@group(0) @binding(1) var<storage, read> vorton: array<vec4<f32>>;
// The splatted density deviation (kg/m³), the first of three f32 per grid point.
@group(0) @binding(2) var<storage, read> density: array<f32>;
// ∇ρ (kg/m⁴) at each vorton, three f32.
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

// The density at grid point `g` (as the first of three numbers: the sampling's differences are of vectors).
fn value(g: u32) -> vec3<f64> {
    return vec3<f64>(f64(density[3u * g]), 0.0lf, 0.0lf);
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let q = thread_index(wid, nwg, lid);
    if q >= p.points {
        return;
    }
    let v = vorton[2u * q];
    let f = vec3<f64>(v.xyz);
    let base = coordinates(bitcast<u32>(v.w));
    var d = vec3<f64>(0.0lf);
    for (var k = 0u; k < 8u; k++) {
        let c = corner(base, f, k);
        for (var a = 0u; a < 3u; a++) {
            d[a] += c.w * difference(c.here, c.g, a).x;
        }
    }
    out[3u * q] = f32(d.x);
    out[3u * q + 1u] = f32(d.y);
    out[3u * q + 2u] = f32(d.z);
}
