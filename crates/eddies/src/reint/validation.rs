//! Validation cases of reintegration tracking.

use crate::validation::Case;

/// The method's validation cases.
pub fn cases() -> Vec<Case> {
    Vec::new()
}
