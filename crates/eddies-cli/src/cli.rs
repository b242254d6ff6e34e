//! The command line: `eddies run | view | scenes | validate | bench | info | plot | animate`, parsed with clap, dispatched, and mapped to
//! exit codes (see [`crate::error`]).

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::error::{CliError, EXIT_BAD_INPUT, EXIT_FAILURE, EXIT_OK};
use crate::runner::{self, RunOptions};
use crate::scene::AnimationFormat;
use crate::scene::Backend;
use crate::view::{self, ViewBackend, ViewOptions};
use crate::{animation, bench, plot, scenes, validate};

/// Fluid simulation from scene files: reintegration tracking, PIC/FLIP/APIC liquids and vortex particles.
/// Without a command, runs the showcase scene.
///
/// Exit codes: 0 success, 2 bad input, 3 the simulation diverged, 130/143 stopped by Ctrl-C/SIGTERM
/// (what was written is kept, with a checkpoint to resume from), 1 anything else.
#[derive(Debug, Parser)]
#[command(name = "eddies", version)]
pub struct Cli {
    /// What to do (default: `run` the showcase scene).
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a scene: write frames, stats.jsonl, the resolved scene.toml and the files [output] asks for
    /// (VTK, PLY, meshes, OpenVDB, an animation, checkpoints) into the output folder, or resume a run.
    Run(RunArgs),
    /// List the built-in scenes.
    Scenes,
    /// Run the validation cases and compare each with its reference (exit 1 if any fails, other than a known
    /// gap of the model).
    ///
    /// Each row says what it requires: `≤ bound`, `≥ bound` or `reference ± tolerance`. A row marked `GAP [k]`
    /// misses its reference for a known gap of the model, registered with the case; its reason is printed under
    /// the table. It is reported and counted in the summary line but does not make the exit code 1.
    Validate(ValidateArgs),
    /// Measure performance.
    Bench(BenchArgs),
    /// Say what this build can run on: the version, the CPU threads and the GPU adapters found (the first
    /// is the one `--backend gpu` uses unless EDDIES_GPU_ADAPTER names another).
    Info,
    /// Draw a run's stats.jsonl as SVG and PNG plots in DIR/plots
    Plot(PlotArgs),
    /// Make an animation of a run's frames (DIR/frame_NNNNN.png): an animated GIF, or an MP4 (H.264) when
    /// the program ffmpeg is on PATH. Written to DIR/animation.gif or DIR/animation.mp4 unless --output
    /// names another file. A run makes one itself with `output.animation = "gif"` or `"mp4"`.
    Animate(AnimateArgs),
    /// Run a scene live in a window (needs a display, and a build with the `viewer` feature:
    /// `cargo build --release --features viewer`; exit code 2 without either).
    ///
    /// Left drag pushes the fluid; right drag or Alt + drag turns the camera (3D), the wheel zooms (3D).
    /// Space pauses and resumes, S or → takes one step when paused, R resets, Esc or Q quits. The side panel
    /// chooses the field, sets time.cfl live and rebuilds the run with other viscosity or gravity.
    View(ViewArgs),
}

/// Arguments of `eddies view`.
#[derive(Debug, Args)]
pub struct ViewArgs {
    /// A scene file (.toml) or the name of a built-in scene (see `eddies scenes`) [default: paint-stream]
    pub scene: Option<String>,
    /// Override a scene key by its dotted path, as `eddies run --set`. Repeatable.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Where to run: auto (the GPU for reint where an adapter opens, else the CPU), cpu or gpu
    #[arg(long, value_name = "BACKEND", default_value = "auto")]
    pub backend: ViewBackend,
    /// Worker threads of the simulation (0: one per core)
    #[arg(long, value_name = "N", default_value_t = 0, value_parser = threads_parser())]
    pub threads: usize,
    /// Close after N displayed frames, printing the displayed frames per second and the steps taken
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub frames: Option<u64>,
    /// With --frames: write the last displayed frame of the window as PNG
    #[arg(long, value_name = "FILE", requires = "frames")]
    pub screenshot: Option<PathBuf>,
    /// Start paused (Space runs)
    #[arg(long)]
    pub paused: bool,
}

/// Arguments of `eddies run`.
#[derive(Debug, Default, Args)]
pub struct RunArgs {
    /// A scene file (.toml) or the name of a built-in scene (see `eddies scenes`) [default: paint-stream]
    pub scene: Option<String>,
    /// Output folder (default: out/NAME, NAME being the scene's name)
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Number of output frames (sets time.frames)
    #[arg(long, value_name = "N")]
    pub frames: Option<u64>,
    /// Override a scene key by its dotted path, e.g. `--set reint.viscosity=0.001` or
    /// `--set region.0.density=0.5`; VALUE is read as TOML, else as a string. Repeatable.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Worker threads (0: one per core)
    #[arg(long, value_name = "N", default_value_t = 0, value_parser = threads_parser())]
    pub threads: usize,
    /// Where to run: cpu (every method) or gpu (reint whole; FLIP's and the vortex method's solvers and particle passes; sets the scene's `backend`)
    #[arg(long, value_name = "BACKEND")]
    pub backend: Option<Backend>,
    /// Fixed number of steps per frame (sets time.steps_per_frame; 0: adaptive from time.cfl)
    #[arg(long, value_name = "N")]
    pub steps_per_frame: Option<u64>,
    /// Print nothing but errors
    #[arg(long, short)]
    pub quiet: bool,
    /// Continue the run in DIR from its latest checkpoint (checkpoint_NNNNN.ckpt), with the scene it holds;
    /// --frames N sets the frames in all
    #[arg(long, value_name = "DIR", conflicts_with_all = ["scene", "out", "set", "steps_per_frame"])]
    pub resume: Option<PathBuf>,
}

