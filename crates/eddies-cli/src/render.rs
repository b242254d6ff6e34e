//! Frames: a grid field of a simulation turned into an RGB image.
//!
//! Two kinds of picture:
//! * `density` with substances: each cell is the mix of its substances' colours (weighted by mass fraction)
//!   laid over a dark background with opacity ρ/ρ₀ (ρ₀ the rest density of the cell's mix), so vacuum is dark,
//!   fluid is coloured by what it is made of, and mixing shows. 3D projections treat ρ/ρ₀ as optical depth
//!   along z.
//! * any other field: a colour map (viridis, inferno, or a blue–white–red diverging map centred on zero for
//!   signed fields) over the field's robust range (0.5th to 99.5th percentile, so that a few extreme cells do
//!   not wash out the picture), chosen per frame. Cells without fluid show the background; 3D projections
//!   show the density-weighted mean along z.
//!
//! Obstacles of the scene are drawn grey behind the fluid (see [`Backdrop`]). A colour-mapped picture carries
//! its [`Legend`]: what its colours mean, for the colour bar [`crate::annotate`] draws.
//!
//! Images have y up: row 0 is the top of the domain. Small grids are enlarged by an integer factor (nearest
//! neighbour) so the longer side is at least [`MIN_IMAGE_SIDE`] pixels.

use eddies::{Field, FrameSource, Shape, Simulation};
use glam::DVec3;
use image::codecs::png::{CompressionType, FilterType, PngEncoder};
use image::{ImageEncoder, RgbImage};
use rayon::prelude::*;

use crate::scene::{Colormap, Scene, View, TRACERS};

/// Smallest length of the longer image side that small grids are enlarged to (pixels).
pub const MIN_IMAGE_SIDE: usize = 512;

/// Background of the density view (linear RGB): a dark blue-grey, so that fluid of any colour stands out.
pub const BACKGROUND: [f32; 3] = [0.004, 0.005, 0.009];

/// Colour of obstacles (linear RGB): a neutral mid grey.
pub const SOLID: [f32; 3] = [0.16, 0.16, 0.17];

/// Optical depth per cell of fluid at rest density, as a fraction of the domain depth: a column of fluid one
/// eighth of the depth deep has optical depth 3 (95 % opaque).
const DEPTH_PER_COLUMN: f32 = 24.0;

/// Why a frame could not be made.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// A grid method's frame needs a field (the scene's `output.field`, `density`, `substance_K`) that the
    /// simulation does not offer.
    #[error("the simulation offers no field \"{name}\"; it offers {}", .offered.join(", "))]
    UnknownField {
        /// The field asked for.
        name: String,
        /// The fields the simulation offers.
        offered: Vec<&'static str>,
    },
    /// A particle method's frame asks for a grid field that the simulation does not offer at this step.
    #[error("the simulation offers no field \"{name}\" now; it offers {}", .offered.join(", "))]
    FieldNotNow {
        /// The field asked for.
        name: String,
        /// The fields the simulation offers now.
        offered: Vec<&'static str>,
    },
    /// The PNG encoder failed.
    #[error("PNG encoding failed: {0}")]
    Png(#[source] image::ImageError),
    /// The 3D renderer failed: no GPU for `output.renderer = "gpu"`, or a GPU error.
    #[error("rendering failed: {0}")]
    Render(String),
}

/// A substance as frames show it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Look {
    /// Rest density (kg/m^D).
    pub rest_density: f32,
    /// Linear RGB colour.
    pub color: [f32; 3],
}

/// A picture in grid order: `pixels[y * nx + x]` with y = 0 the bottom row of the domain.
#[derive(Clone, Debug, PartialEq)]
pub struct Picture {
    /// Columns.
    pub nx: usize,
    /// Rows.
    pub ny: usize,
    /// sRGB pixels, bottom row first.
    pub pixels: Vec<[u8; 3]>,
    /// What the colours mean, for a colour-mapped picture; `None` for the density view's substance colours.
    pub legend: Option<Legend>,
}

