//! Shapes as scene files write them (`{ box = { min, max } }`, unions, differences, transforms), their
//! checks, and the library [`Shape`] each stands for.

use eddies::Shape;
use glam::{DQuat, DVec3};
use serde::{Deserialize, Serialize};

use super::check::{direction, finite, finite_all, positive, vector};
use super::{BadValue, ValueCheck};
use crate::keypath::KeyPath;

/// A box.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BoxSpec {
    /// Lower corner (m). In 2D the box extends through all z.
    pub min: Vec<f64>,
    /// Upper corner (m).
    pub max: Vec<f64>,
}

/// A ball (a disc in 2D).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SphereSpec {
    /// Centre (m).
    pub center: Vec<f64>,
    /// Radius (m), > 0.
    pub radius: f64,
}

/// A capped cylinder (a rectangle in 2D).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CylinderSpec {
    /// Middle of the axis (m).
    pub center: Vec<f64>,
    /// Direction of the axis (any length but zero).
    pub axis: Vec<f64>,
    /// Radius (m), > 0.
    pub radius: f64,
    /// Length along the axis (m), > 0.
    pub height: f64,
}

/// A half-space: everything behind the plane through `point` facing `normal`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlaneSpec {
    /// A point on the plane (m).
    pub point: Vec<f64>,
    /// Outward normal (any length but zero): the inside is where `(p − point)·normal ≤ 0`.
    pub normal: Vec<f64>,
}

/// Two shapes: the points of `base` outside `cut`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DifferenceSpec {
    /// The shape cut from.
    pub base: Box<ShapeSpec>,
    /// The shape removed.
    pub cut: Box<ShapeSpec>,
}

/// A shape scaled (about the origin), then rotated, then translated.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TransformSpec {
    /// The shape moved.
    pub shape: Box<ShapeSpec>,
    /// Rotation in degrees: 2D `[angle]` about z; 3D `[x, y, z]` about the axes, applied x first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rotate_deg: Option<Vec<f64>>,
    /// 3D: axis of an axis–angle rotation (default z); use with `angle_deg`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub axis: Option<Vec<f64>>,
    /// Angle of an axis–angle rotation (degrees, counter-clockwise about `axis`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub angle_deg: Option<f64>,
    /// Translation (m). Default zero.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub translate: Option<Vec<f64>>,
    /// Uniform scale factor, > 0. Default 1.
    #[serde(default = "one")]
    pub scale: f64,
}

fn one() -> f64 {
    1.0
}

/// A shape as written in a scene: `shape = { box = { min = [..], max = [..] } }`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ShapeSpec {
    /// `box = { min, max }`.
    Box(BoxSpec),
    /// `sphere = { center, radius }`.
    Sphere(SphereSpec),
    /// `cylinder = { center, axis, radius, height }`.
    Cylinder(CylinderSpec),
    /// `plane = { point, normal }`.
    Plane(PlaneSpec),
    /// `union = [ {shape}, {shape}, .. ]`.
    Union(Vec<ShapeSpec>),
    /// `difference = { base = {shape}, cut = {shape} }`.
    Difference(DifferenceSpec),
    /// `transform = { shape = {shape}, rotate_deg | axis + angle_deg, translate, scale }`.
    Transform(TransformSpec),
}

/// The shape kinds, for error messages.
pub const SHAPE_KINDS: &str = "box, sphere, cylinder, plane, union, difference, transform";

fn pad3(v: &[f64]) -> DVec3 {
    DVec3::new(
        v.first().copied().unwrap_or(0.0),
        v.get(1).copied().unwrap_or(0.0),
        v.get(2).copied().unwrap_or(0.0),
    )
}

