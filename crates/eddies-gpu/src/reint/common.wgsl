// What every reintegration-tracking kernel shares: the step's constants, the cell layout and the neighbour
// walk. The prelude before this file sets D (2 or 3), S (substances, 1 to 4) and the workgroup size.
//
// Arrays cover the interior cells, x fastest. Neighbours beyond the domain are, behind closed walls, the
// mirror image of the cell they face (position and velocity components across the wall negated), and
// vacuum behind open ones: what the CPU backend's halo of ghost cells holds.

struct Params {
    nx: u32, ny: u32, nz: u32, cells: u32,
    dt: f32, r: f32, reach: f32, vmax: f32,
    c2: f32, gamma: f32, tension: u32, law: u32,
    rho_min: f32, inv_vol: f32, inv_qpr: f32, kh: f32,
    kp: f32, kv: f32, closed: u32, pad0: u32,
    gx: f32, gy: f32, gz: f32, forces: u32,
    unit0: f32, unit1: f32, unit2: f32, unit3: f32,
    slot: u32, near_count: u32, partials: u32, pad: u32,
}

// Offsets in the order of the mirror-symmetric sums: (−1 + +1) + 0 along every axis, so that a cell and its
// mirror image add the same numbers in the same pairs and get the same bits.
fn order(i: u32) -> i32 {
    return select(select(0, 1, i == 1u), -1, i == 0u);
}

// The word layout of a workgroup's partial sums and of a step's log entry (P_*, SUM_WORDS, LOG_*,
// EXCHANGE_REMOVED) is set by the prelude: see `words` in mod.rs.

fn grid_n(p: Params) -> vec3<i32> {
    return vec3<i32>(i32(p.nx), i32(p.ny), i32(p.nz));
}

fn cell_index(c: vec3<i32>, p: Params) -> u32 {
    return u32(c.x) + p.nx * (u32(c.y) + p.ny * u32(c.z));
}

// The cell of this invocation, or a negative x for an invocation past the grid.
fn my_cell(gid: vec3<u32>, p: Params) -> vec3<i32> {
    if gid.x >= p.nx || gid.y >= p.ny || gid.z >= p.nz {
        return vec3<i32>(-1, 0, 0);
    }
    return vec3<i32>(gid);
}

// The neighbour of `c` at offset `o`: its index, the signs its position and velocity take (−1 along
// mirrored axes), and whether it exists (false beyond an open boundary).
struct Nb {
    index: u32,
    sign: vec3<f32>,
    valid: bool,
}

fn neighbour(c: vec3<i32>, o: vec3<i32>, p: Params) -> Nb {
    let n = grid_n(p);
    var q = c + o;
    var sign = vec3<f32>(1.0, 1.0, 1.0);
    var valid = true;
    for (var a = 0u; a < D; a++) {
        if q[a] < 0 || q[a] >= n[a] {
            q[a] = clamp(q[a], 0, n[a] - 1);
            sign[a] = -1.0;
            valid = valid && p.closed != 0u;
        }
    }
    return Nb(cell_index(q, p), sign, valid);
}

// The offset of step (zi, yi, xi) of the walk over the 3^D neighbours, each index in 0..3.
fn offset_of(zi: u32, yi: u32, xi: u32) -> vec3<i32> {
    var o = vec3<i32>(order(xi), order(yi), 0);
    if D == 3u {
        o.z = order(zi);
    }
    return o;
}

// Planes of the walk: three in 3D, one in 2D.
fn planes() -> u32 {
    return select(1u, 3u, D == 3u);
}

fn unit_of(k: u32, p: Params) -> f32 {
    switch k {
        case 0u: { return p.unit0; }
        case 1u: { return p.unit1; }
        case 2u: { return p.unit2; }
        default: { return p.unit3; }
    }
}

// Overlap of a box of half-size r centred at x with the cell [−½, ½] along one axis: (length, centre).
fn overlap(x: f32, r: f32) -> vec2<f32> {
    let lo = max(x - r, -0.5);
    let hi = min(x + r, 0.5);
    let len = select(0.0, hi - lo, hi - lo > 0.0);
    return vec2<f32>(len, 0.5 * (lo + hi));
}

// Overlap lengths of a box centred at x (one axis, in its own cell's frame) with the cells at offsets −1, 0
// and +1 along that axis.
fn overlaps(x: f32, r: f32) -> vec3<f32> {
    return vec3<f32>(overlap(-1.0 + x, r).x, overlap(x, r).x, overlap(1.0 + x, r).x);
}

