//! Rendered pictures of 3D scenes (`output.view = "render"`): the scene's simulation as a [`Stage`] for
//! [`eddies_render`], seen through `[output.camera]`.
//!
//! * Liquids (flip, reint): the surface the mesh export draws (flip's level set at 0, reint's density at
//!   `output.mesh_level` of the rest density), coloured by substance, or by `output.field` through the
//!   colour map.
//! * Vortex particles: tracers (or vortons) splatted with a smooth kernel into a volume twice as fine as the
//!   scene's grid or finer, drawn as a lit, scattering medium (dye, smoke); `vorticity_magnitude` and grid
//!   fields coloured through the colour map.
//! * Obstacles, at the frame's time (moving ones moved), as grey surfaces; a floor under the domain.

use std::sync::Arc;

use eddies::{FrameSource, Shape, Simulation};
use eddies_render::{Albedo, Camera, Grid, Layer, Renderer, Smoke, Stage, Surface};
use glam::DVec3;
use image::RgbImage;
use rayon::prelude::*;

use crate::render::{particle_points, unit_of, ColorScale, Legend, LegendScale, RenderError};
use crate::scene::{Colormap, Method, RendererChoice, Scene, TRACERS};
use crate::setup;

/// Finest side of the volume particles are splatted into (cells).
const SPLAT_SIDE: usize = 160;

/// Optical depth per cell of the splatted volume's densest parts (its 99th percentile): a dense blob
/// ten cells across is 95 % opaque.
const SPLAT_DEPTH_PER_CELL: f32 = 0.3;

/// Colour of dye and smoke from tracers (linear RGB): a warm white.
const DYE: [f32; 3] = [0.92, 0.86, 0.78];

/// A rendered frame.
pub struct Rendered {
    /// The picture, sRGB, top row first.
    pub image: RgbImage,
    /// Size of a pixel at the camera's target (m), for a scale bar.
    pub metres_per_pixel: f32,
    /// The colour map's legend, where colours stand for a field's values.
    pub legend: Option<Legend>,
}

/// Renders a scene's frames: its renderer, camera and obstacles, set up once per run.
pub struct Studio {
    renderer: Renderer,
    camera: Camera,
    pixels: [u32; 2],
    staging: Staging,
}

/// What turns a simulation's state into a [`Stage`]: the scene's obstacles with their motion. Apart from
/// the [`Studio`], so that the state can be staged on one thread and drawn on another.
#[derive(Clone, Debug)]
pub struct Staging {
    obstacles: Vec<eddies::flip::Obstacle<3>>,
}

impl Studio {
    /// The studio of a checked 3D scene.
    ///
    /// # Errors
    /// `output.renderer = "gpu"` without a GPU adapter.
    pub fn new(scene: &Scene) -> Result<Self, RenderError> {
        let renderer = match scene.output.renderer {
            RendererChoice::Cpu => Renderer::Cpu,
            RendererChoice::Gpu => Renderer::Gpu(Box::new(eddies_render::GpuRenderer::new(
                setup::gpu().map_err(|e| RenderError::Render(e.to_string()))?,
            ))),
            RendererChoice::Auto => match setup::gpu() {
                Ok(gpu) => {
                    let r = eddies_render::GpuRenderer::new(Arc::clone(&gpu));
                    if r.is_software() {
                        Renderer::Cpu
                    } else {
                        Renderer::Gpu(Box::new(r))
                    }
                }
                Err(_) => Renderer::Cpu,
            },
        };
        let cam = &scene.output.camera;
        let pixels = [cam.pixels[0] as u32, cam.pixels[1] as u32];
        let size = scene.size();
        let max: [f32; 3] = std::array::from_fn(|a| size[a] as f32);
        let up = up(scene);
        let framed = Camera::framing([0.0; 3], max, up, pixels[0], pixels[1]);
        let point = |v: &Vec<f64>| -> [f32; 3] { std::array::from_fn(|a| v[a] as f32) };
        let target = cam.target.as_ref().map_or(framed.target, point);
        let position = match &cam.position {
            Some(p) => point(p),
            // A target of the scene's own: the default view direction and distance, around it.
            None => std::array::from_fn(|a| framed.position[a] - framed.target[a] + target[a]),
        };
        let camera = Camera {
            position,
            target,
            fov_y: cam.fov as f32,
            up,
        };
        Ok(Self {
            renderer,
            camera,
            pixels,
            staging: Staging::new(scene),
        })
    }