impl ShapeSpec {
    /// Checks the shape's vectors have `dim` components and its sizes are positive.
    pub fn validate(&self, path: &KeyPath, dim: usize) -> ValueCheck {
        match self {
            ShapeSpec::Box(b) => {
                let p = path.key("box");
                vector(&p.key("min"), &b.min, dim)?;
                vector(&p.key("max"), &b.max, dim)?;
                for k in 0..dim {
                    if b.max[k] <= b.min[k] {
                        return Err(BadValue::new(
                            p.key("max"),
                            format!(
                                "max[{k}] = {} is not above min[{k}] = {}",
                                b.max[k], b.min[k]
                            ),
                            "max greater than min on every axis",
                        ));
                    }
                }
                Ok(())
            }
            ShapeSpec::Sphere(s) => {
                let p = path.key("sphere");
                vector(&p.key("center"), &s.center, dim)?;
                positive(&p.key("radius"), s.radius, "m")
            }
            ShapeSpec::Cylinder(c) => {
                let p = path.key("cylinder");
                vector(&p.key("center"), &c.center, dim)?;
                direction(&p.key("axis"), &c.axis, dim)?;
                positive(&p.key("radius"), c.radius, "m")?;
                positive(&p.key("height"), c.height, "m")
            }
            ShapeSpec::Plane(pl) => {
                let p = path.key("plane");
                vector(&p.key("point"), &pl.point, dim)?;
                direction(&p.key("normal"), &pl.normal, dim)
            }
            ShapeSpec::Union(shapes) => {
                let p = path.key("union");
                if shapes.is_empty() {
                    return Err(BadValue::new(
                        p,
                        "the union is empty",
                        format!("a list of shapes ({SHAPE_KINDS})"),
                    ));
                }
                shapes
                    .iter()
                    .enumerate()
                    .try_for_each(|(i, s)| s.validate(&p.index(i), dim))
            }
            ShapeSpec::Difference(d) => {
                let p = path.key("difference");
                d.base.validate(&p.key("base"), dim)?;
                d.cut.validate(&p.key("cut"), dim)
            }
            ShapeSpec::Transform(t) => {
                let p = path.key("transform");
                t.shape.validate(&p.key("shape"), dim)?;
                if let Some(r) = &t.rotate_deg {
                    let want = if dim == 2 { 1 } else { 3 };
                    let rp = p.key("rotate_deg");
                    if r.len() != want {
                        let allowed = if dim == 2 {
                            "[angle] (degrees about z)"
                        } else {
                            "[x, y, z] (degrees)"
                        };
                        return Err(BadValue::new(
                            rp,
                            format!("expected {want} number(s) (dim = {dim}), found {}", r.len()),
                            allowed,
                        ));
                    }
                    finite_all(&rp, r)?;
                    if t.angle_deg.is_some() || t.axis.is_some() {
                        return Err(BadValue::new(
                            rp,
                            "both rotate_deg and axis/angle_deg are given",
                            "either rotate_deg or axis with angle_deg",
                        ));
                    }
                }
                if let Some(axis) = &t.axis {
                    if dim == 2 {
                        return Err(BadValue::new(
                            p.key("axis"),
                            "2D rotations are about z and take no axis",
                            "angle_deg or rotate_deg = [angle]",
                        ));
                    }
                    direction(&p.key("axis"), axis, 3)?;
                    if t.angle_deg.is_none() {
                        return Err(BadValue::new(
                            p.key("axis"),
                            "axis without angle_deg",
                            "axis with angle_deg",
                        ));
                    }
                }
                if let Some(a) = t.angle_deg {
                    finite(&p.key("angle_deg"), a)?;
                }
                if let Some(tr) = &t.translate {
                    vector(&p.key("translate"), tr, dim)?;
                }
                positive(&p.key("scale"), t.scale, "factor")
            }
        }
    }

    /// The library shape. 2D vectors are padded with z = 0 and 2D boxes extend through all z. Call after
    /// [`ShapeSpec::validate`].
    pub fn to_shape(&self, dim: usize) -> Shape {
        match self {
            ShapeSpec::Box(b) if dim == 2 => {
                Shape::box2([b.min[0], b.min[1]], [b.max[0], b.max[1]])
            }
            ShapeSpec::Box(b) => Shape::Box {
                min: pad3(&b.min),
                max: pad3(&b.max),
            },
            ShapeSpec::Sphere(s) => Shape::Sphere {
                center: pad3(&s.center),
                radius: s.radius,
            },
            ShapeSpec::Cylinder(c) => Shape::Cylinder {
                center: pad3(&c.center),
                axis: pad3(&c.axis),
                radius: c.radius,
                height: c.height,
            },
            ShapeSpec::Plane(p) => Shape::HalfSpace {
                point: pad3(&p.point),
                normal: pad3(&p.normal),
            },
            ShapeSpec::Union(shapes) => {
                Shape::Union(shapes.iter().map(|s| s.to_shape(dim)).collect())
            }
            ShapeSpec::Difference(d) => Shape::Difference {
                base: Box::new(d.base.to_shape(dim)),
                cut: Box::new(d.cut.to_shape(dim)),
            },
            ShapeSpec::Transform(t) => {
                let rotation = match (&t.rotate_deg, t.angle_deg) {
                    (Some(r), _) if dim == 2 => DQuat::from_rotation_z(r[0].to_radians()),
                    (Some(r), _) => {
                        DQuat::from_rotation_z(r[2].to_radians())
                            * DQuat::from_rotation_y(r[1].to_radians())
                            * DQuat::from_rotation_x(r[0].to_radians())
                    }
                    (None, Some(a)) => {
                        let axis = t
                            .axis
                            .as_deref()
                            .map(pad3)
                            .unwrap_or(DVec3::Z)
                            .normalize_or(DVec3::Z);
                        DQuat::from_axis_angle(axis, a.to_radians())
                    }
                    (None, None) => DQuat::IDENTITY,
                };
                Shape::Transform {
                    shape: Box::new(t.shape.to_shape(dim)),
                    rotation,
                    translation: t.translate.as_deref().map(pad3).unwrap_or(DVec3::ZERO),
                    scale: t.scale,
                }
            }
        }
    }
}
