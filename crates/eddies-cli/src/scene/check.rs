//! Checks on scene values, each naming the key it is about: the library's checks ([`eddies::check`]) placed
//! at a key path, and those of the program's own kinds of values (vectors, directions, boxes).

use eddies::check;

use super::{BadValue, ValueCheck};
use crate::keypath::KeyPath;

/// A library check's result, placed at `path`.
fn at(path: &KeyPath, c: check::Check) -> ValueCheck {
    c.map_err(|e| BadValue::from_library(path.clone(), e))
}

pub(super) fn finite(path: &KeyPath, x: f64) -> ValueCheck {
    at(path, check::finite("", x))
}

pub(super) fn finite_all(path: &KeyPath, v: &[f64]) -> ValueCheck {
    v.iter()
        .enumerate()
        .try_for_each(|(i, &x)| finite(&path.index(i), x))
}

pub(super) fn positive(path: &KeyPath, x: f64, unit: &str) -> ValueCheck {
    at(path, check::positive("", x, unit))
}

/// `lo < x ≤ hi` (`lo_open`) or `lo ≤ x ≤ hi`.
pub(super) fn range(path: &KeyPath, x: f64, lo: f64, hi: f64, lo_open: bool) -> ValueCheck {
    at(path, check::range("", x, lo, hi, lo_open))
}

pub(super) fn int_range(path: &KeyPath, x: i64, lo: i64, hi: i64) -> ValueCheck {
    at(path, check::int_range("", x as i128, lo, hi))
}

/// A position or velocity: `dim` finite numbers.
pub(super) fn vector(path: &KeyPath, v: &[f64], dim: usize) -> ValueCheck {
    if v.len() != dim {
        return Err(BadValue::new(
            path.clone(),
            format!("expected {dim} numbers (dim = {dim}), found {}", v.len()),
            format!("a list of {dim} numbers"),
        ));
    }
    finite_all(path, v)
}

/// A direction: a vector that is not zero.
pub(super) fn direction(path: &KeyPath, v: &[f64], dim: usize) -> ValueCheck {
    vector(path, v, dim)?;
    if v.iter().all(|&x| x == 0.0) {
        return Err(BadValue::new(
            path.clone(),
            "the direction is zero",
            "a non-zero vector",
        ));
    }
    Ok(())
}

/// `min` and `max` corners of a 3D box (keys `min`, `max` under `path`), `max > min` on every axis.
pub(super) fn box_corners(path: &KeyPath, min: &[f64], max: &[f64]) -> ValueCheck {
    vector(&path.key("min"), min, 3)?;
    vector(&path.key("max"), max, 3)?;
    for k in 0..3 {
        if max[k] <= min[k] {
            return Err(BadValue::new(
                path.key("max").index(k),
                format!("max {} is not above min {}", max[k], min[k]),
                "max > min on every axis",
            ));
        }
    }
    Ok(())
}

/// The `density_deviation` (kg/m³) and `temperature_deviation` (K) of a body of fluid under `path`.
pub(super) fn deviations(path: &KeyPath, density: f64, temperature: f64) -> ValueCheck {
    range(&path.key("density_deviation"), density, -1e9, 1e9, false)?;
    range(
        &path.key("temperature_deviation"),
        temperature,
        -1e6,
        1e6,
        false,
    )
}
