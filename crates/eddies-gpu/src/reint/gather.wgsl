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

const WG: u32 = WG_X * WG_Y * WG_Z;
// Per invocation: quanta (low words, high words) per substance; kinetic energy, momentum, squared speed.
var<workgroup> red_q: array<array<vec2<u32>, 4>, WG>;
var<workgroup> red_f: array<vec4<f32>, WG>;
var<workgroup> red_max: array<f32, WG>;

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
                    if STORED_SCALE {
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
        let keep = p.has_fluid == 0u || fluid[i] != 0u;
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
    // The workgroup's sums, in a fixed tree order.
    for (var k = 0u; k < 4u; k++) {
        red_q[lid][k] = vec2<u32>(u32(q_out[k]), 0u);
    }
    red_f[lid] = vec4<f32>(0.5 * cell_mass * speed2, cell_mass * vel.x, cell_mass * vel.y, cell_mass * vel.z);
    // Specks (under 1% of a cell at rest density) do not set the time step.
    red_max[lid] = select(0.0, speed2, quanta >= 0.01 / p.inv_qpr);
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
        if lid < stride {
            for (var k = 0u; k < S; k++) {
                red_q[lid][k] = add64(red_q[lid][k], red_q[lid + stride][k]);
            }
            red_f[lid] = red_f[lid] + red_f[lid + stride];
            red_max[lid] = max(red_max[lid], red_max[lid + stride]);
        }
        workgroupBarrier();
    }
    if lid == 0u {
        let w = (wid.x + nwg.x * (wid.y + nwg.y * wid.z)) * P_WORDS;
        for (var k = 0u; k < 4u; k++) {
            partials[w + 2u * k] = red_q[0][k].x;
            partials[w + 2u * k + 1u] = red_q[0][k].y;
        }
        partials[w + P_KINETIC] = bitcast<u32>(red_f[0].x);
        partials[w + P_MOMENTUM] = bitcast<u32>(red_f[0].y);
        partials[w + P_MOMENTUM + 1u] = bitcast<u32>(red_f[0].z);
        partials[w + P_MOMENTUM + 2u] = bitcast<u32>(red_f[0].w);
        partials[w + P_SPEED2] = bitcast<u32>(red_max[0]);
    }
}
