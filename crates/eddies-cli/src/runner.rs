//! `eddies run`: load and check a scene, refuse it before anything is written if it is wrong or too large,
//! then step the simulation frame by frame and write the outputs.
//!
//! Time line: frame k (from 0) shows the state after (k + 1) / fps simulated seconds. Each frame is reached
//! either by `steps_per_frame` equal steps, or adaptively by steps of `min(max_dt(cfl), time left)`; when the
//! time left is less than two CFL steps it is split evenly, so that no step is a tiny remainder.

use std::fs::{self, File};
use std::io::{BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use eddies::{SimError, Simulation};
use indicatif::{ProgressBar, ProgressStyle};
use toml_edit::Value;

use crate::error::{CliError, SetupError};
use crate::interrupt::{Interrupt, Signal};
use crate::keypath::KeyPath;
use crate::load::{self, Loaded, Override, SceneError, SceneSource};
use crate::output::{self, frame_name, npy};
use crate::scene::{Backend, Scene};
use crate::{panels, render, scenes, setup};
use eddies_gpu::GpuError;

/// What `eddies run` was asked to do.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// A scene file or built-in name; `None` is the showcase.
    pub scene: Option<String>,
    /// Output folder; `None` is `out/<scene name>`.
    pub out: Option<PathBuf>,
    /// Overrides `time.frames`.
    pub frames: Option<u64>,
    /// `--set KEY=VALUE` arguments, in order.
    pub sets: Vec<String>,
    /// Worker threads (0: one per core).
    pub threads: usize,
    /// Overrides `time.steps_per_frame`.
    pub steps_per_frame: Option<u64>,
    /// Overrides `backend`.
    pub backend: Option<Backend>,
    /// No progress output.
    pub quiet: bool,
}

/// What a finished run did.
#[derive(Clone, Debug)]
pub struct RunSummary {
    /// The output folder.
    pub out: PathBuf,
    /// Frames written.
    pub frames: usize,
    /// Simulation steps taken.
    pub steps: u64,
    /// Simulated time (s).
    pub sim_time: f64,
    /// Wall time of the whole run.
    pub wall: Duration,
}

/// Finds the scene text: an existing file, else a built-in scene, else an error listing the built-ins.
pub fn scene_source(arg: Option<&str>) -> Result<SceneSource, CliError> {
    let builtin_source = |b: &scenes::BuiltinScene| SceneSource {
        label: b.label(),
        name: b.name.to_string(),
        text: b.source.to_string(),
    };
    let Some(arg) = arg else {
        let b = scenes::find(scenes::SHOWCASE)
            .ok_or_else(|| CliError::other("the showcase scene is missing"))?;
        return Ok(builtin_source(b));
    };
    let path = Path::new(arg);
    let looks_like_file =
        arg.ends_with(".toml") || arg.contains(std::path::MAIN_SEPARATOR) || arg.contains('/');
    if path.exists() || looks_like_file {
        let text = fs::read(path).map_err(|e| {
            CliError::input(
                format!("cannot read scene file {arg}: {e}"),
                vec![format!("  built-in scenes: {}", scenes::names())],
            )
        })?;
        let text = String::from_utf8(text).map_err(|e| {
            CliError::input(
                format!("scene file {arg} is not UTF-8 text: {e}"),
                Vec::new(),
            )
        })?;
        let name = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("scene")
            .to_string();
        return Ok(SceneSource {
            label: arg.to_string(),
            name,
            text,
        });
    }
    match scenes::find(arg) {
        Some(b) => Ok(builtin_source(b)),
        None => Err(CliError::input(
            format!("no scene file or built-in scene named {arg}"),
            vec![
                format!("  built-in scenes: {}", scenes::names()),
                "  scene files end in .toml".into(),
            ],
        )),
    }
}

/// The overrides of the command line: `--set`s in order, then `--frames`, `--steps-per-frame` and
/// `--backend`.
pub fn overrides(opts: &RunOptions) -> Result<Vec<Override>, CliError> {
    let mut ovs = opts
        .sets
        .iter()
        .map(|s| Override::parse_set(s))
        .collect::<Result<Vec<_>, _>>()?;
    let int = |n: u64| Value::from(i64::try_from(n).unwrap_or(i64::MAX));
    if let Some(n) = opts.frames {
        ovs.push(Override::flag(
            KeyPath::root().key("time").key("frames"),
            int(n),
            format!("--frames {n}"),
        ));
    }
    if let Some(n) = opts.steps_per_frame {
        let path = KeyPath::root().key("time").key("steps_per_frame");
        ovs.push(Override::flag(
            path,
            int(n),
            format!("--steps-per-frame {n}"),
        ));
    }
    if let Some(b) = opts.backend {
        ovs.push(Override::flag(
            KeyPath::root().key("backend"),
            Value::from(b.name()),
            format!("--backend {}", b.name()),
        ));
    }
    Ok(ovs)
}

