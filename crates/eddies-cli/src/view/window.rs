//! The viewer's window: winit's event loop, egui drawn with wgpu, the picture from the simulation thread, the
//! mouse (a left drag pushes the fluid; a right drag or Alt + drag turns the camera, the wheel zooms) and
//! the keys. `--frames N --screenshot FILE` copies the window's last frame back from its texture.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use egui::{PointerButton, Rect, Sense, Vec2};
use egui_wgpu::winit::Painter;
use egui_wgpu::{RendererOptions, WgpuConfiguration, WgpuSetup};
use egui_winit::winit;
use winit::application::ApplicationHandler;
use winit::event::WindowEvent;
use winit::event_loop::{ActiveEventLoop, ControlFlow};
use winit::window::{Window, WindowId};

use super::blit::{BlitPicture, BlitResources};
use super::camera::OrbitCamera;
use super::panel::{self, Controls};
use super::picture::Pick;
use super::worker::{Command, Stats, Worker};
use super::ViewSummary as Shown;
use crate::error::CliError;

/// Frames per second the window aims at; it draws no faster, to leave the cores to the simulation.
const TARGET_FPS: f64 = 60.0;
/// The window's size (logical pixels): the side panel and a square-ish picture beside it.
pub const WINDOW_SIZE: [u32; 2] = [1024, 720];

/// What the window was asked to do besides showing the run.
pub struct Script {
    /// Close after this many frames that showed a picture.
    pub frames: Option<u64>,
    /// Write the last frame here (PNG) before closing.
    pub screenshot: Option<PathBuf>,
}

/// The window and everything it draws with.
struct Open {
    window: Arc<Window>,
    painter: Painter,
    input: egui_winit::State,
}

/// The viewer as winit drives it.
pub struct App {
    title: String,
    dim: usize,
    worker: Worker,
    script: Script,
    ctx: egui::Context,
    open: Option<Open>,
    /// The picture's size (pixels), once there is one.
    picture_size: Option<[u32; 2]>,
    /// A picture not yet handed to the renderer.
    new_picture: Option<Arc<image::RgbaImage>>,
    pick: Option<Pick>,
    stats: Stats,
    controls: Controls,
    camera: OrbitCamera,
    /// The cursor's last domain point while a left drag pushes the fluid.
    stroke: Option<glam::DVec3>,
    /// When the window last read the pointer's events: the ones it reads next happened since.
    pointer_read: Instant,
    first_picture: Option<Instant>,
    frames: u64,
    /// Displayed frames per second over the last second.
    recent_frames: Vec<Instant>,
    next_frame: Instant,
    /// Set when the loop should end: `Ok` with what was shown, or why the window failed.
    pub outcome: Option<Result<Shown, CliError>>,
}

impl App {
    /// A viewer of `worker`'s run, titled after the scene.
    pub fn new(
        title: String,
        dim: usize,
        worker: Worker,
        script: Script,
        controls: Controls,
        camera: OrbitCamera,
    ) -> Self {
        Self {
            title,
            dim,
            worker,
            script,
            ctx: egui::Context::default(),
            open: None,
            picture_size: None,
            new_picture: None,
            pick: None,
            stats: Stats::default(),
            controls,
            camera,
            stroke: None,
            pointer_read: Instant::now(),
            first_picture: None,
            frames: 0,
            recent_frames: Vec::new(),
            next_frame: Instant::now(),
            outcome: None,
        }
    }

