//! The interface every method offers to drivers (the CLI, a game loop, the validation suite): the
//! [`Simulation`] trait, the [`Description`] a method gives of itself, and the errors a step can end in.
//!
//! A method implements [`Simulation::advance`], its own part of a step; [`Simulation::step`] wraps it once
//! for every method: it checks the time step, times the stages and assembles the [`StepRecord`].

use std::time::Instant;

use crate::check::Invalid;
use crate::checkpoint::{SavedState, StateMismatch};
use crate::diag::{Clamp, Quantity, StageTimer, StepRecord};
use crate::linsolve::SolveError;
use crate::shape::Shape;

/// A grid field copied out of a simulation for output: `shape` is `[ny, nx]` in 2D and `[nz, ny, nx]` in 3D
/// (C order, x fastest), values in the field's SI unit.
#[derive(Clone, Debug, PartialEq)]
pub struct Field {
    /// Array shape, slowest axis first.
    pub shape: Vec<usize>,
    /// Values, x fastest.
    pub data: Vec<f32>,
    /// Whether the field has a meaningful sign (use a diverging colour map).
    pub signed: bool,
}

/// What lies beyond the domain's faces, for every method on a fixed domain.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "kebab-case"))]
pub enum Boundary {
    /// Solid walls, free slip along them: nothing flows through. Reintegration tracking reflects what
    /// crosses a wall and pushes on the fluid with a mirror image of it; FLIP lets no flow through the outer
    /// faces.
    #[default]
    Closed,
    /// Open: what leaves the domain is gone (counted as outflow in the diagnostics); FLIP's pressure is zero
    /// beyond it.
    Open,
}

/// A drain: every step the method removes the fraction `rate · dt` of what lies inside `shape` (all of it
/// when `rate · dt ≥ 1`): reintegration tracking of each cell's mass, FLIP each particle with that
/// probability.
#[derive(Clone, Debug, PartialEq)]
pub struct Sink {
    /// Where fluid leaves.
    pub shape: Shape,
    /// Removal rate (1/s).
    pub rate: f64,
}

/// How a picture of a method's state is made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameSource {
    /// From its grid fields: a slice or a projection of the chosen field (reint, flip).
    Grid,
    /// From its particles, splatted into the picture's pixels (vpm: tracers, vortons, or a grid field's
    /// points).
    Particles,
}

/// What a method is and what it offers, so that drivers treat every method alike: the runner, the renderer
/// and the memory check read this instead of matching on the method.
#[derive(Clone, Debug, PartialEq)]
pub struct Description {
    /// The method's name in scene files: `reint`, `flip` or `vpm`.
    pub method: &'static str,
    /// Names of the grid fields [`Simulation::field`] returns.
    pub fields: Vec<&'static str>,
    /// Names of the per-particle quantities [`Simulation::particle_values`] returns.
    pub particle_values: Vec<&'static str>,
    /// Names of the stages a [`StepRecord`] can time, in the order they run.
    pub stages: &'static [&'static str],
    /// The fields worth writing as arrays with every frame, besides the particle positions.
    pub array_fields: &'static [&'static str],
    /// How pictures of the state are made.
    pub picture: FrameSource,
    /// What pictures show unless told otherwise: a field of [`Description::fields`], or with
    /// [`FrameSource::Particles`] the particles' own `tracers`.
    pub default_view: &'static str,
}

