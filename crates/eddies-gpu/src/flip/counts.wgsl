// The particles per cell after the sort, as the CPU's `HalfCellBins::counts_into` counts them: each cell adds
// the counts of its 2ᴰ half cells, read off the sort's prefix sums (integers, so the order does not matter).

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<uniform> keep: Keep;
@group(0) @binding(2) var<storage, read> start: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let c = thread_index(wid, nwg, lid);
    if c >= p.cells.x * p.cells.y * p.cells.z {
        return;
    }
    let cell = vec3<u32>(c % p.cells.x, (c / p.cells.x) % p.cells.y, c / (p.cells.x * p.cells.y));
    var n = 0u;
    for (var corner = 0u; corner < (1u << D); corner++) {
        var s = 0u;
        var stride = 1u;
        for (var a = 0u; a < D; a++) {
            s += (2u * cell[a] + ((corner >> a) & 1u)) * stride;
            stride *= p.sub[a];
        }
        n += start[s + 1u] - start[s];
    }
    out[keep.base + c] = n;
}
