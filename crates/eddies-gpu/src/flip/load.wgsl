// The particle pass's face fields `[u, u − u_old]` (`g2p.wgsl`) from the host's velocity `u` and the sums of
// this substep's particle-to-grid transfer, which the fields still hold (`[Σ w, Σ w u]` per face,
// `p2g.wgsl`): `u_old = Σ w u / Σ w`, 0 where `Σ w` is 0, the velocity that the host took from the same
// sums, divided as `derive.wgsl` divides them (or, where the host read the sums, as `velocities_from_sums`
// of `eddies::flip` transfer.rs, in double precision). The host so sends 4 bytes a face instead of 8. One
// thread per face, no sums: a run repeats bit for bit.

@group(0) @binding(0) var<uniform> m: Move;
// The sums, then `[u, u − u_old]`, per face; the counts per cell after them are left alone.
@group(0) @binding(1) var<storage, read_write> fields: array<vec2<f32>>;
// The host's velocity per face (a range of the scratch buffer, bound writable as the extrapolation's masks).
@group(0) @binding(2) var<storage, read_write> velocity: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let f = thread_index(wid, nwg, lid);
    let last = m.dims[D - 1u];
    if f >= m.base[D - 1u] + last.x * last.y * last.z {
        return;
    }
    let sums = fields[f];
    var old = 0.0;
    if sums.x > 0.0 {
        old = sums.y / sums.x;
    }
    let u = velocity[f];
    fields[f] = vec2<f32>(u, u - old);
}