/// What `run` has found and checked before it writes anything.
struct Prepared {
    /// The scene text and where it came from.
    src: SceneSource,
    /// The overrides of the command line, which the panels start from.
    overrides: Vec<Override>,
    /// The checked scene.
    loaded: Loaded,
    /// The memory estimate (bytes).
    bytes: f64,
}

/// Everything `run` does before it writes anything: find, load, check, and estimate memory.
fn prepare(opts: &RunOptions) -> Result<Prepared, CliError> {
    let src = scene_source(opts.scene.as_deref())?;
    let overrides = overrides(opts)?;
    let loaded = load::load(&src, &overrides)?;
    let bytes = setup::check_memory(&loaded, setup::available_memory())?;
    Ok(Prepared {
        src,
        overrides,
        loaded,
        bytes,
    })
}

/// Runs a scene; see the module documentation.
pub fn run(opts: &RunOptions) -> Result<RunSummary, CliError> {
    let Prepared {
        src,
        overrides: base,
        loaded,
        bytes,
    } = prepare(opts)?;
    let out = opts
        .out
        .clone()
        .unwrap_or_else(|| Path::new("out").join(&src.name));
    let scene = loaded.scene;
    // Each side-by-side panel is the scene with its own overrides, loaded and checked like the scene.
    let panel_scenes = scene
        .output
        .panels
        .iter()
        .map(|entry| {
            let ovs = panels::overrides(&base, entry)?;
            Ok(load::load(&src, &ovs)?.scene)
        })
        .collect::<Result<Vec<Scene>, SceneError>>()?;
    let bytes = bytes * panel_scenes.len().max(1) as f64;
    output::check_output_folder(&out).map_err(|source| CliError::output_folder(&out, source))?;
    eddies::par::with_threads(opts.threads, || {
        let build = |scene: &Scene| {
            setup::build(scene).map_err(|e| match e {
                SetupError::Sim(
                    e @ (SimError::InvalidInput(_) | SimError::InvalidParameter(_)),
                ) => CliError::input(
                    format!("{}: the simulation cannot be set up: {e}", src.label),
                    Vec::new(),
                ),
                // One line: what was looked for and how to run on the CPU, or the size allowed.
                SetupError::Gpu(e @ (GpuError::NoAdapter { .. } | GpuError::Limit(_))) => {
                    CliError::input(e.to_string(), Vec::new())
                }
                SetupError::Gpu(e) => CliError::other(format!("{}: {e}", src.label)),
                SetupError::Sim(other) => CliError::other(other.to_string()),
            })
        };
        let (sim, warnings) = if panel_scenes.is_empty() {
            let built = build(&scene)?;
            (built.sim, built.warnings)
        } else {
            let mut sims = Vec::new();
            let mut warnings = Vec::new();
            for panel in &panel_scenes {
                let built = build(panel)?;
                sims.push(built.sim);
                // Panels share the scene's regions: say each warning once.
                for w in built.warnings {
                    if !warnings.contains(&w) {
                        warnings.push(w);
                    }
                }
            }
            let sim: Box<dyn Simulation> = Box::new(panels::Panels::new(sims, scene.size()[0]));
            (sim, warnings)
        };
        check_first_step(&src, &scene, sim.as_ref())?;
        if !opts.quiet {
            eprintln!("{}", describe(&src, &scene, bytes, sim.as_ref(), &out));
            for w in &warnings {
                eprintln!("warning: {w}");
            }
        }
        let interrupt = Interrupt::watch();
        Runner::start(&src, &scene, sim, out, opts.quiet, &interrupt)?.run()
    })
}