/// A colour map stretched over a range of values: what a colour-mapped picture used.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ColorScale {
    /// The map, never [`Colormap::Auto`].
    pub map: Colormap,
    /// The value shown with the map's first colour.
    pub lo: f32,
    /// The value shown with the map's last colour.
    pub hi: f32,
}

impl ColorScale {
    /// The scale of `values`: `map` (its automatic choice resolved by `signed`) over their
    /// [`robust_range`].
    pub fn fit(values: &[f32], signed: bool, map: Colormap) -> Self {
        let (lo, hi) = robust_range(values, signed);
        let map = match map {
            Colormap::Auto if signed => Colormap::Diverging,
            Colormap::Auto => Colormap::Viridis,
            m => m,
        };
        Self { map, lo, hi }
    }

    /// The map's colour at `t` (0 its first colour, 1 its last), sRGB.
    pub fn rgb_at(&self, t: f64) -> [u8; 3] {
        let t = t.clamp(0.0, 1.0);
        let c = match self.map {
            // RED_BLUE runs red → white → blue; flip it so that positive values are red.
            Colormap::Diverging => colorous::RED_BLUE.eval_continuous(1.0 - t),
            Colormap::Inferno => colorous::INFERNO.eval_continuous(t),
            Colormap::Viridis | Colormap::Auto => colorous::VIRIDIS.eval_continuous(t),
        };
        [c.r, c.g, c.b]
    }

    /// The colour of `value`, clamped to the range.
    pub fn rgb(&self, value: f32) -> [u8; 3] {
        self.rgb_at(((value - self.lo) / (self.hi - self.lo)) as f64)
    }
}

/// How the values of a picture's pixels relate to the quantity its legend names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LegendScale {
    /// The colours are the quantity's values.
    Linear,
    /// The colours are the square roots of the quantity (particle counts): the range's ends are squared
    /// for the colour bar's labels.
    Sqrt,
}

/// What a colour-mapped picture's colours mean: the quantity, its unit, and the colour scale used.
#[derive(Clone, Debug, PartialEq)]
pub struct Legend {
    /// The quantity's name: the field's, or what a particle view sums per pixel (`tracers`,
    /// `strength |ω|V`, `∫ FIELD dz`).
    pub field: String,
    /// Its SI unit ([`eddies::units`]), "1" when it has none.
    pub unit: String,
    /// The colour map and the range of pixel values it spans.
    pub scale: ColorScale,
    /// How pixel values relate to the quantity.
    pub values: LegendScale,
}

impl Legend {
    /// The quantity's values at the colour map's ends.
    pub fn range(&self) -> (f64, f64) {
        let (lo, hi) = (self.scale.lo as f64, self.scale.hi as f64);
        match self.values {
            LegendScale::Linear => (lo, hi),
            LegendScale::Sqrt => (lo * lo.abs(), hi * hi.abs()),
        }
    }
}

/// The unit of a field's line integral along the depth: the field's unit times metres.
fn times_metre(unit: &str) -> String {
    match unit {
        "1" => "m".to_string(),
        "1/s" => "m/s".to_string(),
        "kg/m³" => "kg/m²".to_string(),
        "m/s" => "m²/s".to_string(),
        u => format!("{u}·m"),
    }
}

/// The unit of `field` in a `dim`-dimensional scene, "1" for a name [`eddies::units`] does not know.
pub(crate) fn unit_of(field: &str, dim: usize) -> String {
    eddies::units::unit(field, dim)
        .unwrap_or(eddies::units::DIMENSIONLESS)
        .to_string()
}

/// What lies behind the fluid in every pixel: the background, and the scene's obstacles in grey. Obstacles
/// are static, so this is computed once per run from the scene's shapes.
#[derive(Clone, Debug, PartialEq)]
pub struct Backdrop {
    /// Linear RGB per pixel, grid order (bottom row first).
    pub base: Vec<[f32; 3]>,
    /// Obstacle opacity per pixel, 0–1.
    pub solid: Vec<f32>,
}