/// Why a step, or the construction of a simulation, failed.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
#[non_exhaustive]
pub enum SimError {
    /// The state holds NaN or Inf, or a speed beyond the method's limit.
    #[error("simulation diverged in stage `{stage}` at step {step}: {detail}")]
    Diverged {
        /// The stage that produced the first non-finite value, as far as the method can tell.
        stage: &'static str,
        /// The step that failed (the first step is 1).
        step: u64,
        /// What was found.
        detail: String,
    },
    /// A linear solve inside a stage failed (no convergence, a breakdown, a non-finite right-hand side).
    #[error("simulation diverged in stage `{stage}` at step {step}: {source}")]
    SolveFailed {
        /// The stage whose solve failed.
        stage: &'static str,
        /// The step that failed (the first step is 1).
        step: u64,
        /// The solver's report.
        source: SolveError,
    },
    /// A parameter out of range, named by its key (e.g. `params.kernel_radius`).
    #[error("{0}")]
    InvalidParameter(#[from] Invalid),
    /// An input the method cannot work with (a time step, a resolution, a substance index).
    #[error("{0}")]
    InvalidInput(String),
    /// The device a backend runs on failed (lost, out of memory) at or after `step`: the state since the
    /// last read-back is gone.
    #[error("the device failed at step {step}: {detail}")]
    Device {
        /// The last step submitted.
        step: u64,
        /// What the device reported.
        detail: String,
    },
}

impl SimError {
    /// The error of a failed solve in `stage` of `step`: a device's own failure as [`SimError::Device`], any
    /// other as [`SimError::SolveFailed`].
    pub fn solve_failed(stage: &'static str, step: u64, source: SolveError) -> Self {
        match source {
            SolveError::Device(detail) => SimError::Device { step, detail },
            source => SimError::SolveFailed {
                stage,
                step,
                source,
            },
        }
    }
}

impl From<StateMismatch> for SimError {
    fn from(e: StateMismatch) -> Self {
        Self::InvalidInput(e.0)
    }
}

impl SimError {
    /// Whether the simulation blew up (as opposed to being given bad input).
    pub fn is_divergence(&self) -> bool {
        matches!(self, Self::Diverged { .. } | Self::SolveFailed { .. })
    }
}

/// What a method's [`Simulation::advance`] reports besides its stage times: the record's method part.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Advance {
    /// Substeps taken inside the step (1 where the method does not substep).
    pub substeps: u32,
    /// Method quantities by name: every method gives `kinetic_energy` (J) and `max_speed` (m/s).
    pub quantities: Vec<(&'static str, Quantity)>,
    /// Values held at a limit in this step (see [`StepRecord::clamps`]).
    pub clamps: Vec<Clamp>,
}

/// A running simulation of any method, as a driver sees it.
pub trait Simulation: Send {
    /// What the method is and offers.
    fn describe(&self) -> Description;
    /// 2 or 3.
    fn dim(&self) -> usize;
    /// Cells per axis `[nx, ny, nz]` (`nz = 1` in 2D).
    fn resolution(&self) -> [usize; 3];
    /// Edge length of a cell (m).
    fn cell_size(&self) -> f64;
    /// Lower corner of the grid that [`Simulation::field`] samples (m): the domain's origin for methods on
    /// a fixed grid, the fitted grid's corner for methods whose grid follows the particles.
    fn grid_origin(&self) -> [f64; 3] {
        [0.0; 3]
    }
    /// Simulated time (s).
    fn time(&self) -> f64;
    /// Steps taken.
    fn steps(&self) -> u64;
    /// Largest time step (s) that keeps the method's CFL number at or below `cfl`.
    fn max_dt(&self, cfl: f64) -> f64;
    /// The method's part of a step: advances the state by `dt` seconds (known to be finite and positive),
    /// counts the step and the simulated time, and times each stage on `timer`. Drivers call
    /// [`Simulation::step`].
    fn advance(&mut self, dt: f64, timer: &mut StageTimer) -> Result<Advance, SimError>;
    /// Advances by `dt` seconds and returns the step's record. Every method shares this: the time step is
    /// checked, the whole step and each stage timed (never negative), the record assembled.
    fn step(&mut self, dt: f64) -> Result<StepRecord, SimError> {
        if !(dt.is_finite() && dt > 0.0) {
            return Err(SimError::InvalidInput(format!(
                "time step {dt} s: must be positive"
            )));
        }
        let start = Instant::now();
        let mut timer = StageTimer::new();
        let Advance {
            substeps,
            quantities,
            clamps,
        } = self.advance(dt, &mut timer)?;
        Ok(StepRecord {
            step: self.steps(),
            time: self.time(),
            dt,
            substeps,
            wall_ms: start.elapsed().as_secs_f64() * 1e3,
            stage_ms: timer.into_stages(),
            quantities,
            clamps,
        })
    }
    /// Fills in the quantities and clamps of steps whose diagnostics a device computes and reads back later:
    /// the GPU backend returns them empty from [`Simulation::step`] and reads them, with the state, once per
    /// output frame. `records` are the steps since the last call, in order. A divergence found in them is
    /// reported here. Methods that measure within the step have nothing to do.
    fn complete_records(&mut self, records: &mut [StepRecord]) -> Result<(), SimError> {
        let _ = records;
        Ok(())
    }
    /// Whether [`Simulation::complete_records`] fills in the quantities and clamps of the steps, which
    /// [`Simulation::step`] then returns incomplete (the default, and what a driver must assume). `false`: the
    /// records are complete when a step returns them, and `complete_records` only brings back the state
    /// that the accessors read (the particles of a FLIP simulation left on the device between frames), so a
    /// driver that reads nothing between steps may put the call off until it does.
    fn completes_records_later(&self) -> bool {
        true
    }

