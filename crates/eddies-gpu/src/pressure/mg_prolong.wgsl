// Multilinear prolongation of the extended coarse correction t, added to the fine unknowns: per axis 3/4 of
// the parent and 1/4 of the coarse neighbour on the child's side.

@group(0) @binding(0) var<uniform> fine: Level;
@group(0) @binding(1) var<uniform> coarse: Level;
@group(0) @binding(2) var<storage, read> state: State;
@group(0) @binding(3) var<storage, read> diag: array<f32>;
@group(0) @binding(4) var<storage, read> t: array<f32>;
@group(0) @binding(5) var<storage, read_write> x: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = thread_index(wid, nwg, lid);
    if (GATED && state.done != RUNNING) || i >= fine.padded.w {
        return;
    }
    if !(diag[i] > 0.0) {
        return;
    }
    let f = coords(fine, i);
    // Padded coarse coordinates of the parent and of the neighbour on the child's side, per axis.
    var parent: vec3<u32>;
    var other: vec3<u32>;
    for (var a = 0u; a < 3u; a++) {
        if a < DIM {
            let fi = f[a] - 1u;
            parent[a] = fi / 2u + 1u;
            other[a] = select(parent[a] + 1u, parent[a] - 1u, fi % 2u == 0u);
        } else {
            parent[a] = 0u;
            other[a] = 0u;
        }
    }
    let zs = select(1u, 2u, DIM == 3u);
    var sum = 0.0;
    for (var kz = 0u; kz < zs; kz++) {
        let cz = select(parent.z, other.z, kz == 1u);
        let wz = select(1.0, select(0.75, 0.25, kz == 1u), DIM == 3u);
        for (var ky = 0u; ky < 2u; ky++) {
            let cy = select(parent.y, other.y, ky == 1u);
            let wy = select(0.75, 0.25, ky == 1u);
            let row = (cz * coarse.padded.y + cy) * coarse.padded.x;
            let along = 0.75 * t[row + parent.x] + 0.25 * t[row + other.x];
            sum += wz * wy * along;
        }
    }
    x[i] += sum;
}
