//! The viewer's side panel and keys: run controls, the field chooser, the live parameters and the run's
//! figures. Widgets and keys turn into [`Action`]s that the window carries out.

use egui::{Color32, Key, RichText};

use super::worker::{Command, Stats};

/// Width of the side panel (logical pixels).
const PANEL_WIDTH: f32 = 270.0;

/// What a widget or key asks for.
pub enum Action {
    /// Tell the simulation thread.
    Send(Command),
    /// Close the viewer.
    Quit,
}

/// Where a parameter of the scene is changed from the panel, and how the change is applied.
#[derive(Clone, Debug, PartialEq)]
pub struct Param {
    /// Label in the panel, with its unit.
    pub label: &'static str,
    /// The scene key (`--set` syntax) it overrides.
    pub key: &'static str,
    /// Its value.
    pub value: f64,
}

/// The panel's state.
pub struct Controls {
    /// The scene's name and how it runs (method, dimension, backend).
    pub heading: String,
    /// Whether the simulation steps.
    pub running: bool,
    /// The fields and views to choose from, and the one shown.
    pub views: Vec<String>,
    /// The view shown.
    pub view: String,
    /// time.cfl, applied live.
    pub cfl: f64,
    /// Parameters applied by rebuilding the simulation from the scene with them as overrides.
    pub rebuilt: Vec<Param>,
    /// Gravity (m/s²), one component per axis, applied by rebuilding.
    pub gravity: Vec<f64>,
}

impl Controls {
    /// The `--set` overrides of the rebuilt parameters.
    pub fn sets(&self) -> Vec<String> {
        let g: Vec<String> = self.gravity.iter().map(|g| format!("{g}")).collect();
        self.rebuilt
            .iter()
            .map(|p| format!("{}={}", p.key, p.value))
            .chain([format!("domain.gravity=[{}]", g.join(", "))])
            .collect()
    }
}

/// Space pauses or resumes, S or → steps once when paused, R resets, Esc or Q quits.
pub fn keys(ui: &egui::Ui, controls: &Controls, actions: &mut Vec<Action>) {
    let pressed = |k: Key| ui.input(|i| i.key_pressed(k));
    if pressed(Key::Space) {
        actions.push(Action::Send(Command::Run(!controls.running)));
    }
    if (pressed(Key::S) || pressed(Key::ArrowRight)) && !controls.running {
        actions.push(Action::Send(Command::StepOnce));
    }
    if pressed(Key::R) {
        actions.push(Action::Send(Command::Reset));
    }
    if pressed(Key::Escape) || pressed(Key::Q) {
        actions.push(Action::Quit);
    }
}

/// The side panel, on the right; returns its left edge, which the picture keeps left of.
pub fn side_panel(
    ui: &mut egui::Ui,
    controls: &mut Controls,
    stats: &Stats,
    fps: f64,
    actions: &mut Vec<Action>,
) -> f32 {
    // The panel's outer left edge (its response covers only the inside of its frame).
    let left = ui.max_rect().max.x - PANEL_WIDTH;
    egui::Panel::right("controls")
        .exact_size(PANEL_WIDTH)
        .resizable(false)
        .show(ui, |ui| {
            ui.heading("eddies view");
            ui.label(&controls.heading);
            ui.separator();
            run_buttons(ui, controls, actions);
            ui.separator();
            let before = controls.view.clone();
            egui::ComboBox::from_label("field")
                .selected_text(&controls.view)
                .show_ui(ui, |ui| {
                    for v in &controls.views {
                        ui.selectable_value(&mut controls.view, v.clone(), v);
                    }
                });
            if controls.view != before {
                actions.push(Action::Send(Command::Field(controls.view.clone())));
            }
            ui.separator();
            parameters(ui, controls, actions);
            ui.separator();
            figures(ui, stats, fps);
            ui.separator();
            ui.small(
                "Left drag: push the fluid. Right drag or Alt + drag: turn the camera (3D); wheel: zoom \
                 (3D). Space: pause/resume, S or Right: one step, R: reset, Esc or Q: quit.",
            );
        });
    left
}

fn run_buttons(ui: &mut egui::Ui, controls: &Controls, actions: &mut Vec<Action>) {
    ui.horizontal(|ui| {
        let label = if controls.running {
            "Pause (Space)"
        } else {
            "Run (Space)"
        };
        if ui.button(label).clicked() {
            actions.push(Action::Send(Command::Run(!controls.running)));
        }
        if ui
            .add_enabled(!controls.running, egui::Button::new("Step (S)"))
            .clicked()
        {
            actions.push(Action::Send(Command::StepOnce));
        }
    });
    ui.horizontal(|ui| {
        if ui.button("Reset (R)").clicked() {
            actions.push(Action::Send(Command::Reset));
        }
        if ui.button("Quit (Esc)").clicked() {
            actions.push(Action::Quit);
        }
    });
}

fn parameters(ui: &mut egui::Ui, controls: &mut Controls, actions: &mut Vec<Action>) {
    ui.label(RichText::new("Live").strong());
    let cfl = ui.add(egui::Slider::new(&mut controls.cfl, 0.05..=1.0).text("time.cfl"));
    if cfl.changed() {
        actions.push(Action::Send(Command::Cfl(controls.cfl)));
    }
    ui.label(RichText::new("Applied by rebuilding from the scene").strong());
    for p in &mut controls.rebuilt {
        ui.add(
            egui::DragValue::new(&mut p.value)
                .speed(1e-5)
                .range(0.0..=1e6)
                .prefix(format!("{} ", p.label)),
        );
    }
    ui.horizontal(|ui| {
        ui.label("gravity (m/s²)");
        for g in &mut controls.gravity {
            ui.add(egui::DragValue::new(g).speed(0.1).range(-1e3..=1e3));
        }
    });
    if ui
        .button("Apply (restarts the run)")
        .on_hover_text("these parameters are set when the simulation is built")
        .clicked()
    {
        actions.push(Action::Send(Command::Rebuild(controls.sets())));
    }
}

fn figures(ui: &mut egui::Ui, stats: &Stats, fps: f64) {
    egui::Grid::new("figures").num_columns(2).show(ui, |ui| {
        let mut row = |name: &str, value: String| {
            ui.label(name);
            ui.monospace(value);
            ui.end_row();
        };
        row("steps", stats.steps.to_string());
        row("time", format!("{:.4} s", stats.time));
        row("dt", format!("{:.3e} s", stats.dt));
        row("step time", format!("{:.2} ms", stats.step_ms));
        row("steps/s", format!("{:.0}", stats.steps_per_s));
        row("displayed fps", format!("{fps:.0}"));
        for (name, value) in &stats.quantities {
            let unit = match *name {
                "mass" => "kg",
                "fluid_volume" => "m³ (m² in 2D)",
                "kinetic_energy" => "J",
                _ => "m/s",
            };
            row(name, format!("{value:.5e} {unit}"));
        }
    });
    if let Some(e) = &stats.error {
        ui.colored_label(Color32::from_rgb(255, 110, 90), e);
    }
}
