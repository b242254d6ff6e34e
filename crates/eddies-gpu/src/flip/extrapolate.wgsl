// The velocity extrapolation into the air on the device, before the particle pass, as the CPU's
// (`eddies::flip` extrapolate.rs) for a simulation without obstacles whose particles the device keeps.
// OP 0 marks the known faces: a fluid cell (one holding a kept particle) on either side. OP 1 adds one
// layer: each unknown face next to a known one (same component, along any axis) takes the mean of its known
// neighbours (lower then upper, axis by axis) and becomes known, every value from the layer before (Jacobi
// order: a face written in a layer was unknown in it, so no thread of the layer reads it). OP 2 sets the
// closed walls' faces back to 0, as the CPU's boundary conditions after its extrapolation. The faces'
// `u − u_old` moves with `u`; a wall's keeps the host's, as its `u` ends at the host's 0.

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<uniform> m: Move;
// `[u, u − u_old]` per face, two floats each, then the kept particles' counts per cell (as bits).
@group(0) @binding(2) var<storage, read_write> fields: array<f32>;
// Known faces: before the layer, and after it (ranges of one scratch buffer, so both bound writable).
@group(0) @binding(3) var<storage, read_write> known_in: array<u32>;
@group(0) @binding(4) var<storage, read_write> known_out: array<u32>;

// A face: its component, its index within the component, and its coordinates.
struct Face {
    k: u32,
    local: u32,
    c: vec3<u32>,
}

fn faces_of(k: u32) -> u32 {
    return m.dims[k].x * m.dims[k].y * m.dims[k].z;
}

fn face_of(f: u32) -> Face {
    var out: Face;
    out.k = 0u;
    for (var k = 1u; k < D; k++) {
        if f >= m.base[k] {
            out.k = k;
        }
    }
    out.local = f - m.base[out.k];
    var rest = out.local;
    for (var a = 0u; a < 3u; a++) {
        out.c[a] = rest % m.dims[out.k][a];
        rest /= m.dims[out.k][a];
    }
    return out;
}

// Whether cell `c` holds a kept particle; `inside` false for a cell beyond the grid.
fn fluid(c: vec3<u32>, inside: bool) -> bool {
    if !inside {
        return false;
    }
    let total = m.base[D - 1u] + faces_of(D - 1u);
    let cell = c.x + p.cells.x * (c.y + p.cells.y * c.z);
    return bitcast<u32>(fields[2u * total + cell]) > 0u;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let f = thread_index(wid, nwg, lid);
    if f >= m.base[D - 1u] + faces_of(D - 1u) {
        return;
    }
    let face = face_of(f);
    let k = face.k;
    let ck = face.c[k];
    if OP == 0u {
        var below = face.c;
        below[k] = max(ck, 1u) - 1u;
        let known = fluid(below, ck > 0u) || fluid(face.c, ck < p.cells[k]);
        known_out[f] = u32(known);
        return;
    }
    let wall = ck == 0u || ck + 1u == m.dims[k][k];
    if OP == 2u {
        if wall {
            fields[2u * f] = 0.0;
        }
        return;
    }
    if known_in[f] != 0u {
        known_out[f] = 1u;
        return;
    }
    var sum = 0.0;
    var n = 0u;
    var stride = 1u;
    for (var a = 0u; a < D; a++) {
        if face.c[a] > 0u && known_in[f - stride] != 0u {
            sum += fields[2u * (f - stride)];
            n += 1u;
        }
        if face.c[a] + 1u < m.dims[k][a] && known_in[f + stride] != 0u {
            sum += fields[2u * (f + stride)];
            n += 1u;
        }
        stride *= m.dims[k][a];
    }
    if n == 0u {
        known_out[f] = 0u;
        return;
    }
    let mean = sum / f32(n);
    if !(wall && m.closed != 0u) {
        fields[2u * f + 1u] += mean - fields[2u * f];
    }
    fields[2u * f] = mean;
    known_out[f] = 1u;
}
