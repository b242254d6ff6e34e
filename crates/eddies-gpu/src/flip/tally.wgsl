// The diagnostics' sums over the kept particles, as the CPU's `Tally::over` adds them: the particles in
// chunks of CHUNK, each chunk in LANES lanes (particle i of a chunk adds to lane i mod LANES, except the
// chunk's last len mod LANES, which add to lane 0 after its others), each lane's sums in particle order, and
// the lanes combined in lane order. One thread per lane; the chunks' tallies go to `out` (STRIDE values each:
// Σv per axis, Σ|v|², the largest |v|², the positions' sum), and the host combines them in chunk order.
//
// The products are squares of single-precision values, exact in double precision, so a fused multiply-add
// rounds as the separate operations do: the sums have the CPU's bits. The largest |v|² of no particle is -1
// here (WGSL writes no infinity); the host reads it as −∞. NaNs fail `>` and are skipped, as on the CPU.

// CHUNK, LANES, STRIDE (6: the values of a tally below), TALLY_WG and POSITIONS come with the prelude.

struct Tally {
    // Particles (each attribute holds the axes one after another, n each), chunks.
    n: u32, chunks: u32, pad0: u32, pad1: u32,
}

@group(0) @binding(0) var<uniform> t: Tally;
@group(0) @binding(1) var<storage, read> pos: array<f32>;
@group(0) @binding(2) var<storage, read> vel: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f64>;

var<workgroup> lanes: array<f64, TALLY_WG * STRIDE>;

// A tally: Σv per axis (0–2), Σ|v|² (3), the largest |v|² (4), the positions' sum (5).
const SQUARES: u32 = 3u;
const MAX2: u32 = 4u;
const POSITIONS_SUM: u32 = 5u;

fn empty() -> array<f64, 6> {
    return array<f64, 6>(0.0lf, 0.0lf, 0.0lf, 0.0lf, -1.0lf, 0.0lf);
}

fn add(s: ptr<function, array<f64, 6>>, i: u32) {
    var v2 = 0.0lf;
    for (var a = 0u; a < D; a++) {
        let vk = f64(vel[a * t.n + i]);
        (*s)[a] += vk;
        v2 += vk * vk;
    }
    (*s)[SQUARES] += v2;
    if v2 > (*s)[MAX2] {
        (*s)[MAX2] = v2;
    }
    if POSITIONS {
        var x = 0.0lf;
        for (var a = 0u; a < D; a++) {
            x += f64(pos[a * t.n + i]);
        }
        (*s)[POSITIONS_SUM] += x;
    }
}

@compute @workgroup_size(TALLY_WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let thread = (wid.x + wid.y * nwg.x) * TALLY_WG + lid;
    let chunk = thread / LANES;
    let lane = thread % LANES;
    var s = empty();
    if chunk < t.chunks {
        let first = chunk * CHUNK;
        let end = min(t.n, first + CHUNK);
        let full = (end - first) / LANES;
        for (var g = 0u; g < full; g++) {
            add(&s, first + g * LANES + lane);
        }
        if lane == 0u {
            for (var i = first + full * LANES; i < end; i++) {
                add(&s, i);
            }
        }
    }
    for (var k = 0u; k < STRIDE; k++) {
        lanes[lid * STRIDE + k] = s[k];
    }
    workgroupBarrier();
    if lane != 0u || chunk >= t.chunks {
        return;
    }
    // The lanes in order, from no particle: `Tally::then`.
    var c = empty();
    for (var l = 0u; l < LANES; l++) {
        for (var k = 0u; k < STRIDE; k++) {
            let v = lanes[(lid + l) * STRIDE + k];
            if k != MAX2 {
                c[k] = c[k] + v;
            } else if v > c[k] {
                c[k] = v;
            }
        }
    }
    for (var k = 0u; k < STRIDE; k++) {
        out[chunk * STRIDE + k] = c[k];
    }
}
