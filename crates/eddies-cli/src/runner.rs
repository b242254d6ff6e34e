//! `eddies run`: load and check a scene, refuse it before anything is written if it is wrong or too large,
//! then step the simulation frame by frame and write the outputs.
//!
//! Time line: frame k (from 0) shows the state after (k + 1) / fps simulated seconds. Each frame is reached
//! either by `steps_per_frame` equal steps, or adaptively by steps of `min(max_dt(cfl), time left)`; when the
//! time left is less than two CFL steps it is split evenly, so that no step is a tiny remainder.
//!
//! Checkpoints (`output.checkpoint_every`, and on Ctrl-C or SIGTERM) hold the state with the frames done
//! and the step at which the frame in progress began; `eddies run --resume DIR` rebuilds the simulation from
//! the checkpoint's scene, gives it the state and goes on from there, so the time line, and with it every
//! step, is the uninterrupted run's.

use std::fs::{self, File};
use std::io::{BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use eddies::{SimError, Simulation};
use indicatif::{ProgressBar, ProgressStyle};
use toml_edit::Value;

use crate::annotate::{annotate, Annotation};
use crate::error::{CliError, SetupError};
use crate::interrupt::{Interrupt, Signal};
use crate::keypath::KeyPath;
use crate::load::{self, Loaded, Override, SceneError, SceneSource};
use crate::output::checkpoint::{self as checkpoints, Position};
use crate::output::exports::Exports;
use crate::output::lock::{self, LockError, OutputLock};
use crate::output::pictures::FrameWriter;
use crate::output::{self, frame_name, npy};
use crate::render3d::{Staging, Studio};
use crate::scene::{Backend, Method, Scene, View};
use crate::{animation, panels, render, scenes, setup};
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
    /// Continue the run in this folder from its latest checkpoint.
    pub resume: Option<PathBuf>,
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
    /// Of it, the time the simulation waited on frames: staging pictures and writing the files for other
    /// tools, and waiting for the frame thread (pictures are drawn and written beside the stepping).
    pub frames_held: Duration,
    /// The animation written (`output.animation`), if any.
    pub animation: Option<PathBuf>,
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
    animation::check_encoder(&loaded)?;
    let bytes = setup::check_memory(&loaded, setup::available_memory())?;
    Ok(Prepared {
        src,
        overrides,
        loaded,
        bytes,
    })
}

/// Runs a scene, or resumes one ([`RunOptions::resume`]); see the module documentation.
pub fn run(opts: &RunOptions) -> Result<RunSummary, CliError> {
    if let Some(dir) = &opts.resume {
        return resume(opts, dir);
    }
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
    let panel_scenes = panel_scenes(&src, &base, &scene)?;
    let bytes = bytes * panel_scenes.len().max(1) as f64;
    output::check_output_folder(&out).map_err(|source| CliError::output_folder(&out, source))?;
    eddies::par::with_threads(opts.threads, || {
        let (mut sim, warnings) = build_sim(&src, &scene, &panel_scenes)?;
        check_first_step(&src, &scene, sim.as_ref())?;
        if !opts.quiet {
            eprintln!("{}", describe(&src, &scene, bytes, sim.as_ref(), &out));
            for w in &warnings {
                eprintln!("warning: {w}");
            }
        }
        let interrupt = Interrupt::watch();
        let begin = Begin::Fresh(Position::default());
        Runner::start(
            &src,
            &scene,
            sim.as_mut(),
            out,
            opts.quiet,
            &interrupt,
            begin,
        )?
        .run()
    })
}

