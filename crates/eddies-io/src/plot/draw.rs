//! Figures drawn with plotters onto any backend, and rendered as SVG text and PNG bytes. Text is set in the
//! bundled DejaVu Sans through ab_glyph: no system font lookup, so a machine without fontconfig draws the
//! same picture.

use std::sync::OnceLock;

use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::reduce::{bounds, log_padded, padded, Segments};
use super::PlotError;
use crate::FONT;

/// Width and height of every figure, in pixels (PNG) and user units (SVG).
pub const SIZE: (u32, u32) = (1200, 700);

/// The family the bundled font is registered under: the one plotters asks for by default, and the one an
/// SVG viewer substitutes its own sans-serif font for.
const FAMILY: &str = "sans-serif";

/// Colours of successive lines and stages: Tableau 10, the default cycle of matplotlib, familiar to readers.
const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// The colour of the `index`-th line or stage.
pub fn colour(index: usize) -> RGBColor {
    PALETTE[index % PALETTE.len()]
}

/// One named line of a panel.
pub struct Line {
    /// Shown in the legend when a panel has more than one line.
    pub label: String,
    /// The points, split at gaps.
    pub segments: Segments,
}

/// One chart of a figure: its lines against a shared x axis.
pub struct Panel {
    /// The y axis label, with the unit.
    pub y_desc: String,
    /// A logarithmic y axis (non-positive values must already be gaps).
    pub log_y: bool,
    /// The lines, coloured in order.
    pub lines: Vec<Line>,
}

/// One stage's band in a stacked-area figure.
pub struct Layer {
    /// The stage name, shown in the legend.
    pub label: String,
    /// The top of the band `(x, y)`: the sum of this and all earlier stages.
    pub top: Vec<(f64, f64)>,
}

/// What a figure shows.
pub enum Body {
    /// Panels stacked vertically over one x axis.
    Lines(Vec<Panel>),
    /// Bands stacked from the first layer up, with a legend.
    Stacked {
        /// The y axis label, with the unit.
        y_desc: String,
        /// The bands, first at the bottom.
        layers: Vec<Layer>,
    },
}

/// A figure: caption, x axis and body.
pub struct Figure {
    /// The caption over the figure: the run's name and what is shown.
    pub caption: String,
    /// The x axis label, with the unit.
    pub x_desc: String,
    /// The charts.
    pub body: Body,
}

/// How lines are stroked on a backend.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Stroke {
    /// One polyline per run of points (SVG: the viewer joins the corners).
    Polylines,
    /// One stroke per pair of points. plotters' raster joins of wide lines go astray at sharp turns (the
    /// inner corner of a spike is mitred far past the axes) and at repeated pixels; strokes without joins
    /// do not.
    Pieces,
}

type Drawn<DB> = Result<(), DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

/// Width of the legend strip beside a stacked figure, in pixels.
const LEGEND_WIDTH: u32 = 230;

/// Registers the bundled font with plotters, once per process.
pub fn register_font() -> Result<(), PlotError> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let registered = REGISTERED
        .get_or_init(|| plotters::style::register_font(FAMILY, FontStyle::Normal, FONT).is_ok());
    if *registered {
        Ok(())
    } else {
        Err(PlotError::Font)
    }
}

/// The figure as an SVG document.
pub fn render_svg(figure: &Figure) -> Result<String, String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        figure
            .draw(&root, Stroke::Polylines)
            .map_err(|e| e.to_string())?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(svg)
}

/// The figure as PNG bytes (8-bit RGB).
pub fn render_png(figure: &Figure) -> Result<Vec<u8>, String> {
    let (width, height) = SIZE;
    let mut pixels = vec![0; width as usize * height as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut pixels, SIZE).into_drawing_area();
        figure
            .draw(&root, Stroke::Pieces)
            .map_err(|e| e.to_string())?;
        root.present().map_err(|e| e.to_string())?;
    }
    let mut png = Vec::new();
    let mut encoder = png::Encoder::new(&mut png, width, height);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header().map_err(|e| e.to_string())?;
    writer
        .write_image_data(&pixels)
        .map_err(|e| e.to_string())?;
    writer.finish().map_err(|e| e.to_string())?;
    Ok(png)
}

