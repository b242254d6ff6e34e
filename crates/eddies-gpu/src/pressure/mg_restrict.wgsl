// Full-weighting restriction of the fine residual to every coarse cell, halo included: the coarse cell at
// padded coordinate c gathers the fine cells at 2c + o − 1, o ∈ {−1, 0, 1, 2}, with weights (1, 3, 3, 1)/8
// per axis (the transpose of multilinear prolongation, over 2^D).

@group(0) @binding(0) var<uniform> fine: Level;
@group(0) @binding(1) var<uniform> coarse: Level;
@group(0) @binding(2) var<storage, read> state: State;
@group(0) @binding(3) var<storage, read> t_fine: array<f32>;
@group(0) @binding(4) var<storage, read_write> t_coarse: array<f32>;

fn weight(o: u32) -> f32 {
    return select(0.375, 0.125, o == 0u || o == 3u);
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = thread_index(wid, nwg, lid);
    if (GATED && state.done != RUNNING) || i >= coarse.padded.w {
        return;
    }
    let c = vec3<i32>(coords(coarse, i));
    let fp = vec3<i32>(fine.padded.xyz);
    let zs = select(1u, 4u, DIM == 3u);
    var sum = 0.0;
    for (var oz = 0u; oz < zs; oz++) {
        var fz = 0;
        var wz = 1.0;
        if DIM == 3u {
            fz = 2 * c.z + i32(oz) - 2;
            wz = weight(oz);
            if fz < 0 || fz >= fp.z {
                continue;
            }
        }
        for (var oy = 0u; oy < 4u; oy++) {
            let fy = 2 * c.y + i32(oy) - 2;
            if fy < 0 || fy >= fp.y {
                continue;
            }
            let row = (u32(fz) * fine.padded.y + u32(fy)) * fine.padded.x;
            var along = 0.0;
            for (var ox = 0u; ox < 4u; ox++) {
                let fx = 2 * c.x + i32(ox) - 2;
                if fx >= 0 && fx < fp.x {
                    along += weight(ox) * t_fine[row + u32(fx)];
                }
            }
            sum += wz * weight(oy) * along;
        }
    }
    t_coarse[i] = sum;
}
