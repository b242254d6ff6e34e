// The V-cycle's levels, packed: level l's entries of b, x, t and the diagonal start at levels[l].base (the
// finest level at 0: its diagonal is the operator's), its ghost coefficients at levels[l].ghost_base. A cell
// is an unknown where its diagonal is positive; neighbours that are not unknowns hold zero in x.
//
// The per-cell steps of the cycle are functions here, run one cell per thread by `mg_level.wgsl` on large
// levels and looped over by one workgroup in `mg_small.wgsl` on the small ones: the same arithmetic either way.

// Which levels a launch works on, and the colour of a red-black half-sweep.
struct Step {
    fine: u32,
    coarse: u32,
    colour: u32,
    _pad: u32,
}

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<storage, read> state: State;
@group(0) @binding(2) var<storage, read> levels: array<Level>;
@group(0) @binding(3) var<storage, read> diag: array<f32>;
@group(0) @binding(4) var<storage, read> ghost: array<f32>;
@group(0) @binding(5) var<storage, read_write> b: array<f32>;
@group(0) @binding(6) var<storage, read_write> x: array<f32>;
@group(0) @binding(7) var<storage, read_write> t: array<f32>;

// Σⱼ xⱼ over the neighbours of cell i (packed index p) of level l.
fn neighbour_sum(l: Level, p: u32) -> f32 {
    let s = l.strides;
    var sum = x[p - 1u] + x[p + 1u] + x[p - s.y] + x[p + s.y];
    if DIM == 3u {
        sum += x[p - s.z] + x[p + s.z];
    }
    return sum;
}

// Red-black Gauss–Seidel at cell i of level l, if it is an unknown of `colour` (0: red, an even sum of
// interior coordinates): xᵢ = (h² bᵢ + Σⱼ xⱼ) / nᵢ.
fn relax(l: Level, i: u32, colour: u32) {
    let p = l.base + i;
    let d = diag[p];
    if !(d > 0.0) {
        return;
    }
    let c = coords(l, i);
    // Padded coordinates are the interior ones plus one per axis.
    if (c.x + c.y + c.z + DIM) % 2u != colour {
        return;
    }
    x[p] = (l.h2 * b[p] + neighbour_sum(l, p)) / d;
}

// t = b − A x at cell i of level l (A = (nᵢ xᵢ − Σⱼ xⱼ) / h²), 0 off the unknowns.
fn residual(l: Level, i: u32) {
    let p = l.base + i;
    let d = diag[p];
    if d > 0.0 {
        t[p] = b[p] - (d * x[p] - neighbour_sum(l, p)) / l.h2;
    } else {
        t[p] = 0.0;
    }
}

fn full_weight(o: u32) -> f32 {
    return select(0.375, 0.125, o == 0u || o == 3u);
}

// Full-weighting restriction of the fine level's t to cell i of the coarse level (halo included): the coarse
// cell at padded coordinate c gathers the fine cells at 2c + o − 1, o ∈ {−1, 0, 1, 2}, with weights
// (1, 3, 3, 1)/8 per axis (the transpose of multilinear prolongation, over 2^D).
fn restrict_to(f: Level, k: Level, i: u32) {
    let c = vec3<i32>(coords(k, i));
    let fp = vec3<i32>(f.padded.xyz);
    let zs = select(1u, 4u, DIM == 3u);
    var sum = 0.0;
    for (var oz = 0u; oz < zs; oz++) {
        var fz = 0;
        var wz = 1.0;
        if DIM == 3u {
            fz = 2 * c.z + i32(oz) - 2;
            wz = full_weight(oz);
            if fz < 0 || fz >= fp.z {
                continue;
            }
        }
        for (var oy = 0u; oy < 4u; oy++) {
            let fy = 2 * c.y + i32(oy) - 2;
            if fy < 0 || fy >= fp.y {
                continue;
            }
            let row = f.base + (u32(fz) * f.padded.y + u32(fy)) * f.padded.x;
            var along = 0.0;
            for (var ox = 0u; ox < 4u; ox++) {
                let fx = 2 * c.x + i32(ox) - 2;
                if fx >= 0 && fx < fp.x {
                    along += full_weight(ox) * t[row + u32(fx)];
                }
            }
            sum += wz * full_weight(oy) * along;
        }
    }
    t[k.base + i] = sum;
}