/// `eddies run --resume DIR`: locks the folder, reads its latest checkpoint, rebuilds the simulation from the
/// checkpoint's scene (with `--frames` and `--backend` applied), gives it the saved state and goes on.
fn resume(opts: &RunOptions, dir: &Path) -> Result<RunSummary, CliError> {
    if opts.scene.is_some()
        || opts.out.is_some()
        || !opts.sets.is_empty()
        || opts.steps_per_frame.is_some()
    {
        return Err(CliError::input(
            "--resume continues the run in its folder with the scene its checkpoint holds",
            vec!["  only --frames, --backend, --threads and --quiet combine with it".into()],
        ));
    }
    if !dir.is_dir() {
        return Err(CliError::input(
            format!("--resume {}: no such folder", dir.display()),
            vec!["  name the output folder of the run to continue".into()],
        ));
    }
    let lock = OutputLock::acquire(dir).map_err(lock_error)?;
    let point = checkpoints::latest(dir).map_err(|e| CliError::input(e.to_string(), Vec::new()))?;
    let src = SceneSource {
        label: format!("{} (its scene)", point.path.display()),
        name: point.scene_name.clone(),
        text: point.scene_text.clone(),
    };
    let base = overrides(opts)?;
    let loaded = load::load(&src, &base)?;
    animation::check_encoder(&loaded)?;
    let bytes = setup::check_memory(&loaded, setup::available_memory())?;
    let scene = loaded.scene;
    let done = point.progress.frames_done;
    if scene.time.frames.max(0) as usize <= done {
        return Err(CliError::input(
            format!(
                "{}: the run has {done} frames already, and time.frames is {}",
                point.path.display(),
                scene.time.frames
            ),
            vec!["  ask for more with --frames N (frames in all)".into()],
        ));
    }
    let panel_scenes = panel_scenes(&src, &base, &scene)?;
    let bytes = bytes * panel_scenes.len().max(1) as f64;
    eddies::par::with_threads(opts.threads, || {
        let (mut sim, _) = build_sim(&src, &scene, &panel_scenes)?;
        sim.restore_state(&point.state).map_err(|e| {
            CliError::input(
                format!(
                    "{}: the checkpoint does not fit its scene: {e}",
                    point.path.display()
                ),
                Vec::new(),
            )
        })?;
        if !opts.quiet {
            eprintln!("{}", describe(&src, &scene, bytes, sim.as_ref(), dir));
            eprintln!(
                "resuming at frame {done}, step {} (t = {:.4} s) from {}",
                sim.steps(),
                sim.time(),
                point.path.display()
            );
        }
        let interrupt = Interrupt::watch();
        let begin = Begin::Resume {
            progress: point.progress,
            lock,
        };
        Runner::start(
            &src,
            &scene,
            sim.as_mut(),
            dir.to_path_buf(),
            opts.quiet,
            &interrupt,
            begin,
        )?
        .run()
    })
}

/// Runs `sim`, a simulation of `scene` stepped by [`next_step`] through `at.frames_done` frames so far, on
/// to `scene.time.frames` frames, writing into a fresh `out` what `eddies run` writes (frames numbered on
/// from `at.frames_done`). Ctrl-C and SIGTERM stop it between steps as they stop `eddies run`. For drivers
/// that build and step a simulation themselves (the Python package); the caller chooses the thread pool.
pub fn run_from(
    src: &SceneSource,
    scene: &Scene,
    sim: &mut dyn Simulation,
    at: Position,
    out: PathBuf,
    quiet: bool,
) -> Result<RunSummary, CliError> {
    output::check_output_folder(&out).map_err(|source| CliError::output_folder(&out, source))?;
    let interrupt = Interrupt::watch();
    Runner::start(src, scene, sim, out, quiet, &interrupt, Begin::Fresh(at))?.run()
}

/// A folder in use by another run, or one that cannot be locked.
fn lock_error(e: LockError) -> CliError {
    match e {
        LockError::InUse { .. } => CliError::input(
            e.to_string(),
            vec!["  wait for it to finish, or choose another folder with --out DIR".into()],
        ),
        LockError::Io { .. } => CliError::other(e.to_string()),
    }
}

/// Each side-by-side panel is the scene with its own overrides, loaded and checked like the scene.
pub fn panel_scenes(
    src: &SceneSource,
    base: &[Override],
    scene: &Scene,
) -> Result<Vec<Scene>, CliError> {
    Ok(scene
        .output
        .panels
        .iter()
        .map(|entry| {
            let ovs = panels::overrides(base, entry)?;
            Ok(load::load(src, &ovs)?.scene)
        })
        .collect::<Result<Vec<Scene>, SceneError>>()?)
}