/// Refuses, before anything is written, a scene whose initial motion needs time steps so short that a frame
/// could not be reached (the same bound that stops a run whose flow blows up): such speeds are a mistake in
/// the scene, not physics to wait for.
fn check_first_step(
    src: &SceneSource,
    scene: &Scene,
    sim: &dyn Simulation,
) -> Result<(), CliError> {
    if scene.time.steps_per_frame > 0 {
        return Ok(());
    }
    let frame_dt = 1.0 / scene.time.fps;
    let dt = sim.max_dt(scene.time.cfl);
    if dt.is_nan() || dt < frame_dt * MIN_STEP_PER_FRAME {
        return Err(CliError::input(
            format!(
                "{}: the initial motion needs time steps of {dt:.3e} s at time.cfl = {}, so a frame of {frame_dt:.4} s \
                 would take more than {:.0e} steps",
                src.label,
                scene.time.cfl,
                1.0 / MIN_STEP_PER_FRAME
            ),
            vec![
                "  check the initial speeds: region, emitter and obstacle velocities (m/s), vorton circulations \
                 (m²/s), the sound speed"
                    .into(),
            ],
        ));
    }
    Ok(())
}

/// A step shorter than this fraction of a frame means ten million steps for one frame: a flow that has blown
/// up (or, at the start, a scene whose speeds are a mistake).
const MIN_STEP_PER_FRAME: f64 = 1e-7;

/// One line about the run, printed before it starts.
fn describe(
    src: &SceneSource,
    scene: &Scene,
    bytes: f64,
    sim: &dyn Simulation,
    out: &Path,
) -> String {
    let res: Vec<String> = scene.resolution().iter().map(|n| n.to_string()).collect();
    let subs = scene.substances().len();
    // On the GPU: the adapter and the device memory the simulation holds.
    let device = match (scene.backend, setup::gpu()) {
        (Backend::Gpu, Ok(gpu)) => format!(
            "; GPU {}, {}",
            gpu.adapter().name,
            setup::format_bytes(sim.memory_bytes() as f64)
        ),
        _ => String::new(),
    };
    format!(
        "eddies: {}: {} {}D, {} cells, {} substance{}, {} frames at {} fps ({:.2} s); about {}; {} threads{device} -> {}",
        src.name,
        scene.method.name(),
        scene.dim(),
        res.join("x"),
        subs,
        if subs == 1 { "" } else { "s" },
        scene.time.frames,
        scene.time.fps,
        scene.time.frames as f64 / scene.time.fps,
        setup::format_bytes(bytes),
        rayon::current_num_threads(),
        out.display()
    )
}

/// A run in progress: the simulation, the open stats file and the progress display.
struct Runner<'a> {
    scene: &'a Scene,
    interrupt: &'a Interrupt,
    clamps: ClampLog,
    sim: Box<dyn Simulation>,
    out: PathBuf,
    stats: BufWriter<File>,
    stats_path: PathBuf,
    progress: Progress,
    backdrop: render::Backdrop,
    started: Instant,
    frames_written: usize,
    /// Records of the steps since the last frame, written when the frame is.
    pending: Vec<eddies::StepRecord>,
}

impl<'a> Runner<'a> {
    /// Creates the output folder, clears an earlier run's frames from it, writes `scene.toml` and opens
    /// `stats.jsonl`.
    fn start(
        src: &SceneSource,
        scene: &'a Scene,
        sim: Box<dyn Simulation>,
        out: PathBuf,
        quiet: bool,
        interrupt: &'a Interrupt,
    ) -> Result<Self, CliError> {
        fs::create_dir_all(&out).map_err(|e| {
            CliError::input(
                format!("cannot create the output folder {}: {e}", out.display()),
                vec!["  choose another folder with --out DIR".into()],
            )
        })?;
        output::remove_stale_outputs(&out).map_err(|e| CliError::write(&out, e))?;
        let header = format!(
            "Resolved scene \"{}\" (from {}), written by eddies {}: every default filled in and every\n\
             command-line override applied. `eddies run` on this file repeats the run.",
            src.name,
            src.label,
            env!("CARGO_PKG_VERSION")
        );
        let text = output::scene_toml(scene, &header)?;
        let scene_path = out.join("scene.toml");
        output::write_atomic(&scene_path, text.as_bytes())
            .map_err(|e| CliError::write(&scene_path, e))?;
        let stats_path = out.join("stats.jsonl");
        let stats = File::create(&stats_path).map_err(|e| CliError::write(&stats_path, e))?;
        let frames = scene.time.frames.max(0) as u64;
        Ok(Self {
            scene,
            interrupt,
            clamps: ClampLog::default(),
            sim,
            out,
            stats: BufWriter::new(stats),
            stats_path,
            progress: Progress::new(frames, quiet),
            backdrop: render::Backdrop::new(scene),
            started: Instant::now(),
            frames_written: 0,
            pending: Vec::new(),
        })
    }

