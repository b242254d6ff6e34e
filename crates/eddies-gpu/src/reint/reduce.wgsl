// The step's diagnostics from the workgroups' partial sums, in a fixed order (each invocation adds a fixed
// stride of them in sequence, then `workgroup_sum`'s tree): the same bits on every run. The result goes to the step's slot
// of the log, which the host reads once per frame.
//
// Bindings: 0 params, 1 partials, 2 log, 3 exchange (the emitters' and sinks' running totals).

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> partials: array<u32>;
@group(0) @binding(2) var<storage, read_write> log: array<u32>;
@group(0) @binding(3) var<storage, read> exchange: array<u32>;

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn main(@builtin(local_invocation_index) lid: u32) {
    var mine: Sum;
    for (var k = 0u; k < SUM_WORDS; k++) {
        mine[k] = 0u;
    }
    for (var w = lid; w < p.partials; w += WG) {
        var theirs: Sum;
        for (var k = 0u; k < SUM_WORDS; k++) {
            theirs[k] = partials[w * P_WORDS + k];
        }
        mine = sum_add(mine, theirs);
    }
    let total = workgroup_sum(lid, mine);
    if lid == 0u {
        let b = p.slot * LOG_WORDS;
        for (var k = 0u; k < SUM_WORDS; k++) {
            log[b + k] = total[k];
        }
        for (var k = 0u; k < 2u * EXCHANGE_REMOVED; k++) {
            log[b + LOG_EXCHANGE + k] = exchange[k];
        }
    }
}
