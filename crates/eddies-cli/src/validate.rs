//! `eddies validate`: runs the library's validation cases (`eddies::validation::cases`), or with `--soak` its
//! soak runs (`eddies::validation::soak_cases`), and prints measured against reference values, as a table or
//! as JSON Lines (`{"case", "measured", "reference", "tolerance", "unit", "pass", "comparison",
//! "known_model_gap", "known_gap_reason"}`).

use std::io::Write;

use eddies::validation::soak::SoakCase;
use eddies::validation::{self, Case, Comparison, Measurement};

use crate::error::{CliError, EXIT_FAILURE, EXIT_OK};

/// A selected entry: a validation case (one row) or a soak run (several rows).
#[derive(Clone, Copy, Debug)]
pub enum Entry {
    /// A validation case.
    Case(Case),
    /// A soak run.
    Soak(SoakCase),
}

impl Entry {
    /// The entry's registered name.
    pub fn name(&self) -> &'static str {
        match self {
            Entry::Case(c) => c.name,
            Entry::Soak(s) => s.name,
        }
    }

    /// Runs it and returns its rows, each with the case's known gap attached.
    pub fn rows(&self, quick: bool) -> Vec<Measurement> {
        match self {
            Entry::Case(c) => vec![c.measure(quick)],
            Entry::Soak(s) => (s.run)(quick),
        }
    }
}

