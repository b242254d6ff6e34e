//! Plots of a run's `stats.jsonl` (one JSON object per step), each written as SVG and PNG.
//!
//! [`plot_stats`] reads the steps into columns and draws the plots whose keys the run wrote, each under its
//! file stem: `conservation` (the drift of the method's conserved quantity: mass, or the mass balance where
//! emitters and sinks change it, fluid volume, or the length of the total circulation), `energy` (kinetic energy), `max_speed`, `dt` (logarithmic), `solver` (pressure
//! iterations and residual), `jerk` (the vortex particles' mean jerk) and `stages` (wall time per solver
//! stage, stacked).
//! `null` (a non-finite number) is a gap in a line, never a zero. Long runs stay fast and readable: lines are
//! thinned to about 2000 points by keeping each bin's extremes, so spikes survive, and stage times are
//! averaged over bins of steps.

mod draw;
mod figures;
mod reduce;
mod stats;

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

pub use self::draw::SIZE;
use self::stats::StepColumns;

/// Why the plots of a run could not be made.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// A line of `stats.jsonl` is not a JSON object.
    #[error("stats line {line}: {message}")]
    MalformedLine {
        /// The 1-based line number.
        line: usize,
        /// The JSON parser's message.
        message: String,
    },
    /// `stats.jsonl` holds no step.
    #[error("the stats hold no step")]
    NoSteps,
    /// A file or folder could not be written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The cause.
        source: io::Error,
    },
    /// plotters failed to draw a plot, or the PNG encoder to encode it.
    #[error("plot {plot}: {message}")]
    Draw {
        /// The plot's file stem.
        plot: &'static str,
        /// The drawing library's message.
        message: String,
    },
    /// The bundled font could not be read (a corrupt build).
    #[error("the bundled font could not be read")]
    Font,
}

/// Draws the plots of a run from the text of its `stats.jsonl` into `out_dir` (created if missing), each as
/// `<plot>.svg` and `<plot>.png` of [`SIZE`], captioned with `title` (the run's name). Each file is written
/// under a temporary name and renamed, so a reader never sees half a plot. Returns the paths written, SVG
/// before PNG for each plot.
///
/// # Errors
/// [`PlotError::MalformedLine`] and [`PlotError::NoSteps`] for the input; [`PlotError::Io`] naming the path
/// that could not be written; [`PlotError::Draw`] and [`PlotError::Font`] for failures of the drawing.
pub fn plot_stats(jsonl: &str, out_dir: &Path, title: &str) -> Result<Vec<PathBuf>, PlotError> {
    let stats = StepColumns::parse(jsonl)?;
    draw::register_font()?;
    fs::create_dir_all(out_dir).map_err(|source| PlotError::Io {
        path: out_dir.to_path_buf(),
        source,
    })?;
    let mut written = Vec::new();
    for (stem, figure) in figures::all_figures(&stats, title) {
        let failed = |message| PlotError::Draw {
            plot: stem,
            message,
        };
        let svg = draw::render_svg(&figure).map_err(failed)?;
        written.push(write_atomic(
            &out_dir.join(format!("{stem}.svg")),
            svg.as_bytes(),
        )?);
        let png = draw::render_png(&figure).map_err(failed)?;
        written.push(write_atomic(&out_dir.join(format!("{stem}.png")), &png)?);
    }
    Ok(written)
}

/// Writes `bytes` to a temporary file beside `path` and renames it onto `path`.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<PathBuf, PlotError> {
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(".tmp");
    let temporary = PathBuf::from(temporary);
    let io_error = |path: &Path| {
        let path = path.to_path_buf();
        move |source| PlotError::Io { path, source }
    };
    fs::write(&temporary, bytes).map_err(io_error(&temporary))?;
    if let Err(source) = fs::rename(&temporary, path) {
        // The rename's error is the one to report; a temporary file that cannot be removed either is
        // left for the user, whose folder it is.
        let _ = fs::remove_file(&temporary);
        return Err(io_error(path)(source));
    }
    Ok(path.to_path_buf())
}
