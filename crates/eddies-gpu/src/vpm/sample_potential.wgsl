// One component of the Poisson technique's vector potential from the solver's solution, where the solver
// left it in the field it shares (`GpuSampling::share_field`): the interior points from the solution (f64
// in the padded layout of a box of the grid's shape), or zeros for a component without a right-hand side;
// the outer layer's points from the boundary values, as `eddies::vpm::poisson` assembles its solution on
// the host. One thread per grid point. The prelude defines WG, the uniform `Copy`, and `on_face` and
// `slot` of the outer layer (`sampling.rs`).

@group(0) @binding(0) var<uniform> p: Copy;
// The solver's solution of this component (unread where `solved` is 0).
@group(0) @binding(1) var<storage, read> field: array<f64>;
// Three f64 per point of the outer layer, in storage order.
@group(0) @binding(2) var<storage, read> boundary: array<f64>;
// The vector potential (m²/s), component-major: component c of point i at c·points + i.
@group(0) @binding(3) var<storage, read_write> potential: array<f64>;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let g = (wid.x + wid.y * nwg.x) * WG + lid;
    let n = p.dims.x * p.dims.y * p.dims.z;
    if g >= n {
        return;
    }
    let here = vec3<u32>(g % p.dims.x, (g / p.dims.x) % p.dims.y, g / (p.dims.x * p.dims.y));
    var v = 0.0lf;
    if on_face(here, p.dims.xyz) {
        v = boundary[3u * slot(here, p.dims.xyz) + p.component];
    } else if p.solved != 0u {
        let q = here + 1u;
        v = field[q.x + p.padded.x * (q.y + p.padded.y * q.z)];
    }
    potential[p.component * n + g] = v;
}