    /// What renders: "CPU" or the GPU adapter.
    pub fn renderer_name(&self) -> String {
        self.renderer.name()
    }

    /// The camera.
    pub fn camera(&self) -> Camera {
        self.camera
    }

    /// Sets the camera (the viewer's orbit).
    pub fn set_camera(&mut self, camera: Camera) {
        self.camera = camera;
    }

    /// What stages the simulation's state for this studio.
    pub fn staging(&self) -> &Staging {
        &self.staging
    }

    /// Renders `sim` as `scene` asks, `width` × `height` pixels or the scene's `output.camera.pixels`.
    ///
    /// # Errors
    /// A field the simulation does not offer, or a renderer failure.
    pub fn render(
        &mut self,
        sim: &dyn Simulation,
        scene: &Scene,
        size: Option<[u32; 2]>,
    ) -> Result<Rendered, RenderError> {
        let (stage, legend) = self.staging.stage(sim, scene)?;
        self.draw(&stage, legend, size)
    }

    /// Draws a staged state, `width` × `height` pixels or the scene's `output.camera.pixels`.
    ///
    /// # Errors
    /// A renderer failure.
    pub fn draw(
        &mut self,
        stage: &Stage,
        legend: Option<Legend>,
        size: Option<[u32; 2]>,
    ) -> Result<Rendered, RenderError> {
        let [w, h] = size.unwrap_or(self.pixels);
        let view = self
            .camera
            .view(w, h)
            .map_err(|e| RenderError::Render(e.to_string()))?;
        let image = self
            .renderer
            .render(stage, &self.camera, w, h)
            .map_err(|e| RenderError::Render(e.to_string()))?;
        Ok(Rendered {
            image,
            metres_per_pixel: view.metres_per_pixel,
            legend,
        })
    }
}

impl Staging {
    /// The staging of a checked 3D scene.
    pub fn new(scene: &Scene) -> Self {
        Self {
            obstacles: setup::obstacles::<3>(scene),
        }
    }

    /// The simulation's state as a stage, and the legend of its colours.
    ///
    /// # Errors
    /// A field the simulation does not offer.
    pub fn stage(
        &self,
        sim: &dyn Simulation,
        scene: &Scene,
    ) -> Result<(Stage, Option<Legend>), RenderError> {
        let (mut stage, legend) = if sim.describe().picture == FrameSource::Particles {
            particle_stage(sim, scene)?
        } else {
            liquid_stage(sim, scene)?
        };
        stage.solid = self.solid(stage.grid, sim.time());
        Ok((stage, legend))
    }

    /// The obstacles at time `t` as a level set on `grid` (positive inside), or none.
    fn solid(&self, grid: Grid, t: f64) -> Option<Layer> {
        if self.obstacles.is_empty() {
            return None;
        }
        let shapes: Vec<Shape> = self.obstacles.iter().map(|o| o.shape_at(t)).collect();
        let values = cell_centres(grid)
            .map(|p| {
                let p = DVec3::new(p[0] as f64, p[1] as f64, p[2] as f64);
                -shapes
                    .iter()
                    .map(|s| s.sdf(p))
                    .fold(f64::INFINITY, f64::min) as f32
            })
            .collect();
        Some(Layer {
            values,
            level: 0.0,
            outside: -0.5 * grid.cell,
            width: grid.cell,
            distance: true,
        })
    }
}

/// The world's up: against gravity, or +y without it.
fn up(scene: &Scene) -> [f32; 3] {
    let g = scene.gravity();
    let len = g.iter().map(|v| v * v).sum::<f64>().sqrt();
    if g.len() == 3 && len > 0.0 {
        std::array::from_fn(|a| (-g[a] / len) as f32)
    } else {
        [0.0, 1.0, 0.0]
    }
}

/// Cell centres of `grid`, x fastest, in parallel.
fn cell_centres(grid: Grid) -> impl IndexedParallelIterator<Item = [f32; 3]> {
    let n = grid.n;
    (0..grid.cells()).into_par_iter().map(move |i| {
        let c = [i % n[0], (i / n[0]) % n[1], i / (n[0] * n[1])];
        std::array::from_fn(|a| grid.origin[a] + (c[a] as f32 + 0.5) * grid.cell)
    })
}

fn field(sim: &dyn Simulation, name: &str) -> Result<eddies::Field, RenderError> {
    sim.field(name).ok_or_else(|| RenderError::UnknownField {
        name: name.to_string(),
        offered: sim.field_names(),
    })
}

