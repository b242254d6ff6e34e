//! Annotations drawn onto a frame: the simulated time (top left), a scale bar of a round length in metres
//! (bottom left) and, for a colour-mapped picture, a colour bar with the quantity's name, unit and the values
//! at the map's ends (top right). Text is set in eddies-io's bundled DejaVu Sans with ab_glyph, white on a
//! translucent dark box, so that it reads on dark and light pictures alike.
//!
//! Any RGB image can be annotated: the 2D frames, the 3D renderer's (with the metres per pixel at its camera
//! target) and the viewer's. Everything is sized from the image's shorter side.

use ab_glyph::{point, Font, FontRef, PxScale, ScaleFont};
use image::RgbImage;

use crate::render::{Legend, LegendScale};

/// What to annotate a frame with.
#[derive(Clone, Copy, Debug, Default)]
pub struct Annotation<'a> {
    /// Simulated time (s).
    pub time: f64,
    /// The length a pixel spans (m), where lengths are meant to be read; no scale bar when `None`.
    pub metres_per_pixel: Option<f64>,
    /// What the colours mean; no colour bar when `None`.
    pub legend: Option<&'a Legend>,
}

/// A rectangle of pixels, (x, y) its top-left corner.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rect {
    /// Left column.
    pub x: u32,
    /// Top row.
    pub y: u32,
    /// Width (pixels).
    pub w: u32,
    /// Height (pixels).
    pub h: u32,
}

/// The scale bar as drawn.
#[derive(Clone, Debug, PartialEq)]
pub struct ScaleBar {
    /// The length it stands for (m): 1, 2 or 5 × 10^k.
    pub metres: f64,
    /// Its label, e.g. "0.2 m".
    pub label: String,
    /// The bar itself (white), without its label.
    pub bar: Rect,
}

/// Where [`annotate`] drew, for callers that place things around the annotations (and for tests).
#[derive(Clone, Debug, PartialEq)]
pub struct Drawn {
    /// The box holding the time.
    pub time: Rect,
    /// The scale bar, if one was asked for.
    pub scale_bar: Option<ScaleBar>,
    /// The colour ramp of the colour bar, its first column the map's first colour and its last column the
    /// map's last, if a legend was given.
    pub color_bar: Option<Rect>,
}

/// How much of the picture a box behind text lets through.
const BOX_TRANSMISSION: f32 = 0.4;

/// The colour of text and of the scale bar.
const INK: [u8; 3] = [255, 255, 255];

/// The font, parsed from the bytes compiled into eddies-io.
fn font() -> FontRef<'static> {
    // The bundled file is a valid font; a test parses it.
    FontRef::try_from_slice(eddies_io::FONT).expect("the bundled DejaVu Sans parses")
}

/// Sizes derived from the image's shorter side.
struct Metrics {
    /// Text height (pixels).
    text: f32,
    /// Distance of the boxes from the image's edges.
    margin: u32,
    /// Padding inside a box.
    pad: u32,
}

impl Metrics {
    fn of(img: &RgbImage) -> Self {
        let side = img.width().min(img.height()) as f32;
        let text = (side / 32.0).clamp(11.0, 32.0);
        Self {
            text,
            margin: (text * 0.6).round() as u32,
            pad: (text * 0.35).round().max(2.0) as u32,
        }
    }

    /// The height of a line of text (ascent to descent).
    fn line(&self, font: &FontRef) -> u32 {
        let f = font.as_scaled(PxScale::from(self.text));
        (f.ascent() - f.descent()).ceil() as u32
    }
}

/// Draws the annotations onto `img`; returns where.
pub fn annotate(img: &mut RgbImage, a: &Annotation) -> Drawn {
    let font = font();
    let m = Metrics::of(img);
    let time = draw_time(img, &font, &m, a.time);
    let scale_bar = a
        .metres_per_pixel
        .filter(|mpp| mpp.is_finite() && *mpp > 0.0)
        .map(|mpp| draw_scale_bar(img, &font, &m, mpp));
    let color_bar = a.legend.map(|l| draw_color_bar(img, &font, &m, l));
    Drawn {
        time,
        scale_bar,
        color_bar,
    }
}

