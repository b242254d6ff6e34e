//! Signed-distance shapes for fluid regions, emitters and obstacles.
//!
//! A [`Shape`] is evaluated in 3D, in metres: negative inside, positive outside, and (away from kinks) the
//! Euclidean distance to the surface, so its gradient has unit length. 2D scenes evaluate shapes in the plane
//! `z = 0`; a 2D box is given with infinite z extent by [`Shape::box2`], so it is exact in the plane.
//!
//! Formulas follow Inigo Quilez's catalogue of distance functions (exact box, capped cylinder); union and
//! difference are the usual `min` and `max(a, -b)`, which are exact outside and bounds inside.

use glam::{DQuat, DVec3};

/// A signed-distance shape.
#[derive(Clone, Debug, PartialEq)]
pub enum Shape {
    /// Axis-aligned box between two corners (m).
    Box { min: DVec3, max: DVec3 },
    /// Ball of `radius` (m) around `center`.
    Sphere { center: DVec3, radius: f64 },
    /// Capped cylinder: `center` is the middle of its axis, `axis` its direction (normalised on use),
    /// `radius` and total `height` in metres.
    Cylinder {
        center: DVec3,
        axis: DVec3,
        radius: f64,
        height: f64,
    },
    /// The half-space behind a plane: points `p` with `(p − point) · normal ≤ 0` are inside.
    HalfSpace { point: DVec3, normal: DVec3 },
    /// Points inside any of the shapes.
    Union(Vec<Shape>),
    /// Points inside `base` and outside `cut`.
    Difference { base: Box<Shape>, cut: Box<Shape> },
    /// A shape moved by a similarity transform: first scaled by `scale` about the origin, then rotated, then
    /// translated. (A non-uniform scale would break the distance property, so it is not offered.)
    Transform {
        shape: Box<Shape>,
        rotation: DQuat,
        translation: DVec3,
        scale: f64,
    },
}

impl Shape {
    /// A 2D box (rectangle in the xy plane), infinite along z so that it is exact in the plane `z = 0`.
    pub fn box2(min: [f64; 2], max: [f64; 2]) -> Shape {
        Shape::Box {
            min: DVec3::new(min[0], min[1], f64::NEG_INFINITY),
            max: DVec3::new(max[0], max[1], f64::INFINITY),
        }
    }

    /// Signed distance from `p` (m) to the surface: negative inside.
    pub fn sdf(&self, p: DVec3) -> f64 {
        match self {
            Shape::Box { min, max } => {
                // Per-axis signed distance to the slab [min, max]; exact with infinite extents too.
                let d = (*min - p).max(p - *max);
                d.max(DVec3::ZERO).length() + d.max_element().min(0.0)
            }
            Shape::Sphere { center, radius } => (p - *center).length() - radius,
            Shape::Cylinder {
                center,
                axis,
                radius,
                height,
            } => {
                let a = axis.normalize_or(DVec3::Y);
                let q = p - *center;
                let along = q.dot(a);
                let radial = (q - a * along).length();
                let dr = radial - radius;
                let dh = along.abs() - 0.5 * height;
                let outside = (dr.max(0.0).powi(2) + dh.max(0.0).powi(2)).sqrt();
                outside + dr.max(dh).min(0.0)
            }
            Shape::HalfSpace { point, normal } => (p - *point).dot(normal.normalize_or(DVec3::Y)),
            Shape::Union(shapes) => shapes
                .iter()
                .map(|s| s.sdf(p))
                .fold(f64::INFINITY, f64::min),
            Shape::Difference { base, cut } => base.sdf(p).max(-cut.sdf(p)),
            Shape::Transform {
                shape,
                rotation,
                translation,
                scale,
            } => {
                let local = rotation.inverse() * (p - *translation) / *scale;
                shape.sdf(local) * scale
            }
        }
    }

    /// Whether `p` is inside (or on) the shape.
    pub fn contains(&self, p: DVec3) -> bool {
        self.sdf(p) <= 0.0
    }

    /// Outward unit normal at `p` by central differences of the distance with step `h` (m); zero where the
    /// gradient vanishes (the middle of a symmetric shape).
    pub fn normal(&self, p: DVec3, h: f64) -> DVec3 {
        let g = DVec3::from_array(std::array::from_fn(|k| {
            let mut e = DVec3::ZERO;
            e[k] = h;
            self.sdf(p + e) - self.sdf(p - e)
        }));
        g.normalize_or_zero()
    }

    /// Axis-aligned bounds `(min, max)` of the shape (m); infinite where the shape is unbounded.
    pub fn bounds(&self) -> (DVec3, DVec3) {
        match self {
            Shape::Box { min, max } => (*min, *max),
            Shape::Sphere { center, radius } => (*center - *radius, *center + *radius),
            Shape::Cylinder {
                center,
                radius,
                height,
                ..
            } => {
                // The ball around the cylinder contains it whatever its axis.
                let r = (radius * radius + 0.25 * height * height).sqrt();
                (*center - r, *center + r)
            }
            Shape::HalfSpace { .. } => (DVec3::NEG_INFINITY, DVec3::INFINITY),
            Shape::Union(shapes) => shapes.iter().map(Shape::bounds).fold(
                (DVec3::INFINITY, DVec3::NEG_INFINITY),
                |(lo, hi), (a, b)| (lo.min(a), hi.max(b)),
            ),
            Shape::Difference { base, .. } => base.bounds(),
            Shape::Transform {
                shape,
                rotation,
                translation,
                scale,
            } => {
                let (lo, hi) = shape.bounds();
                if !(lo.is_finite() && hi.is_finite()) {
                    return (DVec3::NEG_INFINITY, DVec3::INFINITY);
                }
                let corners = (0..8).map(|c| {
                    let corner = DVec3::new(
                        if c & 1 == 0 { lo.x } else { hi.x },
                        if c & 2 == 0 { lo.y } else { hi.y },
                        if c & 4 == 0 { lo.z } else { hi.z },
                    );
                    *rotation * (corner * *scale) + *translation
                });
                corners.fold((DVec3::INFINITY, DVec3::NEG_INFINITY), |(a, b), c| {
                    (a.min(c), b.max(c))
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn box_distance_is_exact_at_known_points() {
        let b = Shape::Box {
            min: DVec3::ZERO,
            max: DVec3::ONE,
        };
        assert_eq!(b.sdf(DVec3::splat(0.5)), -0.5);
        assert_eq!(b.sdf(DVec3::new(2.0, 0.5, 0.5)), 1.0);
        assert!((b.sdf(DVec3::new(2.0, 2.0, 0.5)) - 2f64.sqrt()).abs() < 1e-15);
    }

    #[test]
    fn box2_is_exact_in_plane() {
        let b = Shape::box2([0.0, 0.0], [1.0, 2.0]);
        assert_eq!(b.sdf(DVec3::new(0.5, 1.0, 0.0)), -0.5);
        assert_eq!(b.sdf(DVec3::new(-3.0, 1.0, 0.0)), 3.0);
    }

    #[test]
    fn transform_moves_and_scales() {
        let s = Shape::Transform {
            shape: Box::new(Shape::Sphere {
                center: DVec3::ZERO,
                radius: 1.0,
            }),
            rotation: DQuat::from_rotation_z(0.3),
            translation: DVec3::new(5.0, 0.0, 0.0),
            scale: 2.0,
        };
        assert!((s.sdf(DVec3::new(5.0, 0.0, 0.0)) + 2.0).abs() < 1e-12);
        assert!((s.sdf(DVec3::new(8.0, 0.0, 0.0)) - 1.0).abs() < 1e-12);
    }
}
