// The vector solve's right-hand sides from the splatted vorticity, where the splat left it (`rhs.rs`): the
// host's arithmetic of `eddies::vpm::poisson`'s device solve, in f64. On each interior point of the grid, in
// the padded layout of a box of the grid's shape (one halo cell a side, x fastest), `scale` (h²) times the
// vorticity's component, plus the values of its neighbours on the grid's outer layer (the Dirichlet
// values), axis by axis, the lower neighbour first; 0 elsewhere.
//
// SUMS: one thread per run of RUN padded entries writes each component's sum of squares over the run, in
// index order (the host adds the runs in order: its own bits). Otherwise one thread per padded entry writes
// the right-hand side of `component` into the field that the Poisson solver reads. The prelude defines WG,
// RUN, SUMS, the uniform `Rhs`, and `on_face` and `slot` of the outer layer (`rhs.rs`).

@group(0) @binding(0) var<uniform> p: Rhs;
// Three f32 per grid point, x fastest (the splat's).
@group(0) @binding(1) var<storage, read> vorticity: array<f32>;
// Three f64 per point of the outer layer, in storage order (z, then y, then x slowest to fastest).
@group(0) @binding(2) var<storage, read> boundary: array<f64>;
// SUMS: the runs' sums of squares, component after component; otherwise the right-hand side.
@group(0) @binding(3) var<storage, read_write> out: array<f64>;

// Component `c` of the right-hand side at padded entry `i`.
fn rhs(i: u32, c: u32) -> f64 {
    let q = vec3<u32>(i % p.padded.x, (i / p.padded.x) % p.padded.y, i / (p.padded.x * p.padded.y));
    // The unknowns: grid coordinates 1 to dims − 2, padded ones 2 to dims − 1.
    if any(q < vec3<u32>(2u)) || any(q >= p.dims.xyz) {
        return 0.0lf;
    }
    let g = q - 1u;
    var v = f64(vorticity[3u * (g.x + p.dims.x * (g.y + p.dims.y * g.z)) + c]) * p.scale;
    for (var a = 0u; a < 3u; a++) {
        var e = vec3<u32>(0u);
        e[a] = 1u;
        let lower = g - e;
        if on_face(lower, p.dims.xyz) {
            v += boundary[3u * slot(lower, p.dims.xyz) + c];
        }
        let upper = g + e;
        if on_face(upper, p.dims.xyz) {
            v += boundary[3u * slot(upper, p.dims.xyz) + c];
        }
    }
    return v;
}

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let t = (wid.x + wid.y * nwg.x) * WG + lid;
    if SUMS {
        if t >= p.runs {
            return;
        }
        let first = t * RUN;
        let last = min(first + RUN, p.len);
        for (var c = 0u; c < 3u; c++) {
            var sum = 0.0lf;
            for (var i = first; i < last; i++) {
                let v = rhs(i, c);
                sum += v * v;
            }
            out[c * p.runs + t] = sum;
        }
    } else {
        if t >= p.len {
            return;
        }
        out[t] = rhs(t, p.component);
    }
}