    fn run(mut self) -> Result<RunSummary, CliError> {
        let frames = self.scene.time.frames.max(0) as usize;
        let frame_dt = 1.0 / self.scene.time.fps;
        for frame in 0..frames {
            let t_end = (frame + 1) as f64 * frame_dt;
            let reached = self.advance_to(t_end, frame_dt);
            // The frame's records, completed by the simulation (a device backend reads its diagnostics
            // back once per frame, here), then written.
            let flushed = self.flush_records();
            if let Err(e) = reached.and(flushed) {
                // Keep what was written: the stats up to the failing step and the frames before it.
                let _ = self.stats.flush();
                self.progress.abandon();
                self.clamps.summarise(self.sim.steps(), &self.progress);
                return Err(self.failure(e));
            }
            self.write_frame(frame)?;
            self.stats
                .flush()
                .map_err(|e| CliError::write(&self.stats_path, e))?;
            self.progress.frame_done(
                frame + 1,
                self.sim.time(),
                self.sim.steps(),
                self.started.elapsed(),
            );
        }
        self.progress.finish();
        self.clamps.summarise(self.sim.steps(), &self.progress);
        Ok(RunSummary {
            out: self.out,
            frames: self.frames_written,
            steps: self.sim.steps(),
            sim_time: self.sim.time(),
            wall: self.started.elapsed(),
        })
    }

    /// Steps until the simulated time reaches `t_end`.
    fn advance_to(&mut self, t_end: f64, frame_dt: f64) -> Result<(), StepFailure> {
        let spf = self.scene.time.steps_per_frame.max(0) as u64;
        if spf > 0 {
            let dt = frame_dt / spf as f64;
            for _ in 0..spf {
                self.step(dt)?;
            }
            return Ok(());
        }
        let cfl = self.scene.time.cfl;
        loop {
            let left = t_end - self.sim.time();
            if left <= frame_dt * 1e-9 {
                return Ok(());
            }
            let max = self.sim.max_dt(cfl);
            // The flow has blown up (its speeds or vorticity run away), and waiting for it would only stall
            // the run.
            if max.is_nan() || max < frame_dt * MIN_STEP_PER_FRAME {
                return Err(StepFailure::Sim(SimError::Diverged {
                    stage: "max_dt",
                    step: self.sim.steps(),
                    detail: format!(
                        "the CFL time step collapsed to {max:e} s (a frame is {frame_dt} s): the flow blew up"
                    ),
                }));
            }
            let dt = if max >= left {
                left
            } else if 2.0 * max > left {
                0.5 * left
            } else {
                max
            };
            let before = self.sim.time();
            self.step(dt)?;
            if self.sim.time() <= before {
                return Err(StepFailure::Stalled(before));
            }
        }
    }

    fn step(&mut self, dt: f64) -> Result<(), StepFailure> {
        let rec = self.sim.step(dt).map_err(StepFailure::Sim)?;
        self.pending.push(rec);
        self.progress
            .step_done(self.sim.time(), self.sim.steps(), self.started.elapsed());
        match self.interrupt.received() {
            Some(signal) => Err(StepFailure::Interrupted(signal)),
            None => Ok(()),
        }
    }

    /// Has the simulation complete the records of the steps since the last call, and writes them to
    /// `stats.jsonl`. The records up to a failure are written all the same.
    fn flush_records(&mut self) -> Result<(), StepFailure> {
        let completed = self.sim.complete_records(&mut self.pending);
        let mut records = std::mem::take(&mut self.pending);
        if let Err(SimError::Diverged { step, .. }) = &completed {
            records.retain(|r| r.step <= *step);
        }
        for rec in &records {
            writeln!(self.stats, "{}", output::stats_line(rec)).map_err(StepFailure::Stats)?;
            self.clamps.record(rec, &self.progress);
        }
        completed.map_err(StepFailure::Sim)
    }

