//! `eddies.Scene`: scene text (a file, a built-in scene, a string or a dict) with its overrides, loaded and
//! checked by the program's own loader, so that Python sees the scene format and its errors exactly as the
//! command line does.

use eddies_cli::keypath::KeyPath;
use eddies_cli::load::{self, Loaded, Override, SceneSource};
use eddies_cli::output::scene_toml;
use eddies_cli::runner;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::convert::{json_to_py, toml_document, toml_value};
use crate::errors::{cli_error, scene_error};

/// A scene: its text, the values set on it, and the resolved, checked scene they make.
#[pyclass(module = "eddies", frozen)]
pub struct Scene {
    pub(crate) state: std::sync::Mutex<SceneState>,
}

/// What a [`Scene`] holds (behind its lock: `set` changes it).
#[derive(Clone)]
pub(crate) struct SceneState {
    pub src: SceneSource,
    pub overrides: Vec<Override>,
    pub loaded: Loaded,
}

impl Scene {
    fn from_source(py: Python<'_>, src: SceneSource) -> PyResult<Self> {
        let loaded = load::load(&src, &[]).map_err(|e| scene_error(py, &e))?;
        Ok(Self::new(SceneState {
            src,
            overrides: Vec::new(),
            loaded,
        }))
    }

    pub(crate) fn new(state: SceneState) -> Self {
        Self {
            state: std::sync::Mutex::new(state),
        }
    }

    /// A copy of what the scene holds now.
    pub(crate) fn snapshot(&self) -> SceneState {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn with<R>(&self, f: impl FnOnce(&SceneState) -> R) -> R {
        f(&self.state.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

#[pymethods]
impl Scene {
    /// A scene file (`.toml`, a path) or a built-in scene by name (`eddies.scenes()` lists them).
    #[staticmethod]
    fn load(py: Python<'_>, source: std::path::PathBuf) -> PyResult<Self> {
        let arg = source.to_string_lossy();
        let src = runner::scene_source(Some(&arg)).map_err(|e| cli_error(py, e))?;
        Self::from_source(py, src)
    }

    /// A scene from TOML text; `name` names its default output folder (`out/NAME`).
    #[staticmethod]
    #[pyo3(signature = (text, name = "scene"))]
    fn from_toml(py: Python<'_>, text: String, name: &str) -> PyResult<Self> {
        Self::from_source(
            py,
            SceneSource {
                label: format!("<{name}>"),
                name: name.to_string(),
                text,
            },
        )
    }

    /// A scene from a dict laid out as the scene file: `{"method": "reint", "domain": {...},
    /// "region": [{...}, ...]}`.
    #[staticmethod]
    #[pyo3(signature = (scene, name = "scene"))]
    fn from_dict(py: Python<'_>, scene: &Bound<'_, PyDict>, name: &str) -> PyResult<Self> {
        Self::from_toml(py, toml_document(scene)?, name)
    }

    /// Sets `key` (dotted, as `--set`: `reint.viscosity`, `region.0.density`) to `value`; the scene is
    /// checked again, and a value it refuses raises `SceneError` and leaves the scene as it was.
    fn set(&self, py: Python<'_>, key: &str, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let origin = format!("Scene.set({key:?}, {})", value.repr()?);
        let path = KeyPath::parse(key.trim()).map_err(|what| {
            scene_error(
                py,
                &load::SceneError {
                    location: origin.clone(),
                    key: key.to_string(),
                    what,
                    allowed: Some("a dotted key such as time.fps or region.0.density".into()),
                    context: Vec::new(),
                },
            )
        })?;
        let ov = Override::flag(path, toml_value(value)?, origin);
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let mut overrides = state.overrides.clone();
        overrides.push(ov);
        let loaded = load::load(&state.src, &overrides).map_err(|e| scene_error(py, &e))?;
        state.overrides = overrides;
        state.loaded = loaded;
        Ok(())
    }

    /// The resolved value of `key` (every default filled in), as Python values; `KeyError` for a key the
    /// resolved scene does not have.
    fn get<'py>(&self, py: Python<'py>, key: &str) -> PyResult<Bound<'py, PyAny>> {
        let text = self.to_toml(py)?;
        let doc: toml::Table = toml::from_str(&text)
            .map_err(|e| pyo3::exceptions::PyRuntimeError::new_err(e.to_string()))?;
        let mut value = toml::Value::Table(doc);
        for part in key.split('.') {
            let next = match &value {
                toml::Value::Table(t) => t.get(part).cloned(),
                toml::Value::Array(a) => part.parse::<usize>().ok().and_then(|i| a.get(i).cloned()),
                _ => None,
            };
            value = next.ok_or_else(|| pyo3::exceptions::PyKeyError::new_err(key.to_string()))?;
        }
        let json = serde_json::to_value(&value)
            .map_err(|e| pyo3::exceptions::PyRuntimeError::new_err(e.to_string()))?;
        json_to_py(py, &json)
    }

    /// The resolved scene as TOML: what `eddies run` writes as `scene.toml`, every default filled in.
    fn to_toml(&self, py: Python<'_>) -> PyResult<String> {
        self.with(|s| {
            let header = format!(
                "Resolved scene \"{}\" (from {}), written by eddies {} (Python).",
                s.src.name,
                s.src.label,
                env!("CARGO_PKG_VERSION")
            );
            scene_toml(&s.loaded.scene, &header).map_err(|e| cli_error(py, e.into()))
        })
    }

    /// The scene's name: the file's stem, the built-in's name, or the `name` given.
    #[getter]
    fn name(&self) -> String {
        self.with(|s| s.src.name.clone())
    }

    /// The method: `reint`, `flip` or `vpm`.
    #[getter]
    fn method(&self) -> &'static str {
        self.with(|s| s.loaded.scene.method.name())
    }

    /// 2 or 3.
    #[getter]
    fn dim(&self) -> usize {
        self.with(|s| s.loaded.scene.dim())
    }

    /// Cells per axis, `[nx, ny]` or `[nx, ny, nz]`.
    #[getter]
    fn resolution(&self) -> Vec<usize> {
        self.with(|s| s.loaded.scene.resolution().to_vec())
    }

    /// The backend the scene asks for: `cpu` or `gpu`.
    #[getter]
    fn backend(&self) -> &'static str {
        self.with(|s| s.loaded.scene.backend.name())
    }

    /// `time.frames`.
    #[getter]
    fn frames(&self) -> i64 {
        self.with(|s| s.loaded.scene.time.frames)
    }

    /// `time.fps`.
    #[getter]
    fn fps(&self) -> f64 {
        self.with(|s| s.loaded.scene.time.fps)
    }

    fn __repr__(&self) -> String {
        self.with(|s| {
            let res: Vec<String> = s
                .loaded
                .scene
                .resolution()
                .iter()
                .map(|n| n.to_string())
                .collect();
            format!(
                "<eddies.Scene {:?}: {} {}D, {} cells, {} overrides>",
                s.src.name,
                s.loaded.scene.method.name(),
                s.loaded.scene.dim(),
                res.join("x"),
                s.overrides.len()
            )
        })
    }
}
