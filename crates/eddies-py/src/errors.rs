//! The program's errors as Python exceptions: every error the CLI reports with exit code 2 (bad input)
//! becomes a [`SceneError`], located like the CLI's message where the scene text is to blame; a divergence
//! a [`DivergedError`]; Ctrl-C during a run `KeyboardInterrupt`; anything else an [`Error`]. The message is
//! the CLI's, with its context lines (the source line and a caret, hints).

use eddies::SimError;
use eddies_cli::error::{CliError, EXIT_BAD_INPUT};
use eddies_cli::load::SceneError as LoadError;
use pyo3::exceptions::{PyException, PyKeyboardInterrupt, PyValueError};
use pyo3::prelude::*;

pyo3::create_exception!(
    eddies,
    Error,
    PyException,
    "The base of every error eddies raises."
);
pyo3::create_exception!(
    eddies,
    SceneError,
    Error,
    "A scene eddies cannot run: a syntax error, an unknown key, a value out of range, a missing scene file.\n\n\
     Attributes: `location` (`FILE:LINE:COL`, or the call that supplied the value), `file`, `line` and `column`\n\
     (None where the error has no place in a file), `key` (the dotted key, or None) and `allowed` (what would\n\
     be accepted, or None)."
);
pyo3::create_exception!(
    eddies,
    DivergedError,
    Error,
    "The simulation blew up: a non-finite value, a runaway speed or a failed linear solve."
);

/// A located scene error, its message as the CLI prints it.
pub fn scene_error(py: Python<'_>, e: &LoadError) -> PyErr {
    let mut message = e.to_string();
    for line in &e.context {
        message.push('\n');
        message.push_str(line);
    }
    let err = SceneError::new_err(message);
    let (file, line, column) = split_location(&e.location);
    let value = err.value(py);
    let set = || -> PyResult<()> {
        value.setattr("location", &e.location)?;
        value.setattr("file", file)?;
        value.setattr("line", line)?;
        value.setattr("column", column)?;
        value.setattr("key", (!e.key.is_empty()).then_some(e.key.as_str()))?;
        value.setattr("allowed", e.allowed.as_deref())?;
        Ok(())
    };
    match set() {
        Ok(()) => err,
        Err(failed) => failed,
    }
}

/// `FILE:LINE:COL` split into its parts; another location (a `Scene.set` call) has no file, line or column.
fn split_location(location: &str) -> (Option<&str>, Option<u32>, Option<u32>) {
    let mut parts = location.rsplitn(3, ':');
    let (col, line, file) = (parts.next(), parts.next(), parts.next());
    match (
        file,
        line.and_then(|l| l.parse().ok()),
        col.and_then(|c| c.parse().ok()),
    ) {
        (Some(f), Some(l), Some(c)) => (Some(f), Some(l), Some(c)),
        _ => (None, None, None),
    }
}

/// A CLI error as the exception of its kind (see the module documentation).
pub fn cli_error(py: Python<'_>, e: CliError) -> PyErr {
    let report = e.report();
    let message = report
        .strip_prefix("error: ")
        .unwrap_or(&report)
        .trim_end()
        .to_string();
    match e {
        CliError::Scene(se) => scene_error(py, &se),
        CliError::Diverged { .. } => DivergedError::new_err(message),
        CliError::Interrupted { .. } => {
            // Python's own handler saw the signal too: take it here, so that one KeyboardInterrupt is
            // raised, ours, which says what was kept.
            let _ = py.check_signals();
            PyKeyboardInterrupt::new_err(message)
        }
        e if e.exit_code() == EXIT_BAD_INPUT => {
            let err = SceneError::new_err(message);
            let value = err.value(py);
            for attr in ["location", "file", "line", "column", "key", "allowed"] {
                if let Err(failed) = value.setattr(attr, py.None()) {
                    return failed;
                }
            }
            err
        }
        _ => Error::new_err(message),
    }
}

/// A simulation's error: a divergence, bad input to a step (`ValueError`), or a failed device.
pub fn sim_error(e: SimError) -> PyErr {
    match e {
        e if e.is_divergence() => DivergedError::new_err(e.to_string()),
        e @ (SimError::InvalidInput(_) | SimError::InvalidParameter(_)) => {
            PyValueError::new_err(e.to_string())
        }
        e => Error::new_err(e.to_string()),
    }
}