/// The time, as "t = 1.250 s".
pub fn time_label(time: f64) -> String {
    format!("t = {time:.3} s")
}

fn draw_time(img: &mut RgbImage, font: &FontRef, m: &Metrics, time: f64) -> Rect {
    let label = time_label(time);
    let w = text_width(font, m.text, &label) + 2 * m.pad;
    let h = m.line(font) + 2 * m.pad;
    let rect = Rect {
        x: m.margin,
        y: m.margin,
        w,
        h,
    };
    shade(img, rect);
    draw_text(img, font, m.text, rect.x + m.pad, rect.y + m.pad, &label);
    rect
}

/// The round length (1, 2 or 5 × 10^k m) nearest, by ratio, to `target` metres, and its label.
pub fn round_length(target: f64) -> (f64, String) {
    let mut k = target.log10().floor() as i32;
    let mut mantissa = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .min_by(|a, b| {
            let off = |x: f64| (x * 10f64.powi(k) / target).ln().abs();
            off(*a).total_cmp(&off(*b))
        })
        .unwrap_or(1.0);
    if mantissa == 10.0 {
        mantissa = 1.0;
        k += 1;
    }
    let metres = mantissa * 10f64.powi(k);
    let decimals = (-k).max(0) as usize;
    (metres, format!("{metres:.decimals$} m"))
}

fn draw_scale_bar(img: &mut RgbImage, font: &FontRef, m: &Metrics, mpp: f64) -> ScaleBar {
    let (metres, label) = round_length(0.2 * img.width() as f64 * mpp);
    let length = (metres / mpp).round().max(1.0) as u32;
    let thickness = (m.text / 4.0).round().max(3.0) as u32;
    let line = m.line(font);
    let w = length.max(text_width(font, m.text, &label)) + 2 * m.pad;
    let h = line + thickness + 3 * m.pad;
    let rect = Rect {
        x: m.margin,
        y: img.height().saturating_sub(m.margin + h),
        w,
        h,
    };
    shade(img, rect);
    draw_text(img, font, m.text, rect.x + m.pad, rect.y + m.pad, &label);
    let bar = Rect {
        x: rect.x + m.pad,
        y: rect.y + 2 * m.pad + line,
        w: length,
        h: thickness,
    };
    fill(img, bar, |_| INK);
    ScaleBar { metres, label, bar }
}

/// A value for a label: three significant digits, in scientific notation beyond 10⁻³…10⁵.
pub fn format_value(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".to_string()
    } else if (1e-3..1e5).contains(&a) {
        let decimals = (2 - a.log10().floor() as i32).max(0) as usize;
        format!("{v:.decimals$}")
    } else {
        format!("{v:.2e}")
    }
}

/// The colour bar's title: the quantity and its unit (none for "1").
pub fn legend_title(legend: &Legend) -> String {
    let mut title = legend.field.clone();
    if legend.unit != eddies::units::DIMENSIONLESS {
        title.push_str(&format!(" ({})", legend.unit));
    }
    if legend.values == LegendScale::Sqrt {
        title.push_str(", √ scale");
    }
    title
}

fn draw_color_bar(img: &mut RgbImage, font: &FontRef, m: &Metrics, legend: &Legend) -> Rect {
    let title = legend_title(legend);
    let (lo, hi) = legend.range();
    let (lo, hi) = (format_value(lo), format_value(hi));
    let line = m.line(font);
    let ends = text_width(font, m.text, &lo) + text_width(font, m.text, &hi) + m.text as u32;
    let length = (img.width() / 4)
        .max(text_width(font, m.text, &title))
        .max(ends);
    let thickness = (m.text * 0.8).round() as u32;
    let w = length + 2 * m.pad;
    let h = 2 * line + thickness + 4 * m.pad;
    let rect = Rect {
        x: img.width().saturating_sub(m.margin + w),
        y: m.margin,
        w,
        h,
    };
    shade(img, rect);
    let x = rect.x + m.pad;
    draw_text(img, font, m.text, x, rect.y + m.pad, &title);
    let bar = Rect {
        x,
        y: rect.y + 2 * m.pad + line,
        w: length,
        h: thickness,
    };
    let last = (length.max(2) - 1) as f64;
    fill(img, bar, |col| legend.scale.rgb_at(col as f64 / last));
    let below = bar.y + thickness + m.pad;
    draw_text(img, font, m.text, x, below, &lo);
    let hi_x = x + length - text_width(font, m.text, &hi).min(length);
    draw_text(img, font, m.text, hi_x, below, &hi);
    bar
}