impl Backdrop {
    /// The backdrop of an `nx` × `ny` picture with nothing in it.
    pub fn empty(pixels: usize) -> Self {
        Self {
            base: vec![BACKGROUND; pixels],
            solid: vec![0.0; pixels],
        }
    }

    /// The backdrop of a checked scene: obstacle cells in 2D and 3D slices; in 3D projections, opacity
    /// growing with the number of obstacle cells along the column.
    pub fn new(scene: &Scene) -> Self {
        let res = scene.resolution();
        let (nx, ny) = (res[0], res[1]);
        let nz = if scene.dim() == 3 { res[2] } else { 1 };
        let h = scene.cell_size();
        let dim = scene.dim();
        let shapes: Vec<Shape> = scene
            .obstacle
            .iter()
            .filter_map(|o| o.shape.as_ref())
            .map(|s| s.to_shape(dim))
            .collect();
        if shapes.is_empty() {
            return Self::empty(nx * ny);
        }
        let solid_at = |x: usize, y: usize, z: Option<usize>| {
            let p = DVec3::new(
                (x as f64 + 0.5) * h,
                (y as f64 + 0.5) * h,
                z.map_or(0.0, |z| (z as f64 + 0.5) * h),
            );
            shapes.iter().any(|s| s.contains(p))
        };
        let project = dim == 3 && scene.output.view == View::Projection;
        let per_cell = DEPTH_PER_COLUMN / nz as f32;
        let solid: Vec<f32> = (0..nx * ny)
            .into_par_iter()
            .map(|i| {
                let (x, y) = (i % nx, i / nx);
                if project {
                    let count = (0..nz).filter(|&z| solid_at(x, y, Some(z))).count() as f32;
                    0.85 * (1.0 - (-per_cell * count).exp())
                } else {
                    let z = (dim == 3).then_some(nz / 2);
                    if solid_at(x, y, z) {
                        1.0
                    } else {
                        0.0
                    }
                }
            })
            .collect();
        let base = solid
            .iter()
            .map(|&a| std::array::from_fn(|c| BACKGROUND[c] * (1.0 - a) + SOLID[c] * a))
            .collect();
        Self { base, solid }
    }
}

