// The start of a V-cycle on the finest level: b = r (in single precision), x = 0; and its end, OP 1:
// z = x (back in double precision).

@group(0) @binding(0) var<uniform> cg: Cg;
@group(0) @binding(1) var<storage, read> state: State;
@group(0) @binding(2) var<storage, read_write> wide: array<f64>;
@group(0) @binding(3) var<storage, read_write> b: array<f32>;
@group(0) @binding(4) var<storage, read_write> x: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = thread_index(wid, nwg, lid);
    if (GATED && state.done != RUNNING) || i >= cg.level.padded.w {
        return;
    }
    if OP == 0u {
        b[i] = f32(wide[i]);
        x[i] = 0.0;
    } else {
        wide[i] = f64(x[i]);
    }
}
