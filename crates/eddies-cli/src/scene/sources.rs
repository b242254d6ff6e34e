//! The fluid a scene starts with and what adds, removes and blocks it: `[[substance]]`, `[[region]]`,
//! `[[obstacle]]`, `[[emitter]]` and `[[sink]]`.

use serde::{Deserialize, Serialize};

use super::shapes::ShapeSpec;

/// `[[substance]]`: one fluid.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SubstanceSpec {
    /// Rest density (kg/m³ in 3D, kg/m² in 2D), > 0. Default 1000.
    pub rest_density: f64,
    /// Display colour, linear RGB, each in [0, 1]. Default [0.15, 0.45, 0.95].
    pub color: Vec<f64>,
}

impl Default for SubstanceSpec {
    fn default() -> Self {
        Self {
            rest_density: 1000.0,
            color: vec![0.15, 0.45, 0.95],
        }
    }
}

/// `[[region]]`: initial fluid.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Region {
    /// Where the fluid is (required).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shape: Option<ShapeSpec>,
    /// Substance index. Default 0.
    pub substance: i64,
    /// Density as a fraction of the substance's rest density, in (0, 10]. Default 1.
    pub density: f64,
    /// Initial velocity (m/s). Default zero.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub velocity: Option<Vec<f64>>,
}

impl Default for Region {
    fn default() -> Self {
        Self {
            shape: None,
            substance: 0,
            density: 1.0,
            velocity: None,
        }
    }
}

/// `[[obstacle]]`: a solid.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ObstacleSpec {
    /// The solid's shape (required).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shape: Option<ShapeSpec>,
    /// Velocity of a moving obstacle (m/s); reint supports static obstacles only, so it must be zero.
    /// Default zero.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub velocity: Option<Vec<f64>>,
    /// Angular velocity (rad/s) about `center` (flip only): `[w]` about z in 2D, `[x, y, z]` in 3D. Default
    /// zero.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub angular_velocity: Option<Vec<f64>>,
    /// Centre of rotation at time 0 (m), moving with `velocity` (flip only). Default: the centre of the
    /// shape's bounds (the origin for unbounded shapes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub center: Option<Vec<f64>>,
}

/// `[[emitter]]`: a source of fluid that keeps its cells filled while active.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EmitterSpec {
    /// Where fluid enters (required).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shape: Option<ShapeSpec>,
    /// Substance index. Default 0.
    pub substance: i64,
    /// Velocity of the emitted fluid (m/s). Default zero.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub velocity: Option<Vec<f64>>,
    /// Density it fills to, as a fraction of rest density, in (0, 10]. Default 1.
    pub density: f64,
    /// Simulated time it starts (s), ≥ 0. Default 0.
    pub start: f64,
    /// Simulated time it stops (s), > start; `inf` for never. Default inf.
    pub stop: f64,
}

impl Default for EmitterSpec {
    fn default() -> Self {
        Self {
            shape: None,
            substance: 0,
            velocity: None,
            density: 1.0,
            start: 0.0,
            stop: f64::INFINITY,
        }
    }
}

/// `[[sink]]`: a drain.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SinkSpec {
    /// Where fluid leaves (required).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shape: Option<ShapeSpec>,
    /// Fraction of the mass inside removed per second (1/s), ≥ 0. Default 10.
    pub rate: f64,
}

impl Default for SinkSpec {
    fn default() -> Self {
        Self {
            shape: None,
            rate: 10.0,
        }
    }
}