/// Renders the frame the scene's `[output]` asks for, over `backdrop`.
pub fn render(
    sim: &dyn Simulation,
    scene: &Scene,
    backdrop: &Backdrop,
) -> Result<Picture, RenderError> {
    if sim.describe().picture == FrameSource::Particles {
        return render_particles(sim, scene);
    }
    let [nx, ny, nz] = sim.resolution();
    let dim = sim.dim();
    let get = |name: &str| {
        sim.field(name).ok_or_else(|| RenderError::UnknownField {
            name: name.to_string(),
            offered: sim.field_names(),
        })
    };
    let slice = |f: &Field| -> Vec<f32> {
        if dim == 3 {
            let z = nz / 2;
            f.data[z * nx * ny..(z + 1) * nx * ny].to_vec()
        } else {
            f.data.clone()
        }
    };
    let project = dim == 3 && scene.output.view == View::Projection;

    if scene.output.field == "density" {
        let density = get("density")?;
        let looks: Vec<Look> = scene
            .substances()
            .iter()
            .map(|s| Look {
                rest_density: s.rest_density as f32,
                color: [s.color[0] as f32, s.color[1] as f32, s.color[2] as f32],
            })
            .collect();
        // Without per-substance fields (one substance), everything is substance 0.
        let fractions: Vec<Field> = if looks.len() > 1 {
            (0..looks.len())
                .map(|k| get(&format!("substance_{k}")))
                .collect::<Result<_, _>>()?
        } else {
            Vec::new()
        };
        let pixels = if project {
            let frac: Vec<&[f32]> = fractions.iter().map(|f| f.data.as_slice()).collect();
            project_substances(&density.data, &frac, &looks, [nx, ny, nz], &backdrop.base)
        } else {
            let frac: Vec<Vec<f32>> = fractions.iter().map(slice).collect();
            let frac: Vec<&[f32]> = frac.iter().map(Vec::as_slice).collect();
            shade_substances(&slice(&density), &frac, &looks, &backdrop.base)
        };
        return Ok(Picture {
            nx,
            ny,
            pixels,
            legend: None,
        });
    }

    let field = get(&scene.output.field)?;
    let density = get("density")?;
    let values = if project {
        density_weighted_mean(&field.data, &density.data, [nx, ny, nz])
    } else {
        // Vacuum has no value worth a colour: show it as background, so the fluid's outline stays visible.
        let mut values = slice(&field);
        for (v, d) in values.iter_mut().zip(slice(&density)) {
            if d.is_nan() || d <= 0.0 {
                *v = f32::NAN;
            }
        }
        values
    };
    let scale = ColorScale::fit(&values, field.signed, scene.output.colormap);
    let mut pixels = colorize(&values, &scale);
    let solid = encode(SOLID);
    for (p, &a) in pixels.iter_mut().zip(&backdrop.solid) {
        if a > 0.0 {
            *p = std::array::from_fn(|c| {
                (p[c] as f32 * (1.0 - a) + solid[c] as f32 * a).round() as u8
            });
        }
    }
    let legend = Legend {
        field: scene.output.field.clone(),
        unit: unit_of(&scene.output.field, dim),
        scale,
        values: LegendScale::Linear,
    };
    Ok(Picture {
        nx,
        ny,
        pixels,
        legend: Some(legend),
    })
}

/// A particle method's frame: particles splatted (bilinear weights) into the pixels of the scene's domain seen
/// along −z and summed through the depth. Field `tracers` counts tracers (or vortons where there are no
/// tracers), `vorticity_magnitude` sums the vortons' |ω| V; any other name is a grid field of the method,
/// whose grid points are splatted the same way with weight value × cell size (the field's integral along the
/// line of sight). The sums go through the colour map over their robust range (square-rooted for the
/// unsigned particle counts), and empty pixels show the background. The picture has the domain's x–y aspect,
/// at least [`MIN_IMAGE_SIDE`] pixels along its longer side.
///
/// # Errors
/// A grid field the simulation does not offer.
pub fn render_particles(sim: &dyn Simulation, scene: &Scene) -> Result<Picture, RenderError> {
    let res = scene.resolution();
    let size = scene.size();
    let panels = scene.output.panels.len().max(1);
    let scale = MIN_IMAGE_SIDE.div_ceil(res[0].max(res[1])).max(1);
    let (nx, ny) = (res[0] * scale * panels, res[1] * scale);
    let h = size[0] / (res[0] * scale) as f64;
    let field = scene.output.field.as_str();
    let (positions, values, signed) = particle_points(sim, field)?;
    let particles = matches!(field, "vorticity_magnitude" | TRACERS);
    // A grid field's points stand for their cells: weighted by the cell size, the sums are its integral
    // along the line of sight.
    let dx = sim.cell_size() as f32;
    let weights: Vec<f32> = if particles {
        values
    } else {
        values.iter().map(|v| v * dx).collect()
    };
    let mut sum = vec![0.0f32; nx * ny];
    let mut hit = vec![false; nx * ny];
    for (p, &w) in positions.chunks_exact(3).zip(&weights) {
        let sx = p[0] as f64 / h - 0.5;
        let sy = p[1] as f64 / h - 0.5;
        if !(sx > -1.0 && sy > -1.0 && sx < nx as f64 && sy < ny as f64) {
            continue;
        }
        let (x0, y0) = (sx.floor(), sy.floor());
        let (fx, fy) = ((sx - x0) as f32, (sy - y0) as f32);
        for (dx, wx) in [(0, 1.0 - fx), (1, fx)] {
            for (dy, wy) in [(0, 1.0 - fy), (1, fy)] {
                let (x, y) = (x0 as i64 + dx, y0 as i64 + dy);
                if x >= 0 && y >= 0 && (x as usize) < nx && (y as usize) < ny {
                    let k = y as usize * nx + x as usize;
                    sum[k] += w * wx * wy;
                    hit[k] = true;
                }
            }
        }
    }
    let values: Vec<f32> = sum
        .iter()
        .zip(&hit)
        .map(|(&v, &hit)| match (particles, hit) {
            (true, _) if v > 0.0 => v.sqrt(),
            (false, true) => v,
            _ => f32::NAN,
        })
        .collect();
    let map = match scene.output.colormap {
        Colormap::Auto if !signed => Colormap::Inferno,
        m => m,
    };
    let scale = ColorScale::fit(&values, signed, map);
    // What a pixel sums: tracers (a count), vortons' strengths, or a grid field's integral along the depth.
    let (quantity, unit) = match field {
        TRACERS => (field.to_string(), unit_of(TRACERS, 3)),
        "vorticity_magnitude" => ("strength |ω|V".to_string(), unit_of("strength", 3)),
        name => (format!("∫ {name} dz"), times_metre(&unit_of(name, 3))),
    };
    Ok(Picture {
        nx,
        ny,
        pixels: colorize(&values, &scale),
        legend: Some(Legend {
            field: quantity,
            unit,
            scale,
            values: if particles {
                LegendScale::Sqrt
            } else {
                LegendScale::Linear
            },
        }),
    })
}

