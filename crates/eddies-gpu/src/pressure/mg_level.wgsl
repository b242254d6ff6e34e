// One step of the V-cycle on a large level, one cell per thread (`mg_common.wgsl`), as OP says:
// 0: a red-black half-sweep of step.colour on level step.fine, a thread per cell of that colour;
// 1: its residual;  2: restriction from step.fine to step.coarse;  3: the fold on step.coarse;
// 4: the fold on step.coarse and its first red half-sweep (from zero);
// 5: prolongation from step.coarse to step.fine;  6: the extension on step.coarse.

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = thread_index(wid, nwg, lid);
    if GATED && state.done != RUNNING {
        return;
    }
    let f = levels[step.fine];
    let k = levels[step.coarse];
    // Steps 2, 3 and 4 run over the coarse level's cells, the others over the fine level's.
    let on_coarse = OP == 2u || OP == 3u || OP == 4u || OP == 6u;
    if i >= select(f.padded.w, k.padded.w, on_coarse) {
        return;
    }
    switch OP {
        case 0u: {
            // Half a row (rounded up) of threads per row of cells, each on the colour's every other cell.
            let half = (f.padded.x + 1u) / 2u;
            let row = i / half;
            let y = row % f.padded.y;
            let x = 2u * (i % half) + (step.colour + y + row / f.padded.y + DIM) % 2u;
            if x < f.padded.x && row < f.padded.y * f.padded.z {
                relax(f, row * f.padded.x + x, step.colour);
            }
        }
        case 1u: {
            residual(f, i);
        }
        case 2u: {
            restrict_to(f, k, i);
        }
        case 3u: {
            _ = fold(k, i);
        }
        case 4u: {
            relax_red_from_zero(k, i, fold(k, i));
        }
        case 6u: {
            extend(k, i);
        }
        default: {
            prolong(f, k, i);
        }
    }
}
