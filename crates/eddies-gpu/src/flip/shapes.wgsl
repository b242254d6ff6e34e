// Signed distances of the obstacles (`shapes.rs` compiles each shape into a postfix program): primitives as
// `eddies::Shape::sdf` computes them, in the primitive's own frame, and `min` (union) and `max(a, −b)`
// (difference) over a small stack.

struct Instr {
    op: u32, pad0: u32, pad1: u32, pad2: u32,
    // The world-to-primitive map: `local = (row0·p + row0.w, row1·p + row1.w, row2·p + row2.w)`.
    row0: vec4<f32>, row1: vec4<f32>, row2: vec4<f32>,
    a: vec4<f32>, b: vec4<f32>,
    // x: the factor from the primitive's distances to the world's.
    scale: vec4<f32>,
}

const OP_BOX: u32 = 0u;
const OP_SPHERE: u32 = 1u;
const OP_CYLINDER: u32 = 2u;
const OP_HALF_SPACE: u32 = 3u;
const OP_MIN: u32 = 4u;
const OP_MAX_NEG: u32 = 5u;
const STACK: u32 = 16u;
const FAR: f32 = 1e30;

fn primitive(i: Instr, p: vec3<f32>) -> f32 {
    let q = vec3<f32>(dot(i.row0.xyz, p) + i.row0.w, dot(i.row1.xyz, p) + i.row1.w,
                      dot(i.row2.xyz, p) + i.row2.w);
    var d = FAR;
    switch i.op {
        case OP_BOX: {
            let e = max(i.a.xyz - q, q - i.b.xyz);
            d = length(max(e, vec3<f32>(0.0))) + min(max(e.x, max(e.y, e.z)), 0.0);
        }
        case OP_SPHERE: {
            d = length(q - i.a.xyz) - i.a.w;
        }
        case OP_CYLINDER: {
            let r = q - i.a.xyz;
            let along = dot(r, i.b.xyz);
            let dr = length(r - i.b.xyz * along) - i.a.w;
            let dh = abs(along) - 0.5 * i.b.w;
            d = length(vec2<f32>(max(dr, 0.0), max(dh, 0.0))) + min(max(dr, dh), 0.0);
        }
        case OP_HALF_SPACE: {
            d = dot(q - i.a.xyz, i.b.xyz);
        }
        default: {}
    }
    return d * i.scale.x;
}

// The distance from `p` to obstacle `o` (negative inside).
fn obstacle_sdf(o: u32, p: vec3<f32>) -> f32 {
    var stack: array<f32, STACK>;
    var top = 0u;
    let range = ranges[o];
    for (var k = range.x; k < range.y; k++) {
        let i = program[k];
        if i.op == OP_MIN {
            top -= 1u;
            stack[top - 1u] = min(stack[top - 1u], stack[top]);
        } else if i.op == OP_MAX_NEG {
            top -= 1u;
            stack[top - 1u] = max(stack[top - 1u], -stack[top]);
        } else {
            stack[top] = primitive(i, p);
            top += 1u;
        }
    }
    return stack[0];
}

// The outward unit normal of obstacle `o` at `p` by central differences with step `e`, or 0 where the
// gradient vanishes, as `Shape::normal`.
fn obstacle_normal(o: u32, p: vec3<f32>, e: f32) -> vec3<f32> {
    var g = vec3<f32>(0.0);
    for (var k = 0u; k < 3u; k++) {
        var step = vec3<f32>(0.0);
        step[k] = e;
        g[k] = obstacle_sdf(o, p + step) - obstacle_sdf(o, p - step);
    }
    let l = length(g);
    return select(vec3<f32>(0.0), g / l, l > 0.0);
}
