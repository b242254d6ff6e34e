//! The validation registry: cases that compare a measured quantity with an analytic or experimental reference.
//! `eddies validate` prints them, and the tests in `tests/` assert them, so both read the same numbers.
//!
//! The registry ([`Case`], [`Measurement`], [`Comparison`]) sits above the methods: each method's cases live
//! in a submodule here ([`reint`], [`linsolve`], [`flip`], [`vpm`], [`vpm_poisson`]) and use the method's
//! public (or crate-visible) items, and no method module depends on this one. The long soak runs of
//! `eddies validate --soak` are in [`soak`].

// The cases' small dense fits and per-sample loops index several arrays together, as the methods' own
// loops do (each method module allows the same).
#![allow(clippy::needless_range_loop)]

pub mod flip;
pub mod linsolve;
pub mod reint;
pub mod soak;
pub mod vpm;
pub mod vpm_poisson;

/// Which way a [`Measurement`] compares its measured value with its reference.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Comparison {
    /// Passes when `measured ≤ reference` (an upper bound).
    AtMost,
    /// Passes when `measured ≥ reference` (a lower bound).
    AtLeast,
    /// Passes when `|measured − reference| ≤ tolerance`.
    Within,
}

impl Comparison {
    /// The operator as it is written in `eddies validate --json`: `"<="`, `">="` or `"±"`.
    pub fn symbol(self) -> &'static str {
        match self {
            Comparison::AtMost => "<=",
            Comparison::AtLeast => ">=",
            Comparison::Within => "±",
        }
    }
}

/// One validation result.
#[derive(Clone, Debug, PartialEq)]
pub struct Measurement {
    /// Case name, e.g. `reint/mass-conservation-2d`.
    pub case: String,
    /// What the run measured; NaN when it could not be measured on this platform (see
    /// [`Measurement::not_measured`]).
    pub measured: f64,
    /// The reference value or bound.
    pub reference: f64,
    /// Allowed deviation: `|measured − reference| ≤ tolerance` for [`Comparison::Within`]; 0 for the bounds
    /// [`Comparison::AtMost`] and [`Comparison::AtLeast`], whose bound is `reference` itself.
    pub tolerance: f64,
    /// Unit of `measured` and `reference` (`"1"` for ratios).
    pub unit: &'static str,
    /// Whether the case passed.
    pub pass: bool,
    /// Which way `measured` is compared with `reference`.
    pub comparison: Comparison,
    /// Why the model is known to miss this reference, when it does (copied from [`Case::known_gap`] by
    /// [`Case::measure`]). A failing row with a known gap is reported but is not a failure of the run.
    pub known_gap: Option<&'static str>,
}

impl Measurement {
    /// Passes when `|measured − reference| ≤ tolerance`.
    pub fn within(
        case: &str,
        measured: f64,
        reference: f64,
        tolerance: f64,
        unit: &'static str,
    ) -> Self {
        let pass = (measured - reference).abs() <= tolerance;
        Self {
            case: case.to_string(),
            measured,
            reference,
            tolerance,
            unit,
            pass,
            comparison: Comparison::Within,
            known_gap: None,
        }
    }

    /// Passes when `measured ≤ bound`.
    pub fn at_most(case: &str, measured: f64, bound: f64, unit: &'static str) -> Self {
        Self {
            case: case.to_string(),
            measured,
            reference: bound,
            tolerance: 0.0,
            unit,
            pass: measured <= bound,
            comparison: Comparison::AtMost,
            known_gap: None,
        }
    }

    /// Passes when `measured ≥ bound`.
    pub fn at_least(case: &str, measured: f64, bound: f64, unit: &'static str) -> Self {
        Self {
            case: case.to_string(),
            measured,
            reference: bound,
            tolerance: 0.0,
            unit,
            pass: measured >= bound,
            comparison: Comparison::AtLeast,
            known_gap: None,
        }
    }

    /// An upper bound that this platform gives no way to check (the resident memory outside Linux): the
    /// measured value is NaN and the row passes, so that the run does not fail for what it cannot see.
    pub fn not_measured(case: &str, bound: f64, unit: &'static str) -> Self {
        Self {
            pass: true,
            ..Self::at_most(case, f64::NAN, bound, unit)
        }
    }

    /// The same measurement marked as a known gap of the model, for `reason`.
    pub fn with_known_gap(self, reason: &'static str) -> Self {
        Self {
            known_gap: Some(reason),
            ..self
        }
    }

    /// Whether this row fails the run: it did not pass and is not a known gap of the model.
    pub fn is_failure(&self) -> bool {
        !self.pass && self.known_gap.is_none()
    }

    /// Whether this row misses its reference for a known gap of the model.
    pub fn is_known_gap_miss(&self) -> bool {
        !self.pass && self.known_gap.is_some()
    }
}

/// A registered validation case.
#[derive(Clone, Copy, Debug)]
pub struct Case {
    /// Unique name, `method/what`.
    pub name: &'static str,
    /// One line: what is checked against what.
    pub description: &'static str,
    /// Runs the case; `quick` shortens it (fewer steps, smaller grids) with a reference derived for the
    /// shorter run where it differs (the reason is written beside the number).
    pub run: fn(quick: bool) -> Measurement,
    /// Why the model is known to miss this reference (`None` for a case expected to pass). The row is still
    /// printed with its measured value; it does not make `eddies validate` fail.
    pub known_gap: Option<&'static str>,
}

impl Case {
    /// Runs the case and attaches its known gap, if any, to the measurement.
    pub fn measure(&self, quick: bool) -> Measurement {
        Measurement {
            known_gap: self.known_gap,
            ..(self.run)(quick)
        }
    }
}

/// Every validation case of every method, in a stable order.
pub fn cases() -> Vec<Case> {
    let mut cases = reint::cases();
    cases.extend(linsolve::cases());
    cases.extend(flip::cases());
    cases.extend(vpm::cases());
    cases.extend(vpm_poisson::cases());
    cases
}

/// The soak runs of `eddies validate --soak` (see [`soak`]), which the ordinary run does not include.
pub fn soak_cases() -> Vec<soak::SoakCase> {
    soak::cases()
}
