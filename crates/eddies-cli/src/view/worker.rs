//! The viewer's simulation thread: it steps the simulation, takes the window's commands between steps and
//! leaves its latest picture in a slot that the window takes from. The window never waits on a step; the
//! thread draws a new picture only when the window has taken the last one (or, paused, when something
//! changed), so pictures cost nothing while the window is behind.

use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use eddies::diag::Quantity;
use eddies::{SimError, Simulation, StepRecord};
use glam::DVec3;

use super::camera::OrbitCamera;
use super::picture::{self, Shown};
use crate::load::{self, Override, SceneSource};
use crate::render::Backdrop;
use crate::render3d::Studio;
use crate::scene::Scene;
use crate::setup;

/// What the window asks of the simulation thread.
#[derive(Clone, Debug)]
pub enum Command {
    /// Step continuously (`true`) or hold.
    Run(bool),
    /// One step, when held.
    StepOnce,
    /// Build the simulation again from the scene, with the live overrides.
    Reset,
    /// Push the fluid along a stretch of the cursor's path, from `from` to `to` (m), at `velocity` (m/s),
    /// within the viewer's impulse radius of it: all of the stretch, however long, once.
    Push {
        /// Where the stretch starts (m).
        from: DVec3,
        /// Where it ends (m).
        to: DVec3,
        /// Which way and how fast it moved (m/s).
        velocity: DVec3,
    },
    /// Show another field or view.
    Field(String),
    /// The camera moved.
    Camera(OrbitCamera),
    /// The largest fraction of a cell moved per step (time.cfl), applied from the next step.
    Cfl(f64),
    /// Rebuild from the scene with these `--set KEY=VALUE` overrides added to the command line's (a
    /// parameter the method cannot change while it runs).
    Rebuild(Vec<String>),
}

/// What the panel shows of the run besides the picture.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    /// Steps taken.
    pub steps: u64,
    /// Simulated time (s).
    pub time: f64,
    /// The last step's time step (s).
    pub dt: f64,
    /// Wall time of a step, averaged over the last second (ms).
    pub step_ms: f64,
    /// Steps per wall-clock second, over the last second.
    pub steps_per_s: f64,
    /// The last record's quantities worth watching (name, value), e.g. mass and kinetic energy.
    pub quantities: Vec<(&'static str, f64)>,
    /// Whether the simulation is stepping.
    pub running: bool,
    /// The last failure (a diverged step, a rebuild refused), shown until the next reset.
    pub error: Option<String>,
}

/// A picture with the state it shows.
pub struct Frame {
    /// The picture.
    pub shown: Shown,
    /// The run when it was drawn.
    pub stats: Stats,
}

/// The quantities of a step record the panel shows, in this order.
const WATCHED: [&str; 4] = ["mass", "fluid_volume", "kinetic_energy", "max_speed"];

/// Radius of a drag's push, as a fraction of the larger picture side of the domain.
const IMPULSE_RADIUS: f64 = 0.05;
/// Fastest push (domain widths per second): a flick of the mouse should stir, not blow up the flow.
const MAX_PUSH: f64 = 2.0;

/// Where a push along the segment from `from` to `to` is centred, each with its share of the push: the
/// segment cut into equal pieces at most half a `radius` long, a centre in the middle of each, with the share
/// `piece / (16/15 radius)`, since `16/15 radius` is the integral of the falloff `(1 − (d/r)²)²` along a line
/// through its centre. Each centre stands for its own piece, so along the path the shares add up to one push
/// (to within 2.4 %, where pieces half a radius long meet much shorter ones), however many pictures the
/// window drew on the way: a stroke adds the cursor's velocity to the fluid it passes over once, at any frame
/// rate.
fn along(from: DVec3, to: DVec3, radius: f64) -> impl Iterator<Item = (DVec3, f64)> {
    let length = (to - from).length();
    let n = (2.0 * length / radius).ceil().max(1.0) as usize;
    let share = length / n as f64 / (16.0 / 15.0 * radius);
    (0..n).map(move |k| (from.lerp(to, (k as f64 + 0.5) / n as f64), share))
}