    fn open(&mut self, event_loop: &ActiveEventLoop) -> Result<Open, CliError> {
        let attributes = Window::default_attributes()
            .with_title(&self.title)
            .with_inner_size(winit::dpi::LogicalSize::new(WINDOW_SIZE[0], WINDOW_SIZE[1]));
        let window = Arc::new(event_loop.create_window(attributes).map_err(|e| {
            CliError::input(format!("no display: cannot open a window: {e}"), Vec::new())
        })?);
        let config = WgpuConfiguration {
            wgpu_setup: WgpuSetup::from_display_handle(event_loop.owned_display_handle()),
            ..Default::default()
        };
        let mut painter = pollster::block_on(Painter::new(
            self.ctx.clone(),
            config,
            false,
            // No dithering: its noise is computed per pixel, and on a software rasteriser (lavapipe) the
            // fragment shader is most of the frame's cost.
            RendererOptions {
                dithering: false,
                ..Default::default()
            },
        ));
        pollster::block_on(painter.set_window(egui::ViewportId::ROOT, Some(Arc::clone(&window))))
            .map_err(|e| {
            CliError::input(
                format!("no display: cannot draw into the window: {e}"),
                Vec::new(),
            )
        })?;
        if let Some(state) = painter.render_state() {
            let blit = BlitResources::new(&state.device, state.target_format);
            state.renderer.write().callback_resources.insert(blit);
        }
        let input = egui_winit::State::new(
            self.ctx.clone(),
            egui::ViewportId::ROOT,
            &window,
            Some(window.scale_factor() as f32),
            None,
            painter.max_texture_side(),
        );
        Ok(Open {
            window,
            painter,
            input,
        })
    }

    /// Draws one frame: the latest picture, the panel; takes a screenshot on the script's last frame.
    fn redraw(&mut self, event_loop: &ActiveEventLoop) {
        if let Some(frame) = self.worker.take() {
            let shown = frame.shown;
            self.picture_size = Some([shown.image.width(), shown.image.height()]);
            let rgba = image::DynamicImage::ImageRgb8(shown.image).into_rgba8();
            self.new_picture = Some(Arc::new(rgba));
            self.pick = Some(shown.pick);
            self.stats = frame.stats;
        }
        // Out of `self` while the frame is drawn, so that the panel's closure may borrow the rest.
        let Some(mut open) = self.open.take() else {
            return;
        };
        self.draw(&mut open, event_loop);
        self.open = Some(open);
    }

    fn draw(&mut self, open: &mut Open, event_loop: &ActiveEventLoop) {
        let raw = open.input.take_egui_input(&open.window);
        let now = Instant::now();
        self.recent_frames
            .retain(|t| now.duration_since(*t) < Duration::from_secs(1));
        let fps = self.recent_frames.len() as f64;
        let mut commands = Vec::new();
        let mut picture_rect = None;
        let ctx = self.ctx.clone();
        let full = ctx.run_ui(raw, |ui| {
            let keys_free = !ui.ctx().egui_wants_keyboard_input();
            let panel = panel::side_panel(ui, &mut self.controls, &self.stats, fps, &mut commands);
            if keys_free {
                panel::keys(ui, &self.controls, &mut commands);
            }
            egui::CentralPanel::default()
                // Unfilled: the clear colour is the background, so no pixel is shaded twice.
                .frame(egui::Frame::NONE)
                .show(ui, |ui| {
                    picture_rect = self.picture(ui, panel, &mut commands);
                });
        });
        let mut quit = false;
        for c in commands {
            match c {
                panel::Action::Quit => quit = true,
                panel::Action::Send(Command::Run(on)) => {
                    self.controls.running = on;
                    self.worker.send(Command::Run(on));
                }
                panel::Action::Send(c) => self.worker.send(c),
            }
        }
        open.input
            .handle_platform_output(&open.window, full.platform_output);
        let primitives = self.ctx.tessellate(full.shapes, full.pixels_per_point);
        let mut textures = full.textures_delta;

        let shows_picture = self.picture_size.is_some();
        let last = shows_picture && self.script.frames.is_some_and(|n| self.frames + 1 >= n);
        let (sender, shot) = mpsc::channel();
        let capture = if last && self.script.screenshot.is_some() {
            vec![egui::ScreenshotCallback::new(move |image| {
                let _ = sender.send(image);
            })]
        } else {
            Vec::new()
        };
        open.painter.paint_and_update_textures(
            egui::ViewportId::ROOT,
            full.pixels_per_point,
            [0.03, 0.03, 0.03, 1.0],
            &primitives,
            &mut textures,
            capture,
            &open.window,
        );
        if shows_picture {
            self.frames += 1;
            self.recent_frames.push(now);
            let first = *self.first_picture.get_or_insert(now);
            if self.frames == 1 && self.script.frames.is_some() {
                if let Some(r) = picture_rect {
                    // Where the picture lies in the window (physical pixels), for scripts that drag across it.
                    let s = full.pixels_per_point;
                    println!(
                        "picture area: {} {} {} {}",
                        (r.min.x * s).round(),
                        (r.min.y * s).round(),
                        (r.width() * s).round(),
                        (r.height() * s).round()
                    );
                }
            }
            if last {
                let elapsed = now.duration_since(first).as_secs_f64();
                let result = match &self.script.screenshot {
                    Some(path) => save_screenshot(open, &shot, path),
                    None => Ok(()),
                };
                self.outcome = Some(result.map(|()| Shown {
                    frames: self.frames,
                    fps: if elapsed > 0.0 {
                        (self.frames - 1) as f64 / elapsed
                    } else {
                        0.0
                    },
                    steps: self.stats.steps,
                    steps_per_s: self.stats.steps_per_s,
                }));
                quit = true;
            }
        }
        if quit {
            if self.outcome.is_none() {
                self.outcome = Some(Ok(self.summary()));
            }
            event_loop.exit();
        }
    }

