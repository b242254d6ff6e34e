// Obstacles after the advance (as the CPU backend's `ReintSim::keep_in_fluid_region`), per fluid cell next
// to an obstacle: a particle that sinks into the obstacle loses its velocity into it and is pushed out, and
// a box whose centre would land in a solid cell stays in its own cell.
//
// Bindings: 0 params, 1 near (per cell: index, distance, normal x, y, z as f32 bits), 2 mass, 3 fluid,
// 4 advanced (positions then velocities).

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> near: array<u32>;
@group(0) @binding(2) var<storage, read> mass: array<f32>;
@group(0) @binding(3) var<storage, read> fluid: array<u32>;
@group(0) @binding(4) var<storage, read_write> advanced: array<f32>;

fn solid_at(c: vec3<i32>, o: vec3<i32>) -> bool {
    let t = neighbour(c, o, p);
    // Beyond an open boundary there is no obstacle; behind a closed wall the mirror's solidity.
    return t.valid && fluid[t.index] == 0u;
}

@compute @workgroup_size(WG_LIST)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let e = gid.x;
    if e >= p.near_count {
        return;
    }
    let i = near[5u * e];
    let distance = bitcast<f32>(near[5u * e + 1u]);
    let normal = vec3<f32>(
        bitcast<f32>(near[5u * e + 2u]),
        bitcast<f32>(near[5u * e + 3u]),
        bitcast<f32>(near[5u * e + 4u]),
    );
    let n = p.cells;
    var total = 0.0;
    for (var k = 0u; k < S; k++) {
        total += mass[k * n + i];
    }
    if total <= 0.0 {
        return;
    }
    var x = vec3<f32>(0.0);
    var v = vec3<f32>(0.0);
    var along = 0.0;
    for (var a = 0u; a < D; a++) {
        x[a] = advanced[a * n + i];
        v[a] = advanced[(D + a) * n + i];
        along += normal[a] * x[a];
    }
    let depth = p.r - (distance + along);
    if depth > 0.0 {
        var vn = 0.0;
        for (var a = 0u; a < D; a++) {
            vn += v[a] * normal[a];
        }
        for (var a = 0u; a < D; a++) {
            if vn < 0.0 {
                v[a] -= vn * normal[a];
            }
            x[a] = clamp(x[a] + depth * normal[a], -p.reach, p.reach);
        }
    }
    // The box centre must land in a fluid cell: find the cell of the neighbourhood that holds it (in the
    // CPU backend's neighbour order, x fastest from −1).
    let c = vec3<i32>(i32(i % p.nx), i32((i / p.nx) % p.ny), i32(i / (p.nx * p.ny)));
    var centre_solid = true;
    let count = select(9u, 27u, D == 3u);
    for (var k = 0u; k < count; k++) {
        var o = vec3<i32>(i32(k % 3u) - 1, i32((k / 3u) % 3u) - 1, i32(k / 9u) - 1);
        if D == 2u {
            o.z = 0;
        }
        var inside = true;
        for (var a = 0u; a < D; a++) {
            let d = x[a] - f32(o[a]);
            inside = inside && d >= -0.5 && d < 0.5;
        }
        if inside {
            centre_solid = solid_at(c, o);
            break;
        }
    }
    for (var a = 0u; a < D; a++) {
        if centre_solid {
            x[a] = clamp(x[a], -0.5, 0.49);
        }
        advanced[a * n + i] = x[a];
        advanced[(D + a) * n + i] = v[a];
    }
}
