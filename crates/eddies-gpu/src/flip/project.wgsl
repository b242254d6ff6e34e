// The pressure projection's stages on the particle device's own copy of the velocity, as the host applies
// them to its copy (`eddies::flip` project.rs), so that the host need send neither the right-hand side nor
// the projected velocity: from this substep's particle-to-grid sums, which the face fields still hold. OP 0,
// before the solve, one thread per cell: the right-hand side into the face field; OP 1, after it, one thread
// per face: the projected velocity from the pressure that the solve left in the face field; OP 2, after that,
// one thread per cell: the volume correction's right-hand side into the face field (`eddies::flip`
// volume.rs). OP 3 (with OP 0) and OP 4 (before OP 1), one thread per cell and a workgroup per block of
// BLOCK (= WG) cells: the step's tally (`eddies::flip` measure.rs, `GridTally`). Every sum has a fixed
// order: a run repeats bit for bit.
// - The host's velocity: `u = Σ w u / Σ w` (0 where `Σ w` is 0), divided as `derive.wgsl` divides it; the
//   body force `u += Δt g` in double precision where the axis has gravity, then 0 on a closed wall.
// - OP 0: on a fluid cell (one holding a kept particle) `scale (Σₖ (u_above − u_below)) inv_h`, the axes in
//   order, 0 on the others, in the pressure solve's padded layout (its halo is not written).
// - OP 1: on a face between two non-solid cells with fluid on a side (a cell beyond a closed wall is solid,
//   one beyond an open side air at pressure 0), `u −= coef (p_above − p_below)`; the fields become
//   `[u, u − u_old]` with `u` rounded once to single precision, as `load.wgsl` forms them from the host's
//   velocity.
// - The fill fraction of a fluid cell outlives the solve in the cell's count, which OP 0 overwrites with it
//   (with `keep_fill`): the fill with its sign bit set, never 0 as bits, so that a count read as bits still
//   tells a fluid cell (here and in `extrapolate.wgsl`). Nothing reads the counts themselves after the
//   transfer's read-back.
// - OP 2: on a fluid cell `kappa (f − 1)` with `f` that fill fraction, or `kappa max(f − 1, 0)` where a
//   neighbour inside the grid is not fluid; 0 on the others, in the padded layout (over the dead pressure).
// - OP 3: the sum of `min(f, 1)` over the block's cells, of the fill fraction that the transfer derived
//   (every cell: without obstacles none is solid; 0 past the grid's end), as a pairwise tree
//   (`GridTally::block_sum`: `v[i] += v[i + s]` for `i < s`, `s` halving from BLOCK / 2), into
//   `tally[block]`.
// - OP 4: the largest |∇·u| over the block's fluid cells (0 on the others) of the velocity that OP 1 forms,
//   before its rounding, with the host's divergence (`MacGrid::divergence_into`), into
//   `tally[blocks + block]`; −1 for one that is not a number, where the driver keeps NaN (WGSL lets it
//   assume there is none).