/// The simulation, its scene and how to build it again.
pub struct Setup {
    /// The scene's text, for rebuilds.
    pub src: SceneSource,
    /// The command line's overrides.
    pub overrides: Vec<Override>,
    /// The checked scene.
    pub scene: Scene,
    /// The simulation built from it.
    pub sim: Box<dyn Simulation>,
    /// Worker threads of the simulation (0: one per core).
    pub threads: usize,
}

/// The window's end of the simulation thread.
pub struct Worker {
    commands: Sender<Command>,
    latest: Arc<Mutex<Option<Frame>>>,
    thread: Option<JoinHandle<()>>,
}

impl Worker {
    /// Starts stepping `setup`'s simulation on its own thread, `running` or held.
    pub fn start(setup: Setup, camera: OrbitCamera, running: bool) -> Self {
        let (commands, rx) = mpsc::channel();
        let latest = Arc::new(Mutex::new(None));
        let slot = Arc::clone(&latest);
        let threads = setup.threads;
        let thread = std::thread::Builder::new()
            .name("eddies-sim".into())
            .spawn(move || {
                eddies::par::with_threads(threads, move || {
                    Stepper::new(setup, camera, running, slot).run(&rx)
                })
            })
            .expect("failed to start the simulation thread");
        Self {
            commands,
            latest,
            thread: Some(thread),
        }
    }

    /// Sends a command; a thread that has ended takes none.
    pub fn send(&self, command: Command) {
        let _ = self.commands.send(command);
    }

