//! The program's tables from Python: the built-in scenes, the validation cases and the benchmarks, each row
//! a dict with the keys of the CLI's `--json` lines.

use eddies_cli::scene::Backend;
use eddies_cli::{bench as bench_table, scenes as builtin, validate as validation};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::convert::json_lines_to_py;
use crate::errors::cli_error;

/// The built-in scenes: a list of dicts with `name` and `description`, as `eddies scenes` lists them.
#[pyfunction]
pub fn scenes(py: Python<'_>) -> PyResult<Bound<'_, PyList>> {
    let rows = PyList::empty(py);
    for s in builtin::BUILTIN {
        let d = PyDict::new(py);
        d.set_item("name", s.name)?;
        d.set_item("description", s.description())?;
        rows.append(d)?;
    }
    Ok(rows)
}

/// Runs the validation cases whose name contains `filter` (all without one; `quick`: shorter runs, looser
/// tolerances) and returns one dict per row, with the keys of `eddies validate --json`: `case`,
/// `measured`, `reference`, `tolerance`, `unit`, `pass`, `comparison`, `known_model_gap`,
/// `known_gap_reason`.
#[pyfunction]
#[pyo3(signature = (filter = None, quick = false, soak = false))]
pub fn validate<'py>(
    py: Python<'py>,
    filter: Option<&str>,
    quick: bool,
    soak: bool,
) -> PyResult<Bound<'py, PyList>> {
    let mut out = Vec::new();
    py.detach(|| validation::run(filter, quick, soak, true, &mut out))
        .map_err(|e| cli_error(py, e))?;
    json_lines_to_py(py, &String::from_utf8_lossy(&out))
}

/// Runs the benchmarks whose name contains `filter` on `backend` (`"cpu"` or `"gpu"`) and returns one dict
/// per row, with the keys of `eddies bench --json`: `bench`, `size`, `metric`, `value`, `unit`,
/// `threads`, `device`.
#[pyfunction]
#[pyo3(signature = (filter = None, quick = false, backend = "cpu"))]
pub fn bench<'py>(
    py: Python<'py>,
    filter: Option<&str>,
    quick: bool,
    backend: &str,
) -> PyResult<Bound<'py, PyList>> {
    let backend = match backend {
        "cpu" => Backend::Cpu,
        "gpu" => Backend::Gpu,
        other => {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "backend {other:?}: \"cpu\" or \"gpu\""
            )))
        }
    };
    let mut out = Vec::new();
    py.detach(|| bench_table::run(filter, quick, true, backend, &mut out))
        .map_err(|e| cli_error(py, e))?;
    json_lines_to_py(py, &String::from_utf8_lossy(&out))
}