/// Linear to sRGB-encoded 8 bit: the renderer's encoding.
pub use eddies_render::srgb8 as to_srgb8;

/// What a particle method's picture is made of: points (x, y, z each), a value per point, and whether the
/// values have a sign. `tracers`: the tracers (the vortons where there are none), each 1;
/// `vorticity_magnitude`: the vortons with their strength |ω| V; any other name: the grid field's cell
/// centres with its values.
///
/// # Errors
/// A grid field the simulation does not offer now.
pub fn particle_points(
    sim: &dyn Simulation,
    field: &str,
) -> Result<(Vec<f32>, Vec<f32>, bool), RenderError> {
    Ok(match field {
        "vorticity_magnitude" => {
            let p = sim.particle_positions();
            let w = sim
                .particle_values("strength")
                .unwrap_or_else(|| vec![1.0; p.len() / 3]);
            (p, w, false)
        }
        TRACERS => {
            let t = sim.tracer_positions();
            let p = if t.is_empty() {
                sim.particle_positions()
            } else {
                t
            };
            let w = vec![1.0; p.len() / 3];
            (p, w, false)
        }
        name => {
            let f = sim.field(name).ok_or_else(|| RenderError::FieldNotNow {
                name: name.to_string(),
                offered: sim.field_names(),
            })?;
            let (o, dx) = (sim.grid_origin(), sim.cell_size());
            let (gx, gy) = (f.shape[2], f.shape[1]);
            let mut p = Vec::with_capacity(f.data.len() * 3);
            for idx in 0..f.data.len() {
                let c = [idx % gx, (idx / gx) % gy, idx / (gx * gy)];
                p.extend((0..3).map(|a| (o[a] + (c[a] as f64 + 0.5) * dx) as f32));
            }
            (p, f.data, f.signed)
        }
    })
}

fn encode(c: [f32; 3]) -> [u8; 3] {
    c.map(to_srgb8)
}