/// `eddies plot DIR`.
#[derive(Debug, Args)]
pub struct PlotArgs {
    /// The output folder of a run (it holds stats.jsonl)
    pub dir: PathBuf,
}

/// `eddies animate DIR`.
#[derive(Debug, Args)]
pub struct AnimateArgs {
    /// The output folder of a run (it holds frame_NNNNN.png)
    pub dir: PathBuf,
    /// gif, or mp4 (needs ffmpeg on PATH) [default: from --output's extension, else gif]
    #[arg(long, value_name = "FORMAT", value_parser = ["gif", "mp4"])]
    pub format: Option<String>,
    /// Frames per second [default: the run's time.fps, from DIR/scene.toml, else 30]
    #[arg(long, value_name = "N")]
    pub fps: Option<f64>,
    /// The file to write [default: DIR/animation.gif or DIR/animation.mp4]
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// Arguments of `eddies validate`.
#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// Only cases whose name contains this text
    pub filter: Option<String>,
    /// Smaller grids and fewer steps, with references derived for the smaller runs (docs/VALIDATION.md)
    #[arg(long)]
    pub quick: bool,
    /// Run the soak runs instead (10⁵ reint, 10⁴ FLIP and 10⁴ VPM steps: invariants and flat memory;
    /// several minutes; with --quick a tenth of the steps)
    #[arg(long)]
    pub soak: bool,
    /// One JSON object per line, keys "case", "measured", "reference", "tolerance", "unit", "pass",
    /// "comparison" ("<=", ">=" or "±"), "known_model_gap" and "known_gap_reason"
    #[arg(long)]
    pub json: bool,
    /// Worker threads (0: one per core)
    #[arg(long, value_name = "N", default_value_t = 0, value_parser = threads_parser())]
    pub threads: usize,
}

/// Arguments of `eddies bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Only benchmarks whose name contains this text
    pub filter: Option<String>,
    /// Smaller grids and fewer repetitions
    #[arg(long)]
    pub quick: bool,
    /// One JSON object per line: {"bench","size","metric","value","unit","threads","device"}
    #[arg(long)]
    pub json: bool,
    /// Where the benchmarks run: cpu, or gpu (reint; FLIP's particle passes and pressure solves; the vortex
    /// method's direct sum, Poisson solve and exchanges; the renderer)
    #[arg(long, value_name = "BACKEND", default_value = "cpu")]
    pub backend: Backend,
    /// Worker threads (0: one per core)
    #[arg(long, value_name = "N", default_value_t = 0, value_parser = threads_parser())]
    pub threads: usize,
}

/// Most worker threads accepted: beyond this the operating system is likely to refuse them.
pub const MAX_THREADS: u64 = 4096;

fn threads_parser() -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::<usize>::new().range(0..=MAX_THREADS)
}

/// Runs the program on `args` (the first being the program name) and returns the exit code. Errors are
/// printed to stderr.
pub fn main_with_args<I, T>(args: I) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                EXIT_BAD_INPUT
            } else {
                EXIT_OK
            };
        }
    };
    match dispatch(cli.command.unwrap_or(Command::Run(RunArgs::default()))) {
        Ok(code) => code,
        Err(e) => {
            eprint!("{}", e.report());
            e.exit_code()
        }
    }
}

