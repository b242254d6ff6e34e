//! Pure reductions of step columns into what a plot draws: drift of a conserved quantity, lines thinned to a
//! few thousand points without losing spikes, and bin averages.

/// A line as drawn: runs of points `(x, y)`, split wherever a value is missing so that a gap stays a gap.
pub type Segments = Vec<Vec<(f64, f64)>>;

/// The change of a conserved quantity relative to its first finite value, in percent:
/// `100 (q(t) − q₀) / |q₀|`. `None` when there is no finite reference or it is zero (a relative change is
/// then undefined; [`absolute_change`] is the fallback).
pub fn relative_drift_percent(values: &[Option<f64>]) -> Option<Vec<Option<f64>>> {
    let reference = values.iter().flatten().copied().find(|v| v.is_finite())?;
    if reference == 0.0 {
        return None;
    }
    let scale = 100.0 / reference.abs();
    Some(
        values
            .iter()
            .map(|v| v.map(|v| (v - reference) * scale))
            .collect(),
    )
}

/// The change of a quantity since its first finite value, `q(t) − q₀`, in the quantity's unit.
pub fn absolute_change(values: &[Option<f64>]) -> Vec<Option<f64>> {
    let reference = values.iter().flatten().copied().find(|v| v.is_finite());
    values
        .iter()
        .map(|v| v.zip(reference).map(|(v, r)| v - r))
        .collect()
}

/// The points `(x[i], y[i])` thinned to about `max_points`, as runs split at missing or non-finite values.
///
/// The steps are cut into bins of consecutive indices, and of each run's points in a bin only the smallest
/// and the largest `y` are kept, in the order they occur: the envelope of the line is preserved, so a
/// single-step spike stays visible however many steps a pixel covers. With no more points than
/// `max_points`, every point is kept.
pub fn downsample_min_max(x: &[Option<f64>], y: &[Option<f64>], max_points: usize) -> Segments {
    let count = x.len().min(y.len());
    let bin = count.div_ceil((max_points / 2).max(1)).max(1);
    let mut segments = Vec::new();
    let mut run: Vec<(f64, f64)> = Vec::new();
    // The extremes of the current run within the current bin: (index, x, y) of the smallest and largest y.
    let mut extremes: Option<(Sample, Sample)> = None;
    for i in 0..count {
        let point = x[i]
            .zip(y[i])
            .filter(|(x, y)| x.is_finite() && y.is_finite());
        let Some((px, py)) = point else {
            flush(&mut run, &mut extremes);
            if !run.is_empty() {
                segments.push(std::mem::take(&mut run));
            }
            continue;
        };
        if i % bin == 0 {
            flush(&mut run, &mut extremes);
        }
        let sample = (i, px, py);
        extremes = Some(match extremes {
            None => (sample, sample),
            Some((low, high)) => (
                if py < low.2 { sample } else { low },
                if py > high.2 { sample } else { high },
            ),
        });
    }
    flush(&mut run, &mut extremes);
    if !run.is_empty() {
        segments.push(run);
    }
    segments
}

/// A point of a line with its step index: `(index, x, y)`.
type Sample = (usize, f64, f64);

/// Appends the extremes of a bin to the run in the order they occur, once when they are the same point.
fn flush(run: &mut Vec<(f64, f64)>, extremes: &mut Option<(Sample, Sample)>) {
    if let Some((low, high)) = extremes.take() {
        let (first, second) = if low.0 <= high.0 {
            (low, high)
        } else {
            (high, low)
        };
        run.push((first.1, first.2));
        if second.0 != first.0 {
            run.push((second.1, second.2));
        }
    }
}

/// The mean of the finite values in each of `bins` bins of consecutive indices (`None` for a bin without
/// one), with the mean of `x` over the same bin. With no more values than `bins`, each value is its own bin.
pub fn bin_means(x: &[f64], values: &[Option<f64>], bins: usize) -> Vec<(f64, Option<f64>)> {
    let count = x.len().min(values.len());
    let width = count.div_ceil(bins.max(1)).max(1);
    (0..count)
        .step_by(width)
        .map(|start| {
            let end = (start + width).min(count);
            let centre = x[start..end].iter().sum::<f64>() / (end - start) as f64;
            let finite: Vec<f64> = values[start..end]
                .iter()
                .flatten()
                .copied()
                .filter(|v| v.is_finite())
                .collect();
            let mean =
                (!finite.is_empty()).then(|| finite.iter().sum::<f64>() / finite.len() as f64);
            (centre, mean)
        })
        .collect()
}

/// The largest magnitude a linear axis reaches. A diverging run writes values near the largest double just
/// before its nulls; an axis spanning them would have an infinite width (plotters then never finishes placing
/// its ticks), so the axis stops here and points beyond it are clipped.
const AXIS_LIMIT: f64 = f64::MAX / 4.0;

/// The span of a logarithmic axis: its top within `[1e-200, 1e200]` and at most [`LOG_DECADES`] decades
/// deep, so that its ends and margins stay normal doubles (plotters' ticks of an axis of infinite ratio
/// never end either).
const LOG_TOP: (f64, f64) = (1e-200, 1e200);

/// The most decades a logarithmic axis shows below its top.
const LOG_DECADES: i32 = 60;