/// A tick label: four significant digits in plain decimals for ordinary magnitudes, scientific notation for
/// tiny and huge ones.
fn tick_label(value: &f64) -> String {
    let magnitude = value.abs();
    if magnitude != 0.0 && !(1e-4..1e6).contains(&magnitude) {
        return format!("{value:.1e}");
    }
    let decimals = if magnitude == 0.0 {
        0
    } else {
        (3 - magnitude.log10().floor() as i32).max(0) as usize
    };
    let fixed = format!("{value:.decimals$}");
    let trimmed = if fixed.contains('.') {
        fixed.trim_end_matches('0').trim_end_matches('.')
    } else {
        &fixed
    };
    if trimmed == "-0" { "0" } else { trimmed }.to_string()
}

/// A tick label of a logarithmic axis: a power of ten or a multiple of one.
fn log_tick_label(value: &f64) -> String {
    format!("{value:.0e}")
}

impl Figure {
    /// Draws the figure onto `root`, its lines stroked as `stroke` says.
    pub fn draw<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
        stroke: Stroke,
    ) -> Drawn<DB> {
        root.fill(&WHITE)?;
        let area = root.titled(&self.caption, (FAMILY, 30))?;
        match &self.body {
            Body::Lines(panels) => {
                let x_span = bounds(panels.iter().flat_map(|panel| {
                    panel
                        .lines
                        .iter()
                        .flat_map(|line| line.segments.iter().flatten().map(|p| p.0))
                }));
                let x_span = padded(x_span.unwrap_or((0.0, 1.0)));
                let areas = area.split_evenly((panels.len().max(1), 1));
                for (panel, area) in panels.iter().zip(&areas) {
                    self.draw_panel(area, x_span, panel, stroke)?;
                }
            }
            Body::Stacked { y_desc, layers } => self.draw_stacked(&area, y_desc, layers)?,
        }
        Ok(())
    }

    fn draw_panel<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
        x_span: (f64, f64),
        panel: &Panel,
        stroke: Stroke,
    ) -> Drawn<DB> {
        let y_values = panel
            .lines
            .iter()
            .flat_map(|line| line.segments.iter().flatten().map(|p| p.1));
        let y_span = bounds(y_values);
        let x_range = x_span.0..x_span.1;
        let mut builder = ChartBuilder::on(area);
        builder
            .margin(12)
            .x_label_area_size(50)
            .y_label_area_size(95);
        if panel.log_y {
            let (lo, hi) = log_padded(y_span.unwrap_or((1.0, 10.0)));
            let mut chart = builder.build_cartesian_2d(x_range, (lo..hi).log_scale())?;
            chart
                .configure_mesh()
                .x_desc(&self.x_desc)
                .y_desc(&panel.y_desc)
                .x_label_formatter(&tick_label)
                .y_label_formatter(&log_tick_label)
                .axis_desc_style((FAMILY, 20))
                .label_style((FAMILY, 15))
                .draw()?;
            draw_lines(&mut chart, &panel.lines, stroke)
        } else {
            let (lo, hi) = padded(y_span.unwrap_or((-1.0, 1.0)));
            let mut chart = builder.build_cartesian_2d(x_range, lo..hi)?;
            chart
                .configure_mesh()
                .x_desc(&self.x_desc)
                .y_desc(&panel.y_desc)
                .x_label_formatter(&tick_label)
                .y_label_formatter(&tick_label)
                .axis_desc_style((FAMILY, 20))
                .label_style((FAMILY, 15))
                .draw()?;
            draw_lines(&mut chart, &panel.lines, stroke)
        }
    }

    /// Draws the bands with their legend in a strip to the right, so that it never hides the stack.
    fn draw_stacked<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
        y_desc: &str,
        layers: &[Layer],
    ) -> Drawn<DB> {
        let (width, _) = area.dim_in_pixel();
        let (plot_area, legend_area) = area.split_horizontally(width.saturating_sub(LEGEND_WIDTH));
        let x_span = bounds(
            layers
                .iter()
                .flat_map(|layer| layer.top.iter().map(|p| p.0)),
        );
        let (x0, x1) = padded(x_span.unwrap_or((0.0, 1.0)));
        let top = bounds(
            layers
                .iter()
                .flat_map(|layer| layer.top.iter().map(|p| p.1)),
        );
        let y_max = top.map_or(
            1.0,
            |(_, hi)| if hi > 0.0 { padded((0.0, hi)).1 } else { 1.0 },
        );
        let mut chart = ChartBuilder::on(&plot_area)
            .margin(12)
            .x_label_area_size(50)
            .y_label_area_size(95)
            .build_cartesian_2d(x0..x1, 0.0..y_max)?;
        chart
            .configure_mesh()
            .x_desc(&self.x_desc)
            .y_desc(y_desc)
            .x_label_formatter(&tick_label)
            .y_label_formatter(&tick_label)
            .axis_desc_style((FAMILY, 20))
            .label_style((FAMILY, 15))
            .draw()?;
        // The highest band first, each filled down to zero, so that every later (lower) band covers the
        // part of it below its own top: what is left visible of each is its own share.
        for (index, layer) in layers.iter().enumerate().rev() {
            let fill = colour(index).filled();
            chart.draw_series(AreaSeries::new(layer.top.iter().copied(), 0.0, fill))?;
        }
        // The legend lists the bands top down, as they are stacked.
        for (row, (index, layer)) in layers.iter().enumerate().rev().enumerate() {
            let y = 24 + 28 * row as i32;
            let fill = colour(index).filled();
            legend_area.draw(&Rectangle::new([(8, y - 7), (26, y + 7)], fill))?;
            let font = TextStyle::from((FAMILY, 17)).pos(Pos::new(HPos::Left, VPos::Center));
            legend_area.draw(&Text::new(layer.label.as_str(), (34, y), font))?;
        }
        Ok(())
    }
}

