// Solves the coarsest level as the CPU does: SWEEPS/2 red-black Gauss–Seidel sweeps red first, as many black
// first, then the mean of each group of unknowns without a Dirichlet neighbour removed. One workgroup; the
// level has a few hundred cells.

@group(0) @binding(0) var<uniform> level: Level;
@group(0) @binding(1) var<storage, read> state: State;
@group(0) @binding(2) var<storage, read> diag: array<f32>;
@group(0) @binding(3) var<storage, read> b: array<f32>;
@group(0) @binding(4) var<storage, read_write> x: array<f32>;
@group(0) @binding(5) var<storage, read> labels: array<u32>;

fn relax(lid: u32, colour: u32) {
    let s = level.strides;
    for (var i = lid; i < level.padded.w; i += WG) {
        let d = diag[i];
        if !(d > 0.0) {
            continue;
        }
        let c = coords(level, i);
        if (c.x + c.y + c.z + DIM) % 2u != colour {
            continue;
        }
        var nsum = x[i - 1u] + x[i + 1u] + x[i - s.y] + x[i + s.y];
        if DIM == 3u {
            nsum += x[i - s.z] + x[i + s.z];
        }
        x[i] = (level.h2 * b[i] + nsum) / d;
    }
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32) {
    let live = !(GATED && state.done != RUNNING);
    let half = (SWEEPS + 1u) / 2u;
    for (var k = 0u; k < 2u * half; k++) {
        let first = select(0u, 1u, k >= half);
        for (var h = 0u; h < 2u; h++) {
            if live {
                relax(lid, (first + h) % 2u);
            }
            storageBarrier();
            workgroupBarrier();
        }
    }
    if lid != 0u || !live {
        return;
    }
    // In the fixed order of the cells, one group at a time.
    for (var g = 0u; g < level.null_groups; g++) {
        var sum = 0.0;
        var n = 0u;
        for (var i = 0u; i < level.padded.w; i++) {
            if labels[i] == g {
                sum += x[i];
                n += 1u;
            }
        }
        let mean = sum / f32(max(n, 1u));
        for (var i = 0u; i < level.padded.w; i++) {
            if labels[i] == g {
                x[i] -= mean;
            }
        }
    }
}