/// The simulation of `scene` (or of its panels side by side), with the warnings of its set-up.
pub fn build_sim(
    src: &SceneSource,
    scene: &Scene,
    panel_scenes: &[Scene],
) -> Result<(Box<dyn Simulation>, Vec<String>), CliError> {
    let build = |scene: &Scene| {
        setup::build(scene).map_err(|e| match e {
            SetupError::Sim(e @ (SimError::InvalidInput(_) | SimError::InvalidParameter(_))) => {
                CliError::input(
                    format!("{}: the simulation cannot be set up: {e}", src.label),
                    Vec::new(),
                )
            }
            // One line: what was looked for and how to run on the CPU, or the size allowed.
            SetupError::Gpu(e @ (GpuError::NoAdapter { .. } | GpuError::Limit(_))) => {
                CliError::input(e.to_string(), Vec::new())
            }
            SetupError::Gpu(e) => CliError::other(format!("{}: {e}", src.label)),
            SetupError::Sim(other) => CliError::other(other.to_string()),
        })
    };
    if panel_scenes.is_empty() {
        let built = build(scene)?;
        return Ok((built.sim, built.warnings));
    }
    let mut sims = Vec::new();
    let mut warnings = Vec::new();
    for panel in panel_scenes {
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
    Ok((sim, warnings))
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

/// The time step a run takes next, or `None` once the frame in progress (`at.frames_done`, begun at step
/// `at.frame_start_step`) is complete: `time.steps_per_frame` equal steps when it is set, else steps of the
/// CFL limit `max_dt(time.cfl)` that end exactly on the frame's time `(frame + 1) / fps` (the step before
/// the last is halved rather than leave a sliver). Every driver that steps a scene as `eddies run` does
/// (the runner, the Python package) takes its steps from here, so that their states agree bit for bit.
///
/// A limit that has collapsed (NaN, or below [`MIN_STEP_PER_FRAME`] of a frame) is a divergence.
pub fn next_step(
    scene: &Scene,
    sim: &dyn Simulation,
    at: Position,
) -> Result<Option<f64>, SimError> {
    if frame_complete(scene, sim, at) {
        return Ok(None);
    }
    let frame_dt = 1.0 / scene.time.fps;
    let spf = scene.time.steps_per_frame.max(0) as u64;
    if spf > 0 {
        return Ok(Some(frame_dt / spf as f64));
    }
    let left = (at.frames_done + 1) as f64 * frame_dt - sim.time();
    let max = sim.max_dt(scene.time.cfl);
    // The flow has blown up (its speeds or vorticity run away), and waiting for it would only stall the run.
    if max.is_nan() || max < frame_dt * MIN_STEP_PER_FRAME {
        return Err(SimError::Diverged {
            stage: "max_dt",
            step: sim.steps(),
            detail: format!(
                "the CFL time step collapsed to {max:e} s (a frame is {frame_dt} s): the flow blew up"
            ),
        });
    }
    Ok(Some(if max >= left {
        left
    } else if 2.0 * max > left {
        0.5 * left
    } else {
        max
    }))
}

/// The time step of a driver that steps on across frames rather than frame by frame (the Python package, the
/// benchmarks): [`next_step`], with each frame it finds complete counted into `at`.
pub fn step_across_frames(
    scene: &Scene,
    sim: &dyn Simulation,
    at: &mut Position,
) -> Result<f64, SimError> {
    loop {
        match next_step(scene, sim, *at)? {
            Some(dt) => return Ok(dt),
            None => *at = at.next_frame(sim.steps()),
        }
    }
}

/// Whether the frame in progress (see [`next_step`]) is complete: its `time.steps_per_frame` steps taken,
/// counted from the frame's first step so that a run resumed mid-frame takes the rest of it, or its end time
/// reached.
pub fn frame_complete(scene: &Scene, sim: &dyn Simulation, at: Position) -> bool {
    let frame_dt = 1.0 / scene.time.fps;
    let spf = scene.time.steps_per_frame.max(0) as u64;
    if spf > 0 {
        return sim.steps() >= at.frame_start_step + spf;
    }
    (at.frames_done + 1) as f64 * frame_dt - sim.time() <= frame_dt * 1e-9
}

/// Keeps the lines of `stats.jsonl` up to step `last` (a run resumed from a checkpoint takes the later steps
/// again), rewriting the file atomically; a missing file stays missing.
fn keep_stats_until(path: &Path, last: u64) -> std::io::Result<()> {
    let text = match fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    let step = |line: &str| -> Option<u64> {
        let digits = line.strip_prefix("{\"step\":")?;
        let end = digits.find(|c: char| !c.is_ascii_digit())?;
        digits[..end].parse().ok()
    };
    let kept: String = text
        .lines()
        .take_while(|l| step(l).is_some_and(|s| s <= last))
        .map(|l| format!("{l}\n"))
        .collect();
    output::write_atomic(path, kept.as_bytes())
}

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
    // On the GPU: the adapter, and what runs there (reint: everything, in the device memory it holds).
    let device = match (scene.backend, setup::gpu()) {
        (Backend::Gpu, Ok(gpu)) => format!(
            "; GPU {}, {}",
            gpu.adapter().name,
            match scene.method {
                Method::Reint => setup::format_bytes(sim.memory_bytes() as f64),
                Method::Flip => "particle passes and pressure solves".into(),
                Method::Vpm => {
                    use eddies::vpm::{PotentialBoundary, VelocityMethod};
                    let params = &scene.vpm.params;
                    let velocity = match params.velocity {
                        VelocityMethod::Poisson
                            if params.poisson.boundary == PotentialBoundary::Direct =>
                        {
                            "splat, boundary sums, vector Poisson solve, curl and sampling"
                        }
                        VelocityMethod::Poisson => "splat, vector Poisson solve, curl and sampling",
                        VelocityMethod::DirectGrid => "direct sums and sampling",
                        _ => "direct sums",
                    };
                    format!("{velocity}; baroclinic stage and exchanges")
                }
            }
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

/// How a run starts: in an empty (or cleared) folder, at a point of the time line its simulation has
/// reached (the start, for `eddies run`), or from a checkpoint in its folder, already locked.
enum Begin {
    Fresh(Position),
    Resume {
        progress: Position,
        lock: OutputLock,
    },
}

/// A run in progress: the simulation, the open stats file and the progress display.
struct Runner<'a> {
    /// The output folder's lock, held while the run writes.
    _lock: OutputLock,
    /// The scene's name and its resolved text, for checkpoints.
    scene_name: String,
    scene_text: String,
    /// The first frame this process computes (0, or the frames a resumed run had done).
    first_frame: usize,
    /// The step count when the frame in progress began.
    frame_start_step: u64,
    /// The latest checkpoint written, if any.
    last_checkpoint: Option<PathBuf>,
    /// The files for other tools.
    exports: Exports,
    scene: &'a Scene,
    interrupt: &'a Interrupt,
    clamps: ClampLog,
    sim: &'a mut dyn Simulation,
    out: PathBuf,
    stats: BufWriter<File>,
    stats_path: PathBuf,
    progress: Progress,
    backdrop: render::Backdrop,
    /// The renderer of 3D pictures (`output.view = "render"`) and what stages the state for it, or none.
    studio: Option<(Staging, Arc<Mutex<Studio>>)>,
    /// The thread that finishes frames.
    pictures: FrameWriter<CliError>,
    /// Time the simulation spent writing frames (staging, the files for other tools, waiting for the frame
    /// thread).
    frames_held: Duration,
    started: Instant,
    frames_written: usize,
    /// Records of the steps since the last frame, written when the frame is.
    pending: Vec<eddies::StepRecord>,
}

/// Whether the scene's frames are rendered pictures: 3D, `output.view = "render"`, no side-by-side panels
/// (which are particle projections).
pub fn renders_3d(scene: &Scene) -> bool {
    scene.dim() == 3 && scene.output.view == View::Render && scene.output.panels.is_empty()
}

/// Encodes `image` as PNG and writes it to `path` (whole, or not at all).
fn write_png(path: &Path, image: &image::RgbImage) -> Result<(), CliError> {
    let png = render::png_bytes(image)?;
    output::write_atomic(path, &png).map_err(|e| CliError::write(path, e))
}

impl<'a> Runner<'a> {
    /// Creates and locks the output folder, clears an earlier run's frames from it (or, resuming, the lines of
    /// `stats.jsonl` past the checkpoint's step), writes `scene.toml` and opens `stats.jsonl`.
    fn start(
        src: &SceneSource,
        scene: &'a Scene,
        sim: &'a mut dyn Simulation,
        out: PathBuf,
        quiet: bool,
        interrupt: &'a Interrupt,
        begin: Begin,
    ) -> Result<Self, CliError> {
        let header = format!(
            "Resolved scene \"{}\" (from {}), written by eddies {}: every default filled in and every\n\
             command-line override applied. `eddies run` on this file repeats the run.",
            src.name,
            src.label,
            env!("CARGO_PKG_VERSION")
        );
        let text = output::scene_toml(scene, &header)?;
        let studio = renders_3d(scene)
            .then(|| Studio::new(scene))
            .transpose()?
            .map(|s| (s.staging().clone(), Arc::new(Mutex::new(s))));
        let stats_path = out.join("stats.jsonl");
        let (lock, progress) = match begin {
            Begin::Fresh(progress) => {
                let lock = lock::create_and_lock(&out).map_err(|e| match e {
                    LockError::Io { source, .. } => CliError::input(
                        format!(
                            "cannot create the output folder {}: {source}",
                            out.display()
                        ),
                        vec!["  choose another folder with --out DIR".into()],
                    ),
                    e => lock_error(e),
                })?;
                output::remove_stale_outputs(&out).map_err(|e| CliError::write(&out, e))?;
                (lock, progress)
            }
            Begin::Resume { progress, lock } => {
                keep_stats_until(&stats_path, sim.steps())
                    .map_err(|e| CliError::write(&stats_path, e))?;
                (lock, progress)
            }
        };
        let scene_path = out.join("scene.toml");
        output::write_atomic(&scene_path, text.as_bytes())
            .map_err(|e| CliError::write(&scene_path, e))?;
        let stats = File::options()
            .create(true)
            .append(true)
            .open(&stats_path)
            .map_err(|e| CliError::write(&stats_path, e))?;
        let frames = scene.time.frames.max(0) as u64;
        let mut progress_bar = Progress::new(frames, quiet);
        progress_bar.skip_to(progress.frames_done as u64);
        Ok(Self {
            _lock: lock,
            scene_name: src.name.clone(),
            scene_text: text,
            first_frame: progress.frames_done,
            frame_start_step: progress.frame_start_step,
            last_checkpoint: None,
            exports: Exports::new(scene, progress.frames_done),
            scene,
            interrupt,
            clamps: ClampLog::default(),
            sim,
            out,
            stats: BufWriter::new(stats),
            stats_path,
            progress: progress_bar,
            backdrop: render::Backdrop::new(scene),
            studio,
            pictures: FrameWriter::new(),
            frames_held: Duration::ZERO,
            started: Instant::now(),
            frames_written: progress.frames_done,
            pending: Vec::new(),
        })
    }

    fn run(mut self) -> Result<RunSummary, CliError> {
        let frames = self.scene.time.frames.max(0) as usize;
        let every = self.scene.output.checkpoint_every as usize;
        for frame in self.first_frame..frames {
            let reached = self.advance_frame(frame);
            // The frame's records, completed by the simulation (a device backend reads its diagnostics
            // back once per frame, here), then written.
            let flushed = self.flush_records();
            if let Err(e) = reached.and(flushed) {
                // Keep what was written: the stats up to the failing step and the frames before it; an
                // interrupted run also its state, to resume from.
                let _ = self.stats.flush();
                self.progress.abandon();
                self.clamps.summarise(self.sim.steps(), &self.progress);
                // Frames handed over are written before the run ends.
                let _ = self.pictures.finish();
                let saved =
                    matches!(e, StepFailure::Interrupted(_)).then(|| self.checkpoint(frame));
                return Err(self.failure(e, saved));
            }
            self.write_frame(frame)?;
            self.frame_start_step = self.sim.steps();
            self.stats
                .flush()
                .map_err(|e| CliError::write(&self.stats_path, e))?;
            if every > 0 && (frame + 1) % every == 0 {
                // A checkpoint counts its frames as written: they must be.
                self.pictures.flush()?;
                self.checkpoint(frame + 1)?;
            }
            self.progress.frame_done(
                frame + 1,
                self.sim.time(),
                self.sim.steps(),
                self.started.elapsed(),
            );
        }
        let waited = Instant::now();
        self.pictures.finish()?;
        self.frames_held += waited.elapsed();
        self.progress.finish();
        self.clamps.summarise(self.sim.steps(), &self.progress);
        if self.scene.output.plots {
            crate::plot::plot_run(&self.out)?;
        }
        let format = self.scene.output.animation;
        let animation = match animation::file_name(format) {
            Some(name) => {
                let path = self.out.join(name);
                animation::animate(&self.out, format, self.scene.time.fps, &path)?;
                Some(path)
            }
            None => None,
        };
        Ok(RunSummary {
            out: self.out,
            frames: self.frames_written,
            steps: self.sim.steps(),
            sim_time: self.sim.time(),
            wall: self.started.elapsed(),
            frames_held: self.frames_held,
            animation,
        })
    }

    /// Writes checkpoint `frames_done` (the frames written; a run interrupted mid-frame saves the frame in
    /// progress under the number of the frames before it) and removes those beyond `output.checkpoint_keep`.
    fn checkpoint(&mut self, frames_done: usize) -> Result<PathBuf, CliError> {
        let state = self
            .sim
            .save_state()
            .map_err(|e| CliError::other(format!("cannot save the state for a checkpoint: {e}")))?;
        let progress = Position {
            frames_done,
            frame_start_step: self.frame_start_step,
        };
        let path = checkpoints::write(
            &self.out,
            &self.scene_name,
            &self.scene_text,
            progress,
            state,
        )
        .map_err(|e| CliError::write(&self.out, e))?;
        checkpoints::prune(&self.out, self.scene.output.checkpoint_keep as usize)
            .map_err(|e| CliError::write(&self.out, e))?;
        self.last_checkpoint = Some(path.clone());
        Ok(path)
    }

    /// Steps until the frame in progress is complete (see [`next_step`]).
    fn advance_frame(&mut self, frame: usize) -> Result<(), StepFailure> {
        let at = Position {
            frames_done: frame,
            frame_start_step: self.frame_start_step,
        };
        while let Some(dt) = next_step(self.scene, &*self.sim, at).map_err(StepFailure::Sim)? {
            let before = self.sim.time();
            self.step(dt)?;
            if self.sim.time() <= before {
                return Err(StepFailure::Stalled(before));
            }
        }
        Ok(())
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
        let started = Instant::now();
        self.exports.write(&*self.sim, frame, &self.out)?;
        let path = self.out.join(frame_name(frame));
        let time = self.sim.time();
        let annotated = self.scene.output.annotate;
        // The picture's data leaves the simulation here; the frame thread draws, annotates and writes it.
        match &self.studio {
            Some((staging, studio)) => {
                let (stage, legend) = staging.stage(&*self.sim, self.scene)?;
                let studio = Arc::clone(studio);
                self.pictures.submit(move || {
                    let rendered = studio.lock().unwrap().draw(&stage, legend, None)?;
                    let mut image = rendered.image;
                    if annotated {
                        let annotation = Annotation {
                            time,
                            metres_per_pixel: Some(rendered.metres_per_pixel as f64),
                            legend: rendered.legend.as_ref(),
                        };
                        annotate(&mut image, &annotation);
                    }
                    write_png(&path, &image)
                })?;
            }
            None => {
                let picture = render::render(&*self.sim, self.scene, &self.backdrop)?;
                let domain_width = render::metres_per_pixel(self.scene, 1);
                self.pictures.submit(move || {
                    let mut image = picture.to_image();
                    if annotated {
                        let annotation = Annotation {
                            time,
                            metres_per_pixel: Some(domain_width / image.width() as f64),
                            legend: picture.legend.as_ref(),
                        };
                        annotate(&mut image, &annotation);
                    }
                    write_png(&path, &image)
                })?;
            }
        }
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
        self.frames_held += started.elapsed();
        Ok(())
    }

    /// The error a run ends in, with what was kept (and, interrupted, the checkpoint written or why not).
    fn failure(&self, e: StepFailure, saved: Option<Result<PathBuf, CliError>>) -> CliError {
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
                    match &self.last_checkpoint {
                        Some(p) => format!(
                            "  the last checkpoint, {}, is kept (`eddies run --resume` continues from it)",
                            p.display()
                        ),
                        None => "  no checkpoint was written (output.checkpoint_every)".into(),
                    },
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
                context: vec![
                    kept,
                    match saved {
                        Some(Ok(path)) => format!(
                            "  {} holds the state: `eddies run --resume {}` continues the run",
                            path.display(),
                            self.out.display()
                        ),
                        Some(Err(e)) => format!("  no checkpoint: {}", e.report().trim_end()),
                        None => "  no checkpoint".into(),
                    },
                ],
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

    /// Starts the bar at `frames` done (a resumed run).
    fn skip_to(&mut self, frames: u64) {
        if let Some(bar) = &self.bar {
            bar.set_position(frames);
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
        let mut sim = LostDevice {
            steps: 0,
            fail_at: 6,
        };
        let out = dir.path().join("out");
        let runner = Runner::start(
            &src,
            &scene,
            &mut sim,
            out.clone(),
            true,
            &interrupt,
            Begin::Fresh(Position::default()),
        )
        .unwrap();
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
