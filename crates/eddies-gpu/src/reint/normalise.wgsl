// The bookkeeping pass before the gather, next to obstacles (away from them `forces` does it while it has
// the advanced particle at hand), per source particle: the scale 1/Σ frac over the fluid cells its box
// overlaps, and per substance the deficit m − Σ round(frac · scale · m) over those cells (`deficits`), the
// parts computed exactly as the gather computes them. The gather hands the deficit to the cell that holds
// the box centre, so every particle's parts add up to its mass in whole quanta: mass is conserved exactly,
// in integer arithmetic.
//
// Bindings: 0 params, 1 advanced (positions then velocities), 2 mass, 3 book (with obstacles the scale,
// then S deficits; without, the deficits only: the gather computes the scale itself), 4 fluid (1 fluid, 0
// solid; read only with obstacles).

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> advanced: array<f32>;
@group(0) @binding(2) var<storage, read> mass: array<f32>;
@group(0) @binding(3) var<storage, read_write> book: array<f32>;
@group(0) @binding(4) var<storage, read> fluid: array<u32>;

// Whether the target at offset −o from c (the cell that sees this source at offset o) is fluid, as 1 or 0.
fn wet(c: vec3<i32>, o: vec3<i32>) -> f32 {
    if !OBSTACLES {
        return 1.0;
    }
    let t = neighbour(c, -o, p);
    // Beyond an open boundary there is no obstacle; behind a closed wall the mirror's solidity.
    if !t.valid {
        return 1.0;
    }
    return f32(fluid[t.index]);
}

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let c = my_cell(gid, p);
    if c.x < 0 {
        return;
    }
    let i = cell_index(c, p);
    let cells = p.cells;
    var m: array<f32, 4>;
    var any = false;
    for (var k = 0u; k < S; k++) {
        m[k] = mass[k * cells + i];
        any = any || m[k] > 0.0;
    }
    if !any {
        // No mass to hand out: nothing to scale, no rounding remainder.
        if OBSTACLES {
            book[i] = 0.0;
        }
        for (var k = 0u; k < S; k++) {
            book[deficit_at(k, i, cells)] = 0.0;
        }
        return;
    }
    // Overlap lengths of this box with the cells at offsets −1, 0, +1 (as seen from them) per axis:
    // lens[a][o + 1] = overlap(o + x_a).
    var lens: array<vec3<f32>, 3>;
    var x = vec3<f32>(0.0);
    for (var a = 0u; a < D; a++) {
        x[a] = advanced[a * cells + i];
        lens[a] = overlaps(x[a], p.r);
    }
    // Σ frac over the fluid targets, in the mirror-symmetric order.
    var inv: f32;
    if !OBSTACLES {
        inv = open_scale(x, p.r);
    } else {
        var total = 0.0;
        for (var zi = 0u; zi < planes(); zi++) {
            var plane = 0.0;
            for (var yi = 0u; yi < 3u; yi++) {
                var row = 0.0;
                for (var xi = 0u; xi < 3u; xi++) {
                    let o = offset_of(zi, yi, xi);
                    var across = 1.0;
                    for (var a = 1u; a < D; a++) {
                        across *= lens[a][o[a] + 1];
                    }
                    row += (lens[0][o.x + 1] * across) * wet(c, o);
                }
                plane += row;
            }
            total += plane;
        }
        inv = select(0.0, 1.0 / total, total > 0.0);
    }
    // The parts, with the gather's arithmetic; a part that lands on a solid cell is not handed out (the
    // fluid cells' parts cover it through the scale).
    var wets: array<f32, 27>;
    for (var zi = 0u; zi < planes(); zi++) {
        for (var yi = 0u; yi < 3u; yi++) {
            for (var xi = 0u; xi < 3u; xi++) {
                wets[9u * zi + 3u * yi + xi] = wet(c, offset_of(zi, yi, xi));
            }
        }
    }
    let left = deficits(lens, inv, m, wets);
    if OBSTACLES {
        book[i] = inv;
    }
    for (var k = 0u; k < S; k++) {
        book[deficit_at(k, i, cells)] = left[k];
    }
}
