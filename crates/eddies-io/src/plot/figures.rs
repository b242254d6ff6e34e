//! The plots of a run: which keys each one reads, its axes and their units. A plot is made only when the run
//! wrote its keys, so each method gets the plots of its own quantities.

use super::draw::{Body, Figure, Layer, Line, Panel};
use super::reduce::{absolute_change, bin_means, downsample_min_max, relative_drift_percent};
use super::stats::StepColumns;

/// Points per line after thinning: about two per pixel column of a figure, so nothing visible is lost.
const LINE_POINTS: usize = 2000;

/// Bins of the stage-time figure: few enough that each band reads as an area, not as noise.
const STAGE_BINS: usize = 400;

/// The conserved quantity of each method, by key, with its name and unit: mass for reintegration tracking
/// (`reint`), fluid volume for FLIP, the length of the total circulation for vortex particles (`vpm`).
const CONSERVED: [(&str, &str, &str); 3] = [
    ("mass", "mass", "kg"),
    ("fluid_volume", "fluid volume", "m³"),
    ("circulation", "|circulation|", "m²/s"),
];

/// The running totals of mass that emitters added and sinks took away (reint, kg).
const MASS_SOURCES: (&str, &str) = ("mass_injected", "mass_removed");

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
    let (values, name, unit) = conserved(stats)?;
    let (drift, y_desc) = match relative_drift_percent(&values) {
        Some(drift) => (drift, format!("{name} drift (%)")),
        None => (absolute_change(&values), format!("{name} change ({unit})")),
    };
    Some(time_figure(
        stats,
        title,
        &format!("{name} conservation"),
        vec![panel(stats, y_desc, &drift, false)],
    ))
}

/// The method's conserved quantity per step, with its name and unit: the first of [`CONSERVED`] the run
/// wrote. Where emitters or sinks changed the mass, what is conserved is the balance
/// `mass − mass_injected + mass_removed`; a step lacking one of its terms is a gap.
fn conserved(stats: &StepColumns) -> Option<(Vec<Option<f64>>, &'static str, &'static str)> {
    let (key, name, unit) = CONSERVED
        .into_iter()
        .find(|(key, _, _)| stats.column(key).is_some())?;
    let values = stats.column(key)?;
    let (injected, removed) = (stats.column(MASS_SOURCES.0), stats.column(MASS_SOURCES.1));
    let changes = |column: Option<&[Option<f64>]>| {
        column.is_some_and(|c| c.iter().flatten().any(|v| *v != 0.0))
    };
    if key != "mass" || !(changes(injected) || changes(removed)) {
        return Some((values.to_vec(), name, unit));
    }
    let term = |column: Option<&[Option<f64>]>, i: usize| column.map_or(Some(0.0), |c| c[i]);
    let balance = (0..values.len())
        .map(|i| Some(values[i]? - term(injected, i)? + term(removed, i)?))
        .collect();
    Some((balance, "mass balance", unit))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mass_with_emitters_and_sinks_is_conserved_as_a_balance() {
        let stats = StepColumns::parse(
            "{\"mass\":2.0,\"mass_injected\":0.0,\"mass_removed\":0.0}\n\
             {\"mass\":2.5,\"mass_injected\":0.6,\"mass_removed\":0.1}\n\
             {\"mass\":2.6,\"mass_injected\":null,\"mass_removed\":0.1}",
        )
        .expect("valid stats");
        let (balance, name, _) = conserved(&stats).expect("mass");
        assert_eq!(name, "mass balance");
        assert_eq!(balance, [Some(2.0), Some(2.0), None]);
        let closed =
            StepColumns::parse("{\"mass\":2.0,\"mass_injected\":0.0,\"mass_removed\":0.0}")
                .expect("valid stats");
        assert_eq!(conserved(&closed).map(|c| c.1), Some("mass"));
    }

    #[test]
    fn each_method_conserves_its_own_quantity() {
        let flip =
            StepColumns::parse("{\"fluid_volume\":0.5,\"kinetic_energy\":1.0}").expect("flip");
        assert_eq!(conserved(&flip).map(|c| c.1), Some("fluid volume"));
        let vpm = StepColumns::parse("{\"circulation\":[0.0,3.0,4.0]}").expect("vpm");
        assert_eq!(
            conserved(&vpm).map(|c| (c.0, c.1)),
            Some((vec![Some(5.0)], "|circulation|"))
        );
        let none = StepColumns::parse("{\"kinetic_energy\":1.0}").expect("no conserved quantity");
        assert!(conserved(&none).is_none());
    }
}
