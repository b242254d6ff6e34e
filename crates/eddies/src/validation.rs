//! The validation registry: cases that compare a measured quantity with an analytic or experimental reference.
//! `eddies validate` prints them, and the tests in `tests/` assert them, so both read the same numbers.

/// One validation result.
#[derive(Clone, Debug, PartialEq)]
pub struct Measurement {
    /// Case name, e.g. `reint/mass-conservation-2d`.
    pub case: String,
    /// What the run measured.
    pub measured: f64,
    /// The reference value or bound.
    pub reference: f64,
    /// Allowed deviation: `|measured − reference| ≤ tolerance` for [`Measurement::within`]; for
    /// [`Measurement::at_most`] the bound is `reference` itself and the tolerance is 0.
    pub tolerance: f64,
    /// Unit of `measured` and `reference` (`"1"` for ratios).
    pub unit: &'static str,
    /// Whether the case passed.
    pub pass: bool,
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
        }
    }
}

/// A registered validation case.
#[derive(Clone, Copy, Debug)]
pub struct Case {
    /// Unique name, `method/what`.
    pub name: &'static str,
    /// One line: what is checked against what.
    pub description: &'static str,
    /// Runs the case; `quick` shortens it (fewer steps, smaller grids) with the same reference.
    pub run: fn(quick: bool) -> Measurement,
}

/// Every validation case of every method, in a stable order.
pub fn cases() -> Vec<Case> {
    let mut cases = crate::reint::validation::cases();
    cases.extend(crate::linsolve::validation::cases());
    cases.extend(crate::flip::validation::cases());
    cases.extend(crate::vpm::validation::cases());
    cases.extend(crate::vpm::validation_poisson::cases());
    cases
}

/// SplitMix64 (Steele, Lea and Flood 2014): a tiny deterministic generator for reproducible validation
/// inputs — the same numbers on every machine and run, with no dependency.
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator started from `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1), with 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in [lo, hi).
    pub fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.next_f64()
    }
}
