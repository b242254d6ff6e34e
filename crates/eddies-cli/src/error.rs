//! The error type of the program and its exit codes: 0 success, 2 bad input, 3 the simulation diverged,
//! 128 + the signal's number when Ctrl-C (130) or SIGTERM (143) stopped a run, 1 anything else (README,
//! "Outputs"). Every error prints as one `error: ...` line plus context lines.

use std::io;
use std::path::PathBuf;

use eddies::linsolve::SolveError;
use eddies::SimError;
use eddies_gpu::GpuError;

use crate::interrupt::Signal;
use crate::load::SceneError;
use crate::output::exports::ExportError;
use crate::output::{OutputFolderError, ResolvedSceneError};
use crate::render::RenderError;

/// Exit code: success.
pub const EXIT_OK: i32 = 0;
/// Exit code: anything not covered by the other codes (I/O failures, internal errors).
pub const EXIT_FAILURE: i32 = 1;
/// Exit code: bad input (scene, flag, file).
pub const EXIT_BAD_INPUT: i32 = 2;
/// Exit code: the simulation diverged.
pub const EXIT_DIVERGED: i32 = 3;

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// A scene key has a bad value (or a `--set` does); located at file, line and column.
    #[error("{0}")]
    Scene(#[from] SceneError),
    /// Bad input that is not a scene value: a missing scene file, an unknown scene name, a bad filter.
    #[error("{message}")]
    Input {
        /// The error line.
        message: String,
        /// Lines printed after it.
        context: Vec<String>,
    },
    /// The simulation blew up.
    #[error("{source}")]
    Diverged {
        /// The method's report, naming the stage and step.
        source: SimError,
        /// Where the frames written so far are, and what to try.
        context: Vec<String>,
    },
    /// An output file could not be written.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The file or folder.
        path: PathBuf,
        /// The operating system's reason.
        source: io::Error,
    },
    /// The output folder cannot be used: not a folder, or not writable.
    #[error("cannot use the output folder {}: {source}", path.display())]
    OutputFolder {
        /// The output folder asked for.
        path: PathBuf,
        /// Why it cannot be used.
        source: OutputFolderError,
        /// Lines printed after the error line.
        context: Vec<String>,
    },
    /// The resolved scene could not be turned into `scene.toml` (a bug).
    #[error("{0}")]
    ResolvedScene(#[from] ResolvedSceneError),
    /// A frame could not be rendered or encoded.
    #[error("{0}")]
    Render(#[from] RenderError),
    /// A benchmark case failed.
    #[error("benchmark {name} failed: {source}")]
    Bench {
        /// The case.
        name: &'static str,
        /// Why it failed (boxed: it can hold a whole scene error).
        source: Box<BenchError>,
    },
    /// A signal (Ctrl-C, SIGTERM) stopped the run between two steps.
    #[error("{message}")]
    Interrupted {
        /// The signal; the exit code is 128 + its number.
        signal: Signal,
        /// The error line.
        message: String,
        /// What was kept.
        context: Vec<String>,
    },
    /// Anything else.
    #[error("{message}")]
    Other {
        /// The error line.
        message: String,
        /// Lines printed after it.
        context: Vec<String>,
    },
}

impl CliError {
    /// Bad input with context lines.
    pub fn input(message: impl Into<String>, context: Vec<String>) -> Self {
        Self::Input {
            message: message.into(),
            context,
        }
    }

    /// A failure that is not the user's input.
    pub fn other(message: impl Into<String>) -> Self {
        Self::Other {
            message: message.into(),
            context: Vec::new(),
        }
    }

    /// The output folder `path` cannot be used, for `source`; the context line suggests `--out`.
    pub fn output_folder(path: impl Into<PathBuf>, source: OutputFolderError) -> Self {
        Self::OutputFolder {
            path: path.into(),
            source,
            context: vec!["  choose another folder with --out DIR".into()],
        }
    }

    /// A write failure at `path`.
    pub fn write(path: impl Into<PathBuf>, source: io::Error) -> Self {
        Self::Write {
            path: path.into(),
            source,
        }
    }

    /// The process exit code for this error.
    pub fn exit_code(&self) -> i32 {
        match self {
            CliError::Scene(_) | CliError::Input { .. } | CliError::OutputFolder { .. } => {
                EXIT_BAD_INPUT
            }
            CliError::Diverged { .. } => EXIT_DIVERGED,
            CliError::Interrupted { signal, .. } => signal.exit_code(),
            CliError::Write { .. }
            | CliError::ResolvedScene(_)
            | CliError::Render(_)
            | CliError::Bench { .. }
            | CliError::Other { .. } => EXIT_FAILURE,
        }
    }

    /// Lines printed after the error line.
    pub fn context(&self) -> &[String] {
        match self {
            CliError::Scene(e) => &e.context,
            CliError::Input { context, .. }
            | CliError::Diverged { context, .. }
            | CliError::Interrupted { context, .. }
            | CliError::OutputFolder { context, .. }
            | CliError::Other { context, .. } => context,
            CliError::Write { .. }
            | CliError::ResolvedScene(_)
            | CliError::Render(_)
            | CliError::Bench { .. } => &[],
        }
    }

    /// The whole report: `error: <message>` and the context lines, newline-terminated.
    pub fn report(&self) -> String {
        let mut s = format!("error: {self}\n");
        for line in self.context() {
            s.push_str(line);
            s.push('\n');
        }
        s
    }
}

/// Why a scene's simulation could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// The scene cannot make a simulation.
    #[error(transparent)]
    Sim(#[from] SimError),
    /// The GPU backend has no device, or the device refused the simulation.
    #[error(transparent)]
    Gpu(#[from] GpuError),
}

impl From<ExportError> for CliError {
    fn from(e: ExportError) -> Self {
        match e {
            ExportError::Write { path, source } => Self::write(path, source),
            e @ ExportError::Encode { .. } => Self::other(e.to_string()),
        }
    }
}

impl From<SetupError> for BenchError {
    fn from(e: SetupError) -> Self {
        match e {
            SetupError::Sim(e) => Self::Sim(e),
            SetupError::Gpu(e) => Self::Gpu(e),
        }
    }
}

/// Why a benchmark case failed; `eddies bench` prints it after `benchmark NAME failed: `. Defined here,
/// with the errors it wraps, so that this module imports none of the commands that return it.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A simulation could not be set up or a step failed.
    #[error("{0}")]
    Sim(#[from] SimError),
    /// The GPU backend has no device, or the device failed.
    #[error("{0}")]
    Gpu(#[from] GpuError),
    /// A pressure operator, solver or multigrid could not be set up, or a solve failed.
    #[error("{0}")]
    Solve(#[from] SolveError),
    /// A timed PCG solve failed.
    #[error("{preconditioner} at {n}³: {source}")]
    Pcg {
        /// The preconditioner's name.
        preconditioner: &'static str,
        /// Cells per axis.
        n: usize,
        /// Why the solve failed.
        source: SolveError,
    },
    /// A built-in scene the case runs is missing.
    #[error("no built-in scene {0}")]
    MissingScene(&'static str),
    /// A built-in scene the case runs does not load.
    #[error("{0}")]
    Scene(#[from] SceneError),
    /// A frame could not be rendered.
    #[error("{0}")]
    Render(#[from] RenderError),
    /// An output could not be written (its message says which and why).
    #[error("{0}")]
    Output(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_follow_the_contract() {
        let diverged = CliError::Diverged {
            source: SimError::Diverged {
                stage: "forces",
                step: 7,
                detail: "NaN".into(),
            },
            context: vec!["  frames are in out/x".into()],
        };
        assert_eq!(diverged.exit_code(), EXIT_DIVERGED);
        let report = diverged.report();
        assert!(report.starts_with("error: simulation diverged in stage `forces` at step 7"));
        assert_eq!(
            report.lines().filter(|l| l.starts_with("error:")).count(),
            1
        );
        assert_eq!(CliError::input("x", vec![]).exit_code(), EXIT_BAD_INPUT);
        assert_eq!(CliError::other("x").exit_code(), EXIT_FAILURE);
    }

    #[test]
    fn typed_errors_print_as_before_and_keep_their_source() {
        use std::error::Error as _;

        let folder =
            CliError::output_folder("out/x", OutputFolderError::NotAFolder(PathBuf::from("out")));
        assert_eq!(
            folder.report(),
            "error: cannot use the output folder out/x: out is not a folder\n  choose another folder with --out DIR\n"
        );
        assert_eq!(folder.exit_code(), EXIT_BAD_INPUT);
        assert!(folder.source().is_some());

        let bench = CliError::Bench {
            name: "vpm-dye-drop",
            source: Box::new(BenchError::MissingScene("dye-drop")),
        };
        assert_eq!(
            bench.to_string(),
            "benchmark vpm-dye-drop failed: no built-in scene dye-drop"
        );
        assert_eq!(bench.exit_code(), EXIT_FAILURE);
        assert!(bench.source().is_some());

        let render = CliError::from(RenderError::UnknownField {
            name: "x".into(),
            offered: vec!["density", "mass"],
        });
        assert_eq!(
            render.report(),
            "error: the simulation offers no field \"x\"; it offers density, mass\n"
        );
        assert_eq!(render.exit_code(), EXIT_FAILURE);
        assert!(render.source().is_some());
    }
}