    fn summary(&self) -> Shown {
        let elapsed = self
            .first_picture
            .map_or(0.0, |t| t.elapsed().as_secs_f64());
        Shown {
            frames: self.frames,
            fps: if elapsed > 0.0 {
                self.frames as f64 / elapsed
            } else {
                0.0
            },
            steps: self.stats.steps,
            steps_per_s: self.stats.steps_per_s,
        }
    }

    /// The picture, fitted into the central panel left of `panel_left`, and the mouse over it. Returns where
    /// it was drawn.
    fn picture(
        &mut self,
        ui: &mut egui::Ui,
        panel_left: f32,
        commands: &mut Vec<panel::Action>,
    ) -> Option<Rect> {
        let [tw, th] = self.picture_size?.map(|n| n as f32);
        // Left of the side panel, whatever space the central panel was given.
        let mut avail = ui.available_rect_before_wrap();
        avail.max.x = avail.max.x.min(panel_left);
        let scale = (avail.width() / tw).min(avail.height() / th);
        let rect = Rect::from_center_size(avail.center(), Vec2::new(tw * scale, th * scale));
        let response = ui.allocate_rect(rect, Sense::click_and_drag());
        ui.painter().add(egui_wgpu::Callback::new_paint_callback(
            rect,
            BlitPicture {
                pixels: self.new_picture.take(),
            },
        ));
        let alt = ui.input(|i| i.modifiers.alt);
        let turning = response.dragged_by(PointerButton::Secondary)
            || (alt && response.dragged_by(PointerButton::Primary));
        if self.dim == 3 && turning {
            let d = response.drag_delta();
            self.camera.orbit(d.x as f64, d.y as f64);
            commands.push(panel::Action::Send(Command::Camera(self.camera)));
        }
        if self.dim == 3 && response.hovered() {
            let scroll = ui.input(|i| i.smooth_scroll_delta.y);
            if scroll != 0.0 {
                self.camera.zoom(scroll as f64 / 50.0);
                commands.push(panel::Action::Send(Command::Camera(self.camera)));
            }
        }
        self.push(ui, rect, commands);
        Some(rect)
    }

