// Builds the V-cycle's hierarchy on the device, a coarse level from the one above it, by the CPU's rules
// (eddies::linsolve::multigrid, hierarchy.rs: McAdams, Sifakis & Teran 2010, §4; the boundary distance of
// Gibou et al. 2002). OP says which step, on level build.coarse from level build.fine:
// 0: the cell kinds, four cells (one packed word) per thread, and the level's unknowns counted;
// 1: the Dirichlet link weights and the diagonal, a cell per thread;
// 2: the ghost coefficients, a cell per thread;
// 3: the coarsest level's null space (its unknowns out of reach of every Dirichlet cell), in one workgroup;
// 4: the finest level's diagonal (build.coarse = 0), a cell per thread.
// Every step reads only what an earlier launch wrote, so the result depends on nothing but the finest level.

struct Build {
    fine: u32,
    coarse: u32,
    // The kind of the cells beyond the grid (the halo).
    outside: u32,
    _pad: u32,
}

@group(0) @binding(0) var<uniform> build: Build;
@group(0) @binding(1) var<storage, read> levels: array<Level>;
// The kind of every padded cell of every level, a byte each, level l's from byte levels[l].base.
@group(0) @binding(2) var<storage, read_write> kinds: array<u32>;
// Each coarse level's link weights (2·DIM per cell, axis-major, lower side first), from levels[l].ghost_base.
@group(0) @binding(3) var<storage, read_write> weights: array<f32>;
@group(0) @binding(4) var<storage, read_write> diag: array<f32>;
@group(0) @binding(5) var<storage, read_write> ghost: array<f32>;
// The coarsest level's labels (its group, 0, 1, …; NO_LABEL: none), then as many words of work, of which the
// first receives the number of groups at the end.
@group(0) @binding(6) var<storage, read_write> labels: array<atomic<u32>>;
// The unknowns of each level (integer sums: their total does not depend on the order). The CPU's hierarchy
// ends above the first level without one, and so does the device's cycle.
@group(0) @binding(7) var<storage, read_write> counts: array<atomic<u32>>;

const SOLID: u32 = 0u;
const DIRICHLET: u32 = 1u;
const UNKNOWN: u32 = 2u;
const NO_LABEL: u32 = 0xffffffffu;
// Marks a component's root once a Dirichlet cell is found next to it.
const REACHED: u32 = 0x80000000u;

fn kind_at(l: Level, i: u32) -> u32 {
    let p = l.base + i;
    return (kinds[p / 4u] >> (8u * (p % 4u))) & 0xffu;
}

// The order in which a coarse cell takes its children's kinds: Dirichlet over unknown over solid.
fn rank(k: u32) -> u32 {
    return select(select(0u, 2u, k == DIRICHLET), 1u, k == UNKNOWN);
}

fn is_halo(l: Level, c: vec3<u32>) -> bool {
    var halo = false;
    for (var a = 0u; a < DIM; a++) {
        halo = halo || c[a] == 0u || c[a] + 1u == l.padded[a];
    }
    return halo;
}

fn index_of(l: Level, c: vec3<u32>) -> u32 {
    return c.x + c.y * l.strides.y + c.z * l.strides.z;
}

// The kind that coarse cell c (padded coordinates) takes from its children: the outside's on the halo.
fn merged(f: Level, k: Level, c: vec3<u32>) -> u32 {
    if is_halo(k, c) {
        return build.outside;
    }
    var best = SOLID;
    let zs = select(1u, 2u, DIM == 3u);
    for (var oz = 0u; oz < zs; oz++) {
        for (var oy = 0u; oy < 2u; oy++) {
            for (var ox = 0u; ox < 2u; ox++) {
                // Interior coordinates of the child, then padded ones.
                let child = 2u * (c - vec3<u32>(1u)) + vec3<u32>(ox, oy, oz);
                var inside = true;
                for (var a = 0u; a < DIM; a++) {
                    inside = inside && child[a] < f.dims[a];
                }
                if inside {
                    var fc = child + vec3<u32>(1u);
                    if DIM == 2u {
                        fc.z = 0u;
                    }
                    let kd = kind_at(f, index_of(f, fc));
                    if rank(kd) > rank(best) {
                        best = kd;
                    }
                }
            }
        }
    }
    return best;
}

// The kind of coarse cell c: an unknown none of whose neighbours is an unknown or Dirichlet is cut off from
// everything and becomes solid, as on the CPU.
fn coarse_kind(f: Level, k: Level, c: vec3<u32>) -> u32 {
    let own = merged(f, k, c);
    if own != UNKNOWN {
        return own;
    }
    for (var a = 0u; a < DIM; a++) {
        var lo = c;
        lo[a] -= 1u;
        var hi = c;
        hi[a] += 1u;
        if merged(f, k, lo) != SOLID || merged(f, k, hi) != SOLID {
            return UNKNOWN;
        }
    }
    return SOLID;
}

