// The V-cycle below level step.fine (the largest of the small levels) down to the coarsest, step.coarse, in
// one workgroup: the same steps as `mg_level.wgsl` (`mg_common.wgsl`), each looped over a level's cells,
// with barriers between them; the coarsest level is solved as on the CPU by SWEEPS/2 red-black sweeps red
// first and as many black first, then the mean of each group of unknowns without a Dirichlet neighbour is
// removed: `labels` holds each cell's group (0, 1, …; u32::MAX for none), then the number of groups. Small
// levels cost a launch each more than their arithmetic; here they cost one launch together.

@group(0) @binding(8) var<storage, read> labels: array<u32>;

fn sync() {
    storageBarrier();
    workgroupBarrier();
}

// Half-sweeps of `colour` then the other, `sweeps` times, on level l.
fn sweep_level(lid: u32, live: bool, l: u32, sweeps: u32, first: u32) {
    for (var s = 0u; s < sweeps; s++) {
        for (var h = 0u; h < 2u; h++) {
            if live {
                let lv = levels[l];
                for (var i = lid; i < lv.padded.w; i += WG) {
                    relax(lv, i, (first + h) % 2u);
                }
            }
            sync();
        }
    }
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32) {
    let live = !(GATED && state.done != RUNNING);
    let top = step.fine;
    let last = step.coarse;
    for (var l = top; l < last; l++) {
        sweep_level(lid, live, l, CYCLE_SWEEPS, 0u);
        if live {
            let f = levels[l];
            for (var i = lid; i < f.padded.w; i += WG) {
                residual(f, i);
            }
        }
        sync();
        if live {
            let f = levels[l];
            let k = levels[l + 1u];
            for (var i = lid; i < k.padded.w; i += WG) {
                restrict_to(f, k, i);
            }
        }
        sync();
        if live {
            let k = levels[l + 1u];
            for (var i = lid; i < k.padded.w; i += WG) {
                _ = fold(k, i);
            }
        }
        sync();
    }
    let half = (SWEEPS + 1u) / 2u;
    sweep_level(lid, live, last, half, 0u);
    sweep_level(lid, live, last, half, 1u);
    if live && lid == 0u {
        // Each group's mean in the fixed order of the cells, summed where the level's t and b are free after
        // its solve: group g's sum in t and its count in b, at the level's entry g.
        let c = levels[last];
        let n = c.padded.w;
        let groups = labels[n];
        for (var g = 0u; g < groups; g++) {
            t[c.base + g] = 0.0;
            b[c.base + g] = 0.0;
        }
        for (var i = 0u; i < n; i++) {
            let g = labels[i];
            if g < groups {
                t[c.base + g] += x[c.base + i];
                b[c.base + g] += 1.0;
            }
        }
        for (var i = 0u; i < n; i++) {
            let g = labels[i];
            if g < groups {
                x[c.base + i] -= t[c.base + g] / max(b[c.base + g], 1.0);
            }
        }
    }
    sync();
    for (var l = last; l > top; l--) {
        if live {
            let k = levels[l];
            for (var i = lid; i < k.padded.w; i += WG) {
                extend(k, i);
            }
        }
        sync();
        if live {
            let f = levels[l - 1u];
            let k = levels[l];
            for (var i = lid; i < f.padded.w; i += WG) {
                prolong(f, k, i);
            }
        }
        sync();
        sweep_level(lid, live, l - 1u, CYCLE_SWEEPS, 1u);
    }
}
