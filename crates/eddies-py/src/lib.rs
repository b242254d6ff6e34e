//! eddies from Python: the `eddies` module (PyO3, built into an abi3 wheel by maturin; see docs/python.md).
//!
//! The module follows the library and the scene format: [`scene::Scene`] is a scene file with its
//! overrides, loaded and checked by the CLI's loader; [`simulation::Simulation`] is its simulation, stepped
//! as `eddies run` steps it, with fields and particles as NumPy arrays; [`tables`] runs the validation and
//! benchmark tables; [`errors`] maps the CLI's errors onto exceptions. The GIL is released while the
//! simulation works.

mod convert;
mod errors;
mod scene;
mod simulation;
mod tables;

use pyo3::prelude::*;

/// Fluid simulation: reintegration tracking, PIC/FLIP/APIC liquids and vortex particles.
#[pymodule(name = "eddies")]
fn eddies_module(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<scene::Scene>()?;
    m.add_class::<simulation::Simulation>()?;
    m.add_function(wrap_pyfunction!(tables::scenes, m)?)?;
    m.add_function(wrap_pyfunction!(tables::validate, m)?)?;
    m.add_function(wrap_pyfunction!(tables::bench, m)?)?;
    m.add("Error", py.get_type::<errors::Error>())?;
    m.add("SceneError", py.get_type::<errors::SceneError>())?;
    m.add("DivergedError", py.get_type::<errors::DivergedError>())?;
    Ok(())
}