    /// Writes frame `frame`: the PNG, and with `output.npy` the particle and mass arrays.
    fn write_frame(&mut self, frame: usize) -> Result<(), CliError> {
        let picture = render::render(self.sim.as_ref(), self.scene, &self.backdrop)?;
        let png = picture.to_png()?;
        let path = self.out.join(frame_name(frame));
        output::write_atomic(&path, &png).map_err(|e| CliError::write(&path, e))?;
        if self.scene.output.npy {
            let dim = self.sim.dim();
            let positions = self.sim.particle_positions();
            let bytes = npy::encode_f32(
                &[positions.len() / dim, dim],
                &positions[..positions.len() / dim * dim],
            );
            let path = self.out.join(output::particles_name(frame));
            output::write_atomic(&path, &bytes).map_err(|e| CliError::write(&path, e))?;
            for &name in self.sim.describe().array_fields {
                let field = self.sim.field(name).ok_or_else(|| {
                    CliError::other(format!(
                        "the simulation offers no \"{name}\" field for output.npy"
                    ))
                })?;
                let bytes = npy::encode_f32(&field.shape, &field.data);
                let path = self.out.join(output::field_name(name, frame));
                output::write_atomic(&path, &bytes).map_err(|e| CliError::write(&path, e))?;
            }
        }
        self.frames_written = frame + 1;
        Ok(())
    }

    fn failure(&self, e: StepFailure) -> CliError {
        let kept = if self.frames_written == 0 {
            format!(
                "  no frames were written; {} has the steps taken",
                self.stats_path.display()
            )
        } else {
            format!(
                "  {} and {} to {} are kept in {}",
                self.stats_path
                    .file_name()
                    .and_then(|n| n.to_str())
                    .unwrap_or("stats.jsonl"),
                frame_name(0),
                frame_name(self.frames_written - 1),
                self.out.display()
            )
        };
        match e {
            StepFailure::Sim(source) if source.is_divergence() => CliError::Diverged {
                source,
                context: vec![
                    kept,
                    format!(
                        "  try a smaller time.cfl or more --steps-per-frame, and check the [{}] parameters",
                        self.scene.method.name()
                    ),
                ],
            },
            StepFailure::Sim(e @ SimError::Device { .. }) => CliError::Other {
                message: e.to_string(),
                context: vec![kept],
            },
            StepFailure::Sim(e) => CliError::input(e.to_string(), vec![kept]),
            StepFailure::Stats(e) => CliError::write(&self.stats_path, e),
            StepFailure::Stalled(t) => CliError::Other {
                message: format!("the simulated time does not advance past {t} s"),
                context: vec![kept],
            },
            StepFailure::Interrupted(signal) => CliError::Interrupted {
                signal,
                message: format!(
                    "interrupted by {} at step {} (t = {:.4} s)",
                    signal.name(),
                    self.sim.steps(),
                    self.sim.time()
                ),
                context: vec![kept],
            },
        }
    }
}

/// The limits that steps enforced (see [`eddies::Clamp`]): each kind is told once when it first happens,
/// and summed up when the run ends.
#[derive(Default)]
struct ClampLog {
    /// Per kind: the first record of it, the steps it happened in and the values it held.
    seen: Vec<(eddies::Clamp, u64, u64)>,
}

impl ClampLog {
    fn record(&mut self, rec: &eddies::StepRecord, progress: &Progress) {
        for c in &rec.clamps {
            match self
                .seen
                .iter_mut()
                .find(|(first, ..)| first.name == c.name)
            {
                Some((_, steps, count)) => {
                    *steps += 1;
                    *count += c.count;
                }
                None => {
                    progress.println(&format!(
                        "warning: step {}: the {} limit ({:.4} {}) held {} value{}: {} (each step's count is in \
                         stats.jsonl under \"clamps\")",
                        rec.step,
                        c.name,
                        c.limit,
                        c.unit,
                        c.count,
                        if c.count == 1 { "" } else { "s" },
                        c.remedy
                    ));
                    self.seen.push((c.clone(), 1, c.count));
                }
            }
        }
    }

    fn summarise(&self, steps: u64, progress: &Progress) {
        for (c, n, count) in &self.seen {
            progress.println(&format!(
                "warning: the {} limit held {count} value{} in {n} of {steps} steps: those steps are slower than the \
                 scene's physics",
                c.name,
                if *count == 1 { "" } else { "s" },
            ));
        }
    }
}

/// Why stepping stopped.
enum StepFailure {
    Sim(SimError),
    Stats(std::io::Error),
    Stalled(f64),
    Interrupted(Signal),
}

/// Progress on stderr: a bar with steps/s and ETA on a terminal, else one line per frame.
struct Progress {
    bar: Option<ProgressBar>,
    plain: bool,
    frames: u64,
    last_update: Instant,
}

