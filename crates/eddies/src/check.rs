//! Checks on parameter values, with the messages users see: each names the key, what is wrong with its
//! value and what would be accepted. Methods check their parameter types with these
//! ([`crate::reint::ReintParams::validate`] and its siblings); drivers such as the `eddies` program place
//! the key in their input and print the rest.

use std::fmt::Display;

/// A value that is out of range, of the wrong shape, or inconsistent with another value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {what} (allowed: {allowed})")]
pub struct Invalid {
    /// The key of the value, dotted from the checked type down (`kernel_radius`, `tree.theta`); empty for
    /// the checked value itself.
    pub key: String,
    /// What is wrong.
    pub what: String,
    /// What would be accepted.
    pub allowed: String,
}

impl Invalid {
    /// A problem with the value at `key`.
    pub fn new(
        key: impl Into<String>,
        what: impl Into<String>,
        allowed: impl Into<String>,
    ) -> Self {
        Self {
            key: key.into(),
            what: what.into(),
            allowed: allowed.into(),
        }
    }

    /// The same problem seen from the type that holds the checked one under `key`.
    pub fn within(mut self, key: &str) -> Self {
        self.key = if self.key.is_empty() {
            key.to_string()
        } else {
            format!("{key}.{}", self.key)
        };
        self
    }

    /// The components of [`Invalid::key`], outermost first (none for the checked value itself).
    pub fn key_path(&self) -> impl Iterator<Item = &str> {
        self.key.split('.').filter(|k| !k.is_empty())
    }
}

/// The result of a check.
pub type Check = Result<(), Invalid>;

/// `x` is a finite number.
pub fn finite(key: &str, x: f64) -> Check {
    if x.is_finite() {
        Ok(())
    } else {
        Err(Invalid::new(
            key,
            format!("{x} is not a finite number"),
            "a finite number",
        ))
    }
}

/// `x` is finite and above zero; `unit` names its unit in the message.
pub fn positive<T: Into<f64> + Display + Copy>(key: &str, x: T, unit: &str) -> Check {
    let v: f64 = x.into();
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err(Invalid::new(
            key,
            format!("{x} is not positive"),
            format!("a finite number > 0 ({unit})"),
        ))
    }
}

/// `lo < x ≤ hi` (`lo_open`) or `lo ≤ x ≤ hi`, and finite.
pub fn range<T: Into<f64> + Display + Copy>(
    key: &str,
    x: T,
    lo: f64,
    hi: f64,
    lo_open: bool,
) -> Check {
    let v: f64 = x.into();
    let above = if lo_open { v > lo } else { v >= lo };
    if v.is_finite() && above && v <= hi {
        Ok(())
    } else {
        let bracket = if lo_open { "(" } else { "[" };
        Err(Invalid::new(
            key,
            format!("{x} is out of range"),
            format!("{bracket}{lo}, {hi}]"),
        ))
    }
}

/// `lo ≤ x ≤ hi` for a whole number.
pub fn int_range(key: &str, x: i128, lo: i64, hi: i64) -> Check {
    if (lo as i128..=hi as i128).contains(&x) {
        Ok(())
    } else {
        Err(Invalid::new(
            key,
            format!("{x} is out of range"),
            format!("integers from {lo} to {hi}"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_value_and_the_range() {
        let e = range("kernel_radius", 2.5f32, 1.0, 1.5, false).unwrap_err();
        assert_eq!(
            e.to_string(),
            "kernel_radius: 2.5 is out of range (allowed: [1, 1.5])"
        );
        assert!(range("k", f64::NAN, 0.0, 1.0, true).is_err());
        assert!(range("k", 0.0, 0.0, 1.0, true).is_err());
        assert!(range("k", 0.0, 0.0, 1.0, false).is_ok());
        assert_eq!(
            int_range("leaf_size", 0, 1, 4096).unwrap_err().allowed,
            "integers from 1 to 4096"
        );
        assert_eq!(
            positive("c", -1.0, "m/s").unwrap_err().what,
            "-1 is not positive"
        );
        let nested = Invalid::new("tree.theta", "x", "y");
        assert_eq!(nested.key_path().collect::<Vec<_>>(), ["tree", "theta"]);
    }
}