/// Colour and rest density of a cell's substance mix (fractions may not sum to exactly one).
fn mix(fractions: &[&[f32]], i: usize, looks: &[Look]) -> ([f32; 3], f32) {
    if fractions.is_empty() {
        return (looks[0].color, looks[0].rest_density);
    }
    let mut color = [0.0; 3];
    let mut rest = 0.0;
    let mut total = 0.0;
    for (f, look) in fractions.iter().zip(looks) {
        let w = f[i].max(0.0);
        total += w;
        rest += w * look.rest_density;
        for (acc, c) in color.iter_mut().zip(look.color) {
            *acc += w * c;
        }
    }
    if total <= 0.0 || !total.is_finite() {
        return (looks[0].color, looks[0].rest_density);
    }
    (color.map(|c| c / total), rest / total)
}

/// The density view of one layer of cells: substance colours over `base` (linear RGB per cell) with
/// opacity ρ/ρ₀.
pub fn shade_substances(
    density: &[f32],
    fractions: &[&[f32]],
    looks: &[Look],
    base: &[[f32; 3]],
) -> Vec<[u8; 3]> {
    (0..density.len())
        .map(|i| {
            let (color, rest) = mix(fractions, i, looks);
            let a = if density[i].is_finite() {
                (density[i] / rest).clamp(0.0, 1.0)
            } else {
                0.0
            };
            encode(std::array::from_fn(|c| {
                base[i][c] * (1.0 - a) + color[c] * a
            }))
        })
        .collect()
}

/// The density view of a 3D grid seen along −z over `base` (linear RGB per column): opacity from the
/// column's optical depth, colour the density-weighted mix of the column.
pub fn project_substances(
    density: &[f32],
    fractions: &[&[f32]],
    looks: &[Look],
    n: [usize; 3],
    base: &[[f32; 3]],
) -> Vec<[u8; 3]> {
    let [nx, ny, nz] = n;
    let per_cell = DEPTH_PER_COLUMN / nz as f32;
    (0..nx * ny)
        .map(|col| {
            let mut depth = 0.0;
            let mut color = [0.0f32; 3];
            for z in 0..nz {
                let i = z * nx * ny + col;
                let (c, rest) = mix(fractions, i, looks);
                let s = if density[i].is_finite() {
                    (density[i] / rest).max(0.0)
                } else {
                    0.0
                };
                depth += s;
                for (acc, ck) in color.iter_mut().zip(c) {
                    *acc += s * ck;
                }
            }
            if depth <= 0.0 {
                return encode(base[col]);
            }
            let a = 1.0 - (-per_cell * depth).exp();
            encode(std::array::from_fn(|k| {
                base[col][k] * (1.0 - a) + color[k] / depth * a
            }))
        })
        .collect()
}

/// Per column of a 3D grid, the mean of `values` along z weighted by `density` (NaN for an empty column).
pub fn density_weighted_mean(values: &[f32], density: &[f32], n: [usize; 3]) -> Vec<f32> {
    let [nx, ny, nz] = n;
    (0..nx * ny)
        .map(|col| {
            let (mut sum, mut weight) = (0.0f64, 0.0f64);
            for z in 0..nz {
                let i = z * nx * ny + col;
                let w = density[i].max(0.0) as f64;
                if w > 0.0 && values[i].is_finite() {
                    sum += w * values[i] as f64;
                    weight += w;
                }
            }
            if weight > 0.0 {
                (sum / weight) as f32
            } else {
                f32::NAN
            }
        })
        .collect()
}

/// The `q`-quantile (0–1) of the finite values, by selection.
fn quantile(values: &mut [f32], q: f64) -> f32 {
    let k = ((values.len() - 1) as f64 * q).round() as usize;
    *values.select_nth_unstable_by(k, f32::total_cmp).1
}