struct Project {
    // Per component: its faces per axis, and its first face in `fields`.
    dims: array<vec4<u32>, 3>,
    base: vec4<u32>,
    // `Δt g` per axis (m/s), added where bit k of `forced` is set.
    force0: f64, force1: f64, force2: f64,
    // `Δt / (ρ h)`, `1 / h`, `−ρ / Δt`; the volume correction's strength.
    coef: f64, inv_h: f64, scale: f64, kappa: f64,
    // Whether OP 0 keeps the fill fraction in the counts.
    forced: u32, closed: u32, keep_fill: u32, pad0: u32, pad1: u32, pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<uniform> q: Project;
// The sums per face (two floats each), then the kept particles' counts per cell (as bits).
@group(0) @binding(2) var<storage, read_write> fields: array<f32>;
// The face field: OP 0 writes the right-hand side, OP 1 reads the pressure, in the solver's padded layout
// (one halo cell per side); OP 2 writes the volume correction's right-hand side.
@group(0) @binding(3) var<storage, read_write> padded: array<f64>;
// The fill fraction per cell that the transfer derived (`derive.wgsl`), read by OP 0 with `keep_fill`.
@group(0) @binding(4) var<storage, read> fill: array<f32>;
// The step's tallies per block: OP 3's sums, then OP 4's largest divergences.
@group(0) @binding(5) var<storage, read_write> tally: array<f64>;

// Where cell `c`'s count lies in the fields (after every component's faces).
fn count_index(c: vec3<u32>) -> u32 {
    let total = q.base[D - 1u] + faces_of(D - 1u);
    return 2u * total + c.x + p.cells.x * (c.y + p.cells.y * c.z);
}

fn faces_of(k: u32) -> u32 {
    return q.dims[k].x * q.dims[k].y * q.dims[k].z;
}

// Whether cell `c` (inside the grid) holds a kept particle.
fn fluid(c: vec3<u32>) -> bool {
    return bitcast<u32>(fields[count_index(c)]) > 0u;
}

// The padded index of cell `c` (inside the grid).
fn padded_index(c: vec3<u32>) -> u32 {
    let sy = p.cells.x + 2u;
    var at = (c.x + 1u) + (c.y + 1u) * sy;
    if D == 3u {
        at += (c.z + 1u) * sy * (p.cells.y + 2u);
    }
    return at;
}

// Face `c` of component `k`: its index in the fields.
fn face_index(k: u32, c: vec3<u32>) -> u32 {
    let n = q.dims[k];
    return q.base[k] + c.x + n.x * (c.y + n.y * c.z);
}

// The transfer's velocity `u_old` at face `f`, from its sums.
fn old_velocity(f: u32) -> f32 {
    let w = fields[2u * f];
    if w > 0.0 {
        return fields[2u * f + 1u] / w;
    }
    return 0.0;
}

// The host's velocity at face `c` of component `k` after the body force and the walls, from `old`, its
// `u_old`.
fn forced(k: u32, c: vec3<u32>, old: f32) -> f64 {
    var u = f64(old);
    if ((q.forced >> k) & 1u) != 0u {
        u += force(k);
    }
    if q.closed != 0u && (c[k] == 0u || c[k] == p.cells[k]) {
        u = 0.0lf;
    }
    return u;
}

fn force(k: u32) -> f64 {
    switch k {
        case 0u: {
            return q.force0;
        }
        case 1u: {
            return q.force1;
        }
        default: {
            return q.force2;
        }
    }
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let t = thread_index(wid, nwg, lid);
    if OP == 0u {
        right_hand_side(t);
    } else if OP == 1u {
        project(t);
    } else if OP == 2u {
        excess(t);
    } else if OP == 3u {
        fill_block(t, lid);
    } else {
        divergence_block(t, lid);
    }
}

// The block's values, OP 3's and OP 4's.
var<workgroup> block: array<f64, BLOCK>;

// The blocks of the grid (a launch folded into two dimensions may have workgroups past them).
fn blocks() -> u32 {
    return (p.cells.x * p.cells.y * p.cells.z + BLOCK - 1u) / BLOCK;
}

// OP 3 at cell `i`, thread `lid` of its block.
fn fill_block(i: u32, lid: u32) {
    var v = 0.0lf;
    if in_grid(i) {
        v = f64(min(fill[i], 1.0));
    }
    block[lid] = v;
    workgroupBarrier();
    for (var s = BLOCK / 2u; s > 0u; s /= 2u) {
        if lid < s {
            block[lid] += block[lid + s];
        }
        workgroupBarrier();
    }
    if lid == 0u && i / BLOCK < blocks() {
        tally[i / BLOCK] = block[0];
    }
}

// OP 4 at cell `i`, thread `lid` of its block.
fn divergence_block(i: u32, lid: u32) {
    var d = 0.0lf;
    if in_grid(i) {
        let c = cell_of(i);
        if fluid(c) {
            d = abs(divergence(c, true) * q.inv_h);
            if d != d {
                d = -1.0lf;
            }
        }
    }
    block[lid] = d;
    workgroupBarrier();
    for (var s = BLOCK / 2u; s > 0u; s /= 2u) {
        if lid < s {
            let a = block[lid];
            let b = block[lid + s];
            block[lid] = select(max(a, b), -1.0lf, a < 0.0lf || b < 0.0lf);
        }
        workgroupBarrier();
    }
    if lid == 0u && i / BLOCK < blocks() {
        tally[blocks() + i / BLOCK] = block[0];
    }
}

// `Σₖ (u_above − u_below)` at cell `c`, the axes in order, of the host's velocity after the body force and
// the walls (OP 0), or with `after` after the projection too (OP 4).
fn divergence(c: vec3<u32>, after: bool) -> f64 {
    var div = 0.0lf;
    for (var k = 0u; k < D; k++) {
        var above = c;
        above[k] += 1u;
        div += face_velocity(k, above, after) - face_velocity(k, c, after);
    }
    return div;
}

// The host's velocity at face `c` of component `k`, as `divergence` takes it.
fn face_velocity(k: u32, c: vec3<u32>, after: bool) -> f64 {
    let old = old_velocity(face_index(k, c));
    if after {
        return projected(k, c, old);
    }
    return forced(k, c, old);
}

// Whether thread `i` has a cell, and which (x fastest).
fn in_grid(i: u32) -> bool {
    return i < p.cells.x * p.cells.y * p.cells.z;
}

fn cell_of(i: u32) -> vec3<u32> {
    let n = p.cells.xyz;
    return vec3<u32>(i % n.x, (i / n.x) % n.y, i / (n.x * n.y));
}

// OP 0 at cell `i`.
fn right_hand_side(i: u32) {
    if !in_grid(i) {
        return;
    }
    let c = cell_of(i);
    var b = 0.0lf;
    if fluid(c) {
        b = q.scale * (divergence(c, false) * q.inv_h);
        if q.keep_fill != 0u {
            // Only this thread reads this cell's count, and as bits it stays above 0.
            fields[count_index(c)] = bitcast<f32>(bitcast<u32>(fill[i]) | 0x80000000u);
        }
    }
    padded[padded_index(c)] = b;
}

// OP 2 at cell `i`.
fn excess(i: u32) {
    if !in_grid(i) {
        return;
    }
    let c = cell_of(i);
    let n = p.cells.xyz;
    var b = 0.0lf;
    let kept = fields[count_index(c)];
    if bitcast<u32>(kept) > 0u {
        var interior = true;
        for (var k = 0u; k < D; k++) {
            var below = c;
            var above = c;
            below[k] -= select(0u, 1u, c[k] > 0u);
            above[k] += 1u;
            if (c[k] > 0u && !fluid(below)) || (above[k] < n[k] && !fluid(above)) {
                interior = false;
            }
        }
        let rel = f64(abs(kept)) - 1.0lf;
        b = q.kappa * select(max(rel, 0.0lf), rel, interior);
    }
    padded[padded_index(c)] = b;
}

// OP 1 at face `f`.
fn project(f: u32) {
    if f >= q.base[D - 1u] + faces_of(D - 1u) {
        return;
    }
    var k = 0u;
    for (var a = 1u; a < D; a++) {
        if f >= q.base[a] {
            k = a;
        }
    }
    var rest = f - q.base[k];
    var c: vec3<u32>;
    for (var a = 0u; a < 3u; a++) {
        c[a] = rest % q.dims[k][a];
        rest /= q.dims[k][a];
    }
    let old = old_velocity(f);
    let rounded = f32(projected(k, c, old));
    fields[2u * f] = rounded;
    fields[2u * f + 1u] = rounded - old;
}

// The projected velocity at face `c` of component `k` in double precision, from `old`, its `u_old`, and
// the pressure in the face field.
fn projected(k: u32, c: vec3<u32>, old: f32) -> f64 {
    var u = forced(k, c, old);
    let n = p.cells[k];
    let has_below = c[k] > 0u;
    let has_above = c[k] < n;
    // A closed wall's face lies next to a solid: no pressure difference.
    if q.closed == 0u || (has_below && has_above) {
        var below = c;
        below[k] -= select(0u, 1u, has_below);
        if (has_below && fluid(below)) || (has_above && fluid(c)) {
            var p_below = 0.0lf;
            var p_above = 0.0lf;
            if has_below {
                p_below = padded[padded_index(below)];
            }
            if has_above {
                p_above = padded[padded_index(c)];
            }
            u = u - q.coef * (p_above - p_below);
        }
    }
    return u;
}