// The first red half-sweep of level l from x = 0 at cell i, given its bᵢ: every neighbour holds zero, so no
// neighbour is read (a pass that zeroes the others' x may run at the same time).
fn relax_red_from_zero(l: Level, i: u32, bi: f32) {
    let p = l.base + i;
    let d = diag[p];
    let c = coords(l, i);
    if d > 0.0 && (c.x + c.y + c.z + DIM) % 2u == 0u {
        x[p] = (l.h2 * bi + 0.0) / d;
    } else {
        x[p] = 0.0;
    }
}

// The ghost shell's transpose at cell i of coarse level l: bᵢ = tᵢ plus what its ghost neighbours hold,
// weighted by their coefficient towards it (unknowns only, 0 elsewhere), returned too; and xᵢ = 0, the
// level's correction before it is smoothed.
fn fold(l: Level, i: u32) -> f32 {
    let p = l.base + i;
    x[p] = 0.0;
    var v = 0.0;
    if diag[p] > 0.0 {
        v = t[p];
        let per = 2u * DIM;
        for (var a = 0u; a < DIM; a++) {
            let st = l.strides[a];
            // The lower neighbour sees this cell on its upper side, and the other way round.
            v += ghost[l.ghost_base + (i - st) * per + 2u * a + 1u] * t[p - st];
            v += ghost[l.ghost_base + (i + st) * per + 2u * a] * t[p + st];
        }
    }
    b[p] = v;
    return v;
}

// The extension of coarse level l's correction at cell i: tᵢ = xᵢ on an unknown, Σ g · x of its unknown
// neighbours on a ghost cell, 0 elsewhere.
fn extend(l: Level, i: u32) {
    let p = l.base + i;
    if diag[p] > 0.0 {
        t[p] = x[p];
        return;
    }
    let c = coords(l, i);
    let per = 2u * DIM;
    var v = 0.0;
    for (var a = 0u; a < DIM; a++) {
        let st = l.strides[a];
        let lo = ghost[l.ghost_base + i * per + 2u * a];
        let hi = ghost[l.ghost_base + i * per + 2u * a + 1u];
        if lo != 0.0 && c[a] > 0u {
            v += lo * x[p - st];
        }
        if hi != 0.0 && c[a] + 1u < l.padded[a] {
            v += hi * x[p + st];
        }
    }
    t[p] = v;
}

// Multilinear prolongation of the coarse level's extended correction t, added at cell i of the fine level
// if it is an unknown: per axis 3/4 of the parent and 1/4 of the coarse neighbour on the child's side.
fn prolong(f: Level, k: Level, i: u32) {
    let p = f.base + i;
    if !(diag[p] > 0.0) {
        return;
    }
    let fc = coords(f, i);
    // Padded coarse coordinates of the parent and of the neighbour on the child's side, per axis.
    var parent: vec3<u32>;
    var other: vec3<u32>;
    for (var a = 0u; a < 3u; a++) {
        if a < DIM {
            let fi = fc[a] - 1u;
            parent[a] = fi / 2u + 1u;
            other[a] = select(parent[a] + 1u, parent[a] - 1u, fi % 2u == 0u);
        } else {
            parent[a] = 0u;
            other[a] = 0u;
        }
    }
    let zs = select(1u, 2u, DIM == 3u);
    var sum = 0.0;
    for (var kz = 0u; kz < zs; kz++) {
        let cz = select(parent.z, other.z, kz == 1u);
        let wz = select(1.0, select(0.75, 0.25, kz == 1u), DIM == 3u);
        for (var ky = 0u; ky < 2u; ky++) {
            let cy = select(parent.y, other.y, ky == 1u);
            let wy = select(0.75, 0.25, ky == 1u);
            let row = k.base + (cz * k.padded.y + cy) * k.padded.x;
            let along = 0.75 * t[row + parent.x] + 0.25 * t[row + other.x];
            sum += wz * wy * along;
        }
    }
    x[p] += sum;
}
