// A push (as the CPU backend's `ReintSim::apply_impulse`): every particle within `radius` of `centre` gains
// `velocity` weighted by the smooth falloff (1 − (d/radius)²)². Lengths in cells, velocity in cells/s.
//
// Bindings: 0 params, 1 push, 2 motion.

struct Push {
    centre: vec4<f32>,
    velocity: vec4<f32>,
    radius: f32,
    pad0: f32,
    pad1: f32,
    pad2: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<uniform> push: Push;
@group(0) @binding(2) var<storage, read_write> motion: array<f32>;

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let c = my_cell(gid, p);
    if c.x < 0 {
        return;
    }
    let i = cell_index(c, p);
    let n = p.cells;
    var d2 = 0.0;
    for (var a = 0u; a < D; a++) {
        let x = f32(c[a]) + 0.5 + motion[a * n + i];
        d2 += (x - push.centre[a]) * (x - push.centre[a]);
    }
    let r2 = push.radius * push.radius;
    if d2 < r2 {
        let w = (1.0 - d2 / r2) * (1.0 - d2 / r2);
        for (var a = 0u; a < D; a++) {
            motion[(D + a) * n + i] += w * push.velocity[a];
        }
    }
}
