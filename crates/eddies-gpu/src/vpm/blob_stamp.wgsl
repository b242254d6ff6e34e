// The Gaussian splat's stage 2 (`splat.rs`), after the device's counting sort has ordered the vortons by
// key (the grid index of their stamp's first point): for each slot of the sorted list, its vorton's weights
// along each axis, the Gaussian of its core less its tangent at the cut (the CPU's
// `blob_splat::axis_weight`), normalised per axis with the cell volume folded into the x weights, and its
// strength and stamp, all stored in slot order for the gather. The host sends the stamp's geometry from the
// CPU's own `BlobStamp`. The prelude is the sort's (`Sort`, `thread_index`), the uniform `Splat`, the
// constant `CUT` and `stamp_points` (`splat.rs`).

@group(0) @binding(0) var<uniform> p: Splat;
// Per vorton: [offset of its stamp's first point from it along x, y, z (cells); the key's bits],
// [strength (m³/s); the stamp's points along x, y, z, ten bits each], [1/s² (cells⁻²); 0, 0, 0].
@group(0) @binding(1) var<storage, read> vorton: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> sorted: array<u32>;
// Per slot, `3 · width` weights: x, then y, then z, each from the start of its `width`.
@group(0) @binding(3) var<storage, read_write> weights: array<f32>;
// Per slot: [strength; the stamp's points, packed], [the key's bits; 0, 0, 0].
@group(0) @binding(4) var<storage, read_write> heads: array<vec4<f32>>;

fn axis_weight(x: f32) -> f32 {
    return max(exp(-x) - exp(-CUT) * (1.0 + CUT - x), 0.0);
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let s = thread_index(wid, nwg, lid);
    if s >= p.n {
        return;
    }
    let v = sorted[s];
    let offset = vorton[3u * v];
    let head = vorton[3u * v + 1u];
    let n = stamp_points(head.w);
    let inv_s2 = vorton[3u * v + 2u].x;
    for (var a = 0u; a < 3u; a++) {
        let base = (3u * s + a) * p.width;
        var total = 0.0;
        for (var k = 0u; k < n[a]; k++) {
            let d = offset[a] + f32(k);
            let w = axis_weight(d * d * inv_s2);
            weights[base + k] = w;
            total += w;
        }
        let scale = select(1.0, p.inv_volume, a == 0u) / total;
        for (var k = 0u; k < n[a]; k++) {
            weights[base + k] *= scale;
        }
    }
    heads[2u * s] = head;
    heads[2u * s + 1u] = vec4<f32>(offset.w, 0.0, 0.0, 0.0);
}