    /// Names of the grid fields [`Simulation::field`] can return.
    fn field_names(&self) -> Vec<&'static str> {
        self.describe().fields
    }
    /// A grid field by name, or `None` for an unknown name.
    fn field(&self, name: &str) -> Option<Field>;
    /// Particle positions (m), `dim` values per particle.
    fn particle_positions(&self) -> Vec<f32>;
    /// Positions (m) of passive tracer particles, `dim` values per tracer; empty when the method has none.
    fn tracer_positions(&self) -> Vec<f32> {
        Vec::new()
    }
    /// A per-particle quantity by name (see [`Description::particle_values`]), one value per particle of
    /// [`Simulation::particle_positions`], or `None` for a name the method does not offer.
    fn particle_values(&self, name: &str) -> Option<Vec<f32>> {
        let _ = name;
        None
    }
    /// Colours (linear RGB, 0–1) of the substances, for frames coloured by substance; empty when the method
    /// has no substances.
    fn substance_colors(&self) -> Vec<[f32; 3]> {
        Vec::new()
    }
    /// Memory held by the state and scratch buffers (bytes).
    fn memory_bytes(&self) -> usize;

    /// Adds `velocity` (m/s, `dim` components) to the fluid within `radius` (m) of `center` (m, `dim`
    /// components), weighted by the smooth falloff `(1 − (d/radius)²)²`: a push from a mouse or a game event,
    /// taking effect from the next step. Methods that cannot take one say so with
    /// [`SimError::InvalidInput`]; so does a `center` or `velocity` of the wrong length.
    fn apply_impulse(
        &mut self,
        center: &[f64],
        radius: f64,
        velocity: &[f64],
    ) -> Result<(), SimError> {
        let _ = (center, radius, velocity);
        Err(SimError::InvalidInput(format!(
            "{} does not take impulses",
            self.describe().method
        )))
    }

    /// The evolving state (see [`crate::checkpoint`]): everything a simulation built from the same scene
    /// needs, after [`Simulation::restore_state`], to continue bit-identically to this one. Methods that
    /// cannot save their state say so.
    fn save_state(&self) -> Result<SavedState, SimError> {
        Err(SimError::InvalidInput(format!(
            "{} cannot save its state",
            self.describe().method
        )))
    }
    /// Continues from `state`, saved by [`Simulation::save_state`] of a simulation built from the same
    /// scene. A state that does not fit (another method, grid or particle layout) is an
    /// [`SimError::InvalidInput`] naming the array, and leaves the simulation as it was.
    fn restore_state(&mut self, state: &SavedState) -> Result<(), SimError> {
        let _ = state;
        Err(SimError::InvalidInput(format!(
            "{} cannot restore a saved state",
            self.describe().method
        )))
    }
}

/// `center` and `velocity` of [`Simulation::apply_impulse`] as `D`-vectors, or the error that names the one
/// of the wrong length.
pub fn impulse_vectors<const D: usize>(
    center: &[f64],
    velocity: &[f64],
) -> Result<([f64; D], [f64; D]), SimError> {
    let vector = |name: &str, v: &[f64]| -> Result<[f64; D], SimError> {
        v.try_into().map_err(|_| {
            SimError::InvalidInput(format!(
                "impulse {name}: {} components for a {D}D simulation",
                v.len()
            ))
        })
    };
    Ok((vector("centre", center)?, vector("velocity", velocity)?))
}

/// The resume checks every method's tests share: a run continued from a checkpoint against the run that was
/// not interrupted, bit for bit.
#[cfg(test)]
pub(crate) mod testing {
    use crate::checkpoint::{Checkpoint, SavedState, StateArray};
    use crate::{Simulation, StepRecord};

