//! Helpers shared by the integration tests: running an `eddies validate` case by name.

use eddies::validation::Measurement;

/// Runs the validation case `name` (full size) and prints what it measured.
pub fn case(name: &str) -> Measurement {
    let case = eddies::validation::cases()
        .into_iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no validation case {name}"));
    let m = case.measure(false);
    println!(
        "{name}: measured {} {}, reference {} ± {}",
        m.measured, m.unit, m.reference, m.tolerance
    );
    m
}

/// Runs the validation case `name` and fails with its measurement unless it passes.
pub fn assert_passes(name: &str) {
    let m = case(name);
    assert!(
        m.pass,
        "{name}: measured {} {}, reference {} ± {}",
        m.measured, m.unit, m.reference, m.tolerance
    );
}
