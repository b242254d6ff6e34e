//! Values across the border: Python objects into scene values (TOML), and the program's JSON lines (step
//! records, validation and benchmark rows) into Python dicts and lists.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use toml_edit::{Array, ArrayOfTables, DocumentMut, InlineTable, Item, Table, Value};

/// A Python value as a scene value: `bool`, `int`, `float`, `str`, lists and tuples as arrays, dicts as
/// inline tables; NumPy scalars and arrays through their `int`, `float` or `tolist()`.
pub fn toml_value(obj: &Bound<'_, PyAny>) -> PyResult<Value> {
    if let Ok(b) = obj.cast::<PyBool>() {
        return Ok(Value::from(b.is_true()));
    }
    if obj.is_instance_of::<PyInt>() {
        return Ok(Value::from(obj.extract::<i64>()?));
    }
    if obj.is_instance_of::<PyFloat>() {
        return Ok(Value::from(obj.extract::<f64>()?));
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(Value::from(s.to_cow()?.as_ref()));
    }
    if let Ok(d) = obj.cast::<PyDict>() {
        let mut table = InlineTable::new();
        for (k, v) in d.iter() {
            table.insert(&key_text(&k)?, toml_value(&v)?);
        }
        return Ok(Value::InlineTable(table));
    }
    if obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>() {
        let mut array = Array::new();
        for v in obj.try_iter()? {
            array.push(toml_value(&v?)?);
        }
        return Ok(Value::Array(array));
    }
    // NumPy: arrays (and anything else with `tolist`) as their nested lists, scalars as int or float.
    if obj.hasattr("tolist")? {
        let list = obj.call_method0("tolist")?;
        if !list.is(obj) {
            return toml_value(&list);
        }
    }
    if obj.hasattr("__index__")? {
        return Ok(Value::from(obj.extract::<i64>()?));
    }
    if obj.hasattr("__float__")? {
        return Ok(Value::from(obj.extract::<f64>()?));
    }
    Err(PyTypeError::new_err(format!(
        "a scene value is a bool, int, float, str, list or dict, not {}",
        obj.get_type().name()?
    )))
}

/// A dict key as a TOML key.
fn key_text(k: &Bound<'_, PyAny>) -> PyResult<String> {
    k.cast::<PyString>()
        .map_err(|_| PyTypeError::new_err(format!("scene keys are strings, not {k}")))?
        .to_cow()
        .map(|c| c.into_owned())
}

/// A dict as scene text: nested dicts become tables (`[reint]`), lists of dicts arrays of tables
/// (`[[region]]`), everything else a value.
pub fn toml_document(dict: &Bound<'_, PyDict>) -> PyResult<String> {
    let mut doc = DocumentMut::new();
    fill_table(doc.as_table_mut(), dict)?;
    Ok(doc.to_string())
}

fn fill_table(table: &mut Table, dict: &Bound<'_, PyDict>) -> PyResult<()> {
    for (k, v) in dict.iter() {
        let key = key_text(&k)?;
        let item = if let Ok(d) = v.cast::<PyDict>() {
            let mut t = Table::new();
            fill_table(&mut t, d)?;
            Item::Table(t)
        } else if let Some(tables) = list_of_dicts(&v)? {
            let mut array = ArrayOfTables::new();
            for d in tables {
                let mut t = Table::new();
                fill_table(&mut t, &d)?;
                array.push(t);
            }
            Item::ArrayOfTables(array)
        } else {
            Item::Value(toml_value(&v)?)
        };
        table.insert(&key, item);
    }
    Ok(())
}

/// The dicts of a non-empty list or tuple holding only dicts.
fn list_of_dicts<'py>(v: &Bound<'py, PyAny>) -> PyResult<Option<Vec<Bound<'py, PyDict>>>> {
    if !(v.is_instance_of::<PyList>() || v.is_instance_of::<PyTuple>()) {
        return Ok(None);
    }
    let mut dicts = Vec::new();
    for item in v.try_iter()? {
        match item?.cast_into::<PyDict>() {
            Ok(d) => dicts.push(d),
            Err(_) => return Ok(None),
        }
    }
    Ok((!dicts.is_empty()).then_some(dicts))
}

/// A JSON value as Python: objects as dicts in their key order, integers as `int`, other numbers as
/// `float`, `null` as `None`.
pub fn json_to_py<'py>(py: Python<'py>, v: &serde_json::Value) -> PyResult<Bound<'py, PyAny>> {
    use serde_json::Value as J;
    Ok(match v {
        J::Null => py.None().into_bound(py),
        J::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        J::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => i.into_pyobject(py)?.into_any(),
            (None, Some(u)) => u.into_pyobject(py)?.into_any(),
            _ => n.as_f64().unwrap_or(f64::NAN).into_pyobject(py)?.into_any(),
        },
        J::String(s) => PyString::new(py, s).into_any(),
        J::Array(a) => {
            let items = a
                .iter()
                .map(|x| json_to_py(py, x))
                .collect::<PyResult<Vec<_>>>()?;
            PyList::new(py, items)?.into_any()
        }
        J::Object(m) => {
            let d = PyDict::new(py);
            for (k, x) in m {
                d.set_item(k, json_to_py(py, x)?)?;
            }
            d.into_any()
        }
    })
}

/// One JSON line of the program (a `stats.jsonl` record, a validation or benchmark row) as a dict.
pub fn json_line_to_py<'py>(py: Python<'py>, line: &str) -> PyResult<Bound<'py, PyAny>> {
    let value: serde_json::Value = serde_json::from_str(line).map_err(|e| {
        pyo3::exceptions::PyRuntimeError::new_err(format!("an unreadable record {line:?}: {e}"))
    })?;
    json_to_py(py, &value)
}

/// Every JSON line of a program's output (lines that are not JSON objects, such as a table's summary,
/// are left out).
pub fn json_lines_to_py<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyList>> {
    let rows = text
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| json_line_to_py(py, l))
        .collect::<PyResult<Vec<_>>>()?;
    PyList::new(py, rows)
}
