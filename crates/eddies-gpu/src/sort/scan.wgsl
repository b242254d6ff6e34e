// Exclusive prefix sums of u32 counts, in levels: OP REDUCE writes each block's total into the next level;
// OP SCAN replaces a block by its exclusive prefix sums plus the block's offset from the (already scanned)
// next level, or plus nothing at the top. Integer sums: the result does not depend on any order.

struct Level {
    // Entries of this level, its first entry in `buf`, and the next level's (NONE at the top).
    n: u32, at: u32, parent: u32, pad: u32,
}

const REDUCE: u32 = 0u;
const NONE: u32 = 0xffffffffu;
const BLOCK: u32 = 4u * WG;

@group(0) @binding(0) var<uniform> level: Level;
@group(0) @binding(1) var<storage, read_write> buf: array<u32>;

var<workgroup> partial: array<u32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let g = wid.x + wid.y * nwg.x;
    let first = g * BLOCK + 4u * lid;
    var v = vec4<u32>(0u);
    for (var j = 0u; j < 4u; j++) {
        if first + j < level.n {
            v[j] = buf[level.at + first + j];
        }
    }
    let own = v.x + v.y + v.z + v.w;
    partial[lid] = own;
    workgroupBarrier();
    // Inclusive scan of the threads' totals (Hillis–Steele).
    for (var d = 1u; d < WG; d *= 2u) {
        var add = 0u;
        if lid >= d {
            add = partial[lid - d];
        }
        workgroupBarrier();
        partial[lid] += add;
        workgroupBarrier();
    }
    if OP == REDUCE {
        if lid == WG - 1u && g * BLOCK < level.n {
            buf[level.parent + g] = partial[WG - 1u];
        }
        return;
    }
    var at = partial[lid] - own;
    if level.parent != NONE {
        at += buf[level.parent + g];
    }
    for (var j = 0u; j < 4u; j++) {
        if first + j < level.n {
            buf[level.at + first + j] = at;
        }
        at += v[j];
    }
}
