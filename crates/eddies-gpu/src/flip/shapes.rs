//! Obstacle shapes for the particle pass: each [`Shape`] tree compiled into a postfix program of
//! primitives and `min`/`max` steps that `shapes.wgsl` evaluates with a small stack. Transforms are folded
//! into each primitive's own similarity map (a scaled rotation and an offset) and its distance scale, so
//! that the program has no point stack; infinite extents (the 2D box) become 1e30, which single precision
//! holds and shaders need not treat as special.

use bytemuck::{Pod, Zeroable};
use eddies::Shape;
use glam::{DMat3, DVec3};

/// Values on the evaluation stack at most (`STACK` of `shapes.wgsl`): a deeper shape stays on the CPU.
pub(super) const STACK: usize = 16;

/// Largest magnitude of a coordinate: infinities and larger values are clamped to it.
const FAR: f64 = 1e30;

/// Op codes of `shapes.wgsl`.
const BOX: u32 = 0;
const SPHERE: u32 = 1;
const CYLINDER: u32 = 2;
const HALF_SPACE: u32 = 3;
const MIN: u32 = 4;
const MAX_NEG: u32 = 5;
const EMPTY: u32 = 6;

/// `Instr` of `shapes.wgsl`: an op, the map from the world to the primitive's frame (`local = M p + c`, the
/// rows of `M` with `c` in their fourth entries), the primitive's parameters and its distance scale.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub(super) struct Instr {
    op: u32,
    pad: [u32; 3],
    rows: [[f32; 4]; 3],
    a: [f32; 4],
    b: [f32; 4],
    scale: [f32; 4],
}

/// A similarity map `p ↦ m p + c` and the factor its distances take back to the world.
#[derive(Clone, Copy)]
struct Frame {
    m: DMat3,
    c: DVec3,
    scale: f64,
}

fn clamp(v: DVec3) -> [f32; 3] {
    v.to_array().map(|x| x.clamp(-FAR, FAR) as f32)
}

fn leaf(op: u32, f: Frame, a: [f32; 4], b: [f32; 4]) -> Instr {
    let rows = std::array::from_fn(|r| {
        let row = f.m.row(r);
        [row.x as f32, row.y as f32, row.z as f32, f.c[r] as f32]
    });
    Instr {
        op,
        pad: [0; 3],
        rows,
        a,
        b,
        scale: [f.scale as f32, 0.0, 0.0, 0.0],
    }
}

/// A step without a primitive (its distance scale 1: an empty union's distance is `FAR`).
fn op(op: u32) -> Instr {
    Instr {
        op,
        scale: [1.0, 0.0, 0.0, 0.0],
        ..Default::default()
    }
}

/// Appends `shape`'s program in `frame` to `out`; returns the stack depth it needs, or `None` when a value
/// is not finite.
fn compile_into(shape: &Shape, frame: Frame, out: &mut Vec<Instr>) -> Option<usize> {
    let with = |v: [f32; 3], w: f64| [v[0], v[1], v[2], w as f32];
    match shape {
        Shape::Box { min, max } => {
            out.push(leaf(
                BOX,
                frame,
                with(clamp(*min), 0.0),
                with(clamp(*max), 0.0),
            ));
            Some(1)
        }
        Shape::Sphere { center, radius } => {
            out.push(leaf(SPHERE, frame, with(clamp(*center), *radius), [0.0; 4]));
            Some(1)
        }
        Shape::Cylinder {
            center,
            axis,
            radius,
            height,
        } => {
            let a = axis.normalize_or(DVec3::Y);
            out.push(leaf(
                CYLINDER,
                frame,
                with(clamp(*center), *radius),
                with(clamp(a), *height),
            ));
            Some(1)
        }
        Shape::HalfSpace { point, normal } => {
            let n = normal.normalize_or(DVec3::Y);
            out.push(leaf(
                HALF_SPACE,
                frame,
                with(clamp(*point), 0.0),
                with(clamp(n), 0.0),
            ));
            Some(1)
        }
        Shape::Union(shapes) => {
            let Some((first, rest)) = shapes.split_first() else {
                out.push(op(EMPTY));
                return Some(1);
            };
            let mut depth = compile_into(first, frame, out)?;
            for s in rest {
                depth = depth.max(1 + compile_into(s, frame, out)?);
                out.push(op(MIN));
            }
            Some(depth)
        }
        Shape::Difference { base, cut } => {
            let d0 = compile_into(base, frame, out)?;
            let d1 = compile_into(cut, frame, out)?;
            out.push(op(MAX_NEG));
            Some(d0.max(1 + d1))
        }
        Shape::Transform {
            shape,
            rotation,
            translation,
            scale,
        } => {
            if !(scale.is_finite() && *scale > 0.0) {
                return None;
            }
            // local = R⁻¹ (q − t) / s with q = m p + c, the outer frame's point.
            let inv = DMat3::from_quat(rotation.inverse()) / *scale;
            let inner = Frame {
                m: inv * frame.m,
                c: inv * (frame.c - *translation),
                scale: frame.scale * scale,
            };
            compile_into(shape, inner, out)
        }
    }
}

