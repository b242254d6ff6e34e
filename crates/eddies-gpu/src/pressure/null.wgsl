// The null space of a singular operator removed from a vector of the finest level: v −= the mean of v over
// each group of unknowns without a Dirichlet neighbour (a pocket of liquid sealed by walls), groups labelled
// 0, 1, … in `labels` (NO_LABEL elsewhere). Three passes, the last in one of two forms, as OP says:
// 0: per workgroup of cells, the sum of v over each group that has cells in it (a fixed tree each);
// 1: per group, one workgroup adds its workgroups' sums in workgroup order and divides by its size;
// 2: v −= its group's mean;
// 3: the same, with partial sums of r · v (the arithmetic of `dot.wgsl` after pass 2, so the same bits).
//
// `index` (built on the host with the labels, null.rs) lists, from word 0: for each workgroup w of pass 0,
// where its slots start (cg.partials + 1 words); each slot's group (cg.null_entries words); each slot's entry
// in `group_sums` (as many), the entries of a group being consecutive and in workgroup order; where each
// group's entries start (cg.null_groups + 1 words); each group's size (as many). `group_sums` holds the
// entries, then the groups' means.

@group(0) @binding(0) var<uniform> cg: Cg;
@group(0) @binding(1) var<storage, read> state: State;
// read_write: the vectors share one scratch buffer, and a dispatch may bind a buffer read-only or writable, not both.
@group(0) @binding(2) var<storage, read_write> v: array<f64>;
@group(0) @binding(3) var<storage, read> labels: array<u32>;
@group(0) @binding(4) var<storage, read> index: array<u32>;
@group(0) @binding(5) var<storage, read_write> group_sums: array<f64>;
@group(0) @binding(6) var<storage, read_write> r: array<f64>;
@group(0) @binding(7) var<storage, read_write> partials: array<f64>;

const NO_LABEL: u32 = 0xffffffffu;

var<workgroup> slot_range: vec2<u32>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let live = !(GATED && state.done != RUNNING);
    let w = group_index(wid, nwg);
    let entries = cg.null_entries;
    switch OP {
        case 0u: {
            let i = thread_index(wid, nwg, lid);
            var label = NO_LABEL;
            var value = 0.0lf;
            if live && i < cg.level.padded.w {
                label = labels[i];
                value = v[i];
            }
            if lid == 0u {
                slot_range = vec2<u32>(0u);
                if live && w < cg.partials {
                    slot_range = vec2<u32>(index[w], index[w + 1u]);
                }
            }
            let range = workgroupUniformLoad(&slot_range);
            let groups = cg.partials + 1u;
            let dests = groups + entries;
            for (var s = range.x; s < range.y; s++) {
                let g = index[groups + s];
                let total = workgroup_sum(lid, select(0.0lf, value, label == g));
                if lid == 0u {
                    group_sums[index[dests + s]] = total;
                }
                // Every thread has read the total before the next sum overwrites the workgroup's array.
                workgroupBarrier();
            }
        }
        case 1u: {
            if w >= cg.null_groups {
                return;
            }
            let starts = cg.partials + 1u + 2u * entries;
            let first = index[starts + w];
            let n = index[starts + w + 1u] - first;
            let per = (n + WG - 1u) / WG;
            var s = 0.0lf;
            if live {
                let end = min(n, (lid + 1u) * per);
                for (var k = lid * per; k < end; k++) {
                    s += group_sums[first + k];
                }
            }
            let total = workgroup_sum(lid, s);
            if lid == 0u && live {
                let size = index[starts + cg.null_groups + 1u + w];
                group_sums[entries + w] = total / f64(size);
            }
        }
        case 2u: {
            let i = thread_index(wid, nwg, lid);
            if live && i < cg.level.padded.w {
                let l = labels[i];
                if l != NO_LABEL {
                    v[i] -= group_sums[entries + l];
                }
            }
        }
        default: {
            let i = thread_index(wid, nwg, lid);
            var term = 0.0lf;
            // Every thread reaches the workgroup's sum below.
            if live && i < cg.level.padded.w {
                let l = labels[i];
                var vi = v[i];
                if l != NO_LABEL {
                    vi -= group_sums[entries + l];
                    v[i] = vi;
                }
                term = r[i] * vi;
            }
            let total = workgroup_sum(lid, term);
            if lid == 0u && live && w < cg.partials {
                partials[w] = total;
            }
        }
    }
}