    /// `n` steps, each of the time step `max_dt(cfl)` picks.
    pub fn run(sim: &mut dyn Simulation, n: usize, cfl: f64) -> Vec<StepRecord> {
        (0..n)
            .map(|_| {
                let dt = sim.max_dt(cfl);
                sim.step(dt).expect("a step")
            })
            .collect()
    }

    /// The state's file bytes (a state holding NaN is not `==` itself; its bytes are).
    pub fn bytes(state: &SavedState) -> Vec<u8> {
        Checkpoint {
            meta: Vec::new(),
            state: state.clone(),
        }
        .encode()
    }

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    /// Every output of `a` and `b` the same, bit for bit: time, steps, the next time step, every field,
    /// particle position and value, tracer positions.
    pub fn assert_same(a: &dyn Simulation, b: &dyn Simulation) {
        assert_eq!(a.steps(), b.steps());
        assert_eq!(a.time().to_bits(), b.time().to_bits(), "time");
        for cfl in [0.5, 1.0, 2.0] {
            assert_eq!(
                a.max_dt(cfl).to_bits(),
                b.max_dt(cfl).to_bits(),
                "max_dt({cfl})"
            );
        }
        let d = a.describe();
        assert_eq!(d, b.describe());
        for name in &d.fields {
            match (a.field(name), b.field(name)) {
                (Some(x), Some(y)) => {
                    assert_eq!((&x.shape, x.signed), (&y.shape, y.signed), "field {name}");
                    assert!(bits(&x.data) == bits(&y.data), "field {name} differs");
                }
                (x, y) => assert_eq!(x.is_some(), y.is_some(), "field {name}"),
            }
        }
        assert!(
            bits(&a.particle_positions()) == bits(&b.particle_positions()),
            "particle positions differ"
        );
        assert!(
            bits(&a.tracer_positions()) == bits(&b.tracer_positions()),
            "tracer positions differ"
        );
        for name in &d.particle_values {
            let (x, y) = (a.particle_values(name), b.particle_values(name));
            assert_eq!(
                x.as_deref().map(bits),
                y.as_deref().map(bits),
                "particle value {name}"
            );
        }
    }

    /// The records of two runs the same but for their wall times: step, time, time step, substeps, every
    /// quantity (their `Debug` text, which spells every bit of a float) and clamps.
    pub fn assert_same_records(a: &[StepRecord], b: &[StepRecord]) {
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(b) {
            assert_eq!((x.step, x.substeps), (y.step, y.substeps));
            assert_eq!(
                x.time.to_bits(),
                y.time.to_bits(),
                "time of step {}",
                x.step
            );
            assert_eq!(x.dt.to_bits(), y.dt.to_bits(), "dt of step {}", x.step);
            assert_eq!(
                format!("{:?}", x.quantities),
                format!("{:?}", y.quantities),
                "step {}",
                x.step
            );
            assert_eq!(x.clamps, y.clamps, "clamps of step {}", x.step);
        }
    }

    /// Builds `a`, runs it `k` steps, saves its state through a checkpoint file and runs it `n` more; builds
    /// `b`, restores the state and runs it `n` steps, each of the time step its own `max_dt(cfl)` picks,
    /// which must be `a`'s. Checks the records and every output, and returns both for the method's own
    /// comparisons.
    pub fn check_resume<S: Simulation>(
        build: impl Fn() -> S,
        k: usize,
        n: usize,
        cfl: f64,
    ) -> (S, S) {
        let mut a = build();
        run(&mut a, k, cfl);
        let saved = a.save_state().expect("a state");
        let file = bytes(&saved);
        let state = Checkpoint::decode(&file).expect("a checkpoint").state;
        assert_eq!(bytes(&state), file, "the file round trip");
        let ra = run(&mut a, n, cfl);
        let mut b = build();
        b.restore_state(&state).expect("the state fits");
        // The outputs are readable at once (a driver writes a frame on resuming), whatever the particle
        // count was before.
        for name in b.describe().fields {
            let _ = b.field(name);
        }
        let rb = run(&mut b, n, cfl);
        assert_same_records(&ra, &rb);
        assert_same(&a, &b);
        (a, b)
    }

