// The grid's velocity sampled at points (`sampling.rs`): at each vorton and tracer the trilinear blend of
// the velocity at the eight grid points of its stencil (`FittedGrid::cic`, corner by corner in the order of
// `Grid::sample_at`), and at the vortons that ask for it the same blend of the velocity gradient at those
// points, by the differences of `FittedGrid::differences`. Sums in double precision, each point one
// thread's; the results rounded to f32. The prelude is the sort's (`thread_index`) and `Sampling`.

@group(0) @binding(0) var<uniform> p: Sampling;
// The velocity (m/s), three numbers per grid point, x fastest.
@group(0) @binding(1) var<storage, read> velocity: array<f64>;
// Each point's stencil: its fractions along each axis, and in w the bits of the key of its lowest grid point.
@group(0) @binding(2) var<storage, read> point: array<vec4<f32>>;
// The velocity at each point (three numbers), and at the first `p.gradient` points its gradient (nine,
// row-major ∂uᵢ/∂x_k).
@group(0) @binding(3) var<storage, read_write> out_velocity: array<f32>;
@group(0) @binding(4) var<storage, read_write> out_gradient: array<f32>;

// The velocity at grid point `g`.
fn value(g: u32) -> vec3<f64> {
    return vec3<f64>(velocity[3u * g], velocity[3u * g + 1u], velocity[3u * g + 2u]);
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let q = thread_index(wid, nwg, lid);
    if q >= p.points {
        return;
    }
    let v = point[q];
    let f = vec3<f64>(v.xyz);
    let base = coordinates(bitcast<u32>(v.w));
    let gradient = q < p.gradient;
    var u = vec3<f64>(0.0lf);
    // Columns k of ∂u/∂x_k.
    var d = array<vec3<f64>, 3>(vec3<f64>(0.0lf), vec3<f64>(0.0lf), vec3<f64>(0.0lf));
    for (var k = 0u; k < 8u; k++) {
        let c = corner(base, f, k);
        u += c.w * value(c.g);
        if gradient {
            for (var a = 0u; a < 3u; a++) {
                d[a] += c.w * difference(c.here, c.g, a);
            }
        }
    }
    out_velocity[3u * q] = f32(u.x);
    out_velocity[3u * q + 1u] = f32(u.y);
    out_velocity[3u * q + 2u] = f32(u.z);
    if gradient {
        for (var i = 0u; i < 3u; i++) {
            for (var k = 0u; k < 3u; k++) {
                out_gradient[9u * q + 3u * i + k] = f32(d[k][i]);
            }
        }
    }
}
