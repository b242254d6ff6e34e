//! `eddies plot DIR` (and `output.plots = true` at the end of a run): the run's `stats.jsonl` drawn as SVG
//! and PNG plots in `DIR/plots/` by `eddies-io`'s plotting.

use std::fs;
use std::path::{Path, PathBuf};

use crate::error::CliError;

/// The folder the plots of the run in `dir` go to.
pub fn plots_folder(dir: &Path) -> PathBuf {
    dir.join("plots")
}

/// Draws the plots of the run in `dir`; returns the files written.
pub fn plot_run(dir: &Path) -> Result<Vec<PathBuf>, CliError> {
    let stats = dir.join("stats.jsonl");
    let text = fs::read_to_string(&stats).map_err(|e| {
        CliError::input(
            format!("cannot read {}: {e}", stats.display()),
            vec!["  name the output folder of a run (it holds stats.jsonl)".into()],
        )
    })?;
    let folder = plots_folder(dir);
    fs::create_dir_all(&folder).map_err(|e| CliError::write(&folder, e))?;
    let title = dir
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("run")
        .to_string();
    eddies_io::plot::plot_stats(&text, &folder, &title).map_err(|e| match e {
        eddies_io::plot::PlotError::Io { .. } => CliError::other(e.to_string()),
        e => CliError::input(format!("{}: {e}", stats.display()), Vec::new()),
    })
}
