//! `eddies validate`: runs the library's validation cases (`eddies::validation::cases`) and prints measured
//! against reference values, as a table or as JSON Lines
//! (`{"case", "measured", "reference", "tolerance", "unit", "pass"}`).

use std::io::Write;

use eddies::validation::{self, Case, Measurement};

use crate::error::CliError;

/// The cases whose name contains `filter` (all without one); an error listing the cases when none does.
pub fn select(filter: Option<&str>) -> Result<Vec<Case>, CliError> {
    let all = validation::cases();
    let chosen: Vec<Case> = all
        .iter()
        .copied()
        .filter(|c| filter.is_none_or(|f| c.name.contains(f)))
        .collect();
    if chosen.is_empty() {
        let names: Vec<&str> = all.iter().map(|c| c.name).collect();
        return Err(CliError::input(
            format!("no validation case matches \"{}\"", filter.unwrap_or("")),
            vec![format!(
                "  cases: {}",
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                }
            )],
        ));
    }
    Ok(chosen)
}

/// A number for the table: plain where that is short, scientific otherwise.
pub fn short_number(x: f64) -> String {
    if x == 0.0 {
        "0".into()
    } else if x.is_finite() && (1e-3..1e5).contains(&x.abs()) {
        let s = format!("{x:.4}");
        let s = s.trim_end_matches('0').trim_end_matches('.');
        s.to_string()
    } else {
        format!("{x:.3e}")
    }
}

/// A JSON number, or `null` for NaN and infinities (which JSON cannot hold).
pub(crate) fn json_number(x: f64) -> String {
    serde_json::Number::from_f64(x).map_or_else(|| "null".into(), |n| n.to_string())
}

/// One JSON line for a measurement, keys in the documented order.
pub fn json_line(m: &Measurement) -> String {
    format!(
        "{{\"case\":{},\"measured\":{},\"reference\":{},\"tolerance\":{},\"unit\":{},\"pass\":{}}}",
        serde_json::Value::String(m.case.clone()),
        json_number(m.measured),
        json_number(m.reference),
        json_number(m.tolerance),
        serde_json::Value::String(m.unit.to_string()),
        m.pass
    )
}

/// Runs the selected cases, printing each result as it arrives. Returns whether all passed.
pub fn run(
    filter: Option<&str>,
    quick: bool,
    json: bool,
    out: &mut dyn Write,
) -> Result<bool, CliError> {
    let cases = select(filter)?;
    let width = cases.iter().map(|c| c.name.len()).max().unwrap_or(4).max(4);
    let io = |e: std::io::Error| CliError::other(format!("cannot write to stdout: {e}"));
    if !json {
        writeln!(
            out,
            "{:<width$}  {:>12}  {:>12}  {:>12}  {:<8}  result",
            "case", "measured", "reference", "tolerance", "unit"
        )
        .map_err(io)?;
    }
    let mut failed = 0;
    for case in &cases {
        let m = (case.run)(quick);
        if !m.pass {
            failed += 1;
        }
        if json {
            writeln!(out, "{}", json_line(&m)).map_err(io)?;
        } else {
            writeln!(
                out,
                "{:<width$}  {:>12}  {:>12}  {:>12}  {:<8}  {}",
                m.case,
                short_number(m.measured),
                short_number(m.reference),
                short_number(m.tolerance),
                m.unit,
                if m.pass { "PASS" } else { "FAIL" }
            )
            .map_err(io)?;
        }
        out.flush().map_err(io)?;
    }
    if !json {
        writeln!(
            out,
            "{} of {} cases passed",
            cases.len() - failed,
            cases.len()
        )
        .map_err(io)?;
    }
    Ok(failed == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_line_has_documented_keys() {
        let m = Measurement::within("reint/x", 1.5, 1.0, 0.25, "m");
        let v: serde_json::Value = serde_json::from_str(&json_line(&m)).unwrap();
        assert_eq!(v["case"], "reint/x");
        assert_eq!(v["measured"], 1.5);
        assert_eq!(v["reference"], 1.0);
        assert_eq!(v["tolerance"], 0.25);
        assert_eq!(v["unit"], "m");
        assert_eq!(v["pass"], false);
    }

    #[test]
    fn short_numbers() {
        assert_eq!(short_number(0.0), "0");
        assert_eq!(short_number(1.5), "1.5");
        assert_eq!(short_number(2.0), "2");
        assert_eq!(short_number(1.0e-7), "1.000e-7");
    }

    #[test]
    fn unknown_filter_is_bad_input() {
        let e = select(Some("no-such-case-anywhere")).unwrap_err();
        assert_eq!(e.exit_code(), crate::error::EXIT_BAD_INPUT);
    }
}