// Step 0: the kinds of the four cells of packed word w of the coarse level (its base is a multiple of 4).
fn kinds_word(w: u32) {
    let f = levels[build.fine];
    let k = levels[build.coarse];
    var word = 0u;
    var unknowns = 0u;
    for (var j = 0u; j < 4u; j++) {
        let i = 4u * w + j;
        if i < k.padded.w {
            let kind = coarse_kind(f, k, coords(k, i));
            word |= kind << (8u * j);
            unknowns += u32(kind == UNKNOWN);
        }
    }
    kinds[k.base / 4u + w] = word;
    if unknowns > 0u {
        atomicAdd(&counts[build.coarse], unknowns);
    }
}

// The weight of fine cell i's link along `axis` on the `upper` side (1 on the finest level, which keeps none).
fn fine_weight(f: Level, i: u32, axis: u32, upper: u32) -> f64 {
    if build.fine == 0u {
        return 1.0lf;
    }
    return f64(weights[f.ghost_base + i * 2u * DIM + 2u * axis + upper]);
}

// The weight of the link from unknown coarse cell c to its Dirichlet neighbour along `axis` on the `upper`
// side: 1/θ averaged over the columns of children facing it, θ the distance in coarse spacings from the
// coarse centre to the first fine Dirichlet cell along the column (hierarchy.rs, dirichlet_link_weights).
fn link_weight(f: Level, c: vec3<u32>, axis: u32, upper: u32) -> f32 {
    let st = f.strides[axis];
    var inverse_theta = 0.0lf;
    var columns = 0u;
    let corners = 1u << DIM;
    for (var t = 0u; t < corners; t++) {
        if ((t >> axis) & 1u) != 0u {
            continue;
        }
        var child = vec3<u32>(0u);
        var inside = true;
        for (var a = 0u; a < DIM; a++) {
            child[a] = 2u * (c[a] - 1u) + select((t >> a) & 1u, upper, a == axis);
            inside = inside && child[a] < f.dims[a];
        }
        if !inside {
            continue;
        }
        var fc = child + vec3<u32>(1u);
        if DIM == 2u {
            fc.z = 0u;
        }
        let ia = index_of(f, fc);
        if kind_at(f, ia) != UNKNOWN {
            continue;
        }
        let n1 = select(ia - st, ia + st, upper == 1u);
        let k1 = kind_at(f, n1);
        // Distance (fine spacings) from the child's centre to the boundary along this column.
        var delta: f64;
        if k1 == DIRICHLET {
            delta = 1.0lf / fine_weight(f, ia, axis, upper);
        } else if k1 == UNKNOWN && kind_at(f, select(n1 - st, n1 + st, upper == 1u)) == DIRICHLET {
            delta = 1.0lf + 1.0lf / fine_weight(f, n1, axis, upper);
        } else {
            continue;
        }
        inverse_theta += 2.0lf / (delta + 0.5lf);
        columns += 1u;
    }
    if columns == 0u {
        return 1.0;
    }
    return f32(inverse_theta / f64(columns));
}

// Step 1: cell i's link weights (1 but towards a Dirichlet neighbour of an unknown) and its diagonal in
// units of 1/h² (an unknown's neighbours, each Dirichlet one counted with its weight, summed in the CPU's
// order; 0 off the unknowns).
fn weights_and_diagonal(i: u32) {
    let f = levels[build.fine];
    let k = levels[build.coarse];
    let per = 2u * DIM;
    let unknown = kind_at(k, i) == UNKNOWN;
    let c = coords(k, i);
    var sum = 0.0f;
    for (var axis = 0u; axis < DIM; axis++) {
        for (var upper = 0u; upper < 2u; upper++) {
            var w = 1.0f;
            if unknown {
                let st = k.strides[axis];
                let kj = kind_at(k, select(i - st, i + st, upper == 1u));
                if kj == DIRICHLET {
                    w = link_weight(f, c, axis, upper);
                    sum += w;
                } else if kj == UNKNOWN {
                    sum += 1.0f;
                }
            }
            weights[k.ghost_base + i * per + 2u * axis + upper] = w;
        }
    }
    diag[k.base + i] = select(0.0f, sum, unknown);
}

