// Stage "reintegrate" (as the CPU backend's `reint::kernels::reintegrate`): every cell gathers, from its
// 3^D neighbours, the part of each advanced particle's box of half-size r that overlaps it: round(frac ·
// scale · m) quanta of each substance plus, where the cell holds the box centre, the source's rounding
// deficit; the part's centre of mass and momentum. The sums, in the mirror-symmetric order, become the cell's
// new particle. The workgroup's diagnostic sums go to `partials`, added in a fixed tree order.
//
// Bindings: 0 params, 1 advanced (positions then velocities), 2 mass (read), 3 book (as `normalise`),
// 4 fluid, 5 motion (new positions and velocities), 6 next mass, 7 partials.

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> advanced: array<f32>;
@group(0) @binding(2) var<storage, read> mass: array<f32>;
@group(0) @binding(3) var<storage, read> book: array<f32>;
@group(0) @binding(4) var<storage, read> fluid: array<u32>;
@group(0) @binding(5) var<storage, read_write> motion: array<f32>;
@group(0) @binding(6) var<storage, read_write> next_mass: array<f32>;
@group(0) @binding(7) var<storage, read_write> partials: array<u32>;

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn main(
    @builtin(global_invocation_id) gid: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    let c = my_cell(gid, p);
    let cells = p.cells;
    var q_out: array<f32, 4>;
    var vel = vec3<f32>(0.0);
    var cell_mass = 0.0;
    var speed2 = 0.0;
    var quanta = 0.0;
    for (var k = 0u; k < 4u; k++) {
        q_out[k] = 0.0;
    }
    if c.x >= 0 {
        let i = cell_index(c, p);
        var m_total: array<f32, 4>;
        var m_plane: array<f32, 4>;
        var m_row: array<f32, 4>;
        var total = 0.0;
        var centre = vec3<f32>(0.0);
        var momentum = vec3<f32>(0.0);
        for (var k = 0u; k < S; k++) {
            m_total[k] = 0.0;
        }
        for (var zi = 0u; zi < planes(); zi++) {
            var total_plane = 0.0;
            var centre_plane = vec3<f32>(0.0);
            var momentum_plane = vec3<f32>(0.0);
            for (var k = 0u; k < S; k++) {
                m_plane[k] = 0.0;
            }
            for (var yi = 0u; yi < 3u; yi++) {
                var total_row = 0.0;
                var centre_row = vec3<f32>(0.0);
                var momentum_row = vec3<f32>(0.0);
                for (var k = 0u; k < S; k++) {
                    m_row[k] = 0.0;
                }
                for (var xi = 0u; xi < 3u; xi++) {
                    let off = offset_of(zi, yi, xi);
                    let nb = neighbour(c, off, p);
                    if !nb.valid {
                        continue;
                    }
                    let j = nb.index;
                    var xj = vec3<f32>(0.0);
                    for (var a = 0u; a < D; a++) {
                        xj[a] = nb.sign[a] * advanced[a * cells + j];
                    }
                    var scale: f32;
                    if OBSTACLES {
                        scale = book[j];
                    } else {
                        scale = open_scale(xj, p.r);
                    }
                    // The overlaps across x times the scale, then along x, as `normalise` multiplies them.
                    var across = 1.0;
                    var owns = 1.0;
                    var centre_j = vec3<f32>(0.0);
                    var len_x = 0.0;
                    for (var a = 0u; a < D; a++) {
                        let x = f32(off[a]) + xj[a];
                        let ov = overlap(x, p.r);
                        if a == 0u {
                            len_x = ov.x;
                        } else {
                            across *= ov.x;
                        }
                        centre_j[a] = ov.y;
                        owns = select(0.0, owns, centre_in_cell(x));
                    }
                    let frac = len_x * (across * scale);
                    var part_kg = 0.0;
                    for (var k = 0u; k < S; k++) {
                        let part = round(frac * mass[k * cells + j]) + owns * book[deficit_at(k, j, cells)];
                        m_row[k] += part;
                        part_kg += part * unit_of(k, p);
                    }
                    total_row += part_kg;
                    for (var a = 0u; a < D; a++) {
                        centre_row[a] += centre_j[a] * part_kg;
                        momentum_row[a] += part_kg * (nb.sign[a] * advanced[(D + a) * cells + j]);
                    }
                }
                for (var k = 0u; k < S; k++) {
                    m_plane[k] += m_row[k];
                }
                total_plane += total_row;
                centre_plane += centre_row;
                momentum_plane += momentum_row;
            }
            for (var k = 0u; k < S; k++) {
                m_total[k] += m_plane[k];
            }
            total += total_plane;
            centre += centre_plane;
            momentum += momentum_plane;
        }
        // Solid cells keep nothing: what the parts brought them was paid for by the fluid cells' parts.
        let keep = !OBSTACLES || fluid[i] != 0u;
        let inv = select(0.0, 1.0 / total, total > 0.0 && keep);
        for (var k = 0u; k < S; k++) {
            let q = select(0.0, m_total[k], keep);
            q_out[k] = q;
            quanta += q;
            cell_mass += q * unit_of(k, p);
            next_mass[k * cells + i] = q;
        }
        for (var a = 0u; a < D; a++) {
            motion[a * cells + i] = clamp(centre[a] * inv, -0.5, 0.5);
            let v = momentum[a] * inv;
            motion[(D + a) * cells + i] = v;
            vel[a] = v;
            speed2 += v * v;
        }
    }
    // This cell's terms of the diagnostics, summed over the workgroup (the clamp count is the force
    // kernel's: not written here).
    var mine: Sum;
    for (var k = 0u; k < 4u; k++) {
        mine[2u * k] = u32(q_out[k]);
        mine[2u * k + 1u] = 0u;
    }
    mine[P_KINETIC] = bitcast<u32>(0.5 * cell_mass * speed2);
    for (var a = 0u; a < 3u; a++) {
        mine[P_MOMENTUM + a] = bitcast<u32>(cell_mass * vel[a]);
    }
    // Specks (under 1% of a cell at rest density) do not set the time step.
    mine[P_SPEED2] = bitcast<u32>(select(0.0, speed2, quanta >= 0.01 / p.inv_qpr));
    mine[P_CLAMPS] = 0u;
    let total = workgroup_sum(lid, mine);
    if lid == 0u {
        let w = (wid.x + nwg.x * (wid.y + nwg.y * wid.z)) * P_WORDS;
        for (var k = 0u; k < P_CLAMPS; k++) {
            partials[w + k] = total[k];
        }
    }
}
