//! `eddies.Simulation`: a scene's simulation, built and stepped as `eddies run` builds and steps it, so that
//! the same scene gives the same bits from Python as from the command line.
//!
//! Every step and run releases the GIL and runs on the simulation's own thread pool. Steps without a time
//! step take the one `eddies run` would take ([`runner::next_step`]), on the frame clock this object keeps.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use eddies::checkpoint::Checkpoint;
use eddies::SimError;
use eddies_cli::error::CliError;
use eddies_cli::interrupt::{Interrupt, Signal};
use eddies_cli::keypath::KeyPath;
use eddies_cli::load::{self, Override, SceneSource};
use eddies_cli::output::checkpoint::Position;
use eddies_cli::output::stats_line;
use eddies_cli::runner;
use eddies_cli::scene::Scene as SceneSpec;
use eddies_cli::{animation, setup};
use numpy::{IntoPyArray, PyArrayDyn, PyArrayMethods};
use pyo3::exceptions::{PyKeyError, PyKeyboardInterrupt, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::convert::json_line_to_py;
use crate::errors::{cli_error, scene_error, sim_error};
use crate::scene::Scene;

/// A running simulation of a scene.
#[pyclass(module = "eddies", frozen)]
pub struct Simulation {
    run: Mutex<Run>,
}

/// The simulation and what steps it like `eddies run`.
struct Run {
    src: SceneSource,
    scene: SceneSpec,
    sim: Box<dyn eddies::Simulation>,
    /// The simulation's threads (shared with the step that runs on them).
    pool: Arc<rayon::ThreadPool>,
    /// The frame clock: frames completed, and the step at which the frame in progress began.
    at: Position,
    /// Whether the simulation holds state that its `complete_records` brings back (a FLIP simulation's
    /// particles, left on the GPU), not yet read for this step: what reads the state reads it first.
    behind: bool,
}

impl Run {
    /// One step of `dt` seconds, or of the time step `eddies run` would take, on the simulation's threads;
    /// its `stats.jsonl` line.
    fn step(&mut self, dt: Option<f64>) -> Result<String, SimError> {
        let pool = Arc::clone(&self.pool);
        pool.install(|| self.step_here(dt))
    }

    /// [`Run::step`] on the current thread pool (the caller is inside `self.pool.install`).
    fn step_here(&mut self, dt: Option<f64>) -> Result<String, SimError> {
        let dt = match dt {
            Some(dt) => dt,
            None => runner::step_across_frames(&self.scene, &*self.sim, &mut self.at)?,
        };
        let mut record = self.sim.step(dt)?;
        // A device backend that measures its diagnostics later has a step from Python read them at once;
        // one whose records are complete brings its state back when something reads it.
        if self.sim.completes_records_later() {
            self.sim
                .complete_records(std::slice::from_mut(&mut record))?;
            self.behind = false;
        } else {
            self.behind = true;
        }
        // A step of the caller's `dt` may pass several frame times.
        self.count_frames();
        Ok(stats_line(&record))
    }

    /// The state as of the last step, for what reads it (see `behind`).
    fn sync(&mut self) -> Result<(), SimError> {
        if self.behind {
            self.sim.complete_records(&mut [])?;
            self.behind = false;
        }
        Ok(())
    }

    /// Counts the frames the simulation's time (or step count) has completed into the frame clock.
    fn count_frames(&mut self) {
        while runner::frame_complete(&self.scene, &*self.sim, self.at) {
            self.at = self.at.next_frame(self.sim.steps());
        }
    }

    /// After a run that stopped part way: the frame clock where the simulation stands. With
    /// `time.steps_per_frame` the frames are counted in steps; otherwise the clock follows the time by itself.
    fn resync(&mut self) {
        let spf = self.scene.time.steps_per_frame.max(0) as u64;
        if let Some(whole) = (self.sim.steps() - self.at.frame_start_step).checked_div(spf) {
            self.at = Position {
                frames_done: self.at.frames_done + whole as usize,
                frame_start_step: self.at.frame_start_step + whole * spf,
            };
        }
        self.count_frames();
    }
}

impl Simulation {
    fn lock(&self) -> MutexGuard<'_, Run> {
        self.run.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The run, its state brought back from the device where the last step left it there ([`Run::sync`]),
    /// for what reads the state.
    fn synced(&self, py: Python<'_>) -> PyResult<MutexGuard<'_, Run>> {
        let mut run = self.lock();
        let here: &mut Run = &mut run;
        py.detach(|| here.sync()).map_err(sim_error)?;
        Ok(run)
    }
}

/// Why [`Simulation::step_frame`] stopped before the frame's end.
enum FrameStop {
    Sim(SimError),
    Signal(Signal),
}

impl From<SimError> for FrameStop {
    fn from(e: SimError) -> Self {
        Self::Sim(e)
    }
}

/// Builds the simulation of a loaded scene on `pool` (with the GIL released by the caller).
fn build(
    src: &SceneSource,
    overrides: &[Override],
    scene: &SceneSpec,
    pool: &rayon::ThreadPool,
) -> Result<(Box<dyn eddies::Simulation>, Vec<String>), CliError> {
    pool.install(|| {
        let panels = runner::panel_scenes(src, overrides, scene)?;
        runner::build_sim(src, scene, &panels)
    })
}

#[pymethods]
impl Simulation {
    /// The simulation of `scene` on `threads` worker threads (None: one per core) and `backend`
    /// (`"cpu"`, `"gpu"`, or None for the scene's own `backend`).
    #[new]
    #[pyo3(signature = (scene, threads = None, backend = None))]
    fn new(
        py: Python<'_>,
        scene: &Scene,
        threads: Option<usize>,
        backend: Option<&str>,
    ) -> PyResult<Self> {
        let mut state = scene.snapshot();
        if let Some(b) = backend {
            let ov = Override::flag(
                KeyPath::root().key("backend"),
                toml_edit::Value::from(b),
                format!("Simulation(backend={b:?})"),
            );
            state.overrides.push(ov);
            state.loaded =
                load::load(&state.src, &state.overrides).map_err(|e| scene_error(py, &e))?;
        }
        setup::check_memory(&state.loaded, setup::available_memory())
            .map_err(|e| scene_error(py, &e))?;
        animation::check_encoder(&state.loaded).map_err(|e| cli_error(py, e))?;
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads.unwrap_or(0))
            .build()
            .map_err(|e| PyValueError::new_err(format!("cannot start {threads:?} threads: {e}")))?;
        let spec = state.loaded.scene.clone();
        let (sim, warnings) = py
            .detach(|| build(&state.src, &state.overrides, &spec, &pool))
            .map_err(|e| cli_error(py, e))?;
        let warn = py.import("warnings")?;
        for w in warnings {
            warn.call_method1("warn", (w,))?;
        }
        Ok(Self {
            run: Mutex::new(Run {
                src: state.src,
                scene: spec,
                sim,
                pool: Arc::new(pool),
                at: Position::default(),
                behind: false,
            }),
        })
    }

    /// Advances one step and returns its record: the keys of a `stats.jsonl` line (`step`, `time`, `dt`,
    /// `substeps`, `wall_ms`, `stage_ms`, then the method's quantities). Without `dt` (seconds), the step
    /// `eddies run` would take: the CFL limit, cut to land on frame times.
    #[pyo3(signature = (dt = None))]
    fn step<'py>(&self, py: Python<'py>, dt: Option<f64>) -> PyResult<Bound<'py, PyAny>> {
        let mut run = self.lock();
        let run = &mut *run;
        let line = py.detach(|| run.step(dt)).map_err(sim_error)?;
        json_line_to_py(py, &line)
    }

    /// Steps to the end of the frame in progress (as `eddies run` steps it) and returns the steps'
    /// records. The frame's steps run in one go on the simulation's threads, without a return to Python
    /// between them; Ctrl-C stops it between two steps and raises `KeyboardInterrupt`.
    fn step_frame<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let mut run = self.lock();
        let run = &mut *run;
        let (lines, result) = py.detach(|| {
            let interrupt = Interrupt::watch();
            let frame = run.at.frames_done;
            let mut lines = Vec::new();
            let pool = Arc::clone(&run.pool);
            let result = pool.install(|| {
                while run.at.frames_done == frame {
                    lines.push(run.step_here(None)?);
                    if let Some(signal) = interrupt.received() {
                        return Err(FrameStop::Signal(signal));
                    }
                }
                Ok(())
            });
            (lines, result)
        });
        let records = PyList::empty(py);
        for line in &lines {
            records.append(json_line_to_py(py, line)?)?;
        }
        match result {
            Ok(()) => Ok(records),
            Err(FrameStop::Sim(e)) => Err(sim_error(e)),
            Err(FrameStop::Signal(signal)) => {
                let _ = py.check_signals();
                Err(PyKeyboardInterrupt::new_err(format!(
                    "interrupted by {} at step {} (t = {:.4} s), in frame {}",
                    signal.name(),
                    run.sim.steps(),
                    run.sim.time(),
                    run.at.frames_done
                )))
            }
        }
    }

    /// Runs on to `frames` frames in all (None: the scene's `time.frames`), writing into `out` (None:
    /// `out/<scene name>`) what `eddies run` writes: frames, `stats.jsonl`, `scene.toml` and the files
    /// `[output]` asks for. `progress`: a progress bar on stderr (None: when stderr is a terminal).
    /// Ctrl-C stops it between two steps, keeps what was written and raises `KeyboardInterrupt`. Returns
    /// what the run did.
    #[pyo3(signature = (frames = None, out = None, progress = None))]
    fn run<'py>(
        &self,
        py: Python<'py>,
        frames: Option<u64>,
        out: Option<PathBuf>,
        progress: Option<bool>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let progress = match progress {
            Some(p) => p,
            None => py
                .import("sys")?
                .getattr("stderr")?
                .call_method0("isatty")?
                .extract()?,
        };
        let mut run = self.lock();
        let run = &mut *run;
        let mut scene = run.scene.clone();
        if let Some(n) = frames {
            scene.time.frames = i64::try_from(n).unwrap_or(i64::MAX);
        }
        let total = scene.time.frames.max(0) as usize;
        if total <= run.at.frames_done {
            return Err(PyValueError::new_err(format!(
                "the simulation has {} frames already and {total} were asked for: run(frames=N) counts \
                 frames in all",
                run.at.frames_done
            )));
        }
        let out = out.unwrap_or_else(|| Path::new("out").join(&run.src.name));
        py.detach(|| run.sync()).map_err(sim_error)?;
        let result = py.detach(|| {
            let Run {
                src, sim, pool, at, ..
            } = run;
            pool.install(|| runner::run_from(src, &scene, sim.as_mut(), *at, out, !progress))
        });
        match result {
            Ok(summary) => {
                run.at = Position {
                    frames_done: summary.frames,
                    frame_start_step: run.sim.steps(),
                };
                let d = PyDict::new(py);
                d.set_item("out", summary.out)?;
                d.set_item("frames", summary.frames)?;
                d.set_item("steps", summary.steps)?;
                d.set_item("time", summary.sim_time)?;
                d.set_item("wall_s", summary.wall.as_secs_f64())?;
                d.set_item("frames_held_s", summary.frames_held.as_secs_f64())?;
                d.set_item("animation", summary.animation)?;
                Ok(d)
            }
            Err(e) => {
                run.resync();
                Err(cli_error(py, e))
            }
        }
    }

    /// A grid field by name (`fields` lists them) as a float32 array of shape `(ny, nx)` or `(nz, ny, nx)`,
    /// C order, in the field's SI unit: the array `output.npy` writes.
    fn field<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
        let mut run = self.synced(py)?;
        let sim = &mut run.sim;
        let field = py.detach(move || sim.field(name)).ok_or_else(|| {
            PyKeyError::new_err(format!(
                "no field {name:?}; this simulation has {}",
                run.sim.field_names().join(", ")
            ))
        })?;
        field.data.into_pyarray(py).reshape(field.shape)
    }

    /// Particle positions (m) as a float32 array of shape `(n, dim)`: the array `output.npy` writes.
    fn particles<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
        let run = self.synced(py)?;
        points(py, run.sim.particle_positions(), run.sim.dim())
    }

    /// Passive tracer positions (m), shape `(n, dim)`; empty where the method has none.
    fn tracers<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
        let run = self.synced(py)?;
        points(py, run.sim.tracer_positions(), run.sim.dim())
    }

    /// A per-particle quantity by name (`particle_values` lists them), one float32 per particle.
    fn particle_values<'py>(
        &self,
        py: Python<'py>,
        name: &str,
    ) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
        let run = self.synced(py)?;
        let values = run.sim.particle_values(name).ok_or_else(|| {
            PyKeyError::new_err(format!(
                "no particle value {name:?}; this simulation has {}",
                run.sim.describe().particle_values.join(", ")
            ))
        })?;
        let n = values.len();
        values.into_pyarray(py).reshape(vec![n])
    }

    /// Pushes the fluid: adds `velocity` (m/s) within `radius` (m) of `center` (m), with the falloff
    /// `(1 − (d/radius)²)²`, from the next step on. Methods that take no impulses raise `ValueError`.
    fn apply_impulse(&self, center: Vec<f64>, radius: f64, velocity: Vec<f64>) -> PyResult<()> {
        let mut run = self.lock();
        run.sync().map_err(sim_error)?;
        run.sim
            .apply_impulse(&center, radius, &velocity)
            .map_err(sim_error)
    }

    /// The CRC-32 of the simulation's saved state, the one its checkpoint file carries: equal for two
    /// simulations exactly when their states are equal bit for bit, but for a one-in-four-billion chance.
    fn checksum(&self, py: Python<'_>) -> PyResult<u32> {
        let run = self.synced(py)?;
        let state = run.sim.save_state().map_err(sim_error)?;
        Ok(py.detach(|| {
            let file = Checkpoint {
                meta: Vec::new(),
                state,
            }
            .encode();
            // The file ends with the CRC-32 of all before it, little-endian.
            let tail: [u8; 4] = file[file.len() - 4..].try_into().unwrap_or_default();
            u32::from_le_bytes(tail)
        }))
    }

    /// The largest time step (s) that keeps the CFL number at `cfl` (None: the scene's `time.cfl`).
    #[pyo3(signature = (cfl = None))]
    fn max_dt(&self, cfl: Option<f64>) -> f64 {
        let run = self.lock();
        run.sim.max_dt(cfl.unwrap_or(run.scene.time.cfl))
    }

    /// Simulated time (s).
    #[getter]
    fn time(&self) -> f64 {
        self.lock().sim.time()
    }

    /// Steps taken.
    #[getter]
    fn steps(&self) -> u64 {
        self.lock().sim.steps()
    }

    /// Frames completed on the frame clock `eddies run` keeps (`time.fps`, `time.steps_per_frame`).
    #[getter]
    fn frames_done(&self) -> usize {
        self.lock().at.frames_done
    }

    /// 2 or 3.
    #[getter]
    fn dim(&self) -> usize {
        self.lock().sim.dim()
    }

    /// Cells per axis, `[nx, ny]` or `[nx, ny, nz]`.
    #[getter]
    fn resolution(&self) -> Vec<usize> {
        let run = self.lock();
        run.sim.resolution()[..run.sim.dim()].to_vec()
    }

    /// The edge of a cell (m).
    #[getter]
    fn cell_size(&self) -> f64 {
        self.lock().sim.cell_size()
    }

    /// The method: `reint`, `flip` or `vpm`.
    #[getter]
    fn method(&self) -> &'static str {
        self.lock().sim.describe().method
    }

    /// The names `field` takes.
    #[getter]
    fn fields(&self) -> Vec<&'static str> {
        self.lock().sim.field_names()
    }

    /// The names `particle_values` takes.
    #[getter]
    fn particle_value_names(&self) -> Vec<&'static str> {
        self.lock().sim.describe().particle_values
    }

    /// The stages a step times, in the order they run (the keys of a record's `stage_ms`).
    #[getter]
    fn stages(&self) -> Vec<&'static str> {
        self.lock().sim.describe().stages.to_vec()
    }

    /// Memory held by the state and its working buffers (bytes).
    #[getter]
    fn memory_bytes(&self) -> usize {
        self.lock().sim.memory_bytes()
    }

    fn __repr__(&self) -> String {
        let run = self.lock();
        format!(
            "<eddies.Simulation {:?}: {} {}D on the {}, step {}, t = {} s>",
            run.src.name,
            run.sim.describe().method,
            run.sim.dim(),
            run.scene.backend.name(),
            run.sim.steps(),
            run.sim.time()
        )
    }
}

/// `dim` values per point as an `(n, dim)` array.
fn points(py: Python<'_>, flat: Vec<f32>, dim: usize) -> PyResult<Bound<'_, PyArrayDyn<f32>>> {
    let n = flat.len() / dim;
    let mut flat = flat;
    flat.truncate(n * dim);
    flat.into_pyarray(py).reshape(vec![n, dim])
}
