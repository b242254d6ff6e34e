// Adds the partial sums of a pass in a fixed order (each thread a fixed run of them, then a tree) and acts on
// the total as ACTION says; one workgroup. The conjugate gradients' scalar logic lives here, so that the
// iterations run without a read-back.

const B_NORM: u32 = 0u;     // ‖b‖ from b · b
const FIRST_RESIDUAL: u32 = 1u; // the starting residual from r · r
const FIRST_RZ: u32 = 2u;   // rᵀz of the first preconditioned residual
const ALPHA: u32 = 3u;      // α = rᵀz / pᵀAp
const RESIDUAL: u32 = 4u;   // the iteration's residual from r · r; the stopping rule
const BETA: u32 = 5u;       // β = rᵀz (new) / rᵀz

@group(0) @binding(0) var<uniform> cg: Cg;
@group(0) @binding(1) var<storage, read_write> state: State;
@group(0) @binding(2) var<storage, read> partials: array<f64>;
@group(0) @binding(3) var<storage, read_write> history: array<f64>;

fn stop(code: u32) {
    state.done = code;
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32) {
    let live = !(GATED && state.done != RUNNING);
    let n = cg.partials;
    let per = (n + WG - 1u) / WG;
    var s = 0.0lf;
    if live {
        let end = min(n, (lid + 1u) * per);
        for (var k = lid * per; k < end; k++) {
            s += partials[k];
        }
    }
    let total = workgroup_sum(lid, s);
    if lid != 0u || !live {
        return;
    }
    switch ACTION {
        case 0u: { // B_NORM
            let b = sqrt(total);
            state.b_norm = b;
            state.iteration = 0u;
            state.done = RUNNING;
            if !finite(b) {
                stop(BAD_RHS);
            } else if b == 0.0lf {
                state.residual = 0.0lf;
                history[0] = 0.0lf;
                stop(ZERO_RHS);
            }
        }
        case 1u: { // FIRST_RESIDUAL
            let r = sqrt(total) / state.b_norm;
            state.residual = r;
            history[0] = r;
            if !finite(r) {
                stop(BAD_GUESS);
            } else if r <= cg.tolerance {
                stop(CONVERGED);
            } else if cg.identity != 0u {
                state.rz = total;
            }
        }
        case 2u: { // FIRST_RZ
            state.rz = total;
        }
        case 3u: { // ALPHA
            let rz = state.rz;
            if !(rz > 0.0lf && finite(rz)) {
                stop(BREAKDOWN_RZ);
            } else if !(total > 0.0lf && finite(total)) {
                stop(BREAKDOWN_PQ);
            } else {
                state.alpha = rz / total;
            }
        }
        case 4u: { // RESIDUAL
            let it = state.iteration + 1u;
            state.iteration = it;
            let r = sqrt(total) / state.b_norm;
            state.residual = r;
            history[it] = r;
            if !finite(r) {
                stop(BREAKDOWN_RESIDUAL);
            } else if r <= cg.tolerance {
                stop(CONVERGED);
            } else if it >= cg.max_iterations {
                stop(NO_CONVERGENCE);
            } else if cg.identity != 0u {
                state.beta = total / state.rz;
                state.rz = total;
            }
        }
        default: { // BETA
            state.beta = total / state.rz;
            state.rz = total;
        }
    }
}