/// The smallest and largest finite coordinate of the points, `None` when there are none.
pub fn bounds(points: impl IntoIterator<Item = f64>) -> Option<(f64, f64)> {
    points
        .into_iter()
        .filter(|v| v.is_finite())
        .fold(None, |span, v| match span {
            None => Some((v, v)),
            Some((lo, hi)) => Some((lo.min(v), hi.max(v))),
        })
}

/// A span of a linear axis widened by a margin of 5 % on each side, or around its value when it is a single
/// value, so that lines do not run along the frame; within ±[`AXIS_LIMIT`].
pub fn padded((lo, hi): (f64, f64)) -> (f64, f64) {
    let (lo, hi) = (
        lo.clamp(-AXIS_LIMIT, AXIS_LIMIT),
        hi.clamp(-AXIS_LIMIT, AXIS_LIMIT),
    );
    let width = hi - lo;
    if width > 0.0 {
        (lo - 0.05 * width, hi + 0.05 * width)
    } else if lo != 0.0 {
        (lo - 0.05 * lo.abs(), hi + 0.05 * lo.abs())
    } else {
        (-1.0, 1.0)
    }
}

/// A span of positive values for a logarithmic axis, widened by a twentieth of its decades on each side (a
/// factor of two around a single value), within the bounds of [`LOG_TOP`] and [`LOG_DECADES`].
pub fn log_padded((lo, hi): (f64, f64)) -> (f64, f64) {
    let hi = hi.clamp(LOG_TOP.0, LOG_TOP.1);
    let lo = lo.clamp(hi * 10f64.powi(-LOG_DECADES), hi);
    let margin = if hi > lo { (hi / lo).powf(0.05) } else { 2.0 };
    (lo / margin, hi * margin)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn some(values: &[f64]) -> Vec<Option<f64>> {
        values.iter().copied().map(Some).collect()
    }

    #[test]
    fn drift_of_mass_from_2_to_2_02_is_one_percent() {
        let drift =
            relative_drift_percent(&[None, Some(2.0), None, Some(2.02)]).expect("reference");
        assert_eq!(drift[0], None);
        assert_eq!(drift[1], Some(0.0));
        assert_eq!(drift[2], None);
        assert!((drift[3].expect("value") - 1.0).abs() < 1e-12);
    }

    #[test]
    fn drift_of_a_zero_reference_is_undefined_and_falls_back_to_the_change() {
        let values = some(&[0.0, 0.5, -0.25]);
        assert_eq!(relative_drift_percent(&values), None);
        assert_eq!(
            absolute_change(&values),
            [Some(0.0), Some(0.5), Some(-0.25)]
        );
        assert_eq!(relative_drift_percent(&[None, None]), None);
    }

    #[test]
    fn downsampling_keeps_a_one_step_spike_and_the_point_budget() {
        let n = 100_000;
        let x = some(&(0..n).map(|i| i as f64).collect::<Vec<_>>());
        let mut y = some(&vec![1.0; n]);
        y[54_321] = Some(50.0);
        let segments = downsample_min_max(&x, &y, 2000);
        assert_eq!(segments.len(), 1);
        let points = &segments[0];
        assert!(points.len() <= 2000, "{} points", points.len());
        assert!(points.contains(&(54_321.0, 50.0)));
        assert!(points.windows(2).all(|w| w[0].0 < w[1].0), "x in order");
    }

    #[test]
    fn downsampling_splits_runs_at_gaps_and_keeps_short_series_whole() {
        let x = some(&[0.0, 1.0, 2.0, 3.0, 4.0]);
        let y = vec![Some(1.0), Some(2.0), None, Some(f64::NAN), Some(5.0)];
        let segments = downsample_min_max(&x, &y, 2000);
        assert_eq!(segments, [vec![(0.0, 1.0), (1.0, 2.0)], vec![(4.0, 5.0)]]);
    }

    #[test]
    fn bin_means_average_finite_values_per_bin() {
        let x = [0.0, 1.0, 2.0, 3.0, 4.0];
        let means = bin_means(&x, &[Some(1.0), Some(3.0), None, None, Some(7.0)], 3);
        assert_eq!(means, [(0.5, Some(2.0)), (2.5, None), (4.0, Some(7.0))]);
    }

    #[test]
    fn padding_widens_spans_and_single_values() {
        assert_eq!(padded((0.0, 10.0)), (-0.5, 10.5));
        assert_eq!(padded((2.0, 2.0)), (1.9, 2.1));
        assert_eq!(padded((0.0, 0.0)), (-1.0, 1.0));
    }

    #[test]
    fn axes_of_a_diverged_run_stay_finite() {
        let (lo, hi) = padded((-f64::MAX, f64::MAX));
        assert!((hi - lo).is_finite() && lo < 0.0 && hi > 0.0);
        let (lo, hi) = log_padded((5e-324, 1e300));
        assert!(lo > 0.0 && hi.is_finite() && (hi / lo).is_finite());
        assert_eq!(log_padded((1e-3, 1e-3)), (5e-4, 2e-3));
        let (lo, hi) = log_padded((1e-4, 1e-2));
        assert!(
            (lo / 1e-4 - 10f64.powf(-0.1)).abs() < 1e-12
                && (hi / 1e-2 - 10f64.powf(0.1)).abs() < 1e-12
        );
        assert_eq!(
            bounds([1.0, f64::INFINITY, -2.0, f64::NAN]),
            Some((-2.0, 1.0))
        );
    }
}
