// t = b − A x on the unknowns of a level, 0 elsewhere (in units of 1/h²: A = (nᵢ xᵢ − Σⱼ xⱼ) / h²).

@group(0) @binding(0) var<uniform> level: Level;
@group(0) @binding(1) var<storage, read> state: State;
@group(0) @binding(2) var<storage, read> diag: array<f32>;
@group(0) @binding(3) var<storage, read> b: array<f32>;
@group(0) @binding(4) var<storage, read> x: array<f32>;
@group(0) @binding(5) var<storage, read_write> t: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = thread_index(wid, nwg, lid);
    if (GATED && state.done != RUNNING) || i >= level.padded.w {
        return;
    }
    let d = diag[i];
    if !(d > 0.0) {
        t[i] = 0.0;
        return;
    }
    let s = level.strides;
    var nsum = x[i - 1u] + x[i + 1u] + x[i - s.y] + x[i + s.y];
    if DIM == 3u {
        nsum += x[i - s.z] + x[i + s.z];
    }
    t[i] = b[i] - (d * x[i] - nsum) / level.h2;
}