    /// A left drag that starts on the picture (without Alt) pushes the fluid along the cursor's path: every
    /// position the pointer's events since the last frame went through, so that a window slower than the
    /// mouse (a software renderer, a loaded machine) pushes along the same path as a fast one, at the
    /// cursor's mean speed over the frame.
    fn push(&mut self, ui: &egui::Ui, rect: Rect, commands: &mut Vec<panel::Action>) {
        let now = Instant::now();
        let dt = now.duration_since(self.pointer_read).as_secs_f64();
        self.pointer_read = now;
        let Some(pick) = self.pick else {
            self.stroke = None;
            return;
        };
        let aspect = (rect.width() / rect.height()) as f64;
        let domain = |p: egui::Pos2| {
            let u = ((p.x - rect.min.x) / rect.width()) as f64;
            let v = ((p.y - rect.min.y) / rect.height()) as f64;
            pick.point(u, v, aspect)
        };
        let picture_layer = ui.layer_id();
        let mut path = Vec::new();
        for event in ui.input(|i| i.events.clone()) {
            match event {
                egui::Event::PointerButton {
                    pos,
                    button: PointerButton::Primary,
                    pressed: true,
                    modifiers,
                } => {
                    let on_picture =
                        rect.contains(pos) && ui.ctx().layer_id_at(pos) == Some(picture_layer);
                    self.stroke = (on_picture && !modifiers.alt).then(|| domain(pos));
                }
                egui::Event::PointerMoved(pos) => {
                    if let Some(from) = self.stroke {
                        let to = domain(pos);
                        path.push((from, to));
                        self.stroke = Some(to);
                    }
                }
                egui::Event::PointerButton {
                    pos,
                    button: PointerButton::Primary,
                    pressed: false,
                    ..
                } => {
                    if let Some(from) = self.stroke.take() {
                        path.push((from, domain(pos)));
                    }
                }
                egui::Event::PointerGone => self.stroke = None,
                _ => {}
            }
        }
        let length: f64 = path.iter().map(|(from, to)| from.distance(*to)).sum();
        if !(length > 0.0 && dt > 0.0) {
            return;
        }
        let speed = length / dt;
        for (from, to) in path {
            if from != to {
                commands.push(panel::Action::Send(Command::Push {
                    from,
                    to,
                    velocity: (to - from).normalize() * speed,
                }));
            }
        }
    }
}

impl ApplicationHandler for App {
    fn resumed(&mut self, event_loop: &ActiveEventLoop) {
        if self.open.is_some() {
            return;
        }
        match self.open(event_loop) {
            Ok(open) => {
                open.window.request_redraw();
                self.open = Some(open);
            }
            Err(e) => {
                self.outcome = Some(Err(e));
                event_loop.exit();
            }
        }
    }

    fn window_event(&mut self, event_loop: &ActiveEventLoop, _id: WindowId, event: WindowEvent) {
        let Some(open) = self.open.as_mut() else {
            return;
        };
        let _ = open.input.on_window_event(&open.window, &event);
        match event {
            WindowEvent::CloseRequested => {
                self.outcome = Some(Ok(self.summary()));
                event_loop.exit();
            }
            WindowEvent::Resized(size) => {
                if let (Some(w), Some(h)) = (
                    std::num::NonZeroU32::new(size.width),
                    std::num::NonZeroU32::new(size.height),
                ) {
                    open.painter.on_window_resized(egui::ViewportId::ROOT, w, h);
                }
            }
            WindowEvent::RedrawRequested => self.redraw(event_loop),
            _ => {}
        }
    }

    fn about_to_wait(&mut self, event_loop: &ActiveEventLoop) {
        let Some(open) = self.open.as_ref() else {
            return;
        };
        let now = Instant::now();
        if now >= self.next_frame {
            open.window.request_redraw();
            self.next_frame = now.max(self.next_frame) + Duration::from_secs_f64(1.0 / TARGET_FPS);
        }
        event_loop.set_control_flow(ControlFlow::WaitUntil(self.next_frame));
    }
}

/// Waits for the copy of the window's last frame and writes it as PNG.
fn save_screenshot(
    open: &Open,
    shot: &mpsc::Receiver<Arc<egui::ColorImage>>,
    path: &Path,
) -> Result<(), CliError> {
    if let Some(state) = open.painter.render_state() {
        let _ = state.device.poll(wgpu::PollType::wait_indefinitely());
    }
    let image = shot
        .recv_timeout(Duration::from_secs(10))
        .map_err(|_| CliError::other("the window's last frame could not be read back"))?;
    let [w, h] = image.size;
    let rgb: Vec<u8> = image
        .pixels
        .iter()
        .flat_map(|c| [c.r(), c.g(), c.b()])
        .collect();
    let img = image::RgbImage::from_raw(w as u32, h as u32, rgb)
        .ok_or_else(|| CliError::other("the window's frame has the wrong size"))?;
    img.save(path)
        .map_err(|e| CliError::write(path, std::io::Error::other(e.to_string())))
}
