// The gradient of the finest level's solution on the faces, as FLIP's volume correction moves particles by
// it (`eddies::flip` project.rs, `displacement_of`): one thread per face, component after component, each
// a grid of the faces with x fastest; on a face between two unknowns `0 − (x_above − x_below) / h` in double
// precision, the CPU's operations, rounded to f32; 0 on every other face (next to a solid, a wall, a cell
// cut off from the rest). No sums: a run repeats bit for bit.

struct Faces {
    // Per component: its faces per axis (xyz; z = 1 in 2D), and w its first face in `out`.
    dims: array<vec4<u32>, 3>,
    // 1/h (1/m).
    coef: f64,
    // Faces of all components.
    total: u32,
    _pad: u32,
}

@group(0) @binding(0) var<uniform> cg: Cg;
@group(0) @binding(1) var<uniform> faces: Faces;
@group(0) @binding(2) var<storage, read> diag: array<f32>;
// read_write: the vectors share one scratch buffer, and a dispatch may bind a buffer read-only or writable, not both.
@group(0) @binding(3) var<storage, read_write> x: array<f64>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let t = thread_index(wid, nwg, lid);
    if t >= faces.total {
        return;
    }
    var k = 0u;
    for (var a = 1u; a < DIM; a++) {
        if t >= faces.dims[a].w {
            k = a;
        }
    }
    let d = faces.dims[k];
    let f = t - d.w;
    let c = vec3<u32>(f % d.x, (f / d.x) % d.y, f / (d.x * d.y));
    // The cell above the face and the one below, in the padded layout (a halo cell where the face is on a
    // wall: its diagonal is 0).
    let s = cg.level.strides;
    var above = (c.x + 1u) + (c.y + 1u) * s.y;
    if DIM == 3u {
        above += (c.z + 1u) * s.z;
    }
    let below = above - s[k];
    var v = 0.0;
    if diag[above] > 0.0 && diag[below] > 0.0 {
        v = f32(0.0lf - faces.coef * (x[above] - x[below]));
    }
    out[t] = v;
}
