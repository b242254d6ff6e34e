// The direct sum's chunks added (`direct.wgsl`): each target's partial sums of the chunks 0, 1, 2, … in that
// order, into the first chunk's slot, so the total has one fixed order. The prelude defines TILE, GRADIENT
// and Params (PER is unused here).

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read_write> velocity: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> gradient: array<f32>;

@compute @workgroup_size(TILE)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i >= params.targets) {
        return;
    }
    var u = velocity[i];
    for (var c = 1u; c < params.chunks; c++) {
        u += velocity[c * params.targets + i];
    }
    velocity[i] = u;
    if (GRADIENT) {
        for (var q = 0u; q < 9u; q++) {
            var g = gradient[9u * i + q];
            for (var c = 1u; c < params.chunks; c++) {
                g += gradient[9u * (c * params.targets + i) + q];
            }
            gradient[9u * i + q] = g;
        }
    }
}
