// The picture's texture over the whole viewport (the paint callback's rectangle), texel for texel: one
// triangle that covers the viewport, no colour conversion (the texture holds the bytes the window shows).

@group(0) @binding(0) var picture: texture_2d<f32>;
@group(0) @binding(1) var nearest: sampler;

struct Vertex {
    @builtin(position) position: vec4<f32>,
    @location(0) uv: vec2<f32>,
};

@vertex
fn vs_main(@builtin(vertex_index) i: u32) -> Vertex {
    // (0, 0), (2, 0), (0, 2) in texture coordinates: the triangle's inside covers the unit square.
    let uv = vec2<f32>(f32((i << 1u) & 2u), f32(i & 2u));
    var v: Vertex;
    v.position = vec4<f32>(2.0 * uv.x - 1.0, 1.0 - 2.0 * uv.y, 0.0, 1.0);
    v.uv = uv;
    return v;
}

@fragment
fn fs_main(v: Vertex) -> @location(0) vec4<f32> {
    return textureSample(picture, nearest, v.uv);
}
