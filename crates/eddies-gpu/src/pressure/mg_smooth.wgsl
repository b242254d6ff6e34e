// One half-sweep of red-black Gauss–Seidel on a level: the unknowns of colour COLOUR (0: red, an even sum
// of interior coordinates) set to (h² bᵢ + Σⱼ xⱼ) / nᵢ. Neighbours that are not unknowns hold zero.

@group(0) @binding(0) var<uniform> level: Level;
@group(0) @binding(1) var<storage, read> state: State;
@group(0) @binding(2) var<storage, read> diag: array<f32>;
@group(0) @binding(3) var<storage, read> b: array<f32>;
@group(0) @binding(4) var<storage, read_write> x: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = thread_index(wid, nwg, lid);
    if (GATED && state.done != RUNNING) || i >= level.padded.w {
        return;
    }
    let d = diag[i];
    if !(d > 0.0) {
        return;
    }
    let c = coords(level, i);
    // Padded coordinates are the interior ones plus one per axis.
    if (c.x + c.y + c.z + DIM) % 2u != COLOUR {
        return;
    }
    let s = level.strides;
    var nsum = x[i - 1u] + x[i + 1u] + x[i - s.y] + x[i + s.y];
    if DIM == 3u {
        nsum += x[i - s.z] + x[i + s.z];
    }
    x[i] = (level.h2 * b[i] + nsum) / d;
}
