//! The plots of a run: which keys each one reads, its axes and their units. A plot is made only when the run
//! wrote its keys, so each method gets the plots of its own quantities.

use super::draw::{Body, Figure, Layer, Line, Panel};
use super::reduce::{absolute_change, bin_means, downsample_min_max, relative_drift_percent};
use super::stats::StepColumns;

/// Points per line after thinning: about two per pixel column of a figure, so nothing visible is lost.
const LINE_POINTS: usize = 2000;

/// Bins of the stage-time figure: few enough that each band reads as an area, not as noise.
const STAGE_BINS: usize = 400;

/// The conserved quantity of each method, by key, with its name and unit: mass for the reinitialised level
/// set (`reint`), fluid volume for FLIP, the length of the total circulation for vortex particles (`vpm`).
const CONSERVED: [(&str, &str, &str); 3] = [
    ("mass", "mass", "kg"),
    ("fluid_volume", "fluid volume", "m³"),
    ("circulation", "|circulation|", "m²/s"),
];

/// A plot: the figure of a run, or `None` when the run did not write its keys.
type PlotFn = fn(&StepColumns, &str) -> Option<Figure>;

/// The plots in the order they are written, each with its file stem.
const PLOTS: [(&str, PlotFn); 7] = [
    ("conservation", plot_conservation),
    ("energy", plot_energy),
    ("max_speed", plot_max_speed),
    ("dt", plot_dt),
    ("solver", plot_solver),
    ("jerk", plot_jerk),
    ("stages", plot_stages),
];

/// Every plot whose keys the run wrote, each with the file stem it is written under.
pub fn all_figures(stats: &StepColumns, title: &str) -> Vec<(&'static str, Figure)> {
    PLOTS
        .into_iter()
        .filter_map(|(stem, plot)| Some((stem, plot(stats, title)?)))
        .collect()
}

/// The drift of the method's conserved quantity against time, in percent of its first value; as the change
/// in its unit when that first value is zero (a relative drift is then undefined).
pub fn plot_conservation(stats: &StepColumns, title: &str) -> Option<Figure> {
    let (values, name, unit) = CONSERVED
        .iter()
        .find_map(|&(key, name, unit)| Some((stats.column(key)?, name, unit)))?;
    let (drift, y_desc) = match relative_drift_percent(values) {
        Some(drift) => (drift, format!("{name} drift (%)")),
        None => (absolute_change(values), format!("{name} change ({unit})")),
    };
    Some(time_figure(
        stats,
        title,
        &format!("{name} conservation"),
        vec![panel(stats, y_desc, &drift, false)],
    ))
}

/// Kinetic energy against time.
pub fn plot_energy(stats: &StepColumns, title: &str) -> Option<Figure> {
    single_key(
        stats,
        title,
        "kinetic_energy",
        "kinetic energy",
        "kinetic energy (J)",
        false,
    )
}

/// The largest speed in the domain against time.
pub fn plot_max_speed(stats: &StepColumns, title: &str) -> Option<Figure> {
    single_key(
        stats,
        title,
        "max_speed",
        "maximum speed",
        "max speed (m/s)",
        false,
    )
}

/// The time step against time, on a logarithmic axis (adaptive steps change by orders of magnitude).
pub fn plot_dt(stats: &StepColumns, title: &str) -> Option<Figure> {
    single_key(stats, title, "dt", "time step", "dt (s)", true)
}

/// The pressure solve: iterations per step above, the final residual (logarithmic) below.
pub fn plot_solver(stats: &StepColumns, title: &str) -> Option<Figure> {
    let mut panels = Vec::new();
    if let Some(iterations) = stats.column("pressure_iterations") {
        panels.push(panel(
            stats,
            "pressure iterations".into(),
            iterations,
            false,
        ));
    }
    if let Some(residual) = stats.column("pressure_residual") {
        panels.push(panel(stats, "pressure residual".into(), residual, true));
    }
    (!panels.is_empty()).then(|| time_figure(stats, title, "pressure solve", panels))
}

/// The mean jerk of the vortex particles (the rate of change of their acceleration) against time.
pub fn plot_jerk(stats: &StepColumns, title: &str) -> Option<Figure> {
    single_key(
        stats,
        title,
        "mean_jerk",
        "mean jerk",
        "mean jerk (m/s³)",
        false,
    )
}

/// The wall time of each solver stage, stacked, against the step. Long runs are averaged over
/// [`STAGE_BINS`] bins of steps. A stage missing from a step took no time in it, so it adds nothing to the
/// stack there.
pub fn plot_stages(stats: &StepColumns, title: &str) -> Option<Figure> {
    let stages = stats.stages();
    if !stages.iter().any(|(_, ms)| ms.iter().any(Option::is_some)) {
        return None;
    }
    let (steps, x_desc) = step_axis(stats);
    let mut layers: Vec<Layer> = Vec::with_capacity(stages.len());
    for (name, ms) in stages {
        let means = bin_means(&steps, ms, STAGE_BINS);
        let below = layers.last().map(|layer| layer.top.as_slice());
        let top = means
            .iter()
            .enumerate()
            .map(|(i, &(x, mean))| (x, mean.unwrap_or(0.0) + below.map_or(0.0, |b| b[i].1)))
            .collect();
        layers.push(Layer {
            label: name.clone(),
            top,
        });
    }
    Some(Figure {
        caption: format!("{title}: time per stage"),
        x_desc: x_desc.into(),
        body: Body::Stacked {
            y_desc: "wall time per step (ms)".into(),
            layers,
        },
    })
}

/// A figure of one key against time, or `None` when the run did not write it.
fn single_key(
    stats: &StepColumns,
    title: &str,
    key: &str,
    what: &str,
    y_desc: &str,
    log_y: bool,
) -> Option<Figure> {
    let values = stats.column(key)?;
    Some(time_figure(
        stats,
        title,
        what,
        vec![panel(stats, y_desc.into(), values, log_y)],
    ))
}

/// A figure of panels against simulated time.
fn time_figure(stats: &StepColumns, title: &str, what: &str, panels: Vec<Panel>) -> Figure {
    Figure {
        caption: format!("{title}: {what}"),
        x_desc: if stats.column("time").is_some() {
            "time (s)"
        } else {
            "step"
        }
        .into(),
        body: Body::Lines(panels),
    }
}

/// One line of `values` against time (the step where the run wrote no time), thinned to [`LINE_POINTS`]. On
/// a logarithmic axis a value that is not positive is a gap.
fn panel(stats: &StepColumns, y_desc: String, values: &[Option<f64>], log_y: bool) -> Panel {
    let x: Vec<Option<f64>> = match stats.column("time") {
        Some(time) => time.to_vec(),
        None => step_axis(stats).0.into_iter().map(Some).collect(),
    };
    let segments = if log_y {
        let positive: Vec<Option<f64>> = values.iter().map(|v| v.filter(|v| *v > 0.0)).collect();
        downsample_min_max(&x, &positive, LINE_POINTS)
    } else {
        downsample_min_max(&x, values, LINE_POINTS)
    };
    Panel {
        y_desc: y_desc.clone(),
        log_y,
        lines: vec![Line {
            label: y_desc,
            segments,
        }],
    }
}

/// The step number of every line (its index where the step is missing), and the axis label.
fn step_axis(stats: &StepColumns) -> (Vec<f64>, &'static str) {
    let written = stats.column("step");
    let steps = (0..stats.steps())
        .map(|i| written.and_then(|s| s[i]).unwrap_or(i as f64))
        .collect();
    (steps, "step")
}