// Step 2: cell i's coefficients of the extension of a correction (hierarchy.rs, ghost_coefficients): towards
// each unknown neighbour j, 1 from a solid cell and 1 − (j's link weight towards it) from a Dirichlet one,
// over the number of unknown neighbours; 0 on the unknowns and on cells with no unknown neighbour.
fn ghosts(i: u32) {
    let k = levels[build.coarse];
    let per = 2u * DIM;
    let own = kind_at(k, i);
    let c = coords(k, i);
    var g: array<f64, 6>;
    var m = 0u;
    if own != UNKNOWN {
        for (var a = 0u; a < DIM; a++) {
            let st = k.strides[a];
            for (var upper = 0u; upper < 2u; upper++) {
                var v = 0.0lf;
                let inside = select(c[a] > 0u, c[a] + 1u < k.padded[a], upper == 1u);
                if inside {
                    let j = select(i - st, i + st, upper == 1u);
                    if kind_at(k, j) == UNKNOWN {
                        m += 1u;
                        // The link seen from j points the other way.
                        let w = f64(weights[k.ghost_base + j * per + 2u * a + 1u - upper]);
                        v = select(1.0lf - w, 1.0lf, own == SOLID);
                    }
                }
                g[2u * a + upper] = v;
            }
        }
    }
    for (var s = 0u; s < per; s++) {
        var v = 0.0f;
        if m > 0u {
            v = f32(g[s] / f64(m));
        }
        ghost[k.ghost_base + i * per + s] = v;
    }
}

var<workgroup> changed: atomic<u32>;
var<workgroup> again: u32;

fn sync() {
    storageBarrier();
    workgroupBarrier();
}

// Step 4: the finest level's diagonal as the CPU's operator has it (poisson.rs, from_kinds): an unknown's
// neighbours that are not solid, every link of weight 1 there; 0 off the unknowns. A small integer, exact in
// f32 whatever the order of the sum, so the host need not send it.
fn finest_diagonal(i: u32) {
    let l = levels[0];
    var sum = 0u;
    if kind_at(l, i) == UNKNOWN {
        for (var a = 0u; a < DIM; a++) {
            let st = l.strides[a];
            sum += u32(kind_at(l, i - st) != SOLID) + u32(kind_at(l, i + st) != SOLID);
        }
    }
    diag[i] = f32(sum);
}

// Step 3, one workgroup over the coarsest level: each unknown takes the smallest index of its group (integer
// minima until nothing changes, so the result does not depend on the order of the updates), each group that
// touches a Dirichlet cell is marked at its root, and the unmarked groups are numbered in the order of their
// roots, their first cells (as the CPU numbers them), by one thread.
fn null_space(lid: u32) {
    let k = levels[build.coarse];
    let n = k.padded.w;
    for (var i = lid; i < n; i += WG) {
        atomicStore(&labels[n + i], select(NO_LABEL, i, kind_at(k, i) == UNKNOWN));
    }
    sync();
    loop {
        if lid == 0u {
            atomicStore(&changed, 0u);
        }
        sync();
        for (var i = lid; i < n; i += WG) {
            if kind_at(k, i) != UNKNOWN {
                continue;
            }
            let own = atomicLoad(&labels[n + i]);
            var low = own;
            for (var a = 0u; a < DIM; a++) {
                let st = k.strides[a];
                for (var upper = 0u; upper < 2u; upper++) {
                    let j = select(i - st, i + st, upper == 1u);
                    if kind_at(k, j) == UNKNOWN {
                        low = min(low, atomicLoad(&labels[n + j]));
                    }
                }
            }
            if low < own {
                atomicMin(&labels[n + i], low);
                atomicStore(&changed, 1u);
            }
        }
        sync();
        if lid == 0u {
            again = atomicLoad(&changed);
        }
        if workgroupUniformLoad(&again) == 0u {
            break;
        }
    }
    for (var i = lid; i < n; i += WG) {
        if kind_at(k, i) != UNKNOWN {
            continue;
        }
        for (var a = 0u; a < DIM; a++) {
            let st = k.strides[a];
            for (var upper = 0u; upper < 2u; upper++) {
                if kind_at(k, select(i - st, i + st, upper == 1u)) == DIRICHLET {
                    let root = atomicLoad(&labels[n + i]) & ~REACHED;
                    atomicOr(&labels[n + root], REACHED);
                }
            }
        }
    }
    sync();
    if lid != 0u {
        return;
    }
    // A root comes before the other cells of its group: its number is set when they read it.
    var groups = 0u;
    for (var i = 0u; i < n; i++) {
        var label = NO_LABEL;
        if kind_at(k, i) == UNKNOWN {
            let root = atomicLoad(&labels[n + i]) & ~REACHED;
            if (atomicLoad(&labels[n + root]) & REACHED) == 0u {
                if root == i {
                    label = groups;
                    groups += 1u;
                } else {
                    label = atomicLoad(&labels[root]);
                }
            }
        }
        atomicStore(&labels[i], label);
    }
    atomicStore(&labels[n], groups);
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = thread_index(wid, nwg, lid);
    let cells = levels[build.coarse].padded.w;
    switch OP {
        case 0u: {
            if i < (cells + 3u) / 4u {
                kinds_word(i);
            }
        }
        case 1u: {
            if i < cells {
                weights_and_diagonal(i);
            }
        }
        case 2u: {
            if i < cells {
                ghosts(i);
            }
        }
        case 3u: {
            null_space(lid);
        }
        default: {
            if i < cells {
                finest_diagonal(i);
            }
        }
    }
}