fn dispatch(command: Command) -> Result<i32, CliError> {
    let stdout = std::io::stdout();
    match command {
        Command::Run(a) => {
            let opts = RunOptions {
                scene: a.scene,
                out: a.out,
                frames: a.frames,
                sets: a.set,
                threads: a.threads,
                steps_per_frame: a.steps_per_frame,
                backend: a.backend,
                quiet: a.quiet,
                resume: a.resume,
            };
            let s = runner::run(&opts)?;
            if !opts.quiet {
                let last = s.frames.saturating_sub(1);
                let animation = s
                    .animation
                    .as_ref()
                    .and_then(|p| p.file_name())
                    .map(|n| format!(", {}", n.to_string_lossy()))
                    .unwrap_or_default();
                println!(
                    "wrote {} frames to {} ({} .. {}, stats.jsonl, scene.toml{animation}): {} steps, {:.2} s simulated in {:.1} s \
                     (frames held the simulation {:.1} s)",
                    s.frames,
                    s.out.display(),
                    crate::output::frame_name(0),
                    crate::output::frame_name(last),
                    s.steps,
                    s.sim_time,
                    s.wall.as_secs_f64(),
                    s.frames_held.as_secs_f64()
                );
            }
            Ok(EXIT_OK)
        }
        Command::View(a) => {
            let s = view::view(&ViewOptions {
                scene: a.scene,
                sets: a.set,
                backend: a.backend,
                threads: a.threads,
                frames: a.frames,
                screenshot: a.screenshot.clone(),
                paused: a.paused,
            })?;
            if let Some(path) = &a.screenshot {
                println!("wrote {}", path.display());
            }
            println!(
                "displayed {} frames at {:.1} fps; {} simulation steps ({:.0} steps/s)",
                s.frames, s.fps, s.steps, s.steps_per_s
            );
            Ok(EXIT_OK)
        }
        Command::Plot(a) => {
            let files = plot::plot_run(&a.dir)?;
            println!(
                "wrote {} plots to {}",
                files.len(),
                plot::plots_folder(&a.dir).display()
            );
            Ok(EXIT_OK)
        }
        Command::Animate(a) => {
            let by_extension = a
                .output
                .as_ref()
                .and_then(|p| p.extension())
                .is_some_and(|e| e.eq_ignore_ascii_case("mp4"));
            let format = match a.format.as_deref() {
                Some("mp4") => AnimationFormat::Mp4,
                Some(_) => AnimationFormat::Gif,
                None if by_extension => AnimationFormat::Mp4,
                None => AnimationFormat::Gif,
            };
            let fps = a
                .fps
                .or_else(|| animation::recorded_fps(&a.dir))
                .unwrap_or(animation::DEFAULT_FPS);
            let name = animation::file_name(format).unwrap_or(crate::output::GIF_NAME);
            let path = a.output.unwrap_or_else(|| a.dir.join(name));
            if !a.dir.is_dir() {
                return Err(CliError::input(
                    format!("{}: no such folder", a.dir.display()),
                    vec!["  name the output folder of a run (it holds frame_NNNNN.png)".into()],
                ));
            }
            if let Some(w) = animation::animate(&a.dir, format, fps, &path)? {
                println!(
                    "wrote {} ({} frames of {}×{} at {fps} fps)",
                    w.path.display(),
                    w.frames,
                    w.size.0,
                    w.size.1
                );
            }
            Ok(EXIT_OK)
        }
        Command::Scenes => {
            let width = scenes::BUILTIN
                .iter()
                .map(|s| s.name.len())
                .max()
                .unwrap_or(0);
            let mut out = stdout.lock();
            for s in scenes::BUILTIN {
                let default = if s.name == scenes::SHOWCASE {
                    " (default)"
                } else {
                    ""
                };
                writeln!(out, "{:<width$}  {}{default}", s.name, s.description())
                    .map_err(|e| CliError::other(format!("cannot write to stdout: {e}")))?;
            }
            Ok(EXIT_OK)
        }
        Command::Validate(a) => eddies::par::with_threads(a.threads, || {
            validate::run(
                a.filter.as_deref(),
                a.quick,
                a.soak,
                a.json,
                &mut stdout.lock(),
            )
        }),
        Command::Bench(a) => {
            eddies::par::with_threads(a.threads, || {
                bench::run(
                    a.filter.as_deref(),
                    a.quick,
                    a.json,
                    a.backend,
                    &mut stdout.lock(),
                )
            })?;
            Ok(EXIT_OK)
        }
        Command::Info => {
            let mut out = stdout.lock();
            let write = |out: &mut dyn Write, line: String| {
                writeln!(out, "{line}")
                    .map_err(|e| CliError::other(format!("cannot write to stdout: {e}")))
            };
            write(&mut out, format!("eddies {}", env!("CARGO_PKG_VERSION")))?;
            write(
                &mut out,
                format!("cpu: {} threads", rayon::current_num_threads()),
            )?;
            let adapters = eddies_gpu::adapters();
            if adapters.is_empty() {
                write(
                    &mut out,
                    "gpu: no adapter found (Vulkan, Metal or DirectX 12 with compute shaders);                      --backend gpu is unavailable"
                        .into(),
                )?;
            }
            for (k, a) in adapters.iter().enumerate() {
                let used = if k == 0 {
                    " (used by --backend gpu)"
                } else {
                    ""
                };
                write(&mut out, format!("gpu {k}: {a}{used}"))?;
            }
            Ok(EXIT_OK)
        }
    }
}

/// [`main_with_args`] on the process's arguments, with a panic (a bug) reported as exit code 1 rather than
/// Rust's 101.
pub fn main() -> i32 {
    match std::panic::catch_unwind(|| main_with_args(std::env::args_os())) {
        Ok(code) => code,
        Err(_) => {
            eprintln!(
                "error: internal error (a bug in eddies); the panic message above says where"
            );
            EXIT_FAILURE
        }
    }
}