    /// A hash of what a run shows: its records but for wall times, and every output of the simulation.
    fn fingerprint(sim: &dyn Simulation, records: &[StepRecord]) -> u32 {
        let mut h = crc32fast::Hasher::new();
        for r in records {
            let text = format!(
                "{} {} {} {} {:?} {:?}",
                r.step, r.time, r.dt, r.substeps, r.quantities, r.clamps
            );
            h.update(text.as_bytes());
        }
        let mut floats = |v: &[f32]| v.iter().for_each(|x| h.update(&x.to_le_bytes()));
        floats(&sim.particle_positions());
        floats(&sim.tracer_positions());
        let d = sim.describe();
        for name in &d.fields {
            floats(&sim.field(name).map(|f| f.data).unwrap_or_default());
        }
        for name in &d.particle_values {
            floats(&sim.particle_values(name).unwrap_or_default());
        }
        for x in [sim.max_dt(1.0), sim.time()] {
            h.update(&x.to_le_bytes());
        }
        h.finalize()
    }

    /// `array` with every value changed: floats by 1% and 10⁻³ (a zero, a vorticity at rest, moves too),
    /// integers by one down (zero up).
    fn perturbed(array: &StateArray) -> StateArray {
        let mut a = array.clone();
        match &mut a {
            StateArray::F32(v) => v.iter_mut().for_each(|x| *x = *x * 1.01 + 1e-3),
            StateArray::F64(v) => v.iter_mut().for_each(|x| *x = *x * 1.01 + 1e-3),
            StateArray::U32(v) => v
                .iter_mut()
                .for_each(|x| *x = x.checked_sub(1).unwrap_or(1)),
            StateArray::U64(v) => v
                .iter_mut()
                .for_each(|x| *x = x.checked_sub(1).unwrap_or(1)),
            StateArray::U8(v) => v
                .iter_mut()
                .for_each(|x| *x = x.checked_sub(1).unwrap_or(1)),
        }
        a
    }

    /// Every array that `build`'s scene saves after `k` steps is read by the `n` steps that follow: restored
    /// with another value instead (what a fresh simulation holds, as if the array had not been saved, or where
    /// that is the same or of another length, every value changed), the run differs from the uninterrupted one
    /// (or the state is refused, or the run fails). So the resume tests would catch a restore that skips it.
    /// `unread` names the arrays that the scene's run does not read (checked with another scene).
    pub fn assert_every_array_is_read<S: Simulation>(
        build: impl Fn() -> S,
        k: usize,
        n: usize,
        cfl: f64,
        unread: &[&str],
    ) {
        let mut a = build();
        run(&mut a, k, cfl);
        let saved = a.save_state().expect("a state");
        let records = run(&mut a, n, cfl);
        let want = fingerprint(&a, &records);
        let fresh = build().save_state().expect("a state");
        for (i, (name, array)) in saved.arrays.iter().enumerate() {
            // An empty array holds nothing to forget (its length is checked by the refusal tests).
            if array.is_empty() || unread.contains(&name.as_str()) {
                continue;
            }
            let unsaved = fresh.array(name).ok().filter(|f| {
                f.len() == array.len() && {
                    let one = |a: &StateArray| {
                        bytes(&SavedState {
                            arrays: vec![(String::new(), a.clone())],
                        })
                    };
                    one(f) != one(array)
                }
            });
            let mut forged = saved.clone();
            forged.arrays[i].1 = unsaved.cloned().unwrap_or_else(|| perturbed(array));
            let mut b = build();
            let bites = b.restore_state(&forged).is_err() || {
                let mut records = Vec::new();
                let mut failed = false;
                for _ in 0..n {
                    match b.step(b.max_dt(cfl)) {
                        Ok(r) => records.push(r),
                        Err(_) => {
                            failed = true;
                            break;
                        }
                    }
                }
                failed || fingerprint(&b, &records) != want
            };
            assert!(
                bites,
                "`{name}` changes nothing when it is not restored: it need not be saved"
            );
        }
    }

    /// `sim` refuses `state` with an error that contains `names`, and is left as it was.
    pub fn assert_refused<S: Simulation>(sim: &mut S, state: &SavedState, names: &str) {
        let before = bytes(&sim.save_state().expect("a state"));
        let err = sim
            .restore_state(state)
            .expect_err("a state that does not fit");
        assert!(err.to_string().contains(names), "{err}");
        assert!(matches!(err, crate::SimError::InvalidInput(_)));
        assert!(
            bytes(&sim.save_state().expect("a state")) == before,
            "changed by a refused state"
        );
    }
}