// The scale of a box away from obstacles: 1 / Σ of its overlaps over the 3^D cells around, which factors
// into the product of the per-axis sums, each added (−1 + +1) + 0 so that mirror images agree. The
// bookkeeping and the gather compute it with this one function, so both see the same bits.
fn open_scale(x: vec3<f32>, r: f32) -> f32 {
    var t = 1.0;
    for (var a = 0u; a < D; a++) {
        let l = overlaps(x[a], r);
        t *= (l[0] + l[2]) + l[1];
    }
    return select(0.0, 1.0 / t, t > 0.0);
}

// The bookkeeping of one source particle (as the CPU backend's `reint::kernels::normalise`): its substance
// masses `m` less the parts the gather will hand out, round(frac · m) for every target of the walk, with
// frac = x-overlap × (overlaps across x × `inv`) × `wet` — `lens[a]` being its overlaps per axis
// (`overlaps`), `inv` its scale and `wet[k]` 1, or 0 for the k-th target of the walk if it is solid. The
// parts are added in the mirror-symmetric order. The gather hands each source's deficit to the cell that
// holds its box centre.
fn deficits(lens: array<vec3<f32>, 3>, inv: f32, m: array<f32, 4>, wet: array<f32, 27>) -> array<f32, 4> {
    var handed: array<f32, 4>;
    var handed_plane: array<f32, 4>;
    var handed_row: array<f32, 4>;
    for (var k = 0u; k < S; k++) {
        handed[k] = 0.0;
    }
    for (var zi = 0u; zi < planes(); zi++) {
        for (var k = 0u; k < S; k++) {
            handed_plane[k] = 0.0;
        }
        for (var yi = 0u; yi < 3u; yi++) {
            for (var k = 0u; k < S; k++) {
                handed_row[k] = 0.0;
            }
            for (var xi = 0u; xi < 3u; xi++) {
                let o = offset_of(zi, yi, xi);
                var across = 1.0;
                for (var a = 1u; a < D; a++) {
                    across *= lens[a][o[a] + 1];
                }
                let frac = (lens[0][o.x + 1] * (across * inv)) * wet[9u * zi + 3u * yi + xi];
                for (var k = 0u; k < S; k++) {
                    handed_row[k] += round(frac * m[k]);
                }
            }
            for (var k = 0u; k < S; k++) {
                handed_plane[k] += handed_row[k];
            }
        }
        for (var k = 0u; k < S; k++) {
            handed[k] += handed_plane[k];
        }
    }
    var left: array<f32, 4>;
    for (var k = 0u; k < 4u; k++) {
        left[k] = m[k] - handed[k];
    }
    return left;
}

// Where the bookkeeping keeps substance k's deficit of cell i: after the scale where the scale is stored
// (with obstacles), else from the start.
fn deficit_at(k: u32, i: u32, cells: u32) -> u32 {
    return (k + select(0u, 1u, OBSTACLES)) * cells + i;
}

// Whether a box centred at x (one axis, in a cell's frame) has its centre in the cell: half-open.
fn centre_in_cell(x: f32) -> bool {
    return x >= -0.5 && x < 0.5;
}

// Adds two 64-bit counts held as (low, high) pairs.
fn add64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    let lo = a.x + b.x;
    let carry = select(0u, 1u, lo < a.x);
    return vec2<u32>(lo, a.y + b.y + carry);
}

// A sum of diagnostics, in the words of a partial (the P_ constants above).
alias Sum = array<u32, SUM_WORDS>;

// Adds two sums: quanta as 64-bit integers, energy and momentum as f32, the larger squared speed, counts.
fn sum_add(a: Sum, b: Sum) -> Sum {
    var c: Sum;
    for (var k = 0u; k < 4u; k++) {
        let q = add64(vec2<u32>(a[2u * k], a[2u * k + 1u]), vec2<u32>(b[2u * k], b[2u * k + 1u]));
        c[2u * k] = q.x;
        c[2u * k + 1u] = q.y;
    }
    for (var k = P_KINETIC; k < P_SPEED2; k++) {
        c[k] = bitcast<u32>(bitcast<f32>(a[k]) + bitcast<f32>(b[k]));
    }
    c[P_SPEED2] = bitcast<u32>(max(bitcast<f32>(a[P_SPEED2]), bitcast<f32>(b[P_SPEED2])));
    c[P_CLAMPS] = a[P_CLAMPS] + b[P_CLAMPS];
    return c;
}

const WG: u32 = WG_X * WG_Y * WG_Z;
var<workgroup> workgroup_sums: array<Sum, WG>;

// The sum of every invocation's `mine` over the workgroup, added in a fixed tree order: the same bits on
// every run, whatever the scheduling. Every invocation must call it; the result is invocation 0's.
fn workgroup_sum(lid: u32, mine: Sum) -> Sum {
    workgroup_sums[lid] = mine;
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
        if lid < stride {
            workgroup_sums[lid] = sum_add(workgroup_sums[lid], workgroup_sums[lid + stride]);
        }
        workgroupBarrier();
    }
    return workgroup_sums[0];
}