/// Range of the colour map: 0.5th to 99.5th percentile (magnitudes), or symmetric about zero out to the
/// 99.5th percentile of |v| (signed fields). Never empty.
pub fn robust_range(values: &[f32], signed: bool) -> (f32, f32) {
    let mut finite: Vec<f32> = values.iter().copied().filter(|v| v.is_finite()).collect();
    if finite.is_empty() {
        return if signed { (-1.0, 1.0) } else { (0.0, 1.0) };
    }
    if signed {
        finite.iter_mut().for_each(|v| *v = v.abs());
        let m = quantile(&mut finite, 0.995);
        let m = if m > 0.0 { m } else { 1.0 };
        (-m, m)
    } else {
        let lo = quantile(&mut finite, 0.005);
        let hi = quantile(&mut finite, 0.995);
        if hi > lo {
            (lo, hi)
        } else {
            (lo, lo + lo.abs().max(1.0))
        }
    }
}

/// Colours `values` with `scale`; NaN (no fluid) is the background colour.
pub fn colorize(values: &[f32], scale: &ColorScale) -> Vec<[u8; 3]> {
    let bg = encode(BACKGROUND);
    values
        .iter()
        .map(|&v| if v.is_finite() { scale.rgb(v) } else { bg })
        .collect()
}

impl Picture {
    /// The image with y up (row 0 the top of the domain), enlarged so its longer side is at least
    /// [`MIN_IMAGE_SIDE`] pixels.
    pub fn to_image(&self) -> RgbImage {
        let scale = (MIN_IMAGE_SIDE / self.nx.max(self.ny).max(1)).max(1);
        let (w, h) = (self.nx * scale, self.ny * scale);
        RgbImage::from_fn(w as u32, h as u32, |px, py| {
            let x = px as usize / scale;
            let y = self.ny - 1 - py as usize / scale;
            image::Rgb(self.pixels[y * self.nx + x])
        })
    }

    /// The image as PNG bytes.
    pub fn to_png(&self) -> Result<Vec<u8>, RenderError> {
        png_bytes(&self.to_image())
    }
}

/// `img` as PNG bytes (fast compression: frames are many).
pub fn png_bytes(img: &RgbImage) -> Result<Vec<u8>, RenderError> {
    let mut out = Vec::new();
    PngEncoder::new_with_quality(&mut out, CompressionType::Fast, FilterType::Adaptive)
        .write_image(
            img.as_raw(),
            img.width(),
            img.height(),
            image::ExtendedColorType::Rgb8,
        )
        .map_err(RenderError::Png)?;
    Ok(out)
}