/// Darkens `rect` (clipped to the image): a translucent black box.
fn shade(img: &mut RgbImage, rect: Rect) {
    let (w, h) = img.dimensions();
    for y in rect.y..(rect.y + rect.h).min(h) {
        for x in rect.x..(rect.x + rect.w).min(w) {
            let p = img.get_pixel_mut(x, y);
            p.0 = p.0.map(|c| (c as f32 * BOX_TRANSMISSION).round() as u8);
        }
    }
}

/// Fills `rect` (clipped to the image) with the colour `color(column within rect)`.
fn fill(img: &mut RgbImage, rect: Rect, color: impl Fn(u32) -> [u8; 3]) {
    let (w, h) = img.dimensions();
    for x in rect.x..(rect.x + rect.w).min(w) {
        let c = color(x - rect.x);
        for y in rect.y..(rect.y + rect.h).min(h) {
            img.get_pixel_mut(x, y).0 = c;
        }
    }
}

/// The width of `text` set at `size` pixels (pixels, rounded up).
fn text_width(font: &FontRef, size: f32, text: &str) -> u32 {
    let f = font.as_scaled(PxScale::from(size));
    let mut width = 0.0;
    let mut last = None;
    for c in text.chars() {
        let id = f.glyph_id(c);
        if let Some(prev) = last {
            width += f.kern(prev, id);
        }
        width += f.h_advance(id);
        last = Some(id);
    }
    width.ceil() as u32
}