/// A scene's colour (three numbers, linear RGB).
fn rgb(c: &[f64]) -> [f32; 3] {
    std::array::from_fn(|k| c.get(k).copied().unwrap_or(0.0) as f32)
}

/// An sRGB colour as linear RGB.
fn linear(c: [u8; 3]) -> [f32; 3] {
    c.map(|v| {
        let s = v as f32 / 255.0;
        if s <= 0.04045 {
            s / 12.92
        } else {
            ((s + 0.055) / 1.055).powf(2.4)
        }
    })
}

/// `values` through `map` over their robust range (NaN: not part of the picture, given the low end's
/// colour), and the legend.
fn colour_mapped(
    values: &[f32],
    signed: bool,
    map: Colormap,
    name: &str,
) -> (Vec<[f32; 3]>, Legend) {
    let scale = ColorScale::fit(values, signed, map);
    let low = linear(scale.rgb_at(0.0));
    let colours = values
        .par_iter()
        .map(|&v| {
            if v.is_finite() {
                linear(scale.rgb(v))
            } else {
                low
            }
        })
        .collect();
    (
        colours,
        Legend {
            field: name.to_string(),
            unit: unit_of(name, 3),
            scale,
            values: LegendScale::Linear,
        },
    )
}

/// A grid method's liquid surface.
fn liquid_stage(
    sim: &dyn Simulation,
    scene: &Scene,
) -> Result<(Stage, Option<Legend>), RenderError> {
    let res = sim.resolution();
    let h = sim.cell_size() as f32;
    let o = sim.grid_origin();
    let grid = Grid {
        n: res,
        origin: [o[0] as f32, o[1] as f32, o[2] as f32],
        cell: h,
    };
    let substances = scene.substances();
    let (layer, inside): (Layer, Vec<bool>) = if scene.method == Method::Flip {
        // The level set, negative inside: flipped so that the liquid is where the value is high.
        let surface = field(sim, "surface")?;
        let values: Vec<f32> = surface.data.iter().map(|&d| -d).collect();
        let inside = values.iter().map(|&v| v > -h).collect();
        (
            Layer {
                values,
                level: 0.0,
                outside: -0.5 * h,
                width: h,
                distance: true,
            },
            inside,
        )
    } else {
        let density = field(sim, "density")?;
        let rest = substances[0].rest_density as f32;
        let level = scene.output.mesh_level as f32 * rest;
        let inside = density.data.iter().map(|&d| d > 0.5 * level).collect();
        (
            Layer {
                values: density.data,
                level,
                outside: 0.0,
                width: level,
                distance: false,
            },
            inside,
        )
    };
    let mut legend = None;
    let albedo = if scene.output.field != "density" {
        let f = field(sim, &scene.output.field)?;
        let values: Vec<f32> = f
            .data
            .iter()
            .zip(&inside)
            .map(|(&v, &i)| if i { v } else { f32::NAN })
            .collect();
        let (colours, l) = colour_mapped(
            &values,
            f.signed,
            scene.output.colormap,
            &scene.output.field,
        );
        legend = Some(l);
        Albedo::Cells(colours)
    } else if substances.len() > 1 {
        let fractions: Vec<eddies::Field> = (0..substances.len())
            .map(|k| field(sim, &format!("substance_{k}")))
            .collect::<Result<_, _>>()?;
        let colours = (0..grid.cells())
            .into_par_iter()
            .map(|i| {
                let mut c = [0.0f32; 3];
                let mut total = 0.0;
                for (f, s) in fractions.iter().zip(&substances) {
                    let w = f.data[i].max(0.0);
                    total += w;
                    for (acc, v) in c.iter_mut().zip(rgb(&s.color)) {
                        *acc += w * v;
                    }
                }
                if total > 0.0 {
                    c.map(|v| v / total)
                } else {
                    rgb(&substances[0].color)
                }
            })
            .collect();
        Albedo::Cells(colours)
    } else {
        Albedo::Uniform(rgb(&substances[0].color))
    };
    Ok((
        Stage {
            grid,
            up: up(scene),
            liquid: Some(Surface { layer, albedo }),
            solid: None,
            smoke: None,
            floor: true,
        },
        legend,
    ))
}