/// The length of one pixel of a frame `width` pixels wide of `scene` (m): the domain's width over the
/// picture's width (panels side by side each show the whole domain).
pub fn metres_per_pixel(scene: &Scene, width: u32) -> f64 {
    let panels = scene.output.panels.len().max(1);
    scene.size()[0] * panels as f64 / width as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    const RED: Look = Look {
        rest_density: 1000.0,
        color: [1.0, 0.0, 0.0],
    };
    const BLUE: Look = Look {
        rest_density: 500.0,
        color: [0.0, 0.0, 1.0],
    };

    #[test]
    fn density_view_is_dark_in_vacuum_and_mixes_colours() {
        let density = [0.0, 1000.0, 500.0, 750.0];
        let red = [0.0, 1.0, 0.0, 0.5];
        let blue = [0.0, 0.0, 1.0, 0.5];
        let px = shade_substances(&density, &[&red, &blue], &[RED, BLUE], &[BACKGROUND; 4]);
        assert_eq!(px[0], encode(BACKGROUND), "vacuum shows the background");
        assert_eq!(
            px[1],
            [255, 0, 0],
            "pure substance at rest density is its colour"
        );
        assert_eq!(px[2], [0, 0, 255]);
        assert_eq!(
            px[3],
            encode([0.5, 0.0, 0.5]),
            "an even mix at its rest density is the mean colour"
        );
        // Half rest density: halfway between background and colour.
        let half = shade_substances(&[500.0], &[], &[RED], &[BACKGROUND]);
        assert_eq!(
            half[0],
            encode([
                0.5 + BACKGROUND[0] * 0.5,
                BACKGROUND[1] * 0.5,
                BACKGROUND[2] * 0.5
            ])
        );
    }

    #[test]
    fn projection_is_opaque_for_deep_columns_and_dark_for_empty_ones() {
        let n = [2, 1, 32];
        let mut density = vec![0.0; 64];
        for z in 0..32 {
            density[z * 2] = 1000.0;
        }
        let px = project_substances(&density, &[], &[RED], n, &[BACKGROUND; 2]);
        assert_eq!(px[1], encode(BACKGROUND));
        assert!(px[0][0] > 250 && px[0][1] < 5);
    }

    #[test]
    fn backdrop_shows_obstacles() {
        let mut scene: Scene = toml::from_str(
            "[domain]\nresolution = [8, 8]\n[[obstacle]]\nshape = { box = { min = [0.0, 0.0], max = [0.5, 0.25] } }",
        )
        .unwrap();
        scene.resolve().unwrap();
        let b = Backdrop::new(&scene);
        assert_eq!(b.solid[0], 1.0, "bottom-left cell is solid");
        assert_eq!(b.solid[8 * 2], 0.0, "third row is free");
        assert_eq!(b.base[0], SOLID);
        assert_eq!(b.base[63], BACKGROUND);
    }

    #[test]
    fn diverging_map_is_centred_on_zero() {
        let values = [-2.0, 0.0, 2.0];
        let px = colorize(&values, &ColorScale::fit(&values, true, Colormap::Auto));
        let [r0, g0, b0] = px[1];
        assert!(
            r0 > 230 && g0 > 230 && b0 > 230,
            "zero is near white: {:?}",
            px[1]
        );
        assert!(px[2][0] > px[2][2], "positive is red: {:?}", px[2]);
        assert!(px[0][2] > px[0][0], "negative is blue: {:?}", px[0]);
    }

    #[test]
    fn viridis_runs_from_purple_to_yellow_and_nan_is_background() {
        let values = [0.0, 1.0, f32::NAN];
        let scale = ColorScale::fit(&values, false, Colormap::Viridis);
        assert_eq!((scale.lo, scale.hi), (0.0, 1.0));
        let px = colorize(&values, &scale);
        let purple = colorous::VIRIDIS.eval_continuous(0.0);
        let yellow = colorous::VIRIDIS.eval_continuous(1.0);
        assert_eq!(px[0], [purple.r, purple.g, purple.b]);
        assert_eq!(px[1], [yellow.r, yellow.g, yellow.b]);
        assert_eq!(px[2], encode(BACKGROUND));
    }

    #[test]
    fn robust_range_ignores_outliers() {
        let mut v: Vec<f32> = (0..1000).map(|i| i as f32 / 1000.0).collect();
        v[500] = 1e9;
        let (lo, hi) = robust_range(&v, false);
        assert!(lo < 0.01 && hi < 1.0, "({lo}, {hi})");
        assert_eq!(robust_range(&[3.0, 3.0], false), (3.0, 6.0));
        assert_eq!(robust_range(&[0.0; 4], true), (-1.0, 1.0));
    }

    #[test]
    fn image_has_y_up_and_is_enlarged() {
        let pic = Picture {
            nx: 2,
            ny: 2,
            pixels: vec![[1, 1, 1], [2, 2, 2], [3, 3, 3], [4, 4, 4]],
            legend: None,
        };
        let img = pic.to_image();
        assert_eq!(img.width(), 512);
        assert_eq!(
            img.get_pixel(0, 0).0,
            [3, 3, 3],
            "top-left pixel is the top row of the domain"
        );
        assert_eq!(img.get_pixel(511, 511).0, [2, 2, 2]);
        let png = pic.to_png().unwrap();
        assert_eq!(&png[1..4], b"PNG");
    }

    #[test]
    fn srgb_encoding_endpoints() {
        assert_eq!(to_srgb8(0.0), 0);
        assert_eq!(to_srgb8(1.0), 255);
        assert_eq!(to_srgb8(0.5), 188);
    }
}
