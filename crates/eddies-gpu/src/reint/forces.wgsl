// Stages "density", "forces" and "advance", fused: every cell computes the density and pressure term of
// itself and its 3^D neighbours from their masses, the SPH pressure and viscous accelerations (as the CPU
// backend's `reint::kernels::sph_forces`), and advances its particle: V += Δt (a + g), speed-limited, then
// X' = X + Δt V within the neighbourhood the gather visits. The advanced particle goes to `advanced`; the
// state it read stays untouched for the neighbours. Away from obstacles it also does the bookkeeping of
// the advanced particle (`deficits`), which it has at hand: one pass over memory less.
//
// Bindings: 0 params, 1 motion (positions then velocities, D arrays each), 2 mass (S arrays), 3 advanced
// (as motion), 4 partials (per workgroup; this kernel writes the clamp count), 5 book (the deficits; only
// away from obstacles, where `normalise` does not run).

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> motion: array<f32>;
@group(0) @binding(2) var<storage, read> mass: array<f32>;
@group(0) @binding(3) var<storage, read_write> advanced: array<f32>;
@group(0) @binding(4) var<storage, read_write> partials: array<u32>;
@group(0) @binding(5) var<storage, read_write> book: array<f32>;

var<workgroup> clamped: atomic<u32>;

// Density and the pressure term q = P/ρ² of cell i (as `reint::kernels::density`): (ρ, q).
fn density(i: u32) -> vec2<f32> {
    var total = 0.0;
    var quanta = 0.0;
    for (var k = 0u; k < S; k++) {
        let m = mass[k * p.cells + i];
        total += m * unit_of(k, p);
        quanta += m;
    }
    let s = quanta * p.inv_qpr;
    let rho = total * p.inv_vol;
    if !(rho > p.rho_min) {
        return vec2<f32>(0.0, 0.0);
    }
    let sf = select(0.5, s, s > 0.5);
    let inv = 1.0 / (sf * sf);
    var q_rest: f32;
    switch p.law {
        case 0u: { q_rest = p.c2 * s * inv; }
        case 1u: { q_rest = p.c2 / p.gamma * (pow(s, p.gamma) - 1.0) * inv; }
        default: { q_rest = p.c2 * s * (s - 1.0) * inv; }
    }
    if !(p.tension != 0u || q_rest > 0.0) {
        q_rest = 0.0;
    }
    return vec2<f32>(rho, q_rest * s / rho);
}

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn main(
    @builtin(global_invocation_id) gid: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    if lid == 0u {
        atomicStore(&clamped, 0u);
    }
    workgroupBarrier();
    let c = my_cell(gid, p);
    if c.x >= 0 {
        let i = cell_index(c, p);
        let cells = p.cells;
        var xi = vec3<f32>(0.0);
        var vi = vec3<f32>(0.0);
        for (var a = 0u; a < D; a++) {
            xi[a] = motion[a * cells + i];
            vi[a] = motion[(D + a) * cells + i];
        }
        var present_mass = false;
        var m: array<f32, 4>;
        for (var k = 0u; k < S; k++) {
            m[k] = mass[k * cells + i];
            present_mass = present_mass || m[k] > 0.0;
        }
        var acc = vec3<f32>(0.0);
        if p.forces != 0u && present_mass {
            let own = density(i);
            let rho_i = own.x;
            let q_i = own.y;
            let inv_rho_i = select(0.0, 1.0 / rho_i, rho_i > 0.0);
            let h = p.kh;
            let eps2 = 0.01 * h * h;
            // Three levels of the mirror-symmetric sum: row, plane, total.
            var fp_total = vec3<f32>(0.0);
            var fv_total = vec3<f32>(0.0);
            for (var zi = 0u; zi < planes(); zi++) {
                var fp_plane = vec3<f32>(0.0);
                var fv_plane = vec3<f32>(0.0);
                for (var yi = 0u; yi < 3u; yi++) {
                    var fp_row = vec3<f32>(0.0);
                    var fv_row = vec3<f32>(0.0);
                    for (var xi_ = 0u; xi_ < 3u; xi_++) {
                        let off = offset_of(zi, yi, xi_);
                        let nb = neighbour(c, off, p);
                        if !nb.valid {
                            continue;
                        }
                        let j = nb.index;
                        let dj = density(j);
                        let rho_j = dj.x;
                        let q_j = dj.y;
                        var d = vec3<f32>(0.0);
                        var r2 = 0.0;
                        var vj = vec3<f32>(0.0);
                        for (var a = 0u; a < D; a++) {
                            let xj = nb.sign[a] * motion[a * cells + j];
                            vj[a] = nb.sign[a] * motion[(D + a) * cells + j];
                            d[a] = xi[a] - (f32(off[a]) + xj);
                            r2 += d[a] * d[a];
                        }
                        let r = sqrt(r2);
                        let t = max(h - r, 0.0);
                        let t2 = t * t;
                        let inv_r = select(0.0, 1.0 / r, r > 0.0);
                        let fp = rho_j * (q_i + q_j) * t2 * inv_r;
                        let present = select(0.0, 1.0, rho_j > 0.0);
                        let ratio = min(rho_j * inv_rho_i, 2.0);
                        let fv = present * (1.0 + ratio) * t2 * r / (r2 + eps2);
                        fp_row += fp * d;
                        fv_row += fv * (vi - vj);
                    }
                    fp_plane += fp_row;
                    fv_plane += fv_row;
                }
                fp_total += fp_plane;
                fv_total += fv_plane;
            }
            acc = p.kp * fp_total;
            if p.kv > 0.0 {
                acc -= p.kv * fv_total;
            }
        }
        let g = vec3<f32>(p.gx, p.gy, p.gz);
        var held = 0u;
        var x = vec3<f32>(0.0);
        for (var a = 0u; a < D; a++) {
            var u: f32;
            if p.forces != 0u {
                u = vi[a] + p.dt * (acc[a] + g[a]);
            } else {
                u = vi[a] + p.dt * g[a];
            }
            if abs(u) >= p.vmax && present_mass {
                held += 1u;
            }
            let v = clamp(u, -p.vmax, p.vmax);
            advanced[(D + a) * cells + i] = v;
            x[a] = clamp(xi[a] + p.dt * v, -p.reach, p.reach);
            advanced[a * cells + i] = x[a];
        }
        if !OBSTACLES {
            var left: array<f32, 4>;
            if present_mass {
                var lens: array<vec3<f32>, 3>;
                for (var a = 0u; a < D; a++) {
                    lens[a] = overlaps(x[a], p.r);
                }
                var open: array<f32, 27>;
                for (var k = 0u; k < 27u; k++) {
                    open[k] = 1.0;
                }
                left = deficits(lens, open_scale(x, p.r), m, open);
            }
            for (var k = 0u; k < S; k++) {
                book[deficit_at(k, i, cells)] = select(0.0, left[k], present_mass);
            }
        }
        if held > 0u {
            atomicAdd(&clamped, held);
        }
    }
    workgroupBarrier();
    if lid == 0u {
        let w = wid.x + nwg.x * (wid.y + nwg.y * wid.z);
        partials[w * P_WORDS + P_CLAMPS] = atomicLoad(&clamped);
    }
}