/// A particle method's volume: what `output.field` names, splatted.
fn particle_stage(
    sim: &dyn Simulation,
    scene: &Scene,
) -> Result<(Stage, Option<Legend>), RenderError> {
    let size = scene.size();
    let res = scene.resolution();
    let longest = res.iter().copied().max().unwrap_or(1);
    let fine = (SPLAT_SIDE / longest).max(2);
    let cell = (size[0] / (res[0] * fine) as f64) as f32;
    let grid = Grid {
        n: [res[0] * fine, res[1] * fine, res[2] * fine],
        origin: [0.0; 3],
        cell,
    };
    let name = scene.output.field.as_str();
    let (positions, weights, signed) = particle_points(sim, name)?;
    let amount = splat(&positions, &weights, grid, |w| w.abs());
    let mut legend = None;
    let albedo = if name == TRACERS {
        Albedo::Uniform(DYE)
    } else {
        // The colour of the weighted mean value in each cell: splat value × weight, divide by weight.
        let weighted = splat(&positions, &weights, grid, |w| w * w.abs());
        let mean: Vec<f32> = weighted
            .iter()
            .zip(&amount)
            .map(|(&s, &a)| if a > 0.0 { s / a } else { f32::NAN })
            .collect();
        let map = match scene.output.colormap {
            Colormap::Auto if !signed => Colormap::Inferno,
            m => m,
        };
        let (colours, l) = colour_mapped(&mean, signed, map, name);
        legend = Some(l);
        Albedo::Cells(colours)
    };
    let mut nonzero: Vec<f32> = amount.iter().copied().filter(|&a| a > 0.0).collect();
    let dense = if nonzero.is_empty() {
        1.0
    } else {
        let k = (nonzero.len() - 1) * 99 / 100;
        *nonzero.select_nth_unstable_by(k, f32::total_cmp).1
    };
    let per_metre = SPLAT_DEPTH_PER_CELL / (cell * dense);
    let extinction = amount.iter().map(|&a| a * per_metre).collect();
    Ok((
        Stage {
            grid,
            up: up(scene),
            liquid: None,
            solid: None,
            smoke: Some(Smoke { extinction, albedo }),
            floor: true,
        },
        legend,
    ))
}

/// Sums `amount(weight)` of each particle into `grid` with the quadratic B-spline (support three cells per
/// axis): smooth, and no particle shows as a single voxel. Serial, in particle order: deterministic.
fn splat(positions: &[f32], weights: &[f32], grid: Grid, amount: impl Fn(f32) -> f32) -> Vec<f32> {
    let n = grid.n;
    let mut out = vec![0.0f32; grid.cells()];
    for (p, &w) in positions.chunks_exact(3).zip(weights) {
        let a = amount(w);
        if a == 0.0 || !a.is_finite() {
            continue;
        }
        let g: [f32; 3] = std::array::from_fn(|k| (p[k] - grid.origin[k]) / grid.cell - 0.5);
        let c = g.map(|v| v.round());
        let mut kernel = [[0.0f32; 3]; 3];
        for k in 0..3 {
            let x = g[k] - c[k];
            kernel[k] = [
                0.5 * (0.5 - x).powi(2),
                0.75 - x * x,
                0.5 * (0.5 + x).powi(2),
            ];
        }
        for (dz, wz) in kernel[2].iter().enumerate() {
            let z = c[2] as i64 + dz as i64 - 1;
            if z < 0 || z >= n[2] as i64 {
                continue;
            }
            for (dy, wy) in kernel[1].iter().enumerate() {
                let y = c[1] as i64 + dy as i64 - 1;
                if y < 0 || y >= n[1] as i64 {
                    continue;
                }
                let row = (z as usize * n[1] + y as usize) * n[0];
                for (dx, wx) in kernel[0].iter().enumerate() {
                    let x = c[0] as i64 + dx as i64 - 1;
                    if x < 0 || x >= n[0] as i64 {
                        continue;
                    }
                    out[row + x as usize] += a * wx * wy * wz;
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splatting_keeps_the_amount_and_spreads_it() {
        let grid = Grid {
            n: [8, 8, 8],
            origin: [0.0; 3],
            cell: 0.125,
        };
        let p = [0.51, 0.47, 0.5, 0.2, 0.3, 0.61];
        let out = splat(&p, &[2.0, 1.0], grid, |w| w);
        let total: f32 = out.iter().sum();
        assert!(
            (total - 3.0).abs() < 1e-5,
            "the kernel sums to one: {total}"
        );
        let touched = out.iter().filter(|&&v| v > 0.0).count();
        assert!(touched >= 27, "each particle covers 3³ cells, {touched}");
        assert!(out.iter().all(|&v| v <= 2.0 * 0.75f32.powi(3) + 1e-6));
    }
}