impl Progress {
    fn new(frames: u64, quiet: bool) -> Self {
        let terminal = std::io::stderr().is_terminal();
        let bar = (!quiet && terminal).then(|| {
            let bar = ProgressBar::new(frames);
            let style = ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {bar:32} {pos}/{len} frames  {msg}  ETA {eta}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar());
            bar.set_style(style);
            bar.enable_steady_tick(Duration::from_millis(200));
            bar
        });
        Self {
            bar,
            plain: !quiet && !terminal,
            frames,
            last_update: Instant::now(),
        }
    }

    fn message(time: f64, steps: u64, elapsed: Duration) -> String {
        let rate = steps as f64 / elapsed.as_secs_f64().max(1e-9);
        format!("t={time:.2} s  steps={steps}  {rate:.1} steps/s")
    }

    fn step_done(&mut self, time: f64, steps: u64, elapsed: Duration) {
        if let Some(bar) = &self.bar {
            if self.last_update.elapsed() > Duration::from_millis(250) {
                bar.set_message(Self::message(time, steps, elapsed));
                self.last_update = Instant::now();
            }
        }
    }

    fn frame_done(&mut self, frame: usize, time: f64, steps: u64, elapsed: Duration) {
        let msg = Self::message(time, steps, elapsed);
        if let Some(bar) = &self.bar {
            bar.set_message(msg);
            bar.set_position(frame as u64);
        } else if self.plain {
            eprintln!("frame {frame}/{}  {msg}", self.frames);
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish();
        }
    }

    /// Prints a line on stderr above the bar (unless quiet).
    fn println(&self, line: &str) {
        if let Some(bar) = &self.bar {
            bar.println(line);
        } else if self.plain {
            eprintln!("{line}");
        }
    }

    fn abandon(&self) {
        if let Some(bar) = &self.bar {
            bar.abandon();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use eddies::diag::StageTimer;
    use eddies::{Advance, Description, Field};

    /// A simulation whose device fails at step `fail_at`, as a GPU that is lost mid-run.
    struct LostDevice {
        steps: u64,
        fail_at: u64,
    }

    impl Simulation for LostDevice {
        fn describe(&self) -> Description {
            eddies::reint::describe(2, 1)
        }
        fn dim(&self) -> usize {
            2
        }
        fn resolution(&self) -> [usize; 3] {
            [16, 16, 1]
        }
        fn cell_size(&self) -> f64 {
            1.0 / 16.0
        }
        fn time(&self) -> f64 {
            self.steps as f64 / 60.0 / 2.0
        }
        fn steps(&self) -> u64 {
            self.steps
        }
        fn max_dt(&self, _cfl: f64) -> f64 {
            1.0 / 120.0
        }
        fn advance(&mut self, _dt: f64, _timer: &mut StageTimer) -> Result<Advance, SimError> {
            if self.steps + 1 == self.fail_at {
                return Err(SimError::Device {
                    step: self.steps,
                    detail: "the GPU device was lost: test".into(),
                });
            }
            self.steps += 1;
            Ok(Advance::default())
        }
        fn field(&self, name: &str) -> Option<Field> {
            self.describe().fields.contains(&name).then(|| Field {
                shape: vec![16, 16],
                data: vec![0.0; 256],
                signed: false,
            })
        }
        fn particle_positions(&self) -> Vec<f32> {
            Vec::new()
        }
        fn memory_bytes(&self) -> usize {
            0
        }
    }

    /// A device lost mid-run ends the run with exit code 1, naming the step, and keeps the frames written.
    #[test]
    fn a_lost_device_fails_with_the_step_and_keeps_the_frames() {
        let dir = tempfile::tempdir().unwrap();
        let src = SceneSource {
            label: "test.toml".into(),
            name: "test".into(),
            text: String::new(),
        };
        let mut scene = Scene::default();
        scene.time.frames = 4;
        scene.time.steps_per_frame = 2;
        let interrupt = Interrupt::watch();
        let sim = Box::new(LostDevice {
            steps: 0,
            fail_at: 6,
        });
        let out = dir.path().join("out");
        let runner = Runner::start(&src, &scene, sim, out.clone(), true, &interrupt).unwrap();
        let err = runner.run().unwrap_err();
        assert_eq!(err.exit_code(), crate::error::EXIT_FAILURE);
        let report = err.report();
        assert!(report.contains("the device failed at step 5"), "{report}");
        assert!(report.contains("frame_00001.png are kept"), "{report}");
        assert!(out.join("frame_00001.png").exists() && !out.join("frame_00002.png").exists());
        let stats = fs::read_to_string(out.join("stats.jsonl")).unwrap();
        assert_eq!(
            stats.lines().count(),
            5,
            "the steps taken are in stats.jsonl"
        );
    }
}