/// Draws `text` in [`INK`] with its line's top-left corner at (x, y), clipped to the image.
fn draw_text(img: &mut RgbImage, font: &FontRef, size: f32, x: u32, y: u32, text: &str) {
    let f = font.as_scaled(PxScale::from(size));
    let baseline = y as f32 + f.ascent();
    let (w, h) = img.dimensions();
    let mut caret = x as f32;
    let mut last = None;
    for c in text.chars() {
        let id = f.glyph_id(c);
        if let Some(prev) = last {
            caret += f.kern(prev, id);
        }
        last = Some(id);
        let glyph = id.with_scale_and_position(size, point(caret, baseline));
        caret += f.h_advance(id);
        let Some(outline) = font.outline_glyph(glyph) else {
            continue;
        };
        let min = outline.px_bounds().min;
        outline.draw(|gx, gy, coverage| {
            let (px, py) = (min.x as i64 + gx as i64, min.y as i64 + gy as i64);
            if px < 0 || py < 0 || px >= w as i64 || py >= h as i64 {
                return;
            }
            let p = img.get_pixel_mut(px as u32, py as u32);
            let a = coverage.clamp(0.0, 1.0);
            for (c, ink) in p.0.iter_mut().zip(INK) {
                *c = (*c as f32 * (1.0 - a) + ink as f32 * a).round() as u8;
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::ColorScale;
    use crate::scene::Colormap;

    const GREY: [u8; 3] = [128, 128, 128];

    fn grey(w: u32, h: u32) -> RgbImage {
        RgbImage::from_pixel(w, h, image::Rgb(GREY))
    }

    fn inside(r: Rect, x: u32, y: u32) -> bool {
        x >= r.x && x < r.x + r.w && y >= r.y && y < r.y + r.h
    }

    #[test]
    fn the_bundled_font_parses() {
        assert!(FontRef::try_from_slice(eddies_io::FONT).is_ok());
    }

    #[test]
    fn time_is_drawn_in_the_top_left_corner_and_nothing_else_changes() {
        let mut img = grey(512, 384);
        let drawn = annotate(
            &mut img,
            &Annotation {
                time: 1.25,
                ..Default::default()
            },
        );
        assert_eq!(time_label(1.25), "t = 1.250 s");
        let t = drawn.time;
        assert!(t.x + t.w < 256 && t.y + t.h < 192, "in the corner: {t:?}");
        let mut white = 0;
        for (x, y, p) in img.enumerate_pixels() {
            if inside(t, x, y) {
                assert_ne!(p.0, GREY, "the box is shaded at ({x}, {y})");
                white += usize::from(p.0.iter().all(|&c| c > 200));
            } else {
                assert_eq!(p.0, GREY, "untouched outside the box at ({x}, {y})");
            }
        }
        assert!(white > 20, "the text is drawn: {white} bright pixels");
    }

    #[test]
    fn scale_bar_length_matches_its_label() {
        for (width, mpp) in [(512, 1.0 / 512.0), (600, 0.37), (777, 3.1e-4), (512, 2.0)] {
            let mut img = grey(width, 512);
            let drawn = annotate(
                &mut img,
                &Annotation {
                    time: 0.0,
                    metres_per_pixel: Some(mpp),
                    legend: None,
                },
            );
            let bar = drawn.scale_bar.expect("a scale bar");
            // Measure the white run along the bar's middle row.
            let y = bar.bar.y + bar.bar.h / 2;
            let run = (0..width).filter(|&x| img.get_pixel(x, y).0 == INK).count() as f64;
            let metres: f64 = bar.label.trim_end_matches(" m").parse().unwrap();
            assert_eq!(metres, bar.metres, "label {}", bar.label);
            assert!(
                (run - metres / mpp).abs() <= 1.0,
                "{} at {mpp} m/px: {run} px",
                bar.label
            );
            let fifth = width as f64 / 5.0;
            assert!(run > fifth / 2.6 && run < fifth * 2.6, "{run} px");
        }
        assert_eq!(round_length(0.19).1, "0.2 m");
        assert_eq!(round_length(0.09).1, "0.1 m");
        assert_eq!(round_length(3.0).1, "2 m");
        assert_eq!(round_length(4.0).1, "5 m");
        assert_eq!(round_length(0.0042).1, "0.005 m");
    }

    #[test]
    fn color_bar_ends_are_the_maps_ends() {
        for map in [Colormap::Viridis, Colormap::Inferno, Colormap::Diverging] {
            let legend = Legend {
                field: "speed".into(),
                unit: "m/s".into(),
                scale: ColorScale {
                    map,
                    lo: 0.0,
                    hi: 2.5,
                },
                values: LegendScale::Linear,
            };
            let mut img = grey(512, 512);
            let drawn = annotate(
                &mut img,
                &Annotation {
                    legend: Some(&legend),
                    ..Default::default()
                },
            );
            let bar = drawn.color_bar.expect("a colour bar");
            assert!(bar.x > 256 && bar.y < 256, "top right: {bar:?}");
            let y = bar.y + bar.h / 2;
            assert_eq!(img.get_pixel(bar.x, y).0, legend.scale.rgb_at(0.0));
            assert_eq!(
                img.get_pixel(bar.x + bar.w - 1, y).0,
                legend.scale.rgb_at(1.0)
            );
            assert_ne!(img.get_pixel(bar.x + bar.w, y).0, legend.scale.rgb_at(1.0));
        }
    }

    #[test]
    fn labels_read_as_numbers_and_units() {
        assert_eq!(format_value(0.0), "0");
        assert_eq!(format_value(2.5), "2.50");
        assert_eq!(format_value(-998.0), "-998");
        assert_eq!(format_value(0.012345), "0.0123");
        assert_eq!(format_value(1.5e-5), "1.50e-5");
        let legend = |field: &str, unit: &str, values| Legend {
            field: field.into(),
            unit: unit.into(),
            scale: ColorScale {
                map: Colormap::Inferno,
                lo: 0.0,
                hi: 3.0,
            },
            values,
        };
        assert_eq!(
            legend_title(&legend("pressure", "Pa", LegendScale::Linear)),
            "pressure (Pa)"
        );
        let tracers = legend("tracers", "1", LegendScale::Sqrt);
        assert_eq!(legend_title(&tracers), "tracers, √ scale");
        assert_eq!(tracers.range(), (0.0, 9.0), "square-rooted counts squared");
    }
}
