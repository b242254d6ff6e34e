// Stage "emit", one source per dispatch, in the order the scene lists them (as the CPU backend's
// `ReintSim::emit`): an emitter fills each of its cells up to its target quanta with its substance and sets
// their velocity; a sink keeps round(keep · m) of each substance. The quanta exchanged add to running 64-bit
// totals per substance (injected from word 0, removed from word EXCHANGE_REMOVED) with integer atomics: whole numbers,
// so the totals do not depend on the order of the additions.
//
// Bindings: 0 params, 1 source, 2 cells (all sources' cell lists), 3 motion, 4 mass, 5 exchange.

struct Source {
    first: u32,      // first of its cells in `cells`
    count: u32,
    pad1: u32,
    sink: u32,       // 1 for a sink
    substance: u32,
    fill_to: f32,    // quanta an emitter fills up to
    keep: f32,       // fraction a sink keeps this step
    pad: u32,
    velocity: vec4<f32>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<uniform> src: Source;
@group(0) @binding(2) var<storage, read> cells: array<u32>;
@group(0) @binding(3) var<storage, read_write> motion: array<f32>;
@group(0) @binding(4) var<storage, read_write> mass: array<f32>;
@group(0) @binding(5) var<storage, read_write> exchange: array<atomic<u32>>;

// Adds `quanta` to the 64-bit total at words `at` (low) and `at + 1` (high): the addition that carries out
// of the low word is the one that sees it wrap.
fn count_up(at: u32, quanta: f32) {
    let q = u32(quanta);
    if q == 0u {
        return;
    }
    let old = atomicAdd(&exchange[at], q);
    if old > 0xffffffffu - q {
        atomicAdd(&exchange[at + 1u], 1u);
    }
}

// A nonnegative number rounded to the nearest whole number, halves up (as Rust's `f32::round` on the CPU
// backend; WGSL's `round` takes halves to even). The fractional part x − trunc(x) is exact.
fn round_half_up(x: f32) -> f32 {
    let t = trunc(x);
    return select(t, t + 1.0, x - t >= 0.5);
}

@compute @workgroup_size(WG_LIST)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let e = gid.x;
    if e >= src.count {
        return;
    }
    let i = cells[src.first + e];
    let n = p.cells;
    if src.sink == 0u {
        var have = 0.0;
        for (var k = 0u; k < S; k++) {
            have += mass[k * n + i];
        }
        if have < src.fill_to {
            mass[src.substance * n + i] += src.fill_to - have;
            count_up(2u * src.substance, src.fill_to - have);
        }
        for (var a = 0u; a < D; a++) {
            motion[(D + a) * n + i] = src.velocity[a];
        }
    } else {
        for (var k = 0u; k < S; k++) {
            let m = mass[k * n + i];
            let kept = round_half_up(m * src.keep);
            mass[k * n + i] = kept;
            count_up(EXCHANGE_REMOVED + 2u * k, m - kept);
        }
    }
}