/// The entries whose name contains `filter` (all without one), from the soak runs when `soak` is set and
/// from the validation cases otherwise; an error listing the names when none matches.
pub fn select(filter: Option<&str>, soak: bool) -> Result<Vec<Entry>, CliError> {
    let all: Vec<Entry> = if soak {
        validation::soak_cases()
            .into_iter()
            .map(Entry::Soak)
            .collect()
    } else {
        validation::cases().into_iter().map(Entry::Case).collect()
    };
    let chosen: Vec<Entry> = all
        .iter()
        .copied()
        .filter(|e| filter.is_none_or(|f| e.name().contains(f)))
        .collect();
    if chosen.is_empty() {
        let names: Vec<&str> = all.iter().map(Entry::name).collect();
        return Err(CliError::input(
            format!(
                "no {} matches \"{}\"",
                if soak { "soak run" } else { "validation case" },
                filter.unwrap_or("")
            ),
            vec![format!(
                "  {}: {}",
                if soak { "soak runs" } else { "cases" },
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

/// What a row requires of its measured value, for the table: `≤ 0.01`, `≥ 3` or `0.1533 ± 0.0383`.
pub fn criterion(m: &Measurement) -> String {
    match m.comparison {
        Comparison::AtMost => format!("≤ {}", short_number(m.reference)),
        Comparison::AtLeast => format!("≥ {}", short_number(m.reference)),
        Comparison::Within => format!(
            "{} ± {}",
            short_number(m.reference),
            short_number(m.tolerance)
        ),
    }
}

/// The measured value for the table; "not measured" where the platform gives no way to (NaN).
fn measured_text(m: &Measurement) -> String {
    if m.measured.is_nan() {
        "not measured".into()
    } else {
        short_number(m.measured)
    }
}

/// A JSON number, or `null` for NaN and infinities (which JSON cannot hold).
pub(crate) fn json_number(x: f64) -> String {
    serde_json::Number::from_f64(x).map_or_else(|| "null".into(), |n| n.to_string())
}

/// One JSON line for a measurement, keys in the documented order (the first six are the original ones;
/// later keys are only ever added after them).
pub fn json_line(m: &Measurement) -> String {
    format!(
        "{{\"case\":{},\"measured\":{},\"reference\":{},\"tolerance\":{},\"unit\":{},\"pass\":{},\
         \"comparison\":{},\"known_model_gap\":{},\"known_gap_reason\":{}}}",
        serde_json::Value::String(m.case.clone()),
        json_number(m.measured),
        json_number(m.reference),
        json_number(m.tolerance),
        serde_json::Value::String(m.unit.to_string()),
        m.pass,
        serde_json::Value::String(m.comparison.symbol().to_string()),
        m.known_gap.is_some(),
        m.known_gap
            .map_or(serde_json::Value::Null, |r| serde_json::Value::String(
                r.into()
            ))
    )
}

/// The result column: `PASS`, `FAIL`, or `GAP [k]` for a miss with the k-th known gap of the model, whose
/// reason is printed under the table.
fn result_text(m: &Measurement, gap_number: usize) -> String {
    if m.pass {
        "PASS".into()
    } else if m.known_gap.is_some() {
        format!("GAP [{gap_number}]")
    } else {
        "FAIL".into()
    }
}

/// The last line of the table: how many rows passed, and how many missed for a known gap of the model.
pub fn summary(rows: &[Measurement]) -> String {
    let passed = rows.iter().filter(|m| m.pass).count();
    let gaps = rows.iter().filter(|m| m.is_known_gap_miss()).count();
    let mut line = format!("{passed} of {} cases passed", rows.len());
    if gaps > 0 {
        line.push_str(&format!(
            "; {gaps} known model gap{} (not counted as a failure)",
            if gaps == 1 { "" } else { "s" }
        ));
    }
    line
}

/// The exit code of a run with these rows: [`EXIT_FAILURE`] when a row missed its reference without a known
/// gap of the model, [`EXIT_OK`] otherwise (a known gap is reported, not failed).
pub fn exit_code(rows: &[Measurement]) -> i32 {
    if rows.iter().any(Measurement::is_failure) {
        EXIT_FAILURE
    } else {
        EXIT_OK
    }
}

/// Column widths of the table.
const NUMBER_WIDTH: usize = 12;
const CRITERION_WIDTH: usize = 20;
/// Wide enough for the longest unit, `refinements`.
const UNIT_WIDTH: usize = 11;

/// The table's header line for case names `width` characters wide.
fn header(width: usize) -> String {
    format!(
        "{:<width$}  {:>NUMBER_WIDTH$}  {:<CRITERION_WIDTH$}  {:<UNIT_WIDTH$}  result",
        "case", "measured", "required", "unit"
    )
}

/// One table row.
fn table_row(m: &Measurement, width: usize, gap_number: usize) -> String {
    format!(
        "{:<width$}  {:>NUMBER_WIDTH$}  {:<CRITERION_WIDTH$}  {:<UNIT_WIDTH$}  {}",
        m.case,
        measured_text(m),
        criterion(m),
        m.unit,
        result_text(m, gap_number)
    )
}

/// Prints rows as they arrive, numbering the known gaps it meets.
struct Printer {
    json: bool,
    width: usize,
    gaps: Vec<(String, &'static str)>,
}

impl Printer {
    fn new(json: bool, width: usize) -> Self {
        Self {
            json,
            width,
            gaps: Vec::new(),
        }
    }

    fn start(&self, out: &mut dyn Write) -> std::io::Result<()> {
        if !self.json {
            writeln!(out, "{}", header(self.width))?;
        }
        Ok(())
    }

    fn row(&mut self, m: &Measurement, out: &mut dyn Write) -> std::io::Result<()> {
        if self.json {
            writeln!(out, "{}", json_line(m))?;
        } else {
            if let (false, Some(reason)) = (m.pass, m.known_gap) {
                self.gaps.push((m.case.clone(), reason));
            }
            writeln!(out, "{}", table_row(m, self.width, self.gaps.len()))?;
        }
        out.flush()
    }

    fn finish(&self, rows: &[Measurement], out: &mut dyn Write) -> std::io::Result<()> {
        if !self.json {
            writeln!(out, "{}", summary(rows))?;
            for (k, (case, reason)) in self.gaps.iter().enumerate() {
                writeln!(out, "[{}] {case}: known model gap: {reason}", k + 1)?;
            }
        }
        Ok(())
    }
}

/// Runs the selected cases (the soak runs with `soak`), printing each row as it arrives. Returns the exit
/// code (see [`exit_code`]).
pub fn run(
    filter: Option<&str>,
    quick: bool,
    soak: bool,
    json: bool,
    out: &mut dyn Write,
) -> Result<i32, CliError> {
    let entries = select(filter, soak)?;
    // Soak rows are named after their run with a suffix (`soak/reint` → `soak/reint-memory`).
    let width = entries
        .iter()
        .map(|e| e.name().len() + if soak { 12 } else { 0 })
        .max()
        .unwrap_or(4)
        .max(4);
    let io = |e: std::io::Error| CliError::other(format!("cannot write to stdout: {e}"));
    let mut printer = Printer::new(json, width);
    printer.start(out).map_err(io)?;
    let mut rows = Vec::new();
    for entry in &entries {
        for m in entry.rows(quick) {
            printer.row(&m, out).map_err(io)?;
            rows.push(m);
        }
    }
    printer.finish(&rows, out).map_err(io)?;
    Ok(exit_code(&rows))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes `rows` as the table (or JSON Lines) with the lines under it, as [`run`] prints them;
    /// returns the exit code.
    fn write_rows(rows: &[Measurement], json: bool, out: &mut dyn Write) -> std::io::Result<i32> {
        let width = rows.iter().map(|m| m.case.len()).max().unwrap_or(4).max(4);
        let mut printer = Printer::new(json, width);
        printer.start(out)?;
        for m in rows {
            printer.row(m, out)?;
        }
        printer.finish(rows, out)?;
        Ok(exit_code(rows))
    }

    const GAP: &str = "the model leads the experiment";

    #[test]
    fn json_line_has_documented_keys_in_order() {
        let m = Measurement::within("reint/x", 1.5, 1.0, 0.25, "m");
        let line = json_line(&m);
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["case"], "reint/x");
        assert_eq!(v["measured"], 1.5);
        assert_eq!(v["reference"], 1.0);
        assert_eq!(v["tolerance"], 0.25);
        assert_eq!(v["unit"], "m");
        assert_eq!(v["pass"], false);
        assert_eq!(v["comparison"], "±");
        assert_eq!(v["known_model_gap"], false);
        assert_eq!(v["known_gap_reason"], serde_json::Value::Null);
        let keys = [
            "case",
            "measured",
            "reference",
            "tolerance",
            "unit",
            "pass",
            "comparison",
            "known_model_gap",
            "known_gap_reason",
        ];
        let at: Vec<usize> = keys
            .iter()
            .map(|k| line.find(&format!("\"{k}\":")).unwrap())
            .collect();
        assert!(at.windows(2).all(|w| w[0] < w[1]), "{line}");
    }

    #[test]
    fn json_comparison_and_known_gap() {
        let at_most = Measurement::at_most("a", 16.5, 20.0, "1");
        let at_least = Measurement::at_least("b", 16.5, 3.0, "1").with_known_gap(GAP);
        let parse =
            |m: &Measurement| -> serde_json::Value { serde_json::from_str(&json_line(m)).unwrap() };
        assert_eq!(parse(&at_most)["comparison"], "<=");
        assert_eq!(parse(&at_least)["comparison"], ">=");
        assert_eq!(parse(&at_least)["known_model_gap"], true);
        assert_eq!(parse(&at_least)["known_gap_reason"], GAP);
        let nan = Measurement::not_measured("soak/x-memory", 2.0, "MiB");
        assert_eq!(parse(&nan)["measured"], serde_json::Value::Null);
        assert_eq!(parse(&nan)["pass"], true);
    }

    #[test]
    fn criterion_says_which_way_the_comparison_goes() {
        assert_eq!(
            criterion(&Measurement::at_most("a", 1.0, 0.01, "1")),
            "≤ 0.01"
        );
        assert_eq!(
            criterion(&Measurement::at_least("a", 16.5, 3.0, "1")),
            "≥ 3"
        );
        assert_eq!(
            criterion(&Measurement::within("a", 0.15, 0.1533, 0.0383, "1/m")),
            "0.1533 ± 0.0383"
        );
        assert_eq!(
            criterion(&Measurement::within("a", 0.0, 0.0, 1e-5, "1")),
            "0 ± 1.000e-5"
        );
    }

    #[test]
    fn known_gap_is_reported_but_does_not_fail_the_run() {
        let pass = Measurement::at_most("flip/ok", 0.01, 0.02, "1");
        let gap = Measurement::at_most("flip/front", 0.207, 0.1, "1").with_known_gap(GAP);
        let mut out = Vec::new();
        assert_eq!(
            write_rows(&[pass.clone(), gap.clone()], false, &mut out).unwrap(),
            EXIT_OK
        );
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("GAP [1]"), "{text}");
        assert!(
            text.contains("1 of 2 cases passed; 1 known model gap"),
            "{text}"
        );
        assert!(
            text.contains(&format!("[1] flip/front: known model gap: {GAP}")),
            "{text}"
        );

        let fail = Measurement::at_least("vpm/bad", 1.0, 3.0, "1");
        let mut out = Vec::new();
        assert_eq!(
            write_rows(&[pass, gap, fail], false, &mut out).unwrap(),
            EXIT_FAILURE
        );
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("FAIL"), "{text}");
        assert!(
            text.contains("1 of 3 cases passed; 1 known model gap"),
            "{text}"
        );
    }

    #[test]
    fn a_known_gap_that_passes_is_a_pass() {
        let m = Measurement::at_most("flip/front", 0.05, 0.1, "1").with_known_gap(GAP);
        assert!(!m.is_known_gap_miss());
        assert_eq!(summary(std::slice::from_ref(&m)), "1 of 1 cases passed");
        assert_eq!(exit_code(&[m]), EXIT_OK);
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
        for soak in [false, true] {
            let e = select(Some("no-such-case-anywhere"), soak).unwrap_err();
            assert_eq!(e.exit_code(), crate::error::EXIT_BAD_INPUT);
        }
    }

    #[test]
    fn soak_runs_are_apart_from_the_cases() {
        let soak = select(None, true).unwrap();
        assert!(soak.iter().all(|e| matches!(e, Entry::Soak(_))));
        assert!(soak.iter().all(|e| e.name().starts_with("soak/")));
        let cases = select(None, false).unwrap();
        assert!(cases.iter().all(|e| !e.name().starts_with("soak/")));
    }
}