    /// The latest picture, if one was drawn since the last call.
    pub fn take(&self) -> Option<Frame> {
        self.latest.lock().ok()?.take()
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        // Closing the channel ends the thread after its current step.
        let (closed, _) = mpsc::channel();
        self.commands = closed;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The renderer of a scene whose frames are rendered 3D pictures; none where it cannot start (the picture
/// then is the projection).
fn studio_for(scene: &Scene) -> Option<Studio> {
    crate::runner::renders_3d(scene)
        .then(|| Studio::new(scene).ok())
        .flatten()
}

/// The simulation thread's state.
struct Stepper {
    setup: Setup,
    backdrop: Backdrop,
    /// The renderer of 3D scenes shown as `eddies run` renders them, or none.
    studio: Option<Studio>,
    camera: OrbitCamera,
    running: bool,
    /// A picture is owed even though the window has not taken the last one.
    dirty: bool,
    slot: Arc<Mutex<Option<Frame>>>,
    /// Records not yet completed by the simulation (the GPU fills them in on read-back).
    pending: Vec<StepRecord>,
    last: Option<StepRecord>,
    /// Step wall times (ms) and when each ended, over the last second.
    recent: Vec<(Instant, f64)>,
    live_sets: Vec<String>,
    error: Option<String>,
}

impl Stepper {
    fn new(
        setup: Setup,
        camera: OrbitCamera,
        running: bool,
        slot: Arc<Mutex<Option<Frame>>>,
    ) -> Self {
        Self {
            backdrop: Backdrop::new(&setup.scene),
            studio: studio_for(&setup.scene),
            setup,
            camera,
            running,
            dirty: true,
            slot,
            pending: Vec::new(),
            last: None,
            recent: Vec::new(),
            live_sets: Vec::new(),
            error: None,
        }
    }

    fn run(mut self, rx: &Receiver<Command>) {
        loop {
            let command = if self.running {
                match rx.try_recv() {
                    Ok(c) => Some(c),
                    Err(mpsc::TryRecvError::Empty) => None,
                    Err(mpsc::TryRecvError::Disconnected) => return,
                }
            } else {
                match rx.recv_timeout(Duration::from_millis(20)) {
                    Ok(c) => Some(c),
                    Err(RecvTimeoutError::Timeout) => None,
                    Err(RecvTimeoutError::Disconnected) => return,
                }
            };
            match command {
                Some(c) => self.apply(c),
                None if self.running => self.step(),
                None => {}
            }
            let taken = self.slot.lock().map(|s| s.is_none()).unwrap_or(false);
            if self.dirty || (self.running && taken) {
                self.publish();
            }
        }
    }

    fn apply(&mut self, command: Command) {
        match command {
            Command::Run(on) => self.running = on && self.error.is_none(),
            Command::StepOnce => {
                if !self.running {
                    self.step();
                    self.dirty = true;
                }
            }
            Command::Reset => self.rebuild(self.live_sets.clone()),
            Command::Rebuild(sets) => self.rebuild(sets),
            Command::Push { from, to, velocity } => self.push(from, to, velocity),
            Command::Field(name) => {
                self.setup.scene.output.field = name;
                self.dirty = true;
            }
            Command::Camera(camera) => {
                self.camera = camera;
                self.dirty = true;
            }
            Command::Cfl(cfl) => self.setup.scene.time.cfl = cfl,
        }
    }

    /// One step of the length `eddies run` would take: `max_dt(cfl)`, at most a frame.
    fn step(&mut self) {
        let scene = &self.setup.scene;
        let frame_dt = 1.0 / scene.time.fps;
        let dt = match scene.time.steps_per_frame {
            n if n > 0 => frame_dt / n as f64,
            _ => self.setup.sim.max_dt(scene.time.cfl).min(frame_dt),
        };
        if !(dt.is_finite() && dt > frame_dt * 1e-7) {
            self.fail(format!(
                "the CFL time step collapsed to {dt:e} s: the flow blew up (R resets)"
            ));
            return;
        }
        match self.setup.sim.step(dt) {
            Ok(rec) => {
                let now = Instant::now();
                self.recent.push((now, rec.wall_ms));
                self.recent
                    .retain(|(t, _)| now.duration_since(*t) < Duration::from_secs(1));
                self.pending.push(rec);
            }
            Err(e) => self.fail(step_error(&e)),
        }
    }

    fn fail(&mut self, message: String) {
        self.error = Some(message);
        self.running = false;
        self.dirty = true;
    }

    /// Pushes the fluid along the segment from `from` to `to` at `velocity`, capped at [`MAX_PUSH`]: one
    /// impulse at each of the points [`along`] gives, with its share of the velocity.
    fn push(&mut self, from: DVec3, to: DVec3, velocity: DVec3) {
        let size = self.setup.scene.size();
        let width = size[0].max(size[1]);
        let radius = IMPULSE_RADIUS * width;
        let dim = self.setup.sim.dim();
        let velocity = velocity.clamp_length_max(MAX_PUSH * width);
        for (center, share) in along(from, to, radius) {
            let (c, v) = (center.to_array(), (share * velocity).to_array());
            if let Err(e) = self.setup.sim.apply_impulse(&c[..dim], radius, &v[..dim]) {
                self.error = Some(e.to_string());
                break;
            }
        }
        self.dirty = true;
    }

    /// Builds the simulation again from the scene with the command line's overrides and `sets`.
    fn rebuild(&mut self, sets: Vec<String>) {
        let field = self.setup.scene.output.field.clone();
        let cfl = self.setup.scene.time.cfl;
        let built = (|| -> Result<(Scene, Box<dyn Simulation>), String> {
            let mut ovs = self.setup.overrides.clone();
            for s in &sets {
                ovs.push(Override::parse_set(s).map_err(|e| e.to_string())?);
            }
            let scene = load::load(&self.setup.src, &ovs)
                .map_err(|e| e.to_string())?
                .scene;
            let sim = setup::build(&scene).map_err(|e| e.to_string())?.sim;
            Ok((scene, sim))
        })();
        match built {
            Ok((mut scene, sim)) => {
                scene.output.field = field;
                scene.time.cfl = cfl;
                self.backdrop = Backdrop::new(&scene);
                self.studio = studio_for(&scene);
                self.setup.scene = scene;
                self.setup.sim = sim;
                self.live_sets = sets;
                self.pending.clear();
                self.last = None;
                self.recent.clear();
                self.error = None;
            }
            Err(e) => self.error = Some(format!("not applied: {}", e.trim())),
        }
        self.dirty = true;
    }

    /// Draws the picture and leaves it in the slot, replacing one the window has not taken.
    fn publish(&mut self) {
        self.dirty = false;
        if !self.pending.is_empty() {
            let mut pending = std::mem::take(&mut self.pending);
            match self.setup.sim.complete_records(&mut pending) {
                Ok(()) => self.last = pending.pop(),
                Err(e) => self.fail(step_error(&e)),
            }
        }
        let sim = self.setup.sim.as_ref();
        let shown = match picture::show(
            sim,
            &self.setup.scene,
            &self.backdrop,
            &self.camera,
            self.studio.as_mut(),
        ) {
            Ok(s) => s,
            Err(e) => {
                self.error = Some(e.to_string());
                // Back to the method's own view, which it always offers.
                let default = sim.describe().default_view.to_string();
                if self.setup.scene.output.field != default {
                    self.setup.scene.output.field = default;
                    self.dirty = true;
                }
                return;
            }
        };
        let ms: f64 = self.recent.iter().map(|(_, ms)| ms).sum();
        let stats = Stats {
            steps: sim.steps(),
            time: sim.time(),
            dt: self.last.as_ref().map_or(0.0, |r| r.dt),
            step_ms: ms / self.recent.len().max(1) as f64,
            steps_per_s: self.recent.len() as f64,
            quantities: self.last.as_ref().map_or_else(Vec::new, watched),
            running: self.running,
            error: self.error.clone(),
        };
        if let Ok(mut slot) = self.slot.lock() {
            *slot = Some(Frame { shown, stats });
        }
    }
}

/// The quantities of [`WATCHED`] that `rec` holds.
fn watched(rec: &StepRecord) -> Vec<(&'static str, f64)> {
    WATCHED
        .iter()
        .filter_map(|&name| match rec.get(name) {
            Some(Quantity::Scalar(x)) => Some((name, *x)),
            _ => None,
        })
        .collect()
}

fn step_error(e: &SimError) -> String {
    format!("{e} (R resets)")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stroke drawn in pieces of any length, from many short ones (a fast window) to a few long ones (a
    /// slow window), and pieces of different lengths after one another, pushes the fluid it passes over by
    /// one push: the shares of the impulses within reach of a point on the path, weighted by their falloff,
    /// add up to 1 within 2.4 % (the worst case, where pieces of half a radius meet far shorter ones), so
    /// 3 % is the bound.
    #[test]
    fn a_stroke_pushes_once_along_its_path_whatever_the_pieces() {
        let r = 0.05;
        let (start, end) = (DVec3::new(0.2, 0.5, 0.0), DVec3::new(0.8, 0.5, 0.0));
        let pieces: [&[f64]; 7] = [
            &[0.1],
            &[0.3],
            &[1.0],
            &[1.7],
            &[7.3],
            &[0.02, 0.5, 0.02, 3.1],
            &[0.4, 0.05, 2.2, 0.9, 0.13],
        ];
        for piece in pieces {
            // The cursor's positions, its steps taking the lengths `piece` (radii) in turn up to `end`.
            let mut cursor = vec![start];
            while let Some(&at) = cursor.last().filter(|&&at| at.x < end.x) {
                let step = piece[(cursor.len() - 1) % piece.len()] * r;
                cursor.push((at + DVec3::X * step).min(end));
            }
            let impulses: Vec<(DVec3, f64)> = cursor
                .windows(2)
                .flat_map(|w| along(w[0], w[1], r))
                .collect();
            assert!(impulses
                .windows(2)
                .all(|w| w[0].0.distance(w[1].0) <= 0.5 * r * (1.0 + 1e-12)));
            // Points on the path at least a radius from its ends, where the pushes of both sides reach.
            for k in 0..=400 {
                let x = (start + DVec3::X * r).lerp(end - DVec3::X * r, k as f64 / 400.0);
                let push: f64 = impulses
                    .iter()
                    .map(|&(c, share)| {
                        share * (1.0 - (c.distance_squared(x) / (r * r)).min(1.0)).powi(2)
                    })
                    .sum();
                assert!(
                    (0.97..=1.03).contains(&push),
                    "pieces of {piece:?} radii: a push of {push} at {x}"
                );
            }
        }
    }
}
