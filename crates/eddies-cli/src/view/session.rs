//! A viewer session: the scene loaded and built, the simulation thread started, and the window's event loop run
//! until it closes. Built with the `viewer` feature only (winit, egui and their window-system crates).

use egui_winit::winit::event_loop::EventLoop;

use super::camera::OrbitCamera;
use super::panel::{Controls, Param};
use super::window::{App, Script};
use super::worker::{Setup, Worker};
use super::{has_display, no_display, picture, ViewBackend, ViewOptions, ViewSummary};
use crate::error::CliError;
use crate::load;
use crate::runner::{self, RunOptions};
use crate::scene::{Backend, Method};
use crate::setup;

/// Runs the viewer until its window closes (or the script's last frame); see the module documentation.
pub(super) fn view(opts: &ViewOptions) -> Result<ViewSummary, CliError> {
    if !has_display() {
        return Err(no_display("DISPLAY and WAYLAND_DISPLAY are unset"));
    }
    let run = RunOptions {
        scene: opts.scene.clone(),
        sets: opts.sets.clone(),
        backend: match opts.backend {
            ViewBackend::Cpu => Some(Backend::Cpu),
            ViewBackend::Gpu => Some(Backend::Gpu),
            ViewBackend::Auto => None,
        },
        ..Default::default()
    };
    let src = runner::scene_source(run.scene.as_deref())?;
    let mut overrides = runner::overrides(&run)?;
    let mut scene = load::load(&src, &overrides)?.scene;
    if opts.backend == ViewBackend::Auto {
        // A software rasteriser (lavapipe, llvmpipe) would step slower than the CPU backend and take the
        // cores the window draws with.
        let gpu = scene.method == Method::Reint
            && setup::gpu().is_ok_and(|g| !g.adapter().device_type.starts_with("software"));
        let backend = if gpu { Backend::Gpu } else { Backend::Cpu };
        overrides = runner::overrides(&RunOptions {
            backend: Some(backend),
            ..run.clone()
        })?;
        scene = load::load(&src, &overrides)?.scene;
    }
    setup::check_memory(&load::load(&src, &overrides)?, setup::available_memory())?;
    let event_loop = EventLoop::new().map_err(|e| no_display(&format!("{e}")))?;

    let (sim, warnings) = eddies::par::with_threads(opts.threads, || {
        runner::build_sim(
            &src,
            &scene,
            &runner::panel_scenes(&src, &overrides, &scene)?,
        )
    })?;
    for w in &warnings {
        eprintln!("warning: {w}");
    }
    let size = scene.size();
    let camera = OrbitCamera::framing([size[0], size[1], size.get(2).copied().unwrap_or(0.0)]);
    let mut rebuilt = Vec::new();
    match scene.method {
        Method::Reint => rebuilt.push(Param {
            label: "viscosity (m²/s)",
            key: "reint.viscosity",
            value: scene.reint.viscosity as f64,
        }),
        Method::Vpm => rebuilt.push(Param {
            label: "viscosity (m²/s)",
            key: "vpm.viscosity",
            value: scene.vpm.params.viscosity,
        }),
        Method::Flip => {}
    }
    let controls = Controls {
        heading: format!(
            "{}: {} {}D on the {}",
            src.name,
            scene.method.name(),
            scene.dim(),
            scene.backend.name()
        ),
        running: !opts.paused,
        views: picture::views(sim.as_ref()),
        view: scene.output.field.clone(),
        cfl: scene.time.cfl,
        rebuilt,
        gravity: scene.gravity(),
    };
    let title = format!("eddies view — {}", src.name);
    let dim = scene.dim();
    let worker = Worker::start(
        Setup {
            src,
            overrides,
            scene,
            sim,
            threads: opts.threads,
        },
        camera,
        !opts.paused,
    );
    let script = Script {
        frames: opts.frames,
        screenshot: opts.screenshot.clone(),
    };
    let mut app = App::new(title, dim, worker, script, controls, camera);
    event_loop
        .run_app(&mut app)
        .map_err(|e| CliError::other(format!("the window's event loop failed: {e}")))?;
    app.outcome
        .unwrap_or_else(|| Err(no_display("the window closed before it opened")))
}