/// Draws each line's segments in its colour (a segment of one point, between two gaps, as a dot), with a
/// legend when there is more than one line.
fn draw_lines<'a, DB, Y>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<RangedCoordf64, Y>>,
    lines: &[Line],
    stroke: Stroke,
) -> Drawn<DB>
where
    DB: DrawingBackend + 'a,
    Y: Ranged<ValueType = f64>,
{
    for (index, line) in lines.iter().enumerate() {
        let style = colour(index).stroke_width(2);
        let area = chart.plotting_area();
        for segment in &line.segments {
            match (segment.as_slice(), stroke) {
                ([point], _) => area.draw(&Circle::new(*point, 3, style.filled()))?,
                (_, Stroke::Polylines) => {
                    area.draw(&PathElement::new(segment.as_slice(), style))?
                }
                (_, Stroke::Pieces) => {
                    for pair in segment.windows(2) {
                        if area.map_coordinate(&pair[0]) != area.map_coordinate(&pair[1]) {
                            area.draw(&PathElement::new(pair, style))?;
                        }
                    }
                }
            }
        }
        // An empty series carries the legend entry.
        chart
            .draw_series(std::iter::empty::<PathElement<(f64, f64)>>())?
            .label(&line.label)
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], style));
    }
    if lines.len() > 1 {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font((FAMILY, 16))
            .draw()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tick_labels_are_short_at_every_magnitude() {
        assert_eq!(tick_label(&0.25), "0.25");
        assert_eq!(tick_label(&0.525), "0.525");
        assert_eq!(tick_label(&0.00025), "0.00025");
        assert_eq!(tick_label(&12.5), "12.5");
        assert_eq!(tick_label(&1000.0), "1000");
        assert_eq!(tick_label(&100000.0), "100000");
        assert_eq!(tick_label(&0.0), "0");
        assert_eq!(tick_label(&-0.00001), "-1.0e-5");
        assert_eq!(tick_label(&2.5e6), "2.5e6");
        assert_eq!(log_tick_label(&0.001), "1e-3");
    }
}
