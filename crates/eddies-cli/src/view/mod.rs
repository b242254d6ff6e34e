//! `eddies view`: a scene run live in a window. The simulation steps on its own thread ([`worker`]); the
//! window ([`window`]) shows its latest picture ([`picture`], the one place a renderer plugs in) with an egui
//! side panel ([`panel`]) and turns the mouse into pushes on the fluid and turns of the orbit camera
//! ([`camera`]).
//!
//! Without a display (neither `DISPLAY` nor `WAYLAND_DISPLAY`, or one that cannot be opened) the command fails
//! with exit code 2 and one line.

#[cfg(feature = "viewer")]
mod blit;
pub mod camera;
#[cfg(feature = "viewer")]
pub mod panel;
pub mod picture;
#[cfg(feature = "viewer")]
mod session;
#[cfg(feature = "viewer")]
pub mod window;
pub mod worker;

use std::path::PathBuf;

use crate::error::CliError;

/// Where the viewer runs the simulation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ViewBackend {
    /// The GPU where the method has a GPU backend and a hardware adapter opens, else the CPU.
    #[default]
    Auto,
    /// The CPU.
    Cpu,
    /// The GPU (reint).
    Gpu,
}

/// What `eddies view` was asked to do.
#[derive(Clone, Debug, Default)]
pub struct ViewOptions {
    /// A scene file or built-in name; `None` is the showcase.
    pub scene: Option<String>,
    /// `--set KEY=VALUE` arguments, in order.
    pub sets: Vec<String>,
    /// Where the simulation runs.
    pub backend: ViewBackend,
    /// Worker threads of the simulation (0: one per core).
    pub threads: usize,
    /// Close after this many frames with a picture.
    pub frames: Option<u64>,
    /// Write the last frame as PNG before closing.
    pub screenshot: Option<PathBuf>,
    /// Start held (Space runs).
    pub paused: bool,
}

/// What a viewer session showed.
#[derive(Clone, Copy, Debug, Default)]
pub struct ViewSummary {
    /// Frames drawn with a picture.
    pub frames: u64,
    /// Frames per second drawn, from the first picture to the last frame.
    pub fps: f64,
    /// The simulation's steps when the window closed.
    pub steps: u64,
    /// Steps per second at the end.
    pub steps_per_s: f64,
}

/// Whether this process could have a display to open a window on.
pub fn has_display() -> bool {
    ["DISPLAY", "WAYLAND_DISPLAY"]
        .iter()
        .any(|v| std::env::var_os(v).is_some_and(|s| !s.is_empty()))
}

#[cfg_attr(not(feature = "viewer"), allow(dead_code))]
fn no_display(why: &str) -> CliError {
    CliError::input(
        format!("no display: eddies view needs a window ({why}); `eddies run` writes frames without one"),
        Vec::new(),
    )
}

/// Runs the viewer until its window closes (or the script's last frame); see the module documentation.
pub fn view(opts: &ViewOptions) -> Result<ViewSummary, CliError> {
    #[cfg(feature = "viewer")]
    return session::view(opts);
    #[cfg(not(feature = "viewer"))]
    {
        let _ = opts;
        Err(CliError::input(
            "eddies was built without its window: build it with the `viewer` feature \
             (`cargo build --release --features viewer`, see docs/VIEWER.md)"
                .to_string(),
            Vec::new(),
        ))
    }
}
