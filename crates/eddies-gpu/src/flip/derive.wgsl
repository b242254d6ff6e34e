// What the FLIP step derives from this substep's particle-to-grid sums (`[Σ w, Σ w u]` per face, `p2g.wgsl`),
// formed here so that only it crosses the bus: 4 bytes a face and 4 a cell instead of the sums' 8 a face. It
// runs after every other launch of the transfer (the counts of the kept particles read the prefix sums).
// One thread per face, then one per cell:
// - the face velocity `Σ w u / Σ w`, 0 where `Σ w` is 0 (`eddies::flip` transfer.rs, `velocities_from_sums`),
//   divided in single precision as `load.wgsl` divides it;
// - the fill fraction (mark.rs, `fill_fraction`): the cell's 2D faces' weights, each over the part of its
//   kernel inside a closed domain, added in the CPU's order (axes ascending, the lower face first) but in
//   single precision, times 1 / (2D n0).
// Nothing is summed across threads, so a run repeats bit for bit.

struct Derive {
    // Per component: its faces per axis, and its first face in `fields`.
    dims: array<vec4<u32>, 3>,
    base: vec4<u32>,
    // Cells per axis (1 beyond D); w: the faces of every component.
    cells: vec4<u32>,
    // 1 / (2D n0); whether the domain is closed.
    scale: f32, closed: u32, pad0: u32, pad1: u32,
}

@group(0) @binding(0) var<uniform> d: Derive;
// The sums per face; the counts per cell after them are not read.
@group(0) @binding(1) var<storage, read> fields: array<vec2<f32>>;
// The velocity of every face (the displacement's face field, free until the volume correction writes it).
@group(0) @binding(2) var<storage, read_write> velocity: array<f32>;
// The fill fraction of every cell (over the sort's prefix sums, which nothing reads again but their total,
// beyond these).
@group(0) @binding(3) var<storage, read_write> fill: array<f32>;

// The part of a face's tent kernel inside the domain, for a face at index `f` of an axis of `n` cells: along
// its own axis (at an integer position; half of it beyond a wall) or across (at a half-integer one; an
// eighth beyond a wall).
fn inside(along: bool, f: u32, n: u32) -> f32 {
    if d.closed == 0u {
        return 1.0;
    }
    if along {
        return select(1.0, 0.5, f == 0u || f == n);
    }
    return select(1.0, 0.875, f == 0u || f + 1u == n);
}

// Face `at` of component `k`.
fn face_index(k: u32, at: vec3<u32>) -> u32 {
    let n = d.dims[k];
    return d.base[k] + at.x + n.x * (at.y + n.y * at.z);
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = thread_index(wid, nwg, lid);
    let faces = d.cells.w;
    if i < faces {
        let s = fields[i];
        var u = 0.0;
        if s.x > 0.0 {
            u = s.y / s.x;
        }
        velocity[i] = u;
        return;
    }
    let c = i - faces;
    let n = d.cells.xyz;
    if c >= n.x * n.y * n.z {
        return;
    }
    let cell = vec3<u32>(c % n.x, (c / n.x) % n.y, c / (n.x * n.y));
    var sum = 0.0;
    for (var k = 0u; k < D; k++) {
        var across = 1.0;
        for (var a = 0u; a < D; a++) {
            if a != k {
                across *= inside(false, cell[a], n[a]);
            }
        }
        var upper = cell;
        upper[k] += 1u;
        sum += fields[face_index(k, cell)].x / (inside(true, cell[k], n[k]) * across);
        sum += fields[face_index(k, upper)].x / (inside(true, cell[k] + 1u, n[k]) * across);
    }
    fill[c] = sum * d.scale;
}
