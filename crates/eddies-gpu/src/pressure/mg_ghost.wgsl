// The ghost shell around a coarse level's unknowns (coefficients g, 2·DIM per cell, zero off the shell):
// OP 0, fold: b = Eᵀ t on the unknowns (each one adds what its ghost neighbours hold, weighted by their
//       coefficient towards it), 0 elsewhere; and x = 0, the level's correction before it is smoothed;
// OP 1, extend: t = E x: unknowns keep x, each ghost cell takes Σ g · x of its unknown neighbours.

@group(0) @binding(0) var<uniform> level: Level;
@group(0) @binding(1) var<storage, read> state: State;
@group(0) @binding(2) var<storage, read> diag: array<f32>;
@group(0) @binding(3) var<storage, read> ghost: array<f32>;
@group(0) @binding(4) var<storage, read_write> src: array<f32>;
@group(0) @binding(5) var<storage, read_write> dst: array<f32>;
@group(0) @binding(6) var<storage, read_write> zeroed: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = thread_index(wid, nwg, lid);
    if (GATED && state.done != RUNNING) || i >= level.padded.w {
        return;
    }
    let c = coords(level, i);
    let unknown = diag[i] > 0.0;
    let per = 2u * DIM;
    if OP == 0u {
        // src: the restricted t; dst: b; zeroed: x.
        zeroed[i] = 0.0;
        var v = 0.0;
        if unknown {
            v = src[i];
            for (var a = 0u; a < DIM; a++) {
                let st = level.strides[a];
                // The lower neighbour sees this cell on its upper side, and the other way round.
                v += ghost[(i - st) * per + 2u * a + 1u] * src[i - st];
                v += ghost[(i + st) * per + 2u * a] * src[i + st];
            }
        }
        dst[i] = v;
    } else {
        // src: x; dst: t (zeroed is not touched).
        if unknown {
            dst[i] = src[i];
            return;
        }
        var v = 0.0;
        for (var a = 0u; a < DIM; a++) {
            let st = level.strides[a];
            let lo = ghost[i * per + 2u * a];
            let hi = ghost[i * per + 2u * a + 1u];
            if lo != 0.0 && c[a] > 0u {
                v += lo * src[i - st];
            }
            if hi != 0.0 && c[a] + 1u < level.padded[a] {
                v += hi * src[i + st];
            }
        }
        dst[i] = v;
    }
}