/// The programs of `shapes` one after another, each one's range of instructions; `None` when one needs
/// more than [`STACK`] values or holds a value that is not finite (the CPU then runs the pass).
pub(super) fn compile(shapes: &[Shape]) -> Option<(Vec<Instr>, Vec<[u32; 4]>)> {
    let mut program = Vec::new();
    let mut ranges = Vec::new();
    let world = Frame {
        m: DMat3::IDENTITY,
        c: DVec3::ZERO,
        scale: 1.0,
    };
    for s in shapes {
        let start = program.len() as u32;
        if compile_into(s, world, &mut program)? > STACK {
            return None;
        }
        ranges.push([start, program.len() as u32, 0, 0]);
    }
    let finite = program.iter().all(|i| {
        i.rows
            .iter()
            .flatten()
            .chain(&i.a)
            .chain(&i.b)
            .chain(&i.scale)
            .all(|x| x.is_finite())
    });
    finite.then_some((program, ranges))
}

#[cfg(test)]
mod tests {
    use super::*;
    use glam::DQuat;

    /// The program's evaluation, as `shapes.wgsl` does it, in f64.
    fn eval(program: &[Instr], p: DVec3) -> f64 {
        let mut stack = Vec::new();
        for i in program {
            let local = DVec3::from_array(std::array::from_fn(|r| {
                let row = i.rows[r].map(f64::from);
                row[0] * p.x + row[1] * p.y + row[2] * p.z + row[3]
            }));
            let a = i.a.map(f64::from);
            let b = i.b.map(f64::from);
            let (av, bv) = (DVec3::new(a[0], a[1], a[2]), DVec3::new(b[0], b[1], b[2]));
            let s = i.scale[0] as f64;
            let leaf = match i.op {
                BOX => Shape::Box { min: av, max: bv },
                SPHERE => Shape::Sphere {
                    center: av,
                    radius: a[3],
                },
                CYLINDER => Shape::Cylinder {
                    center: av,
                    axis: bv,
                    radius: a[3],
                    height: b[3],
                },
                HALF_SPACE => Shape::HalfSpace {
                    point: av,
                    normal: bv,
                },
                MIN => {
                    let (y, x) = (stack.pop().unwrap(), stack.pop().unwrap());
                    stack.push(f64::min(x, y));
                    continue;
                }
                MAX_NEG => {
                    let (y, x): (f64, f64) = (stack.pop().unwrap(), stack.pop().unwrap());
                    stack.push(x.max(-y));
                    continue;
                }
                _ => {
                    stack.push(FAR);
                    continue;
                }
            };
            stack.push(leaf.sdf(local) * s);
        }
        assert_eq!(stack.len(), 1);
        stack[0]
    }

    /// A compiled tree of every primitive, a union, a difference and nested transforms gives the shape's own
    /// distance (to single-precision rounding of its parameters) at points around it.
    #[test]
    fn programs_evaluate_to_the_shapes_distance() {
        let inner = Shape::Difference {
            base: Box::new(Shape::Union(vec![
                Shape::Box {
                    min: DVec3::new(-0.3, -0.2, -0.1),
                    max: DVec3::new(0.3, 0.2, 0.1),
                },
                Shape::Sphere {
                    center: DVec3::new(0.3, 0.0, 0.0),
                    radius: 0.15,
                },
                Shape::Cylinder {
                    center: DVec3::new(0.0, 0.2, 0.0),
                    axis: DVec3::new(1.0, 1.0, 0.0),
                    radius: 0.05,
                    height: 0.4,
                },
            ])),
            cut: Box::new(Shape::HalfSpace {
                point: DVec3::ZERO,
                normal: DVec3::new(0.0, 0.0, -1.0),
            }),
        };
        let shape = Shape::Transform {
            shape: Box::new(Shape::Transform {
                shape: Box::new(inner),
                rotation: DQuat::from_rotation_z(0.4),
                translation: DVec3::new(0.1, 0.0, 0.05),
                scale: 0.7,
            }),
            rotation: DQuat::from_rotation_x(-0.3),
            translation: DVec3::new(0.5, 0.4, 0.3),
            scale: 1.3,
        };
        let (program, ranges) = compile(std::slice::from_ref(&shape)).unwrap();
        assert_eq!(ranges, vec![[0, program.len() as u32, 0, 0]]);
        let mut worst = 0.0f64;
        for i in 0..400 {
            let t = i as f64;
            let p = DVec3::new(
                0.5 + 0.6 * (0.37 * t).sin(),
                0.4 + 0.6 * (0.71 * t).cos(),
                0.3 + 0.6 * (0.13 * t).sin(),
            );
            worst = worst.max((eval(&program, p) - shape.sdf(p)).abs());
        }
        assert!(worst < 1e-6, "{worst}");
        let box2 = Shape::box2([0.1, 0.2], [0.3, 0.4]);
        let (program, _) = compile(std::slice::from_ref(&box2)).unwrap();
        let p = DVec3::new(0.0, 0.25, 0.0);
        assert!((eval(&program, p) - box2.sdf(p)).abs() < 1e-7);
    }

    /// A union nested deeper than the stack allows stays on the CPU.
    #[test]
    fn deep_shapes_are_declined() {
        let ball = Shape::Sphere {
            center: DVec3::ZERO,
            radius: 1.0,
        };
        let mut deep = ball.clone();
        for _ in 0..STACK + 1 {
            deep = Shape::Union(vec![ball.clone(), deep]);
        }
        assert!(compile(&[deep]).is_none());
        assert!(compile(&[ball]).is_some());
    }
}
